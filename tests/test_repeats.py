"""Steps kept as runs of repeats, instants of identical steps as ladders, and unions of
batches of spans: each equals what the one-by-one computation gives, to the last bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples
from test_fold import _assert_same, _ring, _run

from acesim import simulate_collective
from acesim.intervals import union, union_length
from acesim.network import collective as collective_module
from acesim.network.repeats import Repeats
from acesim.sums import Ladder, ladders


def _one_by_one(start: float, first: float, second: float, count: int) -> tuple[list, list, float]:
    starts, ends, x = [], [], start
    for _ in range(count):
        y = x + first
        starts.append(x)
        ends.append(y)
        x = y + second
    return starts, ends, x


_times = st.one_of(
    st.floats(0.0, 2.0, allow_subnormal=False),
    st.integers(-40, 3).map(lambda e: 2.0**e),
    st.integers(-40, 3).map(lambda e: 2.0**e * (1 - 2**-50)),
)
_terms = st.one_of(
    st.floats(0.0, 1e-3, allow_subnormal=False),
    st.integers(-60, -10).map(lambda e: 2.0**e),
    st.integers(-60, -10).map(lambda e: 1.5 * 2.0**e),
)


@settings(max_examples=examples(300), deadline=None)
@given(_times, _terms, _terms, st.integers(1, 3000))
def test_ladders_give_the_instants_of_the_additions_one_by_one(
    start: float, first: float, second: float, count: int
) -> None:
    steps = ladders(start, first, second, count)
    starts, ends, after = _one_by_one(start, first, second, count)
    if steps is None:  # too many single steps: the caller adds one by one
        return
    assert sum(ladder.count for ladder in steps) == count
    assert np.concatenate([ladder.starts() for ladder in steps]).tolist() == starts
    assert np.concatenate([ladder.ends() for ladder in steps]).tolist() == ends
    assert steps[-1].after == after


def test_a_long_run_of_steps_is_a_few_ladders() -> None:
    steps = ladders(0.0123, 16 / 45e9, 5.5e-7, 2**20)
    assert steps is not None and len(steps) < 40
    assert steps[-1].after == _one_by_one(0.0123, 16 / 45e9, 5.5e-7, 2**20)[2]


def test_repeats_index_iterate_and_compare_as_the_tuple_they_stand_for() -> None:
    items = ("a",) * 3 + ("b",) + ("a",) * 2
    runs = Repeats([("a", 2), ("a", 1), ("b", 1), ("c", 0), ("a", 2)])
    assert runs.runs == (("a", 3), ("b", 1), ("a", 2))
    assert len(runs) == len(items) and tuple(runs) == items and runs == items
    assert [runs[i] for i in range(-len(items), len(items))] == list(items) * 2
    assert runs[2:5] == items[2:5] and runs == Repeats.of(items)
    assert hash(runs) == hash(Repeats.of(items)) and runs.run_from(4) == (2, 2)


_span = st.tuples(st.floats(0.0, 10.0), st.floats(0.0, 2.0)).map(lambda p: (p[0], p[0] + p[1]))


@st.composite
def _ladder(draw: st.DrawFn) -> Ladder:
    start = draw(st.floats(0.0, 10.0))
    first = draw(st.floats(0.0, 0.5))
    second = draw(st.floats(0.0, 0.5))
    steps = ladders(start, first, second, draw(st.integers(1, 40)))
    assert steps is not None
    return steps[0]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(_span, max_size=6),
    st.lists(_ladder(), max_size=4),
    st.floats(-1.0, 5.0),
    st.floats(5.0, 100.0),
)
def test_the_union_of_batches_has_the_length_of_the_union_of_their_spans(
    spans: list[tuple[float, float]], batches: list[Ladder], lo: float, hi: float
) -> None:
    every = list(spans)
    for ladder in batches:
        every += list(zip(ladder.starts().tolist(), ladder.ends().tolist(), strict=True))
    want = sum(e - s for s, e in union(every, lo, hi))
    assert union_length(spans, batches, lo, hi) == want
    arrays = [(ladder.starts(), ladder.ends()) for ladder in batches]
    assert union_length(spans, arrays, lo, hi) == want
    assert math.isfinite(want)


def test_a_long_ring_folds_into_ladders_with_the_event_paths_figures() -> None:
    """300 NPUs: 299 steps a phase, beyond the few a fold evaluates in a loop."""
    system = _ring(300)
    work = [("all-reduce", 64 * 2**20)]
    folded, events = _run(system, work, fold=True), _run(system, work, fold=False)
    _assert_same(folded, events)
    assert folded["events"] < events["events"] / 100  # type: ignore[operator]
    with_fold = simulate_collective(system, "all-reduce", 64 * 2**20)
    collective_module.FOLD = False
    try:
        without = simulate_collective(system, "all-reduce", 64 * 2**20)
    finally:
        collective_module.FOLD = True
    assert with_fold.time == without.time
    assert with_fold.bound_by == without.bound_by


def test_a_kernel_arriving_at_any_instant_materialises_a_laddered_fold_exactly() -> None:
    system = _ring(160)
    work = [("all-reduce", 4 * 2**20)]
    span = _run(system, work, fold=False)["end"]
    assert isinstance(span, float)
    for k in range(1, 14):
        at = span * k / 14
        _assert_same(
            _run(system, work, fold=True, kernel_at=at),
            _run(system, work, fold=False, kernel_at=at),
        )
