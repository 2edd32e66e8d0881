"""A Telegram Bot API stand-in served over real HTTP on 127.0.0.1, for tests and benchmarks.

    async with BotApiStandin() as standin:
        app = ApplicationBuilder().token(standin.token).base_url(standin.base_url).build()
        ada = standin.learner(user_id=1001, first_name="Ada")
        await ada.send("/start")
        msg = await ada.wait_message()

The Bot API itself is coursebot's built-in server (``bot.localapi``: HTTP, methods,
getUpdates, Telegram's HTML and limits). Here only what tests need: server (recording,
waits, test controls), calls (ApiCall, fault injection), learner (simulated users).
"""

from bot.localapi.errors import ApiError

from .calls import ApiCall
from .learner import SimGroup, SimLearner, SimulationError, TapReaction
from .server import BotApiStandin

__all__ = ["ApiCall", "ApiError", "BotApiStandin", "SimGroup", "SimLearner", "SimulationError", "TapReaction"]
