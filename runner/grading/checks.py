"""Check expressions and an exercise's checks: what a graded request asks, parsed and validated here, outside.

A check's ``expr`` becomes a small tree (``parse_expression``) that extraction evaluates inside the sandbox
without ``eval``; the expected values stay outside with the verdict (verdict.py).
"""

from __future__ import annotations

import ast
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidRequest
from ..limits import MAXIMUM
from ..result import MessageKey
from .source import SOURCE_KINDS, check_rule

VALUE_KINDS = ("equal", "close", "same", "shape", "dtype", "true")  # read in the sandbox, compared outside
KINDS = VALUE_KINDS + SOURCE_KINDS  # and the checks of the submitted source (source.py), read outside only
NONCE_HEX = 32  # characters of a nonce (new_nonce)

# The tensor attributes a check may read, each through a getter captured before learner code.
TENSOR_ATTRIBUTES = ("grad", "requires_grad", "is_leaf", "grad_fn", "shape", "dtype")
# Bounds of what a request may ask, each checked before any work that grows with the input (an expression is
# measured before it is parsed: a 7.6 MiB one once took the runner 8 s and 1.5 GB).  Errors name the rule broken,
# never the input (what a caller sent is never echoed back).
EXPR_MAX_CHARS = 200  # characters of a check expression
EXPR_MAX_NODES = 32  # parts of its tree
EXPR_MAX_DEPTH = 8  # nesting of its tree
MAX_CHECKS = 32  # checks of one exercise
EXPECT_MAX_ITEMS = 10_000  # numbers, strings and lists in one check's expected value, all levels together
EXPECT_MAX_DEPTH = 8  # nesting of an expected value
CHECK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # also a message key's shape (with dots)
_CONSTANTS = (type(None), bool, int, float, str)


def parse_expression(expr: str) -> list[Any]:
    """The check expression as a tree extraction evaluates, or InvalidRequest naming what is not allowed.

    Allowed: names, the attributes in TENSOR_ATTRIBUTES, ``[int]``, ``not``, ``and``, ``or``,
    ``is None`` / ``is not None``, and constants.  Nothing else runs in the learner's process.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidRequest("an expression is needed")
    if len(expr) > EXPR_MAX_CHARS:
        raise InvalidRequest(f"too long for a check ({len(expr)} characters, at most {EXPR_MAX_CHARS})")
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise InvalidRequest(f"not a Python expression ({str(e.msg)[:80]})") from None
    except ValueError:  # a NUL character
        raise InvalidRequest("not a Python expression (it holds a NUL character)") from None
    count = [0]

    def node(n: ast.expr, depth: int) -> list[Any]:
        count[0] += 1
        if count[0] > EXPR_MAX_NODES or depth > EXPR_MAX_DEPTH:
            raise InvalidRequest(f"too long for a check (at most {EXPR_MAX_NODES} parts, {EXPR_MAX_DEPTH} deep)")
        if isinstance(n, ast.Name):
            return ["name", n.id]
        if isinstance(n, ast.Constant) and type(n.value) in _CONSTANTS:
            return ["const", n.value]
        if isinstance(n, ast.Attribute):
            if n.attr not in TENSOR_ATTRIBUTES:
                raise InvalidRequest(f"a check may read only these attributes: {', '.join(TENSOR_ATTRIBUTES)}")
            return ["attr", node(n.value, depth + 1), n.attr]
        if isinstance(n, ast.Subscript):
            index = n.slice
            if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
                index = index.operand
                sign = -1
            else:
                sign = 1
            if not (isinstance(index, ast.Constant) and type(index.value) is int):
                raise InvalidRequest("a check may index only with a whole number, like [0] or [-1]")
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
            "a check reads variables and their tensor attributes only "
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
    pass_key: str = MessageKey.PASSED
    tree: list[Any] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        # The id first: once it is known to be short and plain, the errors below may name it.
        if not isinstance(self.id, str) or not CHECK_ID.fullmatch(self.id):
            raise InvalidRequest("a check id must be 1 to 64 letters, digits, '_', '.' or '-'")
        where = f"check {self.id!r}"
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise InvalidRequest(f"{where}: kind must be one of {', '.join(KINDS)}")
        if self.kind in SOURCE_KINDS:
            if not isinstance(self.expr, str) or len(self.expr) > EXPR_MAX_CHARS:
                raise InvalidRequest(f"{where}: 'expr' must be a short name")
            try:
                check_rule(self.kind, self.expr, self.expect)
            except InvalidRequest as e:
                raise InvalidRequest(f"{where}: {e}") from None
            tree: list[Any] = []  # nothing of it is evaluated in the sandbox
        else:
            try:
                tree = parse_expression(self.expr)
            except InvalidRequest as e:
                raise InvalidRequest(f"{where}: 'expr': {e}") from None
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise InvalidRequest(f"{where}: {name} must be a finite number of at least 0")
        for name in ("message_key", "pass_key"):
            value = getattr(self, name)
            if not isinstance(value, str) or (value and not CHECK_ID.fullmatch(value)):
                raise InvalidRequest(f"{where}: {name} must be up to 64 letters, digits, '_', '.' or '-'")
        if _items(self.expect, 0, [EXPECT_MAX_ITEMS]) is None:
            raise InvalidRequest(
                f"{where}: 'expect' must be numbers, strings, booleans and lists of them "
                f"(at most {EXPECT_MAX_ITEMS} in all, {EXPECT_MAX_DEPTH} deep)"
            )
        object.__setattr__(self, "tree", tree)

    @property
    def from_reference(self) -> bool:
        """Whether the expected value comes from the reference solution (no ``expect``; a value, not a fact)."""
        return self.expect is None and self.kind in VALUE_KINDS and self.kind != "true"

    @property
    def of_source(self) -> bool:
        """Whether this check reads the submitted source (outside the sandbox), not a value of the run."""
        return self.kind in SOURCE_KINDS

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


def _items(value: object, depth: int, budget: list[int]) -> int | None:
    """Count what an expected value holds against ``budget``: None once it is over, too deep or of another type."""
    budget[0] -= 1
    if budget[0] < 0 or depth > EXPECT_MAX_DEPTH:
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return budget[0]
    if isinstance(value, (list, tuple)):
        for item in value:
            if _items(item, depth + 1, budget) is None:
                return None
        return budget[0]
    return None


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
        if len(ids) > MAX_CHECKS:
            raise InvalidRequest(f"an exercise has at most {MAX_CHECKS} checks")
        if len(set(ids)) != len(ids):
            raise InvalidRequest("check ids must be unique")
        if self.reference is not None and (
            not isinstance(self.reference, str)
            or len(self.reference.encode("utf-8", "surrogatepass")) > MAXIMUM.code_bytes
        ):
            raise InvalidRequest(f"the reference solution must be code of at most {MAXIMUM.code_bytes} bytes")
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
            items = d["checks"]
            if not isinstance(items, list) or len(items) > MAX_CHECKS:
                raise TypeError
            return cls(
                checks=tuple(Check.from_dict(c) for c in items),
                reference=d.get("reference"),
                seed=d.get("seed"),
                reference_seed=d.get("reference_seed"),
            )
        except (KeyError, TypeError, AttributeError):
            raise InvalidRequest(
                f"malformed checks: 'checks' must be a list of at most {MAX_CHECKS} objects with an id and an expr"
            ) from None


def new_nonce() -> str:
    return secrets.token_hex(NONCE_HEX // 2)


def job_spec(checks: ExerciseChecks, nonce: str) -> dict[str, Any]:
    """What a backend gets for a graded job: the expressions' trees and the nonce, no expectations.

    The sandbox backend sends the nonce on its own pipe and the trees in the job's spec (see pool.py).
    """
    return {"nonce": nonce, "exprs": {c.id: c.tree for c in checks.checks if not c.of_source}}
