"""The union of intervals: numpy's path for many intervals gives the pairs of the plain one."""

from __future__ import annotations

import math

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
