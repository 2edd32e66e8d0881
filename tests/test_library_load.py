"""bot.library.load.lint: Telegram's limits checked on the rendered content, each problem at its file and line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot import lessontext, render
from bot.errors import ContentError
from bot.i18n import I18n
from bot.library.load import lint, load_valid
from bot.library.screens import OUTPUT_ROOM_MIN
from bot.telegram_rules.text import visible_length
from bot.telegram_rules.units import utf16_len

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
LOCALES = ROOT / "locales"
PARTIAL_RU = ROOT / "tests" / "fixtures" / "partial" / "ru"

QUESTION = "    question: What does optimizer.zero_grad() do by default in PyTorch 2.x?\n"
EXPLANATION = (
    "    explanation: set_to_none=True is the default since PyTorch 2.0. Pass set_to_none=False to get zero tensors.\n"
)
OPTIONS = (
    "      - id: to-none\n"
    "        text: Sets each parameter's .grad to None\n"
    "        correct: true\n"
    "      - id: to-zeros\n"
    "        text: Fills each parameter's .grad with zeros\n"
    "      - id: reset-weights\n"
    "        text: Resets the parameters to their initial values\n"
    "      - id: free-graph\n"
    "        text: Frees the graph of the last forward pass\n"
)


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")  # English only: a test adds the translation it is about
    return target


def grad(lessons_dir: Path) -> Path:
    return lessons_dir / "en" / "03-grad.yaml"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def problems(lessons_dir: Path) -> list[str]:
    _, found = lint(lessons_dir, LOCALES)
    return [str(p) for p in sorted(found, key=lambda p: (p.path, p.line, p.message))]


def zero_grad_default(lessons_dir: Path) -> tuple[Path, int]:
    path = grad(lessons_dir)
    return path, line_of(path, "- id: zero-grad-default")


# The real content.


def test_real_lessons_have_no_problems():
    content, found = lint(LESSONS, LOCALES)
    assert found == []
    assert content is not None and len(content.english.lessons) == 4


def test_real_lessons_with_the_partial_translation_have_no_problems(lessons):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    content, found = lint(lessons, LOCALES)
    assert found == []
    assert "ru" in content.translations


def test_load_valid_raises_every_problem_as_path_line_message(lessons):
    path = grad(lessons)
    edit(path, "  - id: accumulate\n", "  - id: Why\n")
    edit(path, "  - id: loop-order\n", "  - id: Loop\n")
    with pytest.raises(ContentError) as caught:
        load_valid(lessons, LOCALES)
    assert str(caught.value).splitlines() == [
        f"{path}:{line_of(path, '- id: Loop')}: slide id 'Loop' must be lowercase words joined by '-'",
        f"{path}:{line_of(path, '- id: Why')}: slide id 'Why' must be lowercase words joined by '-'",
    ]


# Slides.


def _slide_text_length_for(lessons_dir: Path, rendered: int) -> int:
    """Return how many characters the accumulate text needs for the slide to render to ``rendered``."""
    content, found = lint(lessons_dir, LOCALES)
    assert found == []
    course = content.english
    lesson = course.lesson("grad")
    index = [s.id for s in lesson.slides].index("accumulate")
    with I18n(LOCALES).use("en"):
        base = visible_length(render.slide(course, lesson, index).text)
    text_length = utf16_len(lessontext.to_plain(lesson.slides[index].text))
    return rendered - (base - text_length)


WHY_TEXT = (
    "    text: >\n"
    "      Big batches can go in chunks: clear once, call `backward()` on each\n"
    "      chunk's loss times its share of the batch, here 1/4, then step. That\n"
    "      gives the full batch's -9; clearing per chunk keeps only the last\n"
    "      -3.75.\n"
)


def _set_why_text(lessons_dir: Path, length: int) -> None:
    edit(grad(lessons_dir), WHY_TEXT, f"    text: {'x' * length}\n")


def test_slide_rendering_to_exactly_4096_characters_is_fine(lessons):
    _set_why_text(lessons, _slide_text_length_for(lessons, 4096))
    assert problems(lessons) == []


def test_slide_rendering_over_4096_characters_is_reported_at_the_slide(lessons):
    _set_why_text(lessons, _slide_text_length_for(lessons, 4097))
    path = grad(lessons)
    line = line_of(path, "- id: accumulate")
    assert problems(lessons) == [f"{path}:{line}: slide 'accumulate' renders to 4097 characters; Telegram allows 4096"]


def test_markup_does_not_count_towards_the_slide_length(lessons):
    # Marks and escaping vanish once Telegram parses the HTML: `&` is one character, not five.
    length = _slide_text_length_for(lessons, 4096)
    edit(grad(lessons), WHY_TEXT, f"    text: '**{'&' * (length - 3)}** `ab`'\n")
    assert problems(lessons) == []


def test_translated_slide_over_4096_characters_is_reported_in_the_translation(lessons):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    path = lessons / "ru" / "03-grad.yaml"
    edit(
        path,
        "      Python — `.item()`.\n",
        f"      Python — `.item()`. {'ж' * 4200}\n",
    )
    line = line_of(path, "- id: grad-is-live")
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:{line}: slide 'grad-is-live' renders to ")
    assert found[0].endswith("characters; Telegram allows 4096")


def test_untranslated_slide_is_checked_once_in_english(lessons):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    _set_why_text(lessons, 5000)  # accumulate is not in the Russian fixture
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{grad(lessons)}:{line_of(grad(lessons), '- id: accumulate')}: ")


def test_recap_rendering_over_4096_characters_is_reported_at_the_lesson(lessons):
    path = grad(lessons)
    edit(path, "recap: >\n  Gradients land", f"recap: >\n  {'r' * 4100} Gradients land")
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:1: the recap renders to ")


def test_lesson_id_too_long_for_button_data_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(path, "id: grad\n", f"id: {'g' * 45}\n")
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:1: lesson id '{'g' * 45}' is longer than ")


# Quiz polls.


def test_question_of_300_characters_is_fine(lessons):
    edit(grad(lessons), QUESTION, f"    question: {'q' * 300}\n")
    assert problems(lessons) == []


def test_question_over_300_characters_is_reported_at_the_question(lessons):
    edit(grad(lessons), QUESTION, f"    question: {'q' * 301}\n")
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': the question has 301 characters; Telegram allows 300"
    ]


def test_question_length_counts_emoji_as_two(lessons):
    edit(grad(lessons), QUESTION, f"    question: {'🔥' * 151}\n")
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': the question has 302 characters; Telegram allows 300"
    ]


def test_option_of_100_characters_is_fine(lessons):
    edit(grad(lessons), "        text: Fills each parameter's .grad with zeros\n", f"        text: {'o' * 100}\n")
    assert problems(lessons) == []


def test_option_over_100_characters_is_reported_with_its_number(lessons):
    edit(grad(lessons), "        text: Fills each parameter's .grad with zeros\n", f"        text: {'o' * 101}\n")
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': option 2 has 101 characters; Telegram allows 100"
    ]


def test_question_with_one_option_is_reported(lessons):
    edit(
        grad(lessons),
        OPTIONS,
        "      - id: to-none\n        text: Sets each parameter's .grad to None\n        correct: true\n",
    )
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [f"{path}:{line}: question 'zero-grad-default': has 1 options; Telegram allows 2 to 10"]


def _options(n: int) -> str:
    return OPTIONS + "".join(f"      - id: extra-{i}\n        text: Extra option {i}\n" for i in range(n - 4))


def test_question_with_ten_options_is_fine(lessons):
    edit(grad(lessons), OPTIONS, _options(10))
    assert problems(lessons) == []


def test_question_with_eleven_options_is_reported(lessons):
    edit(grad(lessons), OPTIONS, _options(11))
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': has 11 options; Telegram allows 2 to 10"
    ]


def test_explanation_of_200_characters_is_fine(lessons):
    edit(grad(lessons), EXPLANATION, f"    explanation: {'e' * 200}\n")
    assert problems(lessons) == []


def test_explanation_over_200_characters_is_reported(lessons):
    edit(grad(lessons), EXPLANATION, f"    explanation: {'e' * 201}\n")
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': the explanation has 201 characters; Telegram allows 200"
    ]


def test_explanation_with_two_line_breaks_is_fine(lessons):
    edit(grad(lessons), EXPLANATION, "    explanation: |\n      One.\n      Two.\n      Three.\n")
    assert problems(lessons) == []


def test_explanation_with_three_line_breaks_is_reported(lessons):
    edit(grad(lessons), EXPLANATION, "    explanation: |\n      One.\n      Two.\n      Three.\n      Four.\n")
    path, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': the explanation has 3 line breaks; Telegram allows 2"
    ]


def test_every_limit_of_one_question_is_reported_together(lessons):
    path = grad(lessons)
    edit(path, QUESTION, f"    question: {'q' * 301}\n")
    edit(path, EXPLANATION, f"    explanation: {'e' * 201}\n")
    _, line = zero_grad_default(lessons)
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': the explanation has 201 characters; Telegram allows 200",
        f"{path}:{line}: question 'zero-grad-default': the question has 301 characters; Telegram allows 300",
    ]


def test_translated_question_over_the_limits_is_reported_in_the_translation(lessons):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    path = lessons / "ru" / "03-grad.yaml"
    edit(path, "      - Заполняет .grad каждого параметра нулями\n", f"      - {'н' * 101}\n")
    line = line_of(path, "- id: zero-grad-default")
    assert problems(lessons) == [
        f"{path}:{line}: question 'zero-grad-default': option 2 has 101 characters; Telegram allows 100"
    ]


def test_a_practice_screen_over_4096_characters_is_reported_at_the_exercise(lessons):
    path = grad(lessons)
    edit(
        path,
        "when it runs: is this step's gradient there yet?\"\n",
        "when it runs: is this step's gradient there yet? " + "very " * 900 + '"\n',
    )
    line = line_of(path, "exercise:") + 1  # the exercise's first line
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:{line}: exercise: hint 1 renders to ")
    assert found[0].endswith("characters; Telegram allows 4096")


def test_fail_messages_that_leave_a_failed_verdict_too_little_room_for_output_are_reported(lessons):
    path = grad(lessons)
    long = "expected {expected}: " + "the order matters, " * 120 + "so mind it."
    edit(path, "expected {expected}: each pass must clear the old", long + " Each pass must clear the old")
    line = line_of(path, "exercise:") + 1
    found = problems(lessons)
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:{line}: exercise: a verdict with every check failing leaves ")
    assert found[0].endswith(f"for the learner's output (at least {OUTPUT_ROOM_MIN}); shorten the fail messages")


def test_every_practice_screen_of_the_real_lessons_fits_in_every_language():
    content, found = lint(LESSONS, LOCALES)
    assert [p for p in found if "exercise:" in p.message] == []
    assert any(not lesson.exercise.fallback for course in content.translations.values() for lesson in course.lessons)
