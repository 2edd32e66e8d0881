"""deploy/swarm/stack.yaml and its HAProxy configuration read as files, no engine: what a kernel without IPVS needs
(every service dnsrr, ports published on the node), a health check per role, secrets and nothing secret in the file,
and as many HAProxy slots as replicas. tests/test_swarm.py deploys the stack on the engine."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT

SWARM = ROOT / "deploy" / "swarm"
ROLES = {"bot", "runner", "postgres", "haproxy"}


def _stack() -> dict:
    return yaml.safe_load((SWARM / "stack.yaml").read_text(encoding="utf-8"))


def test_every_service_is_found_by_dns_and_publishes_on_its_node():
    services = _stack()["services"]
    assert set(services) == ROLES
    for name, service in services.items():
        # A virtual IP (the default, vip) and the routing mesh (ingress publishing) need IPVS.
        assert service["deploy"]["endpoint_mode"] == "dnsrr", name
        for port in service.get("ports", []):
            assert isinstance(port, dict) and port["mode"] == "host", (name, port)
    assert [p["target"] for p in services["haproxy"]["ports"]] == [8443]


def test_each_role_has_a_health_check_of_its_own():
    services = _stack()["services"]
    tests = {name: " ".join(service["healthcheck"]["test"]) for name, service in services.items()}
    assert "127.0.0.1:9464/healthz" in tests["bot"]
    assert "127.0.0.1:7001/healthz" in tests["runner"]
    assert "/dev/tcp/127.0.0.1/8404" in tests["haproxy"] and "GET /healthz" in tests["haproxy"]
    assert "pg_isready" in tests["postgres"]
    config = (SWARM / "haproxy.cfg").read_text(encoding="utf-8")
    assert re.search(r"bind :8404\n    monitor-uri /healthz\n", config)


def test_secrets_come_from_swarm_secrets_and_nothing_secret_is_in_the_file():
    stack = _stack()
    assert all(secret["external"] for secret in stack["secrets"].values())
    text = (SWARM / "stack.yaml").read_text(encoding="utf-8")
    for variable in ("TELEGRAM_BOT_TOKEN", "COURSEBOT_WEBHOOK_SECRET", "RUNNER_TOKEN", "POSTGRES_PASSWORD"):
        assert f"{variable}:" not in text, f"{variable} set in the stack's environment instead of as a secret"
    services = stack["services"]
    targets = {name: {s["target"] for s in service.get("secrets", [])} for name, service in services.items()}
    assert targets["bot"] == {"TELEGRAM_BOT_TOKEN", "COURSEBOT_WEBHOOK_SECRET", "RUNNER_TOKEN", "PGPASSWORD"}
    assert targets["runner"] == {"RUNNER_TOKEN"} and targets["postgres"] == {"POSTGRES_PASSWORD"}
    # Each role starts through secrets-env, which makes the secrets those variables.
    assert services["bot"]["command"][0] == services["runner"]["command"][0] == "secrets-env"
    assert services["postgres"]["entrypoint"][0] == "/usr/local/bin/secrets-env"


def test_secrets_env_exports_each_secret_file_as_its_variable(tmp_path):
    # The script reads /run/secrets; a copy pointed at a folder of the test's shows what it does.
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "TELEGRAM_BOT_TOKEN").write_text("123:abc\n")
    (secrets / "not-a-name").write_text("ignored")
    script = tmp_path / "secrets-env"
    script.write_text((SWARM / "secrets-env").read_text().replace("/run/secrets", str(secrets)))
    done = subprocess.run(
        ["sh", str(script), "sh", "-c", 'printf "%s|%s" "$TELEGRAM_BOT_TOKEN" "${not_a_name-unset}"'],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    assert done.stdout == "123:abc|unset"


def test_haproxy_has_a_slot_for_each_replica_and_runner_host():
    services = _stack()["services"]
    config = (SWARM / "haproxy.cfg").read_text(encoding="utf-8")
    bots = re.search(r"server-template bot (\d+) bot:8443 ", config)
    runners = re.search(r"server-template runner (\d+) runner:7000 maxconn (\d+) ", config)
    assert bots and runners, config
    assert services["bot"]["deploy"]["replicas"] == f"${{BOT_REPLICAS:-{bots.group(1)}}}"
    assert services["runner"]["deploy"]["replicas"] == int(runners.group(1))
    # Each runner host's slots, as HAProxy caps it.
    assert services["runner"]["environment"]["RUNNER_POOL"] == runners.group(2)
    assert "resolvers docker" in config and "nameserver dns 127.0.0.11:53" in config


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="needs haproxy (apt-get install -y haproxy)")
def test_haproxy_accepts_the_configuration():
    done = subprocess.run(
        ["haproxy", "-c", "-f", str(SWARM / "haproxy.cfg")], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
