"""Offload substrates side by side: the streaming ACE, the ``sm`` alias, zero-SM offload on an
8x H100 node (issue 13)."""

from __future__ import annotations

import pytest

import acesim
from acesim.config.resolve import resolve_system
from acesim.errors import AcesimError, ConfigError
from acesim.hardware.endpoints.ace import SRAM_WAIT, piece_bytes
from acesim.hardware.platform import Platform
from acesim.runs.compare import check_endpoints
from acesim.simulate import simulate_collective

MiB = 2**20


def _ace(**changes: object) -> acesim.SystemConfig:
    return resolve_system("ace-isca21").with_endpoint("ace", **changes)


def _ideal_best(system: acesim.SystemConfig, size: float) -> float:
    """The ideal endpoint's busbw in its best variant (simulate_collective searches them)."""
    return simulate_collective(system, "all-reduce", size, endpoint="ideal").busbw


def test_streaming_ace_drives_90_percent_of_ideal_when_sram_and_dma_do_not_bind() -> None:
    # 64 NPUs (4x4x4 torus), 64 MiB all-reduce; SRAM as large as the buffer and a DMA far
    # above the fabric: only the links should bind.
    cfg = _ace(sram=64 * MiB, dma_bandwidth=10e12)
    ace = simulate_collective(cfg, "all-reduce", 64 * MiB)
    ideal = _ideal_best(cfg, 64 * MiB)
    assert ace.busbw >= 0.9 * ideal
    assert ace.bound.startswith("link ")


def test_streaming_ace_says_when_sram_binds() -> None:
    ace = simulate_collective(_ace(sram=1 * MiB), "all-reduce", 64 * MiB)
    assert ace.bound == SRAM_WAIT


def test_streaming_ace_says_when_dma_binds() -> None:
    ace = simulate_collective(_ace(sram=64 * MiB, dma_bandwidth=100e9), "all-reduce", 64 * MiB)
    assert ace.bound == "ACE DMA"
    # the DMA is busy the whole collective: read and write of every byte at 100 GB/s
    assert ace.bound_by["ACE DMA"] == pytest.approx(ace.time, rel=0.02)


def test_streaming_overlaps_what_store_and_forward_serialises() -> None:
    stream = simulate_collective(_ace(), "all-reduce", 64 * MiB)
    saf = simulate_collective(_ace(mode="store_and_forward"), "all-reduce", 64 * MiB)
    assert stream.time < saf.time
    # both read each byte once and write it once
    assert stream.hbm_bytes_per_npu == pytest.approx(saf.hbm_bytes_per_npu)
    assert stream.hbm_bytes_per_npu == pytest.approx(2 * 64 * MiB)


def test_streaming_pieces_fill_the_partitions() -> None:
    # 3 dimensions: 5 phases of a hierarchical all-reduce + DMA read + DMA write partitions,
    # one piece each (active_chunks_per_dimension = 1)
    cfg = _ace()
    settings = cfg.endpoint.settings("ace")
    assert piece_bytes(settings, cfg) == pytest.approx(4 * MiB / 7)
    two = cfg.with_endpoint("ace", buffers_per_phase=2)
    assert piece_bytes(two.endpoint.settings("ace"), two) == pytest.approx(4 * MiB / 14)


def test_streaming_refuses_unsplit_chunks() -> None:
    with pytest.raises(ConfigError, match="endpoint.ace.split_chunks"):
        _ace(split_chunks=False)


def test_streaming_exact_matches_symmetric() -> None:
    cfg = resolve_system("ace-isca21", overrides={"network.dimensions[2].size": 2})
    cfg = cfg.with_endpoint("ace")
    sym = simulate_collective(cfg, "all-reduce", 8 * MiB)
    exact = simulate_collective(cfg, "all-reduce", 8 * MiB, exact=True)
    assert exact.time == pytest.approx(sym.time, rel=1e-9)


def test_sm_is_the_baseline_through_the_registry() -> None:
    assert check_endpoints(["sm", "ace"]) == ["baseline", "ace"]
    with pytest.raises(ConfigError, match="twice"):
        check_endpoints(["sm", "baseline"])
    cfg = resolve_system("h100-nvswitch-8").with_endpoint("sm")
    assert cfg.endpoint.kind == "baseline"


def test_h100_node_gpt_offload_takes_no_sms_and_ideal_bounds_them() -> None:
    system = "h100-nvswitch-8"
    # copy engines: an all-gather holds no compute unit (reduce steps would fall back to SMs)
    cfg = resolve_system(system).with_endpoint("copy_engine")
    platform = Platform(cfg)
    platform.collectives.issue("all-gather", 64 * MiB)
    platform.engine.run()
    assert platform.endpoint.copy_steps > 0
    assert platform.endpoint.reduce_steps == 0
    assert platform.npus[0].units.held_time == 0.0
    # a data-parallel GPT: ACE holds no unit; the ideal endpoint is at least as fast as each
    runs = {
        kind: acesim.run(system, "gpt", endpoint=kind)
        for kind in ("sm", "copy_engine", "nvls", "ace", "ideal")
    }
    assert runs["ace"].comm_units_held == 0.0
    assert runs["ideal"].comm_units_held == 0.0
    assert runs["sm"].comm_units_held > 0.0
    for kind in ("sm", "copy_engine", "nvls", "ace"):
        assert runs["ideal"].iteration_time <= runs[kind].iteration_time * (1 + 1e-9)
    # each says what bound its communication; the ideal endpoint only its links
    assert all(r.comm_bound for r in runs.values())
    assert runs["ideal"].comm_bound == "link nvswitch"


def test_copy_engine_reduces_in_the_switch_when_the_user_chooses_nvls() -> None:
    # collective.algorithms all-reduce = nvls: the reduction happens in the NVSwitch, issued by
    # SM kernels holding nvls_units; no copy-engine reduce fallback on SMs
    cfg = resolve_system(
        "h100-nvswitch-8", overrides={"collective.algorithms.all-reduce": "nvls"}
    ).with_endpoint("copy_engine")
    platform = Platform(cfg)
    coll = platform.collectives.issue("all-reduce", 64 * MiB)
    platform.engine.run()
    endpoint = platform.endpoint
    assert endpoint.nvls_steps > 0 and endpoint.reduce_steps == 0
    held = platform.npus[0].units.held_time
    assert 0 < held <= cfg.endpoint.settings("copy_engine").nvls_units * coll.duration * (1 + 1e-9)


def test_the_nvls_kind_reduces_in_the_switch_on_its_block_count() -> None:
    # A GPT's gradient all-reduces on one 8x H100 node: every one runs NVLS, holding the NVLS
    # kernel's 16 SMs (NCCL's thread blocks on Hopper), and never more.
    system = resolve_system("h100-nvswitch-8")
    platform = Platform(system.with_endpoint("nvls"))
    coll = platform.collectives.issue("all-reduce", 64 * MiB)
    platform.engine.run()
    assert coll.algorithms == frozenset({"nvls"})
    assert platform.npus[0].units.peak == system.endpoint.settings("baseline").nvls_units == 16
    run = acesim.run("h100-nvswitch-8", "gpt", endpoint="nvls")
    assert 0 < run.comm_units_held <= 16
    # other operations run as the SM kernels; on two nodes the scale-out phase is a ring
    two = Platform(resolve_system("h100-nvswitch-8", nodes=2).with_endpoint("nvls"))
    gather = two.collectives.issue("all-gather", 64 * MiB)
    reduce = two.collectives.issue("all-reduce", 64 * MiB)
    two.engine.run()
    assert gather.algorithms == frozenset({"ring"})
    # NVLS alone cannot run across the NICs: the tuner's choice, NCCL's NVLS_TREE at 64 MiB
    # (NVLS in the node's switch, the tree between nodes), on the NVLS channels
    assert reduce.algorithms == frozenset({"nvls_tree"})


def test_the_nvls_kind_needs_a_switch_that_reduces() -> None:
    with pytest.raises(AcesimError, match="nvls needs a switch that reduces") as info:
        resolve_system("a100-nvswitch-8", overrides={"endpoint.kind": "nvls"})
    assert "\n" not in str(info.value)


def test_comparing_with_nvls_on_a_system_without_a_reducing_switch_is_refused() -> None:
    # compare derives its variants without re-validating the document: the endpoint refuses.
    # DLRM on 16 NPUs: the refusal is the system's (no reducing switch), whatever the workload
    # and size; the baseline variants compare runs first are ~9x cheaper than ResNet-50 on 64
    with pytest.raises(AcesimError, match="nvls needs a switch that reduces"):
        acesim.compare("ace-isca21", "dlrm", npus=16, endpoints=["nvls"])
