"""`coursebot stats`: the report over learning events, figure by figure, on a real SQLite file.

The events are written with the columns of the events table (contract 3) by bench.events, which the bench
uses too; each test writes events whose figures it can work out by hand, and checks the report says exactly that.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import events
from bot.cli import main
from bot.stats import html, query, report, text
from tests.conftest import course_content

ROOT = Path(__file__).resolve().parent.parent
CONTENT = course_content()
LESSON = CONTENT.english.lessons[0]  # requires-grad: 13 slides, 3 questions, an exercise with 4 checks
SLIDES = [slide.id for slide in LESSON.slides]
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


class Log:
    """Events written by hand, one call per event, time moving on by a minute each."""

    def __init__(self) -> None:
        self.rows: list[events.Row] = []
        self.clock = START

    def add(
        self,
        user: int,
        kind: str,
        item: str | None = None,
        *,
        lesson: str = LESSON.id,
        language: str = "en",
        option: str | None = None,
        verdict: str | None = None,
        check: str | None = None,
        seconds: float | None = None,
        at: datetime | None = None,
    ) -> None:
        self.clock += timedelta(minutes=1)
        when = events.stamp(at or self.clock)
        self.rows.append((user, when, language, lesson, kind, item, option, verdict, check, seconds))

    def read(self, slides: list[tuple[int, int, list[float]]]) -> None:
        """Each (user, slides read, seconds on each slide before the last read) reads slides in order."""
        for user, count, spent in slides:
            for index in range(count):
                self.add(user, "slide", SLIDES[index], seconds=spent[index - 1] if index else None)

    def save(self, path: Path, indexes: bool = True) -> Path:
        with sqlite3.connect(path) as conn:
            events.create_table(conn)
            events.write(conn, iter(self.rows))
            if indexes:
                conn.executescript(query.INDEXES)
        conn.close()
        return path


def figures_of(path: Path, **filters: object) -> report.Report:
    chosen = query.Filters(**filters)  # type: ignore[arg-type]
    return report.build(CONTENT, query.read(path, chosen), chosen)


def lesson_of(result: report.Report, lesson_id: str = LESSON.id) -> report.LessonStats:
    return next(lesson for lesson in result.lessons if lesson.id == lesson_id)


def test_the_funnel_counts_learners_per_slide_and_where_they_stop(tmp_path):
    log = Log()
    log.read([(1, 13, [10.0] * 12), (2, 13, [20.0] * 12), (3, 5, [30.0] * 4), (4, 2, [40.0])])
    log.add(1, "back", SLIDES[11])  # a back and the slide shown again: still one learner there
    log.add(1, "slide", SLIDES[12], seconds=5.0)
    for user in (1, 2):
        log.add(user, "done")
    lesson = lesson_of(figures_of(log.save(tmp_path / "e.sqlite3")))
    assert [s.reached for s in lesson.slides] == [4, 4, 3, 3, 3] + [2] * 8
    assert [s.stopped for s in lesson.slides] == [0, 1, 0, 0, 1] + [0] * 8
    assert (lesson.started, lesson.finished, lesson.stopped_at_quiz) == (4, 2, 0)


def test_a_slides_time_is_the_median_of_the_seconds_the_next_slide_carries(tmp_path):
    log = Log()
    # Time on slide 1 travels on slide 2's events: 10, 20, 30 and 100 seconds (median 25); slide 2's on slide 3's.
    log.read([(1, 3, [10.0, 1.0]), (2, 3, [20.0, 2.0]), (3, 3, [30.0, 3.0]), (4, 2, [100.0])])
    lesson = lesson_of(figures_of(log.save(tmp_path / "e.sqlite3")))
    assert [s.median_seconds for s in lesson.slides[:3]] == [25.0, 2.0, None]
    assert lesson.slides[-1].median_seconds is None  # the last slide: the Quick Check follows it


def test_questions_count_first_tries_and_flag_too_easy_too_hard_and_unpicked_options(tmp_path):
    easy, hard, spread = (q.id for q in LESSON.quiz)
    right = {q.id: report.option_id(q, q.correct) for q in LESSON.quiz}
    # The wrong options below are the second and third of each question (both questions' first option is right).
    assert LESSON.quiz[1].correct == LESSON.quiz[2].correct == 0
    second, third = LESSON.quiz[2].option_ids[1:3]
    log = Log()
    for user in range(1, 41):
        log.add(user, "answer", easy, option=right[easy], verdict="right")
        # 10 of 40 right on the first try (25%): too hard. A retake that gets it right changes no first try.
        first = right[hard] if user <= 10 else LESSON.quiz[1].option_ids[1]
        log.add(user, "answer", hard, option=first, verdict="right" if user <= 10 else "wrong")
        if user > 10:
            log.add(user, "answer", hard, option=right[hard], verdict="right")
        # 60% right, the wrong ones split between two options: the third wrong option is never chosen.
        pick = right[spread] if user <= 24 else (second if user <= 32 else third)
        log.add(user, "answer", spread, option=pick, verdict="right" if user <= 24 else "wrong")
    questions = {q.id: q for q in lesson_of(figures_of(log.save(tmp_path / "e.sqlite3"))).questions}
    assert (questions[easy].learners, questions[easy].right_first) == (40, 40)
    assert questions[easy].flags[0] == "too easy: 100% right on the first try"
    assert (questions[hard].right_first, questions[hard].flags[0]) == (10, "too hard: 25% right on the first try")
    assert [o.chosen for o in questions[spread].options] == [24, 8, 8, 0]
    assert questions[spread].flags == (f"a wrong option nobody picks: {LESSON.quiz[2].options[3]!r}",)


def test_a_question_few_learners_answered_raises_no_flag(tmp_path):
    log = Log()
    question = LESSON.quiz[0]
    for user in range(1, report.MIN_LEARNERS):
        log.add(user, "answer", question.id, option=report.option_id(question, question.correct), verdict="right")
    stats = lesson_of(figures_of(log.save(tmp_path / "e.sqlite3"))).questions[0]
    assert stats.learners == report.MIN_LEARNERS - 1 and stats.flags == ()


def test_the_exercise_shows_first_try_passes_median_attempts_the_most_failed_check_and_hints(tmp_path):
    log = Log()
    log.add(1, "run", "exercise", verdict="passed")
    log.add(2, "run", "exercise", verdict="failed", check="d-value")
    log.add(2, "hint", "1")
    log.add(2, "run", "exercise", verdict="passed")
    for verdict, check in (("failed", "d-value"), ("error", None), ("failed", "w-tracked")):
        log.add(3, "run", "exercise", verdict=verdict, check=check)
    log.add(3, "hint", "1")
    log.add(3, "hint", "2")
    log.add(3, "hint", "1")  # shown again: still one learner
    log.add(3, "leave")
    exercise = lesson_of(figures_of(log.save(tmp_path / "e.sqlite3"))).exercise
    assert exercise is not None
    assert (exercise.learners, exercise.passed_first, exercise.passed) == (3, 1, 2)
    assert exercise.median_attempts == 2
    assert (exercise.most_failed, exercise.failed_runs) == (("d-value", 2), 3)
    assert exercise.hints == (2, 1, 0)


def test_drills_count_learners_who_answered_were_right_at_once_and_solved(tmp_path):
    first, second, third = LESSON.drills
    log = Log()
    log.add(1, "drill", first.id, verdict="right")
    log.add(2, "drill", first.id, verdict="wrong")
    log.add(2, "drill", first.id, verdict="right")
    log.add(2, "drill", first.id, verdict="right")  # practised again: still one learner, solved once
    log.add(3, "drill", first.id, verdict="wrong")
    log.add(1, "drill", second.id, verdict="wrong")
    result = figures_of(log.save(tmp_path / "e.sqlite3"))
    drills = {drill.id: drill for drill in lesson_of(result).drills}
    assert (drills[first.id].learners, drills[first.id].right_first, drills[first.id].solved) == (3, 1, 2)
    assert (drills[second.id].learners, drills[second.id].right_first, drills[second.id].solved) == (1, 0, 0)
    assert drills[third.id].learners == 0
    shown = text.render(result)
    assert f"{first.id} ({first.kind}): 3; 33%; 67%" in shown
    assert "<h3>Drills</h3>" in html.render(result)


def test_filters_keep_only_the_lessons_moments_and_language_asked_for(tmp_path):
    log = Log()
    log.add(1, "slide", SLIDES[0], at=START - timedelta(days=30))
    log.add(2, "slide", SLIDES[0], language="ru")
    log.add(3, "slide", SLIDES[0])
    log.add(3, "slide", CONTENT.english.lessons[1].slides[0].id, lesson=CONTENT.english.lessons[1].id)
    path = log.save(tmp_path / "e.sqlite3")
    assert lesson_of(figures_of(path)).started == 3
    assert lesson_of(figures_of(path, since=query.moment("2026-11-01"))).started == 2
    assert lesson_of(figures_of(path, language="ru")).started == 1
    only = figures_of(path, lessons=(CONTENT.english.lessons[1].id,))
    assert [lesson.id for lesson in only.lessons] == [CONTENT.english.lessons[1].id]
    assert only.lessons[0].started == 1


def test_a_moment_is_stored_as_utc_milliseconds_and_nonsense_is_refused():
    assert query.moment("2026-11-01") == "2026-11-01T00:00:00.000Z"
    assert query.moment("2026-11-01T12:30:00.1234+02:00") == "2026-11-01T10:30:00.123Z"
    with pytest.raises(ValueError):
        query.moment("last tuesday")


def test_without_the_reports_indexes_the_figures_are_the_same_and_the_report_says_it_reads_slowly(tmp_path):
    log = Log()
    log.read([(1, 4, [5.0, 6.0, 7.0]), (2, 2, [9.0])])
    with_indexes = figures_of(log.save(tmp_path / "with.sqlite3"))
    without = figures_of(log.save(tmp_path / "without.sqlite3", indexes=False))
    assert with_indexes.lessons == without.lessons
    assert without.missing_indexes == query.INDEX_NAMES and with_indexes.missing_indexes == ()
    assert "lacks the report's indexes" in text.render(without)


def test_a_simulated_course_gives_a_funnel_that_only_narrows(tmp_path):
    path = tmp_path / "e.sqlite3"
    with sqlite3.connect(path) as conn:
        events.create_table(conn)
        events.write(conn, events.simulate(CONTENT.english, 400, seed=3))
        conn.executescript(query.INDEXES)
    conn.close()
    result = figures_of(path)
    for lesson in result.lessons:
        reached = [s.reached for s in lesson.slides]
        assert reached == sorted(reached, reverse=True) and reached[0] > 0
        assert lesson.finished + lesson.stopped_at_quiz == reached[-1]
        assert all(q.learners == lesson.finished for q in lesson.questions)


# --- the command line --------------------------------------------------------------------------------------------


@pytest.fixture
def events_db(tmp_path) -> Path:
    log = Log()
    log.read([(1, 13, [10.0] * 12), (2, 3, [20.0, 30.0])])
    question = LESSON.quiz[0]
    log.add(1, "answer", question.id, option=report.option_id(question, question.correct), verdict="right")
    log.add(1, "done")
    return log.save(tmp_path / "events.sqlite3")


def test_stats_prints_each_lesson_and_writes_a_self_contained_page(events_db, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COURSEBOT_DB", str(events_db))
    page = tmp_path / "report.html"
    assert main(["stats", "--lesson", "1", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PyTorch autograd: where learners struggle (lessons requires-grad; all time; every language)")
    assert "  2 started, 1 finished (50%)" in out
    assert f"   3 {SLIDES[2]:<30}        2        1  50%      10 s  <- most stop here\n" in out
    # One learner answered: a count says "learner", never "1 learners" (issue 20).
    assert "right on the first try (1 learner)\n" in out and "1 learners" not in out
    assert out.endswith(f"wrote the report as a page to {page}\n")
    document = page.read_text(encoding="utf-8")
    assert document.count('<svg class="funnel"') == 1 and document.count('class="option ') == 12
    assert "http" not in document and "<script" not in document and "src=" not in document
    assert "of 1 learner. " in document and "1 learners" not in document


def test_stats_escapes_course_text_in_the_page():
    lesson = lesson_of(report.build(CONTENT, query.Figures(), query.Filters()))
    hostile = report.Report("<b>Course</b> & co", query.Filters(), (lesson,), ())
    assert "&lt;b&gt;Course&lt;/b&gt; &amp; co" in html.render(hostile) and "<b>" not in html.render(hostile)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lesson", "9"], "coursebot: no lesson '9'; the lessons are 1 (requires-grad), 2 (backward), 3 (grad), "),
        (["--language", "xx"], "coursebot: no course language 'xx'; the languages are ar, de, en, es, fr, ja, "),
        (["--since", "yesterday"], "coursebot: --since 'yesterday' is not a date like 2026-11-01"),
    ],
)
def test_stats_refuses_a_bad_filter_in_one_line(events_db, args, message, capsys, monkeypatch):
    monkeypatch.setenv("COURSEBOT_DB", str(events_db))
    assert main(["stats", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.splitlines()) == 1


def test_stats_without_events_says_so_in_one_line(tmp_path, capsys):
    assert main(["stats", "--db", str(tmp_path / "none.sqlite3")]) == 1
    assert capsys.readouterr().err == (
        f"coursebot: there is no database at {tmp_path / 'none.sqlite3'} (COURSEBOT_DB): nothing has been recorded "
        "there\n"
    )
    sqlite3.connect(tmp_path / "empty.sqlite3").close()
    assert main(["stats", "--db", str(tmp_path / "empty.sqlite3")]) == 1
    assert "has no learning events table" in capsys.readouterr().err
    (tmp_path / "junk.sqlite3").write_bytes(b"this is not a database at all" * 100)
    assert main(["stats", "--db", str(tmp_path / "junk.sqlite3")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("coursebot: cannot ") and len(err.splitlines()) == 1
