"""Command line: ``python -m runner exec ...`` and ``python -m runner serve ...``.

python -m runner exec [--json] FILE...
    Each file is a separate job, all through one warm pool; one result per
    file, in order.  Exit status 0 when every job ended "ok", 1 otherwise,
    2 when the runner itself failed.
python -m runner serve [--socket PATH | --listen tcp://127.0.0.1:PORT] [--pool N]
    The service for the bot.  Prints one "READY {...}" line when it has
    proved its isolation (or "ERROR Type: message" and exits 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from .errors import RunnerError


def _backend(args):
    if args.backend == "docker":
        from .docker_backend import DockerBackend, DockerConfig

        return DockerBackend(DockerConfig.from_env(pool_size=args.pool))
    from .pool import Pool, PoolConfig

    return Pool(PoolConfig.from_env(size=args.pool, queue=args.queue, startup_timeout_s=args.startup_timeout))


async def _serve(args) -> int:
    from .service import scrub_environment, serve_forever

    scrub_environment()
    addresses = []
    if args.socket:
        addresses.append(f"unix://{args.socket}" if args.socket.startswith("/") else args.socket)
    if args.listen:
        addresses.append(args.listen)
    if not addresses:
        print("ERROR InvalidRequest: give --socket PATH or --listen tcp://HOST:PORT", flush=True)
        return 2
    backend = _backend(args)
    try:
        await backend.start()
    except RunnerError as e:
        print(f"ERROR {type(e).__name__}: {e}", flush=True)
        return 2
    await serve_forever(backend, addresses, watch_stdin=args.watch_stdin)
    return 0


async def _exec(args) -> int:
    backend = _backend(args)
    try:
        await backend.start()
    except RunnerError as e:
        print(f"runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        sources = []
        for path in args.files:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                sources.append(f.read())
        tasks = [asyncio.ensure_future(backend.run(src)) for src in sources]
        all_ok = True
        for path, task in zip(args.files, tasks, strict=False):
            try:
                res = await task
            except RunnerError as e:
                print(f"runner: {path}: {type(e).__name__}: {e}", file=sys.stderr)
                return 2
            all_ok &= res.status == "ok"
            if args.json:
                print(json.dumps(res.public_dict(), ensure_ascii=False), flush=True)
            else:
                how = f"exit {res.exit_code}" if res.signal is None else f"signal {res.signal}"
                print(
                    f"==> {path}: {res.status} ({how}, {res.duration_ms:.1f} ms"
                    f"{', truncated' if res.truncated else ''})"
                )
                if res.stdout:
                    sys.stdout.write(res.stdout if res.stdout.endswith("\n") else res.stdout + "\n")
                if res.stderr:
                    sys.stdout.write("--- stderr ---\n")
                    sys.stdout.write(res.stderr if res.stderr.endswith("\n") else res.stderr + "\n")
                sys.stdout.flush()
        return 0 if all_ok else 1
    finally:
        await backend.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runner")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("exec", "serve"):
        sp = sub.add_parser(name)
        sp.add_argument("--pool", type=int, default=None, help="jobs at once (default 2)")
        sp.add_argument("--queue", type=int, default=None, help="jobs allowed to wait (default 32)")
        sp.add_argument("--backend", choices=("sandbox", "docker"), default="sandbox")
        sp.add_argument("--startup-timeout", type=float, default=None)
        sp.add_argument("-v", "--verbose", action="store_true")
        if name == "exec":
            sp.add_argument("--json", action="store_true", help="one JSON object per line")
            sp.add_argument("files", nargs="+")
        else:
            sp.add_argument("--socket", help="Unix socket path to listen on")
            sp.add_argument("--listen", help="tcp://127.0.0.1:PORT (no authentication: keep it local)")
            sp.add_argument(
                "--watch-stdin", action="store_true", help="exit when stdin closes (used by the embedded client)"
            )
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if args.pool is None:
        args.pool = None
    coro = _exec(args) if args.cmd == "exec" else _serve(args)
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
