"""Planned allocations kept as a run: many spans one after another on a resource, each at one
rate, folded into the resource's integral as time passes with the float operations the spans
one by one would take (:meth:`acesim.engine.Engine.plan_usage_run`).

A span ``[start, end)`` at ``rate`` units/s adds ``rate * (min(end, now) - start)`` to the
integral when ``now`` passes its start; one that ``now`` cuts keeps ``[now, end)`` for later.
The spans' additions are done one after another in order, as a sequential cumulative sum
(numpy's accumulate is sequential): the same floats as a loop over the spans.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PlannedRun"]


class PlannedRun:
    """Spans ``[starts[i], ends[i])`` (s), each allocated ``rate`` units/s, one after another
    (``starts`` increasing, each span ending no later than the next starts, each taking
    time); the first ``first`` are folded already."""

    __slots__ = ("starts", "ends", "rate", "first")

    def __init__(self, starts: np.ndarray, ends: np.ndarray, rate: float):
        self.starts = np.array(starts, dtype=float)  # its own copy: a cut span moves its start
        self.ends = np.array(ends, dtype=float)
        self.rate = rate
        self.first = 0

    def fold(self, total: float, now: float) -> tuple[float, bool]:
        """``total`` plus what the spans starting before ``now`` (s) add up to ``now``; and
        whether spans are left (a cut one keeps its part after ``now``)."""
        starts, ends, first = self.starts, self.ends, self.first
        count = len(starts)
        if first >= count or not starts[first] < now:
            return total, first < count
        last = int(np.searchsorted(starts, now, side="left"))  # spans first..last-1 began
        upto = np.minimum(ends[first:last], now)
        terms = np.empty(last - first + 1)
        terms[0] = total
        np.multiply(self.rate, upto - starts[first:last], out=terms[1:])
        total = float(np.cumsum(terms)[-1])
        if ends[last - 1] > now:  # cut: its part after now stays planned
            starts[last - 1] = now
            last -= 1
        self.first = last
        return total, last < count
