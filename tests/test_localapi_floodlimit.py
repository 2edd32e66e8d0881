"""Telegram's flood limits in the built-in Bot API server: 429 with retry_after past 30 a second per bot, or past a
burst then one a second in one chat; edits and answers never count. On the test's clock, no sleeping."""

from __future__ import annotations

import pytest

from bot.localapi.errors import ApiError
from bot.localapi.floodlimit import CHAT_BURST, OVERALL_BURST, FloodLimit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_bot_wide_limit_refuses_the_thirty_first_message_of_a_second_with_retry_after():
    clock = Clock()
    flood = FloodLimit(clock=clock)
    for chat in range(int(OVERALL_BURST)):
        flood.check("sendMessage", chat)
    with pytest.raises(ApiError) as refused:
        flood.check("sendMessage", 999)
    assert refused.value.error_code == 429
    assert refused.value.parameters == {"retry_after": 1}
    assert flood.refused == 1
    clock.now += 1 / 30 + 1e-6  # one slot refilled
    flood.check("sendMessage", 999)


def test_a_chat_gets_a_burst_then_one_message_a_second():
    clock = Clock()
    flood = FloodLimit(clock=clock)
    for _ in range(int(CHAT_BURST)):
        flood.check("sendMessage", 7)
        clock.now += 0.05  # the bot-wide bucket keeps up
    with pytest.raises(ApiError, match="retry after"):
        flood.check("sendPoll", 7)
    flood.check("sendMessage", 8)  # another chat is not held up
    clock.now += 1.0
    flood.check("sendMessage", 7)


def test_edits_and_answers_never_count():
    clock = Clock()
    flood = FloodLimit(clock=clock)
    for _ in range(500):
        flood.check("editMessageText", 7)
        flood.check("answerCallbackQuery", 7)
        flood.check("getUpdates", None)
    assert flood.refused == 0


def test_a_steady_twenty_eight_a_second_is_never_refused():
    clock = Clock()
    flood = FloodLimit(clock=clock)
    for n in range(3000):
        flood.check("sendMessage", n)
        clock.now += 1 / 28
    assert flood.refused == 0
