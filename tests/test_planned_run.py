"""Planned allocations as a run (:meth:`acesim.engine.Engine.plan_usage_run`): the resource's
integral and peak, synced at any instants, are those of the same spans planned one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim.engine import Engine


def _spans(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Spans one after another: each takes time (or, now and then, none) and a gap follows."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0.0, 1.220703125e-6, 3.3e-7, 2.5e-5], size=count)
    gaps = rng.choice([0.0, 5.1e-7, 1e-6], size=count)
    starts = np.empty(count)
    ends = np.empty(count)
    t = float(rng.uniform(1e-4, 5e-3))
    for i in range(count):
        starts[i] = t
        ends[i] = t + lengths[i]
        t = ends[i] + gaps[i]
    return starts, ends


@settings(max_examples=examples(100), deadline=None)
@given(
    seed=st.integers(0, 2**16),
    count=st.integers(1, 80),
    rate=st.sampled_from([1.0, 5.0e10, 3.3e9]),
    syncs=st.lists(st.floats(0.0, 1.0), max_size=6),
    metered=st.booleans(),
)
def test_a_run_of_planned_spans_folds_as_the_spans_one_by_one(
    seed: int, count: int, rate: float, syncs: list[float], metered: bool
) -> None:
    starts, ends = _spans(seed, count)
    first, last = float(starts[0]), float(ends[-1])
    instants = sorted(first + f * (last - first) * 1.1 for f in syncs)
    instants.append(last + 1.0)
    totals = []
    for as_run in (True, False):
        engine = Engine()
        link = engine.add_resource("link", 1e11, meter=metered)
        if as_run:
            engine.plan_usage_run(link, starts, ends, rate)
        else:
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
                engine.plan_usage(link, s, e, rate)
        seen = []
        for t in instants:
            engine.advance_to(t)
            engine.sync()
            seen.append((link.used, link.base, link.peak))
        totals.append(seen)
    assert totals[0] == totals[1]
