"""Fixtures that build real things: the loopback Bot API stand-in, a SQLite file, the running bot."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import settings

from bot.app import CourseBot
from bot.config import Config
from bot.course.model import Content
from bot.errors import Problem
from bot.i18n import I18n
from bot.library import live
from bot.library.load import load_valid
from bot.storage.db import Database
from tests.browser import Phone, phone
from tests.pg import Cluster, cluster
from tests.standin import BotApiStandin

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
LOCALES = ROOT / "locales"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Property tests draw the same examples on every run and machine (a failure reproduces), keep no example
# database in the tree, and have no per-example deadline: a loaded 2-core machine must not fail them.
settings.register_profile("coursebot", derandomize=True, database=None, deadline=None)
settings.load_profile("coursebot")


@cache
def course_content() -> Content:
    """The repository's course (lessons/ and locales/), loaded and linted once per session.

    Test modules read it to know what the bot will say; parsing and checking every lesson costs about a second,
    which each module used to pay again at collection.
    """
    return load_valid(LESSONS, LOCALES)


_Read = tuple[I18n, Content | None, list[Problem]]
_reads: dict[tuple[str, str, str], _Read] = {}
_reads_lock = threading.Lock()


def _fingerprint(*folders: Path) -> str:
    """A digest of every file's path and bytes under ``folders``: equal digests, equal content."""
    digest = hashlib.blake2b()
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _remembered_read(lessons_dir: Path, locales_dir: Path) -> _Read:
    """bot.library.live.read, done once per distinct content: every bot a test starts lints the same lessons,
    and the lint (parse every YAML file, render every screen) is about a second of the 2-core machine's CPU.

    Keyed by the bytes of every file, so a test that edits a lesson or a catalog gets a fresh, real read; the
    result is what ``read`` returned for exactly these files (its problems list copied: callers may extend it).
    """
    try:
        key = (str(lessons_dir), str(locales_dir), _fingerprint(lessons_dir, locales_dir))
    except OSError:
        return _real_read(lessons_dir, locales_dir)
    with _reads_lock:
        known = _reads.get(key)
    if known is None:
        known = _real_read(lessons_dir, locales_dir)
        with _reads_lock:
            _reads[key] = known
    i18n, content, problems = known
    return i18n, content, list(problems)


_real_read = live.read


@pytest.fixture(autouse=True, scope="session")
def _lint_once_per_content() -> Iterator[None]:
    """Every in-process bot reads its edition through ``_remembered_read`` (see there)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(live, "read", _remembered_read)
        yield


@pytest.fixture
async def standin() -> AsyncIterator[BotApiStandin]:
    """A Bot API stand-in on 127.0.0.1 that enforces Telegram's rules.

    A test fails if the bot answered a callback query twice: Telegram refuses the second answer, and a bot that
    swallows the refusal as an expired tap hides the bug from every other assertion.
    """
    async with BotApiStandin() as api:
        yield api
        twice = "\n".join("  " + call.describe() for call in api.answered_again)
        assert not api.answered_again, f"a callback query was answered twice:\n{twice}"


@pytest.fixture
def config(standin: BotApiStandin, tmp_path: Path) -> Config:
    """Configuration pointing the bot at the stand-in, with a fresh database file."""
    return Config(
        token=standin.token,
        api_base_url=standin.api_base_url,
        db_path=tmp_path / "data" / "coursebot.sqlite3",
        lessons_dir=LESSONS,
        locales_dir=LOCALES,
        max_retries=3,
        # Most tests are about the course; the practice tests start the real runner themselves.
        runner="off",
        # Reloads happen when a test asks for one, not when a file's timestamp moves.
        watch=False,
    )


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[CourseBot]:
    """Run the bot, polling the stand-in, for the duration of the block."""
    async with CourseBot(config) as bot:
        yield bot


@pytest.fixture
async def bot(config: Config) -> AsyncIterator[CourseBot]:
    """The bot, running against the stand-in."""
    async with running(config) as course_bot:
        yield course_bot


def web_chat_config(tmp_path: Path, runner: str = "off") -> Config:
    """The local web chat's course: no token (its built-in Bot API), a database in ``tmp_path``, no watcher."""
    return Config(
        token="",
        db_path=tmp_path / "coursebot.sqlite3",
        lessons_dir=LESSONS,
        locales_dir=LOCALES,
        runner=runner,
        web_port=0,
        watch=False,
    )


@pytest.fixture
async def device() -> AsyncIterator[Phone]:
    """A phone-sized page in Chromium (tests/browser.py), closed after the test."""
    async with phone() as opened:
        yield opened


@pytest.fixture
def partial_content(tmp_path: Path) -> Path:
    """A copy of lessons/ plus the partial Russian translation fixture."""
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")  # English only: a test adds the translation it is about
    shutil.copytree(FIXTURES / "partial" / "ru", target / "ru")
    return target


def with_lessons(config: Config, lessons_dir: Path, locales_dir: Path | None = None) -> Config:
    """Return ``config`` reading lessons (and catalogs) from elsewhere."""
    return replace(config, lessons_dir=lessons_dir, locales_dir=locales_dir or config.locales_dir)


def answers_recorded(db_path: Path, user_id: int) -> int:
    """Return how many quiz answers the database file holds for ``user_id``, retakes included."""
    with sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        (count,) = conn.execute("SELECT count(*) FROM quiz_answers WHERE user_id = ?", (user_id,)).fetchone()
    conn.close()
    return int(count)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for the session (tests/pg.py); skips, saying why, without PostgreSQL."""
    with cluster() as running:
        yield running


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """The URL of an empty PostgreSQL database of this test's own."""
    return pg_cluster.new_database()


ENGINES = ("sqlite", "postgresql")


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a storage test's database lives, once per engine: an SQLite file, then an empty PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "data" / "coursebot.sqlite3"
    return str(request.getfixturevalue("pg_url"))


async def peek(db: Database, sql: str) -> list[tuple[object, ...]]:
    """Return the rows of ``sql`` read through the database's own engine, as tuples (a test's look at the tables)."""
    return [tuple(row) for row in await db._all(sql)]


# `make test` hands whole files to its two processes in collection order (pytest-xdist --dist loadfile
# --no-loadscope-reorder). The files below took longest in a whole run (--durations=0: docker, compose, bench
# subprocesses, kills and replays, a browser), slowest first, so they are collected first: the run does not end
# with one process still inside a long file while the other has nothing left. The scale-out fault test and the
# swarm test (3-5 minutes each) are among the first. A name may be added or left out; the order only decides
# when a file starts, never what it checks.
SLOWEST_FILES = (
    "test_scaleout.py",
    "test_runner_docker_backend.py",  # mostly waiting on containers: a light neighbour for the scale-out test
    "test_bench_smoke.py",
    "test_swarm.py",
    "test_compose.py",
    "test_replay.py",
    "test_bot_practice.py",
    "test_readme_docker.py",
    "test_bot_drills.py",
    "test_postgres.py",
    "test_bot_retention.py",
    "test_image.py",
    "test_updates.py",
    "test_authoring_proof.py",
    "test_chaos.py",
    "test_bot_runner_boundary.py",
    "test_webchat_phone.py",
    "test_runner_hostile.py",
    "test_compose_scale.py",
    "test_runner_hosts.py",
)


# Files that reconfigure the one Docker engine they share run one at a time, even in two processes: swarm mode changes
# the engine's networking (docker_gwbridge, an overlay) while a compose stack or a container test would be starting
# on it, and two of them on a loaded machine were seen to time out each other. A file lock, not an xdist group:
# pytest-xdist 3.8's loadgroup cannot tag tests under pytest 9 (it sets a node id attribute pytest no longer reads).
ONE_ENGINE = frozenset(
    {
        "test_swarm.py",
        "test_compose.py",
        "test_compose_scale.py",
        "test_readme_docker.py",
        "test_image.py",
        "test_bot_docker_backend.py",
    }
)


@pytest.fixture(scope="module", autouse=True)
def engine_to_itself(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the engine's lock for a whole ONE_ENGINE file (its module fixtures included); other files pass."""
    if request.path.name not in ONE_ENGINE:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "coursebot-tests-engine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file stays whole, in order
