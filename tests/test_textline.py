"""A line in any script: each character in a font that has it, bidi order from fribidi, Arabic shaped by RAQM."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from bot.retention import textline
from bot.retention.textline import FontChain, FontFile, FontsMissing

NOTO = Path("/usr/share/fonts/truetype/noto")
LATIN = FontFile(NOTO / "NotoSans-Regular.ttf")
ARABIC = FontFile(NOTO / "NotoSansArabic-Regular.ttf")
CJK = FontFile(Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"), 0, "fonts-noto-cjk")
CHAIN = FontChain((ARABIC, LATIN, CJK), "ar")

pytestmark = pytest.mark.skipif(
    not all(f.path.exists() for f in (LATIN, ARABIC, CJK)),
    reason="the Noto fonts are not installed: apt-get install fonts-noto-core fonts-noto-cjk (.ci/run does)",
)


def ink(image: Image.Image) -> Image.Image:
    """Return a mask of the ink (anything darker than mid-grey) of an image on white."""
    return image.convert("L").point(lambda v: 255 if v < 128 else 0)


def ink_columns(image: Image.Image) -> list[int]:
    """Return the x of every column with ink."""
    mask = ink(image)
    return [x for x in range(mask.width) if mask.crop((x, 0, x + 1, mask.height)).getbbox() is not None]


def drawn(text: str, chain: FontChain, rtl: bool, size: int = 64) -> Image.Image:
    line = textline.runs(text, chain, rtl)
    image = Image.new("L", (int(textline.width(line, size)) + 40, size * 2), 255)
    textline.draw(ImageDraw.Draw(image), line, 20, size * 1.4, size, "black")
    return image


def test_latin_is_one_left_to_right_run_at_level_zero() -> None:
    order, levels = textline.bidi("autograd", rtl=False)
    assert order == list(range(8)) and levels == [0] * 8
    assert textline.runs("autograd", CHAIN) == [textline.Run("autograd", LATIN, rtl=False)]


def test_arabic_is_one_right_to_left_run_shown_last_letter_first() -> None:
    word = "سامي"
    order, levels = textline.bidi(word, rtl=False)  # its first strong letter makes the line right to left
    assert order == [3, 2, 1, 0] and all(level % 2 for level in levels)
    assert textline.runs(word, CHAIN) == [textline.Run(word, ARABIC, rtl=True)]


def test_an_arabic_title_naming_pytorch_puts_each_script_in_its_font_in_bidi_order() -> None:
    title = "الاشتقاق التلقائي (autograd) في PyTorch"
    line = textline.runs(title, CHAIN, rtl=True)
    # Read left to right on the card: PyTorch, then في, then (autograd), then the Arabic words.
    latin = [run.text for run in line if run.font == LATIN and run.text.isalpha()]
    assert latin == ["PyTorch", "autograd"]
    assert line[0] == textline.Run("PyTorch", LATIN, rtl=False)
    assert all(run.rtl for run in line if run.font == ARABIC)
    assert sorted("".join(run.text for run in line)) == sorted(title)  # nothing lost, nothing twice


def test_japanese_after_latin_switches_to_the_cjk_font() -> None:
    line = textline.runs("2026年12月4日", FontChain((LATIN, ARABIC, CJK), "ja"))
    assert {run.font for run in line} == {LATIN, CJK}
    assert "".join(run.text for run in line) == "2026年12月4日"


def test_characters_no_font_has_are_left_out_rather_than_drawn_as_boxes() -> None:
    assert textline.covered("🦊 Sam", CHAIN) == " Sam"
    assert "".join(run.text for run in textline.runs("Sam 🦊 Lee", CHAIN)) == "Sam  Lee"


def test_arabic_letters_are_joined_so_a_word_has_no_gap() -> None:
    # Six beh in a row join into one stroke; the same letters in their isolated forms (U+FE8F) stand apart.
    for text, joined in (("بببببب", True), ("\ufe8f" * 6, False)):
        columns = ink_columns(drawn(text, FontChain((ARABIC,)), rtl=True))
        gaps = [b - a for a, b in itertools.pairwise(columns) if b - a > 1]
        assert (gaps == []) == joined, text


def test_an_arabic_word_starts_at_the_right() -> None:
    # Alef, the one tall letter, is first in the string: right to left, its stroke is at the right end.
    image = drawn("ابببب", FontChain((ARABIC,)), rtl=True)
    columns = ink_columns(image)
    top = (ink(image).getbbox() or (0, 0, 0, 0))[1]
    tall = ink_columns(image.crop((0, top, image.width, top + 3)))  # only alef reaches the top rows
    assert tall and min(tall) > columns[0] + 0.75 * (columns[-1] - columns[0])


def test_a_missing_font_names_the_package_to_install() -> None:
    with pytest.raises(FontsMissing, match="install Debian's fonts-noto-cjk"):
        textline.truetype(FontFile(Path("/nonexistent/NotoSansCJK-Regular.ttc"), 0, "fonts-noto-cjk"), 20)
