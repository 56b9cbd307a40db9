"""The per-rank backend (acesim.network.rank_fluid) against the event simulation: a lone
collective on the baseline endpoint with ranks made to differ."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from systems import dim, examples, make_system

import acesim.network.rank_fluid as rank_fluid
from acesim import simulate_collective
from acesim.config import SystemConfig
from acesim.config.variation import LinkChange, NpuType, Variation
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy

MiB = 2**20
NETWORKS = [
    [dim("ring", 8, 50e9, 1e-6, 2)],
    [dim("ring", 4, 200e9, 1e-7, 2), dim("ring", 4, 50e9, 2e-7, 2)],
    [dim("ring", 2, 200e9, 1e-7), dim("ring", 4, 50e9, 2e-7, 2), dim("ring", 3, 25e9, 5e-7)],
    [dim("ring", 4, 100e9, 5e-7), dim("switch", 4, 50e9, 1e-6)],
]

PROTOCOLS = {
    "LL": {"bandwidth": 0.5, "hop_latency": 0.5e-6},
    "Simple": {"bandwidth": 1.0, "hop_latency": 2e-6, "base_latency": 5e-6},
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[SystemConfig, str, float, Variation]:
    dims = draw(st.sampled_from(NETWORKS))
    op = draw(st.sampled_from(["all-reduce", "reduce-scatter", "all-gather"]))
    # NCCL protocols on the ring (their link weights, base and hop latencies) or none
    protocols = draw(st.sampled_from([{}, {"ring": PROTOCOLS}]))
    endpoint = draw(st.sampled_from(["baseline", "baseline", "ideal"]))
    system = make_system(
        dims,
        endpoint=endpoint,
        chunks=draw(st.integers(1, 4)),
        scheduling=draw(st.sampled_from(["fifo", "lifo"])),
        endpoint_delay=draw(st.sampled_from([0.0, 10e-9])),
        algorithms={op: "ring"},
        protocols=protocols,
    )
    npus = math.prod(d["size"] for d in dims)
    # the ideal endpoint does not touch HBM: NPU types that differ in it alone leave its
    # ranks alike (no agreed orders, nothing for this backend)
    if endpoint == "ideal" or draw(st.booleans()):
        dimension = draw(st.integers(0, len(dims) - 1))
        bandwidth = dims[dimension]["link_bandwidth"] * draw(st.sampled_from([0.25, 0.5]))
        variation = Variation(
            links=(
                LinkChange(
                    dim=dimension,
                    rank=draw(st.integers(0, npus - 1)),
                    bandwidth=bandwidth,
                    latency=draw(st.sampled_from([None, 2e-6])),
                ),
            )
        )
    else:
        first = draw(st.integers(1, npus - 1))  # some ranks differ from the others
        hbm = system.npu.hbm_bandwidth * draw(st.sampled_from([0.25, 0.5]))
        variation = Variation(
            npu_types=(
                NpuType.model_validate({"ranks": f"{first}-{npus - 1}", "hbm_bandwidth": hbm}),
            )
        )
    size = draw(st.sampled_from([4096.0, 3 * MiB, 3 * MiB + 1.0, 64 * MiB]))
    return system, op, size, variation


def _run(system: SystemConfig, op: str, size: float, variation: Variation) -> dict[str, Any]:
    data: dict[str, Any] = simulate_collective(
        system, op, size, exact=True, variation=variation
    ).to_dict()
    return data


def with_and_without(run: Any, *case: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run(*case)`` with the per-rank backend, and with it off (the event path)."""
    fast = run(*case)
    rank_fluid.ENABLED = False
    try:
        events = run(*case)
    finally:
        rank_fluid.ENABLED = True
    return fast, events


def _close(a: Any, b: Any, where: str = "") -> None:
    """``a`` equals ``b``, floats within a relative 1e-9 (the module docstring's bound)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300), (where, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), where
        for key in a:
            _close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


@settings(max_examples=examples(40), deadline=None)
@given(cases())
@example(
    (
        make_system(
            NETWORKS[2], endpoint="baseline", chunks=4, scheduling="lifo", endpoint_delay=1e-8
        ),
        "all-reduce",
        64 * MiB,
        Variation(links=(LinkChange(dim=0, rank=3, bandwidth=100e9),)),
    )
)
def test_the_per_rank_backend_gives_the_event_simulations_figures(case: tuple) -> None:
    fast, events = with_and_without(_run, *case)
    note = fast.pop("mode_note")
    events.pop("mode_note")
    # on the baseline endpoint it ran, or its ranks' timing needed the event order (two
    # phases reaching a rank at one instant from different events); the ideal endpoint's
    # variants include steps it does not take (its search keeps the fastest)
    if case[0].endpoint.kind == "baseline":
        assert "event path" not in note or "timing needs the event order" in note, note
    _close(fast, events)


def test_the_backend_runs_without_events_and_says_why_where_it_does_not() -> None:
    system = make_system(NETWORKS[1], endpoint="baseline", chunks=4)
    slow = Variation(links=(LinkChange(dim=1, rank=5, bandwidth=10e9),))
    platform = Platform(system, Strategy.every_npu(slow))
    coll = rank_fluid.run_alone(platform.collectives, "all-reduce", 64 * MiB)
    assert not isinstance(coll, str) and platform.engine.events_processed == 0
    assert len(coll.rank_finished) == 16 and platform.engine.now == coll.finished
    # each NPU's units were taken for the collective and given back at its end
    assert platform.npus[0].units.peak == 8 and platform.npus[0].units.held == 0
    ace = Platform(make_system(NETWORKS[1], endpoint="ace", chunks=4), Strategy.every_npu(slow))
    why = rank_fluid.run_alone(ace.collectives, "all-reduce", 64 * MiB)
    assert isinstance(why, str) and "shapes or watches the steps" in why
    two = make_system(NETWORKS[1], endpoint="baseline", chunks=4, active_chunks_per_dimension=2)
    concurrent = Platform(two, Strategy.every_npu(slow))
    why = rank_fluid.run_alone(concurrent.collectives, "all-reduce", 64 * MiB)
    assert why == "several chunks in flight per dimension"
    symmetric = Platform(system, exact=False)
    why = rank_fluid.run_alone(symmetric.collectives, "all-reduce", 64 * MiB)
    assert why == "not exact mode"
    alike = Platform(system, exact=True)
    why = rank_fluid.run_alone(alike.collectives, "all-reduce", 64 * MiB)
    assert why == "no variation: its ranks alike, without agreed orders"


def _slow_link() -> tuple[SystemConfig, Variation]:
    """Two dimensions of four, four chunks, the baseline endpoint, one link slower."""
    system = make_system(NETWORKS[1], endpoint="baseline", chunks=4)
    return system, Variation(links=(LinkChange(dim=1, rank=5, bandwidth=10e9),))


def _falls_back(monkeypatch: Any, why: str) -> None:
    """The slow-link all-reduce ran on the event path saying ``why``: the figures of the
    backend off."""
    system, slow = _slow_link()
    fallen = _run(system, "all-reduce", 64 * MiB, slow)
    assert why in fallen.pop("mode_note")
    monkeypatch.setattr(rank_fluid, "ENABLED", False)
    events = _run(system, "all-reduce", 64 * MiB, slow)
    events.pop("mode_note")
    assert fallen == events
    monkeypatch.setattr(rank_fluid, "ENABLED", True)


def test_a_tie_left_to_the_event_order_runs_the_event_path_with_the_units_given_back(
    monkeypatch: Any,
) -> None:
    """Where the backend meets a tie the event order would decide, the event path runs the
    collective from the start: the same figures as with the backend off, the NPUs' units
    held once, not twice."""

    def tie(self: Any) -> Any:
        raise rank_fluid.Conflict(set())

    monkeypatch.setattr(rank_fluid._Run, "run", tie)
    _falls_back(monkeypatch, "timing needs the event order")
    # the backend took each NPU's units as the collective began and gave them back
    system, slow = _slow_link()
    platform = Platform(system, Strategy.every_npu(slow))
    with pytest.raises(rank_fluid.Conflict):
        rank_fluid.run_alone(platform.collectives, "all-reduce", 64 * MiB)
    assert all(npu.units.held == 0 for npu in platform.npus)
    assert platform.npus[0].units.peak == system.endpoint.baseline.comm_units


def test_a_table_past_its_bound_runs_the_event_path_and_says_so(monkeypatch: Any) -> None:
    monkeypatch.setattr(rank_fluid, "_MAX_TABLE", 100)  # one chunk phase's slot, no more
    _falls_back(monkeypatch, "would pass the per-rank backend's table")
