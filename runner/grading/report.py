"""The report a graded job writes: its bounds, where it travels, and its parser, which treats it as hostile.

Extraction (extraction.py) writes a tagged encoding inside the sandbox; ``parse_report`` reads it back
outside, bounded in size, depth and count, schema-checked, and answers anything else with a ReportError
naming one of NO_REPORT_REASONS, never another exception.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from dataclasses import dataclass
from typing import Any

# Bounds of a report (the runner reads at most MAX_REPORT bytes of it; what extraction writes stays below).
MAX_REPORT = 256 * 1024  # bytes
MAX_ITEMS = 100  # items of a list or dict reported; a longer one is reported as too long
MAX_ELEMENTS = 1_000  # elements of a tensor whose data is reported
MAX_DIMS = 8  # dimensions of a tensor
MAX_DEPTH = 4  # nesting of lists and dicts in a reported value
MAX_STR = 200  # characters of a string reported
INT_BOUND = 2**63  # ints outside (-INT_BOUND, INT_BOUND) are not compared
MAX_NAME = 60  # characters of a type or error name

# Where, in the learner's process, the report goes and the nonce waits (see zygote.py).
REPORT_FD = 4
NONCE_FD = 5

# Why a report could not be used (the ``reason`` of checks.no_report): the bot words each one.
NO_REPORT_REASONS = ("missing", "malformed", "too_large", "threads", "hooks", "nonce")
# What extraction itself may say instead of values (write_report).
REFUSALS = tuple(r for r in NO_REPORT_REASONS if r != "missing")


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
        raise ReportError(msg["refused"] if msg["refused"] in REFUSALS else "malformed")
    if set(msg) != {"v", "nonce", "values"} or not isinstance(msg["nonce"], str):
        raise ReportError("malformed")
    if not secrets.compare_digest(msg["nonce"].encode("utf-8", "replace"), nonce.encode()):
        raise ReportError("malformed")
    values = msg["values"]
    if not isinstance(values, dict) or len(values) > MAX_ITEMS:
        raise ReportError("malformed")
    return {str(k): parse_value(v) for k, v in values.items()}
