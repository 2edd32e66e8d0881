"""The streak: days in a row on which the learner finished something, one missed day forgiven.

A day counts when the learner finishes anything: a lesson part, a review, a drill or an exercise. A single
missed day between two such days is forgiven on its own, every time, and is never for sale: it keeps the
streak going without adding to it. Two missed days in a row end it, and the learner simply starts a new one;
what the bot says about it (later, through gettext) never blames them.

Days are the learner's own local days (``reminders.local_day`` decides them), so the streak is a pure
function of a set of dates and today.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

# How many missed days in a row are forgiven: one, automatically.
FORGIVEN_DAYS = 1


@dataclass(frozen=True)
class Streak:
    """A learner's current streak: the days that count in it, and what today and yesterday were."""

    days: int  # days with something finished in the current run; 0 when there is none
    done_today: bool  # today already counts
    forgiven: int  # missed days the current run has bridged

    @property
    def alive(self) -> bool:
        """Whether finishing something today carries the streak on (rather than starting a new one)."""
        return self.days > 0


def streak(finished_on: Iterable[dt.date], today: dt.date) -> Streak:
    """Return the streak as of ``today`` from the local days on which the learner finished something.

    Days after ``today`` (a clock moved back, a time zone changed) are ignored.
    """
    days = sorted({day for day in finished_on if day <= today}, reverse=True)
    if not days or (today - days[0]).days > FORGIVEN_DAYS + 1:
        return Streak(days=0, done_today=False, forgiven=0)
    # Today is not over, so it is not missed yet; only the days between the last one and today are.
    count, forgiven = 1, max((today - days[0]).days - 1, 0)
    for newer, older in itertools.pairwise(days):
        gap = (newer - older).days - 1
        if gap > FORGIVEN_DAYS:
            break
        count += 1
        forgiven += gap
    return Streak(days=count, done_today=days[0] == today, forgiven=forgiven)
