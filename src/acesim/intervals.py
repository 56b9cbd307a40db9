"""Intervals of time: the union of (start, end) pairs (s), the one way every result that
measures busy time (exposed communication, bound attribution, jobs' sharing) merges them."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["Intervals", "union"]

#: Sorted, disjoint (start, end) pairs, s.
Intervals = list[tuple[float, float]]


def union(
    intervals: Iterable[tuple[float, float]], lo: float = -math.inf, hi: float = math.inf
) -> Intervals:
    """The union of ``intervals`` (s), each clipped to ``lo``..``hi`` first, as sorted disjoint
    pairs; empty ones (end at or before start) are dropped, touching ones merged."""
    out: Intervals = []
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
