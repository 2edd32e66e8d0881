"""Checks of the submitted source, read outside the sandbox: the concept an exercise teaches is in the code.

A value check proves the learner's code computed the right values for this run's random inputs; it cannot
prove how.  A learner who reads this runner can forge a report (see the threat model in ``__init__``), and
some answers are reachable without the lesson's concept (``y.data`` instead of ``detach()``, ``w.data -=``
instead of ``torch.no_grad()``).  These checks read the code the learner submitted, here, with ``ast``: nothing
of it runs, and nothing in the sandbox can change what they see.  Two kinds:

* ``uses`` CONCEPT: the code does CONCEPT (one of ``CONCEPTS``) in a statement that always runs;
* ``inside`` NAME, ``expect`` [CONTEXT, ...]: NAME is assigned (``=``, ``-=``...) or changed in place (a method
  ending in ``_``, such as ``NAME.sub_(...)``) in the body of a ``with`` block of one of the contexts
  (``no_grad``: ``torch.no_grad()`` or ``torch.inference_mode()``).

"Always runs" is read as written: at the top level, or in the body of a ``with`` or ``for`` (never in an
``if``, a ``while``, a ``try``, a function, a class, a lambda, a comprehension, a conditional expression or
after ``and``/``or``), so ``if False: w.requires_grad_()`` does not count.  A static check cannot prove more
(a loop may run no time); with the value checks it makes the concept part of every pass.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from ..errors import InvalidRequest

SOURCE_KINDS = ("uses", "inside")
SOURCE_MAX_BYTES = 64 * 1024  # code larger than this is not read (lesson answers are a few hundred bytes)


def _is_true(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is True)


def _method(call: ast.Call) -> str | None:
    """The name a call calls: ``x.detach()`` -> "detach", ``no_grad()`` -> "no_grad"."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def _requires_grad(node: ast.AST) -> bool:
    """``x.requires_grad_()`` (or ``(True)``), ``x.requires_grad = True``, or ``f(..., requires_grad=True)``."""
    if isinstance(node, ast.Call):
        if _method(node) == "requires_grad_" and _is_true(node.args[0] if node.args else None):
            return True
        return any(k.arg == "requires_grad" and _is_true(k.value) for k in node.keywords)
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets) and _is_true(
            node.value
        )
    return False


def _detach(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _method(node) in ("detach", "detach_")


# What a ``uses`` check may name: each a test of one node reached in code that always runs.
CONCEPTS: dict[str, Callable[[ast.AST], bool]] = {"requires_grad": _requires_grad, "detach": _detach}
# What an ``inside`` check may name: the calls that open such a block (torch.no_grad(), torch.inference_mode()).
CONTEXTS: dict[str, tuple[str, ...]] = {"no_grad": ("no_grad", "inference_mode")}

# Statements whose body always runs once reached, and expression nodes that may not run at all.
_STRAIGHT = (ast.With, ast.For)
_MAYBE = (
    ast.If, ast.While, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.IfExp,
    ast.BoolOp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Match,
)  # fmt: skip


def _always_run(node: ast.AST, contexts: tuple[str, ...] = ()) -> Iterator[tuple[ast.AST, tuple[str, ...]]]:
    """Every node of ``node`` in code that always runs, with the ``with`` contexts (call names) around it."""
    yield node, contexts
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _MAYBE):
            continue
        inner = contexts
        if isinstance(node, ast.With) and child in node.body:
            inner = contexts + tuple(
                name
                for item in node.items
                if isinstance(item.context_expr, ast.Call) and (name := _method(item.context_expr))
            )
        yield from _always_run(child, inner)


def _targets(node: ast.AST) -> list[str]:
    """The names a node sets: assigned to, or changed in place by a method (``w.sub_(...)``)."""
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        method = node.func.attr
        if method.endswith("_") and not method.endswith("__"):
            return [node.func.value.id]
    return []


def check_rule(kind: str, expr: str, expect: object) -> None:
    """Refuse a source check that names what this module does not know (InvalidRequest, naming the rule)."""
    if kind == "uses":
        if expr not in CONCEPTS:
            raise InvalidRequest(f"a 'uses' check names one of: {', '.join(CONCEPTS)}")
        if expect is not None:
            raise InvalidRequest("a 'uses' check takes no 'expect'")
    elif kind == "inside":
        if not expr.isidentifier():
            raise InvalidRequest("an 'inside' check names one variable")
        if not (isinstance(expect, list) and expect and all(isinstance(c, str) and c in CONTEXTS for c in expect)):
            raise InvalidRequest(f"an 'inside' check's 'expect' lists blocks among: {', '.join(CONTEXTS)}")


def judge(code: str, kind: str, expr: str, expect: object) -> bool:
    """Whether ``code`` meets the check (False for code too large to read, or that is not Python)."""
    if len(code.encode("utf-8", "surrogatepass")) > SOURCE_MAX_BYTES:
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if kind == "uses":
        test = CONCEPTS[expr]
        return any(test(node) for node, _ in _always_run(tree))
    opening = {name for context in expect for name in CONTEXTS[context]} if isinstance(expect, list) else set()
    return any(expr in _targets(node) and opening & set(around) for node, around in _always_run(tree))
