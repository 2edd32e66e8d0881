"""Deep links: a lesson's id or 'review' as the start payload, built with PTB, parsed without trusting it."""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.retention import deeplinks
from bot.retention.deeplinks import OpenLesson, OpenReview, UnknownLink, Unusable
from tests.conftest import course_content

CONTENT = course_content()
COURSE = CONTENT.english
BOT = "autograd_course_bot"


def payload_of(url: str) -> str:
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "t.me", f"/{BOT}")
    return parse_qs(parts.query)["start"][0]


def test_every_lesson_link_opens_that_lesson_in_every_language() -> None:
    for language in ("en", *CONTENT.translations):
        course = CONTENT.course(language)
        links = deeplinks.course_links(BOT, course)
        assert [lesson.id for lesson, _ in links] == [lesson.id for lesson in COURSE.lessons]
        for lesson, url in links:
            payload = payload_of(url)
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", payload)
            assert deeplinks.parse(payload, course) == OpenLesson(lesson.id)


def test_the_review_link_opens_the_review() -> None:
    url = deeplinks.review_url(BOT)
    assert url == f"https://t.me/{BOT}?start=review"
    assert deeplinks.parse(payload_of(url), COURSE) == OpenReview()


def test_a_plain_start_has_no_link() -> None:
    assert deeplinks.parse(None, COURSE) is None
    assert deeplinks.parse("   ", COURSE) is None
    assert deeplinks.url(BOT) == f"https://t.me/{BOT}"


def test_a_payload_typed_with_capitals_still_finds_its_lesson() -> None:
    assert deeplinks.parse("Backward", COURSE) == OpenLesson("backward")
    assert deeplinks.parse("REVIEW", COURSE) == OpenReview()


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ("no-such-lesson", Unusable.NO_SUCH_LESSON),
        ("lesson_2", Unusable.NO_SUCH_LESSON),
        ("a" * 65, Unusable.MALFORMED),
        ("backward\n", Unusable.NO_SUCH_LESSON),  # stripped, then well formed
        ("back ward", Unusable.MALFORMED),
        ("../../etc/passwd", Unusable.MALFORMED),
        ("backward?x=1", Unusable.MALFORMED),
        ("\u202ewarkcab", Unusable.MALFORMED),
        ("урок", Unusable.MALFORMED),
        ("🦊", Unusable.MALFORMED),
        ("back\x00ward", Unusable.MALFORMED),
    ],
)
def test_an_unknown_or_malformed_payload_lands_on_the_menu_with_a_note(payload: str, why: Unusable) -> None:
    result = deeplinks.parse(payload, COURSE)
    if payload == "backward\n":
        assert result == OpenLesson("backward")
        return
    assert isinstance(result, UnknownLink)
    assert result.why == why
    assert len(result.payload) <= 4 * deeplinks.PAYLOAD_MAX and result.payload.isprintable()


@given(st.text(max_size=300))
def test_no_payload_makes_parse_raise(payload: str) -> None:
    result = deeplinks.parse(payload, COURSE)
    assert result is None or isinstance(result, OpenLesson | OpenReview | UnknownLink)
    if isinstance(result, UnknownLink):
        assert result.payload.isprintable()
        assert len(result.payload) <= 10 * deeplinks.PAYLOAD_MAX
    if isinstance(result, OpenLesson):
        assert COURSE.lesson(result.lesson_id) is not None


def test_a_lesson_whose_id_is_a_reserved_payload_is_reported() -> None:
    review_lesson = dataclasses.replace(COURSE.lessons[0], id="review")
    course = dataclasses.replace(COURSE, lessons=(review_lesson, *COURSE.lessons[1:]))
    [problem] = deeplinks.problems(course)
    assert "'review'" in problem and "choose another id" in problem
    with pytest.raises(ValueError, match="cannot be a link"):
        deeplinks.lesson_url(BOT, review_lesson)
    assert deeplinks.problems(COURSE) == []


def test_ptb_refuses_a_bot_username_that_cannot_be_one() -> None:
    with pytest.raises(ValueError):
        deeplinks.url("ab", "review")
