"""Outside the sandbox: the verdict on each check, from the parsed report and the expected values.  Pure.

No I/O, no torch, and no exception for any report: whatever the sandbox wrote is the learner's attempt.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ..result import CheckOutcome, MessageKey, Status
from .checks import Check, ExerciseChecks
from .report import MAX_ITEMS, Failed, Opaque, ReportError, TensorValue, parse_report
from .source import judge

SHOWN = 80  # characters of a value shown to the learner


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _data(v: Any) -> Any:
    return v.data if isinstance(v, TensorValue) else v


def _shape_of(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, TensorValue):
        return v.shape
    if _is_num(v):
        return ()
    if isinstance(v, list):
        if not v:
            return (0,)
        inner = _shape_of(v[0])
        if inner is None or any(_shape_of(x) != inner for x in v[1:]):
            return None
        return (len(v), *inner)
    return None


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if _is_num(a) and _is_num(b):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if math.isinf(fa) or math.isinf(fb):
            return fa == fb
        return abs(fa - fb) <= atol + rtol * abs(fb)
    if isinstance(a, bool) and isinstance(b, bool):
        return a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b, strict=True))
    return False


def _strict_eq(a: Any, b: Any) -> bool:
    """== that keeps bools apart from numbers (True is not 1 here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_eq(a[k], b[k]) for k in a)
    return (type(a) is type(b) and a == b) or (_is_num(a) and _is_num(b) and a == b)


def _flatten(d: Any) -> Iterator[Any]:
    if isinstance(d, list):
        for x in d:
            yield from _flatten(x)
    else:
        yield d


def _ratio(got: Any, expected: Any) -> int | None:
    """k when every element of ``got`` is k times the expected one (k a whole number from 2 to 100)."""
    if _shape_of(got) is None or _shape_of(got) != _shape_of(expected):
        return None
    g, e = list(_flatten(_data(got))), list(_flatten(_data(expected)))
    if not g or not all(_is_num(x) and math.isfinite(x) for x in g + e):
        return None
    nonzero = [(x, y) for x, y in zip(g, e, strict=True) if abs(y) > 1e-9]
    if not nonzero:
        return None
    k = round(nonzero[0][0] / nonzero[0][1])
    if not 2 <= k <= 100:
        return None
    return k if all(_close(x, k * y, 1e-4, 1e-6) for x, y in zip(g, e, strict=True)) else None


def _requires_grad(v: Any) -> bool:
    return isinstance(v, TensorValue) and v.requires_grad


def _clip(s: str, limit: int = SHOWN) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


# Significant digits of a float shown to the learner: enough to read, more only where fewer would make what the
# code gave and what was expected look the same.
DIGITS = 4
MAX_DIGITS = 9
NUMBERS_MAX = 64  # numbers of a value passed on as ``got_numbers`` / ``expected_numbers``


def _float_text(x: float, digits: int) -> str:
    """A float rounded to ``digits`` significant digits, still reading as a float (``2.0``, not ``2``)."""
    if not math.isfinite(x):
        return repr(x)
    text = f"{x:.{digits}g}"
    return text if any(c in text for c in ".en") else text + ".0"


def _summary(v: Any, digits: int = DIGITS) -> str:
    """A value as the learner would see it printed, rounded, and cut at a whole item to SHOWN characters."""
    if isinstance(v, Failed):
        return v.error
    if isinstance(v, Opaque):
        return _clip(f"<{v.type_name}>")
    return _clip(_plain_repr(v, digits, SHOWN))


def _items_text(open_: str, items: Iterator[str], close: str, room: int) -> str:
    """``open_ item, item, … close`` with as many whole items as fit in ``room`` characters."""
    shown: list[str] = []
    used = len(open_) + len(close)
    for item in items:
        if used + len(item) + 2 > room - 3:
            shown.append("…")
            break
        shown.append(item)
        used += len(item) + 2
    return open_ + ", ".join(shown) + close


def _plain_repr(v: Any, digits: int = DIGITS, room: int = SHOWN) -> str:
    if isinstance(v, TensorValue):
        return _tensor_repr(v, digits, room)
    if isinstance(v, (Failed, Opaque)):
        return _summary(v)
    if isinstance(v, list):
        return _items_text("[", (_plain_repr(x, digits, room) for x in v[:MAX_ITEMS]), "]", room)
    if isinstance(v, dict):
        pairs = (f"{k!r}: {_plain_repr(x, digits, room)}" for k, x in list(v.items())[:MAX_ITEMS])
        return _items_text("{", pairs, "}", room)
    if isinstance(v, str):
        return repr(v[:SHOWN])
    if isinstance(v, float):
        return _float_text(v, digits)
    return repr(v)  # None, bools and ints as Python prints them


# Dtypes torch's repr leaves unsaid: the defaults for floats, ints and bools.
_IMPLIED_DTYPES = ("float32", "int64", "bool")


def _tensor_repr(t: TensorValue, digits: int = DIGITS, room: int = SHOWN) -> str:
    """A tensor as torch prints it, which is what learners read: tensor([4., 8.], requires_grad=True).

    (Its numbers rounded to ``digits`` significant digits, as every number shown: torch shows four decimals.)"""
    if t.data is None:
        body = f"size={list(t.shape)}"
    else:
        flat = list(_flatten(t.data))
        floating = t.dtype.startswith(("float", "bfloat", "complex"))
        integral = all(_is_num(x) and math.isfinite(x) and float(x).is_integer() for x in flat)

        def number(x: Any) -> str:
            if isinstance(x, bool) or not floating:
                return str(x)
            if not math.isfinite(x):
                return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
            return f"{int(x)}." if integral else _float_text(x, digits)

        def nested(d: Any) -> str:
            return _items_text("[", (nested(x) for x in d), "]", room) if isinstance(d, list) else number(d)

        body = nested(t.data)
    extras = [] if t.dtype in _IMPLIED_DTYPES else [f"dtype=torch.{t.dtype}"]
    if t.grad_fn:
        extras.append(f"grad_fn=<{t.grad_fn}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *extras]) + ")"


def _shown_apart(got: Any, expected: Any) -> tuple[str, str]:
    """``got`` and ``expected`` as the learner reads them: rounded, unless rounding would make them look equal."""
    digits = DIGITS
    while (shown := (_summary(got, digits), _summary(expected, digits)))[0] == shown[1] and digits < MAX_DIGITS:
        digits += 1
    return shown


def _numbers(v: Any) -> list[float] | None:
    """A number, or a list or tensor of numbers, as a flat list (at most NUMBERS_MAX), for the bot to reason on."""
    data = _data(v)
    if _is_num(data):
        return [float(data)]
    if not isinstance(data, list):
        return None
    flat = list(_flatten(data))
    if not flat or len(flat) > NUMBERS_MAX or not all(_is_num(x) and math.isfinite(x) for x in flat):
        return None
    return [float(x) for x in flat]


def _matches(check: Check, got: Any, expected: Any) -> bool:
    if check.kind == "true":
        return _data(got) is True and (not isinstance(got, TensorValue) or got.shape == ())
    if check.kind in ("equal", "close", "same"):
        if isinstance(expected, TensorValue):
            # Compared with what the reference solution's code produced: a tensor, and not still part of a graph
            # where the solution's is not (a forgotten detach() or no_grad() is a wrong answer); for "same", in
            # the same place of the graph exactly (a forgotten requires_grad_() is a wrong answer too).
            if not isinstance(got, TensorValue) or (got.requires_grad and not expected.requires_grad):
                return False
            if check.kind == "same" and (got.requires_grad, got.is_leaf) != (expected.requires_grad, expected.is_leaf):
                return False
            if got.data is None or expected.data is None:
                return False
        g, e = _data(got), _data(expected)
        if check.kind == "equal":
            tensors = isinstance(got, TensorValue) or isinstance(expected, TensorValue)
            return (not tensors or _shape_of(got) == _shape_of(expected)) and _strict_eq(g, e)
        shape = _shape_of(got)
        return shape is not None and shape == _shape_of(expected) and _close(g, e, check.rtol, check.atol)
    if check.kind == "shape":
        want = expected.shape if isinstance(expected, TensorValue) else expected
        return isinstance(want, (list, tuple)) and _shape_of(got) == tuple(want)
    if check.kind == "dtype":
        want = expected.dtype if isinstance(expected, TensorValue) else expected
        return isinstance(got, TensorValue) and got.dtype == want
    return False  # pragma: no cover - Check validates kinds


def compare(check: Check, got: Any, expected: Any) -> tuple[bool, MessageKey | str, dict[str, Any]]:
    """(passed, message_key, params) for one check.  Pure.

    A mismatch's params are what the bot may show or reason about: ``got`` and ``expected`` as the
    learner would see them printed (rounded to DIGITS significant digits), ``got_numbers`` and
    ``expected_numbers`` (both values as flat lists of numbers, where they are numbers), ``ratio`` (got is that
    whole multiple of expected), ``got_none``
    and ``still_requires_grad`` (got is a tensor that requires grad where the expected value does not).
    """
    fail_key = check.message_key
    if isinstance(got, Failed):
        return False, fail_key or MessageKey.ERROR, {"expr": check.expr, "error": got.error}
    if isinstance(got, Opaque) and check.kind != "true":
        return False, fail_key or MessageKey.WRONG_TYPE, {"expr": check.expr, "got": _summary(got)}
    if _matches(check, got, expected):
        return True, check.pass_key, {"expr": check.expr}
    params: dict[str, Any] = {"expr": check.expr, "got": _summary(got)}
    if check.kind != "true":
        params["got"], params["expected"] = _shown_apart(got, expected)
        if check.kind in ("equal", "close", "same"):
            got_numbers, expected_numbers = _numbers(got), _numbers(expected)
            if got_numbers is not None and expected_numbers is not None:
                params["got_numbers"], params["expected_numbers"] = got_numbers, expected_numbers
            ratio = _ratio(got, expected)
            if ratio is not None:
                params["ratio"] = ratio
            if got is None and expected is not None:
                params["got_none"] = True
            if _requires_grad(got) and not _requires_grad(expected):
                params["still_requires_grad"] = True
            if _requires_grad(expected) and isinstance(got, TensorValue) and not got.requires_grad:
                params["lost_requires_grad"] = True
    return False, fail_key or MessageKey.MISMATCH, params


def verify(
    checks: ExerciseChecks,
    status: Status | str,
    raw_report: bytes | None,
    nonce: str,
    reference_values: Mapping[str, Any] | None = None,
    source: Mapping[str, bool] | None = None,
) -> tuple[tuple[CheckOutcome, ...], bool]:
    """All outcomes and the overall verdict.  Pure: no I/O, no torch, and no exception for any report.

    ``source``: the verdicts of the checks of the submitted source by id (``judge_source``): judged whatever
    the run did, since they read the code, not the run.
    """
    values: dict[str, Any] | None = None
    reason = ""
    if status == Status.OK:
        try:
            values = parse_report(raw_report or b"", nonce)
        except ReportError as e:
            reason = str(e.args[0])
    outcomes = []
    for c in checks.checks:
        if c.of_source:
            met = bool(source and source.get(c.id))
            params = {"kind": c.kind, "expr": c.expr}
            outcomes.append(CheckOutcome(c.id, met, c.pass_key if met else c.message_key or MessageKey.SOURCE, params))
            continue
        if status != Status.OK:
            outcomes.append(CheckOutcome(c.id, False, MessageKey.NOT_RUN, {"status": status}))
            continue
        if values is None or c.id not in values:
            outcomes.append(
                CheckOutcome(c.id, False, MessageKey.NO_REPORT, {"status": status, "reason": reason or "missing"})
            )
            continue
        expected = c.expect
        if c.from_reference:
            if reference_values is None or c.id not in reference_values:
                outcomes.append(CheckOutcome(c.id, False, MessageKey.NO_REFERENCE, {}))
                continue
            expected = reference_values[c.id]
        try:
            passed, key, params = compare(c, values[c.id], expected)
        except Exception:  # a value no rule foresaw: this check fails, the others are still judged
            passed, key, params = False, MessageKey.NO_REPORT, {"status": status, "reason": "malformed"}
        outcomes.append(CheckOutcome(c.id, passed, key, params))
    all_passed = status == Status.OK and bool(outcomes) and all(o.passed for o in outcomes)
    return tuple(outcomes), all_passed


def judge_source(checks: ExerciseChecks, code: str) -> dict[str, bool]:
    """The checks of the submitted source, by id (parses ``code`` at most once; run it off the event loop)."""
    return {c.id: judge(code, c.kind, c.expr, c.expect) for c in checks.checks if c.of_source}
