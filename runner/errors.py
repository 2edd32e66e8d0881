"""Failures of the runner machinery itself.

A learner's snippet that crashes, loops or floods is *data* (a RunResult with
a status); only problems with the runner raise, and only these exceptions.
"""

from __future__ import annotations


class RunnerError(Exception):
    """Base class: the runner could not do what was asked."""


class SandboxUnavailable(RunnerError):
    """The host cannot provide the required isolation; the runner refuses to run code."""


class RunnerBusy(RunnerError):
    """Every slot is taken and the queue is full; try again later."""


class ProtocolError(RunnerError):
    """A peer sent a malformed, oversized or wrong-version frame."""


class RunnerClosed(RunnerError):
    """The runner is shut down or the connection to it was lost."""


class JobLost(RunnerClosed):
    """The runner went away after a request was sent (it restarted or died): no result; sending it again is safe."""


class JobFailed(RunnerError):
    """The sandbox machinery failed while running a job (not the learner's code)."""


class InvalidRequest(RunnerError):
    """A job request is malformed (bad limits, bad checks, code too large)."""


class Unauthorized(RunnerError):
    """The runner refused the connection: it did not present the runner's token (RUNNER_TOKEN)."""


class RunnerConfigError(RunnerError):
    """A setting of the runner (a RUNNER_* variable, a flag, an address) is invalid; the message says how to fix it."""


# Names usable across the wire: the service sends the class name, the client
# re-raises the matching class (unknown names become a plain RunnerError).
BY_NAME: dict[str, type[RunnerError]] = {
    cls.__name__: cls
    for cls in (
        RunnerError,
        SandboxUnavailable,
        RunnerBusy,
        ProtocolError,
        RunnerClosed,
        JobLost,
        JobFailed,
        InvalidRequest,
        Unauthorized,
        RunnerConfigError,
    )
}
