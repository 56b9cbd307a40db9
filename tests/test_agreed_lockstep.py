"""Exact mode with variation: collectives in agreed orders decided as the run goes
(acesim.network.agreed_lockstep) against the event simulation.

Every collective of a run with a straggler, mixed NPUs or a slow link is computed without
message events, overlapping ones included (before: every collective on the event path after
one redo, as soon as a straggler kept the others a few collectives ahead); results agree with
the all-event simulation within 1e-9 (link integrals: the vectorized path's, see
Engine.plan_usage). Ranks ready at one instant that would pick differently follow the lowest
one, on both paths. Where the event order would decide, the run is redone on the event path
and gives the event path's results.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from dp_workloads import graded_layers
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import dim, examples, make_system

import acesim
import acesim.network.vectorized as vectorized
from acesim.engine import Engine
from acesim.network import agreed_lockstep
from acesim.training import executor as executor_module

MiB = 2**20


def _flat(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _flat(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_flat(v) for v in value]
    return value


def _close(fast: Any, events: Any, rel: float, where: str = "") -> None:
    if isinstance(fast, dict):
        assert fast.keys() == events.keys(), where
        for key in fast:
            if key != "mode_note":
                _close(fast[key], events[key], rel, f"{where}.{key}")
    elif isinstance(fast, list):
        assert len(fast) == len(events), where
        for i, (a, b) in enumerate(zip(fast, events, strict=True)):
            _close(a, b, rel, f"{where}[{i}]")
    elif isinstance(fast, float):
        assert fast == pytest.approx(events, rel=rel, abs=1e-300), where
    else:
        assert fast == events, where


def _both(system: Any, workload: Any, **options: Any) -> tuple[Any, Any, Any]:
    """(this path's result, the all-event result, this path's execution)."""
    fast, execution = acesim.runs.run_system(system, workload, mode="exact", **options)
    vectorized.ENABLED = False
    try:
        events, _ = acesim.runs.run_system(system, workload, mode="exact", **options)
    finally:
        vectorized.ENABLED = True
    return _flat(asdict(fast)), _flat(asdict(events)), execution


VARIATIONS: dict[str, dict[str, Any]] = {
    "straggler": {"stragglers": [{"rank": 3, "slowdown": 1.5}]},
    "mixed": {"npu_types": [{"ranks": "0-7", "hbm_bandwidth": "450 GB/s"}]},
}


@pytest.mark.parametrize("varied", list(VARIATIONS))
def test_resnet50_with_variation_runs_every_collective_without_events(varied: str) -> None:
    """Issue 27's variation cases at 16 NPUs: every one of ResNet-50's 54 all-reduces computed
    here (they overlap: the ranks that do not wait for the straggler run collectives ahead),
    no redo, and the event path's figures (before this path: all 54 on the event path)."""
    system = acesim.load_system("ace-isca21").with_endpoint("ideal")
    options = {"npus": 16, "iterations": 1, "warmup": 0, **VARIATIONS[varied]}
    fast, events, execution = _both(system, "resnet50", **options)
    _close(fast, events, 1e-9)
    assert execution.redone == 0 and execution.event_collectives == 0
    assert len(execution.collectives) == 54 and execution.joint_collectives > 0
    assert fast["iteration_time"] == events["iteration_time"]


def test_the_straggler_case_was_on_the_event_path_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path before (one collective at a time, when its last rank joins): a redo with every
    collective on the event path, and the same figures."""
    system = acesim.load_system("ace-isca21").with_endpoint("ideal")
    options = {"npus": 16, "iterations": 1, "warmup": 0, **VARIATIONS["straggler"]}
    fast, execution = acesim.runs.run_system(system, "resnet50", mode="exact", **options)
    monkeypatch.setattr(executor_module, "AGREED_LOCKSTEP", False)
    before, old = acesim.runs.run_system(system, "resnet50", mode="exact", **options)
    assert old.redone == 1 and old.event_collectives == 54
    _close(_flat(asdict(fast)), _flat(asdict(before)), 1e-9)


NETWORKS = [
    [dim("ring", 8, 50e9, 1e-6)],
    [dim("ring", 4, 100e9, 5e-7), dim("ring", 4, 50e9, 1e-6)],
    [dim("ring", 2, 200e9, 5e-8), dim("ring", 4, 100e9, 5e-7), dim("ring", 2, 50e9, 1e-6)],
]


@settings(max_examples=examples(20), deadline=None)
@given(
    st.sampled_from(NETWORKS),
    st.lists(st.sampled_from([1 * MiB, 3 * MiB, 8 * MiB]), min_size=2, max_size=5),
    st.sampled_from([2e-5, 1e-4, 4e-4]),
    st.integers(1, 4),
    st.sampled_from(["fifo", "lifo"]),
    st.sampled_from(["layerwise", "no_overlap"]),
    st.sampled_from(["straggler", "link", "both"]),
    st.floats(1.05, 3.0),
)
def test_drawn_varied_runs_agree_with_the_event_simulation(
    dims: list[dict[str, Any]],
    grads: list[float],
    duration: float,
    chunks: int,
    scheduling: str,
    loop: str,
    varied: str,
    slowdown: float,
) -> None:
    """Overlapping all-reduces of different sizes on 1-3 ring dimensions, a straggler of a
    drawn slowdown, a slow link or both, one or two iterations: the run's figures agree with
    the all-event simulation within 1e-9 (computed here, or redone on the event path where
    the event order decides)."""
    system = make_system(
        dims,
        chunks=chunks,
        active_chunks_per_dimension=1,
        scheduling=scheduling,
        endpoint_delay=10e-9,
    )
    options: dict[str, Any] = {"iterations": 2, "warmup": 0, "loop": loop}
    if varied in ("straggler", "both"):
        options["stragglers"] = [{"rank": 1, "slowdown": slowdown}]
    if varied in ("link", "both"):
        options["links"] = [{"dim": 0, "rank": 2, "bandwidth": "10 GB/s"}]
    fast, events, _ = _both(system, graded_layers(grads, duration), **options)
    _close(fast, events, 1e-9)


def test_where_the_event_order_decides_the_run_is_redone_on_the_event_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision this path cannot make (here: every one, forced) redoes the run with every
    collective on the event path: the event path's figures, one redo."""
    monkeypatch.setattr(agreed_lockstep.AgreedLockstep, "_pick", lambda *_a: None)
    system = make_system([dim("ring", 4, 100e9, 5e-7), dim("ring", 4, 50e9, 1e-6)], chunks=2)
    options = {"iterations": 2, "warmup": 0, "stragglers": [{"rank": 1, "slowdown": 1.3}]}
    fast, events, execution = _both(system, graded_layers([1 * MiB, 3 * MiB], 1e-4), **options)
    assert execution.redone == 1 and execution.event_collectives == 4
    _close(fast, events, 0.0)


def test_a_late_rank_leaves_only_its_lines_unknown_until_it_joins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A straggler 3x as slow on an 8-rank ring: the others' collectives run ahead, decided
    with the straggler's part unknown (infinite) and computed again when it joins: no redo,
    the event path's figures."""
    unknown: list[int] = []
    compute = agreed_lockstep.AgreedLockstep._compute

    def counted(self: Any, decision: Any) -> None:
        compute(self, decision)
        unknown.append(int(np.sum(~np.isfinite(decision.end))))

    monkeypatch.setattr(agreed_lockstep.AgreedLockstep, "_compute", counted)
    system = make_system([dim("ring", 8, 50e9, 1e-6)], chunks=2, active_chunks_per_dimension=1)
    options = {"iterations": 1, "warmup": 0, "stragglers": [{"rank": 5, "slowdown": 3.0}]}
    workload = graded_layers([8 * MiB, 8 * MiB, 8 * MiB], 2e-4)
    fast, events, execution = _both(system, workload, **options)
    assert execution.redone == 0 and execution.event_collectives == 0
    _close(fast, events, 1e-9)
    # decided while the straggler had not joined (every rank of its one ring unknown), then
    # computed again: 3 collectives x 2 chunks x 2 phases, and some more than once
    assert max(unknown) == 8 and unknown[-1] == 0
    assert len(unknown) > 3 * 2 * 2
    assert not math.isinf(fast["iteration_time"])


def test_ranks_ready_together_that_pick_differently_follow_the_lowest_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ranks ready at one instant whose own picks differ (a straggler's delay reaching them
    at once, different phases arrived at each): every one follows the lowest-numbered one's
    pick, on this path and on the event path alike (acesim.network.agreement), so each such
    decision is made here, with the event path's figures. Before, the event path took the
    pick of whichever rank's event the engine ran first, and this path gave up (redid the
    run on the event path) at every one."""
    differing: list[bool] = []
    given_up: list[bool] = []
    pick = agreed_lockstep.AgreedLockstep._pick

    def watched(self: Any, when: float, dim_: int, here: Any, ready: np.ndarray) -> Any:
        own = set()
        for rank in np.flatnonzero(ready == when):
            alone = np.where(np.arange(len(ready)) < rank, np.inf, ready)  # rank decides
            own.add(id(pick(self, when, dim_, here, alone)))
        chosen = pick(self, when, dim_, here, ready)
        differing.append(len(own) > 1)
        given_up.append(chosen is None)
        return chosen

    monkeypatch.setattr(agreed_lockstep.AgreedLockstep, "_pick", watched)
    system = make_system(
        [dim("ring", 4, 100e9, 5e-7), dim("ring", 4, 50e9, 1e-6)],
        chunks=4,
        active_chunks_per_dimension=1,
        scheduling="fifo",
        endpoint_delay=10e-9,
    )
    options: dict[str, Any] = {
        "iterations": 2,
        "warmup": 0,
        "loop": "layerwise",
        "stragglers": [{"rank": 1, "slowdown": 1.2}],
    }
    workload = graded_layers([4 * MiB, 1 * MiB, 8 * MiB], 4e-4)
    fast, events, _ = _both(system, workload, **options)
    assert sum(differing) >= 1 and not any(given_up)
    _close(fast, events, 1e-9)


def test_schedule_last_runs_after_every_event_of_its_instant() -> None:
    engine = Engine()
    order: list[str] = []
    engine.schedule_last(1.0, order.append, "last")
    engine.call_at(1.0, order.append, "normal")

    def at_one() -> None:
        order.append("first")
        engine.call(0.0, order.append, "then")  # scheduled at the instant, still before

    engine.call_at(1.0, at_one)
    engine.call_at(0.5, order.append, "before")
    engine.run()
    assert order == ["before", "normal", "first", "then", "last"]


@settings(max_examples=examples(25), deadline=None)
@given(
    st.sampled_from(
        [
            [dim("ring", 8, 50e9, 1e-6)],
            [dim("ring", 4, 100e9, 5e-7), dim("fully_connected", 4, 50e9, 1e-6)],
            [dim("ring", 2, 200e9, 5e-8), dim("switch", 4, 100e9, 5e-7), dim("ring", 2)],
        ]
    ),
    st.integers(0, 2**32 - 1),
)
def test_computing_again_only_the_moved_lines_is_computing_everything_again(
    dims: list[dict[str, Any]], seed: int
) -> None:
    """``Lockstep.phase_end_lines``: the ends of the group lines holding a rank whose start
    became known, computed on those lines alone, equal (bit for bit) the ends computed for
    every rank, on ring, direct and switch phases."""
    from acesim.hardware.platform import Platform
    from acesim.hardware.strategy import Strategy
    from acesim.network.vectorized import Lockstep

    rng = np.random.default_rng(seed)
    system = make_system(dims, chunks=1, active_chunks_per_dimension=1)
    platform = Platform(system, Strategy.every_npu(None))
    rt = platform.collectives
    coll = rt.issue("all-reduce", 3 * MiB, ranks=[])
    lock = Lockstep(rt, coll.phases, coll.chunks)
    assert lock.begin_alone()
    n = rt.topology.npus
    for phase in coll.phases:
        begin = rng.uniform(0.0, 1e-5, n)
        if phase.dim in lock.coupled:  # direct steps: a line starts together
            begin = begin[lock._geo(phase).rows()[:, :1]].repeat(phase.size, 1)
            begin = begin.ravel()[np.argsort(lock._geo(phase).rows().ravel())]
        full = lock.phase_end(phase, begin, record=False)
        late = rng.random(n) < 0.3
        unknown = np.where(late, np.inf, begin)
        partial = lock.phase_end(phase, unknown, record=False)
        assert full is not None and partial is not None
        assert lock.phase_end_lines(phase, begin, partial, late)
        assert np.array_equal(partial, full)


@pytest.mark.parametrize("endpoint", ["ideal", "baseline"])
def test_the_message_bound_holds_collectives_whose_messages_run_on_the_event_path(
    endpoint: str,
) -> None:
    """``collective.max_messages`` bounds the messages a run simulates: a collective the
    lockstep backend computes (the ideal endpoint) runs beyond it, one on the event path (the
    baseline endpoint charges the NPUs) is refused, naming the bound."""
    from acesim.config.resolve import resolve_system
    from acesim.errors import ConfigError

    system = resolve_system("ace-isca21", overrides={"collective.max_messages": 300})
    options: dict[str, Any] = {"npus": 16, "iterations": 1, "warmup": 0, "mode": "exact"}
    options["stragglers"] = [{"rank": 3, "slowdown": 1.5}]
    run = acesim.runs.run_system
    if endpoint == "ideal":
        result, execution = run(system.with_endpoint(endpoint), "resnet50", **options)
        assert execution.event_collectives == 0 and result.iteration_time > 0
    else:
        with pytest.raises(ConfigError, match=r"collective\.max_messages.*640 messages"):
            run(system.with_endpoint(endpoint), "resnet50", **options)
