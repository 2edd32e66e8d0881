"""After a reload, learners who are reading a slide that changed see the new one in place.

Only learners active recently are refreshed (their place changed in the last half hour):
they are the ones looking at the chat, and it bounds the edits a reload sends.
"""

from __future__ import annotations

import datetime as dt
import logging

from telegram import Bot
from telegram.constants import ParseMode
from telegram.error import TelegramError

from bot import render
from bot.handlers.common import NO_PREVIEW
from bot.learner import Learner, LessonProgress
from bot.library.live import Edition
from bot.states import Stage, stage
from bot.storage.db import Database

log = logging.getLogger(__name__)

RECENT = dt.timedelta(minutes=30)


async def refresh_readers(bot: Bot, db: Database, before: Edition, after: Edition, now: dt.datetime) -> int:
    """Edit each recent reader's slide message whose screen differs in `after`; return how many were edited."""
    edited = 0
    for learner, progress in await db.slide_readers(now - RECENT):
        old, new = _screen(before, learner, progress), _screen(after, learner, progress)
        if new is None or old == new or learner.reader_message_id is None:
            continue
        try:
            await bot.edit_message_text(
                new.text,
                chat_id=learner.chat_id,
                message_id=learner.reader_message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=new.buttons,
                link_preview_options=NO_PREVIEW,
            )
        except TelegramError as exc:
            # the message may be gone or too old to edit; the learner sees the new slide at their next tap
            log.info("could not refresh the slide of user %s: %s", learner.user_id, exc)
        else:
            edited += 1
    return edited


def _screen(edition: Edition, learner: Learner, progress: LessonProgress) -> render.Screen | None:
    """The slide the learner is on, as `edition` renders it in their language (None: the lesson or slide is gone)."""
    language = edition.i18n.choose(learner.language, learner.telegram_language)
    with edition.i18n.use(language):
        course = edition.content.course(language)
        lesson = course.lesson(learner.lesson_id) if learner.lesson_id else None
        index = lesson.slide_index(progress.slide_id) if lesson is not None and progress.slide_id else None
        if lesson is None or index is None:
            return None
        return render.slide(course, lesson, index, done=stage(progress) is Stage.DONE)
