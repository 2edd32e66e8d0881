"""What the isolation probe's findings say is broken (pure); the probes themselves run in test_runner_pool."""

import errno

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
