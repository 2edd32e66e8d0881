"""Run a module (the bot) with a CPU profiler that the benchmark switches on and off by signal.

    python -m bench.profiled OUT.pstats MODULE [ARGS...]      # e.g. python -m bench.profiled /tmp/p bot run

SIGUSR1 starts profiling the main thread (where the event loop runs every handler, PTB and httpx); SIGUSR2
stops it and writes the stats to OUT.pstats (pstats format) for bench/profile_stages.py to group. The profiler
counts the thread's CPU time (time.thread_time), not wall time, so neither waiting in epoll nor being preempted
by other work on a shared machine is counted. Profiling slows every Python call, so its figures are shares of the
bot's CPU, to be scaled by an unprofiled measurement (bench/bot.py does so).
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from types import FrameType


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: python -m bench.profiled OUT.pstats MODULE [ARGS...]")
    out, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    profiler = cProfile.Profile(time.thread_time)

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
