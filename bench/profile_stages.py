"""Group a bot profile (bench/profiled.py) by stage: PTB, our handlers, SQLite, rendering, HTTP, and the rest.

    python -m bench.profile_stages OUT.pstats [--top 25]      # prints the stages, then the costliest functions

Each function's own time (tottime) goes to the stage of the module it is written in. Time in functions that
belong to no stage (C builtins such as ``str.join`` or ``socket.send``, and generic standard-library helpers such
as contextlib or enum) goes to whoever called them, split as the profile split their calls, up the chain of
callers until one belongs to a stage.
"""

from __future__ import annotations

import argparse
import json
import pstats
from collections import Counter
from typing import Any

Func = tuple[str, int, str]  # (file, line, function) as pstats names it

# Checked in order: the first fragment found in a function's file names its stage.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "http",
        (
            "/telegram/request/",
            "/bot/transport.py",
            "/httpx/",
            "/httpcore/",
            "/h11/",
            "/anyio/",
            "/sniffio/",
            "/idna/",
            "/aiohttp/",
            "/yarl/",
            "/multidict/",
            "/aiosignal/",
            "/frozenlist/",
        ),
    ),
    ("ptb", ("/telegram/",)),
    ("sqlite", ("/aiosqlite/", "/bot/storage/", "/sqlite3/")),
    (
        "rendering",
        ("/bot/render.py", "/bot/telegram_rules/", "/bot/safehtml.py", "/bot/lessontext.py", "/bot/bidi.py", "/html/"),
    ),
    ("i18n", ("/bot/i18n.py", "/gettext.py", "/babel/")),
    ("logging", ("/logging/", "/bot/logs.py")),
    ("metrics", ("/prometheus_client/", "/bot/metrics.py")),
    ("json", ("/json/",)),
    # Our own wiring around PTB: ordering, the inbox, the update's scope, the rate limiter.
    ("bot_plumbing", ("/bot/updates.py", "/bot/context.py", "/bot/ratelimit.py", "/bot/app.py", "/bot/library/")),
    ("handlers", ("/bot/",)),
    ("event_loop", ("/asyncio/", "/selectors.py", "/socket.py", "/ssl.py")),
)

# Builtins whose own time belongs to a stage wherever they are called from.
BUILTIN_STAGES: tuple[tuple[str, str], ...] = (
    ("_json", "json"),
    ("select.epoll", "event_loop"),
    ("sqlite3", "sqlite"),
)


def stage_of(func: Func) -> str | None:
    """The stage a function's own time belongs to, or None: to its callers."""
    file, _, name = func
    if file == "~":
        return next((stage for fragment, stage in BUILTIN_STAGES if fragment in name), None)
    return next((stage for stage, fragments in STAGES for f in fragments if f in file), None)


def by_stage(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per stage (see the module docstring for who pays for builtins)."""
    raw: dict[Func, Any] = stats.stats  # type: ignore[attr-defined]
    shares: dict[Func, Counter[str]] = {}

    def share(func: Func, seen: frozenset[Func]) -> Counter[str]:
        """What fraction of ``func``'s own time each stage is charged."""
        if func in shares:
            return shares[func]
        stage = stage_of(func)
        result: Counter[str] = Counter()
        if stage is not None:
            result[stage] = 1.0
        else:
            callers = raw[func][4] if func in raw else {}
            total = sum(c[2] for c in callers.values())
            if not callers or total <= 0 or func in seen:
                result["other"] = 1.0
            else:
                for caller, figures in callers.items():
                    weight = figures[2] / total
                    for s, f in share(caller, seen | {func}).items():
                        result[s] += weight * f
        shares[func] = result
        return result

    totals: Counter[str] = Counter()
    for func, (_, _, tottime, _, _) in raw.items():
        for stage, fraction in share(func, frozenset()).items():
            totals[stage] += tottime * fraction
    return dict(totals)


def top(stats: pstats.Stats, n: int) -> list[dict[str, Any]]:
    """The ``n`` functions with the most own time, with their stage."""
    raw: dict[Func, Any] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:n]
    return [
        {
            "function": f"{file.rsplit('/site-packages/', 1)[-1].rsplit('/lib/python3.11/', 1)[-1]}:{line}({name})",
            "stage": stage_of((file, line, name)) or "callers",
            "calls": figures[1],
            "own_s": round(figures[2], 4),
        }
        for (file, line, name), figures in rows
    ]


def summary(path: str, updates: int, *, top_n: int = 15) -> dict[str, Any]:
    """Each stage's CPU per update (ms, as profiled) and share, and the costliest functions."""
    stats = pstats.Stats(path)
    seconds = by_stage(stats)
    total = sum(seconds.values())
    ordered = sorted(seconds.items(), key=lambda item: item[1], reverse=True)
    return {
        "profiled_updates": updates,
        "profiled_cpu_ms_per_update": round(total / updates * 1000, 3) if updates else None,
        "share": {stage: round(s / total, 4) for stage, s in ordered} if total else {},
        "top_functions": top(stats, top_n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--updates", type=int, default=0, help="updates handled while profiling (for ms per update)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(json.dumps(summary(args.path, args.updates, top_n=args.top), indent=1))


if __name__ == "__main__":
    main()
