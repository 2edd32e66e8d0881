"""Importing the bot never imports torch, checked in a fresh interpreter.

That bot/ imports only runner.client, and torch never directly, is an import contract (pyproject.toml,
tests/test_layers.py); this is the run-time half: nothing the client reaches loads torch when imported.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

BOT = ROOT / "bot"


def test_importing_the_bot_and_its_command_line_never_imports_torch():
    probe = "import sys, bot.app, bot.cli, bot.library.load; sys.exit(3 if 'torch' in sys.modules else 0)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr or "importing the bot imported torch"


def test_the_probe_would_see_torch_imported():
    # The probe above is only worth something if it can fail.
    probe = "import sys, torch; sys.exit(3 if 'torch' in sys.modules else 0)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3


def test_every_bot_module_imports_first_without_an_import_cycle():
    # An import cycle shows only when a module of the cycle is imported first: `coursebot db backup` once
    # failed because bot.storage.db -> bot.drills -> bot.feedback -> bot.render -> bot.drills.
    modules = [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted(BOT.rglob("*.py"))
        if path.name != "__main__.py"
    ]
    probe = (
        "import importlib, subprocess, sys\n"
        "failed = [m for m in sys.argv[1:] if subprocess.run([sys.executable, '-c', f'import {m}'],"
        " capture_output=True).returncode]\n"
        "print(' '.join(failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *modules], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.stdout.split() == [], f"these modules fail when imported first: {done.stdout}"
    assert "bot.storage.db" in modules and "bot.render" in modules
