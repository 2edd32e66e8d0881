"""bot.course.phone_width: code lines wider than a phone shows are warned about, at their own file line."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.course import phone_width
from bot.library.load import lint

ROOT = Path(__file__).resolve().parent.parent


def test_wide_characters_take_two_columns():
    assert phone_width.display_width("x = 1  # ok") == 11
    assert phone_width.display_width("# 勾配") == 6
    assert phone_width.CODE_LINE_MAX == 36  # a 390-point phone's code block (issue 20)
    assert phone_width.wide_lines("a" * 36 + "\n" + "b" * 37 + "\n# " + "勾" * 18) == [(2, 37), (3, 38)]


def test_a_short_block_is_held_to_35_columns_as_telegram_for_android_sets_it_bigger():
    # Up to 80 characters, Android's code font is 14 dp: 35 columns at 390 dp (issue 20), not 36.
    assert phone_width.wide_lines("a" * 35 + "\nb = 1") == []
    assert phone_width.wide_lines("a" * 36 + "\nb = 1") == [(1, 36)]
    assert phone_width.wide_lines("a" * 36 + "\n" + "c" * 50) == [(2, 50)]  # 87 characters: 36 columns


def test_a_wide_line_is_warned_about_at_its_line_in_english_and_in_a_translation_with_its_own_code(tmp_path):
    lessons = tmp_path / "lessons"
    shutil.copytree(ROOT / "lessons" / "en", lessons / "en")
    shutil.copytree(ROOT / "lessons" / "ja", lessons / "ja")
    english = lessons / "en" / "03-grad.yaml"
    padded = "print(k.grad)" + " " * 20  # the code line becomes 44 columns wide
    english.write_text(english.read_text(encoding="utf-8").replace("print(k.grad)", padded, 1), encoding="utf-8")
    japanese = lessons / "ja" / "01-requires-grad.yaml"
    comment = "    d = y  # グラフから切り離したy\n"
    japanese.write_text(
        japanese.read_text(encoding="utf-8").replace(comment, "    d = y  # グラフから切り離したyにしておく\n"),
        encoding="utf-8",
    )
    content, problems = lint(lessons, ROOT / "locales")
    assert content is not None and problems == []
    found = [str(w) for w in phone_width.warnings(content)]
    english_line = next(
        n for n, line in enumerate(english.read_text(encoding="utf-8").splitlines(), 1) if padded in line
    )
    japanese_line = next(
        n for n, line in enumerate(japanese.read_text(encoding="utf-8").splitlines(), 1) if "にしておく" in line
    )
    assert found == [
        f"{english}:{english_line}: slide 'leaves-only': code line 8 is 44 columns wide; a phone shows 36 before "
        "it wraps it",
        f"{japanese}:{japanese_line}: exercise: 'starter': code line 5 is 40 columns wide; a phone shows 36 "
        "before it wraps it",
    ]
