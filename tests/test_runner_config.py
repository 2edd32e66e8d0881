"""The runner's settings: read once from the environment, checked, and carried whole to the parts they configure."""

import dataclasses
import os
import re

import pytest

from runner import config as C
from runner.config import RunnerConfig, TcpAddress, UnixAddress, parse_address
from runner.docker_backend import DockerConfig
from runner.errors import RunnerConfigError, RunnerError
from runner.pool import PoolConfig
from runner.sandbox import SandboxConfig
from tests.runner_cases.helpers import repo_root

VARIABLES = {s.variable for s in C.SETTINGS}


def test_an_empty_environment_gives_the_defaults():
    assert RunnerConfig.from_env({}) == RunnerConfig()
    assert RunnerConfig.from_env(dict.fromkeys(VARIABLES, "  ")) == RunnerConfig()


@pytest.mark.parametrize(
    "variable,raw,field,value",
    [
        ("RUNNER_POOL", "3", "pool_size", 3),
        ("RUNNER_QUEUE", "0", "queue", 0),
        ("RUNNER_BACKEND", "docker", "backend", "docker"),
        ("RUNNER_BWRAP", "/opt/bin/bwrap", "bwrap", "/opt/bin/bwrap"),
        ("RUNNER_SANDBOX_UID", "70000", "sandbox_uid", 70000),
        ("RUNNER_STARTUP_TIMEOUT", " 42.5 ", "startup_timeout_s", 42.5),
        ("RUNNER_DOCKER_IMAGE", "coursebot", "docker_image", "coursebot"),
        ("DOCKER_HOST", "tcp://127.0.0.1:2375", "docker_host", "tcp://127.0.0.1:2375"),
        ("COURSEBOT_LOG_FORMAT", "JSON", "log_format", "json"),
    ],
)
def test_each_variable_sets_its_setting(variable, raw, field, value):
    assert getattr(RunnerConfig.from_env({variable: raw}), field) == value


@pytest.mark.parametrize(
    "variable,raw",
    [
        ("RUNNER_POOL", "two"),
        ("RUNNER_POOL", "0"),
        ("RUNNER_POOL", "-1"),
        ("RUNNER_POOL", "2.5"),
        ("RUNNER_QUEUE", "-3"),
        ("RUNNER_QUEUE", "1e3"),
        ("RUNNER_BACKEND", "kubernetes"),
        ("RUNNER_BWRAP", "bwrap"),
        ("RUNNER_SANDBOX_UID", "0"),
        ("RUNNER_SANDBOX_UID", "-5"),
        ("RUNNER_SANDBOX_UID", "4294967295"),
        ("RUNNER_STARTUP_TIMEOUT", "nan"),
        ("RUNNER_STARTUP_TIMEOUT", "inf"),
        ("RUNNER_STARTUP_TIMEOUT", "-1"),
        ("RUNNER_STARTUP_TIMEOUT", "0"),
        ("RUNNER_STARTUP_TIMEOUT", "soon"),
        ("RUNNER_DOCKER_IMAGE", "my image"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_variable(variable, raw):
    with pytest.raises(RunnerConfigError) as e:
        RunnerConfig.from_env({variable: raw})
    message = str(e.value)
    assert message.startswith(variable + " (") and repr(raw) in message and "\n" not in message
    assert "must be" in message and "unset it for the default" in message
    assert isinstance(e.value, RunnerError)  # one error tree: callers catch RunnerError


def test_the_constructor_checks_values_as_the_environment_does():
    with pytest.raises(RunnerConfigError, match=r"RunnerConfig\.pool_size \(RUNNER_POOL\) must be"):
        RunnerConfig(pool_size=0)
    with pytest.raises(RunnerConfigError, match="startup_timeout_s"):
        RunnerConfig(startup_timeout_s=float("nan"))
    with pytest.raises(RunnerConfigError, match="request_timeout_s"):
        RunnerConfig(request_timeout_s=-1.0)
    with pytest.raises(RunnerConfigError, match="pool_size"):
        RunnerConfig(pool_size=True)  # a bool is not a count


def test_other_variables_are_ignored():
    env = {"RUNNER_OS": "Linux", "RUNNER_TEMP": "/tmp", "TELEGRAM_BOT_TOKEN": "1:x"}  # e.g. GitHub Actions' own
    assert RunnerConfig.from_env(env) == RunnerConfig()


def every_setting_changed() -> RunnerConfig:
    return RunnerConfig.from_env(
        {
            "RUNNER_POOL": "3",
            "RUNNER_QUEUE": "5",
            "RUNNER_BACKEND": "docker",
            "RUNNER_BWRAP": "/opt/bwrap",
            "RUNNER_SANDBOX_UID": "64000",
            "RUNNER_STARTUP_TIMEOUT": "0.1",
            "RUNNER_DOCKER_IMAGE": "img:2",
            "DOCKER_HOST": "unix:///docker.sock",
            "RUNNER_TOKEN": "t" * 32,
            "COURSEBOT_LOG_FORMAT": "json",
        }
    )


def test_every_setting_differs_from_its_default_in_the_fixture_below():
    changed, default = every_setting_changed(), RunnerConfig()
    assert all(getattr(changed, s.field) != getattr(default, s.field) for s in C.SETTINGS)


def test_the_environment_a_worker_gets_gives_back_the_same_settings():
    config = every_setting_changed()
    env = config.to_env()
    assert set(env) == VARIABLES
    assert RunnerConfig.from_env(env) == config
    assert "DOCKER_HOST" not in RunnerConfig().to_env()  # unset stays unset


def test_the_pool_sandbox_and_docker_configs_carry_every_setting():
    config = every_setting_changed()
    pool = PoolConfig.from_config(config)
    assert (pool.size, pool.queue, pool.startup_timeout_s) == (3, 5, 0.1)
    assert pool.sandbox == SandboxConfig.from_config(config)
    sandbox = pool.sandbox
    assert (sandbox.bwrap, sandbox.sandbox_uid, sandbox.sandbox_gid, sandbox.python) == (
        "/opt/bwrap",
        64000,
        64000,
        config.python,
    )
    docker = DockerConfig.from_config(config)
    assert (docker.image, docker.base_url, docker.pool_size, docker.queue) == ("img:2", "unix:///docker.sock", 3, 5)


def test_bwrap_defaults_to_the_one_on_path(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert RunnerConfig.from_env({}).bwrap == str(fake)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert RunnerConfig.from_env({}).bwrap == C.FALLBACK_BWRAP


# --- addresses ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text,address",
    [
        ("unix:///run/x.sock", UnixAddress("/run/x.sock")),
        ("/run/x.sock", UnixAddress("/run/x.sock")),
        (" unix:///run/x.sock\n", UnixAddress("/run/x.sock")),
        ("tcp://127.0.0.1:9000", TcpAddress("127.0.0.1", 9000)),
        ("tcp://localhost:0", TcpAddress("localhost", 0)),
        ("tcp://[::1]:9000", TcpAddress("::1", 9000)),
        ("tcp://:9000", TcpAddress("127.0.0.1", 9000)),
    ],
)
def test_addresses_that_are_accepted(text, address):
    assert parse_address(text) == address
    assert parse_address(str(address)) == address  # str() is the canonical form


@pytest.mark.parametrize(
    "text",
    [
        "",
        "embedded",
        "relative/runner.sock",
        "unix://relative.sock",
        "http://127.0.0.1:80",
        "tcp://host",
        "tcp://host:port",
        "tcp://host:70000",
        "tcp://host:80/path",
        "tcp://user@host:80",
        "unix:///" + "x" * 200,
        "/run/x\0.sock",
    ],
)
def test_addresses_that_are_refused_in_one_line(text):
    with pytest.raises(RunnerConfigError) as e:
        parse_address(text, "COURSEBOT_RUNNER_URL")
    assert str(e.value).startswith("COURSEBOT_RUNNER_URL") and "\n" not in str(e.value).replace(repr(text), "")


# --- the documentation ----------------------------------------------------------


def test_the_readme_table_lists_every_variable_with_its_default():
    readme = open(os.path.join(repo_root(), "runner", "README.md"), encoding="utf-8").read()
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `([A-Z_]+)` \| (?:`([^`]+)`|—) \| (.+?) \|$", readme, re.M)
    }
    assert set(rows) == VARIABLES
    for s in C.SETTINGS:
        flag, default = rows[s.variable][0], rows[s.variable][1]
        assert flag == s.flag and s.default() in default, s.variable


def test_help_lists_every_setting_with_its_variable(capsys):
    from runner.__main__ import main

    for command in ("serve", "exec"):
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        for s in C.SETTINGS:
            assert (s.flag is None or s.flag in out) and s.variable in out, (command, s.variable)


def test_settings_name_real_fields():
    fields = {f.name for f in dataclasses.fields(RunnerConfig)}
    assert {s.field for s in C.SETTINGS} <= fields
    flags = [s.flag for s in C.SETTINGS if s.flag is not None]
    assert len({s.variable for s in C.SETTINGS}) == len(C.SETTINGS) and len(set(flags)) == len(flags)


def test_the_token_is_never_shown_nor_offered_on_a_command_line():
    token = "a-very-secret-token-0123456789"
    config = RunnerConfig.from_env({"RUNNER_TOKEN": token})
    assert config.token == token and token not in repr(config)
    assert all(s.flag is None for s in C.SETTINGS if s.secret)
    with pytest.raises(RunnerConfigError) as e:
        RunnerConfig.from_env({"RUNNER_TOKEN": "short-secret"})
    assert "RUNNER_TOKEN" in str(e.value) and "12 characters" in str(e.value) and "short-secret" not in str(e.value)
    with pytest.raises(RunnerConfigError) as e:
        RunnerConfig(token="tiny")
    assert "tiny" not in str(e.value)
