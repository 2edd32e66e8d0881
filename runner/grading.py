"""Graded checks: hidden expectations the learner's code cannot forge.

Threat model
------------
The learner's code runs first, in the very process where any in-sandbox check
code would run.  It can monkeypatch anything (``torch.allclose``, builtins,
``torch.Tensor`` methods), install torch function/dispatch modes, print
anything (including fake "PASSED" lines or fake protocol frames), write to any
descriptor it finds, fork, or leave early with ``sys.exit`` / ``os._exit``.
So nothing computed in that process may *decide* a verdict.

Design
------
* A check is an **extractor**: a Python expression (``"x.grad"``,
  ``"f(torch.tensor(3.0))"``) evaluated in the learner's namespace *after*
  the learner's code ran to its end.  The sandbox turns its value into plain
  data (numbers, strings, nested lists, and tensors as
  ``{"__tensor__": {shape, dtype, data, requires_grad, grad, ...}}``) and
  writes it, with the job's random **nonce**, to a dedicated pipe (fd 4) —
  never to stdout/stderr, which are not parsed at all.
* The **expected values never enter the sandbox**.  The runner, outside,
  compares the plain data with them (``verify``, pure code, no torch).
* **Early exit = no report = fail**: the report is written only when the
  code ran to completion without an exception or ``SystemExit``; a job that
  does not end with status "ok", or whose report is missing, duplicated,
  malformed, oversized or carries the wrong nonce, fails every check.
* Extraction uses references to ``type``, ``eval``, ``json.dumps``,
  ``os.write`` and torch's C-level tensor accessors captured in the zygote
  *before* learner code exists, runs with torch function overrides disabled,
  accepts only exact ``torch.Tensor`` / ``nn.Parameter`` instances (a subclass
  is reported as an opaque object) and refuses to report while a torch
  function or dispatch mode is active.  So casual monkeypatching of torch or
  builtins changes nothing.

What remains, by construction: a determined learner can still subvert the
in-process extraction (e.g. by rewriting a captured function's code) and
report any *value* they like — but only values they could also have produced
by honest assignment (``x.grad = torch.tensor(6.)``).  Forging therefore buys
nothing over hard-coding the answer, which is a property of the exercise,
not a hole in the runner.  Exercises that must resist hard-coding use a
``reference`` solution and a per-run ``seed``: expected values come from
running the reference (a separate clean job, same seed), so the learner
cannot know them in advance without solving the task.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .result import CheckOutcome

KINDS = ("equal", "close", "shape", "dtype", "true")
MAX_REPORT = 1 << 20  # bytes of a report the runner will read
MAX_ELEMENTS = 10_000  # tensor elements / list items extracted per value
MAX_DEPTH = 6
MAX_STR = 2_000


@dataclass(frozen=True)
class Check:
    id: str
    expr: str  # evaluated in the learner's namespace (in the sandbox)
    kind: str = "close"  # how extracted and expected values are compared
    expect: Any = None  # plain data; None with a reference = "take the reference's"
    rtol: float = 1e-5
    atol: float = 1e-6
    message_key: str = ""  # locale key on failure ("" = generic per reason)
    pass_key: str = "checks.passed"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidRequest(f"check {self.id!r}: unknown kind {self.kind!r} (one of {KINDS})")
        if not self.id or not isinstance(self.expr, str) or not self.expr.strip():
            raise InvalidRequest("a check needs an id and an expression")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "expr": self.expr,
            "kind": self.kind,
            "expect": self.expect,
            "rtol": self.rtol,
            "atol": self.atol,
            "message_key": self.message_key,
            "pass_key": self.pass_key,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        known = {"id", "expr", "kind", "expect", "rtol", "atol", "message_key", "pass_key"}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class ExerciseChecks:
    checks: tuple[Check, ...]
    # Trusted reference solution: when set, checks without ``expect`` compare
    # against what the same expressions give after running it.
    reference: str | None = None
    # Seed for random, torch (and numpy) in both runs; None = a fresh random one.
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))
        ids = [c.id for c in self.checks]
        if not ids:
            raise InvalidRequest("ExerciseChecks needs at least one check")
        if len(set(ids)) != len(ids):
            raise InvalidRequest("check ids must be unique")
        if self.reference is None and any(c.expect is None and c.kind != "true" for c in self.checks):
            raise InvalidRequest("a check without 'expect' needs a reference solution")

    @property
    def needs_reference(self) -> bool:
        return self.reference is not None and any(c.expect is None and c.kind != "true" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"checks": [c.to_dict() for c in self.checks], "reference": self.reference, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExerciseChecks:
        try:
            return cls(
                checks=tuple(Check.from_dict(c) for c in d["checks"]), reference=d.get("reference"), seed=d.get("seed")
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise InvalidRequest(f"malformed checks: {e}") from None


def new_nonce() -> str:
    return secrets.token_hex(16)


def job_spec(checks: ExerciseChecks, nonce: str) -> dict[str, Any]:
    """What goes into the sandbox: expressions and the nonce, no expectations."""
    return {"nonce": nonce, "exprs": {c.id: c.expr for c in checks.checks}}


# --- inside the sandbox: extraction ----------------------------------------

_P: dict[str, Any] = {}


def capture_pristine() -> None:
    """Called in the zygote before any learner code exists."""
    import builtins

    import torch

    B = torch._C.TensorBase
    _P.update(
        type=builtins.type,
        isinstance=builtins.isinstance,
        eval=builtins.eval,
        compile=builtins.compile,
        len=builtins.len,
        str=builtins.str,
        repr=builtins.repr,
        int=builtins.int,
        float=builtins.float,
        bool=builtins.bool,
        list=builtins.list,
        tuple=builtins.tuple,
        dict=builtins.dict,
        range=builtins.range,
        zip=builtins.zip,
        memoryview=builtins.memoryview,
        dumps=json.dumps,
        write=os.write,
        close=os.close,
        Tensor=torch.Tensor,
        Parameter=torch.nn.Parameter,
        dtype=torch.dtype,
        Size=torch.Size,
        tolist=B.tolist,
        detach=B.detach,
        numel=B.numel,
        flatten=B.flatten,
        is_complex=B.is_complex,
        cpu=B.cpu,
        g_grad=B.__dict__["grad"].__get__,
        g_rg=B.__dict__["requires_grad"].__get__,
        g_leaf=B.__dict__["is_leaf"].__get__,
        g_fn=B.__dict__["grad_fn"].__get__,
        g_retains=B.__dict__["retains_grad"].__get__,
        g_shape=B.__dict__["shape"].__get__,
        g_dtype=B.__dict__["dtype"].__get__,
        no_tf=torch._C.DisableTorchFunction,
        tf_modes=getattr(torch._C, "_len_torch_function_stack", lambda: 0),
        td_modes=getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0),
    )


def _tensor(t: Any, depth: int) -> dict[str, Any]:
    P = _P
    shape = P["list"](P["g_shape"](t))
    dtype = P["str"](P["g_dtype"](t)).replace("torch.", "")
    out: dict[str, Any] = {
        "shape": shape,
        "dtype": dtype,
        "requires_grad": P["bool"](P["g_rg"](t)),
        "is_leaf": P["bool"](P["g_leaf"](t)),
    }
    fn = P["g_fn"](t)
    out["grad_fn"] = None if fn is None else P["str"](P["type"](fn).__name__)
    n = P["numel"](t)
    if n > MAX_ELEMENTS or P["is_complex"](t):
        out["data"] = None
        out["too_large"] = n > MAX_ELEMENTS
    else:
        out["data"] = P["tolist"](P["cpu"](P["detach"](t)))
    # A non-leaf's .grad is None unless retained; reading it anyway prints a UserWarning
    # into the learner's output that their code never caused.
    g = P["g_grad"](t) if out["is_leaf"] or P["g_retains"](t) else None
    out["grad"] = None if g is None or depth > 1 else _value(g, depth + 1)
    return {"__tensor__": out}


def _value(v: Any, depth: int = 0) -> Any:
    P = _P
    T = P["type"](v)
    if v is None or T is P["bool"] or T is P["int"] or T is P["str"]:
        if T is P["str"] and P["len"](v) > MAX_STR:
            return v[:MAX_STR]
        return v
    if T is P["float"]:
        return v
    if T is P["Tensor"] or T is P["Parameter"]:
        return _tensor(v, depth)
    if T is P["Size"]:
        return [P["int"](x) for x in P["tuple"].__iter__(v)]
    if T is P["dtype"]:
        return P["str"](v).replace("torch.", "")
    if depth >= MAX_DEPTH:
        return {"__object__": "too deep"}
    if T is P["list"] or T is P["tuple"]:
        items = P["list"].__iter__(v) if T is P["list"] else P["tuple"].__iter__(v)
        out = []
        for _i, x in P["zip"](P["range"](MAX_ELEMENTS), items):
            out.append(_value(x, depth + 1))
        return out
    if T is P["dict"]:
        out_d = {}
        for _i, (k, x) in P["zip"](P["range"](MAX_ELEMENTS), P["dict"].items(v)):
            if P["type"](k) is P["str"]:
                out_d[k] = _value(x, depth + 1)
        return out_d
    return {"__object__": P["str"](T.__name__)[:100]}


def extract(ns: dict[str, Any], exprs: Mapping[str, str]) -> dict[str, Any]:
    P = _P
    values: dict[str, Any] = {}
    for cid, expr in exprs.items():
        try:
            if P["tf_modes"]() or P["td_modes"]():
                raise RuntimeError("a torch function/dispatch mode is active")
            with P["no_tf"]():
                v = P["eval"](P["compile"](expr, "<check>", "eval", dont_inherit=True), ns)
                values[cid] = _value(v)
        except BaseException as e:
            try:
                values[cid] = {"__error__": P["str"](P["type"](e).__name__)[:100]}
            except BaseException:
                values[cid] = {"__error__": "?"}
    return values


def write_report(fd: int, ns: dict[str, Any], spec: Mapping[str, Any]) -> None:
    P = _P
    try:
        values = extract(ns, spec["exprs"])
        data = P["dumps"]({"nonce": spec["nonce"], "values": values}).encode()
    except BaseException:
        data = b'{"bad": true}'
    try:
        view = P["memoryview"](data)
        while view:
            n = P["write"](fd, view)
            view = view[n:]
        P["close"](fd)
    except BaseException:
        pass


# --- outside the sandbox: the verdict (pure) --------------------------------


def parse_report(raw: bytes, nonce: str) -> dict[str, Any] | None:
    """The values of a well-formed report carrying our nonce, else None."""
    if not raw or len(raw) > MAX_REPORT:
        return None
    try:
        msg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None  # includes junk or two reports written back to back
    if not isinstance(msg, dict) or set(msg) != {"nonce", "values"}:
        return None
    if not isinstance(msg["nonce"], str) or not secrets.compare_digest(msg["nonce"], nonce):
        return None
    values = msg["values"]
    return values if isinstance(values, dict) else None


def _data(v: Any) -> Any:
    if isinstance(v, dict) and "__tensor__" in v and isinstance(v["__tensor__"], dict):
        return v["__tensor__"].get("data")
    return v


def _shape_of(v: Any) -> list[int] | None:
    if isinstance(v, dict) and "__tensor__" in v:
        s = v["__tensor__"].get("shape")
        return list(s) if isinstance(s, list) else None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return []
    if isinstance(v, list):
        if not v:
            return [0]
        inner = _shape_of(v[0])
        if inner is None or any(_shape_of(x) != inner for x in v[1:]):
            return None
        return [len(v), *inner]
    return None


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


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
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b, strict=False))
    return False


def _strict_eq(a: Any, b: Any) -> bool:
    """== that keeps bools apart from numbers (True is not 1 here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_eq(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_eq(a[k], b[k]) for k in a)
    return (type(a) is type(b) and a == b) or (_is_num(a) and _is_num(b) and a == b)


def _summary(v: Any, limit: int = 80) -> str:
    if isinstance(v, dict) and "__error__" in v:
        return str(v["__error__"])
    if isinstance(v, dict) and "__object__" in v:
        return f"<{v['__object__']}>"
    d = _data(v)
    if isinstance(v, dict) and "__tensor__" in v:
        s = _tensor_repr(v["__tensor__"], d)
    else:
        s = json.dumps(d)
    return s if len(s) <= limit else s[: limit - 1] + "…"


# Dtypes torch's repr leaves unsaid: the defaults for floats, ints and bools.
_IMPLIED_DTYPES = ("float32", "int64", "bool")


def _tensor_repr(t: Mapping[str, Any], data: Any) -> str:
    """A tensor as torch prints it, which is what learners read: tensor([4., 8.], requires_grad=True)."""
    dtype = str(t.get("dtype"))
    if data is None:
        body = f"size={t.get('shape')}"
    else:
        flat = list(_flatten(data))
        floating = dtype.startswith(("float", "bfloat", "complex"))
        integral = all(isinstance(x, (int, float)) and math.isfinite(x) and float(x).is_integer() for x in flat)

        def number(x: Any) -> str:
            if isinstance(x, bool) or not floating:
                return str(x)
            if not math.isfinite(x):
                return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
            return f"{int(x)}." if integral else f"{x:.4f}"

        def nested(d: Any) -> str:
            return "[" + ", ".join(nested(x) for x in d) + "]" if isinstance(d, list) else number(d)

        body = nested(data)
    extras = [] if dtype in _IMPLIED_DTYPES else [f"dtype=torch.{dtype}"]
    if t.get("grad_fn"):
        extras.append(f"grad_fn=<{t['grad_fn']}>")
    elif t.get("requires_grad"):
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *extras]) + ")"


def _flatten(d: Any) -> Iterator[Any]:
    if isinstance(d, list):
        for x in d:
            yield from _flatten(x)
    else:
        yield d


def compare(check: Check, got: Any, expected: Any) -> tuple[bool, str, dict[str, Any]]:
    """(passed, message_key, params) for one check.  Pure."""
    fail_key = check.message_key
    if isinstance(got, dict) and "__error__" in got:
        return False, fail_key or "checks.error", {"expr": check.expr, "error": got["__error__"]}
    if isinstance(got, dict) and "__object__" in got and check.kind != "true":
        return False, fail_key or "checks.wrong_type", {"expr": check.expr, "got": _summary(got)}
    if check.kind == "true":
        ok = _data(got) is True
    elif check.kind == "equal":
        ok = _strict_eq(_data(got), _data(expected))
    elif check.kind == "close":
        g, e = _data(got), _data(expected)
        gs, es = _shape_of(got), _shape_of(expected)
        ok = gs is not None and gs == es and _close(g, e, check.rtol, check.atol)
    elif check.kind == "shape":
        want = expected.get("__tensor__", {}).get("shape") if isinstance(expected, dict) else expected
        ok = _shape_of(got) == (list(want) if isinstance(want, (list, tuple)) else want)
    elif check.kind == "dtype":
        want = expected["__tensor__"]["dtype"] if isinstance(expected, dict) and "__tensor__" in expected else expected
        ok = isinstance(got, dict) and "__tensor__" in got and got["__tensor__"].get("dtype") == want
    else:  # pragma: no cover - Check validates kinds
        ok = False
    if ok:
        return True, check.pass_key, {"expr": check.expr}
    return False, fail_key or "checks.mismatch", {"expr": check.expr, "got": _summary(got)}


def verify(
    checks: ExerciseChecks,
    status: str,
    raw_report: bytes | None,
    nonce: str,
    reference_values: Mapping[str, Any] | None = None,
) -> tuple[tuple[CheckOutcome, ...], bool]:
    """All outcomes and the overall verdict.  Pure: no I/O, no torch."""
    values = parse_report(raw_report or b"", nonce) if status == "ok" else None
    outcomes = []
    for c in checks.checks:
        if values is None:
            key = "checks.no_report" if status == "ok" else "checks.not_run"
            outcomes.append(CheckOutcome(c.id, False, key, {"status": status}))
            continue
        if c.id not in values:
            outcomes.append(CheckOutcome(c.id, False, "checks.no_report", {"status": status}))
            continue
        expected = c.expect
        if expected is None and c.kind != "true":
            if reference_values is None or c.id not in reference_values:
                outcomes.append(CheckOutcome(c.id, False, "checks.no_reference", {}))
                continue
            expected = reference_values[c.id]
        passed, key, params = compare(c, values[c.id], expected)
        outcomes.append(CheckOutcome(c.id, passed, key, params))
    all_passed = status == "ok" and bool(outcomes) and all(o.passed for o in outcomes)
    return tuple(outcomes), all_passed
