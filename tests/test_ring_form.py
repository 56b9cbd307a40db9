"""A ring phase's steps in closed form (:mod:`acesim.network.ring_form`): the same floats as
the recurrence stepped one step at a time, or None; and whole exact runs equal with it and
without it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_workloads import compute_layers
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

import acesim.network.vectorized as vectorized
from acesim.network.ring_form import ring_ends
from acesim.runs import run_system
from acesim.workload.model import Comm, Compute, Workload


def _stepped(begin: np.ndarray, took: float, delay: float, steps: int) -> list[np.ndarray]:
    """The recurrence one step at a time (``Lockstep._phase``'s float operations): the
    values before each step and after the last."""
    done = begin.copy()
    seen = [done.copy()]
    for _ in range(steps):
        out = done + took
        arrive = out + delay
        done = np.maximum(out, np.roll(arrive, 1, axis=1))
        seen.append(done.copy())
    return seen


@settings(max_examples=examples(200), deadline=None)
@given(
    lines=st.integers(1, 4),
    p=st.integers(2, 12),
    steps=st.integers(1, 30),
    base=st.sampled_from([0.0, 1e-6, 3e-3, 5e-3, 0.0078125 - 2e-5, 1.0]),
    spread=st.sampled_from([0.0, 1e-9, 1e-6, 1e-4]),
    took=st.sampled_from([0.0, 1.220703125e-06, 3.3e-7, 2.5e-5, 1e-9]),
    delay=st.sampled_from([0.0, 5.1e-7, 1e-6, 2.0e-9]),
    seed=st.integers(0, 2**16),
    unknown=st.booleans(),
)
def test_the_closed_form_gives_the_recurrences_floats_or_declines(
    lines: int,
    p: int,
    steps: int,
    base: float,
    spread: float,
    took: float,
    delay: float,
    seed: int,
    unknown: bool,
) -> None:
    rng = np.random.default_rng(seed)
    begin = base + spread * rng.random((lines, p))
    if unknown:
        begin[rng.integers(lines), rng.integers(p)] = math.inf
    line, q = int(rng.integers(lines)), int(rng.integers(p))
    closed = ring_ends(begin, took, delay, steps, (line, q))
    if closed is None:
        return  # declined: the caller steps
    ends, trail = closed
    seen = _stepped(begin, took, delay, steps)
    assert np.array_equal(ends, seen[-1])
    assert trail is not None
    assert np.array_equal(trail, np.array([s[line, q] for s in seen]))
    unwatched = ring_ends(begin, took, delay, steps)  # ends only (a line unknown at once)
    assert unwatched is not None
    assert np.array_equal(unwatched[0], seen[-1])


def test_it_declines_where_the_values_leave_their_binade() -> None:
    begin = np.array([[0.0078125 - 1e-6, 0.0078125 - 2e-6, 0.0078125 - 3e-6]])
    assert ring_ends(begin, 1e-6, 5e-7, 8) is None


def _dp(grad: float, memory_bound: bool) -> Workload:
    """Three layers of kernels, each gradient all-reduced; ``memory_bound``: kernels an NPU
    with less HBM bandwidth runs slower, else of a fixed time (a straggler's is longer)."""
    compute = Compute(flops=1e9, hbm_bytes=5e8) if memory_bound else Compute(duration=1e-3)
    return compute_layers([Comm("all-reduce", grad)] * 3, compute)


@pytest.mark.parametrize(
    "dims",
    [
        [("ring", 16, 50e9, 5e-7)],
        [("ring", 4, 100e9, 5e-7), ("ring", 8, 50e9, 1e-6)],
    ],
)
@pytest.mark.parametrize("variation", ["straggler", "mixed"])
def test_exact_runs_are_the_same_with_the_closed_form_and_without_it(
    dims: list[tuple[str, int, float, float]], variation: str
) -> None:
    from systems import dim, make_system

    system = make_system([dim(*d) for d in dims], chunks=4)
    npus = math.prod(d[1] for d in dims)
    inputs: dict[str, object] = {"iterations": 3, "warmup": 1, "mode": "exact"}
    if variation == "straggler":
        inputs["stragglers"] = [{"rank": 3, "slowdown": 1.5}]
    else:
        inputs["npu_types"] = [{"ranks": f"0-{npus // 2 - 1}", "hbm_bandwidth": "450 GB/s"}]
    results = []
    for closed in (True, False):
        vectorized.RING_CLOSED_FORM = closed
        try:
            result, _execution = run_system(system, _dp(8 * 2**20, variation == "mixed"), **inputs)
        finally:
            vectorized.RING_CLOSED_FORM = True
        results.append(result.to_dict())
    assert results[0] == results[1]
