"""bot.content.phone_width: code lines wider than a phone shows are warned about, at their own file line."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.content import phone_width
from bot.content.load import lint

ROOT = Path(__file__).resolve().parent.parent


def test_wide_characters_take_two_columns():
    assert phone_width.display_width("x = 1  # ok") == 11
    assert phone_width.display_width("# 勾配") == 6
    assert phone_width.wide_lines("a" * 46 + "\n" + "b" * 47 + "\n# " + "勾" * 23) == [(2, 47), (3, 48)]


def test_a_wide_line_is_warned_about_at_its_line_in_english_and_in_a_translation_with_its_own_code(tmp_path):
    lessons = tmp_path / "lessons"
    shutil.copytree(ROOT / "lessons" / "en", lessons / "en")
    shutil.copytree(ROOT / "lessons" / "ja", lessons / "ja")
    english = lessons / "en" / "03-grad.yaml"
    padded = "print(h.grad)" + " " * 20  # the code line becomes 48 columns wide
    english.write_text(english.read_text(encoding="utf-8").replace("print(h.grad)", padded, 1), encoding="utf-8")
    japanese = lessons / "ja" / "03-grad.yaml"
    comment = "      # 間でクリアしない\n"
    japanese.write_text(
        japanese.read_text(encoding="utf-8").replace(
            comment, "      # 間でクリアしない（2回目のbackwardの前に何もしない）\n"
        ),
        encoding="utf-8",
    )
    content, problems = lint(lessons, ROOT / "locales")
    assert content is not None and problems == []
    found = [str(w) for w in phone_width.warnings(content)]
    english_line = next(
        n for n, line in enumerate(english.read_text(encoding="utf-8").splitlines(), 1) if padded in line
    )
    japanese_line = next(
        n for n, line in enumerate(japanese.read_text(encoding="utf-8").splitlines(), 1) if "何もしない" in line
    )
    assert found == [
        f"{english}:{english_line}: slide 'leaves-only': code line 7 is 48 columns wide; a phone shows 46 before "
        "it wraps it",
        f"{japanese}:{japanese_line}: slide 'gradients-add-up': code line 4 is 53 columns wide; a phone shows 46 "
        "before it wraps it",
    ]
