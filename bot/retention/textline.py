"""One line of text in any script, drawn with Pillow: each character in a font that has it, in bidi order.

No single font covers an Arabic course title that names ``PyTorch``, a Japanese date and a learner's name
in Georgian, and Pillow draws a string in one font. So a line is cut into runs:

1. Each character gets the first font of the line's ``FontChain`` whose character map has it (read once per
   font with fontTools); a character that several fonts have (a space, a digit, a bracket) stays in the
   font of the character before it, so a word is shaped in one font. ``covered`` drops what no font has.
2. The Unicode bidi algorithm, from the same libfribidi that Pillow's RAQM layout loads, gives every
   character its embedding level and the visual order.
3. Consecutive characters with one font and one level are one run, drawn by RAQM (which shapes Arabic and
   applies each script's features) in that run's direction, left to right on a shared baseline.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fontTools.ttLib import TTFont
from PIL import ImageDraw, ImageFont


class FontsMissing(RuntimeError):
    """A font or the bidi library the completion card needs is not installed."""


@dataclass(frozen=True)
class FontFile:
    """A font on disk: a file and, for a collection (.ttc), which face in it."""

    path: Path
    index: int = 0
    package: str = "fonts-noto-core"  # the Debian package that installs it, for the error message


@dataclass(frozen=True)
class FontChain:
    """Fonts to try in order for each character of a line, and the language to shape in (BCP 47)."""

    fonts: tuple[FontFile, ...]
    language: str | None = None


@functools.cache
def _character_map(font: FontFile) -> frozenset[int]:
    if not font.path.exists():
        raise FontsMissing(f"{font.path} is missing: install Debian's {font.package} (see .ci/run)")
    with TTFont(font.path, fontNumber=font.index, lazy=True) as opened:
        return frozenset(opened.getBestCmap())


@functools.lru_cache(maxsize=128)
def truetype(font: FontFile, size: int) -> ImageFont.FreeTypeFont:
    """Return ``font`` at ``size`` pixels, laid out by RAQM (bidi, shaping, script features)."""
    _character_map(font)  # a missing file says which package to install
    return ImageFont.truetype(str(font.path), size, index=font.index, layout_engine=ImageFont.Layout.RAQM)


# Characters that draw nothing yet belong to their neighbours: joiners and variation selectors. They stay in
# the run they are in, whatever a font's map says.
_STICKY = frozenset({0x200C, 0x200D}) | frozenset(range(0xFE00, 0xFE10))


def _fonts_for(text: str, chain: FontChain) -> list[FontFile | None]:
    """Return the font of each character of ``text``: None for one that no font of the chain has."""
    chosen: list[FontFile | None] = []
    previous: FontFile | None = None
    for char in text:
        code = ord(char)
        sticky = code in _STICKY or unicodedata.category(char).startswith("M")
        if previous is not None and (sticky or code in _character_map(previous)):
            chosen.append(previous)
            continue
        font = next((f for f in chain.fonts if code in _character_map(f)), None)
        chosen.append(font)
        previous = font or previous
    return chosen


def covered(text: str, chain: FontChain) -> str:
    """Return ``text`` without the characters no font of ``chain`` can draw (so none is drawn as a box)."""
    return "".join(char for char, font in zip(text, _fonts_for(text, chain), strict=True) if font is not None)


# libfribidi's ABI (fribidi-types.h, fribidi-bidi-types.h): FriBidiChar is uint32, FriBidiStrIndex int32,
# FriBidiLevel int8; a "weak" paragraph direction applies only to text without a strong character.
_PAR_WEAK_LTR = 0x20
_PAR_WEAK_RTL = 0x21


@functools.cache
def _fribidi() -> ctypes.CDLL:
    name = ctypes.util.find_library("fribidi") or "libfribidi.so.0"
    try:
        library = ctypes.CDLL(name)
    except OSError as error:
        raise FontsMissing(f"libfribidi is missing ({error}): install Debian's libraqm0 (see .ci/run)") from error
    log2vis = library.fribidi_log2vis
    log2vis.argtypes = [
        ctypes.POINTER(ctypes.c_uint32),  # the logical string
        ctypes.c_int32,  # its length
        ctypes.POINTER(ctypes.c_uint32),  # in: the paragraph direction; out: the resolved one
        ctypes.c_void_p,  # the visual string (not wanted)
        ctypes.c_void_p,  # logical to visual positions (not wanted)
        ctypes.POINTER(ctypes.c_int32),  # visual to logical positions
        ctypes.POINTER(ctypes.c_int8),  # embedding level of each logical character
    ]
    log2vis.restype = ctypes.c_int8
    return library


def bidi(text: str, rtl: bool) -> tuple[list[int], list[int]]:
    """Return the visual order (logical indexes, left to right) and each character's embedding level.

    ``rtl`` is the direction of a line with no strong character (the card's language); otherwise its
    first strong character decides, as the Unicode bidi algorithm says.
    """
    length = len(text)
    if not length:
        return [], []
    characters = (ctypes.c_uint32 * length)(*map(ord, text))
    direction = ctypes.c_uint32(_PAR_WEAK_RTL if rtl else _PAR_WEAK_LTR)
    order = (ctypes.c_int32 * length)()
    levels = (ctypes.c_int8 * length)()
    if not _fribidi().fribidi_log2vis(characters, length, ctypes.byref(direction), None, None, order, levels):
        raise RuntimeError(f"fribidi could not order {text!r}")
    return list(order), list(levels)


@dataclass(frozen=True)
class Run:
    """A piece of a line drawn in one font and one direction."""

    text: str  # in logical order, as RAQM takes it
    font: FontFile
    rtl: bool


def runs(text: str, chain: FontChain, rtl: bool = False) -> list[Run]:
    """Return ``text`` cut into runs, left to right as they appear; characters no font has are left out."""
    fonts = _fonts_for(text, chain)
    order, levels = bidi(text, rtl)
    found: list[Run] = []
    group: list[int] = []

    def close() -> None:
        if group:
            start, end = min(group), max(group)
            font = fonts[group[0]]
            assert font is not None
            found.append(Run(text[start : end + 1], font, levels[group[0]] % 2 == 1))
            group.clear()

    for logical in order:
        font = fonts[logical]
        if font is None:
            close()
            continue
        if group:
            last = group[-1]
            step = -1 if levels[last] % 2 else 1
            if fonts[last] != font or levels[last] != levels[logical] or logical != last + step:
                close()
        group.append(logical)
    close()
    return found


@dataclass(frozen=True)
class DrawnRun:
    """Where a run landed on the image: its left and right edge (pixels), and the font size used."""

    run: Run
    left: float
    right: float
    size: int


def _direction(run: Run) -> str:
    return "rtl" if run.rtl else "ltr"


def width(line: Sequence[Run], size: int, language: str | None = None) -> float:
    """Return how wide ``line`` is at ``size`` pixels."""
    return sum(
        truetype(run.font, size).getlength(run.text, direction=_direction(run), language=language) for run in line
    )


def draw(
    canvas: ImageDraw.ImageDraw,
    line: Sequence[Run],
    left: float,
    baseline: float,
    size: int,
    fill: str,
    language: str | None = None,
) -> list[DrawnRun]:
    """Draw ``line`` from ``left`` on ``baseline``, run after run; return where each run went."""
    drawn = []
    x = left
    for run in line:
        font = truetype(run.font, size)
        direction = _direction(run)
        canvas.text((x, baseline), run.text, font=font, fill=fill, anchor="ls", direction=direction, language=language)
        advance = font.getlength(run.text, direction=direction, language=language)
        drawn.append(DrawnRun(run, x, x + advance, size))
        x += advance
    return drawn
