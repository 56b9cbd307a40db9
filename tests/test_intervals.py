"""The union of intervals: numpy's path for many intervals gives the pairs of the plain one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim import intervals

_time = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
_interval = st.tuples(_time, _time)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(_interval, max_size=60),
    st.sampled_from([-math.inf, 0.25]),
    st.sampled_from([math.inf, 0.75]),
)
def test_numpys_merge_gives_the_plain_merges_pairs(
    pairs: list[tuple[float, float]], lo: float, hi: float
) -> None:
    plain: intervals.Intervals = []
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in pairs):
        if end <= start:
            continue
        if plain and start <= plain[-1][1]:
            plain[-1] = (plain[-1][0], max(plain[-1][1], end))
        else:
            plain.append((start, end))
    assert intervals._union_many(pairs, lo, hi) == plain
    assert intervals.union(pairs, lo, hi) == plain


def test_a_generator_is_read_once() -> None:
    assert intervals.union(iter([(0.0, 1.0), (0.5, 2.0)])) == [(0.0, 2.0)]
    assert intervals.union(p for p in [(1.0, 1.0)]) == []


@pytest.mark.parametrize("n", [intervals._MANY + 1, 5000])
def test_disjoint_steps_stay_apart(n: int) -> None:
    pairs = [(2.0 * i, 2.0 * i + 1.0) for i in range(n)]
    assert intervals.union(pairs) == pairs


def _plain_intersection(a: intervals.Intervals, b: intervals.Intervals) -> intervals.Intervals:
    out = []
    for s, e in a:
        for t, f in b:
            lo, hi = max(s, t), min(e, f)
            if hi > lo:
                out.append((lo, hi))
    return sorted(out)


def _plain_difference(a: intervals.Intervals, b: intervals.Intervals) -> intervals.Intervals:
    out = []
    for s, e in a:
        t = s
        for lo, hi in b:
            if hi <= t or lo >= e:
                continue
            if lo > t:
                out.append((t, lo))
            t = max(t, hi)
        if t < e:
            out.append((t, e))
    return out


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_interval, max_size=60), st.lists(_interval, max_size=60))
def test_numpys_intersection_and_difference_give_the_plain_pairs(
    first: list[tuple[float, float]], second: list[tuple[float, float]]
) -> None:
    """Above :data:`intervals._MANY` intervals numpy computes them: the same pairs (each
    input's intervals spread apart so that there are many)."""
    many = intervals._MANY
    a = intervals.union([(s + 2.0 * k, e + 2.0 * k) for k in range(6) for s, e in first])
    b = intervals.union([(s + 2.0 * k, e + 2.0 * k) for k in range(6) for s, e in second])
    a += [(20.0 + i, 20.5 + i) for i in range(many)]  # many: numpy
    assert intervals.intersection(a, b) == _plain_intersection(a, b)
    assert intervals.difference(a, b) == _plain_difference(a, b)
    starts = [s for s, _ in second]
    ends = [e for _, e in second]
    arrays = [(np.array(starts, dtype=float), np.array(ends, dtype=float))]
    assert intervals.union_with(first, arrays) == intervals.union(first + second)
