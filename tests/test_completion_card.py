"""The completion card: the title, the name and the date are on the image, in the learner's language and script.

The tests look at the pixels. Each line is compared with a reference drawn straight with Pillow in the font
it should use, and with the same number of ``.notdef`` boxes (U+FFFF, which no font maps), so a line of
tofu fails. The cards are saved in tests/artifacts/ for a person to look at.
"""

from __future__ import annotations

import datetime as dt
import io
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageChops, ImageDraw, ImageFont

from bot.i18n import I18n, _
from bot.retention import completion_card as card
from bot.retention import textline
from bot.retention.completion_card import MARGIN, NAME_MAX, PAPER, WIDTH, CardLine
from tests.conftest import LOCALES, course_content

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
DAY = dt.date(2026, 12, 4)
I18N = I18n(LOCALES)
FONTS = (
    Path("/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf"),
    Path("/usr/share/fonts/truetype/noto/NotoSansArabic-Bold.ttf"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
)

pytestmark = pytest.mark.skipif(
    not all(path.exists() for path in FONTS),
    reason="the Noto fonts are not installed: apt-get install fonts-noto-core fonts-noto-cjk libraqm0 (.ci/run does)",
)


CONTENT = course_content()


def draw(language: str, name: str | None = "Ada", title: str | None = None) -> tuple[Image.Image, list[CardLine]]:
    with I18N.use(language):
        return card.draw_card(title or CONTENT.course(language).title, name, DAY, 4, "t.me/autograd_course_bot")


def line(lines: list[CardLine], role: str) -> CardLine:
    return next(found for found in lines if found.role == role)


def band(image: Image.Image, drawn: CardLine, left: float = 0, right: float = WIDTH) -> Image.Image:
    """The strip of the card a line is drawn in (from above its tallest glyph to below its lowest)."""
    return image.crop(
        (int(left), int(drawn.baseline - drawn.size * 1.25), int(right), int(drawn.baseline + drawn.size * 0.45))
    )


def reference(
    drawn: CardLine, text: str, font: textline.FontFile, rtl: bool, left: float, image: Image.Image
) -> Image.Image:
    """Draw ``text`` straight with Pillow where the card drew its line, on a blank card, and cut the same strip."""
    blank = Image.new("RGB", image.size, PAPER)
    pillow_font = ImageFont.truetype(str(font.path), drawn.size, index=font.index, layout_engine=ImageFont.Layout.RAQM)
    ImageDraw.Draw(blank).text(
        (left, drawn.baseline), text, font=pillow_font, fill=drawn.fill, anchor="ls", direction="rtl" if rtl else "ltr"
    )
    return blank


def ink(image: Image.Image) -> Image.Image:
    """A mask of what is not paper."""
    paper = Image.new("RGB", image.size, PAPER)
    return ImageChops.difference(image.convert("RGB"), paper).convert("L").point(lambda v: 255 if v > 60 else 0)


def inked(mask: Image.Image) -> int:
    return mask.convert("L").histogram()[255]


def differing_share(a: Image.Image, b: Image.Image) -> float:
    """The pixels inked in one image and not the other, as a share of those inked in the first."""
    diff = ImageChops.logical_xor(ink(a).convert("1"), ink(b).convert("1"))
    return inked(diff) / (inked(ink(a)) or 1)


def same_text(image: Image.Image, drawn: CardLine, text: str, font: textline.FontFile, rtl: bool = False) -> float:
    """How much the card's strip differs from a reference drawing of ``text`` at the same spot."""
    ref = reference(drawn, text, font, rtl, drawn.left, image)
    return differing_share(band(image, drawn), band(ref, drawn))


def tofu(image: Image.Image, drawn: CardLine, text: str, font: textline.FontFile) -> float:
    """How much the card's strip differs from the same number of .notdef boxes in that font."""
    ref = reference(drawn, "\uffff" * len(text), font, False, drawn.left, image)
    return differing_share(band(image, drawn), band(ref, drawn))


def save(image: Image.Image, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    image.save(ARTIFACTS / name)


def font_of(drawn: CardLine) -> textline.FontFile:
    [font] = {r.run.font for r in drawn.runs}
    return font


def test_an_english_card_shows_its_heading_name_title_and_date() -> None:
    image, lines = draw("en", "Ada")
    save(image, "card-en.png")
    assert [found.role for found in lines] == ["heading", "name", "course", "lessons", "date", "link"]
    expected = {
        "heading": "Course completed",
        "name": "Ada",
        "course": "PyTorch autograd",
        "lessons": "4 lessons",
        "date": "December 4, 2026",
    }
    for role, text in expected.items():
        drawn = line(lines, role)
        assert drawn.text == text
        assert same_text(image, drawn, text, font_of(drawn)) < 0.02, role
        assert tofu(image, drawn, text, font_of(drawn)) > 0.5, role


def test_a_card_is_a_png_a_chat_shows_whole() -> None:
    with I18N.use("de"):
        png = card.completion_card("PyTorch-Autograd", "Jürgen", DAY, 4)
    image = Image.open(io.BytesIO(png))
    assert (image.format, image.size) == ("PNG", (1200, 800))


def test_a_japanese_card_has_japanese_glyphs_not_boxes() -> None:
    image, lines = draw("ja", "さくら")
    save(image, "card-ja.png")
    with I18N.use("ja"):
        heading = _("Course completed")
    assert heading != "Course completed"
    for role, text in (("heading", heading), ("name", "さくら"), ("date", "2026年12月4日")):
        drawn = line(lines, role)
        assert drawn.text == text
        cjk = [r for r in drawn.runs if "NotoSansCJK" in r.run.font.path.name]
        assert cjk, role
        if len({r.run.font for r in drawn.runs}) == 1:
            assert same_text(image, drawn, text, font_of(drawn)) < 0.02, role
        assert tofu(image, drawn, text, cjk[0].run.font) > 0.5, role


def test_an_arabic_card_is_shaped_and_laid_out_right_to_left() -> None:
    image, lines = draw("ar", "سامي")
    save(image, "card-ar.png")
    with I18N.use("ar"):
        heading = _("Course completed")
    drawn = line(lines, "heading")
    assert drawn.text == heading and all(r.run.rtl for r in drawn.runs)
    assert same_text(image, drawn, heading, font_of(drawn), rtl=True) < 0.02
    name = line(lines, "name")
    assert same_text(image, name, "سامي", font_of(name), rtl=True) < 0.02
    # The same letters drawn unjoined (their isolated forms), or in typing order left to right, are another image.
    isolated = "".join(unicodedata.lookup(f"ARABIC LETTER {n} ISOLATED FORM") for n in ("SEEN", "ALEF", "MEEM", "YEH"))
    assert same_text(image, name, isolated, font_of(name), rtl=False) > 0.3


def test_an_arabic_name_starts_at_the_right() -> None:
    image, lines = draw("ar", "ابببب")  # alef, the one tall letter, first
    name = line(lines, "name")
    strip = ink(band(image, name, name.left, name.right))
    left, top, right, _bottom = strip.getbbox() or (0, 0, 0, 0)
    tall = strip.crop((0, top, strip.width, top + 4)).getbbox()
    assert tall is not None and tall[0] > left + 0.75 * (right - left)


def test_an_arabic_title_naming_pytorch_draws_the_latin_words_in_a_latin_font() -> None:
    image, lines = draw("ar")
    title = line(lines, "course")
    assert title.text == "الاشتقاق التلقائي (autograd) في PyTorch"
    latin = [r for r in title.runs if r.run.text.isalpha() and r.run.text.isascii()]
    assert [r.run.text for r in latin] == ["PyTorch", "autograd"]  # left to right on the card
    for drawn in latin:
        font = drawn.run.font
        assert font.path.name == "NotoSans-Bold.ttf"
        piece = CardLine("run", drawn.run.text, (drawn,), title.baseline, title.size, title.fill)
        ref = reference(piece, drawn.run.text, font, False, drawn.left, image)
        assert (
            differing_share(band(image, piece, drawn.left, drawn.right), band(ref, piece, drawn.left, drawn.right))
            < 0.05
        )
        boxes = reference(piece, "\uffff" * len(drawn.run.text), font, False, drawn.left, image)
        assert (
            differing_share(band(image, piece, drawn.left, drawn.right), band(boxes, piece, drawn.left, drawn.right))
            > 0.5
        )


@pytest.mark.parametrize("language", ["en", "ar", "de", "es", "fr", "ja", "pt_BR", "ru"])
def test_every_language_draws_every_character_of_its_card_inside_the_margins(language: str) -> None:
    _image, lines = draw(language, "Ada")
    with I18N.use(language):
        heading = _("Course completed")
    assert line(lines, "heading").text == heading
    if language != "en":
        assert heading != "Course completed"
    for drawn in lines:
        # Every character is drawn (bidi isolates around a number included, which draw nothing).
        assert sorted("".join(r.run.text for r in drawn.runs)) == sorted(drawn.text), drawn.role
        assert MARGIN - 1 <= drawn.left and drawn.right <= WIDTH - MARGIN + 1, drawn.role


@pytest.mark.parametrize(
    ("first_name", "shown"),
    [
        ("\u202eevil", "evil"),  # a right-to-left override would reverse the rest of the line
        ("Sam\n\tSmith\x00", "Sam Smith"),
        ("\ufeffBOM\u200bzero", "BOMzero"),
        ("🦊 Sam 🦊", "Sam"),  # no font of the card has the emoji: left out, never a box
        ("Z" + "\u0301" * 60, "\u0179\u0301\u0301"),  # piled-up accents: Ź (composed) and two kept
        ("Ali\U000e0041\U000e0042", "Ali"),  # tag characters
        ("نور\u200cی", "نور\u200cی"),  # the zero-width non-joiner of a Persian name is kept
    ],
)
def test_a_hostile_first_name_is_cleaned(first_name: str, shown: str) -> None:
    _image, lines = draw("en", first_name)
    assert line(lines, "name").text == shown


@pytest.mark.parametrize("first_name", [None, "", "   ", "\u202e\u2066", "🦊🦊"])
def test_a_card_without_a_name_leaves_the_line_out(first_name: str | None) -> None:
    image, lines = draw("en", first_name)
    assert [found.role for found in lines] == ["heading", "course", "lessons", "date", "link"]
    assert same_text(image, line(lines, "course"), "PyTorch autograd", font_of(line(lines, "course"))) < 0.02


def test_a_very_long_name_is_cut_and_shrunk_to_fit() -> None:
    image, lines = draw("en", "W" * 5000)
    save(image, "card-long-name.png")
    name = line(lines, "name")
    assert name.text.endswith("…") and len(name.text) <= NAME_MAX + 1
    assert name.size < 88
    assert MARGIN - 1 <= name.left and name.right <= WIDTH - MARGIN + 1


@settings(max_examples=40)
@given(st.text(max_size=200))
def test_any_first_name_makes_a_card_within_its_bounds(first_name: str) -> None:
    cleaned = card.card_name(first_name)
    assert len(cleaned) <= NAME_MAX + 1
    assert not any(unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn") for c in cleaned)
    assert not any(unicodedata.category(c) == "Cf" and c not in "\u200c\u200d" for c in cleaned)
    _image, lines = draw("en", first_name, title="PyTorch autograd")
    for drawn in lines:
        assert MARGIN - 1 <= drawn.left and drawn.right <= WIDTH - MARGIN + 1
