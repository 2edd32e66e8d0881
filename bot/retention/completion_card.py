"""The completion card: a PNG with the course's title, the learner's first name and the date, in their language.

Drawn with Pillow in the language of the update being handled (bot.i18n): every word on it but the
course's own title and the learner's name comes from the catalogs. Each line goes through ``textline``, so
Arabic is shaped and laid out right to left, Japanese has its glyphs, and a name in any other script is
drawn in a font that has it. The fonts are Debian's Noto (``fonts-noto-core``, ``fonts-noto-cjk``).

A first name comes from the learner's Telegram profile and is hostile input: ``card_name`` keeps at most
``NAME_MAX`` characters, drops controls (bidi overrides included), invisible and unprintable characters and
piles of combining marks, and the line shrinks, then ends in an ellipsis, to fit the card. An empty name
leaves its line out.
"""

from __future__ import annotations

import datetime as dt
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from babel.dates import format_date
from PIL import Image, ImageDraw

from bot.i18n import _, current_language, is_rtl, ngettext, number
from bot.retention import textline
from bot.retention.textline import DrawnRun, FontChain, FontFile, Run

WIDTH, HEIGHT = 1200, 800  # pixels: 3:2, as Telegram shows a photo whole in a chat
MARGIN = 100  # no text closer to the edge than this
NAME_MAX = 40  # characters of a first name kept (Telegram allows 64)
MARKS_MAX = 2  # combining marks kept on one character ("Zalgo" text stacks dozens)
MIN_SIZE = 24  # pixels: a line shrinks no further, it is cut short instead

INK, ACCENT, PAPER, RULE = "#1f2933", "#c2410c", "#fffaf3", "#e8d9c4"

_NOTO = Path("/usr/share/fonts/truetype/noto")
_CJK = Path("/usr/share/fonts/opentype/noto")


def _noto(name: str) -> FontFile:
    return FontFile(_NOTO / name)


def _cjk(weight: str) -> FontFile:
    return FontFile(_CJK / f"NotoSansCJK-{weight}.ttc", 0, "fonts-noto-cjk")  # face 0: Japanese


# Scripts a first name may be written in, after the card's own. fonts-noto-core has many more; these
# cover the scripts of most Telegram users' names. A character none of them has is left out.
_OTHER_SCRIPTS = (
    "Hebrew",
    "Devanagari",
    "Bengali",
    "Thai",
    "Georgian",
    "Armenian",
    "Ethiopic",
    "Tamil",
    "Khmer",
)


def _chain(weight: str) -> tuple[FontFile, ...]:
    """Return the fonts for the current language, its own script first, at ``weight`` (Regular or Bold)."""
    latin, arabic, cjk = _noto(f"NotoSans-{weight}.ttf"), _noto(f"NotoSansArabic-{weight}.ttf"), _cjk(weight)
    language = current_language()
    first = (arabic, latin, cjk) if is_rtl(language) else (cjk, latin, arabic) if language == "ja" else ()
    rest = tuple(_noto(f"NotoSans{script}-{weight}.ttf") for script in _OTHER_SCRIPTS)
    return tuple(dict.fromkeys((*first, latin, arabic, cjk, *rest)))


_JOINERS = "\u200c\u200d"  # zero-width (non-)joiners shape Persian and Indic names: kept


def card_name(first_name: str | None) -> str:
    """Return a Telegram first name made safe to draw: bounded, without controls or invisible characters."""
    kept: list[str] = []
    marks = 0
    for char in unicodedata.normalize("NFC", first_name or ""):
        category = unicodedata.category(char)
        if category.startswith("M"):
            marks += 1
            if marks <= MARKS_MAX:
                kept.append(char)
            continue
        marks = 0
        if char in _JOINERS:
            kept.append(char)
        elif char.isspace() or category in ("Cc", "Zl", "Zp"):
            kept.append(" ")
        elif category not in ("Cf", "Cs", "Co", "Cn"):
            # Left out: format characters (bidi overrides and isolates, which would reverse the rest of the
            # line, zero-width spaces, tags), surrogates, private-use and unassigned code points.
            kept.append(char)
    name = " ".join("".join(kept).split())
    if len(name) > NAME_MAX:
        name = name[:NAME_MAX].rstrip(_JOINERS + " ") + "…"
    return name


@dataclass(frozen=True)
class CardLine:
    """One line of the card as drawn: what it says, its runs and where they went."""

    role: str  # heading, name, course, lessons, date, link
    text: str
    runs: tuple[DrawnRun, ...]
    baseline: float
    size: int
    fill: str

    @property
    def left(self) -> float:
        """Return the left edge of the line's ink box (advance widths)."""
        return min((r.left for r in self.runs), default=WIDTH / 2)

    @property
    def right(self) -> float:
        """Return the right edge of the line's advance box."""
        return max((r.right for r in self.runs), default=WIDTH / 2)


def _fit(text: str, chain: FontChain, rtl: bool, size: int) -> tuple[str, list[Run], int]:
    """Return the text, its runs and the largest size up to ``size`` that fits the card, cut short if need be."""
    room = WIDTH - 2 * MARGIN
    runs = textline.runs(text, chain, rtl)
    natural = textline.width(runs, size, chain.language)
    if natural <= room:
        return text, runs, size
    fitted = max(MIN_SIZE, int(size * room / natural))
    shown = text
    while len(shown) > 1 and textline.width(runs, fitted, chain.language) > room:
        text = text[:-1]
        shown = text.rstrip(_JOINERS + " ") + "…"
        runs = textline.runs(shown, chain, rtl)
    return shown, runs, fitted


def draw_card(
    course_title: str, first_name: str | None, day: dt.date, lessons: int, link: str | None = None
) -> tuple[Image.Image, list[CardLine]]:
    """Draw the card in the current language; return the image and where each line went (for tests)."""
    language = current_language()
    rtl = is_rtl(language)
    regular, bold = FontChain(_chain("Regular"), language), FontChain(_chain("Bold"), language)
    name = textline.covered(card_name(first_name), bold)
    name = " ".join(name.split())
    # Each line has its own baseline, whatever size it had to shrink to, so the card keeps its shape.
    wanted = [
        ("heading", _("Course completed"), regular, 40, ACCENT, 215),
        ("name", name, bold, 88, INK, 335),
        ("course", course_title, bold, 56, INK, 472),
        (
            "lessons",
            ngettext("{count} lesson", "{count} lessons", lessons).format(count=number(lessons)),
            regular,
            32,
            INK,
            580,
        ),
        ("date", format_date(day, format="long", locale=language), regular, 32, INK, 647),
    ]
    if link:
        wanted.append(("link", link, FontChain(_chain("Regular")), 26, ACCENT, 722))
    image = Image.new("RGB", (WIDTH, HEIGHT), PAPER)
    canvas = ImageDraw.Draw(image)
    canvas.rectangle((24, 24, WIDTH - 25, HEIGHT - 25), outline=RULE, width=6)
    canvas.ellipse((WIDTH / 2 - 36, 64, WIDTH / 2 + 36, 136), fill=ACCENT)
    canvas.line([(WIDTH / 2 - 16, 100), (WIDTH / 2 - 4, 114), (WIDTH / 2 + 18, 86)], fill=PAPER, width=8)
    canvas.line([(WIDTH / 2 - 120, 527), (WIDTH / 2 + 120, 527)], fill=RULE, width=3)
    lines: list[CardLine] = []
    for role, text, chain, size, fill, baseline in wanted:
        if not text:
            continue
        shown, runs, fitted = _fit(text, chain, rtl, size)
        left = (WIDTH - textline.width(runs, fitted, chain.language)) / 2
        drawn = textline.draw(canvas, runs, left, baseline, fitted, fill, chain.language)
        lines.append(CardLine(role, shown, tuple(drawn), baseline, fitted, fill))
    return image, lines


def completion_card(
    course_title: str, first_name: str | None, day: dt.date, lessons: int, link: str | None = None
) -> bytes:
    """Return the card as PNG bytes, in the current language (see ``draw_card``)."""
    image, _lines = draw_card(course_title, first_name, day, lessons, link)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
