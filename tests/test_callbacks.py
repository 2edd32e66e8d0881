"""Callback data: packed and unpacked in one place, within Telegram's 64 bytes, never trusted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot import callbacks
from bot.callbacks import (
    CallbackData,
    CallbackDataError,
    ChooseLanguage,
    Confirm,
    ConfirmReset,
    Continue,
    DrillTap,
    LeavePractice,
    Move,
    OpenLesson,
    ReminderChoice,
    ResendPoll,
    RetakeMissed,
    ReviewChoice,
    ShowDrill,
    ShowHint,
    ShowMenu,
    ShowSlide,
    StartDrills,
    StartPractice,
    StartQuiz,
    StartReview,
    StopReview,
    matches,
)


@dataclass(frozen=True)
class Numbered(CallbackData, prefix="test-n"):
    """A payload with a number, as a feature may declare one (no shipped button carries one today)."""

    lesson: str
    index: int


EXAMPLES = [
    StartReview(),
    StopReview(),
    ReviewChoice(2**63 - 1, 3, 999999),
    ReminderChoice("snooze"),
    ShowSlide("requires-grad", "what-autograd-does"),
    ShowSlide("no-grad", "set-grad-enabled"),
    Numbered("grad", 0),
    Numbered("grad", 12),
    OpenLesson("backward"),
    Continue(),
    ShowMenu(),
    StartQuiz("grad"),
    ResendPoll("grad"),
    RetakeMissed("grad"),
    ConfirmReset(Confirm.YES),
    ConfirmReset(Confirm.NO),
    StartPractice("grad"),
    ShowHint("backward"),
    LeavePractice("no-grad"),
    ChooseLanguage("pt-br"),
    ChooseLanguage.of(None),
    StartDrills("grad"),
    ShowDrill("grad", "step-order"),
    DrillTap("grad", "step-order", Move.PLACE, 3, 12),
    # The longest a drill tap can be: a lesson id and a drill id of their most characters, the highest turn.
    DrillTap("a" * 32, "b" * 16, Move.CHECK, 9, 999),
]


def test_a_language_button_names_a_shipped_language_or_telegrams():
    shipped = ["en", "pt_BR", "ru"]
    assert ChooseLanguage.of("pt_BR").pack() == "g:pt-br"
    assert CallbackData.unpack("g:pt-br").resolve(shipped) == "pt_BR"
    assert CallbackData.unpack("g:auto").resolve(shipped) is None
    with pytest.raises(CallbackDataError):
        CallbackData.unpack("g:ja").resolve(shipped)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_callback_data_subclass_has_an_example():
    assert {type(e) for e in EXAMPLES} == set(_subclasses(CallbackData))


@pytest.mark.parametrize("data", EXAMPLES, ids=repr)
def test_pack_then_unpack_gives_back_the_same_data(data):
    packed = data.pack()
    assert len(packed.encode()) <= 64
    assert CallbackData.unpack(packed) == data
    assert type(CallbackData.unpack(packed)) is type(data)


def test_packed_form_is_prefix_and_fields_joined_by_colons():
    assert ShowSlide("grad", "leaves-only").pack() == "s:grad:leaves-only"
    assert Continue().pack() == "c"
    assert ConfirmReset(Confirm.YES).pack() == "x:yes"


def test_a_slide_button_names_its_slide_by_id_and_an_old_numbered_one_names_no_slide():
    assert CallbackData.unpack("s:grad:leaves-only").slide == "leaves-only"
    # Buttons from before slide ids carried a position; it reads as an id no lesson has.
    assert CallbackData.unpack("s:grad:7") == ShowSlide("grad", "7")


def test_unpacked_number_field_is_an_int():
    assert CallbackData.unpack("test-n:grad:7").index == 7


def test_prefixes_are_unique():
    prefixes = [cls.prefix for cls in _subclasses(CallbackData)]
    assert len(prefixes) == len(set(prefixes))


def test_a_subclass_reusing_a_prefix_is_refused():
    with pytest.raises(TypeError):

        class Again(CallbackData, prefix="s"):
            pass


def test_data_over_64_bytes_is_refused_at_pack_asking_for_shorter_ids():
    data = ShowSlide("a" * 40, "b" * 40)  # each field is valid alone; together 83 bytes
    with pytest.raises(ValueError) as caught:
        data.pack()
    message = str(caught.value)
    assert "64" in message
    assert "shorter ids" in message


@pytest.mark.parametrize("lesson", ["a" * 41, "Grad", "grad_3", "", "урок"])
def test_an_id_callbacks_cannot_carry_is_refused_at_pack_asking_to_shorten_it(lesson):
    with pytest.raises(ValueError) as caught:
        OpenLesson(lesson).pack()
    assert "OpenLesson.lesson" in str(caught.value)
    assert "shorten the id" in str(caught.value)


def test_a_negative_number_is_refused_at_pack():
    with pytest.raises(ValueError):
        Numbered("grad", -1).pack()


@pytest.mark.parametrize(
    "forged",
    [
        None,
        "",
        "z:grad",  # unknown prefix
        "grad",  # no prefix at all
        "s:grad",  # too few fields
        "s:grad:1:2",  # too many fields
        "l",  # a field missing
        "c:",  # an empty field
        "test-n:grad:one",  # a number that is not one
        "test-n:grad:-1",
        "s:grad:1.5",
        "s:grad: 1",
        "test-n:grad:١",  # an Arabic-Indic digit
        "l:урок",  # non-ASCII
        "l:grad✓",
        "l:Grad",
        "l:grad lesson",
        "l:" + "a" * 41,
        "l:" + "a" * 63,  # 65 bytes
        "s:" + "a" * 40 + ":" + "1" * 30,  # every field valid, 73 bytes
    ],
    ids=repr,
)
def test_forged_data_raises_callback_data_error(forged):
    with pytest.raises(CallbackDataError):
        CallbackData.unpack(forged)


def test_callback_data_error_is_a_value_error():
    assert issubclass(CallbackDataError, ValueError)


@pytest.mark.parametrize("forged", ["l:grad\n", "x:yes\n"], ids=repr)
def test_forged_data_with_a_trailing_newline_raises_callback_data_error(forged):
    with pytest.raises(CallbackDataError):
        CallbackData.unpack(forged)


def test_matches_selects_taps_of_one_kind_only():
    is_slide = matches(ShowSlide)
    assert is_slide(ShowSlide("grad", 1).pack())
    assert not is_slide(StartQuiz("grad").pack())
    assert not is_slide("sx:grad:1")
    assert not is_slide(None)


def test_max_bytes_is_telegrams_limit():
    assert callbacks.MAX_BYTES == 64


def test_a_hint_button_sent_before_hints_knew_mistakes_still_works():
    # "h:grad" was packed before ShowHint had a mistake: the field it lacks takes its default (issue 20).
    from bot.callbacks import ShowHint

    assert CallbackData.unpack("h:grad") == ShowHint("grad", "none")
    assert CallbackData.unpack(ShowHint("grad", "stale-gradient").pack()) == ShowHint("grad", "stale-gradient")


def test_an_enum_field_travels_as_its_value_and_a_value_it_does_not_have_is_refused():
    assert DrillTap("grad", "step-order", Move.UNDO, 0, 4).pack() == "dm:grad:step-order:u:0:4"
    assert CallbackData.unpack("dm:grad:step-order:u:0:4") == DrillTap("grad", "step-order", Move.UNDO, 0, 4)
    with pytest.raises(CallbackDataError, match="move must be one of"):
        CallbackData.unpack("dm:grad:step-order:z:0:4")


def test_a_kind_without_fields_packs_as_its_prefix_and_still_reads_what_older_versions_packed():
    assert Continue().pack() == "c" and ShowMenu().pack() == "m"
    assert CallbackData.unpack("c") == Continue() and CallbackData.unpack("c:course") == Continue()
    assert CallbackData.unpack("m:course") == ShowMenu()
    assert matches(Continue)("c") and matches(Continue)("c:course") and not matches(Continue)("cx")
    with pytest.raises(CallbackDataError):
        CallbackData.unpack("c:lesson")
