"""Upgrade legacy stamps (a hash of the English) to stamps that keep the English, recovered from the git history.

A legacy stamp says only "translated from the English whose hash was 5c1e0a9b". Every earlier English course in
git (and the one on disk) is parsed, each part's hash computed the legacy way, and a stamp whose hash is found
becomes the English it names, so lint can show what changed since. A hash found nowhere stays as it is.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.authoring import stamps
from bot.course.model import Content, Stamp
from bot.course.parsing import parse
from bot.course.sources import legacy_digest
from bot.errors import CoursebotError
from bot.i18n import DEFAULT_LANGUAGE

# Which English a legacy hash names: (lesson id or "" for course.yaml, part, hash) -> the English fields.
Known = dict[tuple[str, str, str], stamps.Snapshot]


class HistoryError(CoursebotError):
    """The git history of the lessons cannot be read."""


def _git(root: Path, *args: str) -> bytes:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True, timeout=60).stdout
    except FileNotFoundError:
        raise HistoryError("git is not installed; the English of legacy stamps is recovered from its history") from None
    except subprocess.CalledProcessError as exc:
        raise HistoryError(f"git {args[0]} failed in {root}: {exc.stderr.decode(errors='replace').strip()}") from None


def _english_versions(lessons_dir: Path) -> Iterator[Path]:
    """Yield lessons folders holding each version of the English course: the one on disk, then each in git."""
    english = (lessons_dir / DEFAULT_LANGUAGE).resolve()
    yield lessons_dir
    top = Path(_git(english, "rev-parse", "--show-toplevel").decode().strip())
    where = english.relative_to(top).as_posix()
    for commit in _git(top, "log", "--format=%H", "--", where).decode().split():
        archive = _git(top, "archive", "--format=tar", commit, where)
        with tempfile.TemporaryDirectory(prefix="coursebot-english-") as folder:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(folder, filter="data")
            copy = Path(folder) / "lessons-then"  # a lessons folder with this version's English only
            copy.mkdir()
            (Path(folder) / where).rename(copy / DEFAULT_LANGUAGE)
            yield copy


def known_english(lessons_dir: Path) -> Known:
    """Return every English part any version of the course had, by lesson, part and legacy hash."""
    known: Known = {}
    for version in _english_versions(Path(lessons_dir)):
        content, _ = parse(version)
        if content is None:
            continue  # a version today's parser cannot read: its parts are found in others, or not at all
        course = content.english
        for part, english in stamps.course_parts(course).items():
            known.setdefault(("", part, legacy_digest(english)), english)
        for lesson in course.lessons:
            for part, english in stamps.lesson_parts(lesson).items():
                known.setdefault((lesson.id, part, legacy_digest(english)), english)
    return known


@dataclass(frozen=True)
class Upgrade:
    """What upgrading one translation file did."""

    path: str
    upgraded: int  # legacy stamps now holding their English
    unknown: list[str]  # parts whose hash no version of the English has: left as they were


def upgrade(lessons_dir: Path, content: Content) -> list[Upgrade]:
    """Rewrite every translation file's legacy stamps with the English they name, wherever it can be found."""
    known = known_english(lessons_dir)
    done = []
    for course in content.translations.values():
        files = [("", course.translation)] + [(lesson.id, lesson.translation) for lesson in course.lessons]
        for lesson_id, translation in files:
            if translation is None or all(s.english is not None for s in translation.stamps.values()):
                continue
            new: dict[str, Stamp] = {}
            unknown = []
            for part, stamp in translation.stamps.items():
                english = known.get((lesson_id, part, stamp.digest)) if stamp.english is None else stamp.english
                if english is None:
                    unknown.append(part)
                    new[part] = stamp
                else:
                    new[part] = Stamp(english, stamp.digest)
            stamps.write(Path(translation.path), new)
            upgraded = sum(s.english is None for s in translation.stamps.values()) - len(unknown)
            done.append(Upgrade(translation.path, upgraded, unknown))
    return done
