"""The MI300X node's collective limits come from RCCL's source (issue 32: per-NPU-family
comm-unit limits, never copied from an NVIDIA preset without a stated rule): its channel count,
its kernel's per-channel HBM limit (acesim.validation.comm_limits) and its tuner's ring
protocols, with the small-message latency of RCCL's formula."""

from __future__ import annotations

import re

import pytest

from acesim.config import load_system
from acesim.config.presets import preset_names
from acesim.config.resolve import resolve_system
from acesim.hardware.endpoints.baseline import BaselineSettings
from acesim.simulate import simulate_collective
from acesim.validation.comm_limits import KERNELS, channel_hbm_bandwidth

MI300X = "mi300x-8"
#: NVIDIA system presets a note may name only beside the rule that carries their value.
NVIDIA_PRESETS = [name for name in preset_names() if name not in (MI300X, "ace-isca21")]


def test_the_channel_count_is_rccls_on_eight_mi300x() -> None:
    """rome_model_79's 28 rings, doubled by ncclTopoPostset (nc = 2 for 8 ranks): 56."""
    system = load_system(MI300X)
    settings = system.endpoint.of(BaselineSettings)
    assert settings.comm_units == 2 * 28 == 56
    note = system.sources["endpoint.baseline.comm_units"]
    assert note.kind == "public-measurement"
    for cited in ("rome_model_79", "28 rings", "init.cc", "ncclTopoPostset", "RCCL 2.21.5"):
        assert cited in note.note
    assert 56 in [split.comm_units for split in settings.splits]


def test_the_channel_hbm_limit_is_rccls_kernel_by_the_one_rule() -> None:
    system = load_system(MI300X)
    settings = system.endpoint.of(BaselineSettings)
    assert KERNELS["rccl-gfx942"].in_flight == 256 * 2 * 16 == 8 * 1024
    assert settings.unit_hbm_bandwidth == pytest.approx(channel_hbm_bandwidth("mi300x"), rel=5e-4)
    assert settings.unit_hbm_bandwidth == pytest.approx(13.65e9, rel=5e-4)
    note = system.sources["endpoint.baseline.unit_hbm_bandwidth"].note
    assert "acesim.validation.comm_limits" in note and "rccl-gfx942" in note
    # not the compute kernels' Little's-law figure, the NVIDIA presets' rule applied to CUs
    assert settings.unit_hbm_bandwidth != system.npu.kernels.unit_hbm_bandwidth


def test_the_ring_protocols_are_rccls_tuning_model_5() -> None:
    system = load_system(MI300X)
    ring = system.collective.protocols["ring"]
    assert set(ring) == {"LL", "Simple"}  # LL128 is off on gfx942
    ll, simple = ring["LL"], ring["Simple"]
    assert (ll.bandwidth, simple.bandwidth) == (0.08, 1.0)
    assert ll.base_latency == pytest.approx(12e-6) and simple.base_latency == pytest.approx(17e-6)
    assert ll.hop_latency == pytest.approx(0.8e-6) and simple.hop_latency == pytest.approx(2.1e-6)
    assert ll.net_hop_latency == pytest.approx(9.5e-6)
    assert simple.net_hop_latency == pytest.approx(320e-6)
    note = system.sources["collective.protocols.ring"].note
    assert "tuning_model_5" in note and "tuning.cc" in note


def test_a_small_all_reduce_pays_rccls_ll_ring_latency() -> None:
    """1 KiB on one node runs LL: RCCL's baseLat 12 us + 2 (G - 1) = 14 steps of its 0.8 us
    hwLat, each after the 1 us xGMI link latency; the transfer adds well under 1 us."""
    result = simulate_collective(load_system(MI300X), "all-reduce", 1024, tuner_check=False)
    assert result.protocol == "LL"
    formula = 12e-6 + 14 * (0.8e-6 + 1e-6)
    assert formula <= result.time < formula + 1e-6


def test_no_mi300x_value_is_carried_from_an_nvidia_preset_without_a_rule() -> None:
    system = load_system(MI300X)
    for key, source in system.sources.items():
        assert "carried over" not in source.note, key
        named = [p for p in NVIDIA_PRESETS if re.search(rf"\b{re.escape(p)}\b", source.note)]
        if named:  # a transfer note states its rule (acesim.validation.transfer)
            assert source.kind == "transfer" or "rule" in source.note, (key, named)


def test_the_xgmi_link_carries_amds_usable_48_of_64_gbs() -> None:
    """AMD states about 48 GB/s usable of each 64 GB/s xGMI link (RCCL's GFX94X_XGMI_WIDTH
    48); the link's efficiency is that ratio, not the NVIDIA-carried protocol efficiency."""
    system = load_system(MI300X)
    xgmi = system.network.dimensions[0]
    assert xgmi.link_bandwidth == pytest.approx(64e9)
    assert xgmi.efficiency == pytest.approx(48 / 64)
    assert xgmi.efficiency != system.collective.protocol_efficiency
    source = system.sources["network.dimensions[0].efficiency"]
    assert source.kind == "public-measurement"
    assert "GFX94X_XGMI_WIDTH" in source.note and "rocm.blogs.amd.com" in source.note


def test_rccls_tree_ll_is_tuning_model_5() -> None:
    system = load_system(MI300X)
    assert "double_binary_tree" in system.collective.choices["all-reduce"]
    tree = system.collective.protocols["double_binary_tree"]
    assert set(tree) == {"LL"}  # Simple's bwRatio depends on the node count; LL128 is off
    ll = tree["LL"]
    assert ll.bandwidth == 0.06
    assert ll.base_latency == pytest.approx(12e-6) and ll.hop_latency == pytest.approx(0.9e-6)
    assert ll.net_hop_latency == pytest.approx(10.5e-6)
    assert "tuning_model_5" in system.sources["collective.protocols.double_binary_tree"].note


def test_a_small_two_node_all_reduce_pays_rccls_tree_ll_latency() -> None:
    """1 KiB over 2 nodes of 8 runs RCCL's TREE with LL: baseLat 12 us + 2 ((G-1) intraLat +
    log2(N) interLat), G = 8, N = 2, each hop after its link latency (xGMI 1 us, the NIC
    3 us): 12 + 2 (7 x 1.9 + 13.5) = 65.6 us; the 1 KiB adds well under 1 us."""
    system = resolve_system(MI300X, nodes=2)
    result = simulate_collective(system, "all-reduce", 1024, tuner_check=False)
    tree = resolve_system(MI300X, nodes=2, overrides={"collective.algorithm": "double_binary_tree"})
    forced = simulate_collective(tree, "all-reduce", 1024, tuner_check=False)
    formula = 12e-6 + 2 * (7 * (1e-6 + 0.9e-6) + 1 * (3e-6 + 10.5e-6))
    assert forced.protocol == "LL"
    assert formula <= forced.time < formula + 1e-6
    # the tuner's choice is never slower than the tree it could have run
    assert result.time <= forced.time * (1 + 1e-9)


def test_a_two_node_flat_ring_pays_rccls_ring_formula() -> None:
    """RCCL's ring over 16 ranks on 2 nodes (tuning.cc): baseLat 12 us + (nsteps - nInter)
    max(intraLat, netOverhead) + nInter interLat, nsteps = 2 (16 - 1) = 30, nInter = 2 x 2
    = 4 node crossings, intraLat LL 0.8 us under the 2 us network overhead of AMD hosts,
    interLat LL 9.5 us; acesim adds each hop's link latency (xGMI 1 us, NIC 3 us):
    12 + 26 (2 + 1) + 4 (9.5 + 3) = 140 us."""
    ring = resolve_system(MI300X, nodes=2, overrides={"collective.algorithm": "flat_ring"})
    result = simulate_collective(ring, "all-reduce", 1024, tuner_check=False)
    formula = 12e-6 + 26 * (2e-6 + 1e-6) + 4 * (9.5e-6 + 3e-6)
    assert result.protocol == "LL"
    assert formula <= result.time < formula + 1e-6
