"""Endpoint contention: compute units and HBM shared by compute kernels and collectives."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acesim.config import SystemConfig, system_from_dict
from acesim.errors import ConfigError
from acesim.hardware.kernels import Roofline
from acesim.hardware.platform import Platform
from acesim.simulate import simulate_collective

GB = 1e9
MiB = 2**20


def system(
    *,
    p: int = 8,
    endpoint: str = "baseline",
    hbm: float = 900 * GB,
    units: int = 80,
    unit_flops: float = 1e12,
    link: float = 100 * GB,
    latency: float = 0.0,
    baseline: dict[str, Any] | None = None,
    ace: dict[str, Any] | None = None,
) -> SystemConfig:
    return system_from_dict(
        {
            "name": "endpoint-test",
            "npu": {
                "compute_units": units,
                "matrix_flops": {"fp32": unit_flops * units},
                "vector_flops": unit_flops * units,
                "hbm_bandwidth": hbm,
            },
            "network": {
                "dimensions": [
                    {"kind": "ring", "size": p, "link_bandwidth": link, "link_latency": latency}
                ]
            },
            "collective": {"chunks": 1, "endpoint_delay": 0.0},
            "endpoint": {"kind": endpoint, "baseline": baseline or {}, "ace": ace or {}},
        }
    )


def test_baseline_equals_ideal_with_ample_hbm_and_units() -> None:
    cfg = system(hbm=1e18, baseline={"comm_units": 8, "unit_bandwidth": 1e18}, latency=1e-6)
    base = simulate_collective(cfg, "all-reduce", 64 * MiB)
    ideal = simulate_collective(cfg, "all-reduce", 64 * MiB, endpoint="ideal")
    assert base.time == pytest.approx(ideal.time, rel=1e-12)


def test_halving_the_hbm_given_to_communication_halves_the_baseline_bandwidth() -> None:
    def algbw(share: float) -> float:
        cfg = system(
            hbm=100 * GB,
            link=1e15,
            baseline={"hbm_sharing": "static", "hbm_share": share, "unit_bandwidth": 1e15},
        )
        return simulate_collective(cfg, "all-reduce", 256 * MiB).algbw

    assert algbw(0.2) / algbw(0.4) == pytest.approx(0.5, rel=1e-9)


def test_hbm_bound_baseline_runs_at_hbm_over_its_byte_accounting() -> None:
    # Ring all-reduce on p NPUs: half the network bytes are reduce steps (5 HBM bytes per
    # network byte), half gather steps (2): 3.5 on average.
    cfg = system(hbm=70 * GB, link=1e15, baseline={"unit_bandwidth": 1e15})
    r = simulate_collective(cfg, "all-reduce", 64 * MiB)
    assert r.hbm_bytes_per_npu / r.bytes_sent_per_npu == pytest.approx(3.5)
    assert r.network_bandwidth == pytest.approx(70 * GB / 3.5, rel=1e-9)


def test_ace_never_holds_a_compute_unit() -> None:
    cfg = system(endpoint="ace")
    platform = Platform(cfg)
    npu = platform.npus[0]
    npu.run_kernels([Roofline(1e12, 0.0)], lambda: None)
    platform.collectives.issue("all-reduce", 64 * MiB)
    platform.engine.run()
    assert npu.units.peak == 0 and npu.units.held_time == 0
    assert npu.units_for_compute == cfg.npu.compute_units
    assert npu.kernel_log[0][2] - npu.kernel_log[0][1] == pytest.approx(npu.kernel_log[0][3])


@pytest.mark.parametrize("flops,hbm_bytes", [(80e12, 1e9), (1e9, 900e9), (0.0, 9e9)])
def test_kernel_alone_runs_at_its_roofline(flops: float, hbm_bytes: float) -> None:
    cfg = system()
    platform = Platform(cfg)
    npu = platform.npus[0]
    npu.run_kernels([Roofline(flops, hbm_bytes)], lambda: None)
    end = platform.engine.run()
    assert end == pytest.approx(max(flops / 80e12, hbm_bytes / 900e9), rel=1e-12)


@pytest.mark.parametrize("policy", ["fair", "static"])
def test_memory_bound_kernel_slows_by_the_hbm_the_collective_takes(policy: str) -> None:
    # A memory-bound kernel and a baseline all-reduce that finishes first. HBM is saturated
    # throughout, so the kernel ends when HBM has moved its bytes plus the collective's:
    # fair -> (M + comm bytes) / B; static -> M / ((1 - s) B) (compute only ever gets 1 - s).
    hbm, M = 100 * GB, 20 * GB
    cfg = system(
        hbm=hbm,
        link=1e15,
        baseline={"hbm_sharing": policy, "hbm_share": 0.25, "unit_bandwidth": 1e15},
    )
    r = simulate_collective(cfg, "all-reduce", 64 * MiB, compute=(1.0, M))
    assert r.compute is not None
    assert r.time < r.compute["kernel_time"]
    if policy == "fair":
        expected = (M + r.hbm_bytes_per_npu) / hbm
    else:
        expected = M / (0.75 * hbm)
    assert r.compute["kernel_time"] == pytest.approx(expected, rel=1e-9)
    assert r.compute["kernel_slowdown"] > 1.0


def test_wave_quantisation_losing_units_to_a_collective_costs_a_whole_wave() -> None:
    # 132 thread-blocks on 132 units: one wave. A collective takes 8 units while it runs:
    # 132 blocks on 124 units take two waves.
    cfg = system(
        units=132,
        link=1 * GB,  # a long collective that outlasts the kernel
        baseline={"comm_units": 8, "unit_policy": "while_active"},
    )
    platform = Platform(cfg)
    npu = platform.npus[0]
    coll = platform.collectives.issue("all-reduce", 2048 * MiB)
    npu.run_kernels([Roofline(132e12, 0.0, blocks=132)], lambda: None)
    platform.engine.run()
    _tag, start, end, alone = npu.kernel_log[0]
    assert coll.finished is not None and coll.finished > end
    assert alone == pytest.approx(1.0)
    assert end - start == pytest.approx(2.0, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    p=st.integers(2, 8),
    size=st.integers(1, 256).map(lambda k: k * MiB),
    kernel_bytes=st.floats(0, 50e9),
    policy=st.sampled_from(["fair", "static"]),
    endpoint=st.sampled_from(["baseline", "ace"]),
    hbm=st.floats(50e9, 2e12),
)
def test_no_resource_above_capacity_and_hbm_bytes_conserved(
    p: int, size: int, kernel_bytes: float, policy: str, endpoint: str, hbm: float
) -> None:
    cfg = system(
        p=p,
        hbm=hbm,
        endpoint=endpoint,
        latency=1e-6,
        baseline={"hbm_sharing": policy, "hbm_share": 0.3},
    )
    platform = Platform(cfg)
    npu = platform.npus[0]
    npu.run_kernels([Roofline(1e9, kernel_bytes)], lambda: None)
    coll = platform.collectives.issue("all-reduce", size)
    platform.engine.run()
    for res in platform.engine.resources:
        assert res.peak <= res.capacity * (1 + 1e-9), res
    net = coll.bytes_sent
    if endpoint == "baseline":
        comm = 3.5 * net  # half reduce (5 B/B), half gather (2 B/B)
    else:
        comm = 2.0 * size  # read each chunk once, write the result once
    total = sum(r.used for r in npu.hbm_resources)
    assert total == pytest.approx(kernel_bytes + comm, rel=1e-9)
    assert npu.comm_hbm_bytes == pytest.approx(comm, rel=1e-9, abs=1e-3)


def test_membw_ratios_follow_the_paper_derivation() -> None:
    from acesim.config import load_system
    from acesim.studies.membw import membw_analysis

    # the byte accounting only: neither the simulated need nor the need at equal network
    # bandwidth (both searches of simulated collectives, tests/test_commands.py's)
    rows = membw_analysis(
        load_system("ace-isca21"), npus=(16, 64, 128), simulate_need=False, equal_bandwidth=False
    )
    for row, expected in zip(rows, (3.28, 3.45, 3.47), strict=True):
        n = row.npus
        assert row.baseline_ratio == pytest.approx(3.5)
        assert row.ace_ratio == pytest.approx(n / (n - 1))
        assert row.saving == pytest.approx(3.5 * (n - 1) / n)
        assert row.saving == pytest.approx(expected, abs=0.005)


def test_ace_spill_accounts_extra_hbm_traffic() -> None:
    # Splitting off, spilling on: a 16 MiB chunk through 4 MiB of SRAM spills 3/4 of its
    # network bytes, each paying 2 extra HBM bytes.
    ace = {"sram": 4 * MiB, "mode": "store_and_forward", "split_chunks": False}
    cfg = system(endpoint="ace", ace=ace)
    r = simulate_collective(cfg, "all-reduce", 16 * MiB)
    expected = 2 * 16 * MiB + 0.75 * 2.0 * r.bytes_sent_per_npu
    assert r.hbm_bytes_per_npu == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            {"npu": {"compute_units": 8}, "endpoint": {"baseline": {"comm_units": 8}}},
            "endpoint.baseline.comm_units: must be fewer than npu.compute_units (8), got 8",
        ),
        ({"endpoint": {"ace": {"sram": 0}}}, "endpoint.ace.sram: must be positive, got 0 B"),
        (
            {"endpoint": {"ace": {"alu_bandwidth": "0 GB/s"}}},
            "endpoint.ace.alu_bandwidth: must be positive, got 0 B/s",
        ),
    ],
)
def test_bad_endpoint_parameters_name_the_field(overrides: dict[str, Any], message: str) -> None:
    doc: dict[str, Any] = {
        "network": {"dimensions": [{"kind": "ring", "size": 4, "link_bandwidth": "1 GB/s"}]},
    }
    doc.update(overrides)
    with pytest.raises(ConfigError) as info:
        system_from_dict(doc)
    assert str(info.value) == message


def test_chunk_larger_than_sram_with_spilling_off_is_a_config_error() -> None:
    ace = {
        "sram": "1 MiB",
        "mode": "store_and_forward",
        "split_chunks": False,
        "allow_spill": False,
    }
    cfg = system(endpoint="ace", ace=ace)
    with pytest.raises(ConfigError, match="endpoint.ace.sram: a chunk of 4194304 bytes"):
        simulate_collective(cfg, "all-reduce", 4 * MiB)


def test_with_compute_reports_both_slowdowns() -> None:
    cfg = system(hbm=100 * GB, link=1e15, baseline={"unit_bandwidth": 1e15})
    r = simulate_collective(cfg, "all-reduce", 64 * MiB, compute=(1.0, 20 * GB))
    assert r.compute is not None
    assert r.compute["collective_slowdown"] > 1.0
    assert math.isfinite(r.compute["kernel_slowdown"])
