"""Reading a lesson as a flow: opening a place (or going back into the Quick Check under way), turning a slide."""

from __future__ import annotations

from bot import render
from bot.changes import Event, SlideShown
from bot.course.model import Course, Lesson
from bot.flows import practice
from bot.flows.outcome import Outcome, ResumeQuiz, Show
from bot.i18n import _
from bot.learner import EventKind, Learner, LessonProgress, ReaderView
from bot.navigation import Place, can_show, reached_after, slide_index
from bot.states import QuizRound, Stage, quiz_round, stage


def open_place(course: Course, learner: Learner, place: Place, saved: LessonProgress, tapped: int | None) -> Outcome:
    """Show ``place`` in the tapped message (``tapped``: its id), or take the learner back into a Quick Check under
    way; opening another lesson leaves the practice under way."""
    left = practice.leave_other(learner, place.lesson.id)
    if stage(saved) is Stage.QUIZ and quiz_round(learner, place.lesson.id) is not QuizRound.NONE:
        return left.then(Outcome(resume=ResumeQuiz(place.lesson.id)))
    return left.then(show_slide(course, learner, place, saved, tapped))


def _already_shown(learner: Learner, tapped: int | None, place: Place, saved: LessonProgress) -> bool:
    return (
        tapped is not None
        and learner.reader_message_id == tapped
        and learner.reader_view is ReaderView.SLIDE
        and learner.lesson_id == place.lesson.id
        and saved.started
        and saved.slide_id == place.lesson.slides[place.slide].id
    )


def show_slide(course: Course, learner: Learner, place: Place, saved: LessonProgress, tapped: int | None) -> Outcome:
    """Show the slide at ``place`` in the tapped message and put the learner there (with its SLIDE event, and BACK
    after it when the learner went back)."""
    if _already_shown(learner, tapped, place, saved):
        return Outcome()  # the second tap of a double tap: the slide is on screen already
    lesson, index = place.lesson, place.slide
    slide_id = lesson.slides[index].id
    screen = render.slide(course, lesson, index, done=stage(saved) is Stage.DONE)
    events = [Event(EventKind.SLIDE, lesson.id, item_id=slide_id)]
    if saved.started and learner.lesson_id == lesson.id and index < slide_index(lesson, saved):
        # After the slide's own event, so its time on screen counts from when it was shown.
        events.append(Event(EventKind.BACK, lesson.id, item_id=saved.slide_id))
    shown = SlideShown(lesson.id, slide_id, reached_after(lesson, saved, index), last=index == lesson.last_slide)
    return Outcome(screens=(Show(screen, reader=ReaderView.SLIDE),), changes=(shown,), events=tuple(events))


def turn(
    course: Course,
    learner: Learner,
    lesson: Lesson,
    saved: LessonProgress,
    slide_id: str,
    successor: str | None,
    tapped: int | None,
) -> Outcome:
    """Turn to the slide a Back or Next button names, by its id, unless that would skip an unread slide.

    ``successor``: for a slide removed since the button was made, the one that stands in its place (as for a
    learner on it), or None.
    """
    index = lesson.slide_index(slide_id)
    toast = None
    if index is None:
        index = lesson.slide_index(successor) if successor is not None else None
        toast = _("That slide was taken out of the lesson. Here is the one that follows it.")
    if index is None or not can_show(lesson, saved, index):
        # A forged, unknown or out-of-date button: show the learner's real place instead.
        here = show_slide(course, learner, Place(lesson, slide_index(lesson, saved)), saved, tapped)
        return here.then(Outcome(toast=_("That button is out of date. Here is where you are.")))
    shown = show_slide(course, learner, Place(lesson, index), saved, tapped)
    return shown.then(Outcome(toast=toast)) if toast else shown
