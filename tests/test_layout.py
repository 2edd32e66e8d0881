"""The README's layout tables match the folders, and its layers are the import contract's (pyproject.toml)."""

from __future__ import annotations

import re
import subprocess
import tomllib

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def table(header: str) -> list[str]:
    """Return the first cell of each row of the README table whose header row starts with ``header``."""
    lines = README[README.index(f"| {header} |") :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        # A cell may hold an escaped bar (\|), as the layers' independent siblings do.
        rows.append(re.split(r"(?<!\\)\|", line)[1].strip().replace("\\|", "|"))
    return rows


def names(cell: str) -> list[str]:
    """Return the names in a layer's cell: `handlers/` | `updates` -> ['handlers/', 'updates']."""
    return re.findall(r"`([^`]+)`", cell)


def contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    assert layers["containers"] == ["bot"] and layers["exhaustive"] is True
    return list(layers["layers"])


def test_the_readme_states_the_layers_of_the_import_contract_in_its_order():
    readme = [" ".join(re.sub(r"`([^`/]+)/?`", r"\1", cell).split()) for cell in table("`bot/` layer, top to bottom")]
    assert readme == [" ".join(layer.split()) for layer in contract_layers()]


def test_every_module_and_package_of_the_bot_has_a_row_spelled_as_its_folder():
    shown = [name for cell in table("`bot/` layer, top to bottom") for name in names(cell)]
    packages = {f"{p.name}/" for p in (ROOT / "bot").iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in (ROOT / "bot").glob("*.py") if p.name != "__init__.py"}
    assert sorted(shown) == sorted(packages | modules)


def test_every_top_level_folder_has_a_row():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    folders = {path.split("/")[0] + "/" for path in tracked if "/" in path and not path.startswith(".")}
    shown = {name for cell in table("folder") for name in names(cell)}
    assert shown | {"bot/"} == folders
