"""A Telegram Bot API stand-in served over real HTTP on 127.0.0.1, for tests and benchmarks.

    async with BotApiStandin() as standin:
        app = ApplicationBuilder().token(standin.token).base_url(standin.base_url).build()
        ada = standin.learner(user_id=1001, first_name="Ada")
        await ada.send("/start")
        msg = await ada.wait_message()

Modules: server (HTTP, recording, test controls), methods (the Bot API methods),
updates (getUpdates semantics), html (Telegram's HTML parse mode), text (formatted
text), limits (Telegram's limits and refusals), params (request decoding), chats
(per-chat state), calls (ApiCall, fault injection), learner (simulated users).
"""

from .calls import ApiCall
from .errors import ApiError
from .learner import SimGroup, SimLearner, SimulationError, TapReaction
from .server import BotApiStandin

__all__ = ["ApiCall", "ApiError", "BotApiStandin", "SimGroup", "SimLearner", "SimulationError", "TapReaction"]
