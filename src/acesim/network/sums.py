"""Float sums done as a run of sequential additions would do them, without doing them all:
what a model that skips events must add to the figures the events would have summed (bytes
sent, integrals), to the last bit."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["add_repeatedly"]

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
