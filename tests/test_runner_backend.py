"""What both backends share: request checks, slots, a job's status, the graded-run sequence (no sandbox needed)."""

import asyncio
import json
import signal

import pytest

from runner.backend import JobEnd, Request, Slots, classify, run_reference, run_request
from runner.errors import InvalidRequest, JobFailed, RunnerBusy
from runner.grading import Check, ExerciseChecks
from runner.limits import Limits
from runner.result import RunResult

LIMITS = Limits(cpu_time_s=2)


@pytest.mark.parametrize(
    "end,status",
    [
        (JobEnd(0, None, ""), "ok"),
        (JobEnd(1, None, "Traceback\nValueError: x"), "error"),
        (JobEnd(1, None, "Traceback\nMemoryError\n\n"), "memory_limit"),
        (JobEnd(1, None, "MemoryError\nbut then\nValueError: x"), "error"),  # only the last line tells
        (JobEnd(None, signal.SIGSEGV, ""), "killed"),
        (JobEnd(None, signal.SIGXCPU, ""), "cpu_limit"),
        (JobEnd(None, signal.SIGKILL, "", cpu_s=2.5), "cpu_limit"),  # RLIMIT_CPU's hard limit
        (JobEnd(None, signal.SIGKILL, "", cpu_exceeded=True), "cpu_limit"),  # the runner's watch of the cgroup
        (JobEnd(None, signal.SIGKILL, "", cpu_s=0.1), "killed"),
        (JobEnd(None, signal.SIGKILL, ""), "killed"),  # CPU not measured (Docker)
        (JobEnd(None, signal.SIGKILL, "", oom_killed=True), "memory_limit"),
        (JobEnd(None, signal.SIGKILL, "", timed_out=True, oom_killed=True), "timeout"),
        (JobEnd(0, None, "", truncated=True, timed_out=True), "output_limit"),
        (JobEnd(None, signal.SIGKILL, "", flooded=True), "output_limit"),  # killed for flooding "done"/report
    ],
)
def test_a_jobs_end_gets_one_status_and_a_limit_wins_over_what_it_caused(end, status):
    assert classify(end, LIMITS) == status


@pytest.mark.parametrize("seed", [-1, 2**63, 10**100, True, 1.5, "7"])
def test_a_seed_must_be_a_whole_number_the_generators_take(seed):
    with pytest.raises(InvalidRequest, match="seed"):
        Request.of("x", None, None, seed, LIMITS)


def test_a_request_is_checked_before_it_runs():
    with pytest.raises(InvalidRequest, match="string"):
        Request.of(b"print(1)", None, None, None, LIMITS)
    with pytest.raises(InvalidRequest, match="larger than 10 bytes"):
        Request.of("x" * 11, {"code_bytes": 10}, None, None, LIMITS)
    with pytest.raises(InvalidRequest, match="ExerciseChecks"):
        Request.of("x", None, object(), None, LIMITS)
    with pytest.raises(InvalidRequest, match="unknown limits"):
        Request.of("x", {"bogus": 1}, None, None, LIMITS)


def test_a_requests_seed_comes_from_the_caller_then_the_checks_then_chance():
    checks = ExerciseChecks(checks=(Check("g", "x", expect=1),), seed=7)
    assert Request.of("x", None, checks, 3, LIMITS).seed == 3
    assert Request.of("x", None, checks, None, LIMITS).seed == 7
    assert Request.of("x", None, None, None, LIMITS).seed != Request.of("x", None, None, None, LIMITS).seed
    assert Request.of("x", {"wall_time_s": 1}, None, None, LIMITS).limits.cpu_time_s == 2  # over the defaults


async def test_slots_run_size_jobs_queue_more_and_refuse_the_rest():
    slots = Slots(size=1, queue=1)
    release = asyncio.Event()

    async def job():
        async with slots.take():
            await release.wait()

    first, second = asyncio.ensure_future(job()), asyncio.ensure_future(job())
    await asyncio.sleep(0)
    assert (slots.running, slots.waiting) == (1, 1)
    with pytest.raises(RunnerBusy, match="all 1 slots busy and 1 jobs queued"):
        async with slots.take():
            pass
    release.set()
    await asyncio.gather(first, second)
    assert (slots.running, slots.waiting) == (0, 0)


class FakeJobs:
    """A JobRunner whose jobs report the values given, for the sequence around them."""

    def __init__(self, values_by_code, status="ok"):
        self.values_by_code = values_by_code
        self.status = status
        self.calls = []

    async def __call__(self, code, limits, seed, spec):
        self.calls.append((code, seed, spec))
        result = RunResult(self.status, "", "", 0, None, 1.0, False)
        if spec is None:
            return result, None
        assert set(spec) == {"nonce", "exprs"}  # expressions go in, expectations never
        values = {k: ["float", v] if isinstance(v, float) else v for k, v in self.values_by_code[code].items()}
        return result, json.dumps({"v": 2, "nonce": spec["nonce"], "values": values}).encode()

    async def reference(self, checks, limits, seed):
        return await run_reference(self, checks, limits, seed)


async def test_an_ungraded_request_is_one_job():
    jobs = FakeJobs({})
    result = await run_request(Request.of("print(1)", None, None, 5, LIMITS), jobs, jobs.reference)
    assert jobs.calls == [("print(1)", 5, None)] and not result.passed and result.checks == ()


async def test_a_graded_request_runs_the_reference_first_with_the_same_seed():
    checks = ExerciseChecks(checks=(Check("g", "x"),), reference="REF")
    jobs = FakeJobs({"REF": {"g": 2.0}, "GOOD": {"g": 2.0}, "BAD": {"g": 3.0}})
    good = await run_request(Request.of("GOOD", None, checks, 9, LIMITS), jobs, jobs.reference)
    assert [(code, seed) for code, seed, _ in jobs.calls] == [("REF", 9), ("GOOD", 9)]
    assert good.passed and good.checks[0].message_key == "checks.passed"
    bad = await run_request(Request.of("BAD", None, checks, 9, LIMITS), jobs, jobs.reference)
    assert not bad.passed and bad.checks[0].message_key == "checks.mismatch"


async def test_a_reference_seed_runs_the_reference_on_another_seed():
    checks = ExerciseChecks(checks=(Check("g", "x"),), reference="REF", reference_seed=4)
    jobs = FakeJobs({"REF": {"g": 2.0}, "GOOD": {"g": 2.0}})
    await run_request(Request.of("GOOD", None, checks, 9, LIMITS), jobs, jobs.reference)
    assert [(code, seed) for code, seed, _ in jobs.calls] == [("REF", 4), ("GOOD", 9)]


async def test_a_reference_whose_expression_fails_is_a_machinery_failure():
    checks = ExerciseChecks(checks=(Check("g", "x"),), reference="REF")
    jobs = FakeJobs({"REF": {"g": ["error", "NameError"]}})
    with pytest.raises(JobFailed, match="check g could not be read"):
        await run_request(Request.of("GOOD", None, checks, 1, LIMITS), jobs, jobs.reference)


async def test_checks_with_their_own_expectations_need_no_reference():
    checks = ExerciseChecks(checks=(Check("g", "x", expect=2.0),), reference="REF")
    jobs = FakeJobs({"GOOD": {"g": 2.0}})
    result = await run_request(Request.of("GOOD", None, checks, 1, LIMITS), jobs, jobs.reference)
    assert result.passed and [code for code, _, _ in jobs.calls] == ["GOOD"]


async def test_a_reference_that_fails_is_a_machinery_failure():
    checks = ExerciseChecks(checks=(Check("g", "x"),), reference="REF")
    jobs = FakeJobs({"REF": {"g": 2.0}}, status="error")
    with pytest.raises(JobFailed, match="reference solution did not run cleanly"):
        await run_request(Request.of("GOOD", None, checks, 1, LIMITS), jobs, jobs.reference)
