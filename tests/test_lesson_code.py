"""Checks for the course content in lessons/en/ and the partial translation fixture: its structure and limits.

The code samples themselves run in the real runner (`coursebot lint --run`, tests/test_authoring_proof.py): each
``print(...)  # -> VALUE`` line must print exactly VALUE there.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from bot.authoring.proof import expectations

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "lessons" / "en"
PARTIAL = Path(__file__).resolve().parent / "fixtures" / "partial"

# Content limits (FORMAT.md's Telegram limits plus our phone-screen budget).
SLIDES_MIN, SLIDES_MAX = 10, 14
QUESTIONS_MIN, QUESTIONS_MAX = 2, 4
OPTIONS_MIN, OPTIONS_MAX = 2, 10
QUESTION_MAX = 300
OPTION_MAX = 100
EXPLANATION_MAX = 200
EXPLANATION_MAX_BREAKS = 2
SLIDE_TEXT_MAX = 220
# At a phone's 36 columns (issue 20) the same code takes more lines than at the old 46: a call wraps, a '# -> VALUE'
# goes below its print. 12 lines, the title and two sentences still fit one screen.
CODE_MAX_LINES = 12
CODE_MAX_WIDTH = 36  # bot.course.phone_width.CODE_LINE_MAX, read here on its own (characters: the English is ASCII)
INSTRUCTIONS_MAX = 400
STARTER_MAX_LINES = 12  # starter and solution of an exercise
HINTS_MIN, HINTS_MAX = 1, 3
CHECKS_MIN, CHECKS_MAX = 1, 6

ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

SLIDE_KEYS = {"id", "title", "text", "code", "setup"}
QUESTION_KEYS = {"id", "question", "options", "explanation"}
OPTION_KEYS = {"id", "text", "correct"}
# drills: tests/test_drills_content.py
LESSON_KEYS = {"id", "title", "summary", "slides", "quiz", "recap", "exercise", "drills"}
EXERCISE_KEYS = {"title", "instructions", "starter", "hints", "checks", "solution"}
# Optional: which hint a diagnosed mistake shows first (bot.course checks the ids and numbers themselves).
EXERCISE_OPTIONAL_KEYS = {"hints_for"}
CHECK_KEYS = {"id", "expr", "kind", "expect", "fail"}
CHECK_KINDS = ("equal", "close", "same", "shape", "dtype", "true", "uses", "inside")
COURSE_KEYS = {"id", "title", "description", "lessons"}

# --------------------------------------------------------------------------
# Loading


def load_yaml(path: Path):
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def course() -> dict:
    return load_yaml(EN / "course.yaml")


def lesson_files() -> list[Path]:
    return sorted(p for p in EN.glob("*.yaml") if p.name not in ("course.yaml", "glossary.yaml"))


LESSON_FILES = lesson_files()
LESSON_IDS = [p.stem for p in LESSON_FILES]


def lesson(path: Path) -> dict:
    return load_yaml(path)


# --------------------------------------------------------------------------
# Samples: each is run in the real runner by `coursebot lint --run` (tests/test_authoring_proof.py), which reads
# their '# -> VALUE' comments with bot.authoring.proof.expectations; here, only that there is something to check.


def test_there_are_lessons():
    assert LESSON_FILES, f"no lesson files in {EN}"


@pytest.mark.parametrize("stem", LESSON_IDS)
def test_code_samples_check_something(stem):
    """A lesson whose samples state no output at all would test nothing."""
    codes = [s["code"] for s in lesson(EN / f"{stem}.yaml").get("slides") or [] if s.get("code")]
    assert codes, f"{stem}.yaml has no code samples"
    stated = [expectations(code) for code in codes]
    assert all(not misplaced for _, misplaced in stated), stated
    assert sum(len(expected) for expected, _ in stated) >= len(codes), (
        f"{stem}.yaml: fewer '# -> VALUE' lines than code samples"
    )


# --------------------------------------------------------------------------
# Structure


def markup_problems(text: str) -> list[str]:
    """FORMAT.md allows `code` and **bold**; an unclosed mark is an error."""
    problems = []
    if text.count("`") % 2:
        problems.append("unclosed ` mark")
    outside_code = re.sub(r"`[^`]*`", "", text)
    if outside_code.count("**") % 2:
        problems.append("unclosed ** mark")
    return problems


def one_line(value) -> bool:
    return isinstance(value, str) and value.strip() != "" and "\n" not in value.strip()


def test_course_lists_every_lesson_once():
    data = course()
    assert set(data) <= COURSE_KEYS, set(data) - COURSE_KEYS
    assert ID_RE.match(str(data.get("id"))), data.get("id")
    assert one_line(data.get("title"))
    assert isinstance(data.get("description"), str) and data["description"].strip()
    listed = data.get("lessons")
    assert isinstance(listed, list) and listed
    assert len(listed) == len(set(listed)), "a lesson is listed twice"
    assert sorted(listed) == sorted(LESSON_IDS), (listed, LESSON_IDS)


def test_lesson_ids_are_unique_across_the_course():
    ids = [lesson(p).get("id") for p in LESSON_FILES]
    assert len(ids) == len(set(ids)), ids


def structure_problems(data: dict) -> list[str]:
    problems: list[str] = []
    add = problems.append

    if not isinstance(data, dict):
        return ["lesson is not a mapping"]
    if set(data) - LESSON_KEYS:
        add(f"unknown keys {sorted(set(data) - LESSON_KEYS)}")
    if not ID_RE.match(str(data.get("id"))):
        add(f"bad lesson id {data.get('id')!r}")
    for key in ("title", "summary"):
        if not one_line(data.get(key)):
            add(f"{key} must be one non-empty line")
    for key in ("summary", "recap"):
        for p in markup_problems(str(data.get(key) or "")):
            add(f"{key}: {p}")
    recap = data.get("recap")
    if not isinstance(recap, str) or not recap.strip():
        add("recap is missing")
    elif len(re.findall(r"[.!?](?:\s|$)", recap.strip())) > 3:
        add("recap has more than 3 sentences")

    slides = data.get("slides") or []
    if not SLIDES_MIN <= len(slides) <= SLIDES_MAX:
        add(f"{len(slides)} slides, want {SLIDES_MIN}-{SLIDES_MAX}")
    seen: set = set()
    for slide in slides:
        sid = slide.get("id")
        at = f"slide {sid!r}"
        if set(slide) - SLIDE_KEYS:
            add(f"{at}: unknown keys {sorted(set(slide) - SLIDE_KEYS)}")
        if not ID_RE.match(str(sid)):
            add(f"{at}: bad id")
        if sid in seen:
            add(f"{at}: duplicate id")
        seen.add(sid)
        if not one_line(slide.get("title")):
            add(f"{at}: title must be one non-empty line")
        text = slide.get("text")
        if not isinstance(text, str) or not text.strip():
            add(f"{at}: text is missing")
            text = ""
        if len(text.strip()) > SLIDE_TEXT_MAX:
            add(f"{at}: text is {len(text.strip())} chars, max {SLIDE_TEXT_MAX}")
        for p in markup_problems(text):
            add(f"{at}: {p}")
        if "setup" in slide and "code" not in slide:
            add(f"{at}: setup without code")
        for key in ("code", "setup"):
            if key in slide and not (isinstance(slide[key], str) and slide[key].strip()):
                add(f"{at}: {key} is empty")
        code = slide.get("code")
        if isinstance(code, str):
            lines = code.rstrip("\n").splitlines()
            if len(lines) > CODE_MAX_LINES:
                add(f"{at}: code has {len(lines)} lines, max {CODE_MAX_LINES}")
            for n, line in enumerate(lines, start=1):
                if len(line) > CODE_MAX_WIDTH:
                    add(f"{at}: code line {n} is {len(line)} chars, max {CODE_MAX_WIDTH}")
        for key in ("code", "setup"):
            if isinstance(slide.get(key), str) and not slide[key].isascii():
                add(f"{at}: {key} is not plain ASCII")

    quiz = data.get("quiz") or []
    if not QUESTIONS_MIN <= len(quiz) <= QUESTIONS_MAX:
        add(f"{len(quiz)} questions, want {QUESTIONS_MIN}-{QUESTIONS_MAX}")
    seen = set()
    for q in quiz:
        qid = q.get("id")
        at = f"question {qid!r}"
        if set(q) - QUESTION_KEYS:
            add(f"{at}: unknown keys {sorted(set(q) - QUESTION_KEYS)}")
        if not ID_RE.match(str(qid)):
            add(f"{at}: bad id")
        if qid in seen:
            add(f"{at}: duplicate id")
        seen.add(qid)
        question = q.get("question")
        if not isinstance(question, str) or not question.strip():
            add(f"{at}: question is missing")
        elif len(question.strip()) > QUESTION_MAX:
            add(f"{at}: question is {len(question.strip())} chars, max {QUESTION_MAX}")
        options = q.get("options") or []
        if not OPTIONS_MIN <= len(options) <= OPTIONS_MAX:
            add(f"{at}: {len(options)} options, want {OPTIONS_MIN}-{OPTIONS_MAX}")
        texts = []
        option_ids: set[str] = set()
        correct = 0
        for opt in options:
            if not isinstance(opt, dict) or set(opt) - OPTION_KEYS:
                add(f"{at}: bad option {opt!r}")
                continue
            if not ID_RE.match(str(opt.get("id"))):
                add(f"{at}: option {opt.get('text')!r} has a bad id {opt.get('id')!r}")
            elif opt["id"] in option_ids:
                add(f"{at}: duplicate option id {opt['id']!r}")
            option_ids.add(str(opt.get("id")))
            otext = opt.get("text")
            if not one_line(otext):
                add(f"{at}: option text must be one non-empty line: {otext!r}")
                continue
            texts.append(otext.strip())
            if len(otext.strip()) > OPTION_MAX:
                add(f"{at}: option is {len(otext.strip())} chars, max {OPTION_MAX}")
            if "correct" in opt and opt["correct"] is not True:
                add(f"{at}: write correct: true or leave it out")
            correct += opt.get("correct") is True
        if correct != 1:
            add(f"{at}: {correct} correct options, want exactly 1")
        if len(texts) != len(set(texts)):
            add(f"{at}: duplicate options")
        expl = q.get("explanation")
        if not isinstance(expl, str) or not expl.strip():
            add(f"{at}: explanation is missing")
        else:
            expl = expl.strip()
            if len(expl) > EXPLANATION_MAX:
                add(f"{at}: explanation is {len(expl)} chars, max {EXPLANATION_MAX}")
            if expl.count("\n") > EXPLANATION_MAX_BREAKS:
                add(f"{at}: explanation has more than {EXPLANATION_MAX_BREAKS} line breaks")

    if "exercise" in data:
        problems.extend(exercise_problems(data["exercise"]))
    return problems


def exercise_problems(ex) -> list[str]:
    """The shape of a lesson's practice exercise; tests/test_exercises.py runs it."""
    problems: list[str] = []
    add = problems.append
    if not isinstance(ex, dict):
        return ["exercise is not a mapping"]
    if set(ex) - EXERCISE_OPTIONAL_KEYS != EXERCISE_KEYS:
        missing, extra = EXERCISE_KEYS - set(ex), set(ex) - EXERCISE_KEYS - EXERCISE_OPTIONAL_KEYS
        if missing:
            add(f"exercise: missing keys {sorted(missing)}")
        if extra:
            add(f"exercise: unknown keys {sorted(extra)}")
    if not one_line(ex.get("title")):
        add("exercise: title must be one non-empty line")
    instructions = ex.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        add("exercise: instructions are missing")
    else:
        if len(instructions.strip()) > INSTRUCTIONS_MAX:
            add(f"exercise: instructions are {len(instructions.strip())} chars, max {INSTRUCTIONS_MAX}")
        for p in markup_problems(instructions):
            add(f"exercise: instructions: {p}")
    for key in ("starter", "solution"):
        code = ex.get(key)
        if not isinstance(code, str) or not code.strip():
            add(f"exercise: {key} is missing")
            continue
        lines = code.rstrip("\n").splitlines()
        if len(lines) > STARTER_MAX_LINES:
            add(f"exercise: {key} has {len(lines)} lines, max {STARTER_MAX_LINES}")
        for n, line in enumerate(lines, start=1):
            if len(line) > CODE_MAX_WIDTH:
                add(f"exercise: {key} line {n} is {len(line)} chars, max {CODE_MAX_WIDTH}")
        if not code.isascii():
            add(f"exercise: {key} is not plain ASCII")
        try:
            compile(code, f"<{key}>", "exec")
        except SyntaxError as exc:
            add(f"exercise: {key} does not compile: {exc.msg}")
    hints = ex.get("hints")
    if not isinstance(hints, list) or not HINTS_MIN <= len(hints) <= HINTS_MAX:
        add(f"exercise: want {HINTS_MIN}-{HINTS_MAX} hints")
        hints = hints if isinstance(hints, list) else []
    for hint in hints:
        if not one_line(hint):
            add(f"exercise: a hint must be one non-empty line: {hint!r}")
            continue
        if len(re.findall(r"[.!?](?:\s|$)", hint.strip())) > 1:
            add(f"exercise: a hint is one sentence: {hint!r}")
        for p in markup_problems(hint):
            add(f"exercise: hint: {p}")
    checks = ex.get("checks")
    if not isinstance(checks, list) or not CHECKS_MIN <= len(checks) <= CHECKS_MAX:
        add(f"exercise: want {CHECKS_MIN}-{CHECKS_MAX} checks")
        checks = checks if isinstance(checks, list) else []
    seen: set = set()
    for c in checks:
        if not isinstance(c, dict):
            add(f"exercise: bad check {c!r}")
            continue
        cid = c.get("id")
        at = f"exercise: check {cid!r}"
        if set(c) - CHECK_KEYS:
            add(f"{at}: unknown keys {sorted(set(c) - CHECK_KEYS)}")
        if not ID_RE.match(str(cid)):
            add(f"{at}: bad id")
        if cid in seen:
            add(f"{at}: duplicate id")
        seen.add(cid)
        expr = c.get("expr")
        if not isinstance(expr, str) or not expr.strip():
            add(f"{at}: expr is missing")
        else:
            try:
                compile(expr, "<check>", "eval")
            except SyntaxError:
                add(f"{at}: expr is not a Python expression")
        kind = "true" if c.get("kind") is True else c.get("kind")
        if kind not in CHECK_KINDS:
            add(f"{at}: kind {kind!r} is not one of {', '.join(CHECK_KINDS)}")
        elif kind in ("true", "uses") and "expect" in c:
            add(f"{at}: kind {kind} takes no expect")
        elif kind == "inside" and not (isinstance(c.get("expect"), list) and c["expect"]):
            add(f"{at}: kind inside lists its blocks in expect")
        # Without expect, a check compares with what the solution gives on the same random inputs.
        fail = c.get("fail")
        if not one_line(fail):
            add(f"{at}: fail must be one non-empty line")
        else:
            for p in markup_problems(fail):
                add(f"{at}: fail: {p}")
            try:
                fail.format(got="tensor(8.)", expected="tensor(4.)")
            except (KeyError, IndexError, ValueError):
                add(f"{at}: fail has braces other than {{got}} and {{expected}}")
    return problems


@pytest.mark.parametrize("stem", LESSON_IDS)
def test_lesson_structure(stem):
    problems = structure_problems(lesson(EN / f"{stem}.yaml"))
    assert not problems, "\n".join(f"{stem}.yaml: {p}" for p in problems)


def test_structure_check_catches_bad_lessons():
    good = lesson(LESSON_FILES[0])
    assert structure_problems(good) == []

    def broken(change):
        data = yaml.safe_load(yaml.safe_dump(good))
        change(data)
        return "\n".join(structure_problems(data))

    assert "slides, want" in broken(lambda d: d["slides"].__delitem__(slice(3, None)))
    assert "duplicate id" in broken(lambda d: d["slides"][1].__setitem__("id", d["slides"][0]["id"]))
    assert "2 correct options" in broken(lambda d: d["quiz"][0]["options"][1].__setitem__("correct", True))
    assert "0 correct options" in broken(lambda d: d["quiz"][0]["options"][0].pop("correct"))
    assert "explanation is" in broken(lambda d: d["quiz"][0].__setitem__("explanation", "x" * 201))
    assert "line breaks" in broken(lambda d: d["quiz"][0].__setitem__("explanation", "a\nb\nc\nd"))
    assert "question is" in broken(lambda d: d["quiz"][0].__setitem__("question", "q" * 301))
    assert "option is" in broken(lambda d: d["quiz"][0]["options"][1].__setitem__("text", "o" * 101))
    assert "has a bad id" in broken(lambda d: d["quiz"][0]["options"][1].pop("id"))
    assert "duplicate option id" in broken(lambda d: d["quiz"][0]["options"][1].__setitem__("id", "not-leaf"))
    assert "questions, want" in broken(lambda d: d["quiz"].__delitem__(slice(1, None)))
    assert "bad id" in broken(lambda d: d["slides"][0].__setitem__("id", "Bad_Id"))
    assert "unclosed ` mark" in broken(lambda d: d["slides"][0].__setitem__("text", "a `b"))
    assert "unclosed ** mark" in broken(lambda d: d["slides"][0].__setitem__("text", "a **b"))
    assert "code line 1" in broken(lambda d: d["slides"][0].__setitem__("code", "x = 1" + " " * 60 + "\n"))

    # the practice exercise
    assert "exercise" in good, "the first lesson should have an exercise"
    assert "unknown keys ['extra']" in broken(lambda d: d["exercise"].__setitem__("extra", 1))
    assert "missing keys ['solution']" in broken(lambda d: d["exercise"].pop("solution"))
    assert "instructions are" in broken(lambda d: d["exercise"].__setitem__("instructions", "i " * 201))
    assert "starter has 13 lines" in broken(lambda d: d["exercise"].__setitem__("starter", "x = 1\n" * 13))
    assert "starter line 1" in broken(lambda d: d["exercise"].__setitem__("starter", "x = 1" + " " * 60 + "\n"))
    assert "want 1-3 hints" in broken(lambda d: d["exercise"].__setitem__("hints", []))
    assert "one sentence" in broken(lambda d: d["exercise"]["hints"].__setitem__(0, "One. Two."))
    assert "want 1-6 checks" in broken(lambda d: d["exercise"].__setitem__("checks", d["exercise"]["checks"] * 5))
    assert "duplicate id" in broken(
        lambda d: d["exercise"]["checks"][1].__setitem__("id", d["exercise"]["checks"][0]["id"])
    )
    assert "is not one of" in broken(lambda d: d["exercise"]["checks"][0].__setitem__("kind", "near"))
    assert "takes no expect" in broken(lambda d: d["exercise"]["checks"][0].__setitem__("expect", 1.0))
    assert "not a Python expression" in broken(lambda d: d["exercise"]["checks"][0].__setitem__("expr", "x ="))
    assert "braces other than" in broken(lambda d: d["exercise"]["checks"][0].__setitem__("fail", "{gott}"))
    assert "fail: unclosed ` mark" in broken(lambda d: d["exercise"]["checks"][0].__setitem__("fail", "a `b"))


# --------------------------------------------------------------------------
# The partial Russian translation fixture


def strip_comments(code: str) -> list[str]:
    """Code lines without comments, except the '# -> VALUE' expectations."""
    kept: dict[int, str] = {}
    lines = code.splitlines()
    cuts: dict[int, int] = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and not tok.string.startswith("# -> "):
            cuts[tok.start[0]] = tok.start[1]
    for n, line in enumerate(lines, start=1):
        kept[n] = (line[: cuts[n]] if n in cuts else line).rstrip()
    return [kept[n] for n in sorted(kept) if kept[n]]


def ordered_subset(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(x in it for x in part)


def translation_problems(tr: dict, en: dict) -> list[str]:
    problems: list[str] = []
    add = problems.append
    allowed = {"lesson", "title", "summary", "slides", "quiz", "recap"}
    if set(tr) - allowed:
        add(f"unknown keys {sorted(set(tr) - allowed)}")
    if tr.get("lesson") != en["id"]:
        add(f"lesson {tr.get('lesson')!r} is not {en['id']!r}")

    en_slides = {s["id"]: s for s in en["slides"]}
    tr_slides = tr.get("slides") or []
    ids = [s.get("id") for s in tr_slides]
    if not set(ids) <= set(en_slides):
        add(f"slides not in English: {sorted(set(ids) - set(en_slides))}")
    elif not ordered_subset(ids, list(en_slides)) or len(ids) != len(set(ids)):
        add("slides are out of English order or repeated")
    for s in tr_slides:
        at = f"slide {s.get('id')!r}"
        extra = set(s) - {"id", "title", "text", "code"}
        if extra:
            add(f"{at}: unknown keys {sorted(extra)}")
        for key in ("title", "text"):
            if key in s and not (isinstance(s[key], str) and s[key].strip()):
                add(f"{at}: empty {key}")
        if len(str(s.get("text") or "").strip()) > SLIDE_TEXT_MAX + 60:
            add(f"{at}: text too long for a phone screen")
        for p in markup_problems(str(s.get("text") or "")):
            add(f"{at}: {p}")
        if "code" in s:
            english = en_slides.get(s.get("id"), {}).get("code")
            if english is None:
                add(f"{at}: code on a slide that has none in English")
            elif strip_comments(s["code"]) != strip_comments(english):
                add(f"{at}: code differs from English beyond comments")

    en_quiz = {q["id"]: q for q in en["quiz"]}
    tr_quiz = tr.get("quiz") or []
    qids = [q.get("id") for q in tr_quiz]
    if not set(qids) <= set(en_quiz):
        add(f"questions not in English: {sorted(set(qids) - set(en_quiz))}")
    elif not ordered_subset(qids, list(en_quiz)) or len(qids) != len(set(qids)):
        add("questions are out of English order or repeated")
    for q in tr_quiz:
        at = f"question {q.get('id')!r}"
        en_q = en_quiz.get(q.get("id"))
        if set(q) - QUESTION_KEYS:
            add(f"{at}: unknown keys {sorted(set(q) - QUESTION_KEYS)}")
        if len(str(q.get("question") or "")) > QUESTION_MAX:
            add(f"{at}: question too long")
        options = q.get("options")
        if options is not None:
            if en_q is not None and len(options) != len(en_q["options"]):
                add(f"{at}: {len(options)} options, English has {len(en_q['options'])}")
            for opt in options:
                if not isinstance(opt, str):
                    add(f"{at}: option {opt!r} must be plain text (no `correct`)")
                elif len(opt) > OPTION_MAX:
                    add(f"{at}: option too long")
        expl = q.get("explanation")
        if expl is not None:
            if len(expl.strip()) > EXPLANATION_MAX:
                add(f"{at}: explanation is {len(expl.strip())} chars")
            if expl.strip().count("\n") > EXPLANATION_MAX_BREAKS:
                add(f"{at}: explanation has too many line breaks")
    return problems


def test_partial_translation_fixture_matches_english():
    ru = PARTIAL / "ru"
    meta = load_yaml(ru / "course.yaml")
    assert set(meta) == {"title", "description"}, set(meta)
    assert re.search("[а-яА-Я]", meta["title"] + meta["description"])

    translated = sorted(p for p in ru.glob("*.yaml") if p.name != "course.yaml")
    assert [p.name for p in translated] == ["03-grad.yaml"]
    tr = load_yaml(translated[0])
    en = lesson(EN / "03-grad.yaml")
    problems = translation_problems(tr, en)
    assert not problems, "\n".join(problems)

    # It must really be partial: some slides, one question, no recap.
    n_tr, n_en = len(tr.get("slides") or []), len(en["slides"])
    assert 0 < n_tr < n_en, (n_tr, n_en)
    assert 0 < len(tr.get("quiz") or []) < len(en["quiz"])
    assert "recap" not in tr
    assert tr.get("title") and tr.get("summary")


def test_translation_check_catches_bad_fixtures():
    en = lesson(EN / "03-grad.yaml")
    tr = load_yaml(PARTIAL / "ru" / "03-grad.yaml")
    assert translation_problems(tr, en) == []

    def broken(change):
        data = yaml.safe_load(yaml.safe_dump(tr, allow_unicode=True))
        change(data)
        return "\n".join(translation_problems(data, en))

    assert "not in English" in broken(lambda d: d["slides"].append({"id": "no-such-slide", "title": "x"}))
    assert "out of English order" in broken(lambda d: d["slides"].reverse())
    assert "options, English has" in broken(lambda d: d["quiz"][0]["options"].pop())
    assert "plain text" in broken(lambda d: d["quiz"][0]["options"].__setitem__(0, {"text": "a", "correct": True}))
    assert "is not" in broken(lambda d: d.__setitem__("lesson", "grad-x"))
    coded = next(s for s in tr["slides"] if "code" in s)
    assert "beyond comments" in broken(
        lambda d: next(s for s in d["slides"] if s["id"] == coded["id"]).__setitem__(
            "code", coded["code"].replace("(", "( 1 +", 1)
        )
    )


# --------------------------------------------------------------------------


def test_this_process_never_imported_torch():
    assert "torch" not in sys.modules
