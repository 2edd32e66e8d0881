"""Shared helpers for the runner tests (a module, not a conftest: the runner
owns only tests/test_runner*.py and this folder)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from runner import cgroups, sandbox
from runner.config import RunnerConfig
from runner.errors import SandboxUnavailable


def host_config(**settings: Any) -> RunnerConfig:
    """The runner's settings from this process's environment (as `python -m runner` reads them), with changes."""
    return dataclasses.replace(RunnerConfig.from_env(os.environ), **settings)


def host_cannot_sandbox() -> str | None:
    """A reason to skip, only when the host truly cannot sandbox at all."""
    problems = sandbox.host_problems(sandbox.SandboxConfig.from_config(host_config()))
    if problems:
        return "host cannot sandbox: " + "; ".join(problems)
    try:
        cgroups.detect()
    except SandboxUnavailable as e:
        return f"host has no usable cgroups: {e}"
    return None


def require_sandbox() -> None:
    reason = host_cannot_sandbox()
    if reason:
        pytest.skip(reason)


async def start_pool(**settings: Any):
    """A started Pool with these RunnerConfig settings; a failing self-check FAILS the test (never skips)."""
    from runner.pool import Pool, PoolConfig

    require_sandbox()
    pool = Pool(PoolConfig.from_config(host_config(**settings)))
    await pool.start()
    return pool


def repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
