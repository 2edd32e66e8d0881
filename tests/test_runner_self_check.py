"""What the isolation probe's findings say is broken (pure); the probes themselves run in test_runner_pool."""

import errno
from pathlib import Path

from runner.self_check import probe_failures

GOOD_FACTS = {
    "inet": "PermissionError",
    "inet6": "OSError",
    "loopback": "PermissionError",
    "unix": "FileNotFoundError",
    "planted": False,
    "root": [".pyenv"],
    "status": {"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000", "CapBnd": "0000000000000000"},
    "pids": ["2"],
    "proc": ["self", "thread-self"],
    "pts": ["ptmx"],
    "personality": [-1, errno.ENOSYS],
    "env": [],
}


def test_each_broken_isolation_fact_is_named_once():
    assert probe_failures(GOOD_FACTS, {".pyenv"}) == []
    for key, bad, words in [
        ("inet", "ALLOWED", "IP socket"),
        ("loopback", "ALLOWED", "loopback"),
        ("unix", "ALLOWED", "Unix socket"),
        ("planted", True, "planted"),
        ("root", [".pyenv", ".ssh"], "/root"),
        ("pids", ["1", "2", "77"], "pid"),
        ("proc", ["cmdline", "self", "thread-self"], "/proc"),
        ("pts", ["0", "ptmx"], "terminals"),
        ("personality", [0, 0], "allow list"),
        ("env", ["TELEGRAM_BOT_TOKEN"], "environment"),
    ]:
        facts = {**GOOD_FACTS, key: bad}
        msgs = probe_failures(facts, {".pyenv"})
        assert len(msgs) == 1 and words in msgs[0], (key, msgs)
    facts = {**GOOD_FACTS, "status": {**GOOD_FACTS["status"], "Seccomp": "0"}}
    assert "seccomp" in probe_failures(facts, {".pyenv"})[0]
    facts = {**GOOD_FACTS, "status": {**GOOD_FACTS["status"], "CapEff": "00000000a80425fb"}}
    assert "capabilities" in probe_failures(facts, {".pyenv"})[0]


def test_the_probe_is_planted_beside_the_runner_only_where_the_sandbox_does_not_bind_on_purpose():
    from runner.self_check import plant_beside

    # A checkout: the runner's folder is not bound (only the package itself is, elsewhere).
    assert plant_beside("/srv/coursebot/runner", ["/usr", "/srv/coursebot/.venv"]) == Path("/srv/coursebot")
    # Installed in the venv's site-packages beside torch: bound by design, so planting there would be a false alarm.
    site = "/opt/venv/lib/python3.11/site-packages"
    assert plant_beside(f"{site}/runner", ["/usr", "/opt/venv"]) is None
    assert plant_beside(f"{site}/runner", ["/usr", site]) is None
    assert plant_beside("/opt/venv-app/runner", ["/opt/venv"]) == Path("/opt/venv-app")
