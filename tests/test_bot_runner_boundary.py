"""The bot's one boundary with the runner: bot/ imports only runner.client; importing the bot never imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT

BOT = ROOT / "bot"


def runner_imports(source: str) -> list[tuple[int, str]]:
    """Return (line, module) for every runner module the source imports, however it is spelled."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "runner"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "runner":
                found += [(node.lineno, f"runner.{alias.name}") for alias in node.names]
            elif node.module.startswith("runner."):
                found.append((node.lineno, node.module))
    return found


def test_the_bot_imports_the_runner_only_through_runner_client():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(BOT.rglob("*.py"))
        for line, module in runner_imports(path.read_text(encoding="utf-8"))
        if module != "runner.client"
    ]
    assert wrong == [], "the bot may import only runner.client (the runner's public names)"


def test_the_import_scan_sees_every_spelling_of_a_runner_import():
    source = (
        "import runner.pool\n"
        "from runner import grading\n"
        "from runner.result import RunResult\n"
        "from runner.client import RunnerClient\n"
        "def later():\n"
        "    import runner.limits\n"
        "from .runner import nothing_of_the_runners\n"
    )
    assert runner_imports(source) == [
        (1, "runner.pool"),
        (2, "runner.grading"),
        (3, "runner.result"),
        (4, "runner.client"),
        (6, "runner.limits"),
    ]


def test_importing_the_bot_and_its_command_line_never_imports_torch():
    probe = "import sys, bot.app, bot.cli, bot.content.load; sys.exit(3 if 'torch' in sys.modules else 0)"
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
