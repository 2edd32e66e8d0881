"""Telegram's limits and names, stated once: from PTB's telegram.constants where it has them (Bot API 10, as
followed by PTB 22.8), else from the Bot API documentation.

Text limits count UTF-16 code units after entity parsing (bot.telegram_rules.text); callback_data counts bytes.
"""

from __future__ import annotations

from telegram.constants import (
    BotCommandLimit,
    BotCommandScopeType,
    BotDescriptionLimit,
    BotNameLimit,
    CallbackQueryLimit,
    ChatAction,
    FileSizeLimit,
    InlineKeyboardButtonLimit,
    InlineKeyboardMarkupLimit,
    MessageEntityType,
    MessageLimit,
    PollLimit,
    UpdateType,
)

MESSAGE_TEXT_MAX = int(MessageLimit.MAX_TEXT_LENGTH)
CAPTION_MAX = int(MessageLimit.CAPTION_LENGTH)
CALLBACK_DATA_MAX_BYTES = int(InlineKeyboardButtonLimit.MAX_CALLBACK_DATA)
CALLBACK_ANSWER_TEXT_MAX = int(CallbackQueryLimit.ANSWER_CALLBACK_QUERY_TEXT_LENGTH)
INLINE_KEYBOARD_MAX_BUTTONS = int(InlineKeyboardMarkupLimit.TOTAL_BUTTON_NUMBER)
POLL_QUESTION_MAX = int(PollLimit.MAX_QUESTION_LENGTH)
POLL_OPTION_MAX = int(PollLimit.MAX_OPTION_LENGTH)
POLL_OPTIONS_MIN = 2  # PTB states no minimum; the Bot API: "2-12 answer options"
POLL_OPTIONS_MAX = int(PollLimit.MAX_OPTION_NUMBER)
POLL_EXPLANATION_MAX = int(PollLimit.MAX_EXPLANATION_LENGTH)
POLL_EXPLANATION_LINE_FEEDS = int(PollLimit.MAX_EXPLANATION_LINE_FEEDS)
POLL_OPEN_PERIOD = (int(PollLimit.MIN_OPEN_PERIOD), int(PollLimit.MAX_OPEN_PERIOD))  # seconds
COMMANDS_MAX = int(BotCommandLimit.MAX_COMMAND_NUMBER)
COMMAND_NAME_MAX = int(BotCommandLimit.MAX_COMMAND)
COMMAND_DESCRIPTION_MAX = int(BotCommandLimit.MAX_DESCRIPTION)
BOT_NAME_MAX = int(BotNameLimit.MAX_NAME_LENGTH)
BOT_DESCRIPTION_MAX = int(BotDescriptionLimit.MAX_DESCRIPTION_LENGTH)
BOT_SHORT_DESCRIPTION_MAX = int(BotDescriptionLimit.MAX_SHORT_DESCRIPTION_LENGTH)
GET_UPDATES_LIMIT_MAX = 100  # PTB states none; the Bot API: "Values between 1-100 are accepted"
PHOTO_MAX_BYTES = int(FileSizeLimit.PHOTOSIZE_UPLOAD)  # sendPhoto: "The photo must be at most 10 MB in size"
PHOTO_MAX_SIDES = 10_000  # sendPhoto: "The photo's width and height must not exceed 10000 in total"
PHOTO_MAX_RATIO = 20  # sendPhoto: "Width and height ratio must be at most 20"
UPLOAD_MAX_BYTES = int(FileSizeLimit.FILESIZE_UPLOAD)  # any other file a bot uploads: 50 MB

CHAT_ACTIONS = frozenset(action.value for action in ChatAction)
UPDATE_TYPES = frozenset(kind.value for kind in UpdateType)
# What Telegram sends when allowed_updates was never set, or set to an empty list.
DEFAULT_UPDATE_TYPES = UPDATE_TYPES - {"chat_member", "message_reaction", "message_reaction_count"}
COMMAND_SCOPES = frozenset(scope.value for scope in BotCommandScopeType)
# Entity types a bot may pass explicitly in `entities` / `caption_entities`.
ENTITY_TYPES = frozenset(kind.value for kind in MessageEntityType)
