"""The Quick Check through the real bot and the stand-in: options shuffled per learner and per round and
answers kept by option id; nobody stranded when a poll does not come (a failed sendPoll, a lost poll,
repeated taps), in every shipped language where it says so."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections.abc import Iterator

import pytest

from bot import lessontext, render, shuffle
from bot.handlers import quiz as quiz_handlers
from bot.i18n import I18n, _
from bot.shuffle import new_seed, option_order
from tests.conftest import LOCALES, course_content, peek
from tests.journey import button_texts, read_slides, send_and_wait, tap_and_wait_edit, tap_and_wait_message

CONTENT = course_content()
ENGLISH = CONTENT.english
FIRST = ENGLISH.lessons[0]
I18N = I18n(LOCALES)
SHIPPED = I18N.languages
TELEGRAM_CODE = {"pt_BR": "pt-br"}


def is_poll(message: dict) -> bool:
    return "poll" in message


@pytest.fixture
def seeds(monkeypatch) -> Iterator[list[int]]:
    """Rounds draw their seeds from this list, in order (the bot's own draw is tested on its own)."""
    drawn: list[int] = []
    monkeypatch.setattr(quiz_handlers, "new_seed", lambda: drawn.pop(0))
    yield drawn
    assert drawn == [], "a test meant more rounds than the bot began"


def shown_ids(poll_message: dict, question) -> tuple[str, ...]:
    """Return the option ids of a poll as shown, read back from their texts."""
    by_text = dict(zip(question.options, question.option_ids, strict=True))
    return tuple(by_text[o["text"]] for o in poll_message["poll"]["options"])


async def _last_slide(learner, lesson=FIRST) -> dict:
    menu = await send_and_wait(learner, "/start")
    return await read_slides(learner, await tap_and_wait_edit(learner, menu, "Start the course"), lesson)


# The shuffle itself.


def test_an_order_is_the_same_for_the_same_seed_and_question_and_every_order_comes_up():
    question = FIRST.quiz[1]
    assert option_order(question, 42) == option_order(question, 42)
    orders = {option_order(question, seed) for seed in range(400)}
    assert orders == set(itertools.permutations(range(len(question.options))))


def test_each_round_draws_a_new_seed():
    assert len({new_seed() for _ in range(50)}) == 50
    assert all(0 <= new_seed() < 2**shuffle.SEED_BITS for _ in range(50))


def test_no_correct_option_gives_itself_away_by_its_length():
    # The issue: the right answer was the longest in 7 of 12 questions, by up to twice the others.
    longest = 0
    for lesson in ENGLISH.lessons:
        for question in lesson.quiz:
            right = len(question.options[question.correct])
            others = [len(o) for i, o in enumerate(question.options) if i != question.correct]
            assert right <= max(others) + 3, (lesson.id, question.id)
            longest += right > max(others)
    assert longest <= 3


# Through the bot.


async def test_options_are_shuffled_per_learner_and_answers_are_kept_by_option_id(bot, standin, seeds):
    seeds += [3, 4]
    ada, bob = standin.learner(user_id=8201), standin.learner(user_id=8202)
    first_polls = []
    for learner in (ada, bob):
        last = await _last_slide(learner)
        first_polls.append(await tap_and_wait_message(learner, last, "Quick Check", is_poll))
    question = FIRST.quiz[0]
    orders = [shown_ids(poll, question) for poll in first_polls]
    assert orders == [
        tuple(question.option_ids[i] for i in option_order(question, 3)),
        tuple(question.option_ids[i] for i in option_order(question, 4)),
    ]
    assert orders[0] != orders[1]
    # Ada taps the right answer, wherever it stands; Bob taps the first option shown, whatever it is.
    await ada.answer_poll(first_polls[0], first_polls[0]["poll"]["correct_option_ids"][0])
    await bob.answer_poll(first_polls[1], 0)
    await standin.settle()
    ada_answer = (await bot.db.latest_answers(8201))[(FIRST.id, question.id)]
    bob_answer = (await bot.db.latest_answers(8202))[(FIRST.id, question.id)]
    assert (ada_answer.option_id, ada_answer.correct) == (question.correct_id, True)
    assert (bob_answer.option_id, bob_answer.correct) == (orders[1][0], orders[1][0] == question.correct_id)
    assert standin.errors() == []


def lose_the_first_poll_record(bot, monkeypatch) -> list[str]:
    """Make the bot forget the first poll it sends, as a crash right after sendPoll does; return the ids lost."""
    record = bot.db.poll_sent
    lost: list[str] = []

    async def lose_the_first(poll, message_id, sending=None):
        if not lost:
            lost.append(poll.poll_id)
            return
        await record(poll, message_id, sending)

    monkeypatch.setattr(bot.db, "poll_sent", lose_the_first)
    return lost


async def test_an_answer_to_a_poll_the_bot_never_recorded_still_counts_and_the_round_goes_on(
    bot, standin, seeds, monkeypatch
):
    # The bot dies right after sendPoll (kill -9 in tests/test_chaos.py found it): Telegram shows the poll, the
    # bot never wrote it down, and the learner's answer used to be dropped as one to an unknown poll.
    seeds += [5]
    ada = standin.learner(user_id=8210)
    last = await _last_slide(ada)
    lost = lose_the_first_poll_record(bot, monkeypatch)
    first = await tap_and_wait_message(ada, last, "Quick Check", is_poll)
    await standin.settle()
    assert lost == [first["poll"]["id"]] and await bot.db.answered_poll(lost[0]) is None
    since = ada.cursor()
    await ada.answer_poll(first, first["poll"]["correct_option_ids"][0])
    second = await ada.wait_message(is_poll, since=since)
    assert shown_ids(second, FIRST.quiz[1])  # the round went on to the second question
    answer = (await bot.db.latest_answers(8210))[(FIRST.id, FIRST.quiz[0].id)]
    assert (answer.option_id, answer.correct) == (FIRST.quiz[0].correct_id, True)
    assert standin.errors() == []


@pytest.mark.parametrize("first_answered", ["the poll never recorded", "the poll sent again"])
async def test_a_question_whose_poll_went_out_twice_is_answered_once(bot, standin, seeds, monkeypatch, first_answered):
    # A replica killed between sendPoll and recording the poll leaves a poll the bot does not know of; the update
    # handled again asks the question again (tests/test_scaleout.py saw it). Both polls stand in the chat, and the
    # learner answers both: the question counts once, by the first answer given.
    seeds += [5]
    ada = standin.learner(user_id=8211)
    last = await _last_slide(ada)
    lost = lose_the_first_poll_record(bot, monkeypatch)
    unknown = await tap_and_wait_message(ada, last, "Quick Check", is_poll)
    await standin.settle()
    assert lost == [unknown["poll"]["id"]]
    intro = ada.message(last["message_id"])
    again = await tap_and_wait_message(ada, intro, "Send the question again", is_poll)
    assert ada.message(unknown["message_id"]) is not None  # never recorded, so not withdrawn: two polls to answer
    question = FIRST.quiz[0]
    right, wrong = unknown["poll"]["correct_option_ids"][0], again["poll"]["correct_option_ids"][0] + 1
    polls = [(unknown, right), (again, wrong % len(question.options))]
    if first_answered == "the poll sent again":
        polls.reverse()
    since = ada.cursor()
    for poll, option in polls:
        await ada.answer_poll(poll, option)
    second = await ada.wait_message(lambda m: is_poll(m) and m["message_id"] > again["message_id"], since=since)
    assert shown_ids(second, FIRST.quiz[1])  # the round went on to the second question
    await standin.settle()
    rows = await peek(bot.db, "SELECT question_id FROM quiz_answers WHERE user_id = 8211")
    assert [row[0] for row in rows] == [question.id]
    first_poll, first_option = polls[0]
    answer = (await bot.db.latest_answers(8211))[(FIRST.id, question.id)]
    assert answer.correct == (first_option == first_poll["poll"]["correct_option_ids"][0])
    assert [m["message_id"] for m in ada.messages if is_poll(m) and m["message_id"] > again["message_id"]] == [
        second["message_id"]
    ]  # asked once: the second answer moved nothing
    assert standin.errors() == []


async def test_a_poll_sent_again_shows_the_same_order_and_a_retake_a_new_one(bot, standin, seeds):
    seeds += [5, 6]
    ada = standin.learner(user_id=8203)
    last = await _last_slide(ada)
    poll = await tap_and_wait_message(ada, last, "Quick Check", is_poll)
    intro = ada.message(last["message_id"])
    assert button_texts(intro) == ["↻ Send the question again", "◀ Back to the slides"]
    edits = len(standin.calls_to("editMessageText"))
    again = await tap_and_wait_message(ada, intro, "Send the question again", is_poll)
    assert shown_ids(again, FIRST.quiz[0]) == shown_ids(poll, FIRST.quiz[0])
    assert ada.message(poll["message_id"]) is None  # the first poll is gone: one poll to answer
    assert len(standin.calls_to("editMessageText")) == edits  # the intro already said this: no edit sent
    # Answer the first question wrong, the others right; the retake asks it in the next round's order.
    question = FIRST.quiz[0]
    wrong = next(i for i in range(4) if i != again["poll"]["correct_option_ids"][0])
    since = ada.cursor()
    await ada.answer_poll(again, wrong)
    for _question in FIRST.quiz[1:]:
        poll = await ada.wait_message(is_poll, since=since)
        since = ada.cursor()
        await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
    result = await ada.wait_message(lambda m: "reply_markup" in m, since=since)
    retake = await tap_and_wait_message(ada, result, "Retake", is_poll)
    assert shown_ids(retake, question) == tuple(question.option_ids[i] for i in option_order(question, 6))
    assert shown_ids(retake, question) != shown_ids(again, question)
    await standin.settle()
    assert standin.errors() == []


async def test_a_failed_send_poll_leaves_the_intro_saying_so_and_its_button_sends_it(bot, standin, seeds):
    seeds.append(7)
    ada = standin.learner(user_id=8204)
    last = await _last_slide(ada)
    standin.fail_next("sendPoll", status=502, count=2)  # the first try and its retry
    since = ada.cursor()
    query = await ada.tap(last, "Quick Check")
    await ada.wait_callback_answer(query)
    await standin.settle()
    intro = ada.message(last["message_id"])
    assert "could not be sent just now" in intro["text"]
    assert not any(is_poll(m) for m in ada.messages[since:])
    poll = await tap_and_wait_message(ada, intro, "Send the question again", is_poll)
    assert poll["poll"]["question"] == FIRST.quiz[0].question
    assert "Answer the polls below" in ada.message(last["message_id"])["text"]
    # The next question fails too: the note comes where the learner looks, below the poll just answered.
    standin.fail_next("sendPoll", status=502, count=2)
    since = ada.cursor()
    await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
    note = await ada.wait_message(since=since)
    assert "could not be sent just now" in note["text"]
    second = await tap_and_wait_message(ada, note, "Send the question again", is_poll)
    assert second["poll"]["question"] == FIRST.quiz[1].question
    assert [c.error_code for c in standin.calls_to("sendPoll")].count(502) == 4


async def test_a_round_whose_poll_never_came_resumes_from_the_slides_and_from_continue(bot, standin, seeds):
    seeds.append(7)
    ada = standin.learner(user_id=8205)
    last = await _last_slide(ada)
    standin.fail_next("sendPoll", status=502, count=2)
    query = await ada.tap(last, "Quick Check")
    await ada.wait_callback_answer(query)
    await standin.settle()
    # The learner does not see the intro's button and goes back to the slides, then taps Quick Check again.
    slide = await tap_and_wait_edit(ada, ada.message(last["message_id"]), "Back to the slides")
    poll = await tap_and_wait_message(ada, slide, "Quick Check", is_poll)
    assert poll["poll"]["question"] == FIRST.quiz[0].question
    # ... or leaves, and Continue brings the round back.
    standin.fail_next("sendPoll", status=502, count=2)
    since = ada.cursor()
    await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
    await ada.wait_message(since=since)
    menu = await send_and_wait(ada, "/lessons")
    again = await tap_and_wait_message(ada, menu, "Continue", is_poll)
    assert again["poll"]["question"] == FIRST.quiz[1].question


async def test_repeated_taps_on_quick_check_bring_back_a_poll_that_went_missing(bot, standin, seeds):
    seeds.append(7)
    ada = standin.learner(user_id=8206)
    last = await _last_slide(ada)
    poll = await tap_and_wait_message(ada, last, "Quick Check", is_poll)
    # The poll went missing (a crash between Telegram and the bot, a client that lost it): it is not in the chat.
    standin.chats[8206].remove(poll["message_id"])
    slide = await tap_and_wait_edit(ada, ada.message(last["message_id"]), "Back to the slides")
    # Right after the poll went out, a tap is the second of a double tap: it sends nothing.
    query = await ada.tap(slide, "Quick Check")
    assert "answer the poll below" in (await ada.wait_callback_answer(query))["text"]
    await standin.settle()
    assert len(standin.calls_to("sendPoll")) == 1
    # A few seconds later (the database's clock, injected), the same tap brings the poll back.
    started = bot.db.clock()
    bot.db.clock = lambda: started + dt.timedelta(seconds=5)
    again = await tap_and_wait_message(ada, ada.message(slide["message_id"]), "Quick Check", is_poll)
    assert again["poll"]["question"] == FIRST.quiz[0].question
    assert shown_ids(again, FIRST.quiz[0]) == shown_ids(poll, FIRST.quiz[0])


@pytest.mark.parametrize("language", SHIPPED)
async def test_the_failed_poll_note_and_its_button_speak_the_learners_language(bot, standin, language):
    lesson = CONTENT.course(language).lessons[0]
    with I18N.use(language):
        next_label, quiz_label, resend = _("Next ▶"), _("Quick Check ▶"), _("↻ Send the question again")
        note = _("The question could not be sent just now. Tap “Send the question again” to try once more.")
    assert resend.removeprefix("↻ ") in note, "the note names the button as the button reads"
    learner = standin.learner(
        user_id=8300 + SHIPPED.index(language), language_code=TELEGRAM_CODE.get(language, language)
    )
    menu = await send_and_wait(learner, "/start")
    slide = await tap_and_wait_edit(learner, menu, menu["reply_markup"]["inline_keyboard"][0][0]["text"])
    for _turn in range(len(lesson.slides) - 1):
        slide = await tap_and_wait_edit(learner, slide, next_label)
    standin.fail_next("sendPoll", status=502, count=2)
    await learner.wait_callback_answer(await learner.tap(slide, quiz_label))
    await standin.settle()
    intro = learner.message(slide["message_id"])
    assert note in intro["text"].replace("\u2066", "").replace("\u2069", "")
    poll = await tap_and_wait_message(learner, intro, resend, is_poll)
    assert poll["poll"]["question"].replace("\u2066", "").replace("\u2069", "") == lesson.quiz[0].question


def test_seeds_drawn_by_the_system_vary_enough_that_two_learners_rarely_share_an_order():
    question = FIRST.quiz[0]
    rng = random.Random(0)
    same = sum(option_order(question, rng.getrandbits(31)) == option_order(question, new_seed()) for _ in range(240))
    assert same < 40  # 1 in 24 expected: 10 of 240


@pytest.mark.parametrize("language", [code for code in SHIPPED if code != "en"])
def test_a_translated_poll_shows_its_options_in_the_english_ids_order_of_the_round(language):
    # Translations list options in the English file's order; the round's order is drawn over ids, so a learner
    # in any language sees the same option in the same place as an English learner with the same seed.
    for english, translated in zip(ENGLISH.lessons, CONTENT.course(language).lessons, strict=True):
        for question, local in zip(english.quiz, translated.quiz, strict=True):
            assert local.option_ids == question.option_ids and local.correct == question.correct
            order = option_order(question, 99)
            assert option_order(local, 99) == order
            with I18N.use(language):  # a right-to-left language isolates code in options
                spec = render.poll(local, order)
                assert spec.options == tuple(lessontext.plain(local.options[i]) for i in order)
            assert spec.option_ids == tuple(question.option_ids[i] for i in order)
            assert spec.option_ids[spec.correct] == question.correct_id
