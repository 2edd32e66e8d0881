"""bot.course.parsing.parse: every content problem is reported as path:line: message, on the right line.

Each test copies the real lessons/ to tmp_path, breaks one thing in the text of a file, and
checks the problem the loader reports. Lines are looked up in the file as written, so a test
fails if the loader points at any other line.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from bot.course.model import Content
from bot.course.parsing import parse

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
PARTIAL_RU = ROOT / "tests" / "fixtures" / "partial" / "ru"


# Helpers: a writable copy of lessons/, exact text edits, line lookup.


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    # English only: each test adds the one translation it is about.
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")
    return target


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def line_of(path: Path, needle: str, *, after: str | None = None) -> int:
    """Return the 1-based line of the first line containing ``needle`` (at or after the line with ``after``)."""
    started = after is None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        started = started or (after in line)
        if started and needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def problems(lessons_dir: Path) -> list[str]:
    """Return the problems the loader reports, as printed, in file and line order."""
    _, found = parse(lessons_dir)
    return [str(p) for p in sorted(found, key=lambda p: (p.path, p.line, p.message))]


def rewrite(path: Path, change) -> None:
    """Load ``path`` as plain YAML, let ``change`` modify it, and write it back."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000), encoding="utf-8")


def grad(lessons_dir: Path) -> Path:
    return lessons_dir / "en" / "03-grad.yaml"


# The real content.


def test_real_lessons_load_without_problems():
    content, found = parse(LESSONS)
    assert found == []
    assert isinstance(content, Content)
    course = content.english
    assert (course.id, course.language) == ("autograd", "en")
    assert [lesson.id for lesson in course.lessons] == ["requires-grad", "backward", "grad", "no-grad"]
    assert [lesson.number for lesson in course.lessons] == [1, 2, 3, 4]
    for lesson in course.lessons:
        assert 10 <= len(lesson.slides) <= 14
        assert 2 <= len(lesson.quiz) <= 4
        assert not any(s.fallback for s in lesson.slides)


def test_slides_and_questions_remember_their_file_and_line():
    content, _ = parse(LESSONS)
    lesson = content.english.lesson("grad")
    path = grad(LESSONS)
    assert lesson.source.path == str(path)
    assert lesson.slides[11].id == "accumulate"
    assert lesson.slides[11].source.line == line_of(path, "- id: accumulate")
    assert lesson.question("chunk-scaling").source.line == line_of(path, "- id: chunk-scaling")


def test_code_keeps_its_indentation_and_loses_the_trailing_newline():
    content, _ = parse(LESSONS)
    slide = content.english.lesson("grad").slides[4]
    assert slide.id == "grad-is-live"
    assert slide.code.endswith("print(kept)\n# -> [tensor(2.), tensor(4.)]")
    assert "\n    (2 * x).backward()" in slide.code


def test_a_broken_file_leaves_no_content(lessons):
    edit(grad(lessons), "  - id: accumulate\n", "  - id: Why\n")
    content, found = parse(lessons)
    assert content is None
    assert found


# YAML itself.


def test_invalid_yaml_is_reported_at_the_offending_line(lessons):
    path = grad(lessons)
    edit(path, "    title: Gradients add up\n", "    title: Gradients: add: up\n")
    line = line_of(path, "title: Gradients: add: up")
    assert problems(lessons) == [f"{path}:{line}: invalid YAML: mapping values are not allowed here"]


def test_duplicate_key_is_reported_at_its_second_occurrence(lessons):
    path = grad(lessons)
    edit(
        path,
        "    title: Adding up on purpose\n",
        "    title: Adding up on purpose\n    title: Adding up, twice\n",
    )
    line = line_of(path, "title: Adding up, twice")
    assert problems(lessons) == [f"{path}:{line}: duplicate key 'title'"]


def test_empty_lesson_file_is_reported(lessons):
    path = grad(lessons)
    path.write_text("# nothing yet\n", encoding="utf-8")
    assert f"{path}:1: the file is empty" in problems(lessons)


def test_lesson_file_that_is_a_list_is_reported(lessons):
    path = grad(lessons)
    path.write_text("- id: grad\n", encoding="utf-8")
    assert f"{path}:1: expected a mapping of keys (like 'id: ...') at the top of the file" in problems(lessons)


def test_file_that_is_not_utf8_is_reported(lessons):
    path = grad(lessons)
    path.write_bytes(path.read_bytes().replace(b"Gradients add up", b"Gradients \xff add up"))
    found = problems(lessons)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:1: not UTF-8 text")


def test_a_list_used_as_a_key_is_reported_not_raised(lessons):
    path = grad(lessons)
    edit(path, "    title: Adding up on purpose\n", "    title: Adding up on purpose\n    ? [a, b]\n    : c\n")
    line = line_of(path, "? [a, b]")
    assert problems(lessons) == [f"{path}:{line}: a key must be plain text, like 'title'"]


# Keys.


def test_unknown_key_is_reported_at_its_line_with_the_expected_keys(lessons):
    path = grad(lessons)
    edit(path, "    text: >\n      Big batches can", "    txet: >\n      Big batches can")
    typo, slide = line_of(path, "txet:"), line_of(path, "- id: accumulate")
    assert problems(lessons) == [
        f"{path}:{slide}: slide 'accumulate': missing 'text'",
        f"{path}:{typo}: slide 'accumulate': unknown key 'txet' (expected code, id, setup, text, title)",
    ]


def test_unknown_key_at_the_top_of_a_lesson_is_reported(lessons):
    path = grad(lessons)
    edit(path, "summary: Where gradients", "sumary: Where gradients")
    line = line_of(path, "sumary:")
    found = problems(lessons)
    assert f"{path}:1: lesson: missing 'summary'" in found
    assert (
        f"{path}:{line}: lesson: unknown key 'sumary' "
        "(expected drills, exercise, id, quiz, recap, slides, summary, title)" in found
    )


def test_missing_lesson_key_is_reported_at_the_top_of_the_lesson(lessons):
    path = grad(lessons)
    edit(path, "summary: Where gradients are stored, why they add up, and how to clear them.\n", "")
    assert problems(lessons) == [f"{path}:1: lesson: missing 'summary'"]


def test_missing_question_key_is_reported_at_the_question(lessons):
    path = grad(lessons)
    edit(path, "    explanation: backward() adds to .grad, so the new 6 lands on top of the old 6.\n", "")
    line = line_of(path, "- id: second-pass")
    assert problems(lessons) == [f"{path}:{line}: question 'second-pass': missing 'explanation'"]


def test_empty_value_is_reported_at_its_key(lessons):
    path = grad(lessons)
    edit(path, "    title: Adding up on purpose\n", "    title: '  '\n")
    line = line_of(path, "title: '  '")
    assert problems(lessons) == [f"{path}:{line}: slide 'accumulate': 'title' is empty"]


def test_value_of_the_wrong_kind_is_reported_at_its_key(lessons):
    path = grad(lessons)
    edit(path, "    title: Adding up on purpose\n", "    title: [Adding, up]\n")
    line = line_of(path, "title: [Adding, up]")
    assert problems(lessons) == [f"{path}:{line}: slide 'accumulate': 'title' must be text"]


# Ids.


def test_duplicate_slide_id_is_reported_with_its_line(lessons):
    path = grad(lessons)
    first = line_of(path, "- id: gradients-add-up")
    edit(path, "  - id: accumulate\n", "  - id: gradients-add-up\n")
    second = line_of(path, "- id: gradients-add-up", after="title: Gradients add up")
    assert problems(lessons) == [f"{path}:{second}: duplicate slide id 'gradients-add-up' (first at line {first})"]


def test_duplicate_question_id_is_reported_with_its_line(lessons):
    path = grad(lessons)
    first = line_of(path, "- id: second-pass")
    edit(path, "  - id: chunk-scaling\n", "  - id: second-pass\n")
    second = line_of(path, "- id: second-pass", after="old 6.")
    assert problems(lessons) == [f"{path}:{second}: duplicate question id 'second-pass' (first at line {first})"]


@pytest.mark.parametrize("bad", ["Why-Accumulate", "why_accumulate", "why--accumulate", "-why", "why-", "why.x"])
def test_bad_slide_id_is_reported_at_its_line(lessons, bad):
    path = grad(lessons)
    edit(path, "  - id: accumulate\n", f"  - id: {bad}\n")
    line = line_of(path, f"- id: {bad}")
    assert problems(lessons) == [f"{path}:{line}: slide id '{bad}' must be lowercase words joined by '-'"]


def test_bad_question_id_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(path, "  - id: chunk-scaling\n", "  - id: chunk scaling\n")
    line = line_of(path, "- id: chunk scaling")
    assert problems(lessons) == [f"{path}:{line}: question id 'chunk scaling' must be lowercase words joined by '-'"]


def test_bad_lesson_id_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(path, "id: grad\n", "id: Grad_3\n")
    assert problems(lessons) == [f"{path}:1: lesson id 'Grad_3' must be lowercase words joined by '-'"]


def test_slide_without_an_id_is_reported_at_the_slide(lessons):
    path = grad(lessons)
    edit(path, "  - id: accumulate\n    title: Adding", "  - title: Adding")
    line = line_of(path, "- title: Adding up on purpose")
    assert problems(lessons) == [f"{path}:{line}: slide without an 'id'"]


def test_duplicate_lesson_id_across_files_is_reported(lessons):
    path = lessons / "en" / "04-no-grad.yaml"
    edit(path, "id: no-grad\n", "id: grad\n")
    assert f"{path}:1: duplicate lesson id 'grad' (also in {grad(lessons)})" in problems(lessons)


def test_question_id_with_a_trailing_newline_is_refused(lessons):
    path = grad(lessons)
    edit(path, "  - id: second-pass\n", "  - id: |\n      second-pass\n")
    line = line_of(path, "- id: |")
    assert problems(lessons) == [f"{path}:{line}: question id 'second-pass\n' must be lowercase words joined by '-'"]


# Quiz options.


def test_question_with_no_correct_option_is_reported_at_its_options(lessons):
    path = grad(lessons)
    edit(
        path,
        "        text: Divide each chunk's loss by 4\n        correct: true\n",
        "        text: Divide each chunk's loss by 4\n",
    )
    line = line_of(path, "options:", after="- id: chunk-scaling")
    assert problems(lessons) == [
        f"{path}:{line}: question 'chunk-scaling': exactly one option must have 'correct: true', none is"
    ]


def test_question_with_two_correct_options_is_reported_at_its_options(lessons):
    path = grad(lessons)
    edit(
        path,
        "        text: Call zero_grad() between the chunks\n",
        "        text: Call zero_grad() between the chunks\n        correct: true\n",
    )
    line = line_of(path, "options:", after="- id: chunk-scaling")
    assert problems(lessons) == [
        f"{path}:{line}: question 'chunk-scaling': exactly one option must have 'correct: true', 2 are"
    ]


def test_correct_must_be_true_or_false(lessons):
    path = grad(lessons)
    edit(
        path,
        "        text: Divide each chunk's loss by 4\n        correct: true\n",
        "        text: Divide each chunk's loss by 4\n        correct: maybe\n",
    )
    line = line_of(path, "correct: maybe")
    assert f"{path}:{line}: question 'chunk-scaling', option 1: 'correct' must be true or false" in problems(lessons)


def test_unknown_option_key_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(
        path,
        "        text: Multiply the learning rate by 4\n",
        "        text: Multiply the learning rate by 4\n        hint: no\n",
    )
    line = line_of(path, "hint: no")
    assert (
        f"{path}:{line}: question 'chunk-scaling', option 3: unknown key 'hint' (expected correct, id, text)"
        in problems(lessons)
    )


def test_an_english_option_without_an_id_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(path, "      - id: scale-lr\n        text: Multiply", "      - text: Multiply")
    line = line_of(path, "- text: Multiply")
    assert problems(lessons) == [f"{path}:{line}: option without an 'id'"]


def test_an_english_option_as_plain_text_is_reported_at_its_line(lessons):
    path = grad(lessons)
    edit(path, "      - id: scale-lr\n        text: Multiply the learning rate by 4\n", "      - Multiply the rate\n")
    line = line_of(path, "- Multiply the rate")
    assert problems(lessons) == [
        f"{path}:{line}: question 'chunk-scaling': each entry of 'options' must be a mapping with an 'id'"
    ]


def test_a_duplicate_option_id_is_reported_with_the_first(lessons):
    path = grad(lessons)
    edit(path, "      - id: scale-lr\n", "      - id: zero-between\n")
    first = line_of(path, "- id: zero-between")
    line = line_of(path, "- id: zero-between", after="text: Call zero_grad() between the chunks")
    assert problems(lessons) == [f"{path}:{line}: duplicate option id 'zero-between' (first at line {first})"]


@pytest.mark.parametrize("written", ["No", "Scale_LR", "-scale"])
def test_an_option_id_that_is_not_lowercase_words_is_refused(lessons, written):
    path = grad(lessons)
    edit(path, "      - id: scale-lr\n", f"      - id: {written}\n")
    line = line_of(path, f"- id: {written}")
    [found] = problems(lessons)
    assert found.startswith(f"{path}:{line}: option id ")
    assert found.endswith("must be lowercase words joined by '-'")


def test_options_keep_their_ids_and_the_correct_one_is_the_marked_one(lessons):
    path = grad(lessons)
    edit(path, "        text: tensor(12.)\n        correct: true\n", "        text: tensor(12.)\n")
    edit(path, "        text: None\n", "        text: None\n        correct: true\n")
    content, found = parse(lessons)
    assert found == []
    question = content.english.lesson("grad").question("second-pass")
    assert question.options == ("tensor(12.)", "tensor(6.)", "tensor(0.)", "None")
    assert question.option_ids == ("twelve", "six", "zero", "no-grad")
    assert (question.correct, question.correct_id) == (3, "no-grad")
    assert question.option_text("zero") == "tensor(0.)"
    assert question.option_text("gone") is None


@pytest.mark.parametrize("written", ["6.", "0.10"])
def test_numeric_looking_option_is_shown_as_written(lessons, written):
    path = grad(lessons)
    edit(path, "        text: tensor(6.)\n", f"        text: {written}\n")
    content, found = parse(lessons)
    assert found == []
    assert content.english.lesson("grad").question("second-pass").options[1] == written


def test_a_slide_id_too_long_for_its_buttons_data_is_reported_at_the_slide(lessons):
    # Back and Next carry the lesson id and the slide id: 2 + 29 + 1 + 33 bytes is one too many.
    path = grad(lessons)
    edit(path, "id: grad\n", "id: reading-and-zeroing-gradients\n")
    edit(path, "  - id: leaves-only\n", "  - id: leaves-only-and-nothing-else-here\n")
    line = line_of(path, "- id: leaves-only-and-nothing-else-here")
    [found] = problems(lessons)
    assert found.startswith(f"{path}:{line}: slide 'leaves-only-and-nothing-else-here': ")
    assert "65 bytes; Telegram allows 64" in found


# Counts.


def _slides(n: int):
    def change(data):
        slides = data["slides"]
        while len(slides) < n:
            slides.append({**slides[0], "id": f"extra-{len(slides)}"})
        del slides[n:]

    return change


def _questions(n: int):
    def change(data):
        quiz = data["quiz"]
        while len(quiz) < n:
            quiz.append({**quiz[0], "id": f"extra-{len(quiz)}"})
        del quiz[n:]

    return change


@pytest.mark.parametrize("n", [9, 15, 1])
def test_wrong_slide_count_is_reported_at_the_slides_key(lessons, n):
    path = grad(lessons)
    rewrite(path, _slides(n))
    line = line_of(path, "slides:")
    assert problems(lessons) == [f"{path}:{line}: a lesson has 10 to 14 slides, this one has {n}"]


@pytest.mark.parametrize("n", [10, 14])
def test_ten_and_fourteen_slides_are_fine(lessons, n):
    rewrite(grad(lessons), _slides(n))
    assert problems(lessons) == []


@pytest.mark.parametrize("n", [1, 5])
def test_wrong_quiz_count_is_reported_at_the_quiz_key(lessons, n):
    path = grad(lessons)
    rewrite(path, _questions(n))
    line = line_of(path, "quiz:")
    assert problems(lessons) == [f"{path}:{line}: a lesson has 2 to 4 questions in the Quick Check, this one has {n}"]


@pytest.mark.parametrize("n", [2, 4])
def test_two_and_four_questions_are_fine(lessons, n):
    rewrite(grad(lessons), _questions(n))
    assert problems(lessons) == []


# Markup.


def test_unclosed_code_in_slide_text_is_reported_at_the_text_key(lessons):
    path = grad(lessons)
    edit(path, "call `backward()` on each\n      chunk", "call `backward() on each\n      chunk")
    text = yaml.safe_load(path.read_text(encoding="utf-8"))["slides"][11]["text"].strip()
    line = line_of(path, "text: >", after="- id: accumulate")
    assert problems(lessons) == [
        f"{path}:{line}: slide 'accumulate': 'text' has unclosed ` (opened at character {text.index('`') + 1})"
    ]


def test_unclosed_bold_in_recap_is_reported_at_the_recap_key(lessons):
    path = grad(lessons)
    edit(path, "sets them to `None` by default.", "sets them to **None by default.")
    recap = yaml.safe_load(path.read_text(encoding="utf-8"))["recap"].strip()
    line = line_of(path, "recap:")
    assert problems(lessons) == [
        f"{path}:{line}: lesson: 'recap' has unclosed ** (opened at character {recap.index('**') + 1})"
    ]


def test_unclosed_mark_in_slide_title_is_reported_at_the_title_key(lessons):
    path = grad(lessons)
    edit(path, "    title: Adding up on purpose\n", "    title: Adding `up is on purpose\n")
    line = line_of(path, "title: Adding `up")
    assert problems(lessons) == [f"{path}:{line}: slide 'accumulate': 'title' has unclosed ` (opened at character 8)"]


# The course file.


def test_lesson_listed_without_a_file_is_reported_at_its_entry(lessons):
    course = lessons / "en" / "course.yaml"
    edit(course, "  - 04-no-grad\n", "  - 04-no-grad\n  - 05-missing\n")
    line = line_of(course, "05-missing")
    missing = lessons / "en" / "05-missing.yaml"
    assert problems(lessons) == [f"{course}:{line}: lesson '05-missing' has no file {missing}"]


def test_lesson_file_not_listed_in_course_is_reported(lessons):
    extra = lessons / "en" / "05-extra.yaml"
    shutil.copy(grad(lessons), extra)
    edit(extra, "id: grad\n", "id: extra\n")
    assert problems(lessons) == [f"{extra}:1: this lesson is not listed in course.yaml"]


def test_missing_english_course_file_is_reported(lessons):
    (lessons / "en" / "course.yaml").unlink()
    content, found = parse(lessons)
    assert content is None
    assert [str(p) for p in found] == [
        f"{lessons / 'en' / 'course.yaml'}:1: missing: the English course file is required"
    ]


def test_missing_course_key_is_reported(lessons):
    course = lessons / "en" / "course.yaml"
    edit(course, "title: PyTorch autograd\n", "")
    assert problems(lessons) == [f"{course}:1: course: missing 'title'"]


# Translations.

TRANSLATION = """\
lesson: grad
title: Чтение и обнуление .grad
slides:
  - id: grad-attribute
    title: Градиенты хранятся в .grad
    text: После `backward()` градиент лежит в `.grad`.
quiz:
  - id: second-pass
    question: Чему теперь равен x.grad?
    options:
      - tensor(12.)
      - tensor(6.)
      - tensor(0.)
      - None
    explanation: backward() прибавляет к .grad.
"""


def translate(lessons_dir: Path, text: str = TRANSLATION, language: str = "ru", name: str = "03-grad.yaml") -> Path:
    path = lessons_dir / language / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_valid_translation_has_no_problems(lessons):
    translate(lessons)
    assert problems(lessons) == []


def test_translation_with_an_unknown_slide_id_is_reported_at_the_id(lessons):
    path = translate(lessons, TRANSLATION.replace("  - id: grad-attribute\n", "  - id: no-such-slide\n"))
    line = line_of(path, "- id: no-such-slide")
    assert problems(lessons) == [f"{path}:{line}: slide 'no-such-slide' is not in the English lesson 'grad'"]


def test_translation_with_an_unknown_question_id_is_reported_at_the_id(lessons):
    path = translate(lessons, TRANSLATION.replace("  - id: second-pass\n", "  - id: third-pass\n"))
    line = line_of(path, "- id: third-pass")
    assert problems(lessons) == [f"{path}:{line}: question 'third-pass' is not in the English lesson 'grad'"]


def test_translation_with_a_different_option_count_is_reported_at_its_options(lessons):
    path = translate(lessons, TRANSLATION.replace("      - None\n", ""))
    line = line_of(path, "options:")
    assert problems(lessons) == [f"{path}:{line}: question 'second-pass': has 3 options, the English question has 4"]


def test_translation_that_marks_correct_options_is_reported_at_its_options(lessons):
    path = translate(
        lessons, TRANSLATION.replace("      - tensor(12.)\n", "      - text: tensor(12.)\n        correct: true\n")
    )
    line = line_of(path, "options:")
    assert problems(lessons) == [
        f"{path}:{line}: question 'second-pass': list options as plain text; the correct answer comes from English"
    ]


def test_translation_with_the_wrong_lesson_id_is_reported_at_the_lesson_key(lessons):
    path = translate(lessons, "# Russian\n" + TRANSLATION.replace("lesson: grad\n", "lesson: backward\n"))
    line = line_of(path, "lesson: backward")
    assert line == 2
    assert problems(lessons) == [f"{path}:{line}: 'lesson' must be 'grad', the id of en/03-grad.yaml"]


def test_translation_without_a_lesson_key_is_reported(lessons):
    path = translate(lessons, TRANSLATION.replace("lesson: grad\n", ""))
    found = problems(lessons)
    assert f"{path}:1: translation: missing 'lesson'" in found
    assert f"{path}:1: 'lesson' must be 'grad', the id of en/03-grad.yaml" in found


def test_translation_of_a_lesson_that_does_not_exist_is_reported(lessons):
    path = translate(lessons, name="07-extra.yaml")
    assert problems(lessons) == [
        f"{path}:1: no English lesson named '07-extra' "
        "(expected one of 01-requires-grad, 02-backward, 03-grad, 04-no-grad)"
    ]


def test_translation_with_a_setup_key_is_reported_as_unknown(lessons):
    path = translate(lessons, TRANSLATION.replace("    text: После", "    setup: import torch\n    text: После"))
    line = line_of(path, "setup: import torch")
    assert problems(lessons) == [
        f"{path}:{line}: slide 'grad-attribute': unknown key 'setup' (expected code, id, text, title)"
    ]


def test_translation_with_unclosed_markup_is_reported_at_its_key(lessons):
    path = translate(lessons, TRANSLATION.replace("лежит в `.grad`.", "лежит в `.grad."))
    line = line_of(path, "text: После")
    text = "После `backward()` градиент лежит в `.grad."
    assert problems(lessons) == [
        f"{path}:{line}: slide 'grad-attribute': 'text' has unclosed ` (opened at character {text.rindex('`') + 1})"
    ]


def test_language_folder_with_a_bad_name_is_reported(lessons):
    translate(lessons, language="russian")
    assert problems(lessons) == [
        f"{lessons / 'russian'}:1: a language folder is named by its code, like 'ru' or 'pt_BR'"
    ]


def test_translated_yes_and_no_options_are_shown_as_written(lessons):
    translate(lessons, TRANSLATION.replace("      - tensor(0.)\n      - None\n", "      - Yes\n      - No\n"))
    content, found = parse(lessons)
    assert found == []
    assert content.course("ru").lesson("grad").question("second-pass").options[2:] == ("Yes", "No")


# The partial Russian fixture.


@pytest.fixture
def partial(lessons: Path) -> Path:
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    return lessons


def _fixture_lesson() -> dict:
    return yaml.safe_load((PARTIAL_RU / "03-grad.yaml").read_text(encoding="utf-8"))


def test_partial_translation_loads_without_problems(partial):
    content, found = parse(partial)
    assert found == []
    assert set(content.translations) == {"ru"}


def test_partial_translation_shows_translated_slides_without_fallback(partial):
    content, _ = parse(partial)
    ru = content.course("ru").lesson("grad")
    translated = {s["id"]: s for s in _fixture_lesson()["slides"]}
    assert len(translated) == 6
    for slide in ru.slides:
        if slide.id in translated:
            assert slide.fallback is False
            assert slide.title == translated[slide.id]["title"]
            assert slide.text == translated[slide.id]["text"].strip()


def test_partial_translation_shows_untranslated_slides_in_english_with_fallback(partial):
    content, _ = parse(partial)
    english = content.english.lesson("grad")
    ru = content.course("ru").lesson("grad")
    translated = {s["id"] for s in _fixture_lesson()["slides"]}
    untranslated = [(e, r) for e, r in zip(english.slides, ru.slides, strict=False) if e.id not in translated]
    assert len(untranslated) == len(english.slides) - 6
    for en_slide, ru_slide in untranslated:
        assert ru_slide.fallback is True
        assert (ru_slide.title, ru_slide.text, ru_slide.code) == (en_slide.title, en_slide.text, en_slide.code)


def test_partial_translation_keeps_english_ids_and_order(partial):
    content, _ = parse(partial)
    english, ru = content.english, content.course("ru")
    assert [lesson.id for lesson in ru.lessons] == [lesson.id for lesson in english.lessons]
    for en_lesson, ru_lesson in zip(english.lessons, ru.lessons, strict=False):
        assert [s.id for s in ru_lesson.slides] == [s.id for s in en_lesson.slides]
        assert [q.id for q in ru_lesson.quiz] == [q.id for q in en_lesson.quiz]
        assert ru_lesson.number == en_lesson.number


def test_partial_translation_keeps_english_code_where_it_gives_none(partial):
    content, _ = parse(partial)
    english = content.english.lesson("grad")
    ru = content.course("ru").lesson("grad")
    assert ru.slides[0].id == "grad-attribute" and ru.slides[0].fallback is False
    assert ru.slides[0].code == english.slides[0].code
    adds_up = next(s for s in ru.slides if s.id == "gradients-add-up")
    assert "# между вызовами ничего не обнуляем" in adds_up.code


def test_partial_translation_translates_one_question_and_falls_back_for_the_rest(partial):
    content, _ = parse(partial)
    english = content.english.lesson("grad")
    ru = content.course("ru").lesson("grad")
    source = _fixture_lesson()["quiz"][0]
    translated = ru.question("zero-grad-default")
    assert translated.fallback is False
    assert translated.question == source["question"]
    assert translated.options == tuple(source["options"])
    assert translated.correct == english.question("zero-grad-default").correct
    for question in ru.quiz[1:]:
        assert question.fallback is True
        assert question == replace(english.question(question.id), fallback=True)


def test_partial_translation_uses_the_translated_titles_and_english_recap(partial):
    content, _ = parse(partial)
    ru = content.course("ru")
    lesson = ru.lesson("grad")
    assert ru.title == "Autograd в PyTorch"
    assert ru.language == "ru"
    assert lesson.title == "Чтение и обнуление .grad"
    assert lesson.recap == content.english.lesson("grad").recap
    assert lesson.recap_fallback is True


def test_partial_translation_leaves_other_lessons_all_english_with_fallback(partial):
    content, _ = parse(partial)
    ru = content.course("ru")
    for lesson in ru.lessons:
        if lesson.id == "grad":
            continue
        english = content.english.lesson(lesson.id)
        assert lesson.title == english.title
        assert lesson.recap_fallback is True
        assert all(s.fallback for s in lesson.slides)
        assert all(q.fallback for q in lesson.quiz)
        assert [s.text for s in lesson.slides] == [s.text for s in english.slides]


def test_translated_question_takes_the_correct_answer_and_the_option_ids_from_english(lessons):
    path = grad(lessons)
    edit(path, "        text: tensor(12.)\n        correct: true\n", "        text: tensor(12.)\n")
    edit(path, "        text: tensor(0.)\n", "        text: tensor(0.)\n        correct: true\n")
    translate(lessons)
    content, found = parse(lessons)
    assert found == []
    question = content.course("ru").lesson("grad").question("second-pass")
    assert question.fallback is False
    assert question.question == "Чему теперь равен x.grad?"
    assert question.correct == 2
    assert question.option_ids == ("twelve", "six", "zero", "no-grad")  # by position, in the English order


def test_english_course_has_no_fallback(partial):
    content, _ = parse(partial)
    english = content.course("en")
    assert english is content.english
    assert not any(s.fallback for lesson in english.lessons for s in lesson.slides)
    assert not any(lesson.recap_fallback for lesson in english.lessons)


def test_language_without_a_folder_is_all_english_with_fallback(partial):
    content, _ = parse(partial)
    es = content.course("es")
    assert es.language == "es"
    assert es.title == content.english.title
    for lesson, english in zip(es.lessons, content.english.lessons, strict=False):
        assert lesson.id == english.id
        assert lesson.recap_fallback is True
        assert [(s.id, s.text, s.fallback) for s in lesson.slides] == [(s.id, s.text, True) for s in english.slides]
        assert [(q.id, q.correct, q.fallback) for q in lesson.quiz] == [(q.id, q.correct, True) for q in english.quiz]


# Translated code and exercises.

EXERCISE = """\
exercise:
  title: Шаг обучения по порядку
  instructions: >
    Исправь цикл: `opt.zero_grad()`, прямой проход, loss, `loss.backward()`, `opt.step()`.
  starter: |
    import torch
    x = torch.rand(3) * 3 + 2
    y = 2 * x
    w = torch.zeros(1).requires_grad_()
    opt = torch.optim.SGD([w], lr=0.02)
    losses = []  # значения loss по шагам
    for step in range(5):
        loss = ((w * x - y) ** 2).mean()
        opt.step()
        loss.backward()
        losses.append(loss.item())
  hints:
    - "`opt.step()` идёт после `loss.backward()`."
    - Начинай каждый проход с `opt.zero_grad()`.
    - "Тело цикла: `opt.zero_grad()`, `pred = w * x`, loss, `loss.backward()`, `opt.step()`."
  checks:
    - id: losses
      fail: "`losses` равен {got}, а ожидалось {expected}: соблюдай порядок шага."
    - id: w-trained
      fail: "`w` равен {got}, а ожидалось {expected}."
"""


def test_a_translated_exercise_replaces_the_english_texts_and_keeps_its_checks(lessons):
    translate(lessons, TRANSLATION + EXERCISE)
    content, found = parse(lessons)
    assert found == []
    english = content.english.lesson("grad").exercise
    ru = content.course("ru").lesson("grad").exercise
    assert ru.fallback is False
    assert ru.title == "Шаг обучения по порядку"
    assert ru.hints[1] == "Начинай каждый проход с `opt.zero_grad()`."
    assert "losses = []  # значения loss по шагам" in ru.starter
    assert ru.checks[0].fail.startswith("`losses` равен {got}, а ожидалось {expected}")
    assert [(c.id, c.expr, c.kind, c.expect) for c in ru.checks] == [
        (c.id, c.expr, c.kind, c.expect) for c in english.checks
    ]
    assert ru.solution == english.solution


def test_a_lesson_without_a_translated_exercise_shows_the_english_one_marked(lessons):
    translate(lessons)
    content, _ = parse(lessons)
    ru = content.course("ru").lesson("grad").exercise
    assert ru.fallback is True
    assert ru.title == content.english.lesson("grad").exercise.title


def test_translated_starter_code_may_change_only_its_comments(lessons):
    path = translate(lessons, TRANSLATION + EXERCISE.replace("losses.append(loss.item())", "losses.append(loss)"))
    line = line_of(path, "starter: |")
    assert problems(lessons) == [
        f"{path}:{line}: exercise: 'starter' differs from the English code: translate only its comments"
    ]
    assert parse(lessons)[0].course("ru").lesson("grad").exercise.fallback is True


def test_translated_exercise_must_give_every_check_a_message(lessons):
    text = EXERCISE.split("    - id: w-trained")[0]
    path = translate(lessons, TRANSLATION + text)
    line = line_of(path, "checks:")
    assert problems(lessons) == [f"{path}:{line}: exercise: no translated 'fail' for check 'w-trained'"]


@pytest.mark.parametrize(
    "change, message",
    [
        (("`losses` равен {got}", "`losses` неверен"), "must use {got}, as the English does"),
        (
            ("а ожидалось {expected}: соблюдай", "а ожидалось иное: соблюдай"),
            "must use {expected}, as the English does",
        ),
        (("соблюдай порядок шага.", "соблюдай порядок шага {got}."), "uses {got} more than once"),
        (("соблюдай порядок шага.", "соблюдай {порядок} шага."), "has braces other than {got} and {expected}"),
    ],
)
def test_translated_fail_message_uses_the_placeholders_english_uses_and_no_other_braces(lessons, change, message):
    path = translate(lessons, TRANSLATION + EXERCISE.replace(*change))
    line = line_of(path, "- id: losses") + 1
    assert problems(lessons) == [f"{path}:{line}: check 'losses': 'fail' {message}"]


def test_translated_exercise_with_another_hint_count_is_reported(lessons):
    path = translate(lessons, TRANSLATION + EXERCISE.replace("    - Начинай каждый проход с `opt.zero_grad()`.\n", ""))
    line = line_of(path, "hints:")
    assert problems(lessons) == [f"{path}:{line}: exercise: has 2 hints, the English exercise has 3"]


def test_translated_check_that_english_lacks_is_reported(lessons):
    path = translate(lessons, TRANSLATION + EXERCISE + "    - id: extra\n      fail: лишняя\n")
    line = line_of(path, "- id: extra")
    assert problems(lessons) == [f"{path}:{line}: check 'extra' is not in the English exercise"]


# The English exercise's checks.


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("      expr: losses\n", "      expr: losses.data\n"),
            "'expr' 'losses.data': a check may read only these attributes",
        ),
        (
            ("      expr: losses\n", "      expr: __import__('os')\n"),
            "a check reads variables and their tensor attributes",
        ),
        (("      expr: losses\n", "      expr: losses =\n"), "'expr' 'losses =': not a Python expression"),
        (
            ("      kind: close\n", '      kind: "true"\n'),
            "'fail' may not use {got}: a 'true' check's value is only False",
        ),
        (("`losses` is {got}", "`losses` is {gott}"), "'fail' has braces other than {got} and {expected}"),
        (("      kind: close\n", "      kind: close\n      expect:\n"), "'expect' is empty"),
    ],
)
def test_an_english_check_is_read_as_the_runner_would_evaluate_it(lessons, change, message):
    path = lessons / "en" / "03-grad.yaml"
    text = path.read_text(encoding="utf-8")
    at = text.index("    - id: losses")
    path.write_text(text[:at] + text[at:].replace(*change, 1), encoding="utf-8")
    found = problems(lessons)
    assert len(found) == 1 and "check 'losses'" in found[0] and message in found[0], found


def test_a_check_without_expect_is_compared_with_the_solution(lessons):
    content, found = parse(lessons)
    assert found == []
    checks = content.english.lesson("grad").exercise.checks
    assert [(c.id, c.expect, c.from_solution) for c in checks] == [("losses", None, True), ("w-trained", None, True)]


SLIDE_CODE = """\
  - id: gradients-add-up
    title: Градиенты суммируются
    text: "`backward()` прибавляет."
    code: |
      x = torch.tensor(3.0,
                       requires_grad=True)
      (x * x).backward()
      print(x.grad)  # -> tensor(6.)
      # между вызовами ничего не обнуляем
      (4 * x).backward()
      print(x.grad)  # -> tensor(10.)
"""


def _with_slide(code: str) -> str:
    return TRANSLATION.replace("quiz:\n", code + "quiz:\n")


def test_translated_slide_code_with_translated_comments_is_shown(lessons):
    translate(lessons, _with_slide(SLIDE_CODE))
    content, found = parse(lessons)
    assert found == []
    slide = next(s for s in content.course("ru").lesson("grad").slides if s.id == "gradients-add-up")
    assert "# между вызовами ничего не обнуляем" in slide.code


@pytest.mark.parametrize(
    "change, message",
    [
        (
            (
                "(4 * x).backward()\n      print(x.grad)  # -> tensor(10.)",
                "(4 * x).backward()\n      print(x.grad)  # -> tensor(11.)",
            ),
            "changes a '# ->' comment: those state what the line prints and stay as in English",
        ),
        (
            ("x = torch.tensor(3.0", "x = torch.tensor(4.0"),
            "differs from the English code: translate only its comments",
        ),
    ],
)
def test_translated_slide_code_that_changes_more_than_comments_is_reported(lessons, change, message):
    slide = SLIDE_CODE.replace(*change)
    path = translate(lessons, _with_slide(slide))
    line = line_of(path, "code: |")
    assert problems(lessons) == [f"{path}:{line}: slide 'gradients-add-up': 'code' {message}"]
