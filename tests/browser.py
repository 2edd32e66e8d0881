"""A real browser for the web chat's tests: Debian's Chromium driven by Playwright, at phone size.

Playwright cannot download its own browser here, so it drives /usr/bin/chromium
(`apt-get install -y chromium`). Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
PHONE = {"width": 390, "height": 844}
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="the browser tests need Chromium (apt-get install -y chromium)"
)


@dataclass
class Phone:
    """A page at 390x844, with every console error and page error it produced."""

    page: object  # playwright.async_api.Page
    errors: list[str] = field(default_factory=list)

    async def screenshot(self, name: str) -> Path:
        """Save a screenshot as tests/artifacts/<name>.png and check it shows something."""
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        await self.page.screenshot(path=str(path))  # type: ignore[attr-defined]
        assert distinct_bytes(path.read_bytes()) > 40, f"{path} looks blank"
        return path


@asynccontextmanager
async def phone() -> AsyncIterator[Phone]:
    """Open Chromium with one phone-sized page; collects console errors."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport=PHONE, device_scale_factor=1, has_touch=True)
            page = await context.new_page()
            device = Phone(page)
            page.on("console", lambda m: device.errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: device.errors.append(str(e)))
            yield device
        finally:
            await browser.close()


def distinct_bytes(png: bytes) -> int:
    """How many different byte values a PNG's pixel data holds: a blank screenshot has only a few."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        if kind == b"IDAT":
            data += png[position + 8 : position + 8 + length]
        position += 12 + length
    return len(set(zlib.decompress(data)))
