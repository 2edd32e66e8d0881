"""The zygote's bwrap command line: what is (and is not) exposed."""

import json
import os
from pathlib import Path

import pytest

from runner import sandbox
from runner.errors import SandboxUnavailable
from tests.runner_cases.helpers import host_config, repo_root


@pytest.fixture
def plan():
    cfg = sandbox.SandboxConfig.from_config(host_config())
    if not os.access(cfg.bwrap, os.X_OK):
        pytest.skip("no bwrap on this host (apt-get install -y bubblewrap)")
    p = sandbox.plan(cfg, ["/bin/true"], [], b"\0" * 8)
    yield p
    p.close_fds()
    p.remove_stage()


def bwrap_argv(p):
    return json.loads(p.argv[-1])["argv"]


def ro_dests(argv):
    return [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"]


def test_namespaces_and_hardening(plan):
    argv = bwrap_argv(plan)
    for flag in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in argv
    assert "--seccomp" in argv
    assert argv[argv.index("--remount-ro", argv.index("--dir")) + 1] == "/dev"
    assert argv[-3:-1] != ["--share-net"]
    assert "--share-net" not in argv and "--bind" not in argv and "--dev-bind" not in argv


def test_only_interpreter_and_libraries_exposed(plan):
    dests = ro_dests(bwrap_argv(plan))
    root = repo_root()
    for d in dests:
        assert d != "/" and d != "/root" and d != "/home" and d != "/etc"
        assert not d.startswith("/home/")
        # From the repo: only the virtualenv, never lessons/, data/, bot/.
        if d.startswith(root + "/") or d == root:
            assert d.startswith(os.path.join(root, ".venv")), d
    assert f"{sandbox.PKG_ROOT}/runner" in dests
    assert "/etc/shadow" not in dests and "/etc/passwd" not in dests


def test_environment_is_fixed(plan):
    argv = bwrap_argv(plan)
    keys = [argv[i + 1] for i, a in enumerate(argv) if a == "--setenv"]
    assert set(keys) == set(sandbox.sandbox_env())
    assert not any("TOKEN" in k or "SECRET" in k for k in keys)


def test_root_drops_to_sandbox_uid(plan):
    spec = json.loads(plan.argv[-1])
    if os.geteuid() == 0:
        assert spec["root"] and spec["uid"] != 0 and spec["gid"] != 0
        assert all(staged.startswith(plan.cleanup[0]) for _src, staged in spec["stage_binds"])
    else:
        assert spec["uid"] == os.getuid()


def test_missing_bwrap_is_refused_with_a_fix():
    cfg = sandbox.SandboxConfig.from_config(host_config(bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        sandbox.plan(cfg, ["/bin/true"], [], None)
    assert any("bubblewrap" in p for p in sandbox.host_problems(cfg))


def test_python_binds_are_real_dirs():
    binds = sandbox.python_binds(host_config().python)
    assert binds and all(os.path.isdir(b) for b in binds)
    assert len(set(binds)) == len(binds)


def test_bounding_set_lists_the_capabilities_jobs_must_drop():
    status = "Name:\tpython\nCapInh:\t0000000000000000\nCapBnd:\t0000000000200100\nCapAmb:\t0\n"
    assert sandbox.bounding_set(status) == (8, 21)  # CAP_SETPCAP, CAP_SYS_ADMIN


def test_a_jobs_rlimits_forbid_realtime_and_higher_priority(monkeypatch):
    """RLIMIT_RTPRIO and RLIMIT_NICE are forced to 0, whatever the runner itself was started with.

    Recorded rather than observed: raising them first needs CAP_SYS_RESOURCE, which this test may lack.
    """
    import resource

    from runner.limits import Limits

    calls = {}
    monkeypatch.setattr(resource, "setrlimit", lambda res, value: calls.__setitem__(res, value))
    sandbox.set_rlimits(Limits())
    assert calls[resource.RLIMIT_RTPRIO] == (0, 0) and calls[resource.RLIMIT_NICE] == (0, 0)


# --- per-slot uids (issue 21): the jobs' host uids, mapped by the runner into the sandbox's user namespace --------


def test_with_job_uids_the_runner_maps_them_while_bwrap_waits_and_the_zygote_may_hand_them_out():
    cfg = sandbox.SandboxConfig.from_config(host_config())
    if not os.access(cfg.bwrap, os.X_OK):
        pytest.skip("no bwrap on this host (apt-get install -y bubblewrap)")
    p = sandbox.plan(cfg, ["/bin/true"], [], None, job_uids=(70001, 8))
    try:
        argv = bwrap_argv(p)
        if os.geteuid() != 0:  # only root may map uids besides its own: no block, no maps
            assert p.userns is None and "--userns-block-fd" not in argv
            return
        assert p.userns is not None
        assert p.userns.maps == f"{cfg.sandbox_uid} {cfg.sandbox_uid} 1\n70001 70001 8\n"  # host numbers inside too
        block, info = argv[argv.index("--userns-block-fd") + 1], argv[argv.index("--info-fd") + 1]
        assert {int(block), int(info)} <= set(p.pass_fds)
        caps = {argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"}
        assert caps == {"CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_SETUID", "CAP_SETGID"}
    finally:
        if p.userns is not None:
            p.userns.close()
        p.close_fds()
        p.remove_stage()


def test_the_directories_above_mount_points_are_open_to_every_uid(plan):
    # bwrap makes missing ones 0700, owned by the sandbox's uid: a job's own uid could not reach the interpreter.
    argv = bwrap_argv(plan)
    opened = {argv[i + 3] for i, a in enumerate(argv) if a == "--perms" and argv[i + 1] == "0755"}
    first_bind = argv.index("--ro-bind")
    assert all(argv.index(d) < first_bind for d in opened)
    for dest in ro_dests(argv):
        for parent in Path(dest).parents:
            assert str(parent) == "/" or str(parent) in opened, (dest, parent)


def test_each_runner_claims_uids_no_other_runner_holds():
    from runner import uids

    a = uids.claim(80000, 8)
    b = uids.claim(80000, 8)
    try:
        assert (a.first, b.first) == (80001, 80009)  # the next free block
        assert [a.uid(i) for i in (0, 7)] == [80001, 80008]
        with pytest.raises(IndexError):
            a.uid(8)
        c = uids.claim(80004, 8)  # another base: its blocks from 80005 and 80013 overlap a's and b's
        assert c.first == 80021
        c.release()
    finally:
        a.release()
        b.release()
    again = uids.claim(80000, 8)  # released with its owner
    assert again.first == 80001
    again.release()
