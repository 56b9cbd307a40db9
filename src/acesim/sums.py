"""Float sums done as a run of sequential additions would do them, without doing them all:
what a model that skips events must add to the figures the events would have summed (bytes
sent, integrals), to the last bit; and the instants of a run of identical steps (a fold's
``start + work / rate``, ``+ delay``, step after step) as a few arithmetic progressions."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_SINGLE_STEPS", "Ladder", "add_repeatedly", "alike_steps", "ladders"]

#: Sequential additions are done this many at a time (numpy's accumulate is sequential).
_BLOCK = 1 << 20


def add_repeatedly(total: float, value: float, count: int) -> float:
    """``total`` plus ``value``, ``count`` times, one float addition at a time (rounding after
    each), without doing them all: inside one binade every addition of a non-negative
    ``value`` rounds to the same increment (a multiple of the binade's unit), unless ``value``
    lies halfway between two multiples (then they are done one by one, in blocks)."""
    if not (value >= 0) or not math.isfinite(value) or not math.isfinite(total) or total < 0:
        return _accumulate(total, value, count)
    while count > 0:
        if value == 0.0:
            return total + 0.0 if count else total
        unit = math.ulp(total) if total > 0 else 0.0
        if unit == 0.0 or (value / unit) % 1.0 == 0.5:
            total += value
            count -= 1
            continue
        step = (total + value) - total  # the increment of every addition in this binade
        if step == 0.0:
            return total  # value is below half a unit: nothing more changes
        upper = 2.0 ** math.frexp(total)[1]  # the binade is [upper / 2, upper)
        # additions whose exact sum stays a unit below the binade's end round alike
        room = upper - unit - total - value
        jumps = min(count, int(room // step)) if room > 0 else 0
        if jumps <= 0:
            total += value
            count -= 1
            continue
        total += jumps * step
        count -= jumps
    return total


def _accumulate(total: float, value: float, count: int) -> float:
    """``total`` plus ``value``, ``count`` times, by numpy's sequential accumulate."""
    while count > 0:
        block = min(count, _BLOCK)
        terms = np.full(block + 1, value)
        terms[0] = total
        total = float(np.add.accumulate(terms)[-1])
        count -= block
    return total


#: Most single steps :func:`ladders` takes (a step across a binade's end, or with a term
#: halfway between two of the binade's multiples) before it gives up (None): the caller then
#: adds one step at a time (numpy's sequential cumulative sum).
MAX_SINGLE_STEPS = 256


@dataclass(frozen=True, slots=True)
class Ladder:
    """``count`` consecutive steps of the recurrence of :func:`ladders`: step ``i`` (0-based
    within the ladder) starts at ``start + i * period`` and ends at ``start + i * period +
    (end - start)`` (s), exactly the floats the additions give (``period`` and ``end -
    start`` are multiples of the binade's unit: see :func:`ladders`); a ladder of one step
    has its ``end`` as computed (``period`` unused). ``after``: the next step's start."""

    start: float
    end: float
    period: float
    count: int
    after: float

    def starts(self) -> np.ndarray:
        """Every step's start (s)."""
        if self.count == 1:
            return np.array([self.start])
        return self.start + np.arange(self.count, dtype=float) * self.period

    def ends(self) -> np.ndarray:
        """Every step's end (s)."""
        if self.count == 1:
            return np.array([self.end])
        return self.starts() + (self.end - self.start)


def ladders(start: float, first: float, second: float, count: int) -> list[Ladder] | None:
    """The recurrence ``x[0] = start``, ``y[i] = x[i] + first``, ``x[i + 1] = y[i] + second``
    (``i < count``; each addition rounded, as done one at a time) as a few :class:`Ladder`
    runs, without doing every addition. Inside one binade ``[B/2, B)`` of unit ``u`` every
    value is a multiple of ``u``, so adding ``first`` (non-negative, not halfway between two
    multiples) always rounds to the same increment, a multiple of ``u`` (and so does adding
    ``second``): while ``x[i] + first + second`` stays two units below ``B`` the steps are an
    arithmetic progression, computed exactly. Steps that leave the binade are done one by
    one. None where that would take more than :data:`MAX_SINGLE_STEPS` single steps (a term
    halfway between two multiples rounds to even, which depends on the value: one by one)."""
    if not (first >= 0 and second >= 0 and start >= 0) or not math.isfinite(first + second):
        return None
    out: list[Ladder] = []
    singles = 0
    x = start
    while count > 0:
        n = alike_steps(x, first, second, count)
        if n <= 1:
            singles += 1
            if singles > MAX_SINGLE_STEPS:
                return None
            y = x + first
            after = y + second
            out.append(Ladder(x, y, after - x, 1, after))
            x = after
            count -= 1
            continue
        y = x + first
        period = (y - x) + ((y + second) - y)
        after = x + n * period
        out.append(Ladder(x, y, period, n, after))
        x = after
        count -= n
    return out


def alike_steps(x: float, first: float, second: float, count: int) -> int:
    """How many steps of :func:`ladders` from ``x`` are an arithmetic progression (0: take
    one step by itself)."""
    if not (x >= sys.float_info.min) or not math.isfinite(x):
        return 0
    unit = math.ulp(x)
    if (first / unit) % 1.0 == 0.5 or (second / unit) % 1.0 == 0.5:
        return 0
    y = x + first
    period = (y - x) + ((y + second) - y)
    if period == 0.0:
        return count  # both terms below half a unit: nothing changes
    upper = 2.0 ** math.frexp(x)[1]  # the binade is [upper / 2, upper)
    # x[i] + first + second <= upper - 2 units for every step taken (8 units of margin for
    # the roundings of this bound itself)
    room = (upper - x) - 8 * unit - first - second
    if room < 0:
        return 0
    return min(count, int(room // period))
