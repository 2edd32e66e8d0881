"""coursebot's built-in Telegram Bot API server: the bot runs against it without Telegram.

It serves the Bot API methods the bot uses over real HTTP on loopback, with Telegram's
rules (4096-character texts, HTML entities, 64-byte callback_data, poll limits, "message
is not modified"), and the other side of a chat (what a user does in the app) for the
web chat. Modules: server (HTTP), methods (the methods and the users' side), updates
(getUpdates), webhooks (setWebhook's delivery, as Telegram's WebhookActor), text (formatted
text), refusals (calls refused as Telegram refuses them), params (request decoding), chats
(per-chat state), files (photos and documents the bot sent, by file_id, and getFile's
paths), store (history across restarts), errors.
Telegram's rules themselves (limits, the HTML parser, lengths) are bot.telegram_rules:
the bot needs them too, and never imports this server.
"""

from .errors import ApiError
from .methods import BotApi
from .server import BotApiServer
from .store import StateStore
from .webhooks import SECRET_HEADER, WebhookTiming

__all__ = ["SECRET_HEADER", "ApiError", "BotApi", "BotApiServer", "StateStore", "WebhookTiming"]
