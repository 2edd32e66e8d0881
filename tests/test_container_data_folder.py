"""container/data-folder: the data folder changes owner only when it is coursebot's to hand, as the entrypoint runs
it (as root, before it drops to uid 10001). Real folders and real chown; no engine needed."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root (the entrypoint is root)")

_loader = importlib.machinery.SourceFileLoader("data_folder", str(ROOT / "container" / "data-folder"))
_spec = importlib.util.spec_from_loader("data_folder", _loader)
assert _spec is not None
data_folder = importlib.util.module_from_spec(_spec)
_loader.exec_module(data_folder)

UID = GID = 10001


def decide(folder):
    return data_folder.decide(str(folder), UID, GID, "coursebot.sqlite3")


def owners(folder):
    return {p.name: p.lstat().st_uid for p in [folder, *folder.iterdir()]}


def test_an_empty_folder_of_roots_is_handed_over(tmp_path):
    assert decide(tmp_path) == (
        0,
        f"{tmp_path} belonged to uid 0; it now belongs to uid 10001, the user coursebot runs as",
    )
    assert tmp_path.stat().st_uid == UID


def test_a_folder_of_coursebots_files_is_handed_over_with_them(tmp_path):
    for name in ("coursebot.sqlite3", "coursebot.sqlite3-wal", "webchat.sqlite3-shm", "backup.sqlite3.partial"):
        (tmp_path / name).write_bytes(b"")
    status, line = decide(tmp_path)
    assert status == 0 and "now belongs to uid 10001" in line
    assert set(owners(tmp_path).values()) == {UID}


@pytest.mark.parametrize(
    "make",
    [
        lambda d: (d / "notes.txt").write_text("mine"),
        lambda d: (d / "photos").mkdir(),
        lambda d: (d / "coursebot.sqlite3").symlink_to("/etc/hostname"),
        lambda d: os.link(d.parent / "outside", d / "coursebot.sqlite3"),  # a second name of a file elsewhere
        lambda d: (d / ".sqlite3").write_bytes(b""),
    ],
    ids=["a file of its own", "a folder", "a link by coursebot's name", "a hard link", "a bare suffix"],
)
def test_a_folder_holding_anything_else_is_refused_and_nothing_changes(tmp_path, make):
    folder = tmp_path / "data"
    folder.mkdir()
    (tmp_path / "outside").write_text("elsewhere")
    (folder / "coursebot.sqlite3-wal").write_bytes(b"")
    make(folder)
    status, line = decide(folder)
    assert status == 1 and "left as it is" in line and "\n" not in line, line
    assert set(owners(folder).values()) == {0}
    assert (tmp_path / "outside").stat().st_uid == 0


def test_in_a_folder_already_coursebots_only_its_own_files_change_owner(tmp_path):
    os.chown(tmp_path, UID, GID)
    (tmp_path / "coursebot.sqlite3-shm").write_bytes(b"")  # made by root (a backup run as root, say)
    (tmp_path / "notes.txt").write_text("the operator's")
    status, line = decide(tmp_path)
    assert status == 0 and "coursebot.sqlite3-shm" in line and "notes.txt" not in line
    assert owners(tmp_path) == {tmp_path.name: UID, "coursebot.sqlite3-shm": UID, "notes.txt": 0}


def test_a_folder_that_is_coursebots_already_is_left_alone_in_silence(tmp_path):
    os.chown(tmp_path, UID, GID)
    (tmp_path / "coursebot.sqlite3").write_bytes(b"")
    os.chown(tmp_path / "coursebot.sqlite3", UID, GID)
    assert decide(tmp_path) == (0, "")
    assert decide(tmp_path / "missing") == (0, "")


def test_the_database_may_have_a_name_of_its_own(tmp_path):
    (tmp_path / "progress.db").write_bytes(b"")
    (tmp_path / "progress.db-wal").write_bytes(b"")
    assert data_folder.decide(str(tmp_path), UID, GID, "progress.db")[0] == 0
    assert set(owners(tmp_path).values()) == {UID}
