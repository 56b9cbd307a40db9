"""Intervals of time: the union of (start, end) pairs (s), the one way every result that
measures busy time (exposed communication, bound attribution, jobs' sharing) merges them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Protocol, TypeAlias

import numpy as np

from .sums import add_repeatedly

__all__ = [
    "Intervals",
    "complement_arrays",
    "difference_arrays",
    "intersection",
    "intersection_arrays",
    "length",
    "pairs_array",
    "union",
    "union_arrays",
    "union_length",
    "union_with",
]

#: Sorted, disjoint (start, end) pairs, s.
Intervals = list[tuple[float, float]]


def pairs_array(pairs: Sequence[tuple[float, float]]) -> np.ndarray:
    """``np.array(pairs, dtype=float).reshape(-1, 2)``, the same floats, made from the pairs'
    items one after another (numpy's reading of a list of tuples is two to three times
    slower)."""
    flat = np.fromiter(chain.from_iterable(pairs), dtype=float, count=2 * len(pairs))
    return flat.reshape(-1, 2)


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


def difference(spans: Intervals, removed: Intervals) -> Intervals:
    """The parts of ``spans`` outside ``removed`` (both sorted disjoint pairs, s), as sorted
    disjoint pairs: each span cut where a removed interval covers it (no arithmetic: every
    end is one of the inputs')."""
    if len(spans) + len(removed) > _MANY and spans and removed:
        gaps = [(-math.inf, removed[0][0])]
        gaps += [(removed[k - 1][1], removed[k][0]) for k in range(1, len(removed))]
        gaps.append((removed[-1][1], math.inf))
        return _intersection_many(spans, gaps)  # the same pairs, with numpy
    out: Intervals = []
    j = 0
    for start, end in spans:
        while j < len(removed) and removed[j][1] <= start:
            j += 1
        k, t = j, start
        while k < len(removed) and removed[k][0] < end:
            if removed[k][0] > t:
                out.append((t, removed[k][0]))
            t = max(t, removed[k][1])
            k += 1
        if t < end:
            out.append((t, end))
    return out


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """The parts of ``a`` inside ``b`` (both sorted disjoint pairs, s), as sorted disjoint
    pairs: each pair of overlapping intervals' overlap (no arithmetic: every end is one of
    the inputs'; above a few hundred intervals with numpy: the same pairs)."""
    if len(a) + len(b) > _MANY and a and b:
        return _intersection_many(a, b)
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _intersection_many(a: Intervals, b: Intervals) -> Intervals:
    """:func:`intersection` with numpy."""
    pa = np.array(a, dtype=float)
    pb = np.array(b, dtype=float)
    lo, hi = intersection_arrays((pa[:, 0], pa[:, 1]), (pb[:, 0], pb[:, 1]))
    return list(zip(lo.tolist(), hi.tolist(), strict=True))


Arrays = tuple[np.ndarray, np.ndarray]


def intersection_arrays(a: Arrays, b: Arrays) -> Arrays:
    """:func:`intersection` of sorted disjoint intervals as arrays of starts and ends (s):
    each interval of ``a`` meets the intervals of ``b`` from the first ending after its start
    to the last starting before its end; the same pairs."""
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    first = np.searchsorted(b_hi, a_lo, side="right")
    past = np.searchsorted(b_lo, a_hi, side="left")
    counts = np.maximum(past - first, 0)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0), np.empty(0)
    ia = np.repeat(np.arange(len(a_lo)), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    ib = np.repeat(first, counts) + offsets
    lo = np.maximum(a_lo[ia], b_lo[ib])
    hi = np.minimum(a_hi[ia], b_hi[ib])
    keep = hi > lo
    return lo[keep], hi[keep]


def difference_arrays(spans: Arrays, removed: Arrays) -> Arrays:
    """:func:`difference` of sorted disjoint intervals as arrays (s): ``spans`` inside the
    gaps between ``removed``; the same pairs."""
    lo, hi = removed
    if len(lo) == 0:
        return spans
    gaps_lo = np.concatenate([[-math.inf], hi])
    gaps_hi = np.concatenate([lo, [math.inf]])
    return intersection_arrays(spans, (gaps_lo, gaps_hi))


def complement_arrays(busy: Arrays, lo: float, hi: float) -> Arrays:
    """The gaps of sorted disjoint ``busy`` (arrays, s) within [lo, hi]: before each busy
    interval that starts after every end before it (and ``lo``), from there to its start
    (at most ``hi``), and from the last end to ``hi``."""
    starts, ends = busy
    reach = np.maximum(np.maximum.accumulate(ends), lo) if len(ends) else ends
    before = np.concatenate([[lo], reach[:-1]]) if len(ends) else reach
    gap = starts > before
    gaps_lo, gaps_hi = before[gap], np.minimum(starts[gap], hi)
    last = float(reach[-1]) if len(ends) else lo
    if last < hi:
        gaps_lo, gaps_hi = np.append(gaps_lo, last), np.append(gaps_hi, hi)
    return gaps_lo, gaps_hi


def length(spans: Arrays) -> float:
    """The intervals' lengths added one after another in order (s; as ``sum(e - s ...)``
    over pairs: the same float)."""
    out: float = sum((spans[1] - spans[0]).tolist())
    return out


#: above this many intervals :func:`union` sorts and merges with numpy
_MANY = 256


def _union_many(intervals: list[tuple[float, float]], lo: float, hi: float) -> Intervals:
    """:func:`union` with numpy: clip, drop the empty, sort by (start, end), and start a new
    interval where a start lies beyond every end before it (the merged interval's end is the
    running maximum of the ends)."""
    pairs = pairs_array(intervals)
    starts = np.maximum(pairs[:, 0], lo)
    ends = np.minimum(pairs[:, 1], hi)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return []
    order = np.lexsort((ends, starts))
    merged_starts, merged_ends = _merged(starts[order], ends[order])
    return list(zip(merged_starts.tolist(), merged_ends.tolist(), strict=True))


def union_arrays(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`union` of the spans ``starts[i]``..``ends[i]`` (s; arrays of one length, never
    made pairs), as the starts and the ends of its intervals (arrays): the same pairs."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return starts, ends
    order = np.lexsort((ends, starts))
    return _merged(starts[order], ends[order])


def union_with(
    intervals: list[tuple[float, float]], arrays: Sequence[tuple[np.ndarray, np.ndarray]]
) -> Intervals:
    """:func:`union` of ``intervals`` and the spans of ``arrays`` (each starts and ends, s):
    the same pairs as of all of them as pairs."""
    if not arrays:
        return union(intervals)
    pairs = pairs_array(intervals)
    starts = np.concatenate([pairs[:, 0], *(s for s, _ in arrays)])
    ends = np.concatenate([pairs[:, 1], *(e for _, e in arrays)])
    lo, hi = union_arrays(starts, ends)
    return list(zip(lo.tolist(), hi.tolist(), strict=True))


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of spans sorted by (start, end) (s), as its intervals' starts and ends."""
    reach = np.maximum.accumulate(ends)
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    tails = np.append(heads[1:], len(starts)) - 1
    return starts[heads], reach[tails]


class Ladder(Protocol):
    """Spans one after another in arithmetic progression (:class:`acesim.sums.Ladder`):
    ``count`` spans, the ``i``-th from ``start + i * period`` to that plus ``end - start``
    (s; one span: exactly ``(start, end)``)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def period(self) -> float: ...
    @property
    def count(self) -> int: ...
    def starts(self) -> np.ndarray: ...
    def ends(self) -> np.ndarray: ...


#: many spans kept compactly: arrays of starts and ends (s), or a ladder of them
Batch = tuple[np.ndarray, np.ndarray] | Ladder

#: instants (s), such as the starts or the ends of many spans: a sequence or an array
Times: TypeAlias = Sequence[float] | np.ndarray


def floats(values: Times) -> list[float]:
    """``values`` as a list of Python floats (a numpy array converted)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def batch_arrays(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """A batch's starts and ends (s) as arrays."""
    if isinstance(batch, tuple):
        return batch
    return batch.starts(), batch.ends()


def union_length(
    intervals: list[tuple[float, float]],
    batches: Sequence[Batch],
    lo: float = -math.inf,
    hi: float = math.inf,
) -> float:
    """``sum(e - s for s, e in union(every interval, lo, hi))`` (s): the intervals are
    ``intervals`` and every span of ``batches`` (many spans kept as arrays or ladders, never
    as pairs). The same float: the same union, its lengths added one after another in order.
    Ladders apart from each other and from every interval, inside [lo, hi), add their lengths
    in closed form (:func:`~acesim.sums.add_repeatedly`); otherwise they are expanded to arrays."""
    if not batches:
        if len(intervals) > _MANY:  # union's numpy path, its pairs never made tuples
            pairs = pairs_array(intervals)
            starts, ends = union_arrays(np.maximum(pairs[:, 0], lo), np.minimum(pairs[:, 1], hi))
            total: float = sum((ends - starts).tolist())
            return total
        return sum(e - s for s, e in union(intervals, lo, hi))
    apart = _ladders_apart(intervals, batches, lo, hi)
    if apart is not None:
        return apart
    pieces = [batch_arrays(b) for b in batches]
    pieces = [(s, e) for s, e in pieces if len(s)]
    if intervals:
        pairs = pairs_array(intervals)
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
    merged_starts, merged_ends = _merged(starts, ends)
    lengths = merged_ends - merged_starts
    return float(np.cumsum(lengths)[-1])


def _ladders_apart(
    intervals: list[tuple[float, float]], batches: Sequence[Batch], lo: float, hi: float
) -> float | None:
    """:func:`union_length` where every batch is a ladder whose spans are apart (a gap
    between one and the next), inside [lo, hi), and no two ladders or intervals overlap or
    touch: the union is then every span as it is, in order of start, its lengths added one
    after another (a ladder's ``count`` equal lengths in closed form); None
    elsewhere."""
    pieces: list[tuple[float, float, Ladder | None]] = []
    for batch in batches:
        if isinstance(batch, tuple):
            return None
        length = batch.end - batch.start
        if not length > 0:
            continue  # spans that took no time: not in the union
        last = batch.end if batch.count == 1 else batch.end + (batch.count - 1) * batch.period
        if (batch.count > 1 and not batch.period > length) or batch.start < lo or last > hi:
            return None
        pieces.append((batch.start, last, batch))
    for start, end in intervals:
        start, end = max(start, lo), min(end, hi)
        if end > start:
            pieces.append((start, end, None))
    pieces.sort(key=lambda piece: (piece[0], piece[1]))
    for (_s, before, _b), (after, _e, _c) in zip(pieces, pieces[1:], strict=False):
        if not after > before:
            return None
    total = 0.0
    for start, end, ladder in pieces:
        if ladder is None:
            total += end - start
        else:
            total = add_repeatedly(total, ladder.end - ladder.start, ladder.count)
    return total
