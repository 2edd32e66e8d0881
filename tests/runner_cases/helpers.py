"""Shared helpers for the runner tests (a module, not a conftest: the runner
owns only tests/test_runner*.py and this folder)."""

from __future__ import annotations

import os

import pytest

from runner import cgroups, sandbox
from runner.errors import SandboxUnavailable


def host_cannot_sandbox() -> str | None:
    """A reason to skip, only when the host truly cannot sandbox at all."""
    problems = sandbox.host_problems(sandbox.SandboxConfig.from_env())
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


async def start_pool(**kw):
    """A started Pool; a failing self-check FAILS the test (never skips)."""
    from runner.pool import Pool, PoolConfig

    require_sandbox()
    cfg = PoolConfig.from_env(**kw)
    pool = Pool(cfg)
    await pool.start()
    return pool


def repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
