"""Stage marks of a traced request (runner/trace.py): over the real service, pool and sandbox."""

import pytest
import pytest_asyncio

from runner import trace
from runner.client import RunnerClient
from runner.service import Service
from tests.runner_cases.helpers import start_pool

in_module_loop = pytest.mark.asyncio(loop_scope="module")  # the pool's loop


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory):
    pool = await start_pool(pool_size=1, queue=4)
    service = Service(pool)
    path = str(tmp_path_factory.mktemp("trace") / "r.sock")
    await service.listen(f"unix://{path}")
    try:
        async with RunnerClient.connect(path) as c:
            yield c
    finally:
        await service.close()
        await pool.close()


def run_message(code, traced=True):
    msg = {"op": "run", "code": code, "limits": None, "checks": None}
    return {**msg, "trace": True} if traced else msg


@in_module_loop
async def test_a_traced_job_reports_every_stage_on_one_clock(client):
    result = await client.request(run_message("print(1 + 1)"), 60)
    assert result["stdout"] == "2\n"
    at = dict(result["trace"])
    # The request's path, in the order it happens across the service, the pool and the job's process (each
    # stage waits for the one before: the pool's own mark after sending may well come after the job's first).
    path = [
        "service.frame_read",
        "pool.slot",
        "pool.spec",
        "job.job_received",
        "job.code",
        "job.done",
        "pool.ended",
        "service.result",
    ]
    assert [at[n] for n in path] == sorted(at[n] for n in path), result["trace"]
    # Done ahead of the request: the sandbox's preparation, from the fork to the seccomp filter.
    ahead = ["ahead.prepare", "job.forked", "job.namespaces_mounts", "job.seccomp", "job.waiting"]
    assert [at[n] for n in ahead] == sorted(at[n] for n in ahead)
    assert at["job.waiting"] <= at["service.frame_read"] <= at["job.job_received"]


@in_module_loop
async def test_an_untraced_job_carries_no_marks(client):
    result = await client.request(run_message("print(3)", traced=False), 60)
    assert result["stdout"] == "3\n" and "trace" not in result


@in_module_loop
async def test_marks_a_job_forges_are_dropped_and_change_nothing(client):
    # The job's marks come back in its "done" message, which learner code can write too.
    forged = b'{"exit": 0, "t": [["forged", -1], ["x", true], 7], "token": 1}'
    code = f"import os\nos.write(3, {forged!r})\nprint(4)"
    result = await client.request(run_message(code), 60)
    assert result["status"] == "ok" and result["stdout"] == "4\n"
    names = [n for n, _ in result["trace"]]
    assert "job.forged" not in names and "job.x" not in names and "job.code" in names


def test_job_marks_are_parsed_as_hostile_input():
    assert trace.from_job("nope") == []
    assert trace.from_job([["a", 5], ["b", True], ["c", -1], [1, 2], ["d", 2**63], ["e", 1, 2], "f"]) == [("job.a", 5)]
    assert trace.from_job([["n" * 100, 1]]) == [("job." + "n" * trace.MAX_NAME, 1)]
    assert len(trace.from_job([["a", 1]] * 1000)) == trace.MAX_JOB_MARKS


def test_marks_go_only_to_a_traced_context():
    trace.mark("nowhere")  # no trace started in this context: nothing to record, nothing raised
    assert not trace.active()
