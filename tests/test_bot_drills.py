"""Drills end to end: the real bot, the real runner and SQLite file, the loopback Bot API stand-in.

In every shipped language a learner reaches lesson 3's drills from its last slide and solves each one
in a single message edited in place: the Parsons problem (a line taken back with undo, a wrong order
checked, then an equivalent order the runner proves), the fill-in (a wrong choice first) and the
prediction; then the Quick Check finishes the lesson. What they read is in their language. Stale and
forged taps, the runner switched off and learners from before the drills are tested in English.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from bot import lessontext, render
from bot.course.model import Lesson, ParsonsDrill
from bot.i18n import I18n, _, ngettext, number
from bot.learner import DrillProgress
from bot.storage.migrations import MIGRATIONS
from tests.conftest import LESSONS, LOCALES, course_content, running
from tests.journey import (
    answer_quiz,
    button_texts,
    buttons,
    correct_option,
    data_button,
    drill_move,
    position,
    send_and_wait,
    solve_drills,
    tap_and_wait_edit,
    tap_data_and_wait_edit,
)
from tests.test_bot_languages import ENGLISH_ONLY, SCRIPT, TELEGRAM_CODE, _without_code, _words

CONTENT = course_content()
I18N = I18n(LOCALES)
LANGUAGES = I18N.languages  # English first
LESSON = CONTENT.english.lesson("grad")
STEP, CLEAR, PREDICT = LESSON.drills
WRONG_ORDER = (0, 2, 3, 4, 1, 5)  # cleared between backward() and step(): w never moves
EQUIVALENT_ORDER = (0, 2, 3, 4, 5, 1)  # cleared after the step: each step still sees only its own gradient
CHECK_TIMEOUT = 90  # seconds: an optimizer makes a sandboxed job take seconds on a busy machine

sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)"
)


@pytest.fixture
async def practising_bot(config):
    async with running(replace(config, runner="embedded")) as bot:
        yield bot


def _code_button(button: dict) -> bool:
    """Return whether a button shows code (a line to place, a choice), which stays as written in every language."""
    return re.match(r"dm:[^:]+:[^:]+:[pc]:", button.get("callback_data", "")) is not None


def _prose(message: dict) -> list[str]:
    """Return what a learner reads as prose in a message: its text without code, and its buttons but code."""
    pieces = [_without_code(message.get("text", ""), message.get("entities"))]
    return pieces + [b["text"] for b in buttons(message) if not _code_button(b)]


def _english_fragments(lesson: Lesson) -> set[str]:
    """Runs of four or more English words from the lesson's drills and the drills' interface."""
    texts = []
    for drill in lesson.drills:
        texts += [drill.prompt, drill.explanation]
        if isinstance(drill, ParsonsDrill):
            texts += [check.fail for check in drill.checks]
        else:
            texts += list(drill.reasons)
    with I18N.use("en"):
        texts += [
            _("Tap the lines in order, starting with the first."),
            _("This order is not right yet. Undo a line or start over."),
            _("✅ Right! Your order differs from ours but gives the same results, so it works just as well."),
            _("Every drill of this lesson is solved."),
            _("You tried that one already."),
            _("Try another one."),
        ]
    fragments = set()
    for text in texts:
        for clause in re.split(r"[|.,:;!?()\n—–]", re.sub(r"`[^`]*`", " | ", text)):
            words = [w for w in clause.split() if w.isalpha()]
            if len(words) >= 4:
                fragments.add(" ".join(words).lower())
    return fragments


async def _tap_and_wait_verdict(learner, message: dict, start: str) -> tuple[dict, dict]:
    """Tap Check on a Parsons drill that must be run: return the 'trying' screen and the verdict after it."""
    trying = await tap_data_and_wait_edit(learner, message, start)
    if "⏳" not in trying["text"]:
        return trying, trying
    current = learner.message(message["message_id"])
    if "⏳" not in current["text"]:  # the verdict landed already
        return trying, current
    return trying, await learner.wait_edit(message["message_id"], timeout=CHECK_TIMEOUT)


async def _place(learner, message: dict, lesson: Lesson, drill: ParsonsDrill, order) -> dict:
    for piece in order:
        message = await tap_data_and_wait_edit(learner, message, drill_move(lesson, drill.id, "p", piece))
    return message


async def _last_slide(learner, lesson: Lesson, language: str = "en") -> dict:
    with I18N.use(language):
        next_label = _("Next ▶")
    menu = await send_and_wait(learner, "/start")
    await learner.tap(menu, callback_data=f"l:{lesson.id}")  # the button reads "3. ..." (isolated in Arabic)
    slide = await learner.wait_edit(menu["message_id"])
    while position(slide)[0] < len(lesson.slides):
        slide = await tap_and_wait_edit(learner, slide, next_label)
    return slide


async def _answer_quiz(learner, message: dict, lesson: Lesson) -> dict:
    """Start the Quick Check from a button of ``message`` and answer every poll right; return the result."""
    since = learner.cursor()
    await learner.tap(message, data_button(message, f"q:{lesson.id}")["text"])
    poll = await learner.wait_message(lambda m: "poll" in m, since=since)
    for index in range(len(lesson.quiz)):
        since = learner.cursor()
        await learner.answer_poll(poll, correct_option(poll))
        last = index == len(lesson.quiz) - 1
        poll = await learner.wait_message(
            (lambda m: "reply_markup" in m) if last else (lambda m: "poll" in m), since=since
        )
    return poll


async def drills(bot, user_id: int, lesson_id: str = "grad") -> dict[str, DrillProgress]:
    """The learner's stored drill attempts in a lesson, as the bot reads them (with the lesson's state)."""
    return (await bot.db.lesson_state(user_id, lesson_id)).drills


async def _open_drills(learner, message: dict, lesson: Lesson) -> dict:
    since = learner.cursor()
    await learner.tap(message, data_button(message, f"dl:{lesson.id}")["text"])
    return await learner.wait_message(since=since)


@sandbox
@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_learner_solves_lesson_threes_drills_in_their_language(practising_bot, standin, language):
    lesson = CONTENT.course(language).lesson("grad")
    step, clear, predict = lesson.drills
    learner = standin.learner(user_id=8100 + LANGUAGES.index(language), language_code=TELEGRAM_CODE.get(language, "en"))
    seen: list[dict] = []
    with I18N.use(language):
        right_choice = _("✅ Right!")
        same_results = _("✅ Right! Your order differs from ours but gives the same results, so it works just as well.")
        tried = _("You tried that one already.")
        all_solved = _("Every drill of this lesson is solved.")
        quiz_label = _("Quick Check ▶")
        not_it = _("✗ {choice} is not it.").split("{choice}")
        try_another = _("Try another one.")

    last = await _last_slide(learner, lesson, language)
    screen = await _open_drills(learner, last, lesson)
    assert screen["message_id"] != last["message_id"], "the drills open in a message of their own"
    drill_message = screen["message_id"]
    seen.append(screen)

    # Parsons: a line placed and taken back, a wrong order, then an order other than the author's that works.
    screen = await _place(learner, screen, lesson, step, [1])
    assert "opt.zero_grad()" in screen["text"]
    screen = await tap_data_and_wait_edit(learner, screen, drill_move(lesson, step.id, "u"))
    assert not any(e["type"] == "pre" for e in screen.get("entities", [])), "nothing is placed any more"
    assert sum(1 for b in buttons(screen) if _code_button(b)) == len(step.pieces), "every line is back"
    screen = await _place(learner, screen, lesson, step, WRONG_ORDER)
    seen.append(screen)
    trying, screen = await _tap_and_wait_verdict(learner, screen, drill_move(lesson, step.id, "k"))
    seen += [trying, screen]
    failed = step.checks[0].fail.split("{got}")[0].replace("`", "")
    assert failed in screen["text"].replace("\u2066", "").replace("\u2069", ""), screen["text"]
    assert not any(b["callback_data"].startswith(drill_move(lesson, step.id, "k")) for b in buttons(screen))
    screen = await tap_data_and_wait_edit(learner, screen, drill_move(lesson, step.id, "r"))
    screen = await _place(learner, screen, lesson, step, EQUIVALENT_ORDER)
    trying, screen = await _tap_and_wait_verdict(learner, screen, drill_move(lesson, step.id, "k"))
    seen += [trying, screen]
    assert same_results in screen["text"], screen["text"]
    assert screen["message_id"] == drill_message, "every tap edits the one message"

    # Fill in the blank: a wrong choice first, tapped twice, then the right one.
    screen = await tap_data_and_wait_edit(learner, screen, f"dv:{lesson.id}:{clear.id}")
    wrong = next(i for i in range(len(clear.choices)) if i != clear.correct)
    screen = await tap_data_and_wait_edit(learner, screen, drill_move(lesson, clear.id, "c", wrong))
    seen.append(screen)
    assert not_it[0] in screen["text"] and clear.choices[wrong] in screen["text"]
    # The wrong choice's own reason, in the learner's language, under it (isolates aside in Arabic).
    shown = screen["text"].replace("\u2066", "").replace("\u2069", "")
    reason = lessontext.to_plain(clear.reason(wrong))
    assert reason and reason in shown and try_another in shown, shown
    again = await learner.tap(screen, data_button(screen, drill_move(lesson, clear.id, "c", wrong))["text"])
    assert (await learner.wait_callback_answer(again))["text"] == tried
    screen = await tap_data_and_wait_edit(learner, screen, drill_move(lesson, clear.id, "c", clear.correct))
    seen.append(screen)
    gap_line = next(line for line in clear.answer.splitlines() if clear.choices[clear.correct] in line)
    assert right_choice in screen["text"] and gap_line.strip() in screen["text"]

    # Predict the output: right at once; the lesson's drills are done and the way on is offered.
    screen = await tap_data_and_wait_edit(learner, screen, f"dv:{lesson.id}:{predict.id}")
    screen = await tap_data_and_wait_edit(learner, screen, drill_move(lesson, predict.id, "c", predict.correct))
    seen.append(screen)
    assert all_solved in screen["text"]
    assert await practising_bot.db.drills_solved(learner.user_id) == {"grad": {d.id for d in lesson.drills}}
    assert any(text.endswith(quiz_label.strip()) or text == quiz_label for text in button_texts(screen))

    # The Quick Check, from the drill message, finishes the lesson.
    result = await _answer_quiz(learner, screen, lesson)
    seen.append(result)
    progress = await practising_bot.db.progress(learner.user_id)
    assert progress["grad"].completed
    report = await send_and_wait(learner, "/progress")
    with I18N.use(language):
        total = sum(len(lesson.drills) for lesson in CONTENT.english.lessons)
        line = ngettext("{solved} of {total} drill solved.", "{solved} of {total} drills solved.", total)
        assert line.format(solved=number(3), total=number(total)) in report["text"]
    assert standin.errors() == []

    if language == "en":
        return
    toasts = [q.answer.get("text") or "" for q in standin.callback_queries.values() if q.answer]
    prose = "\n".join(piece for message in seen for piece in _prose(message)) + "\n".join(toasts)
    assert len(re.findall(SCRIPT[language], prose.lower())) > 300, f"too little {language} script"
    with I18N.use(language):
        assert render.fallback_notice() not in prose
    words = _words(prose)
    leftovers = sorted(f for f in _english_fragments(CONTENT.english.lesson("grad")) if f" {f} " in f" {words} ")
    assert leftovers == [], f"English sentences left in {language}"
    assert sorted({w for w in words.split() if w in ENGLISH_ONLY}) == [], f"English words left in {language}"


def test_the_english_fragment_check_finds_the_english_drills():
    fragments = _english_fragments(LESSON)
    caught = [
        d.id for d in LESSON.drills if any(f" {f} " in f" {_words(d.prompt + ' ' + d.explanation)} " for f in fragments)
    ]
    assert len(caught) >= 2, caught


# English, runner off: the course's flow, stale and forged taps.


async def test_drills_are_offered_on_the_last_slide_and_after_the_quick_check(bot, standin):
    ada = standin.learner(user_id=8201)
    last = await _last_slide(ada, LESSON)
    assert data_button(last, "dl:grad")["text"] == "🧩 Code drills ▶"
    result = await answer_quiz(ada, last, LESSON)
    assert button_texts(result)[0] == "🧩 Code drills ▶"


async def test_a_lesson_is_done_only_once_its_drills_are_solved(bot, standin):
    ada = standin.learner(user_id=8202)
    last = await _last_slide(ada, LESSON)
    result = await answer_quiz(ada, last, LESSON)
    assert not (await bot.db.progress(8202))["grad"].completed
    menu = await send_and_wait(ada, "/lessons")
    assert "3. Reading and zeroing .grad — Quick Check and drills to finish" in menu["text"]
    report = await send_and_wait(ada, "/progress")
    assert "0 of 4 lessons done." in report["text"] and "0 of 12 drills solved." in report["text"]
    # The score counts the questions met: a perfect Quick Check is 3 of 3, not 3 of 12 (25%) (issue 20).
    assert "Quick Check score: 3 of 3 questions correct (100%)." in report["text"], report["text"]
    # Continue leads back to the last slide, which offers the drills.
    resumed = await tap_and_wait_edit(ada, menu, "Continue")
    assert position(resumed) == (len(LESSON.slides), len(LESSON.slides))
    await solve_drills(ada, resumed, LESSON)
    assert (await bot.db.progress(8202))["grad"].completed
    report = await send_and_wait(ada, "/progress")
    assert "1 of 4 lessons done." in report["text"] and "3 of 12 drills solved." in report["text"]
    assert result is not None and standin.errors() == []


async def test_with_the_runner_off_only_the_authors_order_is_accepted(bot, standin):
    ada = standin.learner(user_id=8203)
    screen = await _open_drills(ada, await _last_slide(ada, LESSON), LESSON)
    screen = await _place(ada, screen, LESSON, STEP, EQUIVALENT_ORDER)
    screen = await tap_data_and_wait_edit(ada, screen, drill_move(LESSON, STEP.id, "k"))
    assert "running code is off here, so I cannot try yours" in screen["text"]
    screen = await tap_data_and_wait_edit(ada, screen, drill_move(LESSON, STEP.id, "r"))
    screen = await _place(ada, screen, LESSON, STEP, range(len(STEP.lines)))
    screen = await tap_data_and_wait_edit(ada, screen, drill_move(LESSON, STEP.id, "k"))
    assert "✅ Right!" in screen["text"]
    stored = (await drills(bot, 8203))[STEP.id]
    assert stored.solved and stored.tries == 1


async def test_a_tap_from_an_older_screen_redraws_the_drill_as_it_stands(bot, standin):
    ada = standin.learner(user_id=8204)
    last = await _last_slide(ada, LESSON)
    first = await _open_drills(ada, last, LESSON)
    stale = data_button(first, drill_move(LESSON, STEP.id, "p", 1))["callback_data"]
    screen = await _place(ada, first, LESSON, STEP, [0])
    before = await drills(bot, 8204)
    query = await ada.tap(screen, callback_data=stale)  # e.g. a double tap, or the same drill open twice
    answer = await ada.wait_callback_answer(query)
    assert answer["text"] == "That button is out of date. Here is the drill as it stands."
    assert await drills(bot, 8204) == before
    # A second drill message for the same drill: the first one's buttons go stale, and a tap there redraws it.
    second = await _open_drills(ada, last, LESSON)
    second = await _place(ada, second, LESSON, STEP, [2])
    query = await ada.tap(screen, data_button(screen, drill_move(LESSON, STEP.id, "u"))["text"])
    redrawn = await ada.wait_edit(screen["message_id"])
    assert (await ada.wait_callback_answer(query))["text"].startswith("That button is out of date")
    assert redrawn["text"] == second["text"]
    assert (await drills(bot, 8204))[STEP.id].placed == (0, 2)


@pytest.mark.parametrize(
    ("data", "toast"),
    [
        ("dm:grad:step-order:z:0:0", "This button is not valid any more. Send /lessons to see the course."),
        ("dm:grad:step-order:p:9:0", "This button is not valid any more. Send /lessons to see the course."),
        ("dm:grad:step-order:c:0:0", "This button is not valid any more. Send /lessons to see the course."),
        ("dm:grad:step-order:k:0:0", "Place every line first, then check."),
        ("dm:grad:no-such-drill:p:0:0", "This drill is no longer in the lesson. Send /lessons to see the course."),
        (
            "dm:no-such-lesson:step-order:p:0:0",
            "This lesson is no longer in the course. Send /lessons to see the course.",
        ),
        ("dv:grad:no-such-drill", "This drill is no longer in the lesson. Send /lessons to see the course."),
        ("dl:no-such-lesson", "This lesson is no longer in the course. Send /lessons to see the course."),
        ("dm:grad:step-order:p:0", "This button is not valid any more. Send /lessons to see the course."),
        ("dm:grad:step-order:p:x:0", "This button is not valid any more. Send /lessons to see the course."),
    ],
)
async def test_a_forged_tap_is_refused_and_changes_nothing(bot, standin, data, toast):
    ada = standin.learner(user_id=8205)
    screen = await _open_drills(ada, await _last_slide(ada, LESSON), LESSON)
    query = await ada.tap(screen, callback_data=data)
    assert (await ada.wait_callback_answer(query))["text"] == toast
    assert await drills(bot, 8205) == {}
    assert ada.message(screen["message_id"])["text"] == screen["text"]


async def test_a_solved_drill_can_be_practised_again_and_stays_solved(bot, standin):
    ada = standin.learner(user_id=8206)
    screen = await _open_drills(ada, await _last_slide(ada, LESSON), LESSON)
    screen = await tap_data_and_wait_edit(ada, screen, f"dv:grad:{CLEAR.id}")
    solved = await tap_data_and_wait_edit(ada, screen, drill_move(LESSON, CLEAR.id, "c", CLEAR.correct))
    stale = data_button(solved, drill_move(LESSON, CLEAR.id, "a"))["callback_data"]
    fresh = await tap_data_and_wait_edit(ada, solved, drill_move(LESSON, CLEAR.id, "a"))
    assert "✅" not in fresh["text"] and CLEAR.GAP in fresh["text"]
    assert (await bot.db.drills_solved(8206)) == {"grad": {CLEAR.id}}
    query = await ada.tap(fresh, callback_data=stale)
    assert (await ada.wait_callback_answer(query))["text"].startswith("That button is out of date")


async def test_reset_forgets_the_drills(bot, standin):
    ada = standin.learner(user_id=8207)
    await solve_drills(ada, await _last_slide(ada, LESSON), LESSON)
    assert await bot.db.drills_solved(8207) == {"grad": {d.id for d in LESSON.drills}}
    question = await send_and_wait(ada, "/reset")
    await tap_and_wait_edit(ada, question, "Yes, reset")
    assert await bot.db.drills_solved(8207) == {}


async def test_learners_who_finished_a_lesson_before_the_drills_keep_it_done(standin, config, tmp_path):
    # A database of the schema before drills (migration 2), with lesson 3 completed the old way.
    path: Path = config.db_path
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        for number_, script in enumerate(MIGRATIONS[:2], start=1):
            conn.executescript(f"{script};\nPRAGMA user_version = {number_};")
        now = "2026-11-30T10:00:00.000+00:00"
        conn.execute(
            "INSERT INTO learners (user_id, chat_id, created_at, updated_at) VALUES (8208, 8208, ?, ?)", (now, now)
        )
        conn.execute(
            "INSERT INTO lesson_progress (user_id, lesson_id, slide, furthest_slide, slides_read_at, completed_at)"
            " VALUES (8208, 'grad', 12, 12, ?, ?)",
            (now, now),
        )
    conn.close()
    async with running(config) as bot:
        assert await bot.db.schema_version() == len(MIGRATIONS)
        ada = standin.learner(user_id=8208)
        report = await send_and_wait(ada, "/progress")
        assert "1 of 4 lessons done." in report["text"] and "0 of 12 drills solved." in report["text"]
        assert "3. Reading and zeroing .grad — done on Nov 30, 2026 ✅" in report["text"]


async def test_the_drill_screens_fit_telegram_and_read_left_to_right_in_arabic(bot, standin):
    layla = standin.learner(user_id=8209, language_code="ar-EG")
    lesson = CONTENT.course("ar").lesson("grad")
    screen = await _open_drills(layla, await _last_slide(layla, lesson, "ar"), lesson)
    pieces = [b["text"] for b in buttons(screen) if _code_button(b)]
    assert pieces and all(p.startswith("\u2066") and p.endswith("\u2069") for p in pieces), pieces
    assert standin.errors() == []


async def test_an_attempt_at_a_drill_the_author_changed_starts_over_and_a_removed_drill_is_gone(
    standin, config, tmp_path
):
    lessons = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    async with running(replace(config, lessons_dir=lessons)) as bot:
        ada = standin.learner(user_id=8210)
        screen = await _open_drills(ada, await _last_slide(ada, LESSON), LESSON)
        screen = await _place(ada, screen, LESSON, STEP, range(len(STEP.lines)))  # every line placed
        # The author shortens the loop to five lines: the six placed no longer fit, and the drill starts over.
        path = lessons / "en" / "03-grad.yaml"
        text = path.read_text(encoding="utf-8")
        head, drills_block = text.split("\ndrills:\n")
        drills_block = drills_block.replace("          pred = w * x\n", "", 1).replace("(pred - y)", "(w * x - y)", 1)
        text = head + "\ndrills:\n" + drills_block
        path.write_text(text, encoding="utf-8")
        assert (await bot.reload()).accepted
        query = await ada.tap(screen, data_button(screen, drill_move(LESSON, STEP.id, "u"))["text"])
        redrawn = await ada.wait_edit(screen["message_id"])
        assert (await ada.wait_callback_answer(query))["text"].startswith("That button is out of date")
        assert not any(e["type"] == "pre" for e in redrawn.get("entities", [])), "the placed lines are gone"
        # The author removes the fill-in: a tap naming it says so.
        start = text.index("  - id: clear-guard")
        path.write_text(text[:start] + text[text.index("  - id: no-clear") :], encoding="utf-8")
        assert (await bot.reload()).accepted
        query = await ada.tap(redrawn, callback_data=f"dv:grad:{CLEAR.id}")
        assert (await ada.wait_callback_answer(query))["text"] == (
            "This drill is no longer in the lesson. Send /lessons to see the course."
        )
