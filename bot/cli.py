"""The coursebot command line: run, web, reload, lint, preview, db backup."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from bot.config import Config
from bot.content.model import Content, Translation
from bot.errors import ConfigError, ContentError, CoursebotError
from bot.i18n import DEFAULT_LANGUAGE

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


def _run(args: argparse.Namespace) -> int:
    """Serve the course on Telegram, or in the web chat when no token is set."""
    config = Config.from_env()
    return _serve(config, web=not config.token)


def _web(args: argparse.Namespace) -> int:
    """Serve the course in the web chat, token or not."""
    return _serve(Config.from_env(), web=True)


def _serve(config: Config, *, web: bool) -> int:
    from bot import app, logs

    logs.configure(config.log_level, config.token, json_lines=config.log_format == "json")
    try:
        if web:
            from bot.webchat import local

            asyncio.run(local.serve(config))
        else:
            asyncio.run(app.serve(config))
    except ContentError as exc:
        print(f"coursebot: the lessons in {config.lessons_dir} are invalid:", file=sys.stderr)
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:
        line = app.describe_startup_failure(config, exc)
        if line is None:
            if isinstance(exc, CoursebotError):
                line = str(exc)
            else:
                raise
        print(f"coursebot: {line}", file=sys.stderr)
        return EXIT_FAILURE
    return 0


def _reload(args: argparse.Namespace) -> int:
    """Ask the running bot to reload its lessons and catalogs; print what it answered."""
    from bot import control

    config = Config.from_env()
    accepted, lines = control.request(config.control_path)
    for line in lines:
        print(line, file=sys.stdout if accepted else sys.stderr)
    if not accepted:
        print("coursebot: the reload was refused; the bot goes on with the lessons it had", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _health(args: argparse.Namespace) -> int:
    """Ask the running bot's /healthz (COURSEBOT_MONITORING); exit 0 when healthy. Docker's HEALTHCHECK runs it."""
    import urllib.error
    import urllib.request

    config = Config.from_env()
    if config.monitoring is None:
        print("coursebot: COURSEBOT_MONITORING is off, so there is no /healthz to ask", file=sys.stderr)
        return EXIT_BAD_INPUT
    host, port = config.monitoring
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            print(response.read().decode().strip())
            return 0
    except urllib.error.HTTPError as exc:
        print(exc.read().decode().strip())
    except OSError as exc:
        print(f"coursebot: no answer from {url}: {exc}", file=sys.stderr)
    return EXIT_FAILURE


def _lint(args: argparse.Namespace) -> int:
    from bot.content import coverage
    from bot.content.load import lint
    from bot.i18n import I18n

    config = Config.from_env()
    i18n = I18n(config.locales_dir)
    content, problems = lint(Path(args.dir), i18n)
    for problem in problems:
        print(problem)
    if problems or content is None:
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.stamp:
        return _stamp(content, [Path(p) for p in args.stamp])
    lessons = content.english.lessons
    slides = sum(len(lesson.slides) for lesson in lessons)
    questions = sum(len(lesson.quiz) for lesson in lessons)
    drills = sum(len(lesson.drills) for lesson in lessons)
    print(f"ok: {len(lessons)} lessons, {slides} slides, {questions} questions, {drills} drills")
    languages = sorted((set(content.translations) | set(i18n.languages)) - {DEFAULT_LANGUAGE})
    reports = [
        coverage.coverage(content, language, config.locales_dir / language / "LC_MESSAGES" / "messages.po")
        for language in languages
    ]
    for line in coverage.report_lines(reports):
        print(line)
    for line in coverage.warning_lines(reports):
        print(f"warning: {line}")
    if args.strict and not all(report.complete for report in reports):
        print("--strict: some translations are incomplete or out of date", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _stamp(content: Content, paths: list[Path]) -> int:
    """Stamp each translation file named (or every one in a folder named) with the current English hashes."""
    from bot.content import stamps

    files: dict[Path, tuple[Translation, dict[str, str]]] = {}
    for course in content.translations.values():
        if course.translation is not None:
            files[Path(course.translation.path).resolve()] = (course.translation, stamps.course_parts(content.english))
        for source, lesson in zip(content.english.lessons, course.lessons, strict=True):
            if lesson.translation is not None:
                files[Path(lesson.translation.path).resolve()] = (lesson.translation, stamps.lesson_parts(source))
    wanted: list[Path] = []
    for path in paths:
        resolved = path.resolve()
        matches = [f for f in files if f == resolved or resolved in f.parents]
        if not matches:
            print(
                f"coursebot: {path} is not a translation file (or folder of them) under the lessons folder",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        wanted += sorted(matches)
    for file in dict.fromkeys(wanted):
        translation, current = files[file]
        count = stamps.stamp(file, translation, current)
        print(f"stamped {translation.path}: {count} part{'s' if count != 1 else ''}")
    return 0


def _preview(args: argparse.Namespace) -> int:
    from bot.preview import preview

    config = Config.from_env()
    print(preview(Path(args.dir or config.lessons_dir), config.locales_dir, args.lesson, args.language))
    return 0


def _backup(args: argparse.Namespace) -> int:
    from bot.storage.db import backup

    config = Config.from_env()
    backup(config.db_path, Path(args.path))
    print(f"backed up {config.db_path} to {args.path}")
    return 0


def parser() -> argparse.ArgumentParser:
    """Return the argument parser of the coursebot command."""
    top = argparse.ArgumentParser(
        prog="coursebot", description="A Telegram bot that teaches short programming courses."
    )
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "run", help="start the bot: on Telegram with TELEGRAM_BOT_TOKEN, else in the web chat"
    ).set_defaults(func=_run)
    commands.add_parser(
        "web", help="start the bot in the web chat (a local preview), even when TELEGRAM_BOT_TOKEN is set"
    ).set_defaults(func=_web)
    commands.add_parser(
        "reload", help="make the running bot reload its lessons and catalogs; prints file:line: message if refused"
    ).set_defaults(func=_reload)
    commands.add_parser(
        "health", help="ask the running bot's /healthz (COURSEBOT_MONITORING); exit 0 when healthy"
    ).set_defaults(func=_health)
    lint = commands.add_parser("lint", help="check lesson files; prints file:line: message per problem")
    lint.add_argument("dir", nargs="?", default="lessons", help="the lessons folder (default: lessons)")
    lint.add_argument(
        "--stamp",
        nargs="+",
        metavar="FILE",
        help="record that these translation files (or folders) match the current English",
    )
    lint.add_argument(
        "--strict",
        action="store_true",
        help="fail when a translation is incomplete or out of date, not only when content is invalid",
    )
    lint.set_defaults(func=_lint)
    preview = commands.add_parser("preview", help="print a lesson as the learner reads it, without Telegram")
    preview.add_argument("lesson", help="lesson id or number, e.g. 1 or requires-grad")
    preview.add_argument(
        "--language", "-l", default=DEFAULT_LANGUAGE, help=f"language code (default: {DEFAULT_LANGUAGE})"
    )
    preview.add_argument("--dir", default=None, help="the lessons folder (default: COURSEBOT_LESSONS or lessons)")
    preview.set_defaults(func=_preview)
    db = commands.add_parser("db", help="database maintenance").add_subparsers(dest="db_command", required=True)
    backup = db.add_parser("backup", help="copy the live database (COURSEBOT_DB) to PATH, safely while the bot runs")
    backup.add_argument("path")
    backup.set_defaults(func=_backup)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the coursebot command line."""
    args = parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        return command(args)
    except CoursebotError as exc:
        print(f"coursebot: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(exc, (ContentError, ConfigError)) else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
