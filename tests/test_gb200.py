"""GB200: the 4-GPU ring and the NVL72 NVLS rows of the collectives family, and the
collective kernel's own per-channel HBM issue limit (endpoint.baseline.unit_hbm_bandwidth)."""

from __future__ import annotations

import pytest

from acesim import simulate_collective
from acesim.config.resolve import resolve_system
from acesim.validation import validate

GiB = 1 << 30


def _four() -> object:
    return resolve_system(
        "gb200-nvl72",
        overrides={"network.dimensions[0].size": 4, "collective.algorithm": "ring"},
    )


@pytest.mark.usefixtures("shipped_rows_once")  # the shipped rows once a process (conftest)
def test_the_gb200_rows_are_live_with_one_fit_row_per_curve() -> None:
    report = validate(["collectives"], quick=True)
    rows = {r.case.id: r for r in report.family("collectives").results}
    four = [r for i, r in rows.items() if i.startswith("gb200x4-ring-allreduce-")]
    rack = [r for i, r in rows.items() if i.startswith("gb200-nvl72-allreduce-")]
    assert len(four) == 11 and len(rack) == 5
    assert all(r.status == "ok" for r in four + rack), [r.note for r in four + rack]
    # each curve's 1 GiB row fits its plateau (the ring's protocol efficiency, NVLS's efficiency)
    assert [r.case.id for r in four + rack if r.case.fit] == [
        "gb200x4-ring-allreduce-1g",
        "gb200-nvl72-allreduce-1g",
    ]
    # the rows below 16 MiB and above the fit row are tests of the NCCL-sourced settings
    assert all(r.error is not None for r in four + rack)


def test_the_4_gpu_ring_takes_nccls_32_channels_and_runs_at_the_links_rate() -> None:
    r = simulate_collective(_four(), "all-reduce", GiB)  # type: ignore[arg-type]
    assert r.algorithm == "ring" and r.comm_units == 32  # SMs held = NCCL's coll channels
    assert r.bound == "link nvlink"  # not the per-channel HBM issue limit


def test_the_kernels_own_unit_hbm_bandwidth_bounds_the_payload_its_loop_covers() -> None:
    system = resolve_system(
        "gb200-nvl72",
        overrides={
            "network.dimensions[0].size": 4,
            "collective.algorithm": "ring",
            "endpoint.baseline.unit_hbm_bandwidth": "10 GB/s",
        },
    )
    r = simulate_collective(system, "all-reduce", GiB)
    assert r.bound == "comm-unit HBM issue"
    # HBM capacity still pays 3.5 bytes per network byte of a ring all-reduce ...
    assert r.hbm_bytes_per_npu / r.bytes_sent_per_npu == pytest.approx(3.5)
    # ... but the loads in flight bound the payload: one byte per network byte in the
    # reduce-scatter steps (both sources in flight together) and the all-gather steps alike
    assert r.busbw == pytest.approx(32 * 10e9, rel=0.01)
    # unset, the NPU preset's figure (55 GB/s per unit) applies
    unset = resolve_system(
        "gb200-nvl72",
        overrides={
            "network.dimensions[0].size": 4,
            "collective.algorithm": "ring",
            "endpoint.baseline.comm_units": 8,
            "endpoint.baseline.unit_bandwidth": "100 GB/s",  # above the HBM figure
            "endpoint.baseline.unit_hbm_bandwidth": None,
        },
    )
    r = simulate_collective(unset, "all-reduce", 8 * GiB)
    assert r.bound == "comm-unit HBM issue"
    assert r.busbw == pytest.approx(8 * 55e9, rel=0.01)


def test_the_nvl72_rack_runs_nvls_for_large_all_reduces() -> None:
    system = resolve_system(
        "gb200-nvl72",
        overrides={"endpoint.baseline.nvls_units": 32, "collective.nvls_channels": 32},
    )
    r = simulate_collective(system, "all-reduce", 8 * GiB)
    assert r.algorithm == "nvls" and r.comm_units == 32 and r.npus == 72
