"""`coursebot reload` talks to the running bot over its control socket and prints what the reload did."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from bot import control
from bot.errors import CoursebotError, Problem
from bot.library.live import Library, Reloaded
from tests.conftest import LESSONS, LOCALES

EDITION = Library(LESSONS, LOCALES).current


def outcome(*problems: Problem) -> Reloaded:
    return Reloaded(EDITION, problems)


async def test_an_accepted_reload_answers_ok_and_what_is_in_use(tmp_path: Path):
    path = tmp_path / "coursebot.sock"
    server = await control.serve(path, lambda: _done(outcome()))
    try:
        accepted, lines = await asyncio.to_thread(control.request, path)
    finally:
        server.close()
    assert accepted
    assert lines == ["edition 1: 4 lessons in 8 languages"]


async def test_a_refused_reload_answers_its_file_line_problems(tmp_path: Path):
    path = tmp_path / "coursebot.sock"
    problem = Problem("lessons/en/01.yaml", 15, "duplicate slide id 'x'")
    server = await control.serve(path, lambda: _done(outcome(problem)))
    try:
        accepted, lines = await asyncio.to_thread(control.request, path)
    finally:
        server.close()
    assert not accepted
    assert lines == ["lessons/en/01.yaml:15: duplicate slide id 'x'"]


async def test_the_socket_is_for_its_owner_only(tmp_path: Path):
    path = tmp_path / "coursebot.sock"
    server = await control.serve(path, lambda: _done(outcome()))
    try:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
    finally:
        server.close()


async def test_a_stale_socket_is_replaced_and_a_live_one_refuses_a_second_bot(tmp_path: Path):
    path = tmp_path / "coursebot.sock"
    first = await control.serve(path, lambda: _done(outcome()))
    first.close()
    await first.wait_closed()
    path.touch()  # as a killed bot leaves it
    second = await control.serve(path, lambda: _done(outcome()))  # the dead one's file is no obstacle
    try:
        with pytest.raises(CoursebotError, match="another coursebot is running"):
            await control.serve(path, lambda: _done(outcome()))
    finally:
        second.close()


def test_with_no_bot_running_the_client_says_so(tmp_path: Path):
    with pytest.raises(control.NoRunningBot, match="no running coursebot answers at"):
        control.request(tmp_path / "coursebot.sock")


async def _done(value: Reloaded) -> Reloaded:
    return value
