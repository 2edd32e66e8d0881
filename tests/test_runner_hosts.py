"""A pool of runner hosts behind HAProxy, for real: two `python -m runner serve` hosts (each in a network namespace
of its own behind a veth pair where this process may make one, else on 127.0.0.2 and 127.0.0.3; two slots each)
and a haproxy process running deploy/haproxy/runners.cfg.  The bot's client talks to HAProxy
only, one connection per job, with the token; each host is asked what it did over its own Unix socket."""

import asyncio
import os
import signal

import pytest

from runner.client import JobLost, RunnerBusy, RunnerClient
from tests.runnerpool import TOKEN, Haproxy, RunnerHost, haproxy_binary, make_hosts, remove_hosts

pytestmark = pytest.mark.skipif(
    haproxy_binary() is None, reason="haproxy is not installed (apt-get install haproxy; .ci/run installs it)"
)

SLOTS = 2
SHORT = "print('hi')"


def sleeper(seconds: float) -> str:
    return f"import time\ntime.sleep({seconds})\nprint('slept')"


@pytest.fixture(scope="module")
def pool():
    folder, hosts = make_hosts(2, SLOTS)
    haproxy = None
    try:
        for host in hosts:
            host.start()
        haproxy = Haproxy(folder, hosts)
        haproxy.start()
        yield haproxy, hosts
    finally:
        if haproxy is not None:
            haproxy.stop()
        remove_hosts(hosts)


async def done_per_host(hosts: list[RunnerHost]) -> list[int]:
    return [await h.jobs_done() for h in hosts]


async def settle(haproxy: Haproxy, hosts: list[RunnerHost]) -> None:
    """Both hosts UP in HAProxy's eyes, by a passed health check, and idle (a previous test's jobs all ended)."""
    for h in hosts:
        await haproxy.wait_status(h.name, "UP")
        await haproxy.wait_checked(h.name)
    for _ in range(300):
        if [await h.running() for h in hosts] == [0] * len(hosts):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the hosts never went idle")


async def until_running(hosts: list[RunnerHost], counts: list[int]) -> None:
    for _ in range(600):
        if [await h.running() for h in hosts] == counts:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the hosts never ran {counts} jobs: {[await h.running() for h in hosts]}")


async def test_the_shipped_config_puts_each_host_in_rotation_with_its_slots_as_its_cap(pool):
    haproxy, hosts = pool
    await settle(haproxy, hosts)
    servers = haproxy.servers()
    assert sorted(servers) == ["runner1", "runner2"]
    for h in hosts:
        assert servers[h.name]["slim"] == str(SLOTS)  # maxconn = the host's slots
        assert servers[h.name]["check_status"] == "L7OK"  # the health endpoint, over HTTP, without the token
    assert "refused a connection" not in "".join(h.log_tail() for h in hosts)  # checks are never bad hellos


async def test_leastconn_spreads_concurrent_jobs_one_per_free_slot_and_sequential_ones_over_both(pool):
    haproxy, hosts = pool
    await settle(haproxy, hosts)
    before = await done_per_host(hosts)
    async with RunnerClient.connect(haproxy.address, token=TOKEN) as runner:
        results = await asyncio.gather(*(runner.run(sleeper(1)) for _ in range(2 * SLOTS)))
        assert [r.stdout for r in results] == ["slept\n"] * (2 * SLOTS)
        middle = await done_per_host(hosts)
        assert [m - b for m, b in zip(middle, before, strict=True)] == [SLOTS, SLOTS]
        for _ in range(10):
            assert (await runner.run(SHORT)).stdout == "hi\n"
    after = await done_per_host(hosts)
    spread = [a - m for a, m in zip(after, middle, strict=True)]
    assert sum(spread) == 10 and min(spread) >= 3, spread  # round robin among equally idle hosts


async def test_more_jobs_than_slots_queue_at_haproxy_briefly_then_are_busy_never_hang(pool):
    haproxy, hosts = pool
    await settle(haproxy, hosts)
    async with RunnerClient.connect(haproxy.address, token=TOKEN) as runner:
        holding = [asyncio.ensure_future(runner.run(sleeper(12), limits={"wall_time_s": 30})) for _ in range(2 * SLOTS)]
        await until_running(hosts, [SLOTS, SLOTS])
        extra = await asyncio.gather(*(runner.run(SHORT) for _ in range(3)), return_exceptions=True)
        assert all(isinstance(e, RunnerBusy) for e in extra), extra
        assert "3 tries" in str(extra[0])
        assert not any(h.done() for h in holding)  # told "busy" while the pool was still full, not after
        assert int(haproxy.backend()["qmax"]) >= 3  # they waited in HAProxy's queue, shared by all hosts
        assert [await h.running() for h in hosts] == [SLOTS, SLOTS]  # no host ever ran more than its slots
        assert [r.stdout for r in await asyncio.gather(*holding)] == ["slept\n"] * (2 * SLOTS)
        assert (await runner.run(SHORT)).stdout == "hi\n"  # and the pool takes jobs again


async def test_a_host_killed_mid_job_costs_that_job_a_job_lost_and_the_next_jobs_go_to_the_other(pool):
    haproxy, hosts = pool
    await settle(haproxy, hosts)
    async with RunnerClient.connect(haproxy.address, token=TOKEN) as runner:
        jobs = [asyncio.ensure_future(runner.run(sleeper(4), limits={"wall_time_s": 30})) for _ in range(2)]
        await until_running(hosts, [1, 1])  # leastconn: one on each host
        victim, survivor = hosts
        victim.kill()  # kill -9 of the host's runner and its sandbox
        lost, kept = await asyncio.gather(*jobs, return_exceptions=True)
        if isinstance(kept, JobLost):  # the order of results is the order of jobs, not of hosts
            lost, kept = kept, lost
        assert isinstance(lost, JobLost), lost
        assert kept.stdout == "slept\n"  # the other host's job is untouched
        before = await survivor.jobs_done()
        for _ in range(6):  # sent at once: HAProxy may not know yet, and tries the other host for them
            assert (await runner.run(SHORT)).stdout == "hi\n"
        assert await survivor.jobs_done() - before == 6
        await haproxy.wait_status(victim.name, "DOWN", within_s=20)  # the health check took it out

        victim.start()  # the host comes back: in rotation again once two checks pass
        await haproxy.wait_status(victim.name, "UP", within_s=60)
        before_both = await done_per_host(hosts)
        results = await asyncio.gather(*(runner.run(sleeper(1)) for _ in range(2 * SLOTS)))
        assert [r.stdout for r in results] == ["slept\n"] * (2 * SLOTS)
        after = await done_per_host(hosts)
        assert [a - b for a, b in zip(after, before_both, strict=True)] == [SLOTS, SLOTS]


async def test_a_host_that_stops_answering_mid_job_is_taken_out_and_its_job_lost_not_held(pool):
    haproxy, hosts = pool
    await settle(haproxy, hosts)
    async with RunnerClient.connect(haproxy.address, token=TOKEN) as runner:
        jobs = [asyncio.ensure_future(runner.run(sleeper(3), limits={"wall_time_s": 60})) for _ in range(2)]
        await until_running(hosts, [1, 1])
        survivor, frozen = hosts
        assert frozen.process is not None
        os.kill(frozen.process.pid, signal.SIGSTOP)  # as a host cut off the network: nothing closes, nothing answers
        try:
            await haproxy.wait_status(frozen.name, "DOWN", within_s=30)
            results = await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 30)
            lost = [r for r in results if isinstance(r, JobLost)]
            kept = [r for r in results if not isinstance(r, BaseException)]
            assert len(lost) == 1 and [r.stdout for r in kept] == ["slept\n"], results  # not held for minutes
            before = await survivor.jobs_done()
            for _ in range(4):
                assert (await runner.run(SHORT)).stdout == "hi\n"
            assert await survivor.jobs_done() - before == 4
        finally:
            os.kill(frozen.process.pid, signal.SIGCONT)
        await haproxy.wait_status(frozen.name, "UP", within_s=30)  # it answers again: back in rotation
        assert (await frozen.info())["running"] == 0  # and its slot is free again


async def test_a_host_cut_off_the_network_mid_job_is_taken_out_and_its_job_lost_then_back_when_mended(pool):
    haproxy, hosts = pool
    survivor, cut = hosts
    if cut.netns is None:
        pytest.skip("the hosts are on loopback addresses (no network namespaces here: not root, or no ip/nsenter)")
    await settle(haproxy, hosts)
    async with RunnerClient.connect(haproxy.address, token=TOKEN) as runner:
        jobs = [asyncio.ensure_future(runner.run(sleeper(3), limits={"wall_time_s": 60})) for _ in range(2)]
        await until_running(hosts, [1, 1])
        cut.netns.cut()  # the host runs on, but no packet reaches it or leaves it: nothing is closed or refused
        try:
            await haproxy.wait_status(cut.name, "DOWN", within_s=30)
            results = await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 30)
            assert sum(isinstance(r, JobLost) for r in results) == 1, results
            assert [r.stdout for r in results if not isinstance(r, BaseException)] == ["slept\n"], results
            before = await survivor.jobs_done()
            for _ in range(4):
                assert (await runner.run(SHORT)).stdout == "hi\n"
            assert await survivor.jobs_done() - before == 4
        finally:
            cut.netns.mend()
        await haproxy.wait_status(cut.name, "UP", within_s=30)
        before_both = await done_per_host(hosts)
        results = await asyncio.gather(*(runner.run(sleeper(1)) for _ in range(2 * SLOTS)))
        assert [r.stdout for r in results] == ["slept\n"] * (2 * SLOTS)
        assert [a - b for a, b in zip(await done_per_host(hosts), before_both, strict=True)] == [SLOTS, SLOTS]


async def test_without_the_token_haproxy_passes_the_runners_refusal_through(pool):
    from runner.client import Unauthorized

    haproxy, hosts = pool
    await settle(haproxy, hosts)
    with pytest.raises(Unauthorized):
        await RunnerClient.connect(haproxy.address, token="not-the-token-of-this-pool-000000")


async def test_with_no_host_up_haproxy_closes_at_once_and_the_job_waits_as_for_a_runner_away(tmp_path, monkeypatch):
    from runner import client as client_module
    from runner.client import RunnerClosed

    monkeypatch.setattr(client_module, "RECONNECT_WAIT_S", 2.0)
    nobody = RunnerHost("runner1", "127.0.0.2", SLOTS, str(tmp_path))  # its ports: nothing listens there
    haproxy = Haproxy(str(tmp_path), [nobody])
    haproxy.start()
    try:
        await haproxy.wait_status("runner1", "DOWN", within_s=20)
        client = RunnerClient(client_module.parse_address(haproxy.address), token=TOKEN, request_timeout_s=10)
        with pytest.raises(RunnerClosed, match=r"no runner .* took the job") as caught:
            await client.run(SHORT)
        assert not isinstance(caught.value, (JobLost, RunnerBusy))  # not "busy": nothing is up to be busy
        assert (
            int(haproxy.frontend()["stot"]) > 2
        )  # tried again with back-off for the wait (2 s here), each closed at once
    finally:
        haproxy.stop()
