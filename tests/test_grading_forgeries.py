"""Code that does not solve an exercise never passes it, however it tries to fake the verdict (issue 9).

Every forgery class runs against every shipped exercise, the way the bot grades a learner: through the
runner client (an embedded runner: the real sandbox), with the lesson's own checks (bot.course.runner_checks).
Each forgery is made as strong as it can be: it runs the learner's starter (a wrong answer), then works out
the RIGHT values by running the exercise's hidden solution on this run's seed (what only solving gives),
and then tries to get those values into the verdict without its own variables holding them.  So a forgery
passes exactly when its trick works; the honest way to the right values is not on trial here.  Hooks that
would act during extraction also write "SAW ..." to stderr, so a test sees whether they ever ran then.

The one forgery that still works by construction is documented in runner/grading/__init__.py (read the nonce's
pipe, write a report, os._exit(0)): its values must still be right for this run's random inputs.
"""

from __future__ import annotations

import re
import shutil

import pytest
import pytest_asyncio

from bot import feedback
from bot.course import runner_checks
from runner.client import SOURCE_CHECK_KINDS, RunnerClient, RunnerConfig, RunResult
from tests.conftest import course_content

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap"),
]

COURSE = course_content().english
LESSON_IDS = [lesson.id for lesson in COURSE.lessons]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runner():
    async with RunnerClient.embedded(RunnerConfig(pool_size=2, queue=64)) as client:
        yield client


def names_read(exercise) -> list[str]:
    """The variables the exercise's value checks read."""
    values = [c for c in exercise.checks if c.kind not in SOURCE_CHECK_KINDS]
    names = {m for c in values for m in re.findall(r"(?<![.\w])([A-Za-z_]\w*)", c.expr)}
    return sorted(names - {"and", "or", "not", "is", "None"})


def concept_lines(exercise) -> str:
    """Lines that satisfy the exercise's checks of the source (issue 21) and change none of the values: written,
    never meant. So a forgery below is on trial for its trick alone, as before those checks existed."""
    lines = []
    for c in exercise.checks:
        if c.kind == "uses":
            lines.append(
                {"requires_grad": "_torch.zeros(1).requires_grad_()", "detach": "_torch.zeros(1).detach()"}[c.expr]
            )
        elif c.kind == "inside":
            lines.append(f"with _torch.no_grad():\n    {c.expr} = {c.expr}")
    return "\n".join(lines)


def prelude(exercise) -> str:
    """The starter (with the concepts written, to no effect), then the right values worked out on the side, and the
    helper a hook uses to swap them in."""
    return f"""
import sys, random as _random, torch as _torch
_seed = _torch.initial_seed()
{exercise.starter}
{concept_lines(exercise)}
_state = (_torch.get_rng_state(), _random.getstate())
_torch.manual_seed(_seed)
_random.seed(_seed)
_correct = {{}}
exec(compile({exercise.solution!r}, "<solution>", "exec"), _correct)
_torch.set_rng_state(_state[0])
_random.setstate(_state[1])
_NAMES = {names_read(exercise)!r}
_LATE = {{"_read_nonce", "_extract", "_evaluate", "_encode", "_tensor", "extract", "_value"}}

def _extracting(frame):
    while frame is not None:
        if frame.f_code.co_name in _LATE:
            return frame.f_code.co_name
        frame = frame.f_back
    return None

def _swap(tag, frame=None):
    where = _extracting(frame or sys._getframe(1))
    if where:
        sys.stderr.write(f"SAW {{tag}} in {{where}}\\n")
        g = globals()
        for name in _NAMES:
            if name in _correct:
                g[name] = _correct[name]
"""


# --- the forgeries: (name, code after the prelude) ---------------------------------------------------------

HOOKS = {
    "profile hook": "sys.setprofile(lambda frame, event, arg: _swap('profile', frame))\n",
    "trace hook": "def _t(frame, event, arg):\n    _swap('trace', frame)\n    return _t\nsys.settrace(_t)\n",
    "audit hook": "sys.addaudithook(lambda event, args: _swap('audit'))\n",
    "gc callback": "import gc\ngc.callbacks.append(lambda phase, info: _swap('gc'))\ngc.set_threshold(1, 1, 1)\n",
    "signal handler": (
        "import signal\nsignal.signal(signal.SIGALRM, lambda s, f: _swap('signal', f))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)\n"
    ),
    "Tensor.__del__": "_torch.Tensor.__del__ = lambda self: _swap('del')\n",
    "a thread watching": (
        "import threading, time\nmain = threading.main_thread().ident\n"
        "def _watch():\n    while True:\n        frame = sys._current_frames().get(main)\n"
        "        if _extracting(frame):\n            _swap('thread', frame)\n            return\n"
        "threading.Thread(target=_watch, daemon=True).start()\n"
    ),
}

PATCHED_CLASS = """
_by_id = {}
for _name in _NAMES:
    _mine, _right = globals().get(_name), _correct.get(_name)
    if isinstance(_mine, _torch.Tensor) and isinstance(_right, _torch.Tensor):
        _by_id[id(_mine)] = _right
    elif _name in _correct:
        globals()[_name] = _right   # plain values (lists of floats) honestly: the tensors lie below
_base = _torch._C.TensorBase
def _lie(attr):
    real = _base.__dict__[attr]
    return property(lambda self: real.__get__(_by_id.get(id(self), self)))
for _attr in ("grad", "requires_grad", "is_leaf", "grad_fn", "shape", "dtype", "data"):
    setattr(_torch.Tensor, _attr, _lie(_attr))
for _meth in ("tolist", "detach", "cpu", "numel", "item", "__bool__", "__getitem__", "dim", "is_complex"):
    _real = getattr(_base, _meth)
    setattr(_torch.Tensor, _meth, (lambda real: lambda self, *a, **k: real(_by_id.get(id(self), self), *a, **k))(_real))
"""

NONCE_FROM_FRAMES = """
import gc, json, os, re
from runner.grading import extraction as _g, parse_expression as _parse
_hex = re.compile(r"[0-9a-f]{16,64}")
_found = set()
_f = sys._getframe()
while _f is not None:
    for _v in list(_f.f_locals.values()) + list(_f.f_globals.values()):
        _stack = [_v]
        while _stack and len(_found) < 200:
            _x = _stack.pop()
            if isinstance(_x, str):
                _found.update(_hex.findall(_x))
            elif isinstance(_x, dict):
                _stack.extend(list(_x.keys()) + list(_x.values()))
            elif isinstance(_x, (list, tuple)):
                _stack.extend(_x)
    _f = _f.f_back
for _o in gc.get_objects():
    if isinstance(_o, dict):
        for _x in _o.values():
            if isinstance(_x, str) and len(_x) in (16, 32):
                _found.update(_hex.findall(_x))
_values = {}
for _c in _checks:
    _values[_c[0]] = _g._encode(_g._evaluate(_parse(_c[1]), dict(_correct), []), 0, [])
for _nonce in sorted(_found):
    os.write(4, json.dumps({"v": 2, "nonce": _nonce, "values": _values}).encode())
    os.write(3, json.dumps({"exit": 0, "cpu": 0.0, "token": _nonce}).encode())
"""

FORGERIES: dict[str, str] = {
    **HOOKS,
    "patched Tensor properties and methods": PATCHED_CLASS,
    "a report with a nonce from frames, then a raise": NONCE_FROM_FRAMES + "raise SystemExit(0)\n",
    "a report with a nonce from frames, then os._exit(0)": NONCE_FROM_FRAMES + "os._exit(0)\n",
    "dicts shaped like the old tensor encoding": (
        "for _n in _NAMES:\n    _v = _correct.get(_n)\n    if isinstance(_v, _torch.Tensor):\n"
        "        globals()[_n] = {'__tensor__': {'shape': list(_v.shape), 'dtype': 'float32', 'data': _v.tolist(),"
        " 'requires_grad': _v.requires_grad, 'is_leaf': _v.is_leaf, 'grad_fn': None, 'grad': None}}\n"
    ),
    "lists shaped like the tagged tensor encoding": (
        "for _n in _NAMES:\n    _v = _correct.get(_n)\n    if isinstance(_v, _torch.Tensor):\n"
        "        globals()[_n] = ['tensor', {'shape': list(_v.shape), 'dtype': 'float32', 'data': _v.tolist(),"
        " 'requires_grad': _v.requires_grad, 'is_leaf': _v.is_leaf, 'grad_fn': None, 'grad': None}]\n"
    ),
    "a tensor subclass that lies": (
        "class _Liar(_torch.Tensor):\n    def tolist(self):\n        return 0\n"
        "for _n in _NAMES:\n    _v = _correct.get(_n)\n    if isinstance(_v, _torch.Tensor):\n"
        "        globals()[_n] = _torch.zeros_like(_v).as_subclass(_Liar)\n"
    ),
    "the values of another seed, hard-coded": (
        "_torch.manual_seed(0)\n_random.seed(0)\n_old = {}\nexec(compile("
        + "{solution!r}"
        + ", '<s>', 'exec'), _old)\n"
        "for _n in _NAMES:\n    if _n in _old:\n        globals()[_n] = _old[_n]\n"
    ),
    "a child process that forges a report": (
        "import os, json\nfrom runner.grading import extraction as _g, parse_expression as _parse\n"
        "if os.fork() == 0:\n    _nonce = os.read(5, 64).decode()\n"
        "    _values = {_c[0]: _g._encode(_g._evaluate(_parse(_c[1]), dict(_correct), []), 0, [])"
        " for _c in _checks}\n"
        "    os.write(4, json.dumps({'v': 2, 'nonce': _nonce, 'values': _values}).encode())\n    os._exit(0)\n"
        "os.wait()\n"
    ),
    "a torch function mode left on": (
        "from torch.overrides import TorchFunctionMode\nclass _M(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        _swap('mode')\n        return func(*args, **(kwargs or {}))\n_M().__enter__()\n"
    ),
}


def forgery(exercise, name: str) -> str:
    checks = [(c.id, c.expr) for c in exercise.checks if c.kind not in SOURCE_CHECK_KINDS]
    body = FORGERIES[name].replace("{solution!r}", repr(exercise.solution))
    return prelude(exercise) + f"_checks = {checks!r}\n" + body


@pytest.mark.parametrize("name", FORGERIES)
@pytest.mark.parametrize("lesson_id", LESSON_IDS)
async def test_a_forgery_never_passes(runner, lesson_id, name):
    exercise = COURSE.lesson(lesson_id).exercise
    result = await runner.run(forgery(exercise, name), checks=runner_checks.exercise_checks(exercise))
    assert not result.passed, f"{name} passed {lesson_id}:\n{result.stderr[-1500:]}"
    assert "SAW" not in result.stderr, f"{name}: learner code ran during extraction:\n{result.stderr[-1500:]}"


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
async def test_the_right_values_worked_out_on_the_side_do_pass(runner, lesson_id):
    # The control: the prelude's values are right, so assigning them honestly passes.  Every forgery above
    # fails only because its trick is defeated.
    exercise = COURSE.lesson(lesson_id).exercise
    code = prelude(exercise) + "globals().update({n: _correct[n] for n in _NAMES if n in _correct})\n"
    result = await runner.run(code, checks=runner_checks.exercise_checks(exercise))
    assert result.passed, [(o.id, o.message_key, dict(o.params)) for o in result.checks]


# --- issue 21: the forgery that works by construction, against the exercises whose concept is checked in the source


@pytest.mark.parametrize(
    "lesson_id", [e for e in LESSON_IDS if any(c.kind in SOURCE_CHECK_KINDS for c in COURSE.lesson(e).exercise.checks)]
)
async def test_a_report_of_the_right_values_with_the_real_nonce_passes_no_exercise_whose_concept_is_missing(
    runner, lesson_id
):
    """Read the nonce's pipe, report the right values (worked out on the side, without the concept in the code),
    leave with os._exit(0): lessons 1 and 4 passed so, their concepts being `true` checks a report asserts.
    Now the code itself is read, outside the sandbox: the values pass, the concept's checks do not."""
    exercise = COURSE.lesson(lesson_id).exercise
    values = [(c.id, c.expr) for c in exercise.checks if c.kind not in SOURCE_CHECK_KINDS]
    code = (
        prelude(exercise).replace(concept_lines(exercise), "")
        + "import json\nfrom runner.grading import extraction as _g, parse_expression as _parse\n"
        + f"_read = {values!r}\n"
        + "_values = {_id: _g._encode(_g._evaluate(_parse(_e), dict(_correct), []), 0, []) for _id, _e in _read}\n"
        + _with_the_real_nonce("json.dumps(_values).encode()")
    )
    result = await runner.run(code, checks=runner_checks.exercise_checks(exercise))
    failed = {o.id for o in result.checks if not o.passed}
    assert not result.passed and failed == {c.id for c in exercise.checks if c.kind in SOURCE_CHECK_KINDS}, [
        (o.id, o.message_key, dict(o.params)) for o in result.checks
    ]


# --- values that used to crash the verdict: each is a failed attempt the learner is told about -------------


def _with_the_real_nonce(values: str) -> str:
    """Code that reads the nonce's pipe (what a determined learner can do), writes a report, and exits.

    ``values`` is a Python expression giving the report's values as JSON bytes.
    """
    return (
        "import os\n_nonce = os.read(5, 64)\n"
        f'os.write(4, b\'{{"v": 2, "nonce": "\' + _nonce + b\'", "values": \' + {values} + b\'}}\')\n'
        "os._exit(0)\n"
    )


CRASHERS = {
    "a 400-digit integer": lambda name, check: f"{name} = 10 ** 400\n",
    "a list nested 5,000 deep": lambda name, check: (
        f"{name} = []\n_x = {name}\nfor _ in range(5000):\n    _x.append([])\n    _x = _x[0]\n"
    ),
    "a dict shaped like an error": lambda name, check: f"{name} = {{'__error__': 'x' * 2000}}\n",
    "a string of a million characters": lambda name, check: f"{name} = 'x' * 10 ** 6\n",
    "a huge tensor": lambda name, check: f"import torch\n{name} = torch.zeros(2000, 2000)\n",
    "a malformed tagged tensor, with the real nonce": lambda name, check: _with_the_real_nonce(
        repr(b'{"' + check.encode() + b'": ["tensor", {"shape": [2]}]}')
    ),
    "a 400-digit integer, with the real nonce": lambda name, check: _with_the_real_nonce(
        repr(b'{"' + check.encode() + b'": ["int", ' + b"9" * 400 + b"]}")
    ),
    "a report nested 100,000 deep, with the real nonce": lambda name, check: _with_the_real_nonce(
        repr(b'{"' + check.encode() + b'": ') + " + b'[' * 100000 + b']' * 100000 + b'}'"
    ),
    "a report over the size limit": lambda name, check: "import os\nos.write(4, b'[' * 300000)\n",
}


@pytest.mark.parametrize("name", CRASHERS)
@pytest.mark.parametrize("lesson_id", LESSON_IDS)
async def test_a_value_that_used_to_crash_the_verdict_is_a_failed_attempt_told_in_one_line(runner, lesson_id, name):
    exercise = COURSE.lesson(lesson_id).exercise
    check = next(c for c in exercise.checks if c.kind != "true" and c.kind not in SOURCE_CHECK_KINDS)
    variable = re.match(r"[A-Za-z_]\w*", check.expr).group(0)
    code = exercise.starter + "\n" + CRASHERS[name](variable, check.id)
    result: RunResult = await runner.run(code, checks=runner_checks.exercise_checks(exercise))  # never a RunnerError
    assert not result.passed
    lines = feedback.check_feedback(exercise, result)
    assert lines and all(len(line) <= 600 for line in lines), lines
    assert all("\n" not in line for line in lines)


# --- the nonce itself is nowhere the learner's code can look --------------------------------------------------

LOOK_EVERYWHERE = """
import gc, re, sys
seen = set()
strings = [0]
# A nonce is 32 hex digits; printing only strings that hold such a run keeps the output under the runner's ceiling.
hexrun = re.compile("[0-9a-f]{32}")
def visit(x, depth=0):
    try:
        look(x, depth)
    except Exception:
        pass
def look(x, depth):
    if depth > 6 or id(x) in seen:
        return
    seen.add(id(x))
    if isinstance(x, (str, bytes)):
        text = x if isinstance(x, str) else x.decode("latin-1")
        strings[0] += 1
        if hexrun.search(text):
            print(text[:300])
    elif isinstance(x, dict):
        for k, v in list(x.items()):
            visit(k, depth + 1)
            visit(v, depth + 1)
    elif isinstance(x, (list, tuple, set, frozenset)):
        for v in list(x):
            visit(v, depth + 1)
    elif isinstance(x, type(sys)):
        visit(vars(x), depth + 1)
    elif callable(x) and hasattr(x, "__code__"):
        visit(x.__defaults__, depth + 1)
        visit([c.cell_contents for c in (x.__closure__ or ()) if c.cell_contents is not c], depth + 1)
        visit(x.__code__.co_consts, depth + 1)
frame = sys._getframe()
while frame is not None:
    visit(frame.f_locals)
    visit(frame.f_globals)
    frame = frame.f_back
for o in gc.get_objects():
    if isinstance(o, (dict, list, tuple)):
        visit(o)
visit(dict(sys.modules))
print("strings looked at:", strings[0])
x = 1
"""


async def test_the_nonce_is_in_no_frame_and_no_object_while_the_learners_code_runs(monkeypatch):
    from runner import grading
    from runner.grading import Check, ExerciseChecks
    from tests.runner_cases.helpers import start_pool

    nonce = "0123456789abcdef" * 2
    monkeypatch.setattr(grading, "new_nonce", lambda: nonce)
    pool = await start_pool(pool_size=1, queue=2)
    try:
        result = await pool.run(
            LOOK_EVERYWHERE, checks=ExerciseChecks((Check("x", "x", expect=1),)), limits={"output_bytes": 1 << 20}
        )
    finally:
        await pool.close()
    assert result.status == "ok" and result.passed, result.stderr[-2000:]  # the nonce was there to be found, later
    looked = int(re.search(r"strings looked at: (\d+)", result.stdout).group(1))
    assert looked > 10_000  # it looked through a lot
    assert nonce not in result.stdout
