"""bot.authoring.stamps and stamp_history: stamps keep the English they were made from, show what changed as a word
diff, and legacy hash stamps are upgraded from the git history."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.authoring import stamps
from bot.authoring.worddiff import word_diff
from bot.cli import main
from bot.course.sources import legacy_digest
from bot.library.load import load_valid
from tests.conftest import course_content

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
LOCALES = ROOT / "locales"


# --- word diff -------------------------------------------------------------------------------------------------------


def test_a_word_diff_marks_what_went_and_what_came_with_a_little_context():
    old = "one two three four five six seven eight nine ten eleven twelve"
    new = "one two three four five six SEVEN eight nine ten eleven twelve"
    assert word_diff(old, new) == "… two three four five six [-seven-] {+SEVEN+} eight nine ten eleven twelve"
    assert word_diff(old, new, context=2) == "… five six [-seven-] {+SEVEN+} eight nine …"


def test_a_word_diff_of_equal_texts_is_empty_and_spacing_is_no_change():
    assert word_diff("a  b\nc", "a b c") == ""


def test_a_word_diff_shows_additions_and_removals_at_either_end():
    assert word_diff("a b", "z a b c") == "{+z+} a b {+c+}"
    assert word_diff("z a b c", "a b") == "[-z-] a b [-c-]"


# --- snapshots and the legacy hash ------------------------------------------------------------------------------------


def test_the_legacy_hash_is_the_one_older_files_hold():
    # Hashes as shipped before stamps kept the English (lessons/ru/01-requires-grad.yaml, December 2026).
    assert legacy_digest({"title": "requires_grad and the computational graph"}) == "ed4612c7"
    slide = {
        "title": "What autograd does",
        "text": "Autograd works out derivatives for you. You only mark the tensors you want gradients for with "
        "`requires_grad=True`.",
        "code": "import torch\nw = torch.tensor(3.0, requires_grad=True)\n"
        "print(w)  # -> tensor(3., requires_grad=True)",
    }
    assert legacy_digest(slide) == "314b00a8"


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS, target)
    return target


def test_every_shipped_part_stamped_reads_back_as_current(lessons, capsys):
    # Whatever the English holds (code blocks, quotes, colons, non-ASCII), the block written reads back equal.
    assert (
        main(
            [
                "lint",
                str(lessons),
                "--stamp",
                *(str(p) for p in sorted(lessons.iterdir()) if p.is_dir() and p.name != "en"),
            ]
        )
        == 0
    )
    content = load_valid(lessons, LOCALES)
    for course in content.translations.values():
        assert stamps.outdated(course.translation, stamps.course_parts(content.english)) == []
        for english, lesson in zip(content.english.lessons, course.lessons, strict=True):
            assert stamps.outdated(lesson.translation, stamps.lesson_parts(english)) == []
            assert lesson.translation is not None
            assert all(s.english is not None for s in lesson.translation.stamps.values())
    capsys.readouterr()


# --- upgrading legacy stamps from the git history --------------------------------------------------------------------


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
    )


def test_upgrading_finds_the_english_a_legacy_hash_names_in_the_history_so_lint_shows_the_change(
    tmp_path, capsys, monkeypatch
):
    repo = tmp_path / "course"
    lessons = repo / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    shutil.copytree(LESSONS / "ru", lessons / "ru")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the course as translated")
    content = load_valid(lessons, LOCALES)
    translation = lessons / "ru" / "02-backward.yaml"
    then = stamps.lesson_parts(content.english.lessons[1])
    # Written the old way: a hash per part.
    text = translation.read_text(encoding="utf-8")
    legacy = "".join(f'  {part}: "{legacy_digest(then[part])}"\n' for part in ("title", "recap"))
    translation.write_text(text[: text.index("\nsources:")] + "\nsources:\n" + legacy, encoding="utf-8")
    english = lessons / "en" / "02-backward.yaml"
    english.write_text(english.read_text(encoding="utf-8").replace("non-scalar outputs", "vector outputs"))
    git(repo, "commit", "-q", "-am", "English: vector outputs")
    monkeypatch.chdir(repo)

    assert main(["lint", "lessons", "--upgrade-stamps"]) == 0
    out = capsys.readouterr().out
    assert "upgraded lessons/ru/02-backward.yaml: 2 stamps" in out.splitlines()
    assert main(["lint", "lessons"]) == 0
    out = capsys.readouterr().out.splitlines()
    stale = next(
        i for i, line in enumerate(out) if "lessons/ru/02-backward.yaml" in line and "'recap' is stale" in line
    )
    assert out[stale + 1].startswith("    recap: …") and "[-non-scalar-] {+vector+} outputs" in out[stale + 1]


def test_a_hash_no_version_of_the_english_has_is_left_as_it_is_and_said_so(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "course"
    lessons = repo / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    (lessons / "ru").mkdir()
    (lessons / "ru" / "course.yaml").write_text('title: Autograd\nsources:\n  title: "0badf00d"\n', encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a course")
    monkeypatch.chdir(repo)
    assert main(["lint", "lessons", "--upgrade-stamps"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "upgraded lessons/ru/course.yaml: 0 stamps",
        "  no English version has the hash of 'title': left as hashes; check those parts against the English and "
        "stamp them",
    ]
    assert '  title: "0badf00d"' in (lessons / "ru" / "course.yaml").read_text(encoding="utf-8")


def test_upgrading_outside_git_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    lessons = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    (lessons / "ru").mkdir()
    (lessons / "ru" / "course.yaml").write_text('title: Autograd\nsources:\n  title: "0badf00d"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert main(["lint", "lessons", "--upgrade-stamps"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("coursebot: git rev-parse failed in") and len(err.splitlines()) == 1


def test_every_shipped_stamp_keeps_the_english_it_was_made_from():
    content = course_content()
    hashes_only = [
        f"{translation.path}: {part}"
        for course in content.translations.values()
        for translation in (course.translation, *(lesson.translation for lesson in course.lessons))
        if translation is not None
        for part, stamp in translation.stamps.items()
        if stamp.english is None
    ]
    assert hashes_only == [], "run `coursebot lint lessons --upgrade-stamps`"
