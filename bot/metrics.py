"""What the bot counts for Prometheus: every metric in one registry per bot, so a test starts at zero."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from telegram._utils.defaultvalue import DEFAULT_NONE
from telegram._utils.types import ODVInput
from telegram.request import RequestData

from bot.transport import AiohttpRequest
from runner.client import RunnerLoad

# Seconds: a tap is answered in milliseconds; a graded run waits for the runner, up to its wall limit.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0)


class Metrics:
    """The bot's metrics; ``exposition()`` is the body of GET /metrics."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        registry = self.registry = CollectorRegistry()
        self.updates = Counter(
            "coursebot_updates", "Updates received from Telegram, by kind.", ["kind"], registry=registry
        )
        self.handler_seconds = Histogram(
            "coursebot_handler_seconds",
            "Time a handler took for an update, by handler.",
            ["handler"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter("coursebot_update_errors", "Updates whose handling failed.", registry=registry)
        self.api_calls = Counter(
            "coursebot_bot_api_calls", "Calls to the Bot API, by method.", ["method"], registry=registry
        )
        self.api_flood_waits = Counter(
            "coursebot_bot_api_flood_waits", "Bot API answers 429 Too Many Requests.", registry=registry
        )
        self.api_retries = Counter(
            "coursebot_bot_api_retries", "Bot API calls sent again after a 429 was waited out.", registry=registry
        )
        self.jobs = Counter(
            "coursebot_runner_jobs",
            "Learners' code runs by outcome: the runner's status (ok, error, timeout, cpu_limit, memory_limit, "
            "output_limit, killed) or failed when the runner itself failed.",
            ["outcome"],
            registry=registry,
        )
        self.job_seconds = Histogram(
            "coursebot_runner_job_seconds",
            "Time from sending code to the runner to its result.",
            buckets=JOB_BUCKETS,
            registry=registry,
        )
        self.rejections = Counter(
            "coursebot_runner_rejections",
            "Runs refused: busy (the runner's queue was full) or running (the learner's last run had not ended).",
            ["reason"],
            registry=registry,
        )
        self.queue_depth = Gauge("coursebot_runner_queue_depth", "Jobs waiting in the runner.", registry=registry)
        self.busy_slots = Gauge("coursebot_runner_busy_slots", "Jobs running in the runner.", registry=registry)
        self._last_api_success: float | None = None

    def api_answered(self) -> None:
        """Note that the Bot API just answered a call."""
        self._last_api_success = self.clock()

    def seconds_since_api_answered(self) -> float | None:
        """Seconds since the Bot API last answered, or None if it never has."""
        return None if self._last_api_success is None else self.clock() - self._last_api_success

    def runner_load(self, load: RunnerLoad) -> None:
        """Take the runner's own figures: jobs running and waiting."""
        self.busy_slots.set(load.running)
        self.queue_depth.set(load.waiting)

    def exposition(self) -> bytes:
        """Return every metric in Prometheus' text format."""
        return generate_latest(self.registry)


class MeasuredRequest(AiohttpRequest):
    """The bot's HTTP transport (bot.transport), counting every Bot API call by method, each 429, and noting each
    answer."""

    def __init__(self, metrics: Metrics, **options: Any) -> None:
        super().__init__(**options)
        self._metrics = metrics

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = DEFAULT_NONE,
        write_timeout: ODVInput[float] = DEFAULT_NONE,
        connect_timeout: ODVInput[float] = DEFAULT_NONE,
        pool_timeout: ODVInput[float] = DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        """Send the request as PTB does; count it once it is answered (a network failure raises first)."""
        self._metrics.api_calls.labels(url.rsplit("/", 1)[-1]).inc()
        status, payload = await super().do_request(
            url, method, request_data, read_timeout, write_timeout, connect_timeout, pool_timeout
        )
        self._metrics.api_answered()
        if status == 429:
            self._metrics.api_flood_waits.inc()
        return status, payload
