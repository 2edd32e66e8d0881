"""The coursebot command line: run, web, reload, lint, preview, stats, links, db backup, db copy, webhook."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from bot.config import Config
from bot.course.model import Content, Translation
from bot.errors import ConfigError, ContentError, CoursebotError, Problem
from bot.i18n import DEFAULT_LANGUAGE

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


def _run(args: argparse.Namespace) -> int:
    """Serve the course on Telegram, or in the web chat when no token is set (unless --telegram)."""
    config = _serving_config()
    if config is None:
        return EXIT_BAD_INPUT
    if not config.token and args.telegram:
        from bot import logs

        logs.say(
            "TELEGRAM_BOT_TOKEN is not set, so there is no bot to serve on Telegram: give it the token from "
            "@BotFather (docker run -e TELEGRAM_BOT_TOKEN, or compose's .env). The web chat, a local preview, "
            "runs only when asked for: coursebot web (see the README, Docker)",
            config.log_format == "json",
        )
        return EXIT_BAD_INPUT
    return _serve(config, web=not config.token)


def _web(args: argparse.Namespace) -> int:
    """Serve the course in the web chat, token or not."""
    config = _serving_config()
    return EXIT_BAD_INPUT if config is None else _serve(config, web=True)


def _serving_config() -> Config | None:
    """The configuration, or None once the line saying why it is invalid is out (as JSON when logs are)."""
    from bot import logs

    try:
        return Config.from_env()
    except ConfigError as exc:
        logs.say(str(exc), logs.json_requested(os.environ))
        return None


def _serve(config: Config, *, web: bool) -> int:
    from bot import app, logs

    json_lines = config.log_format == "json"
    logs.configure(config.log_level, config.token, json_lines=json_lines, others=(config.webhook_secret,))
    try:
        if web:
            from bot.webchat import local

            asyncio.run(local.serve(config))
        else:
            asyncio.run(app.serve(config))
    except ContentError as exc:
        logs.say(f"the lessons in {config.lessons_dir} are invalid:\n{exc}", json_lines)
        return EXIT_BAD_INPUT
    except Exception as exc:
        line = app.describe_startup_failure(config, exc)
        if line is None:
            if isinstance(exc, CoursebotError):
                line = str(exc)
            elif json_lines:
                # Unforeseen: the traceback is for us, and in JSON logs it is one object like every line.
                logging.getLogger("coursebot").critical("coursebot stopped on an unexpected error", exc_info=exc)
                return EXIT_FAILURE
            else:
                raise
        logs.say(line, json_lines)
        return EXIT_FAILURE
    return 0


def _reload(args: argparse.Namespace) -> int:
    """Ask the running bot to reload its lessons and catalogs; print what it answered."""
    from bot import control

    config = Config.from_env()
    _as_owner_of(config.control_path.parent)
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
    from bot.authoring import coverage, glossary
    from bot.course import phone_width
    from bot.i18n import I18n
    from bot.library.load import lint

    config = Config.from_env()
    i18n = I18n(config.locales_dir)
    content, problems = lint(Path(args.dir), i18n)
    if args.stamp and content is not None:
        # Stamping a file drops its stamps of parts it no longer translates: those are no reason to refuse it.
        stamped = [Path(p).resolve() for p in args.stamp]
        problems = [p for p in problems if not _orphan_stamp_in(p, stamped)]
    missing_glossaries: list[str] = []
    if content is not None and not args.stamp and not args.upgrade_stamps:
        found, missing_glossaries = glossary.check(content, Path(args.dir))
        problems += found
    for problem in problems:
        print(problem)
    if problems or content is None:
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.stamp:
        return _stamp(content, [Path(p) for p in args.stamp], args.part)
    if args.part:
        print("coursebot: --part names the parts to --stamp; give the file with --stamp FILE", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.upgrade_stamps:
        return _upgrade_stamps(Path(args.dir), content)
    lessons = content.english.lessons
    slides = sum(len(lesson.slides) for lesson in lessons)
    questions = sum(len(lesson.quiz) for lesson in lessons)
    if args.run:
        problems = _prove(config, content, None if args.no_cache else Path(args.cache))
        for problem in problems:
            print(problem)
        if problems:
            print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found in the runner", file=sys.stderr)
            return EXIT_BAD_INPUT
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
    wide = phone_width.warnings(content)
    for problem in wide:
        print(f"warning: {problem}")
    for line in missing_glossaries:
        print(f"warning: {line}")
    if args.strict and not all(report.complete for report in reports):
        print("--strict: some translations are incomplete or out of date", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.strict and missing_glossaries:
        print("--strict: a translation has no glossary", file=sys.stderr)
        return EXIT_BAD_INPUT
    # Shipped lessons (--strict) show no code a phone wraps: wrapped Python reads wrong. While writing, a warning.
    if args.strict and wide:
        print(f"--strict: code lines wider than a phone's {phone_width.CODE_LINE_MAX} columns", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _orphan_stamp_in(problem: Problem, stamped: list[Path]) -> bool:
    """Say whether ``problem`` is a stamp left for a part no longer translated, in a file (or folder) being stamped."""
    from bot.course.parsing import ORPHAN_STAMP

    path = Path(problem.path).resolve()
    return ORPHAN_STAMP in problem.message and any(path == s or s in path.parents for s in stamped)


def _prove(config: Config, content: Content, cache_dir: Path | None) -> list[Problem]:
    """Prove every exercise and code sample in the runner the config names; print what it took."""
    from bot.app import connect_runner
    from bot.authoring import proof
    from runner.client import Runner, embedded_fingerprint

    @contextlib.asynccontextmanager
    async def open_runner() -> AsyncIterator[Runner]:
        async with connect_runner(config) as runner:
            if runner is None:
                raise proof.ProofError("lint --run needs the runner, and COURSEBOT_RUNNER_URL is off")
            yield runner

    # The embedded runner's fingerprint is known before it starts: a proof the cache holds starts none.
    expected = embedded_fingerprint(config.runner_config) if config.runner == "embedded" else None
    report = asyncio.run(proof.prove(content, open_runner, proof.ResultCache(cache_dir), expected))
    done = report.plan
    print(
        f"proved in the runner: {done.exercises} exercises (seeds {', '.join(map(str, proof.SEEDS))}), "
        f"{done.translated_starters} translated starters, {done.samples} code samples, {done.drills} drills; "
        f"{len(done.jobs)} runs, {report.cached} from the cache" + (f" in {cache_dir}" if cache_dir is not None else "")
    )
    return report.problems


def _stamp(content: Content, paths: list[Path], parts: list[str] | None) -> int:
    """Stamp each translation file named (or every one in a folder named) with the English as it is now."""
    from bot.authoring import stamps

    files: dict[Path, tuple[Translation, dict[str, stamps.Snapshot]]] = {}
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
    wanted = list(dict.fromkeys(wanted))
    if parts and len(wanted) != 1:
        print("coursebot: --part stamps parts of one file: give one translation file to --stamp", file=sys.stderr)
        return EXIT_BAD_INPUT
    for file in wanted:
        translation, current = files[file]
        try:
            accepted = stamps.stamp(file, translation, current, parts)
        except ValueError as exc:
            print(f"coursebot: {exc} (its parts: {', '.join(translation.parts)})", file=sys.stderr)
            return EXIT_BAD_INPUT
        count = len(parts) if parts else len(translation.parts)
        print(f"stamped {translation.path}: {count} part{'s' if count != 1 else ''}")
        for item in accepted:
            # The last look at what the translator has just accepted: the English change, if it is known.
            print(f"  now current: '{item.part}'" + ("" if item.stamped else " (never stamped before)"))
            for line in item.changes():
                print(f"    {line}")
    return 0


def _upgrade_stamps(lessons_dir: Path, content: Content) -> int:
    """Give every legacy stamp (a hash) the English it names, found in the git history."""
    from bot.authoring.stamp_history import upgrade

    for done in upgrade(lessons_dir, content):
        print(f"upgraded {done.path}: {done.upgraded} stamp{'s' if done.upgraded != 1 else ''}")
        if done.unknown:
            print(
                f"  no English version has the hash of {', '.join(map(repr, done.unknown))}: left as hashes; "
                "check those parts against the English and stamp them"
            )
    return 0


def _stats(args: argparse.Namespace) -> int:
    """Print where learners struggle, from the learning events in COURSEBOT_DB (and write it as HTML)."""
    from bot.library.load import load_valid
    from bot.stats import html, query, report, text
    from bot.storage.backend import is_url

    config = Config.from_env()
    # --db names a file or a postgresql:// URL, as COURSEBOT_DB does.
    target: Path | str = (args.db if is_url(args.db) else Path(args.db)) if args.db else config.database
    if isinstance(target, Path):
        _as_owner_of(target.parent)
    content = load_valid(config.lessons_dir, config.locales_dir)
    lessons = None
    if args.lesson:
        known = {key: lesson.id for lesson in content.english.lessons for key in (lesson.id, str(lesson.number))}
        unknown = [ref for ref in args.lesson if ref not in known]
        if unknown:
            listed = ", ".join(f"{lesson.number} ({lesson.id})" for lesson in content.english.lessons)
            print(f"coursebot: no lesson {unknown[0]!r}; the lessons are {listed}", file=sys.stderr)
            return EXIT_BAD_INPUT
        lessons = tuple(dict.fromkeys(known[ref] for ref in args.lesson))
    languages = sorted({DEFAULT_LANGUAGE, *content.translations})
    if args.language is not None and args.language not in languages:
        print(
            f"coursebot: no course language {args.language!r}; the languages are {', '.join(languages)}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        since = query.moment(args.since) if args.since is not None else None
    except ValueError:
        print(
            f"coursebot: --since {args.since!r} is not a date like 2026-11-01 (or a moment in ISO-8601)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    filters = query.Filters(lessons=lessons, since=since, language=args.language)
    result = report.build(content, query.read(target, filters), filters)
    print(text.render(result), end="")
    if args.html:
        Path(args.html).write_text(html.render(result), encoding="utf-8")
        print(f"wrote the report as a page to {args.html}")
    return 0


def _preview(args: argparse.Namespace) -> int:
    from bot.preview import preview

    config = Config.from_env()
    print(preview(Path(args.dir or config.lessons_dir), config.locales_dir, args.lesson, args.language))
    return 0


def _links(args: argparse.Namespace) -> int:
    """Print every lesson's link (and the review's) for the configured bot, whose username Telegram gives."""
    from telegram import Bot
    from telegram.error import TelegramError

    from bot.app import describe_startup_failure
    from bot.library.load import load_valid
    from bot.retention import deeplinks

    config = _serving_config()
    if config is None:
        return EXIT_BAD_INPUT
    if not config.token:
        print(
            "coursebot: TELEGRAM_BOT_TOKEN is not set: a link names the bot, whose username Telegram gives for its "
            "token (the one from @BotFather)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    course = load_valid(config.lessons_dir, config.locales_dir).english
    problems = deeplinks.problems(course)
    if problems:
        for problem in problems:
            print(f"coursebot: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT

    async def username() -> str:
        async with Bot(config.token, base_url=config.bot_base_url) as bot:
            return (await bot.get_me()).username or ""

    try:
        name = asyncio.run(username())
    except TelegramError as exc:
        print(f"coursebot: {describe_startup_failure(config, exc) or exc}", file=sys.stderr)
        return EXIT_FAILURE
    for lesson, link in deeplinks.course_links(name, course):
        print(f"{lesson.number}. {lesson.id}: {link}")
    print(f"review: {deeplinks.review_url(name)}")
    return 0


def _backup(args: argparse.Namespace) -> int:
    from bot.storage.db import backup

    config = Config.from_env()
    if config.db_url is not None:
        raise ConfigError("COURSEBOT_DB is a PostgreSQL database: back it up with pg_dump (README: PostgreSQL)")
    _as_owner_of(config.db_path.parent)
    backup(config.db_path, Path(args.path))
    print(f"backed up {config.db_path} to {args.path}")
    return 0


def _copy(args: argparse.Namespace) -> int:
    from bot import dbcopy
    from bot.storage.backend import redacted

    _as_owner_of(Path(args.source).parent)
    asyncio.run(dbcopy.copy(Path(args.source), args.target))
    print(f"copied {args.source} to {redacted(args.target)}; set COURSEBOT_DB to that URL and start the bot")
    return 0


def _webhook(args: argparse.Namespace) -> int:
    """The deploy step: point Telegram at the bot's webhook (set), ask about it (info), take it away (delete)."""
    from bot import webhook_deploy

    config = Config.from_env()
    if args.webhook_command == "set":
        lines = asyncio.run(
            webhook_deploy.set_webhook(
                config,
                args.url,
                secret=args.secret or config.webhook_secret,
                max_connections=args.max_connections,
                drop_pending_updates=args.drop_pending_updates,
            )
        )
    elif args.webhook_command == "info":
        lines = asyncio.run(webhook_deploy.webhook_info(config))
    else:
        lines = asyncio.run(webhook_deploy.delete_webhook(config, drop_pending_updates=args.drop_pending_updates))
    for line in lines:
        print(line)
    return 0


def _as_owner_of(folder: Path) -> None:
    """Run on as the owner of ``folder`` (the data's), when started as root and it is someone else's.

    So ``docker exec coursebot coursebot db backup ...`` (root, in a container without CAP_DAC_OVERRIDE, who
    could not even read the data) works, and what it writes stays the bot's. ConfigError, in one line, where
    root may not become that user.
    """
    if os.geteuid() != 0:
        return
    try:
        owner = folder.stat()
    except OSError:
        return  # nothing of the bot's there: the command says what is missing
    if owner.st_uid == 0:
        return
    try:
        os.setgroups([])
        os.setgid(owner.st_gid)
        os.setuid(owner.st_uid)
    except PermissionError:
        raise ConfigError(
            f"{folder} belongs to uid {owner.st_uid}, and root here cannot become that user: run this as it "
            f"(docker exec --user {owner.st_uid} ...)"
        ) from None


def parser() -> argparse.ArgumentParser:
    """Return the argument parser of the coursebot command."""
    top = argparse.ArgumentParser(
        prog="coursebot", description="A Telegram bot that teaches short programming courses."
    )
    commands = top.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start the bot: on Telegram with TELEGRAM_BOT_TOKEN, else in the web chat")
    run.add_argument(
        "--telegram",
        action="store_true",
        help="on Telegram only: without TELEGRAM_BOT_TOKEN, stop with one line (the image runs this)",
    )
    run.set_defaults(func=_run)
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
        "--part",
        action="append",
        metavar="PART",
        help="with --stamp FILE: stamp only this part ('recap', 'slide/<id>', ...); repeat it for several",
    )
    lint.add_argument(
        "--upgrade-stamps",
        action="store_true",
        help="give each legacy stamp (a hash) the English it was made from, found in the git history",
    )
    lint.add_argument(
        "--strict",
        action="store_true",
        help="fail when a translation is incomplete or out of date, not only when content is invalid",
    )
    lint.add_argument(
        "--run",
        action="store_true",
        help="also prove, in the real runner, every exercise (solution passes, starter fails, translations behave "
        "the same) and every code sample's '# -> VALUE' comments",
    )
    lint.add_argument(
        "--cache",
        default=".cache/coursebot/proofs",
        metavar="DIR",
        help="where --run keeps results by content hash (default: .cache/coursebot/proofs)",
    )
    lint.add_argument("--no-cache", action="store_true", help="run every --run job again, and keep no results")
    lint.set_defaults(func=_lint)
    preview = commands.add_parser("preview", help="print a lesson as the learner reads it, without Telegram")
    preview.add_argument("lesson", help="lesson id or number, e.g. 1 or requires-grad")
    preview.add_argument(
        "--language", "-l", default=DEFAULT_LANGUAGE, help=f"language code (default: {DEFAULT_LANGUAGE})"
    )
    preview.add_argument("--dir", default=None, help="the lessons folder (default: COURSEBOT_LESSONS or lessons)")
    preview.set_defaults(func=_preview)
    stats = commands.add_parser(
        "stats", help="where learners struggle: funnel, time per slide, questions and exercises, from COURSEBOT_DB"
    )
    stats.add_argument(
        "--lesson", action="append", metavar="LESSON", help="only this lesson (id or number); repeat for several"
    )
    stats.add_argument("--since", metavar="DATE", help="only events since this date (2026-11-01) or moment, UTC")
    stats.add_argument("--language", metavar="CODE", help="only learners reading the course in this language")
    stats.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page")
    stats.add_argument(
        "--db", metavar="PATH_OR_URL", help="the database to read: a file or postgresql://... (default: COURSEBOT_DB)"
    )
    stats.set_defaults(func=_stats)
    commands.add_parser(
        "links", help="print every lesson's link (t.me/<bot>?start=<lesson>) and the review's, for the configured bot"
    ).set_defaults(func=_links)
    db = commands.add_parser("db", help="database maintenance").add_subparsers(dest="db_command", required=True)
    backup = db.add_parser("backup", help="copy the live database (COURSEBOT_DB) to PATH, safely while the bot runs")
    backup.add_argument("path")
    backup.set_defaults(func=_backup)
    copy = db.add_parser(
        "copy",
        help="copy an SQLite database (every learner, all of it) into an empty PostgreSQL database, checked by counts",
    )
    copy.add_argument("source", metavar="SQLITE_FILE")
    copy.add_argument("target", metavar="POSTGRESQL_URL", help="postgresql://user:password@host:port/name")
    copy.set_defaults(func=_copy)
    webhook = commands.add_parser(
        "webhook", help="the deploy step of webhook mode: set, show or delete the webhook (run once, not per replica)"
    ).add_subparsers(dest="webhook_command", required=True)
    set_hook = webhook.add_parser("set", help="make Telegram send the updates to URL (HTTPS)")
    set_hook.add_argument("url", help="where Telegram posts updates, e.g. https://bot.example.org/telegram")
    set_hook.add_argument(
        "--secret", help="the secret Telegram sends with each update (default: COURSEBOT_WEBHOOK_SECRET)"
    )
    set_hook.add_argument(
        "--max-connections", type=int, metavar="N", help="connections Telegram opens at once, 1 to 100 (default 40)"
    )
    webhook.add_parser("info", help="where updates go, how many wait, Telegram's last error sending them")
    delete_hook = webhook.add_parser("delete", help="take the webhook away, so the bot can poll again")
    for sub in (set_hook, delete_hook):
        sub.add_argument("--drop-pending-updates", action="store_true", help="drop the updates waiting")
    for sub in webhook.choices.values():
        sub.set_defaults(func=_webhook)
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
