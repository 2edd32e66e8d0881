"""The floor for the bot benchmark: the least a python-telegram-bot 22.8 bot does to turn a slide.

    python -m bench.framework_bot      # env: TELEGRAM_BOT_TOKEN, TELEGRAM_API_BASE_URL

bench/bot.py runs it as a subprocess on the same harness as coursebot and measures it the
same way; coursebot's throughput is judged against this one's.

What it does: /start sends a menu-like message with a "▶ Start the course" button; any
callback query edits the tapped message to a slide (callback data ``s:<lesson>:<slide id>``
names the slide, anything else means slide 0) and then answers the query. Nothing is stored:
the slide comes from the callback data alone.

The same as coursebot (so the difference is coursebot's own work):
* the HTTP payloads: the slides and buttons are coursebot's own screens of lesson 1,
  rendered ONCE at start-up with bot.render (HTML parse mode, no link preview), so the
  stand-in parses the same text and the learners tap the same buttons;
* the order of calls per tap: editMessageText, then answerCallbackQuery;
* PTB settings that matter for throughput: concurrent_updates=256 (coursebot's default;
  COURSEBOT_CONCURRENT_UPDATES changes it for both bots), connection_pool_size=64,
  long-poll timeout 10 s with get_updates_read_timeout 15 s, the same allowed_updates,
  logging at WARNING. (BENCH_POOL_SIZE overrides the pool size, for experiments only.)

What differs (all of it is coursebot's overhead by design):
* no database (coursebot: a redelivery check, a learner upsert + select, a progress select
  and a progress write per tap, through aiosqlite);
* no per-learner ordering (PTB's SimpleUpdateProcessor instead of coursebot's
  PerLearnerOrder), no deduplication handler, no rate limiter (coursebot's CourseRateLimiter
  lets edits and callback answers bypass its buckets, but each call still passes through it);
* no i18n, rendering or handler chain beyond one CommandHandler and one CallbackQueryHandler;
* no setMyCommands at start-up, run_polling instead of coursebot's own lifecycle.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from telegram import InlineKeyboardMarkup, LinkPreviewOptions, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest
from telegram.ext import ApplicationBuilder, CallbackQueryHandler, CommandHandler, ContextTypes

ROOT = Path(__file__).resolve().parent.parent
LONG_POLL_SECONDS = 10
ALLOWED_UPDATES = [Update.MESSAGE, Update.EDITED_MESSAGE, Update.CALLBACK_QUERY, Update.POLL_ANSWER]
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


def _screens() -> tuple[tuple[str, InlineKeyboardMarkup], dict[str, tuple[str, InlineKeyboardMarkup]]]:
    """The menu and lesson 1's slides as coursebot shows them to a new learner (rendered once)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bot import render
    from bot.library.load import load_valid
    from bot.navigation import Place

    lessons = Path(os.environ.get("COURSEBOT_LESSONS", "").strip() or ROOT / "lessons")
    locales = Path(os.environ.get("COURSEBOT_LOCALES", "").strip() or ROOT / "locales")
    course = load_valid(lessons, locales).english
    lesson = course.lessons[0]
    menu = render.menu(course, {}, Place(lesson, 0), welcome=True)  # "▶ Start the course" and the lessons
    slides = {slide.id: render.slide(course, lesson, i) for i, slide in enumerate(lesson.slides)}
    return (menu.text, menu.buttons), {slide_id: (s.text, s.buttons) for slide_id, s in slides.items()}


MENU, SLIDES = _screens()


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    text, buttons = MENU
    await context.bot.send_message(
        update.effective_chat.id, text, parse_mode=ParseMode.HTML, reply_markup=buttons, link_preview_options=NO_PREVIEW
    )


async def turn(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.callback_query
    parts = (query.data or "").split(":")
    named = parts[2] if len(parts) == 3 and parts[0] == "s" else None
    text, buttons = SLIDES.get(named or "", next(iter(SLIDES.values())))
    try:
        await query.edit_message_text(
            text, parse_mode=ParseMode.HTML, reply_markup=buttons, link_preview_options=NO_PREVIEW
        )
    except BadRequest as exc:
        if "not modified" not in exc.message.lower():  # a double tap: the slide is shown already
            raise
    await query.answer()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = os.environ["TELEGRAM_BOT_TOKEN"]
    api = os.environ.get("TELEGRAM_API_BASE_URL", "https://api.telegram.org").rstrip("/")
    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(api + "/bot")
        .base_file_url(api + "/file/bot")
        .concurrent_updates(int(os.environ.get("COURSEBOT_CONCURRENT_UPDATES", "256")))
        .connection_pool_size(int(os.environ.get("BENCH_POOL_SIZE", "64")))  # override: experiments only
        .get_updates_read_timeout(LONG_POLL_SECONDS + 5)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CallbackQueryHandler(turn))
    app.run_polling(timeout=LONG_POLL_SECONDS, allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)


if __name__ == "__main__":
    main()
