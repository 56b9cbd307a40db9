"""Intervals of time: the union of (start, end) pairs (s), the one way every result that
measures busy time (exposed communication, bound attribution, jobs' sharing) merges them."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["Intervals", "union", "union_length"]

#: Sorted, disjoint (start, end) pairs, s.
Intervals = list[tuple[float, float]]


def union(
    intervals: Iterable[tuple[float, float]], lo: float = -math.inf, hi: float = math.inf
) -> Intervals:
    """The union of ``intervals`` (s), each clipped to ``lo``..``hi`` first, as sorted disjoint
    pairs; empty ones (end at or before start) are dropped, touching ones merged (above a few
    hundred intervals with numpy: the same pairs)."""
    if not isinstance(intervals, list):
        intervals = list(intervals)
    if len(intervals) > _MANY:
        return _union_many(intervals, lo, hi)
    out: Intervals = []
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


#: above this many intervals :func:`union` sorts and merges with numpy
_MANY = 256


def _union_many(intervals: list[tuple[float, float]], lo: float, hi: float) -> Intervals:
    """:func:`union` with numpy: clip, drop the empty, sort by (start, end), and start a new
    interval where a start lies beyond every end before it (the merged interval's end is the
    running maximum of the ends)."""
    pairs = np.array(intervals, dtype=float).reshape(-1, 2)
    starts = np.maximum(pairs[:, 0], lo)
    ends = np.minimum(pairs[:, 1], hi)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return []
    order = np.lexsort((ends, starts))
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    tails = np.append(heads[1:], len(starts)) - 1
    return list(zip(starts[heads].tolist(), reach[tails].tolist(), strict=True))


def union_length(
    intervals: list[tuple[float, float]],
    batches: list[tuple[np.ndarray, np.ndarray]],
    lo: float = -math.inf,
    hi: float = math.inf,
) -> float:
    """``sum(e - s for s, e in union(every interval, lo, hi))`` (s): the intervals are
    ``intervals`` and, for each ``(starts, ends)`` of ``batches``, the pairs of those arrays
    (a batch of many spans kept as arrays, never as pairs). The same float: the same union,
    its lengths added one after another in order (a sequential cumulative sum). Where the
    intervals come already sorted (batches of steps one after another), nothing is sorted."""
    if not batches:
        return sum(e - s for s, e in union(intervals, lo, hi))
    pieces = [(s, e) for s, e in batches if len(s)]
    if intervals:
        pairs = np.array(intervals, dtype=float).reshape(-1, 2)
        pieces.append((pairs[:, 0], pairs[:, 1]))
    if not pieces:
        return 0
    pieces.sort(key=lambda piece: (float(piece[0][0]), float(piece[1][0])))
    starts = np.maximum(np.concatenate([s for s, _e in pieces]), lo)
    ends = np.minimum(np.concatenate([e for _s, e in pieces]), hi)
    keep = ends > starts
    if not keep.all():
        starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return 0
    later, earlier = starts[1:], starts[:-1]
    ordered = (later > earlier) | ((later == earlier) & (ends[1:] >= ends[:-1]))
    if not ordered.all():
        order = np.lexsort((ends, starts))
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    tails = np.append(heads[1:], len(starts)) - 1
    lengths = reach[tails] - starts[heads]
    return float(np.cumsum(lengths)[-1])
