"""The coursebot command line, run as a real process: `python -m bot ...` from the project folder."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.changes import SlideShown
from bot.cli import main
from bot.course.sources import legacy_digest
from bot.library.load import load_valid
from bot.storage.db import Database
from tests.conftest import course_content
from tests.outcomes import stored

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
PARTIAL_RU = ROOT / "tests" / "fixtures" / "partial" / "ru"
LOCALES = ROOT / "locales"
PROBLEM_LINE = re.compile(r"^.+:\d+: .+$")


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without anything coursebot reads, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSEBOT_", "TELEGRAM_"))}
    env.update(extra)
    return env


def cli(*args: str, command: list[str] | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(command or [sys.executable, "-m", "bot"]), *args],
        cwd=ROOT,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def in_process(monkeypatch, capsys):
    """Run bot.cli.main in this process, as `coursebot ARGS` from the project folder; return (code, out, err).

    Cheaper than a subprocess; used where the process boundary itself is not what is tested.
    """
    for name in list(os.environ):
        if name.startswith(("COURSEBOT_", "TELEGRAM_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(ROOT)

    def run(*args: str, **env: str) -> tuple[int, str, str]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")  # English only: a test adds the translation it is about
    return target


def line_of(path: Path, needle: str, *, after: str | None = None) -> int:
    """Return the first line containing ``needle``, at or after the first line containing ``after``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if after in line)
    return next(n for n, line in enumerate(lines[start:], start + 1) if needle in line)


# lint


def test_lint_of_the_real_lessons_exits_zero_with_a_summary_and_the_coverage_of_each_language():
    result = cli("lint", "lessons", "--strict")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ok: 4 lessons, 53 slides, 12 questions, 12 drills"
    assert lines[1].startswith("translation coverage")
    coverage = [line for line in lines[2:] if not line.startswith("warning: ")]
    shipped = sorted(p.parent.parent.name for p in (ROOT / "locales").glob("*/LC_MESSAGES/messages.po"))
    assert [line.split()[0] for line in coverage] == [language for language in shipped if language != "en"]
    for line in coverage:
        assert re.fullmatch(
            r"  \S+ +slides 53/53 \(100%\), questions 12/12 \(100%\), exercises 4/4 \(100%\), drills 12/12 \(100%\), "
            r"lesson texts 14/14 \(100%\), UI messages (\d+)/\1 \(100%\), out of date 0",
            line,
        ), line
    assert lines[2 + len(coverage) :] == [], "no warning: every line of code shown fits a phone's 36 columns"
    assert result.stderr == ""


def test_strict_lint_refuses_code_wider_than_a_phone_and_a_translation_without_a_glossary(tmp_path, in_process):
    lessons = tmp_path / "lessons"
    shutil.copytree(LESSONS, lessons)  # every language complete and current: only what is changed below counts
    starter = lessons / "ja" / "01-requires-grad.yaml"
    starter.write_text(
        starter.read_text(encoding="utf-8").replace("# グラフから切り離したy\n", "# グラフから切り離したyにしておく\n"),
        encoding="utf-8",
    )
    code, out, err = in_process("lint", str(lessons))
    assert code == 0 and "code line 5 is 40 columns wide; a phone shows 36 before it wraps it" in out
    code, out, err = in_process("lint", str(lessons), "--strict")
    assert code == 2 and err == "--strict: code lines wider than a phone's 36 columns\n"
    shutil.copy(LESSONS / "ja" / "01-requires-grad.yaml", starter)
    (lessons / "ja" / "glossary.yaml").unlink()
    code, out, err = in_process("lint", str(lessons), "--strict")
    assert code == 2 and err == "--strict: a translation has no glossary\n"
    assert f"warning: {lessons / 'ja'}: no glossary.yaml" in out


def _coverage_line(stdout: str, language: str) -> str:
    return next(line for line in stdout.splitlines() if line.split()[:1] == [language])


def test_lint_reports_a_partial_translation_unstamped_then_current_then_stale(lessons, in_process):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    translation = lessons / "ru" / "03-grad.yaml"
    code, out, _ = in_process("lint", str(lessons))
    assert code == 0
    assert "slides 6/53 (11%), questions 1/12 (8%), exercises 0/4 (0%)" in _coverage_line(out, "ru")
    assert (
        f"warning: {translation}: 9 translated parts have no source stamp; run `coursebot lint --stamp {translation}`"
        in out
    )

    before = translation.read_text(encoding="utf-8")
    code, out, _ = in_process("lint", str(lessons), "--stamp", str(lessons / "ru"))
    assert code == 0
    assert f"stamped {translation}: 9 parts" in out
    after = translation.read_text(encoding="utf-8")
    assert after.startswith(before.rstrip("\n") + "\n\nsources:")  # the translator's text is untouched
    assert "    text: 'You saw in lesson 2 that `backward()` **adds** into `.grad`." in after  # the English kept
    code, out, _ = in_process("lint", str(lessons))
    assert "out of date 0" in _coverage_line(out, "ru") and f"warning: {translation}" not in out

    english = lessons / "en" / "03-grad.yaml"
    english.write_text(
        english.read_text(encoding="utf-8").replace(
            "leave the sum of their gradients.",
            "leave their gradients, summed.",
        ),
        encoding="utf-8",
    )
    code, out, err = in_process("lint", str(lessons), "--strict")
    assert code == 2 and "incomplete or out of date" in err
    line = line_of(translation, "- id: gradients-add-up")
    lines = out.splitlines()
    stale = [i for i, text in enumerate(lines) if text.startswith(f"warning: {translation}")]
    assert len(stale) == 1
    change = "    text: … use the same weight leave [-the sum of-] their [-gradients.-] {+gradients, summed.+}"
    assert lines[stale[0] : stale[0] + 2] == [
        f"warning: {translation}:{line}: 'slide/gradients-add-up' is stale: its English changed since it was "
        f"translated; update it, then run `coursebot lint --stamp {translation} --part slide/gradients-add-up`",
        change,
    ]

    code, out, _ = in_process("lint", str(lessons), "--stamp", str(translation), "--part", "slide/gradients-add-up")
    assert code == 0
    assert out.splitlines() == [f"stamped {translation}: 1 part", "  now current: 'slide/gradients-add-up'", change]
    assert translation.read_text(encoding="utf-8").count("sources:") == 1  # the block is replaced, not repeated
    code, out, _ = in_process("lint", str(lessons), "--strict")
    assert "out of date 0" in _coverage_line(out, "ru")


def test_a_legacy_hash_stamp_still_counts_and_when_stale_says_how_to_see_the_change(lessons, in_process):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    translation = lessons / "ru" / "03-grad.yaml"
    in_process("lint", str(lessons), "--stamp", str(translation))
    text = translation.read_text(encoding="utf-8")
    # What an older coursebot wrote: one hash per part (of the current English title, and of an old summary).
    current = legacy_digest({"title": load_valid(lessons, LOCALES).english.lessons[2].title})
    translation.write_text(
        text[: text.index("\nsources:")] + f'\nsources:\n  title: "{current}"\n  summary: "00000000"\n',
        encoding="utf-8",
    )
    code, out, _ = in_process("lint", str(lessons))
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith(f"warning: {translation}")] == [
        f"warning: {translation}:{line_of(translation, 'summary:')}: 'summary' is stale: its English changed since "
        "it was translated (the stamp is a hash, so what changed is unknown: run `coursebot lint --upgrade-stamps`); "
        f"update it, then run `coursebot lint --stamp {translation} --part summary`",
        f"warning: {translation}: 7 translated parts have no source stamp; run `coursebot lint --stamp {translation}`",
    ]


def test_a_malformed_source_stamp_is_a_problem_at_its_line(lessons, in_process):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    translation = lessons / "ru" / "03-grad.yaml"
    with translation.open("a", encoding="utf-8") as f:
        f.write("sources:\n  recap: 1234abcd\n  slide/grad-attribute: not-a-hash\n")
    code, out, _ = in_process("lint", str(lessons))
    assert code == 2
    assert out.splitlines() == [
        f"{translation}:{line_of(translation, '  recap: 1234abcd')}: sources: 'recap' is not translated in this file; "
        f"run `coursebot lint --stamp {translation}`",
        f"{translation}:{line_of(translation, 'not-a-hash')}: sources: 'slide/grad-attribute' must hold the English "
        f"it was translated from (or a legacy hash of 8 hex digits); run `coursebot lint --stamp {translation} "
        "--part slide/grad-attribute`",
    ]


def test_stamping_a_part_the_file_does_not_translate_is_refused_and_changes_nothing(lessons, in_process):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    translation = lessons / "ru" / "03-grad.yaml"
    before = translation.read_text(encoding="utf-8")
    code, _, err = in_process("lint", str(lessons), "--stamp", str(translation), "--part", "slide/loop-order")
    assert code == 2 and "does not translate 'slide/loop-order'" in err
    code, _, err = in_process("lint", str(lessons), "--stamp", str(lessons / "ru"), "--part", "recap")
    assert code == 2 and "give one translation file to --stamp" in err
    assert translation.read_text(encoding="utf-8") == before


def test_stamping_a_file_that_is_not_a_translation_is_refused(lessons, in_process):
    code, _, err = in_process("lint", str(lessons), "--stamp", str(lessons / "en" / "03-grad.yaml"))
    assert code == 2
    assert "is not a translation file" in err


def test_lint_of_a_broken_copy_prints_file_line_message_and_exits_two(lessons):
    path = lessons / "en" / "03-grad.yaml"
    text = path.read_text(encoding="utf-8")
    text = text.replace("  - id: accumulate\n", "  - id: Why\n")
    text = text.replace("        text: tensor(12.)\n        correct: true\n", "        text: tensor(12.)\n")
    path.write_text(text, encoding="utf-8")
    result = cli("lint", str(lessons))
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert all(PROBLEM_LINE.match(line) for line in lines), lines
    options = line_of(path, "options:", after="- id: second-pass")
    assert sorted(lines) == sorted(
        [
            f"{path}:{line_of(path, '- id: Why')}: slide id 'Why' must be lowercase words joined by '-'",
            f"{path}:{options}: question 'second-pass': exactly one option must have 'correct: true', none is",
        ]
    )
    assert result.stderr == "2 problems found\n"


def test_lint_of_a_folder_without_lessons_exits_two(tmp_path, in_process):
    code, out, _ = in_process("lint", str(tmp_path))
    assert code == 2
    assert out == f"{tmp_path / 'en' / 'course.yaml'}:1: missing: the English course file is required\n"


# run with a bad token (without one, the web chat opens: tests/test_web_cli.py)


def test_starting_with_a_malformed_token_prints_one_line_without_the_token():
    result = cli("run", TELEGRAM_BOT_TOKEN="oops-this-is-no-token")
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "TELEGRAM_BOT_TOKEN" in lines[0]
    assert "oops-this-is-no-token" not in result.stderr


# preview


def test_preview_prints_every_slide_poll_and_the_recap_of_a_lesson():
    result = cli("preview", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for title in ("Gradients live in .grad", "Adding up on purpose", "Read gradients to debug"):
        assert title in out
    assert "1 / 14" in out and "14 / 14" in out
    assert "Lesson 3 of 4: Reading and zeroing .grad" in out
    assert "Poll 1: What does optimizer.zero_grad() do by default in PyTorch 2.x?" in out
    assert "  ✓ Sets each parameter's .grad to None" in out
    assert "Recap" in out and "Clear them once per optimizer step with" in out
    # Each drill untouched (its lines as buttons), then solved the author's way, with its explanation.
    assert "🧩 Drill 1 of 3: put the lines in order" in out and "[ ⇥ opt.step() ]" in out
    assert "🧩 Drill 3 of 3: predict the output" in out and "It prints:\n-1.2" in out
    assert ".grad grows to 2, 4, 6 because nothing clears it" in out
    assert "<b>" not in out and "<code>" not in out  # shown as the learner reads it, not as HTML


def test_preview_by_lesson_id_is_the_same_as_by_number(in_process):
    by_id, by_number = in_process("preview", "grad"), in_process("preview", "3")
    assert by_id == by_number
    assert by_id[0] == 0 and "Gradients live in .grad" in by_id[1]


def test_preview_of_an_unknown_lesson_names_the_lessons_and_exits_two(in_process):
    code, out, err = in_process("preview", "9")
    assert code == 2
    assert out == ""
    assert "no lesson '9'" in err
    assert "3 (grad)" in err


def test_preview_in_a_partial_translation_shows_translated_and_fallback_slides(lessons, in_process):
    shutil.copytree(PARTIAL_RU, lessons / "ru")
    code, out, _ = in_process("preview", "3", "--language", "ru", "--dir", str(lessons))
    assert code == 0
    assert "Градиенты хранятся в .grad" in out
    assert "Adding up on purpose" in out  # untranslated, shown in English
    assert "Эта часть ещё не переведена" in out  # the notice, from the Russian catalog


def test_preview_reads_the_lessons_folder_from_coursebot_lessons(lessons, in_process):
    path = lessons / "en" / "03-grad.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace("Adding up on purpose", "Summing on purpose"), encoding="utf-8"
    )
    code, out, _ = in_process("preview", "3", COURSEBOT_LESSONS=str(lessons))
    assert code == 0
    assert "Summing on purpose" in out


# db backup


async def test_db_backup_copies_the_database_named_by_coursebot_db(tmp_path):
    source = tmp_path / "data" / "coursebot.sqlite3"
    database = await Database.open(source)
    await database.learner(42, 4242, "en")
    assert await stored(database, 42, SlideShown("grad", "retain-grad", "retain-grad", last=False))
    await database.close()
    target = tmp_path / "backups" / "copy.sqlite3"
    result = cli("db", "backup", str(target), COURSEBOT_DB=str(source))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"backed up {source} to {target}\n"
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT user_id, chat_id FROM learners").fetchall() == [(42, 4242)]
        assert conn.execute("SELECT lesson_id, furthest_slide_id FROM lesson_progress").fetchall() == [
            ("grad", "retain-grad")
        ]
    conn.close()


def test_db_backup_without_a_database_is_one_line_and_fails(tmp_path, in_process):
    target = tmp_path / "copy.sqlite3"
    code, _, err = in_process("db", "backup", str(target), COURSEBOT_DB=str(tmp_path / "missing.sqlite3"))
    assert code == 1
    assert err.count("\n") == 1 and "COURSEBOT_DB" in err
    assert not target.exists()


def test_lint_run_without_a_runner_says_so_in_one_line(in_process):
    code, out, err = in_process("lint", "lessons", "--run", "--no-cache", COURSEBOT_RUNNER_URL="off")
    assert code == 1 and out == ""
    assert err == "coursebot: lint --run needs the runner, and COURSEBOT_RUNNER_URL is off\n"


# links


async def test_links_prints_every_lessons_link_for_the_bot_telegram_names(standin):
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "links",
        cwd=ROOT,
        env=clean_env(TELEGRAM_BOT_TOKEN=standin.token, TELEGRAM_API_BASE_URL=standin.api_base_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    course = course_content().english
    lines = out.decode().splitlines()
    assert lines == [
        *(
            f"{lesson.number}. {lesson.id}: https://t.me/{standin.bot_user['username']}?start={lesson.id}"
            for lesson in course.lessons
        ),
        f"review: https://t.me/{standin.bot_user['username']}?start=review",
    ]


def test_links_without_a_token_says_so_in_one_line():
    result = cli("links")
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "TELEGRAM_BOT_TOKEN is not set" in line
