"""Reference values computed ahead (runner/references.py): each seed handed out once, refilled in the background."""

import asyncio

from runner import references
from runner.errors import JobFailed
from runner.grading import Check, ExerciseChecks
from runner.limits import Limits
from runner.references import ReadyReferences

CHECKS = ExerciseChecks((Check("g", "x.grad"),), reference="x = 1")
OTHER = ExerciseChecks((Check("g", "x.grad"),), reference="x = 2")


class FakeReference:
    """What the pool's reference job gives: the seed itself, so a test can tell which seed a value is for."""

    def __init__(self):
        self.calls = []
        self.broken = set()
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, checks, limits, seed):
        await self.gate.wait()
        self.calls.append((checks.reference, seed))
        if checks.reference in self.broken:
            raise JobFailed("the exercise's reference solution did not run cleanly")
        return {"g": seed}


async def settle():
    for _ in range(50):
        await asyncio.sleep(0)


async def test_a_seed_is_ready_after_the_first_run_and_each_is_handed_out_once():
    compute = FakeReference()
    refs = ReadyReferences(compute, idle=lambda: True, per_exercise=3)
    assert refs.take(CHECKS, Limits()) is None  # nothing ready at first: that run computes its own
    await settle()
    assert refs.ready_count == 3
    seen = set()
    for _ in range(12):
        ready = refs.take(CHECKS, Limits())
        assert ready is not None and ready.values == {"g": ready.seed}  # the values of that very seed
        seen.add(ready.seed)
        await settle()
    assert len(seen) == 12  # never the same seed twice
    assert refs.taken == 12 and refs.computed == 15
    await refs.close()


async def test_each_exercise_and_limits_has_its_own_seeds():
    compute = FakeReference()
    refs = ReadyReferences(compute, idle=lambda: True, per_exercise=2)
    refs.take(CHECKS, Limits())
    refs.take(OTHER, Limits())
    refs.take(CHECKS, Limits(cpu_time_s=2))
    await settle()
    assert refs.ready_count == 6
    assert {r for r, _ in compute.calls} == {"x = 1", "x = 2"}
    swapped = ExerciseChecks((Check("h", "x.grad"),), reference="x = 1")  # another id: other values
    assert refs.take(swapped, Limits()) is None
    await refs.close()


async def test_only_the_most_recent_exercises_are_kept():
    compute = FakeReference()
    refs = ReadyReferences(compute, idle=lambda: True, per_exercise=1, exercises=2)
    for n in range(3):
        refs.take(ExerciseChecks((Check("g", "x.grad"),), reference=f"x = {n}"), Limits())
        await settle()
    assert refs.ready_count == 2
    assert refs.take(ExerciseChecks((Check("g", "x.grad"),), reference="x = 0"), Limits()) is None
    await refs.close()


async def test_nothing_is_computed_while_the_pool_has_no_room():
    compute = FakeReference()
    room = False
    refs = ReadyReferences(compute, idle=lambda: room, per_exercise=2)
    refs.take(CHECKS, Limits())
    await asyncio.sleep(3 * references.IDLE_CHECK_S)
    assert compute.calls == []
    room = True
    await asyncio.sleep(3 * references.IDLE_CHECK_S)
    assert refs.ready_count == 2
    await refs.close()


async def test_a_broken_reference_is_not_kept_and_the_next_run_computes_its_own():
    compute = FakeReference()
    compute.broken.add("x = 1")
    refs = ReadyReferences(compute, idle=lambda: True, per_exercise=2)
    assert refs.take(CHECKS, Limits()) is None
    await settle()
    assert refs.ready_count == 0 and len(compute.calls) == 1  # tried once, then forgotten: no retry loop
    assert refs.take(CHECKS, Limits()) is None
    await refs.close()


async def test_close_stops_computing_and_drops_the_seeds():
    compute = FakeReference()
    compute.gate.clear()
    refs = ReadyReferences(compute, idle=lambda: True, per_exercise=2)
    refs.take(CHECKS, Limits())
    await settle()
    await refs.close()
    await refs.close()  # idempotent
    compute.gate.set()
    await settle()
    assert compute.calls == [] and refs.ready_count == 0
    assert refs.take(CHECKS, Limits()) is None
