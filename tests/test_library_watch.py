"""The file watcher reloads once a change has settled; its waiting is stepped by the test, not slept."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.library.watch import Watcher


class SteppedSleep:
    """The watcher's sleep: each step() lets exactly one interval pass, then waits till it sleeps again."""

    def __init__(self) -> None:
        self.calls = 0
        self._changed = asyncio.Condition()
        self._wake: asyncio.Future[None] | None = None

    async def __call__(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        async with self._changed:
            self.calls += 1
            self._wake = wake
            self._changed.notify_all()
        await wake

    async def started(self, timeout: float = 5.0) -> None:
        """Wait until the watcher has taken its first look and sleeps."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self._wake is not None), timeout)

    async def step(self, timeout: float = 5.0) -> None:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self._wake is not None and not self._wake.done()), timeout
            )
            calls = self.calls
            assert self._wake is not None
            self._wake.set_result(None)
            await asyncio.wait_for(self._changed.wait_for(lambda: self.calls > calls), timeout)


async def watching(tmp_path: Path):
    lesson = tmp_path / "lessons" / "en" / "01.yaml"
    lesson.parent.mkdir(parents=True)
    lesson.write_text("id: one\n")
    (tmp_path / "notes.txt").write_text("not watched")
    reloads: list[int] = []

    async def reload() -> None:
        reloads.append(len(reloads) + 1)

    sleep = SteppedSleep()
    task = asyncio.create_task(Watcher([tmp_path / "lessons"], reload, sleep=sleep).run())
    await sleep.started()
    return lesson, reloads, sleep, task


async def test_a_change_reloads_once_it_has_settled(tmp_path: Path):
    lesson, reloads, sleep, task = await watching(tmp_path)
    try:
        await sleep.step()
        assert reloads == []
        lesson.write_text("id: one\ntitle: changed\n")
        await sleep.step()  # the change is seen
        assert reloads == []
        await sleep.step()  # and has held still for one interval
        assert reloads == [1]
        await sleep.step()
        assert reloads == [1]
    finally:
        task.cancel()


async def test_a_burst_of_writes_reloads_once_after_the_last(tmp_path: Path):
    lesson, reloads, sleep, task = await watching(tmp_path)
    try:
        lesson.write_text("id: o")
        await sleep.step()
        lesson.write_text("id: one\ntitle: half")
        await sleep.step()
        lesson.write_text("id: one\ntitle: whole\n")
        await sleep.step()
        assert reloads == []
        await sleep.step()
        assert reloads == [1]
    finally:
        task.cancel()


async def test_new_and_removed_files_count_and_other_files_do_not(tmp_path: Path):
    lesson, reloads, sleep, task = await watching(tmp_path)
    try:
        (tmp_path / "notes.txt").write_text("still not watched, longer")
        await sleep.step()
        await sleep.step()
        assert reloads == []
        (lesson.parent / "02.yaml").write_text("id: two\n")
        await sleep.step()
        await sleep.step()
        assert reloads == [1]
        lesson.unlink()
        await sleep.step()
        await sleep.step()
        assert reloads == [1, 2]
    finally:
        task.cancel()


async def test_a_failing_reload_does_not_stop_the_watching(tmp_path: Path):
    lesson = tmp_path / "l.yaml"
    lesson.write_text("a")
    attempts = []

    async def reload() -> None:
        attempts.append(1)
        raise RuntimeError("boom")

    sleep = SteppedSleep()
    task = asyncio.create_task(Watcher([tmp_path], reload, sleep=sleep).run())
    await sleep.started()
    try:
        for text in ("bb", "ccc"):
            lesson.write_text(text)
            await sleep.step()
            await sleep.step()
        assert len(attempts) == 2
        assert not task.done()
    finally:
        task.cancel()
