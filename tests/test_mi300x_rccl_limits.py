"""The MI300X node's collective limits come from RCCL's source (issue 32: per-NPU-family
comm-unit limits, never copied from an NVIDIA preset without a stated rule): its channel count,
its kernel's per-channel HBM limit (acesim.validation.comm_limits) and its tuner's ring
protocols, with the small-message latency of RCCL's formula."""

from __future__ import annotations

import re

import pytest

from acesim.config import load_system
from acesim.config.presets import preset_names
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
