"""Every shipped language end to end: a learner whose Telegram speaks it takes lesson 3 and reads no English.

The learner goes through the real bot, the real runner and the loopback Bot API stand-in: the menu,
every slide, the Quick Check, the practice (a failing try, a hint, a pass), /progress and /help.
Everything they receive is collected (messages as edited, polls, buttons, toasts, the command
menu) and checked: it is in the learner's script, and outside code no English is left: no
sentence of the English lesson or interface, and no English function word.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest

from bot import bidi, render
from bot.course.model import Lesson
from bot.i18n import I18n, _
from tests.conftest import LOCALES, course_content, running
from tests.journey import button_texts, correct_option, position, send_and_wait, tap_and_wait_edit

CONTENT = course_content()
I18N = I18n(LOCALES)
SHIPPED = [language for language in I18N.languages if language != "en"]
# What each learner's Telegram sends: regional codes, as phones do.
TELEGRAM_CODE = {
    "ru": "ru-RU",
    "es": "es-419",
    "ja": "ja",
    "ar": "ar-EG",
    "de": "de-DE",
    "fr": "fr-CA",
    "pt_BR": "pt-br",
}
SCRIPT = {
    "ru": r"[а-яё]",
    "ja": r"[\u3040-\u30ff\u4e00-\u9fff]",
    "ar": r"[\u0600-\u06ff]",
    "es": r"[a-záéíóúñ]",
    "de": r"[a-zäöüß]",
    "fr": r"[a-zéèêàç]",
    "pt_BR": r"[a-zãõçáéê]",
}
# English words that are not words of the other shipped languages: one of them outside code is a leftover.
ENGLISH_ONLY = {
    "the",
    "and",
    "you",
    "your",
    "with",
    "this",
    "that",
    "these",
    "is",
    "are",
    "what",
    "which",
    "when",
    "then",
    "from",
    "have",
    "has",
    "not",
    "only",
    "each",
    "every",
    "into",
    "does",
    "of",
    "to",
    "it",
    "its",
    "for",
    "can",
    "there",
    "here",
    "again",
    "send",
    "tap",
    "lesson",
    "lessons",
    "next",
    "back",
    "hint",
    "wrong",
    "right",
    "answer",
    "progress",
    "start",
    "reset",
    "course",
    "well",
    "done",
    "yet",
    "run",
    "running",
    "try",
    "output",
    "should",
    "would",
    "could",
}
LESSON = CONTENT.english.lesson("grad")

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)"
)


def test_every_language_the_issue_names_is_shipped_with_its_lessons():
    assert {"ru", "es", "ja", "ar"} <= set(SHIPPED) and len(SHIPPED) >= 7
    assert set(CONTENT.translations) == set(SHIPPED)


# What a learner reads, with code taken out.


def _without_code(text: str, entities: list[dict] | None) -> str:
    """Return ``text`` with the spans Telegram shows as code blanked out (offsets are UTF-16)."""
    units = text.encode("utf-16-le")
    for entity in sorted(entities or [], key=lambda e: -e["offset"]):
        if entity["type"] in ("code", "pre"):
            start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
            units = units[:start] + " ".encode("utf-16-le") + units[end:]
    return units.decode("utf-16-le").replace(bidi.LRI, "").replace(bidi.PDI, "")


def _readable(message: dict) -> list[str]:
    """Every piece of prose in a message: its text, its buttons, and a poll's question, options, explanation."""
    pieces = []
    if "text" in message:
        pieces.append(_without_code(message["text"], message.get("entities")))
    if "poll" in message:
        poll = message["poll"]
        pieces.append(poll["question"])
        pieces += [option["text"] for option in poll["options"]]
        pieces.append(poll.get("explanation", ""))
    pieces += button_texts(message)
    return [bidi.isolate_runs(p).replace(bidi.LRI, "").replace(bidi.PDI, "") for p in pieces]


_CODE_LIKE = re.compile(r"/\w+|\S*[()_.=\[\]]\S*|\b(?:True|False|None|PyTorch|Python|Telegram|autograd)\b")


def _english_fragments(lesson: Lesson) -> set[str]:
    """Runs of four or more English words from the English lesson and interface, code left out."""
    texts = [lesson.title, lesson.summary, lesson.recap]
    for slide in lesson.slides:
        texts += [slide.title, slide.text]
    for question in lesson.quiz:
        texts += [question.question, *question.options, question.explanation]
    exercise = lesson.exercise
    texts += [exercise.title, exercise.instructions, *exercise.hints, *(c.fail for c in exercise.checks)]
    with I18N.use("en"):
        texts += [
            line
            for screen in (render.help_text(), render.language_picker(I18N.languages, None))
            for line in screen.text.splitlines()
        ]
    fragments = set()
    for text in texts:
        prose = re.sub(r"`[^`]*`", " | ", text)
        for clause in re.split(r"[|.,:;!?()\n—–]", prose):
            words = [w for w in _CODE_LIKE.sub(" ", clause).split() if w.isalpha()]
            if len(words) >= 4:
                fragments.add(" ".join(words).lower())
    return fragments


def _words(text: str) -> str:
    return " ".join(w for w in re.split(r"[^\w'’]+", _CODE_LIKE.sub(" ", text).lower()) if w)


# The journey.


async def _take_lesson_three(learner, lesson: Lesson, language: str) -> list[dict]:
    seen: list[dict] = []
    with I18N.use(language):
        next_label, quiz_label = _("Next ▶"), _("Quick Check ▶")
    menu = await send_and_wait(learner, "/start")
    seen.append(menu)
    await learner.tap(menu, callback_data="l:grad")  # the button reads "3. ..." (isolated in Arabic)
    slide = await learner.wait_edit(menu["message_id"])
    seen.append(slide)
    while position(slide)[0] < len(lesson.slides):
        slide = await tap_and_wait_edit(learner, slide, next_label)
        seen.append(slide)
    since = learner.cursor()
    await learner.tap(slide, quiz_label)
    poll = await learner.wait_message(lambda m: "poll" in m, since=since)
    for index in range(len(lesson.quiz)):
        choice = correct_option(poll) if index else (correct_option(poll) + 1) % len(poll["poll"]["options"])
        since = learner.cursor()
        await learner.answer_poll(poll, choice)
        last = index == len(lesson.quiz) - 1
        poll = await learner.wait_message(
            (lambda m: "reply_markup" in m) if last else (lambda m: "poll" in m), since=since
        )
    result = poll
    since = learner.cursor()
    await learner.tap(result, callback_data=f"p:{lesson.id}")
    intro = await learner.wait_message(since=since, timeout=10)
    verdict = await send_and_wait(learner, lesson.exercise.starter, lambda m: "reply_markup" in m, timeout=30)
    since = learner.cursor()
    await learner.tap(verdict, callback_data=f"h:{lesson.id}")
    hint = await learner.wait_message(since=since)
    passed = await send_and_wait(learner, lesson.exercise.solution, lambda m: "reply_markup" in m, timeout=30)
    report = await send_and_wait(learner, "/progress")
    help_message = await send_and_wait(learner, "/help")
    return [*seen, intro, verdict, hint, passed, report, help_message, *learner.messages]


@pytest.fixture
async def practising_bot(config):
    async with running(replace(config, runner="embedded")) as bot:
        yield bot


@pytest.mark.parametrize("language", SHIPPED)
async def test_a_learner_takes_lesson_three_in_their_language_with_no_english_left(practising_bot, standin, language):
    lesson = CONTENT.course(language).lesson("grad")
    assert not any(s.fallback for s in lesson.slides) and not any(q.fallback for q in lesson.quiz)
    learner = standin.learner(user_id=7000 + SHIPPED.index(language), language_code=TELEGRAM_CODE[language])
    received = await _take_lesson_three(learner, lesson, language)
    toasts = [q.answer.get("text") or "" for q in standin.callback_queries.values() if q.answer]
    pieces = [piece for message in received for piece in _readable(message)] + toasts
    pieces += [c["description"] for c in standin.commands[("default", language.split("_")[0])]]
    assert await practising_bot.db.exercises_passed(learner.user_id) == {"grad"}, "the solution should pass"

    prose = "\n".join(pieces)
    assert len(re.findall(SCRIPT[language], prose.lower())) > 2000, f"too little {language} script"
    with I18N.use(language):
        notice = _("This part is not translated yet, so it is shown in English.")
    assert notice not in prose, "a complete translation announces no fallback"
    words = _words(prose)
    leftovers = sorted(
        {fragment for fragment in _english_fragments(CONTENT.english.lesson("grad")) if f" {fragment} " in f" {words} "}
    )
    assert leftovers == [], f"English sentences left in {language}"
    english_words = sorted({w for w in words.split() if w in ENGLISH_ONLY})
    assert english_words == [], f"English words left in {language}"


def test_the_english_fragment_check_finds_english():
    # The check above is only as good as its English: it must catch a slide or a button left untranslated.
    fragments = _english_fragments(LESSON)
    caught = [s.id for s in LESSON.slides if any(f" {f} " in f" {_words(s.text)} " for f in fragments)]
    assert len(caught) >= len(LESSON.slides) // 2, caught
    assert {w for w in _words(LESSON.recap).split() if w in ENGLISH_ONLY}
