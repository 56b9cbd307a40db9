"""Collective kernels' HBM limit per channel: from the library's source by one rule
(acesim.validation.comm_limits), carried by every preset that runs that library's kernels."""

from __future__ import annotations

import pytest

from acesim.config import load_system
from acesim.config.npus import npu_preset_names
from acesim.config.presets import preset_names
from acesim.config.resolve import resolve_system
from acesim.hardware.endpoints.baseline import BaselineSettings
from acesim.hardware.endpoints.sm_kernels import LOOP_BYTES_PER_BYTE
from acesim.network.algorithms import GATHER, REDUCE
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


def test_charged_with_the_payload_neither_figure_binds_the_h100_ring() -> None:
    """Charged with every HBM byte (5 a reduce step) the NPU's 55 GB/s per SM capped the 8x
    H100 ring all-reduce; charged with the payload its loop covers, neither that figure nor
    NCCL's 64 KiB in flight per channel binds it: it runs on its links."""
    ring = {"collective.algorithm": "ring"}
    shipped = resolve_system("h100-nvswitch-8", overrides=ring)
    per_sm = resolve_system(
        "h100-nvswitch-8", overrides={**ring, "endpoint.baseline.unit_hbm_bandwidth": None}
    )
    fast = simulate_collective(shipped, "all-reduce", 1 << 30)
    other = simulate_collective(per_sm, "all-reduce", 1 << 30)
    assert fast.bound == other.bound == "link nvswitch"
    assert fast.busbw == pytest.approx(other.busbw)


def test_the_limit_is_charged_with_the_payload_of_a_reduce_and_a_gather_step_alike() -> None:
    """The loop loads every source of a hunk before it reduces: a reduce step keeps twice a
    copy step's loads in flight and covers the same payload per loaded latency, so both run
    at units x the channel figure, whatever HBM bytes each step moves."""
    assert LOOP_BYTES_PER_BYTE[REDUCE] == LOOP_BYTES_PER_BYTE[GATHER] == 1.0
    system = resolve_system(
        "h100-nvswitch-8",
        overrides={
            "collective.algorithm": "ring",
            "endpoint.baseline.comm_units": 8,
            "endpoint.baseline.unit_hbm_bandwidth": "20 GB/s",
        },
    )
    size = 1 << 30
    scatter = simulate_collective(system, "reduce-scatter", size)
    gather = simulate_collective(system, "all-gather", size)
    assert scatter.bound == gather.bound == "comm-unit HBM issue"
    # 8 channels x 20 GB/s of payload: 160 GB/s of busbw, by hand
    assert scatter.busbw == pytest.approx(8 * 20e9, rel=0.01)
    assert gather.busbw == pytest.approx(8 * 20e9, rel=0.01)
    # HBM capacity still pays each step's bytes: 5 and 2 per network byte
    assert scatter.hbm_bytes_per_npu / scatter.bytes_sent_per_npu == pytest.approx(5.0)
    assert gather.hbm_bytes_per_npu / gather.bytes_sent_per_npu == pytest.approx(2.0)
