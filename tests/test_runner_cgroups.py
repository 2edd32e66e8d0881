import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner import cgroups
from runner.errors import SandboxUnavailable
from runner.limits import Limits

V1_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_PROC = "8:pids:/\n4:memory:/a/b\n1:cpu:/\n0::/\n"


def test_detect_v1_hybrid(tmp_path):
    # The unified mount has no pids/memory here (hybrid host): v1 wins.
    layout = cgroups.detect(V1_MOUNTINFO.replace("/sys/fs/cgroup/unified", str(tmp_path)), V1_PROC)
    assert layout.version == 1
    assert layout.own["memory"] == Path("/sys/fs/cgroup/memory/a/b")
    assert layout.own["pids"] == Path("/sys/fs/cgroup/pids")


def test_detect_v2(tmp_path):
    own = tmp_path / "sub"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpu memory pids io\n")
    mi = f"30 23 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    layout = cgroups.detect(mi, "0::/sub\n")
    assert layout.version == 2 and layout.own == {"unified": own}


def test_detect_v2_under_cgroupns_root(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    mi = f"30 23 0:27 /docker/abc {tmp_path} rw - cgroup2 cgroup2 rw\n"
    layout = cgroups.detect(mi, "0::/docker/abc\n")
    assert layout.own == {"unified": tmp_path}


def test_detect_nothing_usable():
    with pytest.raises(SandboxUnavailable, match="pids"):
        cgroups.detect("1 0 0:1 / / rw - ext4 /dev/x rw\n", "0::/\n")


def _fake_v2(tmp_path, with_procs=False):
    own = tmp_path / "own"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("")
    (own / "cgroup.procs").write_text("")
    return cgroups.Layout(2, {"unified": own})


def test_v2_tree_on_a_fake_filesystem(tmp_path, monkeypatch):
    layout = _fake_v2(tmp_path)
    orig_mkdir = Path.mkdir

    def mkdir(self, *a, **k):  # a real cgroupfs makes the control files itself
        orig_mkdir(self, *a, **k)
        for name in (
            "cgroup.procs",
            "cgroup.subtree_control",
            "memory.events",
            "pids.max",
            "memory.max",
            "cgroup.kill",
        ):
            (self / name).touch()

    monkeypatch.setattr(Path, "mkdir", mkdir)
    tree = cgroups.CgroupTree(layout, "coursebot-runner.test")
    tree._make(2)
    assert (layout.own["unified"] / "cgroup.subtree_control").read_text() == "+pids +memory +cpu"
    assert tree.slots[0].cpu_usage_s() is None  # no cpu.stat in this fake: not measurable, not zero
    slot = tree.slots[1]
    slot.configure(Limits(max_processes=7, memory_bytes=1 << 20))
    assert (slot.dirs["unified"] / "pids.max").read_text() == "7"
    assert (slot.dirs["unified"] / "memory.max").read_text() == str(1 << 20)
    (slot.dirs["unified"] / "memory.events").write_text("low 0\nmax 3\noom 1\noom_kill 1\n")
    assert slot.oom_killed()
    assert slot.kill_all(timeout=0.1)  # empty cgroup.procs
    assert (slot.dirs["unified"] / "cgroup.kill").read_text() == "1"


def test_parse_helpers():
    assert cgroups._parse_proc_cgroup("4:memory:/x\n1:cpu,cpuacct:/y\n0::/z\n") == {
        "memory": "/x",
        "cpu": "/y",
        "cpuacct": "/y",
        "": "/z",
    }
    assert cgroups._join("/sys/fs/cgroup", "/docker/1", "/docker/1/sub") == Path("/sys/fs/cgroup/sub")


def _real_tree():
    try:
        layout = cgroups.detect()
        # Named as a runner of this process would be (no pool runs here now): a runner starting elsewhere
        # on this host sees a live owner and leaves it alone.
        return cgroups.CgroupTree.create(1, layout, name=f"{cgroups.TREE_PREFIX}{os.getpid()}")
    except SandboxUnavailable as e:
        pytest.skip(f"no writable cgroups here: {e}")


def test_real_pids_limit_binds_bounded():
    """A BOUNDED fork test (40 tries, limit 6): never a real fork bomb."""
    tree = _real_tree()
    try:
        slot = tree.slots[0]
        slot.configure(Limits(max_processes=6))
        code = (
            "import os, sys, time\n"
            "sys.stdin.readline()\n"
            "kids = []\n"
            "for _ in range(40):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        continue\n"
            "    if pid == 0:\n"
            "        time.sleep(0.3)\n"
            "        os._exit(0)\n"
            "    kids.append(pid)\n"
            "for p in kids:\n"
            "    os.waitpid(p, 0)\n"
            "print(len(kids))\n"
        )
        p = subprocess.Popen(
            [sys.executable, "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        slot.add(p.pid)
        out, _ = p.communicate("go\n", timeout=30)
        assert 0 < int(out) <= 5  # the helper itself is one of the 6
    finally:
        tree.destroy()


def test_real_kill_all_reaps_a_setsid_daemon():
    tree = _real_tree()
    try:
        slot = tree.slots[0]
        slot.configure(Limits())
        p = subprocess.Popen(
            [
                sys.executable,
                "-S",
                "-c",
                "import os, time, sys\nsys.stdin.readline()\n"
                "if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
                "print('forked', flush=True)\ntime.sleep(60)\n",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        slot.add(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "forked"
        assert len(slot.pids()) == 2
        assert slot.kill_all(timeout=5)
        p.wait(timeout=5)
        assert slot.pids() == []
    finally:
        tree.destroy()
    assert not any(d.exists() for d in tree.dirs.values())


def test_v2_cpu_time_quota_and_pinning_on_a_fake_filesystem(tmp_path, monkeypatch):
    layout = _fake_v2(tmp_path)
    (layout.own["unified"] / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    orig_mkdir = Path.mkdir

    def mkdir(self, *a, **k):  # a real cgroupfs makes the control files itself (cpuset.cpus empty: inherit)
        orig_mkdir(self, *a, **k)
        for name in ("cgroup.procs", "cgroup.subtree_control", "memory.events", "pids.max", "memory.max"):
            (self / name).touch()
        for name in ("cpu.max", "cpuset.cpus"):
            (self / name).touch()
        (self / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")

    monkeypatch.setattr(Path, "mkdir", mkdir)
    tree = cgroups.CgroupTree(layout, "coursebot-runner.test")
    tree._make(1)
    assert (layout.own["unified"] / "cgroup.subtree_control").read_text() == "+pids +memory +cpu +cpuset +io"
    slot = tree.slots[0]
    slot.configure(Limits())
    assert (slot.dirs["unified"] / "cpu.max").read_text() == "100000 100000" and slot.cpu_quota_cores == 1.0
    assert slot.cpu_usage_s() == 1.5
    slot.pin("1")
    assert (slot.dirs["unified"] / "cpuset.cpus").read_text() == "1"


@pytest.mark.parametrize(
    "cpus,lanes,want",
    [
        ([0, 1], 2, ["0", "1"]),
        ([1, 0], 2, ["0", "1"]),
        ([0, 1, 2, 3], 2, ["0,1", "2,3"]),
        ([0, 1, 2], 2, ["0", "1"]),  # the third CPU is left to the runner and the zygote
        ([0], 2, ["0", "0"]),  # more jobs than CPUs: shared
        ([0, 1, 2], 5, ["0", "1", "2", "0", "1"]),
        ([0, 1], 1, ["0,1"]),
    ],
)
def test_cpu_lanes_give_concurrent_jobs_cpus_of_their_own(cpus, lanes, want):
    assert cgroups.cpu_lanes(cpus, lanes) == want


def test_real_cpu_time_counts_every_process_of_a_job():
    """cpuacct (v1) or cpu.stat (v2): the CPU of all processes together, children included."""
    tree = _real_tree()
    try:
        slot = tree.slots[0]
        slot.configure(Limits())
        if slot.cpu_usage_s() is None:
            pytest.skip("no CPU accounting in this host's cgroups")
        code = (
            "import os, sys, time\nsys.stdin.readline()\nkids = []\nfor _ in range(2):\n    pid = os.fork()\n"
            "    if pid == 0:\n        t = time.process_time()\n        while time.process_time() - t < 0.3:\n"
            "            pass\n        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\n"
        )
        p = subprocess.Popen([sys.executable, "-S", "-c", code], stdin=subprocess.PIPE, text=True)
        slot.add(p.pid)
        before = slot.cpu_usage_s()
        p.communicate("go\n", timeout=30)
        assert slot.cpu_usage_s() - before >= 0.55
    finally:
        tree.destroy()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_real_pinning_moves_a_jobs_processes_to_its_cpus():
    tree = _real_tree()
    try:
        slot = tree.slots[0]
        slot.configure(Limits())
        if slot._cpus_file is None:
            pytest.skip("no cpuset in this host's cgroups")
        p = subprocess.Popen(
            [
                sys.executable,
                "-S",
                "-c",
                "import os, sys\nsys.stdin.readline()\nprint(sorted(os.sched_getaffinity(0)))",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        slot.add(p.pid)
        slot.pin("1")
        out, _ = p.communicate("go\n", timeout=30)
        assert out.strip() == "[1]"
    finally:
        tree.destroy()


def test_an_optional_v1_hierarchy_the_runner_cannot_write_is_left_out(tmp_path):
    for c in ("pids", "memory", "cpu"):
        (tmp_path / c).mkdir()
    layout = cgroups.Layout(
        1,
        {
            "pids": tmp_path / "pids",
            "memory": tmp_path / "memory",
            "cpu": tmp_path / "cpu",
            "cpuset": tmp_path / "no-such-cpuset",  # e.g. mounted read-only: not ours to write
        },
    )
    assert cgroups._writable(layout).controllers == ("pids", "memory", "cpu")


def test_a_tree_whose_owner_lives_is_never_cleaned_up_as_stale(tmp_path):
    """Another process's tree (coursebot-runner.PID or PID-TAG) stays while PID lives; a dead owner's goes."""
    own = tmp_path / "pids"
    own.mkdir()
    alive = own / f"{cgroups.TREE_PREFIX}{os.getppid()}-t"
    dead = own / f"{cgroups.TREE_PREFIX}{2**22 + 12345}"  # above any pid_max: never a live pid
    nameless = own / f"{cgroups.TREE_PREFIX}x"
    for d in (alive, dead, nameless):
        d.mkdir()
    cgroups.CgroupTree(cgroups.Layout(1, {"pids": own}), f"{cgroups.TREE_PREFIX}{os.getpid()}")._cleanup_stale()
    assert alive.is_dir() and not dead.exists() and not nameless.exists()


# --- disk I/O (issue 21): each cell throttled on every block device -------------------------------------------


def test_block_devices_are_read_from_sys_block(tmp_path):
    for name, dev in (("vda", "254:0\n"), ("loop0", "7:0\n"), ("odd", "not a device\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "dev").write_text(dev)
    (tmp_path / "nodev").mkdir()
    assert cgroups.block_devices(tmp_path) == ["7:0", "254:0"]


def test_a_v1_cell_throttles_reads_and_writes_in_bytes_and_ios(tmp_path):
    dirs = {c: tmp_path / c for c in ("pids", "memory", "blkio")}
    for d in dirs.values():
        d.mkdir()
        (d / "cgroup.procs").touch()
    cell = cgroups.JobCgroup(cgroups.Layout(1, dirs), dirs)
    files = {}

    def write(path, value):
        files.setdefault(path.name, []).append(value)

    import runner.cgroups as C

    original, C._write = C._write, write
    try:
        assert cell.limit_io(["254:0", "7:0"], bytes_per_s=1000, ios=10) == 2
    finally:
        C._write = original
    assert files["blkio.throttle.read_bps_device"] == ["254:0 1000", "7:0 1000"]
    assert files["blkio.throttle.write_bps_device"] == ["254:0 1000", "7:0 1000"]
    assert (
        files["blkio.throttle.read_iops_device"] == files["blkio.throttle.write_iops_device"] == ["254:0 10", "7:0 10"]
    )
    no_blkio = {c: d for c, d in dirs.items() if c != "blkio"}
    assert cgroups.JobCgroup(cgroups.Layout(1, no_blkio), no_blkio).limit_io(["254:0"]) == 0


def test_a_v2_cell_writes_one_io_max_line_per_device(tmp_path):
    d = tmp_path / "slot"
    d.mkdir()
    for name in ("cgroup.procs", "io.max"):
        (d / name).touch()
    cell = cgroups.JobCgroup(cgroups.Layout(2, {"unified": d}), {"unified": d})
    assert cell.limit_io(["8:0"], bytes_per_s=1000, ios=10) == 1
    assert (d / "io.max").read_text() == "8:0 rbps=1000 wbps=1000 riops=10 wiops=10"
    (d / "io.max").unlink()  # no io controller enabled: nothing to throttle with
    assert cell.limit_io(["8:0"]) == 0
