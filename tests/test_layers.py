"""The import contracts in pyproject.toml ([tool.importlinter]): the layers of bot/, no cycles, the runner's boundary.

`make check` runs lint-imports on the tree; here each contract is shown to break on the import it exists to stop,
planted in a copy of the tree, so a contract that had stopped checking anything would fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the tree at ``root`` (its pyproject.toml), checking only ``contracts`` if any are named."""
    chosen = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", *chosen],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages lint-imports reads and of the contracts."""
    for name in ("bot", "runner"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def plant(tree: Path, module: str, line: str) -> None:
    """Add ``line`` (an import) at the end of ``module`` (a path under the tree)."""
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # planted\n", encoding="utf-8")


def test_the_tree_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", done.stdout)


def test_the_untouched_copy_keeps_every_contract(tree):
    # The copy is what the planted tests below break: it must be sound before anything is planted.
    done = lint_imports(tree)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("bot/course/model.py", "from bot import app", "bot.course is not allowed to import bot.app"),
        ("bot/render.py", "from bot.library import load", "bot.render is not allowed to import bot.library"),
        ("bot/storage/db.py", "import bot.handlers.common", "bot.storage is not allowed to import bot.handlers"),
        ("bot/telegram_rules/text.py", "import bot.i18n", "bot.telegram_rules is not allowed to import bot.i18n"),
        # The production bot never imports the dev server, nor a tool only the command line uses.
        ("bot/handlers/common.py", "import bot.localapi", "bot.handlers is not allowed to import bot.localapi"),
        ("bot/library/live.py", "import bot.authoring.proof", "bot.library is not allowed to import bot.authoring"),
    ],
)
def test_an_upward_import_breaks_the_layers(tree, module, line, broken):
    plant(tree, module, line)
    done = lint_imports(tree, "layers")
    assert done.returncode == 1
    assert broken in done.stdout


def test_siblings_in_one_layer_may_not_import_each_other_across_a_bar(tree):
    plant(tree, "bot/handlers/common.py", "import bot.monitoring")
    done = lint_imports(tree, "layers")
    assert done.returncode == 1
    assert "bot.handlers is not allowed to import bot.monitoring" in done.stdout


def test_a_module_in_no_layer_breaks_the_layers(tree):
    (tree / "bot" / "newcomer.py").write_text('"""Not yet placed in the layers."""\n', encoding="utf-8")
    done = lint_imports(tree, "layers")
    assert done.returncode == 1
    assert "bot.newcomer" in done.stdout


def test_an_import_cycle_breaks_the_cycles_contract(tree):
    # drills imports feedback; the two share a layer, so only the cycles contract can see this.
    plant(tree, "bot/feedback.py", "import bot.drills")
    assert lint_imports(tree, "layers").returncode == 0
    done = lint_imports(tree, "cycles")
    assert done.returncode == 1
    assert "No cycles are allowed in bot" in done.stdout


def test_a_cycle_inside_a_package_breaks_the_cycles_contract(tree):
    # The cycle issue 16 removed: parsing and drill_parsing importing each other.
    plant(tree, "bot/course/drill_parsing.py", "import bot.course.parsing")
    done = lint_imports(tree, "cycles")
    assert done.returncode == 1
    assert "No cycles are allowed in bot.course" in done.stdout


@pytest.mark.parametrize(
    "line", ["import runner.pool", "from runner import grading", "from runner.result import RunResult"]
)
def test_the_bot_reaches_the_runner_only_through_its_client(tree, line):
    plant(tree, "bot/feedback.py", line)
    done = lint_imports(tree, "runner-boundary")
    assert done.returncode == 1
    assert "bot.feedback" in done.stdout


def test_the_bot_never_imports_torch(tree):
    plant(tree, "bot/render.py", "def later() -> None:\n    import torch")
    done = lint_imports(tree, "no-torch")
    assert done.returncode == 1
    assert "bot.render -> torch" in done.stdout
