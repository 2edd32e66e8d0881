"""The screens of what brings a learner back: the review, the reminders and their settings, the streak, links
into the course and the completion card's caption. Pure: no I/O; every word through gettext.

Nothing here shames: a streak that ended is not mentioned, a paused reminder says so plainly, and no
reminder speaks of losing anything.
"""

from __future__ import annotations

import datetime as dt

from babel.dates import format_timedelta
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot import lessontext
from bot.callbacks import (
    CallbackData,
    Continue,
    ReminderChoice,
    ReviewChoice,
    ShowDrill,
    ShowMenu,
    StartReview,
    StopReview,
)
from bot.course.model import ChoiceDrill, Lesson, ParsonsDrill
from bot.i18n import _, current_language, ngettext, number
from bot.render import Screen
from bot.retention.review import ReviewSummary
from bot.retention.streak import Streak
from bot.safehtml import Html, bold, code_block, escape, join, pre

SEEN_MODULO = 10**6  # ReviewChoice.seen: a card's last review, in seconds, modulo this


def _button(text: str, data: CallbackData) -> InlineKeyboardButton:
    return InlineKeyboardButton(text, callback_data=data.pack())


def when(moment: dt.datetime, now: dt.datetime) -> str:
    """Return how far ``moment`` is from ``now`` in words of the current language: 'in 3 hours', 'now'."""
    delta = moment - now
    if delta <= dt.timedelta(minutes=1):
        return _("now")
    return format_timedelta(delta, add_direction=True, threshold=1.5, locale=current_language())


# The review


def review_intro(due: int) -> Screen:
    """Render the start of a review: how many cards are due, and the way to stop."""
    text = ngettext(
        "Review: {n} card is due. Answer it as in the lesson; stop whenever you like.",
        "Review: {n} cards are due. Answer them as in the lesson; stop whenever you like.",
        due,
    ).format(n=number(due))
    return Screen(escape(text), InlineKeyboardMarkup([[_button(_("⏹ Stop the review"), StopReview())]]))


def nothing_due(next_due: dt.datetime | None, now: dt.datetime) -> Screen:
    """Render /review with nothing due: when the next card is, or where cards come from."""
    if next_due is None:
        text = _(
            "You have no review cards yet: every Quick Check question and drill you answer in a lesson becomes one."
        )
        return Screen(escape(text), _menu_keyboard())
    lines = [_("Nothing is due for review now."), _("The next card is due {when}.").format(when=when(next_due, now))]
    return Screen(escape("\n".join(lines)), _menu_keyboard())


def review_done(next_due: dt.datetime | None, now: dt.datetime) -> Screen:
    """Render the end of a review: nothing else is due, and when the next card is."""
    lines = [_("Review done: nothing else is due now.")]
    if next_due is not None:
        lines.append(_("The next card is due {when}.").format(when=when(next_due, now)))
    return Screen(escape("\n".join(lines)), _menu_keyboard())


def review_stopped() -> Screen:
    """Render a review the learner stopped."""
    return Screen(escape(_("Review stopped. The cards left wait for you: send /review any time.")), _menu_keyboard())


def _menu_keyboard() -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[_button(_("☰ Lessons"), ShowMenu())]])


def parsons_card(lesson: Lesson, drill: ParsonsDrill) -> Screen:
    """Render a Parsons drill as a review card: one tap opens its drill screen."""
    drill_button = _button(_("▶ Open the drill"), ShowDrill(lesson.id, drill.id))
    header = _("Review · {lesson}").format(lesson=lessontext.to_plain(lesson.title))
    text = join([bold(header), escape(_("Put the lines in order again."))], "\n")
    return Screen(text, InlineKeyboardMarkup([[drill_button], [_button(_("⏹ Stop the review"), StopReview())]]))


def choice_card(lesson: Lesson, drill: ChoiceDrill, card_id: int, order: list[int], last_review: int | None) -> Screen:
    """Render a choice drill as a review card: its task and code, its choices in a fresh order as buttons."""
    header = _("Review · {lesson}").format(lesson=lessontext.to_plain(lesson.title))
    parts: list[str] = [join([bold(header), lessontext.to_html(drill.prompt)], "\n"), code_block(drill.code)]
    seen = (last_review or 0) % SEEN_MODULO
    rows = [[_button(drill.choices[i], ReviewChoice(card_id, i, seen))] for i in order]
    rows.append([_button(_("⏹ Stop the review"), StopReview())])
    return Screen(join(parts), InlineKeyboardMarkup(rows))


def choice_answered(lesson: Lesson, drill: ChoiceDrill, choice: int) -> Screen:
    """Render a choice drill's review card once answered: the verdict and the right answer, no buttons."""
    header = _("Review · {lesson}").format(lesson=lessontext.to_plain(lesson.title))
    verdict = _("✅ Right.") if choice == drill.correct else _("❌ Not this time. The answer:")
    shown = drill.answer if drill.kind == "fill" else drill.choices[drill.correct]
    parts: list[Html | str] = [
        join([bold(header), lessontext.to_html(drill.prompt)], "\n"),
        join([escape(verdict), code_block(shown) if drill.kind == "fill" else pre(shown)], "\n"),
    ]
    if drill.explanation:
        parts.append(lessontext.to_html(drill.explanation))
    return Screen(join(parts))


# /progress


def review_lines(summary: ReviewSummary, streak: Streak) -> list[str]:
    """Return /progress's lines about review and the streak (the streak only while there is one)."""
    lines = [
        _("Review: {due} due now, {learned} learned, of {total} cards.").format(
            due=number(summary.due), learned=number(summary.learned), total=number(summary.total)
        )
    ]
    if streak.alive:
        lines.append(
            ngettext(
                "Streak: {days} day with something finished.",
                "Streak: {days} days with something finished.",
                streak.days,
            ).format(days=number(streak.days))
        )
    return lines


def review_button(due: int) -> list[InlineKeyboardButton]:
    """Return the row that starts the review, when something is due."""
    return [_button(_("▶ Review now"), StartReview())] if due else []


# Reminders


def reminder_offer() -> Screen:
    """Render the one offer of a daily reminder, after the first lesson finished."""
    text = _(
        "Would you like a short daily reminder when something waits for you? It comes around the time you "
        "usually study, at most once a day. You can change or stop it with /settings."
    )
    return Screen(
        escape(text),
        InlineKeyboardMarkup(
            [[_button(_("🔔 Yes, remind me"), ReminderChoice("yes")), _button(_("No, thanks"), ReminderChoice("no"))]]
        ),
    )


def reminder_answer(accepted: bool) -> Screen:
    """Render what the learner chose on the offer."""
    if accepted:
        return Screen(escape(_("Reminders are on. Change or stop them any time with /settings.")))
    return Screen(escape(_("No reminders. If you change your mind, send /settings.")))


def reminder(cards_due: int, lesson: Lesson | None) -> Screen:
    """Render a daily reminder: what waits, one tap to open it, and Snooze and Stop."""
    if cards_due:
        text = ngettext("{n} card is waiting for review.", "{n} cards are waiting for review.", cards_due).format(
            n=number(cards_due)
        )
        opener = _button(_("▶ Review now"), StartReview())
    else:
        title = lessontext.to_plain(lesson.title) if lesson is not None else ""
        text = _("Your lesson “{title}” is waiting where you left it.").format(title=title)
        opener = _button(_("▶ Continue where I left off"), Continue())
    return Screen(
        escape(text),
        InlineKeyboardMarkup(
            [
                [opener],
                [
                    _button(_("⏰ Later"), ReminderChoice("snooze")),
                    _button(_("🔕 Stop reminders"), ReminderChoice("off")),
                ],
            ]
        ),
    )


def reminders_paused() -> Screen:
    """Render the note that reminders pause after several went unanswered: neutral, and how to resume."""
    text = _(
        "The last few reminders went unanswered, so I have paused them. Send /settings to turn them back on "
        "whenever you like."
    )
    return Screen(escape(text))


def snoozed(until: dt.datetime, now: dt.datetime) -> str:
    """Return the toast for a snoozed reminder."""
    return _("I will remind you again {when}.").format(when=when(until, now))


def settings(status_on: bool, next_at: dt.datetime | None, now: dt.datetime, shift_hours: int) -> Screen:
    """Render /settings: whether reminders are on, when the next comes, and buttons to move or stop them."""
    if not status_on:
        lines = [_("Daily reminders are off.")]
        rows = [[_button(_("🔔 Turn reminders on"), ReminderChoice("on"))]]
        return Screen(escape("\n".join(lines)), InlineKeyboardMarkup(rows))
    lines = [_("Daily reminders are on, around the time you usually study.")]
    if shift_hours:
        lines.append(
            ngettext("Moved by {n} hour.", "Moved by {n} hours.", abs(shift_hours)).format(
                n=("+" if shift_hours > 0 else "−") + number(abs(shift_hours))
            )
        )
    if next_at is not None:
        lines.append(_("The next one comes {when}.").format(when=when(next_at, now)))
    else:
        lines.append(_("The next one comes when something waits for you."))
    rows = [
        [
            _button(_("⏪ An hour earlier"), ReminderChoice("earlier")),
            _button(_("An hour later ⏩"), ReminderChoice("later")),
        ],
        [_button(_("At my usual time"), ReminderChoice("auto"))],
        [_button(_("🔕 Stop reminders"), ReminderChoice("off"))],
    ]
    return Screen(escape("\n".join(lines)), InlineKeyboardMarkup(rows))


def reminders_stopped() -> str:
    """Return what stopping reminders says."""
    return _("Reminders stopped. Send /settings to turn them back on.")


# Links and the completion card


def unknown_link() -> str:
    """Return the note above the course menu for a link that leads nowhere."""
    return _("That link does not lead anywhere in this course, so here is the course menu.")


def card_caption(link: str) -> str:
    """Return the completion card's caption: what it is, and the link to share."""
    return _("You finished the course! Here is your card to save or forward. Share the course: {link}").format(
        link=link
    )
