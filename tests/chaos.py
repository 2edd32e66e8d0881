"""Chaos: learners take the whole course while the bot is killed with ``kill -9`` and the Bot API fails at random.

Shared by tests/test_chaos.py (bounded, in ``make test``) and bench/chaos.py (the long form, printing JSON).

The parts are real: the bot is ``python -m bot run`` (tests/botprocess.py), a runner of its own runs the
learners' code in the sandbox (it outlives the bot's deaths, as it does in compose), the progress database is a
SQLite file, and the stand-in answers with 429s and 5xx on a share of calls (seeded). A supervisor kills the bot
at random moments (seeded) and starts it again, as systemd or Docker would.

The learners behave like learners: they read what the chat shows and tap what it offers. They know the course
(the answers to the Quick Check, the exercise's solution) but nothing of the bot's insides. When what they
expect does not come, they do what a person would: tap again, then send /lessons and open their lesson anew;
code that gets no verdict is sent again.

Afterwards the run is checked: every learner finished; every quiz answer a learner gave is recorded once, with
the option they chose, and nothing else is; every update the stand-in delivered is in the inbox, handled; the
database passes ``PRAGMA integrity_check`` after every kill and at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import sqlite3
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.course.model import Course, Drill, Lesson, ParsonsDrill
from tests.botprocess import BotProcess, RunnerProcess, bot_env
from tests.conftest import course_content
from tests.journey import POSITION, button_texts, buttons, correct_option
from tests.standin import ApiCall, BotApiStandin, SimLearner, SimulationError

COURSE: Course = course_content().english
FAULT_STATUSES = (429, 500, 502, 503, 504)
_LESSON_HEADER = re.compile(r"Lesson (\d+) of \d+:")


@dataclass(frozen=True)
class ChaosPlan:
    """How hard to shake the bot; every random choice comes from ``seed``."""

    learners: int = 4
    kills: int = 6
    fault_rate: float = 0.03  # share of Bot API calls that fail with a 429 or a 5xx
    seed: int = 9
    uptime: tuple[float, float] = (0.2, 4.0)  # seconds the bot polls before each kill
    kills_in_start: float = 0.25  # share of the kills that come while the bot starts, before it polls
    # Shares of the kills that come just after getUpdates delivered a quiz answer, or anything (within
    # delivery_delay seconds), when updates are under way: where a bot that confirms before it handles loses them.
    kills_after_answer: float = 0.3
    kills_after_delivery: float = 0.2
    delivery_delay: tuple[float, float] = (0.0, 0.08)
    restart_delay: tuple[float, float] = (0.0, 1.0)  # seconds the supervisor waits before starting it again
    wrong_share: float = 0.4  # share of questions a learner gets wrong the first time
    think: tuple[float, float] = (0.0, 0.3)  # seconds a learner looks at the screen before acting
    patience: float = 8.0  # seconds a learner waits for the bot's reaction to a tap or a command
    run_patience: float = 45.0  # ... for the verdict on their code
    deadline: float = 240.0  # seconds for the whole course, for every learner
    first_user_id: int = 7001


@dataclass
class ChaosFigures:
    """What happened in a run, for the report."""

    seconds: float = 0.0
    learners: int = 0
    finished: int = 0
    kills: int = 0
    kills_in_start: int = 0  # kills that came before the bot polled (while it read the lessons, replayed, ...)
    kills_after_answer: int = 0  # kills that came just after getUpdates delivered a quiz answer
    kills_after_delivery: int = 0  # ... delivered any update
    bot_starts: int = 0
    start_seconds: float = 0.0  # median time from starting the bot to its polling
    exits_on_their_own: int = 0  # starts that failed by themselves (e.g. a 5xx from getMe) and were restarted
    api_calls: int = 0
    faults_injected: dict[str, int] = field(default_factory=dict)  # by status
    updates_delivered: int = 0
    updates_redelivered: int = 0  # delivered by more than one getUpdates (not confirmed before a kill)
    updates_replayed: int = 0  # updates handled again at a start because a kill interrupted them
    replays: int = 0  # times an update was handed over again (one update may be replayed more than once)
    quiz_answers: int = 0
    orphan_answers: int = 0  # answers to polls the bot sent but never recorded (see ORPHAN_POLLS): lost
    wrong_answers: int = 0
    retakes: int = 0
    drills_solved: int = 0
    code_runs: int = 0
    repeated_taps: int = 0  # a learner tapped again because nothing happened
    recoveries: int = 0  # ... and went back through /lessons
    resent_code: int = 0
    integrity_checks: int = 0
    refused_calls: int = 0  # calls the stand-in refused because of the bot (not injected)
    refusals: dict[str, int] = field(default_factory=dict)
    errors_logged: int = 0  # ERROR lines in the bot's log (injected failures are logged too)


@dataclass
class ChaosResult:
    figures: ChaosFigures
    problems: list[str]
    # Answers lost because the bot died between sending a poll and recording it: the learner answered a poll the
    # bot has no record of (the Quick Check's own bug, apart from the problems above; see ORPHAN_POLLS).
    orphan_answers: list[str]
    detours: list[str]  # where learners had to find their own way on: what to look at when recoveries grow

    def to_json(self) -> str:
        return json.dumps(
            {
                "figures": asdict(self.figures),
                "problems": self.problems,
                "orphan_answers": self.orphan_answers,
                "detours": self.detours,
            },
            ensure_ascii=False,
        )


ORPHAN_POLLS = (
    "a kill between a sendPoll Telegram carried out and the bot recording the poll (quiz_polls) leaves a poll the "
    "learner can answer but the bot never recorded; the Quick Check notes each poll before sending it (quiz_sends) "
    "so such an answer is matched to it (Database.adopt_poll) instead of being dropped as one to an unknown poll"
)


class Stranded(Exception):
    """A learner could not go on: what they did and what the chat showed is in the message."""


# What a learner sees.


def _text(message: dict | None) -> str:
    return (message or {}).get("text", "")


def _has_button(message: dict | None, prefix: str) -> bool:
    return message is not None and any(label.startswith(prefix) for label in button_texts(message))


def _has_data(message: dict | None, start: str) -> bool:
    return any(button.get("callback_data", "").startswith(start) for button in buttons(message or {}))


def _slide(message: dict | None) -> tuple[int, int, int] | None:
    """Return (lesson number, slide, slides) if ``message`` shows a slide."""
    text = _text(message).replace("\u2066", "").replace("\u2069", "")
    header, position = _LESSON_HEADER.search(text), POSITION.search(text)
    if header is None or position is None:
        return None
    return int(header.group(1)), int(position.group(1)), int(position.group(2))


def _is_quiz_intro(message: dict | None) -> bool:
    return _has_button(message, "◀ Back to the slides")


def _is_result(message: dict | None) -> bool:
    return _has_button(message, "💻 Practice")


def _is_menu(message: dict | None) -> bool:
    return _has_button(message, f"1. {COURSE.lessons[0].title.replace('`', '')}")


def _lesson_button(lesson: Lesson) -> str:
    return f"{lesson.number}. {lesson.title.replace('`', '')}"


class CourseTaker:
    """One learner taking the whole course through what the chat shows."""

    def __init__(self, sim: SimLearner, plan: ChaosPlan, rng: random.Random):
        self.sim = sim
        self.plan = plan
        self.rng = rng
        self.given: dict[str, int] = {}  # poll id -> the option chosen
        self.asked: set[str] = set()  # questions (their text) seen once at least
        self.wrong_planned = {
            q.question for lesson in COURSE.lessons for q in lesson.quiz if rng.random() < plan.wrong_share
        }
        self.wrong_given = 0
        self.retakes = 0
        self.drills_solved = 0
        self.code_runs = 0
        self.repeated_taps = 0
        self.recoveries = 0
        self.resent_code = 0
        self.journal: list[str] = []  # what the learner did, for the failure message
        self.detours: list[str] = []  # each time the learner went back through /lessons or sent code again, and why

    # The course, as the learner goes through it.

    async def take_the_course(self) -> None:
        reader = await self._start()
        for lesson in COURSE.lessons:
            reader = await self._read(lesson, reader)
            result = await self._quick_check(lesson, reader)
            await self._drills(lesson, result)
            verdict = await self._practise(lesson, result)
            following = COURSE.next_lesson(lesson)
            if following is not None:
                reader = await self._go_to_next_lesson(following, verdict)
        await self._see_the_course_complete()

    async def _start(self) -> dict:
        for _ in range(6):
            menu = await self._send_for(
                "/start", lambda m: _has_button(m, "▶ Start the course") or _has_button(m, "▶ Continue")
            )
            if menu is None:
                continue
            label = "▶ Start the course" if _has_button(menu, "▶ Start the course") else "▶ Continue"
            slide = await self._tap_for_edit(menu, label)
            if _slide(slide):
                return slide
        raise self._stranded("could not start the course")

    async def _read(self, lesson: Lesson, reader: dict | None) -> dict:
        """Turn the slides of ``lesson`` up to the last; return the message showing it (or the Quick Check)."""
        stalls = 0
        while True:
            shown = self._current(reader)
            where = _slide(shown)
            if shown is not None and where is not None and where[0] == lesson.number:
                _, n, total = where
                if n == total:
                    return shown
                turned = await self._tap_for_edit(shown, "Next ▶")
                after = _slide(self._current(shown))
                if after is not None and after[1] > n:
                    reader, stalls = turned or self._current(shown), 0
                    continue
            elif shown is not None and _is_quiz_intro(shown) and lesson.title.replace("`", "") in _text(shown):
                return shown
            stalls += 1
            if stalls >= 2:
                reader, stalls = await self._open(lesson, "the slide did not turn"), 0

    async def _quick_check(self, lesson: Lesson, reader: dict) -> dict:
        """Answer the Quick Check, then retake what was missed until all is right; return the result."""
        questions = {q.question for q in lesson.quiz}
        since = self.sim.cursor()
        if _slide(reader):
            await self._tap(reader, "Quick Check ▶")
        stalls = 0
        while True:
            seen = await self._wait_new(
                lambda m: (self._unanswered_poll(m) and m["poll"]["question"] in questions) or _is_result(m), since
            )
            if seen is None:
                stalls += 1
                if stalls < 2:
                    continue
                # No poll and no result: open the lesson anew, then the Quick Check from whatever it shows.
                stalls = 0
                opened = await self._open(lesson, "no poll and no result came")
                since = self.sim.cursor()
                if _slide(opened):
                    opened = await self._read(lesson, opened)
                    if _slide(opened):
                        await self._tap(opened, "Quick Check ▶")
                continue
            stalls = 0
            if _is_result(seen):
                if not _has_button(seen, "↻ Retake"):
                    return seen
                self.retakes += 1
                since = self.sim.cursor()
                await self._tap(seen, "↻ Retake")
                continue
            since = self.sim.cursor()
            await self._answer(seen)

    async def _drills(self, lesson: Lesson, result: dict) -> None:
        """Solve the lesson's drills by tapping, in the author's order; a lost tap or a redraw starts a drill over."""
        screen = await self._open_drills(lesson, result)
        for drill in lesson.drills:
            screen = await self._solve_drill(lesson, drill, screen, result)
        self.drills_solved += len(lesson.drills)

    async def _open_drills(self, lesson: Lesson, result: dict) -> dict:
        """Tap the Quick Check result's drills button; return the drill screen it sends."""
        for _ in range(6):
            since = self.sim.cursor()
            if await self._tap(result, "🧩 Code drills"):
                shown = await self._wait_new(lambda m: _has_data(m, f"dm:{lesson.id}:"), since)
                if shown is not None:
                    return shown
            self.repeated_taps += 1
        raise self._stranded(f"the drills of lesson {lesson.number} never opened")

    async def _solve_drill(self, lesson: Lesson, drill: Drill, screen: dict, result: dict) -> dict:
        """Solve ``drill``, on ``screen`` or reached from it; return the screen showing it solved."""
        mine = f"dm:{lesson.id}:{drill.id}:"
        for attempt in range(8):
            if attempt:
                self._detour(f"starts drill {drill.id} over")
            shown = self._current(screen)
            if shown is None or not _has_data(shown, mine):
                # Another drill is on screen (or none): go to this one by its chip, or open the drills anew.
                goes = f"dv:{lesson.id}:{drill.id}"
                moved = await self._tap_data_for_edit(shown, goes) if _has_data(shown, goes) else None
                screen = moved or await self._open_drills(lesson, result)
                continue
            if _has_data(shown, mine + "a"):
                return shown  # solved: its ↻ Again button is there
            if isinstance(drill, ParsonsDrill):
                screen = await self._arrange(shown, mine, drill) or shown
            else:
                screen = await self._tap_data_for_edit(shown, f"{mine}c:{drill.correct}:") or shown
        raise self._stranded(f"could not solve drill {drill.id} of lesson {lesson.number}")

    async def _arrange(self, shown: dict, mine: str, drill: ParsonsDrill) -> dict | None:
        """Place the author's lines from the start and check; return the screen once the verdict is on it."""
        if _has_data(shown, mine + "r"):
            shown = await self._tap_data_for_edit(shown, mine + "r")  # start over: what was placed is unknown
        for piece in range(len(drill.lines)):
            if shown is None:
                return None
            shown = await self._tap_data_for_edit(shown, f"{mine}p:{piece}:")
        if shown is None:
            return None
        shown = await self._tap_data_for_edit(shown, mine + "k")
        # An order is tried in the runner: "being tried" comes first, the verdict in a later edit.
        deadline = time.monotonic() + self.plan.run_patience
        while shown is not None and not _has_data(shown, mine + "a") and time.monotonic() < deadline:
            shown = await self._wait_edit(shown["message_id"])
        return shown

    async def _practise(self, lesson: Lesson, result: dict) -> dict:
        """Open the exercise, send the starter (it fails), then the solution; return the passing verdict."""
        exercise = lesson.exercise
        if exercise is None:
            raise self._stranded(f"lesson {lesson.id} has no exercise")
        await self._open_practice(result)
        await self._submit(exercise.starter, "Not yet:", result)
        return await self._submit(f"```python\n{exercise.solution}\n```", "All checks passed", result)

    async def _go_to_next_lesson(self, lesson: Lesson, verdict: dict) -> dict | None:
        slide = await self._tap_for_edit(verdict, "Next lesson")
        if _slide(slide):
            return slide
        return None  # _read opens it from the menu

    async def _see_the_course_complete(self) -> None:
        for _ in range(4):
            # The report starts with its title; "Sorry, ... Your progress is saved" (a fault hit the reply) does not.
            report = await self._send_for("/progress", lambda m: _text(m).startswith("Your progress"))
            if report is None:
                continue
            if "The course is complete" in _text(report) and "4 of 4 exercises passed" in _text(report):
                return
            raise self._stranded(f"the learner did everything, but /progress says:\n{_text(report)}")
        raise self._stranded("/progress never answered")

    # Steps a person takes.

    async def _open(self, lesson: Lesson, why: str) -> dict:
        """Send /lessons and open ``lesson`` from the menu (it resumes a Quick Check under way)."""
        self.recoveries += 1
        self._detour(f"back through /lessons: {why}")
        for _ in range(6):
            menu = await self._send_for("/lessons", _is_menu)
            if menu is None:
                continue
            opened = await self._tap_for_edit(menu, _lesson_button(lesson))
            if opened is not None and (_slide(opened) or _is_quiz_intro(opened)):
                return opened
        raise self._stranded(f"could not open lesson {lesson.number} from /lessons")

    async def _open_practice(self, result: dict) -> None:
        for _ in range(6):
            since = self.sim.cursor()
            if not await self._tap(result, "💻 Practice"):
                break
            intro = await self._wait_new(lambda m: _text(m).startswith("Practice:"), since)
            if intro is not None:
                return
            self.repeated_taps += 1
        raise self._stranded("the practice never opened")

    async def _submit(self, code: str, wanted: str, result: dict) -> dict:
        """Send ``code`` until a verdict saying ``wanted`` comes; send it again when none comes."""
        for attempt in range(6):
            if attempt:
                self.resent_code += 1
                self._detour(f"sends the code again, expecting {wanted!r}")
            since = self.sim.cursor()
            await self._think()
            self.journal.append(f"sends code, expecting {wanted!r}")
            self.sim.send_nowait(code)
            self.code_runs += 1
            deadline = time.monotonic() + self.plan.run_patience
            while (left := deadline - time.monotonic()) > 0:
                reply = await self._wait_new(lambda m: "poll" not in m, since, left)
                if reply is None:
                    break  # nothing came: send it again
                since = self.sim.cursor()
                text = _text(reply)
                if wanted in text:
                    return reply
                if any(earlier in text for earlier in ("still running", "Not yet:", "All checks passed", "Practice:")):
                    continue  # about code sent before, or a practice opened again: this code's verdict is coming
                if any(failure in text for failure in ("went wrong", "Many learners", "unavailable")):
                    break
                # Taken as something else than an answer (the practice is not open): open it, send again.
                self.journal.append(f"gets {text[:50]!r}")
                await self._open_practice(result)
                break
        raise self._stranded(f"no verdict saying {wanted!r} for the code sent")

    async def _answer(self, poll: dict) -> None:
        question = poll["poll"]["question"]
        right = correct_option(poll)
        wrong = question in self.wrong_planned and question not in self.asked
        choice = (right + 1) % len(poll["poll"]["options"]) if wrong else right
        self.asked.add(question)
        await self._think()
        try:
            await self.sim.answer_poll(poll, choice)
        except SimulationError as exc:
            self.journal.append(f"could not answer a poll: {exc}")
            return
        self.given[poll["poll"]["id"]] = choice
        self.wrong_given += wrong
        self.journal.append(f"answers {question[:30]!r} {'wrong' if wrong else 'right'}")

    def _unanswered_poll(self, message: dict) -> bool:
        return "poll" in message and message["poll"]["id"] not in self.given and not message["poll"]["is_closed"]

    async def _send_for(self, text: str, wanted: Any) -> dict | None:
        since = self.sim.cursor()
        await self._think()
        self.journal.append(f"sends {text}")
        self.sim.send_nowait(text)
        return await self._wait_new(wanted, since)

    async def _tap(self, message: dict, label: str) -> bool:
        shown = self._current(message)
        if shown is None or not _has_button(shown, label):
            self.journal.append(f"finds no {label!r} to tap")
            return False
        await self._think()
        self.journal.append(f"taps {label!r}")
        try:
            self.sim.tap_nowait(shown, next(t for t in button_texts(shown) if t.startswith(label)))
        except SimulationError as exc:
            self.journal.append(f"could not tap: {exc}")
            return False
        return True

    async def _tap_data_for_edit(self, message: dict | None, start: str) -> dict | None:
        """Tap the button whose data starts with ``start`` (by its text, as a person does); return the edit."""
        shown = self._current(message)
        found = [b for b in buttons(shown or {}) if b.get("callback_data", "").startswith(start)]
        if shown is None or not found:
            self.journal.append(f"finds no button {start!r} to tap")
            return None
        edited = asyncio.ensure_future(self._wait_edit(shown["message_id"]))
        await self._think()
        self.journal.append(f"taps {found[0]['text']!r} ({start})")
        try:
            self.sim.tap_nowait(shown, found[0]["text"])
        except SimulationError as exc:
            edited.cancel()
            self.journal.append(f"could not tap: {exc}")
            return None
        return await edited

    async def _tap_for_edit(self, message: dict, label: str) -> dict | None:
        """Tap ``label`` and return the message once the bot edited it; tap once more if nothing happens."""
        for attempt in range(2):
            if attempt:
                self.repeated_taps += 1
            edited = asyncio.ensure_future(self._wait_edit(message["message_id"]))
            if not await self._tap(message, label):
                edited.cancel()
                return None
            shown = await edited
            if shown is not None:
                return shown
        return None

    async def _wait_edit(self, message_id: int) -> dict | None:
        try:
            return await self.sim.wait_edit(message_id, timeout=self.plan.patience)
        except (TimeoutError, LookupError):
            return None

    async def _wait_new(self, wanted: Any, since: int, patience: float | None = None) -> dict | None:
        try:
            return await self.sim.wait_message(wanted, timeout=patience or self.plan.patience, since=since)
        except TimeoutError:
            return None

    def _current(self, message: dict | None) -> dict | None:
        return self.sim.message(message["message_id"]) if message is not None else None

    async def _think(self) -> None:
        await asyncio.sleep(self.rng.uniform(*self.plan.think))

    def _detour(self, what: str) -> None:
        steps = "; ".join(self.journal[-3:])
        shown = " | ".join(_describe(m) for m in self.sim.messages[-2:])
        self.detours.append(f"learner {self.sim.user_id} {what} (after: {steps}; the chat shows: {shown})")

    def _stranded(self, why: str) -> Stranded:
        shown = "\n".join(f"    {_describe(m)}" for m in self.sim.messages[-6:])
        done = "\n".join(f"    {line}" for line in self.journal[-12:])
        return Stranded(f"learner {self.sim.user_id}: {why}\n  last steps:\n{done}\n  the chat shows:\n{shown}")


def _describe(message: dict) -> str:
    if "poll" in message:
        return f"[poll {message['poll']['id']}] {message['poll']['question'][:60]!r}"
    return f"{_text(message)[:70]!r} {button_texts(message)}"


# The processes around the bot.


class Supervisor:
    """Start the bot, kill it with ``kill -9`` at random moments, start it again; restart it if it exits."""

    def __init__(self, bot: BotProcess, standin: BotApiStandin, plan: ChaosPlan, rng: random.Random, db_path: Path):
        self.bot = bot
        self.standin = standin
        self.plan = plan
        self.rng = rng
        self.db_path = db_path
        self.kills = 0
        self.kills_in_start = 0
        self.kills_after_answer = 0
        self.kills_after_delivery = 0
        self.start_times: list[float] = []  # seconds from start to polling, as measured
        self.exits = 0
        self.integrity_checks = 0
        self.problems: list[str] = []
        self._calm = asyncio.Event()
        self._calmed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Supervisor:
        await self.bot.start()
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def calm(self) -> None:
        """Kill no more; return once the bot runs again."""
        self._calm.set()
        await self._calmed.wait()

    async def _watch(self) -> None:
        while True:
            process = self.bot.process
            assert process is not None
            if self.kills < self.plan.kills and not self._calm.is_set():
                draw, plan = self.rng.random(), self.plan
                in_start = draw < plan.kills_in_start
                after_answer = plan.kills_in_start <= draw < plan.kills_in_start + plan.kills_after_answer
                after_delivery = 0 <= draw - plan.kills_in_start - plan.kills_after_answer < plan.kills_after_delivery
                moment = self.rng.uniform(0, self._typical_start()) if in_start else self.rng.uniform(*self.plan.uptime)
                started = time.monotonic()
                if not in_start:
                    with contextlib.suppress(RuntimeError, TimeoutError):
                        await self.bot.wait_polling()
                        self.start_times.append(time.monotonic() - started)
                if after_answer or after_delivery:
                    with contextlib.suppress(TimeoutError):
                        await self.standin.wait_call(
                            "getUpdates", _delivers_answer if after_answer else _delivers, timeout=30
                        )
                    moment = self.rng.uniform(*self.plan.delivery_delay)
                exited = asyncio.ensure_future(process.wait())
                calm = asyncio.ensure_future(self._calm.wait())
                await asyncio.wait({exited, calm}, timeout=moment, return_when=asyncio.FIRST_COMPLETED)
                calm.cancel()
                if exited.done():
                    self.exits += 1  # it died by itself (e.g. a 5xx from getMe at its start)
                elif self._calm.is_set():
                    exited.cancel()
                    continue
                else:
                    exited.cancel()
                    await self.bot.kill()
                    self.kills += 1
                    self.kills_in_start += in_start
                    self.kills_after_answer += after_answer
                    self.kills_after_delivery += after_delivery
                self._check_integrity()
                await asyncio.sleep(self.rng.uniform(*self.plan.restart_delay))
            else:
                self._calmed.set()
                await process.wait()
                self._calmed.clear()
                self.exits += 1
                await asyncio.sleep(0.5)
            await self.bot.start()

    def _typical_start(self) -> float:
        return statistics.median(self.start_times) if self.start_times else 2.0

    def _check_integrity(self) -> None:
        if not self.db_path.exists():
            return
        self.integrity_checks += 1
        verdict = integrity(self.db_path)
        if verdict != "ok":
            self.problems.append(f"integrity_check after kill {self.kills}: {verdict}")


def _delivers(call: ApiCall) -> bool:
    return call.ok and bool(call.result)


def _delivers_answer(call: ApiCall) -> bool:
    return call.ok and any("poll_answer" in update for update in call.result)


def integrity(db_path: Path) -> str:
    """Return what ``PRAGMA integrity_check`` says of the database file."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        return "\n".join(row[0] for row in conn.execute("PRAGMA integrity_check"))


# The run.


async def run_chaos(plan: ChaosPlan, workdir: Path) -> ChaosResult:
    """Let ``plan.learners`` learners take the course through kills and faults; check what is left."""
    rng = random.Random(plan.seed)
    db_path = workdir / "coursebot.sqlite3"
    problems: list[str] = []
    started = time.monotonic()
    async with (
        RunnerProcess(workdir / "runner.sock", workdir / "runner.log") as runner,
        BotApiStandin() as standin,
    ):
        env = bot_env(standin, db_path, COURSEBOT_RUNNER_URL=runner.url, COURSEBOT_LOG_LEVEL="INFO")
        bot = BotProcess(env, workdir / "bot.log")
        takers = [
            CourseTaker(standin.learner(plan.first_user_id + i, f"Learner{i}"), plan, random.Random(rng.random()))
            for i in range(plan.learners)
        ]
        try:
            async with Supervisor(bot, standin, plan, random.Random(rng.random()), db_path) as supervisor:
                standin.faults.at_random(plan.fault_rate, FAULT_STATUSES, seed=plan.seed)
                outcomes = await asyncio.gather(
                    *(asyncio.wait_for(taker.take_the_course(), plan.deadline) for taker in takers),
                    return_exceptions=True,
                )
                await supervisor.calm()
                standin.faults.clear()
                await standin.settle(quiet=1.0, timeout=60)
            # The supervisor watches no more: the bot, running, is stopped as an operator stops it.
            code = await bot.stop()
            problems += supervisor.problems
            if code != 0:
                problems.append(f"the bot exited with {code} on SIGTERM")
        finally:
            await bot.kill()
        figures = _figures(plan, standin, takers, supervisor, bot, db_path)
        for taker, outcome in zip(takers, outcomes, strict=True):
            if isinstance(outcome, TimeoutError):
                problems.append(str(taker._stranded(f"did not finish within {plan.deadline} s")))
            elif isinstance(outcome, BaseException):
                problems.append(f"{type(outcome).__name__}: {outcome}")
        lost, orphans = _check_records(db_path, standin, takers)
        problems += lost
    figures.seconds = round(time.monotonic() - started, 1)
    figures.finished = sum(1 for outcome in outcomes if outcome is None)
    figures.orphan_answers = len(orphans)
    return ChaosResult(figures, problems, orphans, [detour for taker in takers for detour in taker.detours])


def _check_records(db_path: Path, standin: BotApiStandin, takers: list[CourseTaker]) -> tuple[list[str], list[str]]:
    """Return the problems found in the records, and the answers lost to polls the bot never recorded."""
    problems, orphans = [], []
    verdict = integrity(db_path)
    if verdict != "ok":
        problems.append(f"integrity_check at the end: {verdict}")
    with contextlib.closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        inbox = dict(conn.execute("SELECT update_id, state FROM inbox").fetchall())
        for update_id in sorted(standin.updates.history):
            state = inbox.get(update_id)
            if state != "handled":
                problems.append(f"update {update_id} delivered by the stand-in is {state or 'not'} in the inbox")
        for taker in takers:
            recorded = dict(
                conn.execute(
                    "SELECT poll_id, option_index FROM quiz_answers WHERE user_id = ?", (taker.sim.user_id,)
                ).fetchall()
            )
            sent = {
                row[0] for row in conn.execute("SELECT poll_id FROM quiz_polls WHERE user_id = ?", (taker.sim.user_id,))
            }
            for poll_id, option in taker.given.items():
                if poll_id not in recorded and poll_id not in sent:
                    orphans.append(f"learner {taker.sim.user_id}: the answer to poll {poll_id}, never recorded as sent")
                elif poll_id not in recorded:
                    problems.append(f"learner {taker.sim.user_id}: the answer to poll {poll_id} was lost")
                elif recorded[poll_id] != option:
                    problems.append(
                        f"learner {taker.sim.user_id}: poll {poll_id} recorded {recorded[poll_id]}, answered {option}"
                    )
            for poll_id in recorded.keys() - taker.given.keys():
                problems.append(f"learner {taker.sim.user_id}: an answer to poll {poll_id} they never answered")
    return problems, orphans


def _figures(
    plan: ChaosPlan,
    standin: BotApiStandin,
    takers: list[CourseTaker],
    supervisor: Supervisor,
    bot: BotProcess,
    db_path: Path,
) -> ChaosFigures:
    injected = Counter(str(call.error_code) for call in standin.calls if call.injected)
    deliveries = Counter(
        update["update_id"] for call in standin.calls_to("getUpdates") if call.ok for update in call.result
    )
    refused = standin.errors()
    with contextlib.closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        replayed, replays = conn.execute(
            "SELECT count(*), coalesce(sum(replays), 0) FROM inbox WHERE replays > 0"
        ).fetchone()
    log = bot.log()
    return ChaosFigures(
        learners=plan.learners,
        kills=supervisor.kills,
        kills_in_start=supervisor.kills_in_start,
        kills_after_answer=supervisor.kills_after_answer,
        kills_after_delivery=supervisor.kills_after_delivery,
        bot_starts=bot.starts,
        start_seconds=round(supervisor._typical_start(), 2),
        exits_on_their_own=supervisor.exits,
        api_calls=len(standin.calls),
        faults_injected=dict(sorted(injected.items())),
        updates_delivered=len(standin.updates.history),
        updates_redelivered=sum(1 for times in deliveries.values() if times > 1),
        updates_replayed=replayed,
        replays=replays,
        quiz_answers=sum(len(t.given) for t in takers),
        wrong_answers=sum(t.wrong_given for t in takers),
        retakes=sum(t.retakes for t in takers),
        drills_solved=sum(t.drills_solved for t in takers),
        code_runs=sum(t.code_runs for t in takers),
        repeated_taps=sum(t.repeated_taps for t in takers),
        recoveries=sum(t.recoveries for t in takers),
        resent_code=sum(t.resent_code for t in takers),
        integrity_checks=supervisor.integrity_checks + 1,
        refused_calls=len(refused),
        refusals=dict(Counter(f"{call.method}: {call.description}" for call in refused).most_common(8)),
        errors_logged=sum(1 for line in log.splitlines() if " ERROR " in line or line.startswith("ERROR")),
    )
