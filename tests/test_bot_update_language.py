"""Every update is handled in one language, chosen once: its handlers, the error handler and the runs it starts.

The learners here have Telegram set to English and chose Russian with /language, so a reply chosen from
Telegram's setting instead of the stored choice shows up in English.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import AsyncIterator

import pytest

import bot.app
from bot.i18n import I18n, _
from runner.client import ExerciseChecks, Limits, RunnerClosed, RunnerInfo, RunResult
from tests.conftest import LOCALES, ROOT, running
from tests.journey import send_and_wait, tap_and_wait_edit

I18N = I18n(LOCALES)
SORRY = "Sorry, something went wrong on my side. Your progress is saved; please try again."
UNAVAILABLE = "Running code is unavailable right now. Please try again later."


def _russian(message: str) -> str:
    with I18N.use("ru"):
        return _(message)


async def _choose_russian(learner) -> None:
    picker = await send_and_wait(learner, "/language")
    chosen = await tap_and_wait_edit(learner, picker, "Русский")
    assert chosen["text"] == _russian("From now on I speak English.")


async def test_the_apology_for_a_failed_reply_is_in_the_language_the_learner_chose(bot, standin):
    ivan = standin.learner(user_id=8101, language_code="en")
    await _choose_russian(ivan)
    standin.fail_next("sendMessage", status=502)
    apology = await send_and_wait(ivan, "/lessons")
    assert apology["text"] == _russian(SORRY)


class FailingRunner:
    """A runner that accepts the first run and fails in it, with ``error``; later runs print 4."""

    def __init__(self, error: Exception):
        self.info = RunnerInfo(protocol=1, backend="fake", size=1, queue=0, limits=Limits(), fingerprint="f")
        self.error = error
        self.runs = 0

    async def run(self, code: str, *, checks: ExerciseChecks | None = None) -> RunResult:
        self.runs += 1
        if self.runs == 1:
            raise self.error
        return RunResult(
            status="ok", stdout="4\n", stderr="", exit_code=0, signal=None, duration_ms=1.0, truncated=False
        )


@pytest.mark.parametrize(
    ("error", "notice"),
    [
        (RunnerClosed("the runner went away mid-run"), UNAVAILABLE),  # the runner's own failure: said by the run
        (RuntimeError("a bug after the run was accepted"), SORRY),  # anything else: said by the error handler
    ],
)
async def test_a_run_that_fails_after_it_was_accepted_reaches_the_learner_in_their_language(
    config, standin, monkeypatch, error, notice
):
    runner = FailingRunner(error)

    @contextlib.asynccontextmanager
    async def connect(_config: object) -> AsyncIterator[FailingRunner]:
        yield runner

    monkeypatch.setattr(bot.app, "connect_runner", connect)
    ivan = standin.learner(user_id=8102, language_code="en")
    async with running(config):
        await _choose_russian(ivan)
        failed = await send_and_wait(ivan, "/run print(2 + 2)")
        assert runner.runs == 1
        assert failed["text"] == _russian(notice)
        # The failed run is over: the next one is not told to wait for it.
        output = await send_and_wait(ivan, "/run print(2 + 2)")
        assert "4" in output["text"]


def test_handlers_never_choose_a_language_themselves():
    # Chosen once per update, in bot.context.update_scope; /language alone switches, right after the choice.
    chosen_in = {}
    for path in sorted((ROOT / "bot" / "handlers").glob("*.py")):
        calls = {
            node.func.attr
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"negotiate", "choose", "use"}
        }
        if calls:
            chosen_in[path.name] = calls
    assert chosen_in == {"language.py": {"choose", "use"}}
