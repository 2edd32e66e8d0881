"""Graded checks: verdicts decided outside the sandbox, from values the learner's code cannot make worth anything.

Threat model
------------
The learner's code runs first, in the very process where the values the checks read are extracted.  It
can monkeypatch anything (``torch.Tensor`` properties, builtins, ``json``), install profile, trace and
audit hooks, gc callbacks and signal handlers, start threads and processes, write to every descriptor it
inherits, leave early with ``sys.exit`` / ``os._exit``, and, with enough effort, rewrite the code objects
of this very module.  So nothing computed in that process may *decide* a verdict, and in the end any value
it reports may have been chosen by the learner.  The design makes a chosen value worthless, and makes
choosing one deliberate work rather than an accident or a three-line trick.

1. **Randomised inputs and a reference solution** (the defence that holds whatever happens in the
   sandbox).  The runner seeds ``random`` and torch before the learner's code with a per-run seed, and
   exercises build their inputs from it (``torch.randint(1, 6, (3,))``).  A check without ``expect`` is
   compared with what the same expression gives after the exercise's trusted ``reference`` solution ran
   in a separate, clean job with the same seed.  The expected values never enter the learner's process.
   A hard-coded or forged value is right only for a run whose inputs the learner could not know before
   it started: to choose the right value, the learner has to compute it, which is solving the exercise.
   ``bot.content.proof`` (``coursebot lint --run``, and tests/test_exercises.py) proves in the real runner
   that no hard-coded answer passes the reference-compared checks, for fixed pairs of seeds.
2. **The status comes from the process's real end.**  A graded job's status is the wait status the
   zygote reaps, never a "done" message the learner could write; an exception or a non-zero exit fails
   every check, and the report is written only after the code ran to its end.
3. **The nonce is not in the learner's process** while the learner's code runs: it waits in a pipe
   (``NONCE_FD``) that extraction reads only after the code ended and everything below holds.  No frame
   or object holds it, so walking frames or ``gc`` finds nothing to forge a report with.
4. **Extraction the learner cannot steer.**  Check expressions are parsed *here*, outside, into a small
   tree (names, tensor attributes from a fixed list, ``[int]``, ``not``/``and``/``or``, ``is None``;
   ``parse_expression``) and evaluated inside without ``eval``/``compile``: names are read from a copy
   of the namespace with exact ``str`` keys, tensors only through getters captured from
   ``torch._C.TensorBase`` in the zygote before any learner code existed, and only on exact
   ``torch.Tensor`` / ``nn.Parameter`` instances (a subclass is an opaque object).  Before the nonce is
   read (``_neutralise``): profile and trace hooks are cleared, every other process of the job is
   killed, every signal is ignored and blocked, the cyclic gc is off, and then it is verified, without
   any audited call a learner's audit hook could see, that no hook came back and no other thread
   exists; otherwise extraction refuses and the attempt fails.  Every object extraction touches is kept
   alive until the process exits, so no ``__del__`` or weakref callback runs during it, and the report
   is encoded by the C JSON encoder captured in the zygote.
5. **A tagged encoding and a hostile parser.**  Every value in a report is tagged (``["tensor", {...}]``,
   ``["dict", [[k, v], ...]]``, ``["int", 3]``, ...), so a learner's dict can never read as a tensor or
   an error.  ``parse_report`` treats the bytes as hostile: size-, depth- and count-bounded, ints bounded,
   every field schema-checked; a malformed, oversized or refused report is a failed attempt with a reason
   (``checks.no_report``), never an infrastructure error.  Each check is compared in its own guard.

What remains, and why it buys nothing: a learner who reads ``NONCE_FD`` themselves, writes a report and
ends with ``os._exit(0)``, or who rewrites this module's functions (reachable through frames) or torch's
kernels (``torch.library``) before extraction, can report values of their choosing.  Those are values
they could also have produced by honest assignment (``x.grad = torch.tensor(6.)``), and a reference-
compared value is right only if computed from this run's random inputs.  ``true`` checks state facts
(``w.is_leaf``) that are as cheap to make true honestly as to forge; exercises put their weight on
reference-compared values.  The Docker backend passes the nonce in the job's arguments (weaker: point 3
does not hold there), and points 1, 2, 4 and 5 hold as in the sandbox.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidRequest
from .result import CheckOutcome

KINDS = ("equal", "close", "shape", "dtype", "true")

# Bounds of a report (the runner reads at most MAX_REPORT bytes of it; what extraction writes stays below).
MAX_REPORT = 256 * 1024  # bytes
MAX_ITEMS = 100  # items of a list or dict reported; a longer one is reported as too long
MAX_ELEMENTS = 1_000  # elements of a tensor whose data is reported
MAX_DIMS = 8  # dimensions of a tensor
MAX_DEPTH = 4  # nesting of lists and dicts in a reported value
MAX_STR = 200  # characters of a string reported
INT_BOUND = 2**63  # ints outside (-INT_BOUND, INT_BOUND) are not compared
MAX_NAME = 60  # characters of a type or error name
SHOWN = 80  # characters of a value shown to the learner

# Where, in the learner's process, the report goes and the nonce waits (see zygote.py).
REPORT_FD = 4
NONCE_FD = 5
NONCE_HEX = 32  # characters of a nonce (new_nonce)

# Why a report could not be used (the ``reason`` of checks.no_report): the bot words each one.
NO_REPORT_REASONS = ("missing", "malformed", "too_large", "threads", "hooks", "nonce")
# What extraction itself may say instead of values (write_report).
_REFUSALS = tuple(r for r in NO_REPORT_REASONS if r != "missing")


# --- check expressions: parsed here, evaluated inside -----------------------

# The tensor attributes a check may read, each through a getter captured before learner code.
TENSOR_ATTRIBUTES = ("grad", "requires_grad", "is_leaf", "grad_fn", "shape", "dtype")
EXPR_MAX_NODES = 32
EXPR_MAX_DEPTH = 8
_CONSTANTS = (type(None), bool, int, float, str)


def parse_expression(expr: str) -> list[Any]:
    """The check expression as a tree extraction evaluates, or InvalidRequest naming what is not allowed.

    Allowed: names, the attributes in TENSOR_ATTRIBUTES, ``[int]``, ``not``, ``and``, ``or``,
    ``is None`` / ``is not None``, and constants.  Nothing else runs in the learner's process.
    """
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise InvalidRequest(f"{expr!r} is not a Python expression ({e.msg})") from None
    count = [0]

    def node(n: ast.expr, depth: int) -> list[Any]:
        count[0] += 1
        if count[0] > EXPR_MAX_NODES or depth > EXPR_MAX_DEPTH:
            raise InvalidRequest(f"{expr!r} is too long for a check")
        if isinstance(n, ast.Name):
            return ["name", n.id]
        if isinstance(n, ast.Constant) and type(n.value) in _CONSTANTS:
            return ["const", n.value]
        if isinstance(n, ast.Attribute):
            if n.attr not in TENSOR_ATTRIBUTES:
                raise InvalidRequest(
                    f"{expr!r}: a check may read only these attributes: {', '.join(TENSOR_ATTRIBUTES)}"
                )
            return ["attr", node(n.value, depth + 1), n.attr]
        if isinstance(n, ast.Subscript):
            index = n.slice
            if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
                index = index.operand
                sign = -1
            else:
                sign = 1
            if not (isinstance(index, ast.Constant) and type(index.value) is int):
                raise InvalidRequest(f"{expr!r}: a check may index only with a whole number, like [0] or [-1]")
            return ["item", node(n.value, depth + 1), sign * index.value]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return ["not", node(n.operand, depth + 1)]
        if isinstance(n, ast.BoolOp):
            return ["and" if isinstance(n.op, ast.And) else "or", [node(v, depth + 1) for v in n.values]]
        if (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], (ast.Is, ast.IsNot))
            and isinstance(n.comparators[0], ast.Constant)
            and n.comparators[0].value is None
        ):
            return ["is_none", node(n.left, depth + 1), isinstance(n.ops[0], ast.IsNot)]
        raise InvalidRequest(
            f"{expr!r}: a check reads variables and their tensor attributes only "
            "(names, .grad, .requires_grad, .is_leaf, .grad_fn, .shape, .dtype, [i], not, and, or, is None)"
        )

    return node(tree, 0)


@dataclass(frozen=True)
class Check:
    id: str
    expr: str  # a check expression (parse_expression); evaluated in the learner's namespace (in the sandbox)
    kind: str = "close"  # how extracted and expected values are compared
    expect: Any = None  # plain data; None with a reference = "take the reference's"
    rtol: float = 1e-5
    atol: float = 1e-6
    message_key: str = ""  # locale key on failure ("" = generic per reason)
    pass_key: str = "checks.passed"
    tree: list[Any] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidRequest(f"check {self.id!r}: unknown kind {self.kind!r} (one of {KINDS})")
        if not self.id or not isinstance(self.id, str) or not isinstance(self.expr, str) or not self.expr.strip():
            raise InvalidRequest("a check needs an id and an expression")
        try:
            tree = parse_expression(self.expr)
        except InvalidRequest as e:
            raise InvalidRequest(f"check {self.id!r}: {e}") from None
        object.__setattr__(self, "tree", tree)

    @property
    def from_reference(self) -> bool:
        """Whether the expected value comes from the reference solution (no ``expect``, kind not true)."""
        return self.expect is None and self.kind != "true"

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
    # Trusted reference solution: checks without ``expect`` compare against what the same expressions give
    # after running it, in a separate clean job with the same seed.
    reference: str | None = None
    # Seed for random and torch in both runs; None = a fresh random one per run.
    seed: int | None = None
    # Run the reference with this seed instead of the learner's: how lint proves a check depends on the seed.
    reference_seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))
        ids = [c.id for c in self.checks]
        if not ids:
            raise InvalidRequest("ExerciseChecks needs at least one check")
        if len(set(ids)) != len(ids):
            raise InvalidRequest("check ids must be unique")
        if self.reference is None and any(c.from_reference for c in self.checks):
            raise InvalidRequest("a check without 'expect' needs a reference solution")
        for name in ("seed", "reference_seed"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 0 <= value < 2**63):
                raise InvalidRequest(f"{name} must be a whole number from 0 to 2**63 - 1")

    @property
    def needs_reference(self) -> bool:
        return self.reference is not None and any(c.from_reference for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": [c.to_dict() for c in self.checks],
            "reference": self.reference,
            "seed": self.seed,
            "reference_seed": self.reference_seed,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExerciseChecks:
        try:
            return cls(
                checks=tuple(Check.from_dict(c) for c in d["checks"]),
                reference=d.get("reference"),
                seed=d.get("seed"),
                reference_seed=d.get("reference_seed"),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise InvalidRequest(f"malformed checks: {e}") from None


def new_nonce() -> str:
    return secrets.token_hex(NONCE_HEX // 2)


def job_spec(checks: ExerciseChecks, nonce: str) -> dict[str, Any]:
    """What a backend gets for a graded job: the expressions' trees and the nonce, no expectations.

    The sandbox backend sends the nonce on its own pipe and the trees in the job's spec (see pool.py).
    """
    return {"nonce": nonce, "exprs": {c.id: c.tree for c in checks.checks}}


# --- inside the sandbox: extraction ----------------------------------------

# Captured in the zygote before any learner code exists (capture_pristine).
_P: dict[str, Any] = {}


class _Fail(Exception):
    """An expression could not be evaluated; the argument is the error's name shown to the learner."""


def capture_pristine() -> None:
    """Called in the zygote before any learner code exists."""
    import _signal  # type: ignore[import-not-found]  # signal's C half: its functions, not the module's wrappers
    import builtins
    import gc
    import sys
    import threading

    import torch

    base = torch._C.TensorBase
    getters = {name: base.__dict__[name].__get__ for name in (*TENSOR_ATTRIBUTES, "retains_grad")}
    _P.update(
        type=builtins.type,
        len=builtins.len,
        str=builtins.str,
        int=builtins.int,
        float=builtins.float,
        bool=builtins.bool,
        list=builtins.list,
        tuple=builtins.tuple,
        dict=builtins.dict,
        list_iter=builtins.list.__iter__,
        tuple_iter=builtins.tuple.__iter__,
        dict_items=builtins.dict.items,
        list_item=builtins.list.__getitem__,
        tuple_item=builtins.tuple.__getitem__,
        type_name=builtins.type.__dict__["__name__"].__get__,
        str_item=builtins.str.__getitem__,
        memoryview=builtins.memoryview,
        # The C encoder itself: json.dumps and JSONEncoder are Python code a learner can patch.
        encode=json.encoder.c_make_encoder(  # type: ignore[attr-defined]
            None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
        ),
        join="".join,
        read=os.read,
        pread=os.pread,
        write=os.write,
        close=os.close,
        open=os.open,
        kill=os.kill,
        getpid=os.getpid,
        settrace=sys.settrace,
        setprofile=sys.setprofile,
        gettrace=sys.gettrace,
        getprofile=sys.getprofile,
        setswitchinterval=sys.setswitchinterval,
        shutdown_threads=threading._shutdown,  # type: ignore[attr-defined]
        gc_disable=gc.disable,
        signal=_signal.signal,
        sig_ign=_signal.SIG_IGN,
        sigmask=_signal.pthread_sigmask,
        sig_block=_signal.SIG_BLOCK,
        signals=sorted(int(s) for s in _signal.valid_signals()),
        unstoppable=(int(_signal.SIGKILL), int(_signal.SIGSTOP)),
        Tensor=torch.Tensor,
        Parameter=torch.nn.Parameter,
        dtype=torch.dtype,
        Size=torch.Size,
        getters=getters,
        tolist=base.tolist,
        numel=base.numel,
        dim=base.dim,
        is_complex=base.is_complex,
        tensor_bool=base.__bool__,
        tensor_item=base.__getitem__,
        tf_modes=getattr(torch._C, "_len_torch_function_stack", lambda: 0),
        td_modes=getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0),
    )


def _neutralise() -> str | None:
    """Stop everything that could run learner code during extraction; a refusal reason if it did not hold.

    Order matters.  Calls a learner's audit hook can see (settrace, setprofile, open, kill) come first,
    while the nonce is not yet in this process; the kill comes last of them, so a process forked by a hook
    on the way dies with the rest.  From the signals on, nothing audited runs, so no learner code runs at
    all, and what the hooks may have redone is checked.
    """
    P = _P
    P["shutdown_threads"]()  # the learner's non-daemon threads end first, as at a normal exit
    status = P["open"]("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    P["settrace"](None)
    P["setprofile"](None)
    if P["getpid"]() <= 2:  # pid 2 under the job's own init, pid 1 in a container; never a host process
        try:
            P["kill"](-1, 9)  # every other process of the job (its init, pid 1, is spared by the kernel)
        except OSError:
            pass  # none left
    for sig in P["signals"]:
        if sig not in P["unstoppable"]:
            try:
                P["signal"](sig, P["sig_ign"])  # also drops a handler already tripped but not yet run
            except (OSError, ValueError):
                pass
    P["sigmask"](P["sig_block"], P["signals"])
    P["gc_disable"]()
    P["setswitchinterval"](1000.0)
    if P["gettrace"]() is not None or P["getprofile"]() is not None:
        return "hooks"
    text = P["pread"](status, 4096, 0)
    P["close"](status)
    if b"\nThreads:\t1\n" not in text:
        return "threads"
    return None


def _truth(v: Any) -> bool:
    P = _P
    T = P["type"](v)
    if v is None:
        return False
    if T is P["bool"]:
        return v is True
    if T is P["int"] or T is P["float"]:
        return not v == 0
    if T is P["str"] or T is P["list"] or T is P["tuple"]:
        return not P["len"](v) == 0
    if (T is P["Tensor"] or T is P["Parameter"]) and P["numel"](v) == 1:
        return P["tensor_bool"](v) is True
    raise _Fail("TypeError")


def _evaluate(node: list[Any], ns: dict[str, Any], keep: list[Any]) -> Any:
    """Evaluate a parse_expression tree without running any code the learner could have changed."""
    P = _P
    op = node[0]
    if op == "name":
        if node[1] not in ns:
            raise _Fail("NameError")
        return ns[node[1]]
    if op == "const":
        return node[1]
    if op == "attr":
        obj = _evaluate(node[1], ns, keep)
        T = P["type"](obj)
        if T is not P["Tensor"] and T is not P["Parameter"]:
            raise _Fail("AttributeError")
        if node[2] == "grad" and not P["getters"]["is_leaf"](obj) and not P["getters"]["retains_grad"](obj):
            return None  # a non-leaf's .grad is None unless retained, and reading it warns into the output
        value = P["getters"][node[2]](obj)
        keep.append(value)
        return value
    if op == "item":
        obj = _evaluate(node[1], ns, keep)
        T = P["type"](obj)
        try:
            if T is P["list"]:
                value = P["list_item"](obj, node[2])
            elif T is P["tuple"]:
                value = P["tuple_item"](obj, node[2])
            elif T is P["Tensor"] or T is P["Parameter"]:
                if P["dim"](obj) == 0:
                    raise _Fail("IndexError")
                value = P["tensor_item"](obj, node[2])
            else:
                raise _Fail("TypeError")
        except IndexError:
            raise _Fail("IndexError") from None
        keep.append(value)
        return value
    if op == "not":
        return not _truth(_evaluate(node[1], ns, keep))
    if op == "and" or op == "or":
        value = None
        for sub in node[1]:
            value = _evaluate(sub, ns, keep)
            if _truth(value) == (op == "or"):
                return value
        return value
    if op == "is_none":
        return (_evaluate(node[1], ns, keep) is None) != node[2]
    raise _Fail("SyntaxError")  # pragma: no cover - parse_expression makes only the nodes above


def _name_of(T: Any) -> str:
    # str.__getitem__ itself: a class's __name__ may be a str subclass with its own slicing.
    name: str = _P["str_item"](_P["type_name"](T), slice(0, MAX_NAME))
    return name


def _tensor(t: Any, depth: int, keep: list[Any]) -> list[Any]:
    P = _P
    get = P["getters"]
    shape = get["shape"](t)
    keep.append(shape)
    fn = get["grad_fn"](t)
    keep.append(fn)
    leaf = P["bool"](get["is_leaf"](t))
    out: dict[str, Any] = {
        "shape": [P["int"](n) for n in P["tuple_iter"](shape)],
        "dtype": P["str"](get["dtype"](t)).replace("torch.", ""),
        "requires_grad": P["bool"](get["requires_grad"](t)),
        "is_leaf": leaf,
        "grad_fn": None if fn is None else _name_of(P["type"](fn)),
        "data": None,
        "grad": None,
    }
    if P["numel"](t) <= MAX_ELEMENTS and P["len"](out["shape"]) <= MAX_DIMS and not P["is_complex"](t):
        data = P["tolist"](t)
        keep.append(data)
        out["data"] = data
    if depth == 0 and (leaf or get["retains_grad"](t)):  # else None, and reading it would warn
        grad = get["grad"](t)
        keep.append(grad)
        if P["type"](grad) is P["Tensor"]:
            out["grad"] = _tensor(grad, depth + 1, keep)
    return ["tensor", out]


def _encode(v: Any, depth: int, keep: list[Any]) -> list[Any]:
    """A value as the tagged report encoding (parse_value reads it back), built from exact types only."""
    P = _P
    T = P["type"](v)
    if v is None:
        return ["none"]
    if T is P["bool"]:
        return ["bool", v]
    if T is P["int"]:
        return ["int", v] if -INT_BOUND < v < INT_BOUND else ["object", "int"]
    if T is P["float"]:
        return ["float", v]
    if T is P["str"]:
        return ["str", v[:MAX_STR]]  # an exact str: its slicing is the builtin one
    if T is P["Tensor"] or T is P["Parameter"]:
        return _tensor(v, 0, keep)
    if T is P["Size"]:
        return ["list", [["int", P["int"](n)] for n in P["tuple_iter"](v)]]
    if T is P["dtype"]:
        return ["str", P["str"](v).replace("torch.", "")]
    if (T is P["list"] or T is P["tuple"] or T is P["dict"]) and (depth >= MAX_DEPTH or P["len"](v) > MAX_ITEMS):
        return ["object", _name_of(T) + (" (too deep)" if depth >= MAX_DEPTH else " (too long)")]
    if T is P["list"] or T is P["tuple"]:
        items = P["list_iter"](v) if T is P["list"] else P["tuple_iter"](v)
        return ["list", [_encode(x, depth + 1, keep) for x in items]]
    if T is P["dict"]:
        return [
            "dict",
            [[k[:MAX_STR], _encode(x, depth + 1, keep)] for k, x in P["dict_items"](v) if P["type"](k) is P["str"]],
        ]
    return ["object", _name_of(T)]


def _extract(ns: Mapping[str, Any], exprs: Mapping[str, Any], keep: list[Any]) -> dict[str, Any]:
    P = _P
    names = {k: v for k, v in P["dict_items"](ns) if P["type"](k) is P["str"]}
    keep.append(names)
    values: dict[str, Any] = {}
    for cid, tree in exprs.items():
        try:
            if P["tf_modes"]() or P["td_modes"]():
                raise _Fail("RuntimeError")  # a torch function or dispatch mode would run learner code
            values[cid] = _encode(_evaluate(tree, names, keep), 0, keep)
        except _Fail as e:
            values[cid] = ["error", e.args[0]]
        except BaseException as e:  # torch raised while reading (a meta tensor's data, say)
            keep.append(e)
            values[cid] = ["error", _name_of(P["type"](e))]
    return values


def _read_nonce(fd: int) -> str | None:
    try:
        raw = _P["read"](fd, NONCE_HEX + 1)
        _P["close"](fd)
    except OSError:
        return None
    text: str = raw.decode("ascii", "replace")
    return text if _P["len"](text) == NONCE_HEX and not text.strip("0123456789abcdef") else None


def write_report(fd: int, ns: Mapping[str, Any], spec: Mapping[str, Any], nonce_fd: int | None = None) -> None:
    """Extract the checks' values after the learner's code ran to its end, and write the report to ``fd``.

    The nonce is read from ``nonce_fd`` once nothing of the learner's can run any more (the sandbox), or
    taken from ``spec`` (the Docker backend).  The caller must not return into learner code afterwards:
    the zygote exits at once.
    """
    P = _P
    keep: list[Any] = []  # nothing extraction touched is freed before the process ends (no __del__ runs)
    try:
        refused = _neutralise()
        nonce = spec.get("nonce") if nonce_fd is None else None
        if refused is None and nonce_fd is not None:
            nonce = _read_nonce(nonce_fd)
            refused = None if nonce is not None else "nonce"
        msg: dict[str, Any] = {"v": 2}
        if refused is not None or P["type"](nonce) is not P["str"]:
            msg["refused"] = refused or "nonce"
        else:
            msg["nonce"] = nonce
            msg["values"] = _extract(ns, spec["exprs"], keep)
        data = P["join"](P["encode"](msg, 0)).encode("ascii")
        if P["len"](data) > MAX_REPORT:
            data = b'{"v": 2, "refused": "too_large"}'
    except BaseException as e:
        keep.append(e)
        data = b'{"v": 2, "refused": "malformed"}'
    try:
        view = P["memoryview"](data)
        while view:
            n = P["write"](fd, view)
            view = view[n:]
        P["close"](fd)
    except BaseException as e:
        keep.append(e)


# --- outside the sandbox: the report, parsed as hostile input (pure) ----------


@dataclass(frozen=True)
class TensorValue:
    """A tensor as extraction read it; ``data`` (nested lists) is None when it was too large or complex."""

    shape: tuple[int, ...]
    dtype: str
    data: Any
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None
    grad: TensorValue | None


@dataclass(frozen=True)
class Opaque:
    """A value extraction does not read (an object of another type, or one too long or too deep)."""

    type_name: str


@dataclass(frozen=True)
class Failed:
    """The check's expression raised; ``error`` is the exception's name."""

    error: str


class ReportError(Exception):
    """The report cannot be used; the argument is one of NO_REPORT_REASONS."""


_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_.]{{0,{MAX_NAME - 1}}}")
_DTYPE = re.compile(r"[a-z][a-z0-9_]{0,30}")


def _name(v: Any) -> str:
    if not isinstance(v, str) or not _NAME.fullmatch(v):
        raise ReportError("malformed")
    return v


def _bounded_int(v: Any) -> int:
    if type(v) is not int or not -INT_BOUND < v < INT_BOUND:
        raise ReportError("malformed")
    return v


def _number(v: Any) -> int | float | bool:
    if type(v) is float or type(v) is bool:
        return v
    return _bounded_int(v)


def _tensor_data(data: Any, shape: tuple[int, ...]) -> Any:
    """Check that ``data`` is nested lists of numbers of exactly ``shape``."""
    if not shape:
        return _number(data)
    if not isinstance(data, list) or len(data) != shape[0]:
        raise ReportError("malformed")
    return [_tensor_data(x, shape[1:]) for x in data]


def _parse_tensor(d: Any, depth: int) -> TensorValue:
    keys = {"shape", "dtype", "requires_grad", "is_leaf", "grad_fn", "data", "grad"}
    if not isinstance(d, dict) or set(d) != keys:
        raise ReportError("malformed")
    shape = d["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ReportError("malformed")
    dims = tuple(_bounded_int(n) for n in shape)
    if any(n < 0 for n in dims):
        raise ReportError("malformed")
    if not isinstance(d["dtype"], str) or not _DTYPE.fullmatch(d["dtype"]):
        raise ReportError("malformed")
    if type(d["requires_grad"]) is not bool or type(d["is_leaf"]) is not bool:
        raise ReportError("malformed")
    grad_fn = None if d["grad_fn"] is None else _name(d["grad_fn"])
    data = None
    if d["data"] is not None:
        if math.prod(dims) > MAX_ELEMENTS:
            raise ReportError("malformed")
        data = _tensor_data(d["data"], dims)
    grad = None
    if d["grad"] is not None:
        tagged = d["grad"]
        if depth > 0 or not (isinstance(tagged, list) and len(tagged) == 2 and tagged[0] == "tensor"):
            raise ReportError("malformed")
        grad = _parse_tensor(tagged[1], depth + 1)
    return TensorValue(dims, d["dtype"], data, d["requires_grad"], d["is_leaf"], grad_fn, grad)


def parse_value(tagged: Any, depth: int = 0) -> Any:
    """One tagged value of a report as plain data, TensorValue, Opaque or Failed; ReportError if malformed."""
    if not isinstance(tagged, list) or not tagged or not isinstance(tagged[0], str) or depth > MAX_DEPTH:
        raise ReportError("malformed")
    tag, args = tagged[0], tagged[1:]
    if len(args) != (0 if tag == "none" else 1):
        raise ReportError("malformed")
    if tag == "none":
        return None
    if tag == "bool" and type(args[0]) is bool:
        return args[0]
    if tag == "int":
        return _bounded_int(args[0])
    if tag == "float" and type(args[0]) is float:
        return args[0]
    if tag == "str" and isinstance(args[0], str) and len(args[0]) <= MAX_STR:
        return args[0]
    if tag == "list" and isinstance(args[0], list) and len(args[0]) <= MAX_ITEMS:
        return [parse_value(x, depth + 1) for x in args[0]]
    if tag == "dict" and isinstance(args[0], list) and len(args[0]) <= MAX_ITEMS:
        out = {}
        for pair in args[0]:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ReportError("malformed")
            out[pair[0][:MAX_STR]] = parse_value(pair[1], depth + 1)
        return out
    if tag == "tensor":
        return _parse_tensor(args[0], 0)
    if tag == "object" and isinstance(args[0], str):
        return Opaque(args[0][:MAX_NAME] or "object")
    if tag == "error":
        return Failed(_name(args[0]))
    raise ReportError("malformed")


def parse_report(raw: bytes, nonce: str) -> dict[str, Any]:
    """The values of a report carrying our nonce, by check id; ReportError(reason) for anything else."""
    if not raw:
        raise ReportError("missing")
    if len(raw) > MAX_REPORT:
        raise ReportError("too_large")
    try:
        msg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ReportError("malformed") from None  # includes junk, or two reports back to back
    if not isinstance(msg, dict) or msg.get("v") != 2:
        raise ReportError("malformed")
    if set(msg) == {"v", "refused"}:
        raise ReportError(msg["refused"] if msg["refused"] in _REFUSALS else "malformed")
    if set(msg) != {"v", "nonce", "values"} or not isinstance(msg["nonce"], str):
        raise ReportError("malformed")
    if not secrets.compare_digest(msg["nonce"].encode("utf-8", "replace"), nonce.encode()):
        raise ReportError("malformed")
    values = msg["values"]
    if not isinstance(values, dict) or len(values) > MAX_ITEMS:
        raise ReportError("malformed")
    return {str(k): parse_value(v) for k, v in values.items()}


# --- outside the sandbox: the verdict (pure) --------------------------------


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


def _summary(v: Any) -> str:
    """A value as the learner would see it printed, cut to SHOWN characters."""
    if isinstance(v, Failed):
        return v.error
    if isinstance(v, Opaque):
        return _clip(f"<{v.type_name}>")
    if isinstance(v, TensorValue):
        return _clip(_tensor_repr(v))
    return _clip(_plain_repr(v))


def _plain_repr(v: Any) -> str:
    if isinstance(v, TensorValue):
        return _tensor_repr(v)
    if isinstance(v, (Failed, Opaque)):
        return _summary(v)
    if isinstance(v, list):
        return "[" + ", ".join(_plain_repr(x) for x in v[:MAX_ITEMS]) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_plain_repr(x)}" for k, x in list(v.items())[:MAX_ITEMS]) + "}"
    if isinstance(v, str):
        return repr(v[:SHOWN])
    return repr(v)  # None, bools and numbers as Python prints them


# Dtypes torch's repr leaves unsaid: the defaults for floats, ints and bools.
_IMPLIED_DTYPES = ("float32", "int64", "bool")


def _tensor_repr(t: TensorValue) -> str:
    """A tensor as torch prints it, which is what learners read: tensor([4., 8.], requires_grad=True)."""
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
            return f"{int(x)}." if integral else f"{x:.4f}"

        def nested(d: Any) -> str:
            return "[" + ", ".join(nested(x) for x in d) + "]" if isinstance(d, list) else number(d)

        body = nested(t.data)
    extras = [] if t.dtype in _IMPLIED_DTYPES else [f"dtype=torch.{t.dtype}"]
    if t.grad_fn:
        extras.append(f"grad_fn=<{t.grad_fn}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *extras]) + ")"


def _matches(check: Check, got: Any, expected: Any) -> bool:
    if check.kind == "true":
        return _data(got) is True and (not isinstance(got, TensorValue) or got.shape == ())
    if check.kind in ("equal", "close"):
        if isinstance(expected, TensorValue):
            # Compared with what the reference solution's code produced: a tensor, and not still part of
            # a graph where the solution's is not (a forgotten detach() or no_grad() is a wrong answer).
            if not isinstance(got, TensorValue) or (got.requires_grad and not expected.requires_grad):
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


def compare(check: Check, got: Any, expected: Any) -> tuple[bool, str, dict[str, Any]]:
    """(passed, message_key, params) for one check.  Pure.

    A mismatch's params are what the bot may show or reason about: ``got`` and ``expected`` as the
    learner would see them printed, ``ratio`` (got is that whole multiple of expected), ``got_none``
    and ``still_requires_grad`` (got is a tensor that requires grad where the expected value does not).
    """
    fail_key = check.message_key
    if isinstance(got, Failed):
        return False, fail_key or "checks.error", {"expr": check.expr, "error": got.error}
    if isinstance(got, Opaque) and check.kind != "true":
        return False, fail_key or "checks.wrong_type", {"expr": check.expr, "got": _summary(got)}
    if _matches(check, got, expected):
        return True, check.pass_key, {"expr": check.expr}
    params: dict[str, Any] = {"expr": check.expr, "got": _summary(got)}
    if check.kind != "true":
        params["expected"] = _summary(expected)
        if check.kind in ("equal", "close"):
            ratio = _ratio(got, expected)
            if ratio is not None:
                params["ratio"] = ratio
            if got is None and expected is not None:
                params["got_none"] = True
            if _requires_grad(got) and not _requires_grad(expected):
                params["still_requires_grad"] = True
    return False, fail_key or "checks.mismatch", params


def verify(
    checks: ExerciseChecks,
    status: str,
    raw_report: bytes | None,
    nonce: str,
    reference_values: Mapping[str, Any] | None = None,
) -> tuple[tuple[CheckOutcome, ...], bool]:
    """All outcomes and the overall verdict.  Pure: no I/O, no torch, and no exception for any report."""
    values: dict[str, Any] | None = None
    reason = ""
    if status == "ok":
        try:
            values = parse_report(raw_report or b"", nonce)
        except ReportError as e:
            reason = str(e.args[0])
    outcomes = []
    for c in checks.checks:
        if status != "ok":
            outcomes.append(CheckOutcome(c.id, False, "checks.not_run", {"status": status}))
            continue
        if values is None or c.id not in values:
            outcomes.append(
                CheckOutcome(c.id, False, "checks.no_report", {"status": status, "reason": reason or "missing"})
            )
            continue
        expected = c.expect
        if c.from_reference:
            if reference_values is None or c.id not in reference_values:
                outcomes.append(CheckOutcome(c.id, False, "checks.no_reference", {}))
                continue
            expected = reference_values[c.id]
        try:
            passed, key, params = compare(c, values[c.id], expected)
        except Exception:  # a value no rule foresaw: this check fails, the others are still judged
            passed, key, params = False, "checks.no_report", {"status": status, "reason": "malformed"}
        outcomes.append(CheckOutcome(c.id, passed, key, params))
    all_passed = status == "ok" and bool(outcomes) and all(o.passed for o in outcomes)
    return tuple(outcomes), all_passed
