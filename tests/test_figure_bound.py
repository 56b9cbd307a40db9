"""A training run's figure bound (:mod:`acesim.training.figure_bound`): never above the
figure the simulation gives, in every variant of the ideal endpoint, and a search that skips
the variants it rules out keeps what running every one of them keeps."""

from __future__ import annotations

from typing import Any

from dp_workloads import comm_layers, compute_layers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from systems import dim, examples, make_system

from acesim.hardware.endpoints import ENDPOINT_KINDS
from acesim.runs.how import CannotBeat
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute, run_case, variant_case
from acesim.workload.model import Comm, Compute, Workload

MiB = 2**20


def _workload(grads: list[int], duration: float, roofline: bool) -> Workload:
    comms = [Comm("all-reduce", g) for g in grads]
    if not roofline:
        return comm_layers(comms, duration)
    # kernels of FLOPs and HBM bytes: their time alone is the NPU's roofline
    return compute_layers(comms, Compute(flops=duration * 1e14, hbm_bytes=duration * 5e11))


def _bound(case: Any, variant: Any) -> float:
    """The variant's figure bound: a run told to beat 0 s raises it (0: none known)."""
    try:
        execute(variant_case(case, None, variant), variant=variant.label, beat=0.0)
    except CannotBeat as beaten:
        return beaten.bound
    return 0.0


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    npus=st.sampled_from([4, 8, 16]),
    kind=st.sampled_from(["ring", "switch", "2d"]),
    chunks=st.integers(1, 4),
    grads=st.lists(st.sampled_from([64 * 1024, MiB, 8 * MiB, 16 * MiB]), min_size=1, max_size=3),
    duration=st.sampled_from([1e-5, 2e-4, 1e-3]),
    roofline=st.booleans(),
    measured=st.sampled_from([(1, 0), (2, 0), (3, 1)]),
    straggler=st.sampled_from([None, 1.5, 0.7]),  # 0.7: a rank faster than the others
    symmetric=st.booleans(),  # without a straggler: symmetric mode (one rank simulated)
)
def test_the_figure_bound_is_no_more_than_the_simulated_figure_of_any_variant(
    npus: int,
    kind: str,
    chunks: int,
    grads: list[int],
    duration: float,
    roofline: bool,
    measured: tuple[int, int],
    straggler: float | None,
    symmetric: bool,
) -> None:
    if kind == "2d":
        dims = [dim("ring", 2, 100e9, 5e-7), dim("switch", npus // 2, 50e9, 2e-6)]
    else:
        dims = [dim(kind, npus, 50e9, 1e-6)]
    iterations, warmup = measured
    mode = "symmetric" if symmetric and straggler is None else "exact"
    inputs: dict[str, Any] = {"iterations": iterations, "warmup": warmup, "mode": mode}
    if straggler is not None:
        inputs["stragglers"] = [{"rank": 1, "slowdown": straggler}]
    case = make_run_case(
        make_system(dims, chunks=chunks), _workload(grads, duration, roofline), **inputs
    )
    figures = []
    for v in ENDPOINT_KINDS.get("ideal").variants_of(case.system):
        bound = _bound(case, v)
        figure = execute(variant_case(case, None, v), variant=v.label)[0].figure
        assert bound <= figure * (1 + 1e-9), (v.label, bound, figure)
        figures.append(figure)
    assert run_case(case)[0].figure == min(figures)


def test_a_search_skips_the_variant_that_cannot_beat_the_fastest_and_keeps_the_same_result() -> (
    None
):
    """Data parallel on a ring of 16: ACE's pieces (its SRAM) make the ideal endpoint's
    variant as ACE slower by more latency than the fastest leaves: it is not simulated."""
    dims = [dim("ring", 16, 50e9, 5e-7)]
    case = make_run_case(
        make_system(dims, chunks=4),
        comm_layers([Comm("all-reduce", 16 * MiB)] * 4, 1e-3),
        iterations=2,
        warmup=0,
        mode="exact",
    )
    variants = ENDPOINT_KINDS.get("ideal").variants_of(case.system)
    assert len(variants) > 1
    ran: list[Any] = []
    result, _execution = run_case(case, on_estimate=ran.append)
    every = [execute(variant_case(case, None, v), variant=v.label)[0] for v in variants]
    fastest = min(every, key=lambda r: r.figure)
    assert len(ran) < len(variants)  # some variant was not simulated
    assert result.figure == fastest.figure
    assert result.to_dict() == fastest.to_dict()
