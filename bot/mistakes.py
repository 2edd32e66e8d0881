"""The likely autograd mistake behind a failed attempt, named from what the learner's code produced.

One table, ``MISTAKES``: each entry says when it applies, from what a failed check found or from the
error the code stopped with, and what to tell the learner.  The runner measures the facts outside the
sandbox (``ratio``, ``got_none``, ``still_requires_grad``: see runner.grading.compare); the wording is
translated like every message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.i18n import _, number


@dataclass(frozen=True)
class Evidence:
    """What one failed check, or the error a run stopped with, shows about the learner's code."""

    expr: str = ""  # the check's expression ("" for the run's error)
    ratio: int | None = None  # what the code produced is this whole multiple of what was expected
    got_none: bool = False  # None where a value was expected
    still_requires_grad: bool = False  # a tensor still in the graph where the expected value is not
    stderr: str = ""  # the error output of a run that stopped with an exception

    @classmethod
    def of_check(cls, expr: str, params: Mapping[str, Any]) -> Evidence:
        """The evidence in a failed check's params (only facts of the right type are taken)."""
        ratio = params.get("ratio")
        return cls(
            expr=expr,
            ratio=ratio if type(ratio) is int else None,
            got_none=params.get("got_none") is True,
            still_requires_grad=params.get("still_requires_grad") is True,
        )

    @property
    def reads_a_gradient(self) -> bool:
        """Whether the check reads a ``.grad``."""
        return self.expr.replace(" ", "").endswith(".grad")


@dataclass(frozen=True)
class Mistake:
    """A mistake autograd learners make, how to recognise it, and what to tell them (lesson markup)."""

    id: str
    applies: Callable[[Evidence], bool]
    explain: Callable[[Evidence], str]


# Torch's own words for two errors (the start of each message, as torch 2.13 raises it).
SECOND_BACKWARD = "Trying to backward through the graph a second time"
LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation"

MISTAKES: tuple[Mistake, ...] = (
    Mistake(
        "accumulated",
        lambda e: e.ratio is not None and e.reads_a_gradient,
        lambda e: _(
            "`{expr}` is {k} times what it should be: gradients add up across `backward()` calls. "
            "Clear them before each one, with `opt.zero_grad()` or `x.grad = None`."
        ).format(expr=e.expr, k=number(e.ratio or 0)),
    ),
    Mistake(
        "no-gradient",
        lambda e: e.got_none and e.reads_a_gradient,
        lambda e: _(
            "`{expr}` is `None`: no gradient reached it. The tensor must require grad "
            "(`requires_grad=True`), be a leaf, and `backward()` must run."
        ).format(expr=e.expr),
    ),
    Mistake(
        "graph-freed",
        lambda e: SECOND_BACKWARD in e.stderr,
        lambda e: _(
            "The first `backward()` freed the graph. Pass `retain_graph=True` to every `backward()` "
            "but the last, or build the graph again (run the forward pass) before each one."
        ),
    ),
    Mistake(
        "leaf-in-place",
        lambda e: LEAF_IN_PLACE in e.stderr,
        lambda e: _(
            "A leaf that requires grad cannot be changed in place while autograd records: "
            "make the change inside `with torch.no_grad():`."
        ),
    ),
    Mistake(
        "still-tracked",
        lambda e: e.still_requires_grad,
        lambda e: _(
            "`{expr}` still requires grad, so it is still part of the graph: "
            "take `.detach()`, or compute it inside `with torch.no_grad():`."
        ).format(expr=e.expr),
    ),
)


def likely(evidence: Iterable[Evidence]) -> list[str]:
    """Return what to tell the learner about each mistake the evidence shows, once per mistake."""
    found: dict[str, str] = {}
    for item in evidence:
        for mistake in MISTAKES:
            if mistake.id not in found and mistake.applies(item):
                found[mistake.id] = mistake.explain(item)
    return list(found.values())
