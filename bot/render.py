"""Turn the course and a learner's progress into the messages and buttons they see. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot import feedback, lessontext
from bot.callbacks import (
    CallbackData,
    ChooseLanguage,
    Confirm,
    ConfirmReset,
    Continue,
    DrillTap,
    LeavePractice,
    OpenLesson,
    ResendPoll,
    RetakeMissed,
    ShowDrill,
    ShowHint,
    ShowMenu,
    ShowSlide,
    StartDrills,
    StartPractice,
    StartQuiz,
)
from bot.commands import COMMANDS
from bot.course.model import ChoiceDrill, Course, Drill, Exercise, Lesson, ParsonsDrill, Question
from bot.drills import Move, Reason, Verdict, arrangement
from bot.i18n import _, date, fraction, isolate, ngettext, number, own_name, percent
from bot.learner import NOT_STARTED, DrillProgress, LessonProgress
from bot.navigation import Place, slide_index
from bot.safehtml import Html, bold, code, code_block, escape, fill, italic, join, pre
from bot.states import Stage, stage
from bot.telegram_rules.limits import MESSAGE_TEXT_MAX
from bot.telegram_rules.text import visible_length
from runner.client import RunResult


@dataclass(frozen=True)
class Screen:
    """One message: its HTML text and its inline buttons."""

    text: Html
    buttons: InlineKeyboardMarkup | None = None


@dataclass(frozen=True)
class PollSpec:
    """A quiz poll ready to send: its options in the order shown, with their ids."""

    question: str
    options: tuple[str, ...]
    option_ids: tuple[str, ...]
    correct: int  # the position of the right option as shown
    explanation: str


MENU_MARK = "☰"  # the course menu's sign, on every "☰ Lessons" button
_CROWDED_ROW = 2  # other buttons in a row beyond which a phone has no room for "☰ Lessons"


def _button(text: str, data: CallbackData) -> InlineKeyboardButton:
    return InlineKeyboardButton(text, callback_data=data.pack())


def _keyboard(*rows: list[InlineKeyboardButton]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([row for row in rows if row])


def _lessons_button(*, beside: int = 0) -> list[InlineKeyboardButton]:
    """The way to the course menu. Beside `beside` other buttons it is the ☰ alone, which every other screen's
    "☰ Lessons" explains: a phone cuts "☰ Lessons" to "☰ Less…" (read as "show less") in a row of four."""
    label = MENU_MARK if beside >= _CROWDED_ROW else _("☰ Lessons")
    return [_button(label, ShowMenu())]


def _next_lesson_button(course: Course, lesson: Lesson) -> list[InlineKeyboardButton]:
    following = course.next_lesson(lesson)
    if following is None:
        return []
    label = _("Next lesson: {title} ▶").format(title=lessontext.to_plain(following.title))
    return [_button(label, OpenLesson(following.id))]


def fallback_notice() -> Html:
    """Return the line that says an item is shown in English because it is not translated yet."""
    return italic(_("This part is not translated yet, so it is shown in English."))


def lesson_state(lesson: Lesson, progress: LessonProgress, *, dated: bool = False) -> str:
    """Return a lesson's state in words: not started, at slide n of N, Quick Check, or done (on which day)."""
    current = stage(progress)
    if current is Stage.DONE:
        if dated and progress.completed_on is not None:
            return _("done on {date} ✅").format(date=date(progress.completed_on))
        return _("done ✅")
    if current is Stage.QUIZ:
        return _("Quick Check and drills to finish") if lesson.drills else _("Quick Check to answer")
    if current is Stage.READING:
        return _("in progress, slide {n} of {total}").format(
            n=number(slide_index(lesson, progress) + 1), total=number(len(lesson.slides))
        )
    return _("not started")


def _lesson_list(course: Course, progress: Mapping[str, LessonProgress], *, dated: bool = False) -> Html:
    return join(
        (
            fill(
                "{n}. {title} — {state}",
                n=number(lesson.number),
                title=lessontext.to_html(lesson.title),
                state=lesson_state(lesson, progress.get(lesson.id, NOT_STARTED), dated=dated),
            )
            for lesson in course.lessons
        ),
        "\n",
    )


def menu(
    course: Course, progress: Mapping[str, LessonProgress], place: Place | None, *, welcome: bool = False
) -> Screen:
    """Render the course menu: every lesson with its state, and one button to start or continue."""
    parts: list[str] = []
    if welcome:
        parts.append(_("Welcome! I teach short programming courses right here in the chat."))
    parts.append(join([bold(course.title), course.description], "\n"))
    parts.append(_lesson_list(course, progress))
    rows: list[list[InlineKeyboardButton]] = []
    if place is None:
        parts.append(_("You finished the course. Open any lesson to review it."))
    elif not any(p.started for p in progress.values()):
        rows.append([_button(_("▶ Start the course"), Continue())])
    else:
        label = _("▶ Continue: lesson {lesson}, slide {n}").format(
            lesson=number(place.lesson.number), n=number(place.slide + 1)
        )
        rows.append([_button(label, Continue())])
    for lesson in course.lessons:
        rows.append([_button(f"{number(lesson.number)}. {lessontext.to_plain(lesson.title)}", OpenLesson(lesson.id))])
    return Screen(join(parts), _keyboard(*rows))


def slide(course: Course, lesson: Lesson, index: int, *, done: bool = False) -> Screen:
    """Render slide ``index`` of ``lesson`` with Back, Next (or Quick Check) and 'n / N'.

    The last slide of a lesson ``done`` also offers the way forward: its practice and the next lesson.
    """
    current = lesson.slides[index]
    header = fill(
        _("Lesson {n} of {total}: {title}"),
        n=number(lesson.number),
        total=number(len(course.lessons)),
        title=lessontext.to_html(lesson.title),
    )
    parts: list[str] = [
        italic(header),
        join([bold(lessontext.to_html(current.title)), lessontext.to_html(current.text)], "\n"),
    ]
    if current.code:
        parts.append(code_block(current.code))
    if current.fallback:
        parts.append(fallback_notice())
    parts.append(fraction(index + 1, len(lesson.slides)))
    nav = []
    if index > 0:
        nav.append(_button(_("◀ Back"), ShowSlide(lesson.id, lesson.slides[index - 1].id)))
    if index < lesson.last_slide:
        nav.append(_button(_("Next ▶"), ShowSlide(lesson.id, lesson.slides[index + 1].id)))
        return Screen(join(parts), _keyboard(nav, _lessons_button()))
    nav.append(_button(_("Quick Check ▶"), StartQuiz(lesson.id)))
    onward = [_practice_button(lesson), _next_lesson_button(course, lesson)] if done else []
    return Screen(join(parts), _keyboard(nav, _drills_button(lesson), *onward, _lessons_button()))


def _practice_button(lesson: Lesson) -> list[InlineKeyboardButton]:
    if lesson.exercise is None:
        return []
    label = _("💻 Practice: {title}").format(title=lessontext.to_plain(lesson.exercise.title))
    return [_button(label, StartPractice(lesson.id))]


def quiz_intro(lesson: Lesson, remaining: int, *, retake: bool, sent: bool = True, resumed: bool = False) -> Screen:
    """Render the message that replaces the slides while the Quick Check polls are answered.

    Its first button sends the awaited poll again: a poll lost, deleted or never sent is one tap away.
    ``sent`` False says the poll could not be sent just now. ``resumed``: a round under way brought back, whose
    ``remaining`` questions are what is left of it, not all it asks.
    """
    title = fill(_("Quick Check: {title}"), title=lessontext.to_html(lesson.title))
    if not sent:
        body = _("The question could not be sent just now. Tap “Send the question again” to try once more.")
    elif resumed:
        body = ngettext(
            "One question left. Answer the poll below.",
            "{n} questions left. Answer the polls below, one at a time.",
            remaining,
        ).format(n=number(remaining))
    elif retake:
        body = ngettext(
            "One question you missed, asked again. Answer the poll below.",
            "{n} questions you missed, asked again. Answer the polls below, one at a time.",
            remaining,
        ).format(n=number(remaining))
    else:
        body = ngettext(
            "One question. Answer the poll below.",
            "{n} questions. Answer the polls below, one at a time.",
            remaining,
        ).format(n=number(remaining))
    return Screen(
        join([bold(title), body], "\n"),
        _keyboard(
            [_button(_("↻ Send the question again"), ResendPoll(lesson.id))],
            [_button(_("◀ Back to the slides"), ShowSlide(lesson.id, lesson.slides[-1].id))],
        ),
    )


def poll(question: Question, order: tuple[int, ...] | None = None) -> PollSpec:
    """Return the quiz poll for ``question``, its options in ``order`` (positions in the file; default: as written)."""
    shown = order if order is not None else tuple(range(len(question.options)))
    return PollSpec(
        lessontext.plain(question.question),
        tuple(lessontext.plain(question.options[i]) for i in shown),
        tuple(question.option_ids[i] for i in shown),
        shown.index(question.correct),
        lessontext.plain(question.explanation),
    )


def quiz_result(course: Course, lesson: Lesson, correct: int, missed: int) -> Screen:
    """Render the end of a Quick Check: the score, the recap and the way on."""
    total = len(lesson.quiz)
    score = _("Quick Check: {correct} of {total} correct.").format(correct=number(correct), total=number(total))
    parts: list[str] = [bold(score), join([bold(_("Recap")), lessontext.to_html(lesson.recap)], "\n")]
    if lesson.recap_fallback:
        parts.append(fallback_notice())
    rows = [_drills_button(lesson), _practice_button(lesson)]
    if missed:
        label = ngettext("↻ Retake the question I missed", "↻ Retake the {n} questions I missed", missed).format(
            n=number(missed)
        )
        rows.append([_button(label, RetakeMissed(lesson.id))])
    rows.append(_next_lesson_button(course, lesson))
    if course.next_lesson(lesson) is None:
        parts.append(_("That was the last lesson of the course. Well done!"))
    rows.append(_lessons_button())
    return Screen(join(parts), _keyboard(*rows))


def progress_report(
    course: Course,
    progress: Mapping[str, LessonProgress],
    correct: int,
    total: int,
    answered: int,
    exercises_passed: int = 0,
    drills_solved: int = 0,
) -> Screen:
    """Render /progress: lessons done, the Quick Check score and each lesson's state."""
    done = sum(1 for lesson in course.lessons if stage(progress.get(lesson.id, NOT_STARTED)) is Stage.DONE)
    lessons_line = ngettext(
        "{done} of {total} lesson done.", "{done} of {total} lessons done.", len(course.lessons)
    ).format(done=number(done), total=number(len(course.lessons)))
    if answered:
        score_line = _("Quick Check score: {correct} of {total} questions correct ({percent}).").format(
            correct=number(correct), total=number(total), percent=percent(correct / total if total else 0)
        )
    else:
        score_line = _("Quick Check score: no questions answered yet.")
    exercises = sum(1 for lesson in course.lessons if lesson.exercise is not None)
    practice_line = ngettext(
        "{passed} of {total} exercise passed.", "{passed} of {total} exercises passed.", exercises
    ).format(passed=number(exercises_passed), total=number(exercises))
    drills = sum(len(lesson.drills) for lesson in course.lessons)
    drills_line = ngettext("{solved} of {total} drill solved.", "{solved} of {total} drills solved.", drills).format(
        solved=number(drills_solved), total=number(drills)
    )
    parts: list[str] = [
        bold(_("Your progress")),
        lessons_line,
        score_line,
        *([drills_line] if drills else []),
        practice_line,
        _lesson_list(course, progress, dated=True),
    ]
    if done == len(course.lessons):
        parts.append(_("The course is complete. 🎉"))
    return Screen(join(parts), _keyboard(_lessons_button()))


def help_text() -> Screen:
    """Render /help: what the bot does, then every command in the order the menu lists them."""
    lines = [
        _("I teach the course in short slides, with a Quick Check and a practice exercise after each lesson."),
        "",
        *(command.help_line() for command in COMMANDS),
        "",
        _("Turn slides with the buttons under each message. Your place is saved as you go."),
    ]
    # A line that starts with '/start' would read left to right in Arabic: the command is isolated.
    return Screen(join((lessontext.plain(line) for line in lines), "\n"), _keyboard(_lessons_button()))


def reset_question() -> Screen:
    """Render the confirmation /reset asks for."""
    return Screen(
        escape(
            _("Reset your progress? Every lesson goes back to not started and your Quick Check answers are deleted.")
        ),
        _keyboard(
            [_button(_("Yes, reset"), ConfirmReset(Confirm.YES)), _button(_("Cancel"), ConfirmReset(Confirm.NO))]
        ),
    )


def reset_done(reset: bool) -> Screen:
    """Render the answer to the reset confirmation."""
    if reset:
        return Screen(escape(_("Your progress is reset. Send /start to begin again.")))
    # The way on, as from any screen: cancelling leaves the learner where they were, with the buttons to go on.
    return Screen(
        escape(_("Nothing was changed. Your progress is safe.")),
        _keyboard([_button(_("▶ Continue where I left off"), Continue())], _lessons_button()),
    )


def notice(text: str) -> Screen:
    """Render a short plain notice (commands and code in it kept left to right in Arabic)."""
    return Screen(escape(lessontext.plain(text)))


def language_picker(languages: list[str], chosen: str | None) -> Screen:
    """Render /language: every shipped language in its own name, and 'follow Telegram'; ✓ marks the choice."""

    def label(text: str, selected: bool) -> str:
        return f"✓ {text}" if selected else text

    names = [_button(label(own_name(code), code == chosen), ChooseLanguage.of(code)) for code in languages]
    rows = [names[i : i + 2] for i in range(0, len(names), 2)]
    rows.append([_button(label(_("Follow my Telegram setting"), chosen is None), ChooseLanguage.of(None))])
    text = _("Choose the language I speak with you. Your place in the course stays where it is.")
    return Screen(escape(text), _keyboard(*rows))


def language_chosen(following_telegram: bool) -> Screen:
    """Render the answer to a language choice, in the language just chosen, with the way back to the course."""
    if following_telegram:
        text = _("From now on I follow your Telegram language setting.")
    else:
        # Each catalog says this of its own language: "Теперь я говорю по-русски."
        text = _("From now on I speak English.")
    return Screen(
        escape(text),
        _keyboard([_button(_("▶ Continue where I left off"), Continue())], _lessons_button()),
    )


def _practice_buttons(
    lesson: Lesson, course: Course, hints_shown: int, *, passed: bool, mistake: str | None = None
) -> InlineKeyboardMarkup:
    exercise = _exercise(lesson)
    rows = []
    if not passed and hints_shown < len(exercise.hints):
        label = _("💡 Hint ({n} of {total})").format(n=number(hints_shown + 1), total=number(len(exercise.hints)))
        rows.append([_button(label, ShowHint(lesson.id, mistake or ShowHint.mistake))])
    rows.append(_next_lesson_button(course, lesson))
    if not passed:
        rows.append([_button(_("Leave the practice"), LeavePractice(lesson.id))])
    rows.append(_lessons_button())
    return _keyboard(*rows)


def _exercise(lesson: Lesson) -> Exercise:
    if lesson.exercise is None:
        raise ValueError(f"lesson {lesson.id!r} has no exercise")
    return lesson.exercise


def practice_intro(course: Course, lesson: Lesson) -> Screen:
    """Render a practice exercise: the task, the starter code to copy, and how to answer."""
    exercise = _exercise(lesson)
    parts: list[str] = [
        bold(fill(_("Practice: {title}"), title=lessontext.to_html(exercise.title))),
        lessontext.to_html(exercise.instructions),
    ]
    if exercise.fallback:
        parts.append(fallback_notice())
    parts.append(join([_("Starter code (tap it to copy):"), code_block(exercise.starter)], "\n"))
    parts.append(italic(_("Send your finished code as a message. I run it and check it.")))
    return Screen(join(parts), _practice_buttons(lesson, course, 0, passed=False))


def verdict_screen(
    course: Course,
    lesson: Lesson,
    result: RunResult,
    lines: list[str],
    likely: list[str],
    *,
    hints_shown: int,
    output_room: int = feedback.OUTPUT_MAX,
    mistake: str | None = None,
) -> Screen:
    """Render a graded run: its output (at most ``output_room`` characters), then the pass or what each failed
    check found, with the likely mistake behind it (``mistake``: its id, whose hint the Hint button shows first)."""
    parts: list[str] = [feedback.output_block(result, output_room)]
    if result.passed:
        parts.append(bold(_("✅ All checks passed. Well done!")))
        parts.append(_way_on_after_practice(course, lesson))
    else:
        parts.append(join([bold(_("Not yet:")), feedback_lines(lines, likely)], "\n"))
        parts.append(italic(_("Change your code and send it again; try as often as you like.")))
    return Screen(join(parts), _practice_buttons(lesson, course, hints_shown, passed=result.passed, mistake=mistake))


def _way_on_after_practice(course: Course, lesson: Lesson) -> str:
    """Say where a passed practice leads: the next lesson, or the end of the course."""
    following = course.next_lesson(lesson)
    if following is None:
        return escape(_("That was the course's last practice. /progress shows all you have done."))
    return fill(
        _("Next: lesson {n}, {title}. Tap it below, or ☰ Lessons for the course."),
        n=number(course.lessons.index(following) + 1),
        title=lessontext.to_html(following.title),
    )


def fitting(build: Callable[[int], Screen], room: int) -> Screen:
    """Return ``build(room)``, or ``build`` of a smaller room if that screen is over Telegram's message limit.

    ``room`` is what a screen may shrink (a run's output): a verdict then always goes out, with less output.
    """
    screen = build(room)
    while (over := visible_length(screen.text) - MESSAGE_TEXT_MAX) > 0 and room > 0:
        room = max(0, room - over)
        screen = build(room)
    return screen


def prose_in_practice(course: Course, lesson: Lesson, hints_shown: int) -> Screen:
    """Answer a sentence sent during a practice (not run, not counted), with the practice's ways out: Hint, Leave."""
    text = _(
        "That reads like a sentence, not Python, so I did not run it and it does not count as an attempt. "
        "Stuck? Tap 💡 Hint for a nudge, or Leave the practice to go back to the course. "
        "When your code is ready, send it as a message."
    )
    return Screen(escape(text), _practice_buttons(lesson, course, hints_shown, passed=False))


def code_outside_practice() -> Screen:
    """Answer code pasted outside a practice: /run runs it."""
    return Screen(
        escape(
            _(
                "That looks like code. To run it, send /run and then the code, for example: /run print(2 + 2). "
                "To have it checked, open a lesson's practice from /lessons."
            )
        )
    )


def practice_left(course: Course, lesson: Lesson | None) -> Screen:
    """Render the answer to leaving the practice (of ``lesson``, if still in the course), with the ways on."""
    text = escape(
        lessontext.plain(_("You left the practice: messages are no longer checked as answers. /run still runs code."))
    )
    if lesson is None or lesson.exercise is None:
        return Screen(text, _keyboard(_lessons_button()))
    back = _("💻 Back to the practice: {title}").format(title=lessontext.to_plain(lesson.exercise.title))
    return Screen(
        text,
        _keyboard([_button(back, StartPractice(lesson.id))], _next_lesson_button(course, lesson), _lessons_button()),
    )


def hint(lesson: Lesson, course: Course, shown: int, mistake: str | None = None) -> Screen:
    """Render the ``shown``-th hint (1-based) of the exercise, in the order for a learner who made ``mistake``."""
    exercise = _exercise(lesson)
    heading = _("💡 Hint {n} of {total}:").format(n=number(shown), total=number(len(exercise.hints)))
    text = exercise.hints[exercise.hint_order(mistake)[shown - 1]]
    return Screen(
        join([heading, lessontext.to_html(text)], " "),
        _practice_buttons(lesson, course, shown, passed=False, mistake=mistake),
    )


def run_output(output: Html, status: str | None, advice: Sequence[str] = ()) -> Screen:
    """Render an ungraded run: what it printed, why it ended if a limit stopped it, and the fix of a likely mistake."""
    parts = [output] + ([lessontext.plain(status)] if status is not None else [])
    if advice:
        parts.append(feedback_lines([], advice))
    return Screen(join(parts))


# Drills: one message, edited in place as the learner taps (bot/drills.py holds the rules).


def feedback_lines(lines: Sequence[str], likely: Sequence[str] = ()) -> Html:
    """Render feedback lines and likely mistakes, each in lesson markup, as HTML bullets."""
    return Html("\n".join(["✗ " + _line_html(line) for line in lines] + ["🔎 " + _line_html(m) for m in likely]))


def _line_html(line: str) -> Html:
    # A value from the learner's code may itself hold a backtick; then show the line literally.
    try:
        return lessontext.to_html(line)
    except lessontext.MarkupError:
        return escape(line)


def _drills_button(lesson: Lesson) -> list[InlineKeyboardButton]:
    return [_button(_("🧩 Code drills ▶"), StartDrills(lesson.id))] if lesson.drills else []


@dataclass(frozen=True)
class DrillView:
    """What a drill's screen shows besides the drill: the learner's attempt and what happened just now."""

    progress: DrillProgress
    order: list[int]  # the pieces' or choices' numbers in the order this learner's buttons list them
    solved: frozenset[str] = frozenset()  # ids of the lesson's drills this learner has solved
    verdict: Verdict | None = None  # the answer just graded, if the tap gave one
    quiz_left: bool = False  # questions of the Quick Check still unanswered: offered once the drills are done
    checking: bool = False  # the arrangement is being run: its verdict replaces this screen


_DRILL_HEADERS = {
    "parsons": lambda: _("🧩 Drill {n} of {total}: put the lines in order"),
    "fill": lambda: _("🧩 Drill {n} of {total}: fill in the blank"),
    "predict": lambda: _("🧩 Drill {n} of {total}: predict the output"),
}
INDENT_MARK = "⇥ "  # a Parsons button shows each level of a line's indentation with one (spaces would not show)


def piece_label(piece: str) -> str:
    """Return a Parsons line as its button shows it: indentation as marks, the code kept left to right."""
    code_text = piece.lstrip(" ")
    return isolate(INDENT_MARK * ((len(piece) - len(code_text)) // 4) + code_text)


def drill(course: Course, lesson: Lesson, shown: Drill, view: DrillView) -> Screen:
    """Render a drill: the task, the learner's attempt, the verdict, and buttons for the next tap."""
    header = fill(
        _DRILL_HEADERS[shown.kind](), n=number(lesson.drills.index(shown) + 1), total=number(len(lesson.drills))
    )
    parts: list[str] = [join([bold(header), lessontext.to_html(shown.prompt)], "\n")]
    if shown.fallback:
        parts.append(fallback_notice())
    progress = view.progress
    if isinstance(shown, ParsonsDrill):
        parts += _parsons_body(shown, progress)
    elif shown.kind == "fill":
        parts.append(code_block(shown.answer if progress.done else shown.code))
    else:
        parts.append(code_block(shown.code))
        if progress.done:
            parts.append(join([_("It prints:"), pre(shown.choices[shown.correct])], "\n"))
    parts += _drill_verdict(lesson, shown, view)
    rows = _drill_moves(lesson, shown, view) if not progress.done else _drill_way_on(course, lesson, shown, view)
    chips = _drill_chips(lesson, shown, view.solved)
    rows.append(_lessons_button(beside=len(chips)) + chips)
    return Screen(join(parts), _keyboard(*rows))


def _parsons_body(shown: ParsonsDrill, progress: DrillProgress) -> list[str]:
    body: list[str]
    if not progress.placed:
        body = [italic(_("Tap the lines in order, starting with the first."))]
    else:
        body = [code_block("\n".join(arrangement(shown, progress.placed)))]
    if progress.done:
        return body
    status = ngettext("{placed} of {total} line placed.", "{placed} of {total} lines placed.", len(shown.lines)).format(
        placed=number(len(progress.placed)), total=number(len(shown.lines))
    )
    if shown.distractors:
        status += " " + ngettext("One line is not needed.", "{n} lines are not needed.", len(shown.distractors)).format(
            n=number(len(shown.distractors))
        )
    return [*body, status]


def _drill_verdict(lesson: Lesson, shown: Drill, view: DrillView) -> list[str]:
    verdict, progress = view.verdict, view.progress
    if progress.done:
        if verdict is not None and verdict.reason is Reason.SAME_RESULTS:
            right = _("✅ Right! Your order differs from ours but gives the same results, so it works just as well.")
        else:
            right = _("✅ Right!")
        lines: list[str] = [bold(right), lessontext.to_html(shown.explanation)]
        if all(d.id in view.solved or d.id == shown.id for d in lesson.drills) and len(lesson.drills) > 1:
            lines.append(italic(_("Every drill of this lesson is solved.")))
        return [join(lines, "\n")]
    if view.checking:
        return [italic(_("⏳ Trying your order…"))]
    if verdict is None:
        return [italic(_("This order is not right yet. Undo a line or start over."))] if progress.checked else []
    messages = {
        Reason.WRONG_CHOICE: lambda: _wrong_choice(shown, verdict.detail),
        Reason.DISTRACTOR: lambda: fill(
            _("✗ {line} does not belong in this program. Undo and try again."), line=code(verdict.detail)
        ),
        Reason.NOT_PYTHON: lambda: fill(
            _("✗ In this order the lines are not valid Python: {error}"), error=code(verdict.detail)
        ),
        Reason.EMPTY_BLOCK: lambda: fill(
            _("✗ {opener} opens a block, but the line right below it is not indented. Put a line of its block there."),
            opener=code(verdict.detail),
        ),
        Reason.STRAY_INDENT: lambda: fill(
            _("✗ {line} is indented, but the line above it opens no block: it belongs right under {opener}."),
            line=code(verdict.detail),
            opener=code(verdict.opener),
        ),
        Reason.RAISES: lambda: fill(
            _("✗ In this order the program stops with an error: {error}"), error=code(verdict.detail)
        ),
        Reason.CHECKS: lambda: join(
            [bold(_("This order runs, but it does not do what it should:")), feedback_lines(list(verdict.failed))], "\n"
        ),
        Reason.UNCHECKED: lambda: escape(
            _("✗ That is not the order we wrote, and running code is off here, so I cannot try yours.")
        ),
        Reason.UNAVAILABLE: lambda: escape(_("Running code is unavailable right now. Please try again later.")),
    }
    return [messages[verdict.reason]()] if verdict.reason in messages else []


def _wrong_choice(shown: Drill, choice: str) -> Html:
    """Say that a choice is wrong and why, in the drill's language (its reason is authored per choice)."""
    index = shown.choices.index(choice) if isinstance(shown, ChoiceDrill) and choice in shown.choices else -1
    reason = shown.reason(index) if isinstance(shown, ChoiceDrill) else ""
    lines = [fill(_("✗ {choice} is not it."), choice=code(choice))]
    if reason:
        lines.append(lessontext.to_html(reason))
    lines.append(escape(_("Try another one.")))
    return join(lines, "\n")


def _tap(lesson: Lesson, shown: Drill, progress: DrillProgress, move: Move, arg: int = 0) -> DrillTap:
    return DrillTap(lesson.id, shown.id, move, arg, progress.stamp)


def _drill_moves(lesson: Lesson, shown: Drill, view: DrillView) -> list[list[InlineKeyboardButton]]:
    progress = view.progress
    if isinstance(shown, ChoiceDrill):
        return [
            [
                _button(
                    ("✗ " if i in progress.ruled_out else "") + isolate(shown.choices[i]),
                    _tap(lesson, shown, progress, Move.CHOOSE, i),
                )
            ]
            for i in view.order
        ]
    rows = []
    if len(progress.placed) < len(shown.lines):
        rows = [
            [_button(piece_label(shown.pieces[i]), _tap(lesson, shown, progress, Move.PLACE, i))]
            for i in view.order
            if i not in progress.placed
        ]
    controls = []
    if progress.placed:
        controls.append(_button(_("↶ Undo"), _tap(lesson, shown, progress, Move.UNDO)))
        controls.append(_button(_("⟲ Start over"), _tap(lesson, shown, progress, Move.RESET)))
    if len(progress.placed) == len(shown.lines) and not progress.checked and not view.checking:
        controls.append(_button(_("✔ Check"), _tap(lesson, shown, progress, Move.CHECK)))
    return [*rows, controls]


def _next_unsolved(lesson: Lesson, shown: Drill, solved: frozenset[str]) -> Drill | None:
    at = lesson.drills.index(shown)
    after = lesson.drills[at + 1 :] + lesson.drills[:at]
    return next((d for d in after if d.id not in solved), None)


def _drill_way_on(course: Course, lesson: Lesson, shown: Drill, view: DrillView) -> list[list[InlineKeyboardButton]]:
    """Buttons under a solved drill: try it again, then the next drill, or what is left of the lesson."""
    rows = [[_button(_("↻ Again"), _tap(lesson, shown, view.progress, Move.AGAIN))]]
    following = _next_unsolved(lesson, shown, view.solved | {shown.id})
    if following is not None:
        rows[0].append(_button(_("Next drill ▶"), ShowDrill(lesson.id, following.id)))
        return rows
    if view.quiz_left:
        rows[0].append(_button(_("Quick Check ▶"), StartQuiz(lesson.id)))
    rows.append(_practice_button(lesson))
    rows.append(_next_lesson_button(course, lesson))
    return rows


def _drill_chips(lesson: Lesson, shown: Drill, solved: frozenset[str]) -> list[InlineKeyboardButton]:
    """Return one small button per drill of the lesson, to go to any of them: ✅ marks the solved, · the one shown."""
    if len(lesson.drills) < 2:
        return []
    chips = []
    for n, other in enumerate(lesson.drills, start=1):
        label = number(n) + (" ✅" if other.id in solved else "")
        chips.append(_button(f"· {label} ·" if other.id == shown.id else label, ShowDrill(lesson.id, other.id)))
    return chips
