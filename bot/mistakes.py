"""The likely autograd mistake behind a failed attempt, named from what the learner's code produced.

One table, ``MISTAKES``: each entry says when it applies, from what a failed check found or from the
error the code stopped with, and what to tell the learner.  The runner measures the facts outside the
sandbox (``ratio``, ``got_none``, ``still_requires_grad``, the values as numbers: see runner.grading.compare);
the patterns in those values are read here, and the wording is translated like every message.
"""

from __future__ import annotations

import itertools
import re
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
    got: tuple[float, ...] = ()  # what the check read, as numbers (where it is numbers)
    expected: tuple[float, ...] = ()  # what it should have read, as numbers

    @classmethod
    def of_check(cls, expr: str, params: Mapping[str, Any]) -> Evidence:
        """The evidence in a failed check's params (only facts of the right type are taken)."""
        ratio = params.get("ratio")
        return cls(
            expr=expr,
            ratio=ratio if type(ratio) is int else None,
            got_none=params.get("got_none") is True,
            still_requires_grad=params.get("still_requires_grad") is True,
            got=_numbers(params.get("got_numbers")),
            expected=_numbers(params.get("expected_numbers")),
        )

    @property
    def reads_a_gradient(self) -> bool:
        """Whether the check reads a ``.grad``."""
        return self.expr.replace(" ", "").endswith(".grad")

    @property
    def is_loss_curve(self) -> bool:
        """Whether the check reads a series of losses: at least three numbers that fall when the code is right."""
        want = self.expected
        return len(want) >= 3 and len(self.got) == len(want) and all(b < a for a, b in itertools.pairwise(want))

    @property
    def climbs_back(self) -> bool:
        """Whether the losses fell, then rose again: the step went on with an old gradient still in ``.grad``."""
        got = self.got
        fell = next((i for i in range(1, len(got)) if got[i] < got[i - 1] and not _same(got[i], got[i - 1])), None)
        return fell is not None and any(
            got[i] > got[i - 1] and not _same(got[i], got[i - 1]) for i in range(fell + 1, len(got))
        )

    @property
    def first_two_equal(self) -> bool:
        """Whether the first two losses are equal: the first step moved nothing, it came before ``backward()``."""
        return len(self.got) >= 2 and _same(self.got[0], self.got[1])

    @property
    def never_moves(self) -> bool:
        """Whether every loss is the first: no step ever found a gradient."""
        return len(self.got) >= 3 and all(_same(x, self.got[0]) for x in self.got)


def _numbers(value: object) -> tuple[float, ...]:
    """The numbers the runner passed on, or () for anything else."""
    if not isinstance(value, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        return ()
    return tuple(float(x) for x in value)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 + 1e-6 * abs(b)


# Names the slides use without importing them (their imports are hidden), and the line that brings each in.
IMPORTS = {"torch": "import torch", "nn": "from torch import nn", "F": "import torch.nn.functional as F"}
_UNDEFINED = re.compile(r"NameError: name '(?P<name>\w+)' is not defined")


def missing_import(stderr: str) -> str | None:
    """The name a run stopped on that an import would have defined (``torch``), or None."""
    found = _UNDEFINED.search(stderr)
    return found.group("name") if found and found.group("name") in IMPORTS else None


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
    # Two readings of a loss curve, as lesson 3 teaches them; the first that applies names the mistake.
    Mistake(
        "no-step",
        lambda e: e.is_loss_curve and e.never_moves,
        lambda e: _(
            "`{expr}` never changes: no `opt.step()` found a gradient in `.grad`. "
            "Call `opt.step()` right after `loss.backward()`, with nothing clearing the gradient between them."
        ).format(expr=e.expr),
    ),
    Mistake(
        "step-before-backward",
        lambda e: e.is_loss_curve and e.first_two_equal and not e.never_moves,
        lambda e: _(
            "The first two losses are equal: the first `opt.step()` ran before any `backward()`, "
            "so it had no gradient to step with. Call `loss.backward()` before `opt.step()`."
        ),
    ),
    Mistake(
        "stale-gradient",
        lambda e: e.is_loss_curve and e.climbs_back,
        lambda e: _(
            "The losses fall, then climb back up: each step still had the last step's gradient in `.grad`, "
            "so it overshot. Call `opt.zero_grad()` at the start of each step."
        ),
    ),
    Mistake(
        "missing-import",
        lambda e: missing_import(e.stderr) is not None,
        lambda e: _("`{name}` is not defined: slides leave their imports out. Start your code with `{line}`.").format(
            name=missing_import(e.stderr), line=IMPORTS.get(missing_import(e.stderr) or "", "")
        ),
    ),
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


def diagnose(evidence: Iterable[Evidence]) -> dict[str, str]:
    """Return each mistake the evidence shows, by id, with what to tell the learner about it (in MISTAKES' order)."""
    found: dict[str, str] = {}
    items = list(evidence)
    for mistake in MISTAKES:
        for item in items:
            if mistake.id not in found and mistake.applies(item):
                found[mistake.id] = mistake.explain(item)
    return found


def likely(evidence: Iterable[Evidence]) -> list[str]:
    """Return what to tell the learner about each mistake the evidence shows, once per mistake."""
    return list(diagnose(evidence).values())
