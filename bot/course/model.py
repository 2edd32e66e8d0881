"""The course model: frozen dataclasses, parsed and validated once at load, trusted everywhere else."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from bot.i18n import DEFAULT_LANGUAGE
from runner.client import CHECK_KINDS as CHECK_KINDS  # re-exported for the content side
from runner.client import SOURCE_CHECK_KINDS as SOURCE_CHECK_KINDS


@dataclass(frozen=True)
class Source:
    """Where a piece of content was written: the file and line an author should open."""

    path: str
    line: int


_NOWHERE = Source("<built-in>", 0)


@dataclass(frozen=True)
class Slide:
    """One screen of a lesson: a title, a sentence or two, and optional code."""

    id: str
    title: str
    text: str
    code: str | None = None
    # Never shown: run before ``code`` when the lesson's code samples are proven (imports, mostly).
    setup: str | None = None
    # True when the learner's language lacks this slide and it is shown in English.
    fallback: bool = False
    source: Source = field(default=_NOWHERE, compare=False)


@dataclass(frozen=True)
class Question:
    """One Quick Check question, sent as a native Telegram quiz poll.

    Options are listed in the English file's order: ``options`` holds their texts (translated, in a
    translation), ``option_ids`` their stable ids (always the English ones), ``correct`` the index of the
    right one. The bot shows them shuffled (bot.shuffle) and records answers by id.
    """

    id: str
    question: str
    options: tuple[str, ...]
    correct: int
    explanation: str
    fallback: bool = False
    source: Source = field(default=_NOWHERE, compare=False)
    # Lesson files give every option an id; a question built in code without them gets option-1, option-2...
    option_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.option_ids:
            object.__setattr__(self, "option_ids", tuple(f"option-{n}" for n in range(1, len(self.options) + 1)))
        if len(self.option_ids) != len(self.options):
            raise ValueError(f"question {self.id!r}: {len(self.option_ids)} option ids for {len(self.options)} options")

    @property
    def correct_id(self) -> str:
        """Return the id of the right option."""
        return self.option_ids[self.correct]

    def option_text(self, option_id: str) -> str | None:
        """Return the text of the option with this id, or None if the question has no such option."""
        return next((t for i, t in zip(self.option_ids, self.options, strict=True) if i == option_id), None)


# The placeholders a check's fail message may use: what the learner's code produced, and what it should have.
FAIL_PLACEHOLDERS = ("{got}", "{expected}")


@dataclass(frozen=True)
class ExerciseCheck:
    """A hidden check of a practice exercise: an expression over the learner's variables and what it must give."""

    id: str
    expr: str
    kind: str  # one of CHECK_KINDS; SOURCE_CHECK_KINDS read the submitted code, not a value
    expect: object  # None: what the exercise's solution gives on the same random inputs
    fail: str  # shown when the check fails; {got} is what the learner's code produced, {expected} what it should

    @property
    def from_solution(self) -> bool:
        """Whether the expected value comes from running the solution (no ``expect``; a value, not a fact)."""
        return self.expect is None and self.kind != "true" and self.kind not in SOURCE_CHECK_KINDS


@dataclass(frozen=True)
class Exercise:
    """The practice at the end of a lesson: code to complete, hints on request, checks the learner cannot see."""

    title: str
    instructions: str
    starter: str
    hints: tuple[str, ...]
    checks: tuple[ExerciseCheck, ...]
    solution: str
    fallback: bool = False
    source: Source = field(default=_NOWHERE, compare=False)
    # The hint (1-based) that speaks to a mistake (bot.mistakes' id): shown first to a learner who made it.
    hints_for: tuple[tuple[str, int], ...] = ()

    def hint_order(self, mistake: str | None) -> tuple[int, ...]:
        """Return the hints' positions (0-based) in the order shown: the one about ``mistake`` first, if any."""
        first = next((number - 1 for made, number in self.hints_for if made == mistake), None)
        rest = tuple(i for i in range(len(self.hints)) if i != first)
        return rest if first is None else (first, *rest)


@dataclass(frozen=True)
class ParsonsDrill:
    """A Parsons problem: tap given lines of code into order. Each line carries its indentation.

    Any order counts as right if it gives what the author's order gives: run after the hidden ``setup``
    on the same seed, every check's expression must equal (or be close to) its value after ``lines``.
    """

    id: str
    prompt: str
    lines: tuple[str, ...]  # the author's order, each line with its indentation
    distractors: tuple[str, ...]  # lines that belong nowhere; never on a lesson's first drill
    setup: str  # run before the lines, never shown ("" for none)
    checks: tuple[ExerciseCheck, ...]  # an 'expect' of None compares with the author's order
    explanation: str
    fallback: bool = False
    source: Source = field(default=_NOWHERE, compare=False)

    kind: ClassVar[Literal["parsons"]] = "parsons"

    @property
    def pieces(self) -> tuple[str, ...]:
        """Return every line the learner can tap: the program's lines, then the distractors."""
        return self.lines + self.distractors

    @property
    def program(self) -> str:
        """Return the author's program: the hidden setup, then the lines in order."""
        return program(self.setup, self.lines)

    @property
    def exercise(self) -> Exercise:
        """Return the drill as a graded exercise whose solution is the author's order."""
        return Exercise(
            title=self.id,
            instructions=self.prompt,
            starter="",
            hints=(),
            checks=self.checks,
            solution=self.program,
            fallback=self.fallback,
            source=self.source,
        )


def program(setup: str, lines: tuple[str, ...]) -> str:
    """Return the code a Parsons arrangement runs as: the hidden setup, then the lines."""
    return "\n".join(([setup] if setup else []) + list(lines))


@dataclass(frozen=True)
class ChoiceDrill:
    """Fill in the blank (a line of code with a gap) or predict the output (of a short sample): 2 to 4 choices."""

    id: str
    kind: Literal["fill", "predict"]
    prompt: str
    code: str  # for 'fill', with the gap written GAP, once
    choices: tuple[str, ...]  # code or output, the same in every language
    correct: int
    explanation: str
    setup: str = ""  # never shown; run before the code when the tests verify it
    # Why each choice is wrong, in lesson markup, shown when it is tapped: one per choice, "" for the right one.
    reasons: tuple[str, ...] = ()
    fallback: bool = False
    source: Source = field(default=_NOWHERE, compare=False)

    GAP: ClassVar[str] = "___"

    def reason(self, choice: int) -> str:
        """Return why ``choice`` is wrong ("" for the right one, or for a drill built without reasons)."""
        return self.reasons[choice] if 0 <= choice < len(self.reasons) else ""

    @property
    def answer(self) -> str:
        """Return the code as it reads when answered: the gap filled with the right choice."""
        return self.code.replace(self.GAP, self.choices[self.correct], 1) if self.kind == "fill" else self.code


Drill = ParsonsDrill | ChoiceDrill


@dataclass(frozen=True)
class Stamp:
    """The English a translated part was last checked against (see bot.authoring.stamps)."""

    english: dict[str, Any] | None  # its fields as they were; None in a legacy stamp, which kept only a hash
    digest: str  # the legacy hash of those fields


@dataclass(frozen=True)
class Translation:
    """What one translation file holds: its parts ('title', 'slide/<id>', ...) and the stamps in its `sources:`."""

    path: str
    parts: dict[str, int]  # part -> the line it starts at
    stamps: dict[str, Stamp]


@dataclass(frozen=True)
class Lesson:
    """A lesson: slides to read, a Quick Check to answer, a recap to keep."""

    id: str
    number: int
    title: str
    summary: str
    slides: tuple[Slide, ...]
    quiz: tuple[Question, ...]
    recap: str
    recap_fallback: bool = False
    exercise: Exercise | None = None
    drills: tuple[Drill, ...] = ()  # after the Quick Check, before the practice: part of finishing the lesson
    source: Source = field(default=_NOWHERE, compare=False)
    translation: Translation | None = field(default=None, compare=False)  # None in English or untranslated

    def question(self, question_id: str) -> Question | None:
        """Return the question with this id, or None."""
        return next((q for q in self.quiz if q.id == question_id), None)

    def slide_index(self, slide_id: str) -> int | None:
        """Return the position of the slide with this id, or None if the lesson has no such slide."""
        return next((i for i, s in enumerate(self.slides) if s.id == slide_id), None)

    def drill(self, drill_id: str) -> Drill | None:
        """Return the drill with this id, or None."""
        return next((d for d in self.drills if d.id == drill_id), None)

    @property
    def last_slide(self) -> int:
        """Return the index of the lesson's last slide."""
        return len(self.slides) - 1


@dataclass(frozen=True)
class Course:
    """A course in one language: lessons in teaching order."""

    id: str
    language: str
    title: str
    description: str
    lessons: tuple[Lesson, ...]
    translation: Translation | None = field(default=None, compare=False)  # of course.yaml

    def lesson(self, lesson_id: str) -> Lesson | None:
        """Return the lesson with this id, or None."""
        return next((lesson for lesson in self.lessons if lesson.id == lesson_id), None)

    def next_lesson(self, lesson: Lesson) -> Lesson | None:
        """Return the lesson after ``lesson``, or None after the last one."""
        return self.lessons[lesson.number] if lesson.number < len(self.lessons) else None

    @property
    def question_count(self) -> int:
        """Return how many Quick Check questions the whole course has."""
        return sum(len(lesson.quiz) for lesson in self.lessons)


@dataclass(frozen=True)
class Content:
    """Every language of the course; English is complete, others fall back to it per item."""

    english: Course
    translations: dict[str, Course] = field(default_factory=dict)

    def course(self, language: str) -> Course:
        """Return the course as a learner of ``language`` reads it."""
        if language == DEFAULT_LANGUAGE:
            return self.english
        course = self.translations.get(language)
        if course is None:
            course = self.translations[language] = fallback_course(self.english, language)
        return course


def untranslated(lesson: Lesson) -> Lesson:
    """Return ``lesson`` with every slide, question and the recap marked as shown in English."""
    return replace(
        lesson,
        slides=tuple(replace(s, fallback=True) for s in lesson.slides),
        quiz=tuple(replace(q, fallback=True) for q in lesson.quiz),
        recap_fallback=True,
        exercise=replace(lesson.exercise, fallback=True) if lesson.exercise else None,
        drills=tuple(replace(d, fallback=True) for d in lesson.drills),
    )


def fallback_course(english: Course, language: str) -> Course:
    """Return the English course marked as untranslated for ``language``."""
    return replace(english, language=language, lessons=tuple(untranslated(lesson) for lesson in english.lessons))
