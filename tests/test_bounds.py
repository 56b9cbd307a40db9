"""What bound a run: every second of the measured iteration is attributed to a resource."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

import acesim
from acesim.config.resolve import resolve_system
from acesim.runs import run_system
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

MiB = 2**20


def _system(endpoint: str = "ideal", **overrides: object) -> acesim.SystemConfig:
    return resolve_system(
        {
            "npu": {"compute_units": 10, "matrix_flops": {"fp32": 10e12}, "hbm_bandwidth": 1e12},
            "network": {"dimensions": [{"kind": "switch", "size": 4, "link_bandwidth": 10e9}]},
            "collective": {"chunks": 1, "endpoint_delay": 0.0},
            "endpoint": {"kind": endpoint},
        },
        overrides=dict(overrides),
    )


def _one_layer(compute: Compute, grad: float) -> Workload:
    comm = Comm("all-reduce", grad) if grad else None
    return Workload("one", (Layer("l", forward=Pass(compute), weight_grad=Pass(compute, comm)),))


def _bound(system: acesim.SystemConfig, workload: Workload) -> acesim.RunResult:
    result, _ = run_system(system, workload, iterations=3)
    assert sum(result.bound_by.values()) == pytest.approx(result.iteration_time, rel=1e-9)
    return result


def test_a_compute_bound_kernel_is_bound_by_compute_units() -> None:
    result = _bound(_system(), _one_layer(Compute(flops=1e10, hbm_bytes=1e6), 0))
    assert result.bound == "compute: compute units"
    assert result.bound_by["compute: compute units"] == pytest.approx(2e-3, rel=1e-9)


def test_a_memory_bound_kernel_is_bound_by_hbm() -> None:
    result = _bound(_system(), _one_layer(Compute(flops=1e6, hbm_bytes=1e9), 0))
    assert result.bound == "compute: HBM"
    assert result.bound_by["compute: HBM"] == pytest.approx(2e-3, rel=1e-9)


def test_exposed_communication_is_bound_by_the_link() -> None:
    # Tiny compute, a 64 MiB all-reduce each iteration: the forward of the next iteration
    # waits for it, and the link binds its messages.
    result = _bound(_system(), _one_layer(Compute(flops=1e3), 64 * MiB))
    assert result.bound == "exposed: link local"
    assert result.bound_by["exposed: link local"] > 0.9 * result.iteration_time


def test_ace_waiting_for_sram_is_named() -> None:
    # One 64 MiB chunk, split into 0.5 MiB pieces through a 1 MiB SRAM, DMA much faster than
    # the link: pieces queue for SRAM space while the link drains the pieces admitted.
    system = _system("ace", **{"endpoint.ace.sram": "1 MiB", "endpoint.ace.dma_bandwidth": 1e12})
    result = _bound(system, _one_layer(Compute(flops=1e3), 64 * MiB))
    names = set(result.bound_by)
    assert "exposed: ACE SRAM (chunks waiting for space)" in names
    assert result.bound in {"exposed: link local", "exposed: ACE SRAM (chunks waiting for space)"}


@pytest.mark.xdist_group("resnet50_16")  # one process: it shares resnet50_16 (conftest)
def test_the_default_case_says_what_bound_each_endpoint(resnet50_16: acesim.Comparison) -> None:
    comp = resnet50_16  # acesim.compare("ace-isca21", "resnet50", npus=16)
    for kind in ("baseline", "ace", "ideal"):
        best = comp.best(kind)
        assert best.bound and best.bound in best.bound_by
        assert sum(best.bound_by.values()) == pytest.approx(best.iteration_time, rel=1e-9)
    # ResNet-50 at 2 images per NPU on a V100-class NPU: memory-bound kernels dominate.
    assert comp.best("ideal").bound == "compute: HBM"


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=12),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=30),
)
def test_the_vectorized_overlaps_are_the_loops(
    raw_spans: list[tuple[int, int]], raw: list[tuple[int, int]]
) -> None:
    """numpy's overlaps of many intervals with disjoint spans: bit for bit the loop's."""
    from acesim.intervals import union
    from acesim.training.bounds import _overlap, _overlaps

    spans = union([(a / 7, (a + w) / 7) for a, w in raw_spans])
    intervals = [("m", a / 3, (a + w) / 3) for a, w in raw]
    assert _overlaps(intervals, spans) == [_overlap(s, e, spans) for _n, s, e in intervals]


def test_the_union_of_intervals_merges_touching_drops_empty_and_clips() -> None:
    from acesim.intervals import union

    spans = [(3.0, 4.0), (0.0, 1.0), (1.0, 2.0), (5.0, 5.0), (2.5, 3.5), (6.0, 9.0)]
    assert union(spans) == [(0.0, 2.0), (2.5, 4.0), (6.0, 9.0)]
    assert union(spans, 0.5, 7.0) == [(0.5, 2.0), (2.5, 4.0), (6.0, 7.0)]
    assert union([(1.0, 2.0)], 3.0, 4.0) == []
