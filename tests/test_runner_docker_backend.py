"""The Docker backend: the container it asks for (no engine needed) and, when an
engine is reachable, a real job."""

import asyncio

import pytest

from runner import docker_backend as D
from runner.errors import InvalidRequest, SandboxUnavailable
from runner.limits import Limits


def cfg(**kw):
    return D.container_config("print(1)", Limits(**kw) if kw else Limits(), D.DockerConfig(), seed=7)


def test_container_is_locked_down():
    c = cfg()
    assert c["network_mode"] == "none" and c["network_disabled"] is True
    assert c["read_only"] is True
    assert c["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in c["security_opt"]
    assert c["user"] not in ("root", "0", "0:0") and not c["user"].startswith("0:")
    assert set(c["tmpfs"]) == {"/sandbox", "/tmp", "/dev/shm"}
    assert c["working_dir"] == "/sandbox"
    assert c["ipc_mode"] == "none"
    assert "TELEGRAM_BOT_TOKEN" not in c["environment"]


def test_limits_are_mapped():
    c = cfg(memory_bytes=100 * 2**20, max_processes=9, cpu_time_s=2.5, file_size_bytes=1000,
            open_files=50, tmpfs_bytes=4096 * 16)
    assert c["mem_limit"] == c["memswap_limit"] == 100 * 2**20
    assert c["pids_limit"] == 9
    ul = {u["name"]: (u["soft"], u["hard"]) for u in c["ulimits"]}
    assert ul["cpu"] == (3, 4) and ul["fsize"] == (1000, 1000) and ul["nofile"] == (50, 50)
    assert ul["core"] == (0, 0)
    assert "size=65536" in c["tmpfs"]["/tmp"]


def test_code_and_seed_travel_in_argv():
    c = cfg()
    assert c["command"][-2:] == ["print(1)", "7"]
    assert c["command"][:2] == ["python3", "-I"]


@pytest.mark.parametrize("args,status", [
    ((0, False, False, False, ""), "ok"),
    ((1, False, False, False, "Traceback\nValueError: x"), "error"),
    ((1, False, False, False, "MemoryError"), "memory_limit"),
    ((137, True, False, False, ""), "memory_limit"),
    ((137, False, False, False, ""), "killed"),
    ((152, False, False, False, ""), "timeout"),
    ((None, False, True, False, ""), "timeout"),
    ((0, False, False, True, ""), "output_limit"),
])
def test_classify(args, status):
    assert D.classify(*args)[0] == status


def test_from_env():
    c = D.DockerConfig.from_env({"RUNNER_DOCKER_IMAGE": "img:1", "DOCKER_HOST": "unix:///x"}, pool_size=3)
    assert (c.image, c.base_url, c.pool_size) == ("img:1", "unix:///x", 3)


async def test_checks_not_supported():
    b = D.DockerBackend()
    b.client = object()
    with pytest.raises(InvalidRequest):
        await b.run("x", checks=object())


async def test_real_engine():
    b = D.DockerBackend()
    try:
        await asyncio.wait_for(b.start(), 10)
    except (SandboxUnavailable, asyncio.TimeoutError):
        pytest.skip("no Docker engine reachable")
    try:
        r = await b.run("print(6 * 7)")
        assert r.status == "ok" and r.stdout == "42\n"
        r = await b.run("import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)")
        assert r.status == "error"
    finally:
        await b.close()
