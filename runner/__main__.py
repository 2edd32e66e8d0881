"""Command line: ``python -m runner exec ...`` and ``python -m runner serve ...``.

python -m runner exec [--json] [SETTINGS] FILE...
    Each file is a separate job, all through one warm pool; one result per
    file, in order.  Exit status 0 when every job ended "ok", 1 otherwise,
    2 when the runner itself failed (or a setting is invalid).
python -m runner serve (--socket PATH | --listen tcp://127.0.0.1:PORT) [SETTINGS]
    The service for the bot.  Prints one "READY {...}" line when it has
    proved its isolation (or "ERROR Type: message" and exits 2); with
    COURSEBOT_LOG_FORMAT=json that line, as every log line, is a JSON object.

Both read the runner's settings from the environment (RUNNER_*, see
config.py); a flag given here overrides its variable (``--help`` lists them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from . import config as settings
from . import logs
from .backend import Backend
from .config import RunnerConfig, parse_address
from .docker_backend import DockerBackend, DockerConfig
from .errors import InvalidRequest, RunnerConfigError, RunnerError
from .pool import Pool, PoolConfig
from .result import RunResult, Status
from .service import scrub_environment, serve_forever


def make_backend(config: RunnerConfig) -> Backend:
    """The backend ``config`` chooses, configured from it (not started)."""
    if config.backend == "docker":
        return DockerBackend(DockerConfig.from_config(config))
    return Pool(PoolConfig.from_config(config))


async def _serve(config: RunnerConfig, addresses: list[str], watch_stdin: bool, health: str | None = None) -> int:
    scrub_environment()
    backend = make_backend(config)
    json_lines = config.log_format == "json"
    try:
        await backend.start()
    except RunnerError as e:
        print(logs.failed(type(e).__name__, str(e), json_lines), flush=True)
        return 2
    await serve_forever(
        backend, addresses, watch_stdin=watch_stdin, token=config.token, json_lines=json_lines, health=health
    )
    return 0


async def _exec(config: RunnerConfig, files: list[tuple[str, str]], as_json: bool) -> int:
    backend = make_backend(config)
    try:
        await backend.start()
    except RunnerError as e:
        print(f"runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    # As many jobs in flight as the backend has slots, the rest wait here: any number of files queue
    # without ever meeting RunnerBusy, and the results are printed in the files' order.
    room = asyncio.Semaphore(config.pool_size)

    async def run(source: str) -> RunResult:
        async with room:
            return await backend.run(source)

    tasks = [asyncio.ensure_future(run(src)) for _, src in files]
    try:
        all_ok = True
        for (path, _), task in zip(files, tasks, strict=True):
            try:
                res = await task
            except RunnerError as e:
                print(f"runner: {path}: {type(e).__name__}: {e}", file=sys.stderr)
                return 2
            all_ok &= res.status is Status.OK
            if as_json:
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
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await backend.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runner",
        description="Run learners' snippets in the sandbox. Settings come from RUNNER_* variables; flags override.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, what in (("exec", "run files as jobs, one result each"), ("serve", "serve the bot on a socket")):
        sp = sub.add_parser(name, help=what, description=f"{what.capitalize()}. {p.description}")
        settings.add_flags(sp)
        sp.add_argument("-v", "--verbose", action="store_true")
        if name == "exec":
            sp.add_argument("--json", action="store_true", help="one JSON object per line")
            sp.add_argument("files", nargs="+")
        else:
            sp.add_argument("--socket", metavar="PATH", help="Unix socket path to listen on")
            sp.add_argument(
                "--listen", metavar="URL", help="tcp://HOST:PORT; every connection must present RUNNER_TOKEN"
            )
            sp.add_argument(
                "--health",
                metavar="URL",
                help="tcp://HOST:PORT answering a balancer's health checks (GET /healthz, plain HTTP, no token)",
            )
            sp.add_argument(
                "--watch-stdin", action="store_true", help="exit when stdin closes (used by the embedded client)"
            )
    return p


def _read_files(paths: list[str]) -> list[tuple[str, str]]:
    """(path, source) of each file; RunnerConfigError naming the first one that cannot be read."""
    files = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                files.append((path, f.read()))
        except OSError as e:
            raise RunnerConfigError(f"cannot read {path}: {e.strerror}") from None
    return files


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Until the settings are read (and should they be what is wrong), the variable as it stands decides.
    json_lines = os.environ.get("COURSEBOT_LOG_FORMAT", "").strip().lower() == "json"
    logs.configure(args.verbose, json_lines)
    try:
        config = settings.from_flags(RunnerConfig.from_env(os.environ), args)
        json_lines = config.log_format == "json"
        logs.configure(args.verbose, json_lines)
        if args.cmd == "exec":
            files = _read_files(args.files)
        else:
            socket = args.socket and (args.socket if "://" in args.socket else os.path.abspath(args.socket))
            addresses = [str(parse_address(socket, "--socket"))] if socket else []
            addresses += [str(parse_address(args.listen, "--listen"))] if args.listen else []
            if not addresses:
                raise InvalidRequest("give --socket PATH or --listen tcp://HOST:PORT")
            health = str(parse_address(args.health, "--health")) if args.health else None
            if health is not None and not health.startswith("tcp://"):
                raise RunnerConfigError(f"--health must be tcp://HOST:PORT, got {args.health!r}")
            if args.listen and config.token is None:
                # Checked before torch is imported: any local user can reach a TCP port.
                raise RunnerConfigError(
                    "--listen needs RUNNER_TOKEN, the secret every TCP connection must present "
                    "(e.g. RUNNER_TOKEN=$(openssl rand -hex 32)); or serve on a Unix socket with --socket PATH"
                )
    except RunnerError as e:
        if args.cmd == "serve":
            print(logs.failed(type(e).__name__, str(e), json_lines), flush=True)
        else:
            print(f"runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "exec":
            return asyncio.run(_exec(config, files, args.json))
        return asyncio.run(_serve(config, addresses, args.watch_stdin, health))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
