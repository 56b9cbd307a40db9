"""Collective kernels' HBM limit per channel: from the library's source by one rule
(acesim.validation.comm_limits), carried by every preset that runs that library's kernels."""

from __future__ import annotations

import pytest

from acesim.config import load_system
from acesim.config.npus import npu_preset_names
from acesim.config.presets import preset_names
from acesim.config.resolve import resolve_system
from acesim.hardware.endpoints.baseline import BaselineSettings
from acesim.simulate import simulate_collective
from acesim.validation.comm_limits import KERNELS, NPU_KERNELS, channel_hbm_bandwidth
from acesim.validation.transfer import unit_of

#: System presets on NVIDIA NPUs of sm80 and later, whose ring kernels are NCCL's.
NCCL_SM80 = [
    "a100-nvswitch-8",
    "h100-nvswitch-8",
    "h200-nvswitch-8",
    "b200-nvswitch-8",
    "gb200-nvl72",
]


def test_the_rule_is_bytes_in_flight_over_the_loaded_latency() -> None:
    assert KERNELS["nccl-sm80"].in_flight == 512 * 8 * 16 == 64 * 1024
    assert channel_hbm_bandwidth("h100-sxm") == pytest.approx(65536 / 600e-9)
    assert channel_hbm_bandwidth("mi300x") == pytest.approx(256 * 2 * 16 / 600e-9)
    assert channel_hbm_bandwidth("v100-sxm2") == pytest.approx(512 * 4 * 16 / 600e-9)


def test_every_npu_preset_names_its_collective_kernel() -> None:
    assert sorted(NPU_KERNELS) == sorted(npu_preset_names())


@pytest.mark.parametrize("preset", NCCL_SM80)
def test_nccl_presets_carry_their_kernels_channel_limit(preset: str) -> None:
    settings = load_system(preset).endpoint.of(BaselineSettings)
    assert settings.unit_hbm_bandwidth is not None
    assert settings.unit_hbm_bandwidth == pytest.approx(
        channel_hbm_bandwidth(unit_of(preset)), rel=5e-4
    )


@pytest.mark.parametrize("preset", preset_names())
def test_a_preset_that_sets_a_channel_limit_follows_the_rule(preset: str) -> None:
    settings = load_system(preset).endpoint.of(BaselineSettings)
    if settings.unit_hbm_bandwidth is not None:
        assert settings.unit_hbm_bandwidth == pytest.approx(
            channel_hbm_bandwidth(unit_of(preset)), rel=5e-4
        )
        assert (
            "acesim.validation.comm_limits"
            in load_system(preset).sources["endpoint.baseline.unit_hbm_bandwidth"].note
        )


def test_the_kernels_limit_lifts_the_h100_ring_off_the_per_sm_assumption() -> None:
    """With the NPU's 55 GB/s per SM the 8x H100 ring all-reduce was capped by HBM issue;
    NCCL's 64 KiB in flight per channel leaves it on the links."""
    ring = {"collective.algorithm": "ring"}
    shipped = resolve_system("h100-nvswitch-8", overrides=ring)
    per_sm = resolve_system(
        "h100-nvswitch-8", overrides={**ring, "endpoint.baseline.unit_hbm_bandwidth": None}
    )
    fast = simulate_collective(shipped, "all-reduce", 1 << 30).busbw
    capped = simulate_collective(per_sm, "all-reduce", 1 << 30).busbw
    assert fast > 1.1 * capped
