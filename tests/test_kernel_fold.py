"""The kernel fold (:mod:`acesim.hardware.kernel_fold`): a pass's kernels computed in closed
form give the event path's figures to the last bit, whatever touches the NPU during the pass
(an activity on its HBM, a sync, its free units changing), with fewer events."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acesim
from acesim.config import load_system
from acesim.engine import Engine
from acesim.hardware import platform as platform_module
from acesim.hardware.kernels import Kernel, Roofline
from acesim.hardware.npu import NPU

_CONFIG = load_system("ace-isca21").npu
#: HBM shared by memory-level parallelism (the default) and by dominant-resource fairness
_CONFIGS = {
    "mlp": _CONFIG.model_copy(update={"hbm_arbitration": "mlp"}),
    "drf": _CONFIG.model_copy(update={"hbm_arbitration": "drf"}),
}

#: kernels of every bound: compute-bound, memory-bound, tiny (latency-bound), few blocks
_KERNELS = st.builds(
    Roofline,
    flops=st.sampled_from([0.0, 1e6, 3e9, 2e11]),
    hbm_bytes=st.sampled_from([0.0, 1e3, 4e6, 3e8]),
    blocks=st.sampled_from([None, 1, 7, 400]),
)
_PASSES = st.lists(st.lists(_KERNELS, min_size=1, max_size=4).map(tuple), min_size=1, max_size=4)
#: what touches the NPU, and when (a fraction of the passes' time alone)
_TOUCHES = st.lists(
    st.tuples(st.sampled_from(["hbm", "sync", "units"]), st.floats(0.0, 1.2)), max_size=3
)


def _run(
    fold: bool,
    passes: list[tuple[Kernel, ...]],
    touches: list[tuple[str, float]],
    *,
    absolute: bool = False,
    arbitration: str = "mlp",
) -> tuple[list[Any], int]:
    """The NPU's and its HBM's figures after ``passes`` one after another, with ``touches``
    (at fractions of the passes' time alone; ``absolute``: at those instants, s); and the
    events the engine processed."""
    engine = Engine()
    npu = NPU(engine, 0, _CONFIGS[arbitration])
    npu.fold_kernels = fold
    ends: list[float] = []

    def run_pass(i: int) -> None:
        if i < len(passes):
            npu.run_kernels(passes[i], lambda: (ends.append(engine.now), run_pass(i + 1)))

    alone = sum(npu.kernels_time_alone(p) for p in passes)
    actions: dict[str, Callable[[], Any]] = {
        "hbm": lambda: engine.start(2e6, {npu.hbm: 1.0}),
        "sync": engine.sync,
        "units": lambda: npu.units.acquire(3, lambda: engine.call(alone / 7, npu.units.release, 3)),
    }
    for kind, at in touches:
        engine.call_at(at if absolute else at * alone, actions[kind])
    run_pass(0)
    engine.run()
    engine.sync()
    figures = [
        engine.now,
        ends,
        npu.kernel_log,
        npu.compute_busy,
        npu.compute_hbm_bytes,
        npu.compute_hbm_demand,
        npu.flops_by_math,
        npu.compute_unit_seconds,
        [(r.used, r.peak, r.allocated) for r in npu.hbm_resources],
    ]
    return [json.dumps(x, default=repr) for x in figures], engine.events_processed


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passes=_PASSES, touches=_TOUCHES, arbitration=st.sampled_from(sorted(_CONFIGS)))
def test_a_folded_pass_gives_the_event_paths_figures_to_the_bit(
    passes: list[tuple[Kernel, ...]], touches: list[tuple[str, float]], arbitration: str
) -> None:
    folded, folded_events = _run(True, passes, touches, arbitration=arbitration)
    event_path, events = _run(False, passes, touches, arbitration=arbitration)
    assert folded == event_path
    assert folded_events <= events


def test_an_untouched_fold_processes_one_event_per_pass() -> None:
    passes = [(Roofline(1e9, 1e6), Roofline(1e6, 1e8), Roofline(3e9, 0.0))] * 3
    folded, folded_events = _run(True, passes, [])
    event_path, events = _run(False, passes, [])
    assert folded == event_path
    assert (folded_events, events) == (3, 3 * 3 * 2)  # a pass's end; each kernel's launch, end


@pytest.mark.parametrize("kind", ["hbm", "sync", "units"])
@pytest.mark.parametrize("at", [0.0, 0.3, 0.5, 1.0])
def test_a_touch_materialises_the_pass_where_the_event_path_has_it(kind: str, at: float) -> None:
    passes = [(Roofline(1e9, 1e6), Roofline(1e6, 1e8), Roofline(3e9, 0.0, blocks=7))] * 2
    assert _run(True, passes, [(kind, at)])[0] == _run(False, passes, [(kind, at)])[0]


@pytest.mark.parametrize("kind", ["hbm", "sync", "units"])
def test_a_touch_at_a_pass_s_first_or_last_instant_materialises_it_alike(kind: str) -> None:
    """Touches at the very instants a pass starts and ends (its last kernel's completion and
    the touch at one instant, in either order of the event path's)."""
    passes = [(Roofline(1e9, 1e6), Roofline(1e6, 1e8))] * 3
    engine = Engine()
    npu = NPU(engine, 0, _CONFIG)
    for kernels in passes:
        npu.run_kernels(kernels, lambda: None)
        engine.run()
    instants = sorted({t for _tag, start, end, _alone in npu.kernel_log for t in (start, end)})
    for at in instants:
        touches = [(kind, at)]
        folded = _run(True, passes, touches, absolute=True)[0]
        assert folded == _run(False, passes, touches, absolute=True)[0], at


def test_a_tracked_pass_is_not_folded() -> None:
    engine = Engine()
    npu = NPU(engine, 0, _CONFIG)
    npu.fold_kernels = True
    npu.run_kernels([Roofline(1e9, 1e6), Roofline(1e9, 1e6)], lambda: None, track=True)
    engine.run()
    assert engine.events_processed == 4


def _exact_run(fold: bool, workload: str, npus: int, **variation: Any) -> tuple[str, int]:
    """An exact-mode run's result (as JSON) and the events of its platform's engine."""
    platform_module.FOLD_KERNELS = fold
    try:
        system = load_system("ace-isca21").with_endpoint("ideal")
        result, execution = acesim.runs.run_system(
            system, workload, npus=npus, iterations=2, warmup=0, mode="exact", **variation
        )
    finally:
        platform_module.FOLD_KERNELS = True
    text = json.dumps(dataclasses.asdict(result), default=str, sort_keys=True)
    return text, execution.platform.engine.events_processed


@pytest.mark.parametrize(
    "workload,npus,variation",
    [
        ("resnet50", 16, {"stragglers": [{"rank": 3, "slowdown": 1.5}]}),
        ("dlrm", 8, {"stragglers": [{"rank": 1, "slowdown": 1.3}]}),
        (
            "resnet50",
            16,
            {"npu_types": [{"ranks": "0-7", "hbm_bandwidth": _CONFIG.hbm_bandwidth / 2}]},
        ),
    ],
)
def test_exact_runs_with_folded_kernels_give_the_same_result(
    workload: str, npus: int, variation: dict[str, Any]
) -> None:
    folded, folded_events = _exact_run(True, workload, npus, **variation)
    event_path, events = _exact_run(False, workload, npus, **variation)
    assert folded == event_path
    assert folded_events < events
