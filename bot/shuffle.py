"""The order a learner sees a question's options in: shuffled per learner and per round, from a stored seed.

A round of the Quick Check draws a seed (kept with the learner), and each question's order follows from
the seed and the question's id. The order is therefore the same whenever that poll is sent again in the
round, and new for the next round, so a retake is never a memory test of positions. Answers are kept by
option id, so the order never changes what was recorded.
"""

from __future__ import annotations

import random
import secrets

from bot.course.model import Question

SEED_BITS = 31  # fits SQLite's INTEGER and Python's int alike; any width would do


def new_seed() -> int:
    """Return a fresh seed for a round."""
    return secrets.randbits(SEED_BITS)


def shuffled(count: int, key: str) -> list[int]:
    """Return 0..count-1 in an order fixed by ``key``: the same on every run and every machine (Python seeds a
    string through SHA-512)."""
    order = list(range(count))
    random.Random(key).shuffle(order)
    return order


def option_order(question: Question, seed: int) -> tuple[int, ...]:
    """Return the positions of ``question``'s options (file order) in the order a round with ``seed`` shows them."""
    return tuple(shuffled(len(question.options), f"{seed}:{question.id}"))
