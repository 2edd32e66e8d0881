"""Turn the course and a learner's progress into the messages and buttons they see. Pure: no I/O."""

from __future__ import annotations

import html
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot import markup
from bot.callbacks import (
    CallbackData,
    ChooseLanguage,
    ConfirmReset,
    Continue,
    LeavePractice,
    OpenLesson,
    RetakeMissed,
    ShowHint,
    ShowMenu,
    ShowSlide,
    StartPractice,
    StartQuiz,
)
from bot.course import Course, Lesson, Question
from bot.i18n import _, date, fraction, ngettext, number, own_name, percent
from bot.navigation import Place, Stage, stage
from bot.storage.db import NOT_STARTED, LessonProgress


@dataclass(frozen=True)
class Screen:
    """One message: HTML text and its inline buttons."""

    text: str
    buttons: InlineKeyboardMarkup | None = None


@dataclass(frozen=True)
class PollSpec:
    """A quiz poll ready to send."""

    question: str
    options: tuple[str, ...]
    correct: int
    explanation: str


def _button(text: str, data: CallbackData) -> InlineKeyboardButton:
    return InlineKeyboardButton(text, callback_data=data.pack())


def _keyboard(*rows: list[InlineKeyboardButton]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([row for row in rows if row])


def fallback_notice() -> str:
    """Return the line that says an item is shown in English because it is not translated yet."""
    return "<i>" + html.escape(_("This part is not translated yet, so it is shown in English.")) + "</i>"


def lesson_state(lesson: Lesson, progress: LessonProgress, *, dated: bool = False) -> str:
    """Return a lesson's state in words: not started, at slide n of N, Quick Check, or done (on which day)."""
    current = stage(progress)
    if current is Stage.DONE:
        if dated and progress.completed_on is not None:
            return _("done on {date} ✅").format(date=date(progress.completed_on))
        return _("done ✅")
    if current is Stage.QUIZ:
        return _("Quick Check to answer")
    if current is Stage.READING:
        return _("in progress, slide {n} of {total}").format(
            n=number(progress.slide + 1), total=number(len(lesson.slides))
        )
    return _("not started")


def _lesson_list(course: Course, progress: dict[str, LessonProgress], *, dated: bool = False) -> str:
    lines = []
    for lesson in course.lessons:
        state = lesson_state(lesson, progress.get(lesson.id, NOT_STARTED), dated=dated)
        lines.append(f"{number(lesson.number)}. {markup.to_html(lesson.title)} — {html.escape(state)}")
    return "\n".join(lines)


def menu(course: Course, progress: dict[str, LessonProgress], place: Place | None, *, welcome: bool = False) -> Screen:
    """Render the course menu: every lesson with its state, and one button to start or continue."""
    parts = []
    if welcome:
        parts.append(html.escape(_("Welcome! I teach short programming courses right here in the chat.")))
    parts.append(f"<b>{html.escape(course.title)}</b>\n{html.escape(course.description)}")
    parts.append(_lesson_list(course, progress))
    rows: list[list[InlineKeyboardButton]] = []
    if place is None:
        parts.append(html.escape(_("You finished the course. Open any lesson to review it.")))
    elif not any(p.started for p in progress.values()):
        rows.append([_button(_("▶ Start the course"), Continue())])
    else:
        label = _("▶ Continue: lesson {lesson}, slide {n}").format(
            lesson=number(place.lesson.number), n=number(place.slide + 1)
        )
        rows.append([_button(label, Continue())])
    for lesson in course.lessons:
        rows.append([_button(f"{number(lesson.number)}. {markup.to_plain(lesson.title)}", OpenLesson(lesson.id))])
    return Screen("\n\n".join(parts), _keyboard(*rows))


def slide(course: Course, lesson: Lesson, index: int) -> Screen:
    """Render slide ``index`` of ``lesson`` with Back, Next (or Quick Check) and 'n / N'."""
    current = lesson.slides[index]
    header = html.escape(_("Lesson {n} of {total}: {title}")).format(
        n=number(lesson.number), total=number(len(course.lessons)), title=markup.to_html(lesson.title)
    )
    parts = [f"<i>{header}</i>", f"<b>{markup.to_html(current.title)}</b>\n{markup.to_html(current.text)}"]
    if current.code:
        parts.append(markup.code_block(current.code))
    if current.fallback:
        parts.append(fallback_notice())
    parts.append(fraction(index + 1, len(lesson.slides)))
    nav = []
    if index > 0:
        nav.append(_button(_("◀ Back"), ShowSlide(lesson.id, index - 1)))
    if index < lesson.last_slide:
        nav.append(_button(_("Next ▶"), ShowSlide(lesson.id, index + 1)))
    else:
        nav.append(_button(_("Quick Check ▶"), StartQuiz(lesson.id)))
    return Screen("\n\n".join(parts), _keyboard(nav, [_button(_("☰ Lessons"), ShowMenu())]))


def quiz_intro(lesson: Lesson, remaining: int, *, retake: bool) -> Screen:
    """Render the message that replaces the slides while the Quick Check polls are answered."""
    title = html.escape(_("Quick Check: {title}")).format(title=markup.to_html(lesson.title))
    if retake:
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
        f"<b>{title}</b>\n{html.escape(body)}",
        _keyboard([_button(_("◀ Back to the slides"), ShowSlide(lesson.id, lesson.last_slide))]),
    )


def poll(question: Question) -> PollSpec:
    """Return the quiz poll for ``question``."""
    return PollSpec(
        markup.plain(question.question),
        tuple(markup.plain(o) for o in question.options),
        question.correct,
        markup.plain(question.explanation),
    )


def quiz_result(course: Course, lesson: Lesson, correct: int, missed: int) -> Screen:
    """Render the end of a Quick Check: the score, the recap and the way on."""
    total = len(lesson.quiz)
    score = _("Quick Check: {correct} of {total} correct.").format(correct=number(correct), total=number(total))
    # Kept out of the f-string: pybabel on Python 3.11 does not look inside one.
    recap = html.escape(_("Recap"))
    parts = [f"<b>{html.escape(score)}</b>", f"<b>{recap}</b>\n{markup.to_html(lesson.recap)}"]
    if lesson.recap_fallback:
        parts.append(fallback_notice())
    rows = []
    if lesson.exercise is not None:
        rows.append(
            [
                _button(
                    _("💻 Practice: {title}").format(title=markup.to_plain(lesson.exercise.title)),
                    StartPractice(lesson.id),
                )
            ]
        )
    if missed:
        label = ngettext("↻ Retake the question I missed", "↻ Retake the {n} questions I missed", missed).format(
            n=number(missed)
        )
        rows.append([_button(label, RetakeMissed(lesson.id))])
    following = course.next_lesson(lesson)
    if following is not None:
        rows.append(
            [
                _button(
                    _("Next lesson: {title} ▶").format(title=markup.to_plain(following.title)), OpenLesson(following.id)
                )
            ]
        )
    else:
        parts.append(html.escape(_("That was the last lesson of the course. Well done!")))
    rows.append([_button(_("☰ Lessons"), ShowMenu())])
    return Screen("\n\n".join(parts), _keyboard(*rows))


def progress_report(
    course: Course,
    progress: dict[str, LessonProgress],
    correct: int,
    total: int,
    answered: int,
    exercises_passed: int = 0,
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
    heading = html.escape(_("Your progress"))
    parts = [
        f"<b>{heading}</b>",
        html.escape(lessons_line),
        html.escape(score_line),
        html.escape(practice_line),
        _lesson_list(course, progress, dated=True),
    ]
    if done == len(course.lessons):
        parts.append(html.escape(_("The course is complete. 🎉")))
    return Screen("\n\n".join(parts), _keyboard([_button(_("☰ Lessons"), ShowMenu())]))


def help_text() -> Screen:
    """Render /help."""
    lines = [
        _("I teach the course in short slides, with a Quick Check and a practice exercise after each lesson."),
        "",
        _("/start – welcome and the course"),
        _("/lessons – the course menu"),
        _("/progress – lessons done and your score"),
        _("/reset – start the course over"),
        _("/run CODE – run Python code and see its output"),
        _("/language – choose the language I speak"),
        _("/help – this message"),
        "",
        _("Turn slides with the buttons under each message. Your place is saved as you go."),
    ]
    # A line that starts with '/start' would read left to right in Arabic: the command is isolated.
    return Screen(
        html.escape("\n".join(markup.plain(line) for line in lines)), _keyboard([_button(_("☰ Lessons"), ShowMenu())])
    )


def reset_question() -> Screen:
    """Render the confirmation /reset asks for."""
    return Screen(
        html.escape(
            _("Reset your progress? Every lesson goes back to not started and your Quick Check answers are deleted.")
        ),
        _keyboard([_button(_("Yes, reset"), ConfirmReset("yes")), _button(_("Cancel"), ConfirmReset("no"))]),
    )


def reset_done(reset: bool) -> Screen:
    """Render the answer to the reset confirmation."""
    if reset:
        return Screen(html.escape(_("Your progress is reset. Send /start to begin again.")))
    return Screen(html.escape(_("Nothing was changed. Your progress is safe.")))


def notice(text: str) -> Screen:
    """Render a short plain notice (commands and code in it kept left to right in Arabic)."""
    return Screen(html.escape(markup.plain(text)))


def language_picker(languages: list[str], chosen: str | None) -> Screen:
    """Render /language: every shipped language in its own name, and 'follow Telegram'; ✓ marks the choice."""

    def label(text: str, selected: bool) -> str:
        return f"✓ {text}" if selected else text

    names = [_button(label(own_name(code), code == chosen), ChooseLanguage.of(code)) for code in languages]
    rows = [names[i : i + 2] for i in range(0, len(names), 2)]
    rows.append([_button(label(_("Follow my Telegram setting"), chosen is None), ChooseLanguage.of(None))])
    text = _("Choose the language I speak with you. Your place in the course stays where it is.")
    return Screen(html.escape(text), _keyboard(*rows))


def language_chosen(following_telegram: bool) -> Screen:
    """Render the answer to a language choice, in the language just chosen, with the way back to the course."""
    if following_telegram:
        text = _("From now on I follow your Telegram language setting.")
    else:
        # Each catalog says this of its own language: "Теперь я говорю по-русски."
        text = _("From now on I speak English.")
    return Screen(
        html.escape(text),
        _keyboard([_button(_("▶ Continue where I left off"), Continue())], [_button(_("☰ Lessons"), ShowMenu())]),
    )


def commands() -> list[tuple[str, str]]:
    """Return the command menu for setMyCommands, in the current language."""
    return [
        ("start", _("Welcome and the course")),
        ("lessons", _("The course menu")),
        ("progress", _("Lessons done and your score")),
        ("reset", _("Start the course over")),
        ("run", _("Run Python code, e.g. /run print(1)")),
        ("language", _("Choose the language I speak")),
        ("help", _("How to use this bot")),
    ]


def _practice_buttons(lesson: Lesson, course: Course, hints_shown: int, *, passed: bool) -> InlineKeyboardMarkup:
    exercise = lesson.exercise
    rows = []
    if not passed and hints_shown < len(exercise.hints):
        rows.append(
            [
                _button(
                    _("💡 Hint ({n} of {total})").format(n=number(hints_shown + 1), total=number(len(exercise.hints))),
                    ShowHint(lesson.id),
                )
            ]
        )
    following = course.next_lesson(lesson)
    if following is not None:
        rows.append(
            [
                _button(
                    _("Next lesson: {title} ▶").format(title=markup.to_plain(following.title)), OpenLesson(following.id)
                )
            ]
        )
    if not passed:
        rows.append([_button(_("Leave the practice"), LeavePractice(lesson.id))])
    rows.append([_button(_("☰ Lessons"), ShowMenu())])
    return _keyboard(*rows)


def practice_intro(course: Course, lesson: Lesson) -> Screen:
    """Render a practice exercise: the task, the starter code to copy, and how to answer."""
    exercise = lesson.exercise
    title = html.escape(_("Practice: {title}")).format(title=markup.to_html(exercise.title))
    parts = [f"<b>{title}</b>", markup.to_html(exercise.instructions)]
    if exercise.fallback:
        parts.append(fallback_notice())
    parts.append(html.escape(_("Starter code (tap it to copy):")) + "\n" + markup.code_block(exercise.starter))
    parts.append("<i>" + html.escape(_("Send your finished code as a message. I run it and check it.")) + "</i>")
    return Screen("\n\n".join(parts), _practice_buttons(lesson, course, 0, passed=False))


def practice_verdict(
    course: Course, lesson: Lesson, output: str, feedback: str, *, passed: bool, hints_shown: int
) -> Screen:
    """Render a graded run: the output, then either the pass or what each failed check found."""
    parts = [output]
    if passed:
        parts.append("<b>" + html.escape(_("✅ All checks passed. Well done!")) + "</b>")
    else:
        parts.append("<b>" + html.escape(_("Not yet:")) + "</b>\n" + feedback)
        parts.append("<i>" + html.escape(_("Change your code and send it again; try as often as you like.")) + "</i>")
    return Screen("\n\n".join(parts), _practice_buttons(lesson, course, hints_shown, passed=passed))


def hint(lesson: Lesson, course: Course, shown: int) -> Screen:
    """Render hint number ``shown`` (1-based) of the exercise."""
    text = html.escape(_("💡 Hint {n} of {total}:")).format(n=number(shown), total=number(len(lesson.exercise.hints)))
    return Screen(
        f"{text} {markup.to_html(lesson.exercise.hints[shown - 1])}",
        _practice_buttons(lesson, course, shown, passed=False),
    )


def run_output(output: str, status: str | None) -> Screen:
    """Render an ungraded run: what it printed, and why it ended if a limit stopped it."""
    return Screen(output if status is None else f"{output}\n\n{html.escape(markup.plain(status))}")
