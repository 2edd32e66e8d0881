"""Lint of a lesson's drills: each problem reported as path:line: message, on the line an author must open.

Each test copies the real lessons/ to tmp_path, replaces lesson 3's `drills:` block (English, or a
translation's) with a broken one, and checks the one problem the loader reports, at its line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.authoring.stamps import lesson_parts, outdated
from bot.course.model import ChoiceDrill, ParsonsDrill
from bot.course.parsing import parse
from bot.library.load import lint
from tests.conftest import LOCALES
from tests.test_course_parsing import line_of

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"

PARSONS = """\
  - id: order
    kind: parsons
    prompt: Put them in order.
    setup: |
      import torch
    lines: |
      a = torch.tensor(1.0)
      b = torch.tensor(2.0)
      c = a + b
    checks:
      - id: c-value
        expr: c
        kind: close
        fail: "`c` is {got}."
    explanation: Add them.
"""
W2 = '      - text: "2"\n        why: Two is one too many.\n'  # FILL's wrong choice, with its reason
FILL = """\
  - id: gap
    kind: fill
    prompt: Fill the gap.
    code: |
      x = ___
    choices:
      - text: "1"
        correct: true
      - text: "2"
        why: Two is one too many.
    explanation: One.
"""
PREDICT = """\
  - id: guess
    kind: predict
    prompt: What does it print?
    code: |
      print(1 + 1)
    choices:
      - text: "2"
        correct: true
      - text: "11"
        why: "`+` adds numbers; it joins strings only."
    explanation: Two.
"""


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")
    return target


def english(lessons_dir: Path) -> Path:
    return lessons_dir / "en" / "03-grad.yaml"


def set_drills(path: Path, block: str) -> None:
    """Replace the `drills:` block at the end of ``path`` (before its `sources:`, if any)."""
    text = path.read_text(encoding="utf-8")
    start = text.index("\ndrills:\n")
    end = text.find("\nsources:", start)
    tail = text[end:] if end >= 0 else "\n"
    path.write_text(text[:start] + "\ndrills:\n" + block + tail, encoding="utf-8")


def problems(lessons_dir: Path) -> list[str]:
    _, found = parse(lessons_dir)
    return [str(p) for p in found]


def only_problem(lessons_dir: Path, path: Path, needle: str, message: str) -> None:
    """Assert the loader reports exactly one problem: ``message`` at the line holding ``needle`` in the drills."""
    assert problems(lessons_dir) == [f"{path}:{line_of(path, needle, after='drills:')}: {message}"]


def test_the_shipped_drills_load_with_every_kind():
    content, found = parse(LESSONS)
    assert found == [] and content is not None
    kinds = {drill.kind for lesson in content.english.lessons for drill in lesson.drills}
    assert kinds == {"parsons", "fill", "predict"}


def test_a_well_formed_block_of_each_kind_loads_as_its_model(lessons):
    set_drills(english(lessons), PARSONS + FILL + PREDICT)
    content, found = parse(lessons)
    assert found == [] and content is not None
    order, gap, guess = content.english.lesson("grad").drills
    assert isinstance(order, ParsonsDrill) and order.lines == (
        "a = torch.tensor(1.0)",
        "b = torch.tensor(2.0)",
        "c = a + b",
    )
    assert order.setup == "import torch" and order.checks[0].expect is None  # compared with the author's order
    assert isinstance(gap, ChoiceDrill) and (gap.kind, gap.choices, gap.correct, gap.answer) == (
        "fill",
        ("1", "2"),
        0,
        "x = 1",
    )
    assert isinstance(guess, ChoiceDrill) and guess.kind == "predict" and guess.answer == "print(1 + 1)"


def test_a_lesson_without_drills_is_fine(lessons):
    path = english(lessons)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: text.index("\ndrills:\n")] + "\n", encoding="utf-8")
    content, found = parse(lessons)
    assert found == [] and content is not None and content.english.lesson("grad").drills == ()


# English: one broken thing per test, found at its line.

CASES = [
    # (what is changed: old -> new in the PARSONS/FILL block, the line's needle, the message)
    (
        PARSONS.replace("kind: parsons", "kind: puzzle"),
        "kind: puzzle",
        "drill 'order': 'kind' must be one of parsons, fill, predict",
    ),
    (
        PARSONS.replace("id: order", "id: a-much-too-long-drill-id"),
        "id: a-much",
        "drill 'a-much-too-long-drill-id': the id is longer than 16 characters",
    ),
    (PARSONS.replace("    explanation: Add them.\n", ""), "id: order", "drill 'order': missing 'explanation'"),
    (PARSONS.replace("      c = a + b\n", ""), "lines: |", "drill 'order': has 2 lines, expected 3 to 7"),
    (
        FILL
        + PARSONS.replace("      c = a + b\n", "      c = a + b\n" + "      c = c + 1\n" * 3).replace(
            "    checks:", "    distractors: |\n      c = 1\n      c = 2\n    checks:"
        ),
        "lines: |",
        "drill 'order': 8 lines and distractors to tap; at most 7 fit",
    ),
    (
        PARSONS.replace("      b = torch.tensor(2.0)\n", "      b = torch.tensor(2.0)\n\n"),
        "      c = a + b",  # reported on the blank line, the one before
        "drill 'order': 'lines' line 3 is blank: every line is one tap",
    ),
    (
        PARSONS.replace("      c = a + b\n", "      c = a + b  # add\n"),
        "c = a + b  # add",
        "drill 'order': 'lines' line 3 has a comment: "
        "lines are shown as they are in every language, so explain in the prompt",
    ),
    (
        PARSONS.replace("      c = a + b\n", "      if True:\n        c = a + b\n"),
        "  c = a + b",
        "drill 'order': 'lines' line 4 is indented by 2 spaces; use multiples of 4",
    ),
    (
        PARSONS.replace("      c = a + b\n", "      c = a + b + a + b + a + b + a + b + a + b + a + b\n"),
        "c = a + b + a",
        "drill 'order': 'lines' line 3 has 49 columns; a phone shows 36: wrap it",
    ),
    (
        PARSONS.replace("      c = a + b\n", "      c = (a + b\n"),
        "c = (a + b",
        "drill 'order': 'lines' line 3 is half a statement: a line is one tap, so join it",
    ),
    (
        PARSONS.replace("      c = a + b\n", "      c = a +\n"),
        "lines: |",
        "drill 'order': the setup and lines in this order are not Python (line 4: invalid syntax)",
    ),
    (
        PARSONS.replace("        kind: close\n", "        kind: near\n"),
        "kind: near",
        "check 'c-value': kind must be one of equal, close, same, shape, dtype, true, uses, inside",
    ),
    (
        PARSONS.replace("        expr: c\n", "        expr: c +\n"),
        "expr: c +",
        "check 'c-value': 'expr' 'c +': not a Python expression (invalid syntax)",
    ),
    (
        PARSONS.replace("    prompt: Put them in order.", "    prompt: Put `them in order."),
        "prompt: Put",
        "drill 'order': 'prompt' has unclosed ` (opened at character 5)",
    ),
    (
        PARSONS.replace("    prompt: Put them in order.", "    prompt: " + "word " * 50),
        "prompt: word",
        "drill 'order': 'prompt' has 249 characters, at most 240",
    ),
    (
        FILL.replace("      x = ___\n", "      x = 1\n"),
        "code: |",
        "drill 'gap': the code must have one gap written ___, it has 0",
    ),
    (
        FILL.replace("      x = ___\n", "      x = ___ + ___\n"),
        "code: |",
        "drill 'gap': the code must have one gap written ___, it has 2",
    ),
    (FILL.replace(W2, ""), "choices:", "drill 'gap': has 1 choices, expected 2 to 4"),
    (
        FILL.replace(W2, W2 + W2.replace("2", "3") + W2.replace("2", "4") + W2.replace("2", "5")),
        "choices:",
        "drill 'gap': has 5 choices, expected 2 to 4",
    ),
    (
        FILL.replace(W2, '      - text: "2"\n        correct: true\n'),
        "choices:",
        "drill 'gap': exactly one choice must have 'correct: true', 2 are",
    ),
    (
        FILL.replace("        correct: true\n", ""),
        "choices:",
        "drill 'gap': exactly one choice must have 'correct: true', none is",
    ),
    (FILL.replace(W2, W2.replace("2", "1")), "choices:", "drill 'gap': two choices are the same"),
    (
        FILL.replace(W2, W2.replace('"2"', '"2 +\\n 3"')),
        '- text: "2 +',
        "drill 'gap': choice 2 must be one line of text",
    ),
    # A wrong choice says why it is wrong; the right one needs no reason.
    (
        FILL.replace(W2, '      - "2"\n'),
        '- "2"',
        "drill 'gap': choice 2 is wrong, so it needs a 'why': write it as 'text:' and 'why:', "
        "one sentence on what this choice does instead",
    ),
    (
        FILL.replace("        correct: true\n", "        correct: true\n        why: It is one.\n"),
        '- text: "1"',
        "drill 'gap': choice 1 is the right one, so it takes no 'why'",
    ),
    (
        FILL.replace("why: Two is one too many.", "why: Two is `one too many."),
        "why: Two",
        "drill 'gap', choice 2: 'why' has unclosed ` (opened at character 8)",
    ),
    (
        FILL.replace("why: Two is one too many.", "why: " + "word " * 40),
        "why: word",
        "drill 'gap', choice 2: 'why' has 199 characters, at most 160",
    ),
    (
        FILL.replace('      - text: "1"\n', '      - text: "1 +"\n'),
        "code: |",
        "drill 'gap': the code with the right choice is not Python (line 1: invalid syntax)",
    ),
    (
        FILL.replace("      x = ___\n", "      value_of_the_thing = ___\n").replace('"1"', '"1 + 2 + 3 + 4 + 5"'),
        "code: |",
        "drill 'gap': with the right choice the gap's line is 38 columns wide; a phone shows 36",
    ),
    (
        PREDICT.replace("      print(1 + 1)\n", "      x = 1\n" * 9),
        "code: |",
        "drill 'guess': 'code' has 9 lines, at most 8",
    ),
    (
        PREDICT.replace("      print(1 + 1)\n", "      print(1 +)\n"),
        "code: |",
        "drill 'guess': the code with the right choice is not Python (line 1: invalid syntax)",
    ),
]


@pytest.mark.parametrize(("block", "needle", "message"), CASES, ids=[case[2][:60] for case in CASES])
def test_each_broken_drill_is_reported_at_its_line(lessons, block, needle, message):
    path = english(lessons)
    set_drills(path, block)
    line = line_of(path, needle, after="drills:") - ("is blank" in message)
    assert problems(lessons) == [f"{path}:{line}: {message}"]


def test_a_distractor_on_the_lessons_first_drill_is_reported(lessons):
    path = english(lessons)
    set_drills(path, PARSONS.replace("    checks:", "    distractors: |\n      c = a - b\n    checks:"))
    only_problem(
        lessons,
        path,
        "distractors:",
        "drill 'order': the lesson's first drill has no distractors: let the learner meet the format first",
    )


def test_distractors_are_fine_after_the_first_drill_and_kept_indented_with_an_indicator(lessons):
    path = english(lessons)
    indented = PARSONS.replace("    checks:", "    distractors: |2\n          c = a - b\n    checks:")
    set_drills(path, FILL + indented)
    content, found = parse(lessons)
    assert found == [] and content is not None
    assert content.english.lesson("grad").drills[1].distractors == ("    c = a - b",)


def test_more_than_two_distractors_are_reported(lessons):
    path = english(lessons)
    set_drills(
        path,
        FILL + PARSONS.replace("    checks:", "    distractors: |\n      c = 1\n      c = 2\n      c = 3\n    checks:"),
    )
    only_problem(lessons, path, "distractors:", "drill 'order': use distractors sparingly: at most 2")


def test_a_distractor_equal_to_a_line_is_reported(lessons):
    path = english(lessons)
    set_drills(path, FILL + PARSONS.replace("    checks:", "    distractors: |\n      c = a + b\n    checks:"))
    found = problems(lessons)
    assert found == [
        f"{path}:{line_of(path, 'distractors:', after='drills:') + 1}: "
        "drill 'order': distractor 1 is also a line of the program"
    ]


def test_a_tab_in_a_line_is_reported(lessons):
    path = english(lessons)
    set_drills(path, PARSONS.replace("      c = a + b\n", "      c = a +\tb\n"))
    only_problem(lessons, path, "c = a +\tb", "drill 'order': 'lines' line 3 has a tab; indent with spaces")


def test_more_than_four_drills_are_reported(lessons):
    path = english(lessons)
    blocks = [FILL.replace("id: gap", f"id: gap-{n}") for n in range(5)]
    set_drills(path, "".join(blocks))
    only_problem(lessons, path, "drills:", "a lesson has at most 4 drills, this one has 5")


def test_duplicate_drill_ids_are_reported(lessons):
    path = english(lessons)
    set_drills(path, FILL + FILL)
    found = problems(lessons)
    first = line_of(path, "id: gap", after="drills:")
    second = line_of(path, "id: gap", after="explanation: One.")
    assert found == [f"{path}:{second}: duplicate drill id 'gap' (first at line {first})"]


def test_a_check_of_a_parsons_drill_may_leave_expect_out_to_compare_with_the_authors_order(lessons):
    path = english(lessons)
    set_drills(path, PARSONS)
    assert problems(lessons) == []
    text = path.read_text(encoding="utf-8")
    assert "      expect" not in text.split("drills:")[1]  # the check compares with the author's order
    path.write_text(text.replace("        kind: close\n", "        kind: close\n        expect:\n"), encoding="utf-8")
    assert any("'expect' is empty; leave it out" in p for p in problems(lessons))


# Translations.


def translation(lessons_dir: Path, language: str = "ru") -> Path:
    shutil.copytree(LESSONS / language, lessons_dir / language)
    return lessons_dir / language / "03-grad.yaml"


def test_a_translated_drill_overlays_its_text_and_keeps_the_english_code(lessons):
    ru = translation(lessons)
    content, found = parse(lessons)
    assert found == [] and content is not None
    english_drills = content.english.lesson("grad").drills
    translated = content.course("ru").lesson("grad").drills
    for source, drill in zip(english_drills, translated, strict=True):
        assert not drill.fallback and drill.source.path == str(ru)
        assert drill.prompt != source.prompt
        if isinstance(drill, ParsonsDrill):
            assert drill.lines == source.lines and [c.expr for c in drill.checks] == [c.expr for c in source.checks]
        else:
            assert (drill.code, drill.choices, drill.correct) == (source.code, source.choices, source.correct)


def test_a_translated_drill_gives_each_wrong_choice_its_reason_in_the_english_order(lessons):
    translation(lessons)
    content, found = parse(lessons)
    assert found == [] and content is not None
    english_drill = content.english.lesson("grad").drill("no-clear")
    drill = content.course("ru").lesson("grad").drill("no-clear")
    assert isinstance(drill, ChoiceDrill) and isinstance(english_drill, ChoiceDrill)
    assert drill.reason(drill.correct) == "" == english_drill.reason(english_drill.correct)
    wrong = [i for i in range(len(drill.choices)) if i != drill.correct]
    assert [drill.choices[i] for i in wrong] == ["-0.6", "-0.2", "0.6"]
    assert drill.reason(wrong[0]).startswith("Это три шага по 0,1 × 2")
    assert english_drill.reason(wrong[0]).startswith("That is three steps of 0.1 × 2")


def test_an_untranslated_drill_falls_back_to_english_and_counts_as_untranslated(lessons):
    ru = translation(lessons)
    text = ru.read_text(encoding="utf-8")
    start, end = text.index("\n  - id: no-clear"), text.index("\nsources:")
    ru.write_text(text[:start] + "\n" + text[end:], encoding="utf-8")
    content, found = parse(lessons)
    assert content is not None
    assert [p.message for p in found] == [
        "sources: 'drill/no-clear' is not translated in this file; run `coursebot lint --stamp " + str(ru) + "`"
    ]
    drill = content.course("ru").lesson("grad").drill("no-clear")
    assert (
        drill is not None and drill.fallback and drill.prompt == content.english.lesson("grad").drill("no-clear").prompt
    )


TRANSLATION_CASES = [
    (
        "  - id: no-clear\n",
        "  - id: no-such-drill\n",
        "id: no-such-drill",
        "drill 'no-such-drill' is not in the English lesson 'grad'",
    ),
    (
        "      - id: w-after\n",
        "      - id: w-later\n",
        "id: w-later",
        "check 'w-later' is not in the English drill 'step-order'",
    ),
    (
        "    prompt: Градиент никто не очищает",
        "    prompt: Градиент `никто не очищает",
        "Градиент `никто",
        "drill 'no-clear': 'prompt' has unclosed ` (opened at character 10)",
    ),
    (
        '      - "Это обнуляет на месте сам `x`, а лист, требующий градиента, такого не позволяет."\n',
        "",
        "why:",
        "drill 'clear-guard': 'why' has 1 reasons, the English drill has 2 wrong choices: one reason for each, "
        "in the English order",
    ),
    (
        '    why:\n      - "До первого',
        '    wh:\n      - "До первого',
        "id: clear-guard",
        "drill 'clear-guard': missing 'why'",
    ),
    (
        '      - "Это обнуляет на месте сам `x`',
        '      - "Это `обнуляет на месте сам `x`',
        "Это `обнуляет",
        "drill 'clear-guard': a reason in 'why' has unclosed ` (opened at character 30)",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "needle", "message"), TRANSLATION_CASES, ids=[c[3][:50] for c in TRANSLATION_CASES]
)
def test_each_broken_translated_drill_is_reported_at_its_line(lessons, old, new, needle, message):
    ru = translation(lessons)
    text = ru.read_text(encoding="utf-8")
    assert text.count(old) == 1
    ru.write_text(text.replace(old, new), encoding="utf-8")
    found = [p for p in problems(lessons) if "sources:" not in p]
    line = line_of(ru, needle, after="drills:")
    assert f"{ru}:{line}: {message}" in found, found


def test_a_translated_fail_message_must_keep_got_as_the_english_does(lessons):
    ru = translation(lessons)
    text = ru.read_text(encoding="utf-8")
    ru.write_text(text.replace("`w` в итоге равен {got}:", "`w` в итоге неверен:"), encoding="utf-8")
    found = [p for p in problems(lessons) if "sources:" not in p]
    line = line_of(ru, "`w` в итоге неверен")
    assert found == [f"{ru}:{line}: check 'w-after': 'fail' must use {{got}}, as the English does"]


def test_a_missing_translated_check_message_is_reported(lessons):
    ru = translation(lessons, "ru")
    text = ru.read_text(encoding="utf-8")
    start = text.index("    checks:\n      - id: w-after")
    end = text.index("    explanation:", start)
    ru.write_text(text[:start] + text[end:], encoding="utf-8")
    found = [p for p in problems(lessons) if "sources:" not in p]
    line = line_of(ru, "id: step-order", after="drills:")
    assert found == [f"{ru}:{line}: drill 'step-order': no translated 'fail' for check 'w-after'"]


def test_translated_code_may_change_comments_only(lessons):
    ru = translation(lessons)
    text = ru.read_text(encoding="utf-8")
    anchor = "  - id: clear-guard\n"
    code = (
        "    code: |\n"
        "      x = torch.tensor(1.5,\n"
        "                       requires_grad=True)\n"
        "      for step in range(3):  # три шага\n"
        "          ___\n"
        "          (x ** 2).backward()\n"
        "      print(x.grad)  # -> tensor(3.)\n"
    )
    ru.write_text(text.replace(anchor, anchor + code), encoding="utf-8")
    content, found = parse(lessons)
    assert [p for p in found if "sources:" not in p.message] == []
    assert content is not None
    assert "# три шага" in content.course("ru").lesson("grad").drill("clear-guard").code
    ru.write_text(text.replace(anchor, anchor + code.replace("range(3)", "range(4)")), encoding="utf-8")
    found = [str(p) for p in parse(lessons)[1] if "sources:" not in p.message]
    assert found == [
        f"{ru}:{line_of(ru, 'code: |', after='id: clear-guard')}: drill 'clear-guard': "
        "'code' differs from the English code: translate only its comments"
    ]


def test_a_changed_english_drill_makes_its_translation_stale(lessons):
    translation(lessons)
    content, _ = parse(lessons)
    assert content is not None
    english_lesson = content.english.lesson("grad")
    assert outdated(content.course("ru").lesson("grad").translation, lesson_parts(english_lesson)) == []
    path = english(lessons)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Nothing clears the gradient.", "Nothing ever clears the gradient."), encoding="utf-8")
    content, _ = parse(lessons)
    assert content is not None
    stale = outdated(content.course("ru").lesson("grad").translation, lesson_parts(content.english.lesson("grad")))
    assert [item.part for item in stale] == ["drill/no-clear"]


# Screens: Telegram's limits and one phone screen.


def test_a_drill_taller_than_a_phone_screen_is_reported(lessons):
    path = english(lessons)
    tall = PARSONS.replace("    explanation: Add them.", "    explanation: |\n" + "      Add them.\n" * 14)
    set_drills(path, tall)
    _, found = lint(lessons, LOCALES)
    assert [str(p) for p in found] == [
        f"{path}:{line_of(path, 'id: order', after='drills:')}: drill 'order': its last screen, solved takes "
        f"{_lines(found)} lines of a phone screen, about 30 fit: shorten the prompt, the code or the explanation"
    ]


def _lines(found) -> str:
    return found[0].message.split(" takes ")[1].split(" ")[0] if found else "?"


def test_every_shipped_drill_screen_fits_a_phone_in_every_language():
    _, found = lint(LESSONS, LOCALES)
    assert found == []
