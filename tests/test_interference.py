"""Interference both ways (issue 32): a compute kernel slows a collective. An SM collective
kernel launched while a GEMM's blocks hold the units waits for them (SM scheduling: blocks are
not preempted; endpoint.baseline.launch), and a memory-bound kernel takes HBM the collective's
kernel needs (the MLP share of docs/model.md section 4)."""

from __future__ import annotations

import math

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.errors import ConfigError
from acesim.hardware.endpoints.baseline import SM_WAIT
from acesim.hardware.kernel_model import plan_kernel
from acesim.hardware.kernels import Gemm, Stream
from acesim.simulate import simulate_collective

MIB = 2**20
GEMM = Gemm(8192, 8192, 8192, dtype="fp16")  # 2048 blocks of 128x256: 16 waves on 132 SMs
AT = 100e-6  # the collective is launched 100 us into the GEMM


def h100(launch: str) -> SystemConfig:
    return resolve_system("h100-nvswitch-8", overrides={"endpoint.baseline.launch": launch})


def _plan(system: SystemConfig) -> tuple[float, float, int]:
    """The GEMM's launch latency, its time on all 132 units and its waves there."""
    plan = plan_kernel(system.npu, GEMM)
    assert plan.blocks == 2048
    return plan.latency, plan.compute_time(132), plan.waves(132)


def test_a_collective_launched_into_a_gemm_waits_for_its_last_wave() -> None:
    # fifo (one stream priority, CUDA's default): the GEMM's pending blocks go first; its last
    # wave (2048 - 15 x 132 = 68 blocks) leaves 64 units idle, enough for the NVLS kernel's
    # 16, so the collective starts when that wave does
    s = h100("fifo")
    latency, gemm, waves = _plan(s)
    r = simulate_collective(s, "all-reduce", 64 * MIB, compute_kernels=[GEMM], collective_at=AT)
    assert r.algorithm == "nvls" and r.comm_units == 16
    assert r.compute is not None
    wait = latency + (waves - 1) / waves * gemm - AT
    assert r.bound_by[SM_WAIT] == pytest.approx(wait, rel=1e-9)
    assert r.time > wait + r.compute["collective_time_alone"] * 0.99
    assert r.compute["collective_slowdown"] > 4.0


def test_on_a_priority_stream_it_waits_for_the_running_wave_only() -> None:
    s = h100("priority")
    latency, gemm, waves = _plan(s)
    r = simulate_collective(s, "all-reduce", 64 * MIB, compute_kernels=[GEMM], collective_at=AT)
    done = (AT - latency) / gemm
    wait = latency + (math.floor(done * waves) + 1) / waves * gemm - AT
    assert r.bound_by[SM_WAIT] == pytest.approx(wait, rel=1e-9)
    assert r.compute is not None
    slowdown = r.compute["collective_slowdown"]
    fifo = simulate_collective(
        h100("fifo"), "all-reduce", 64 * MIB, compute_kernels=[GEMM], collective_at=AT
    )
    assert fifo.compute is not None
    assert 1.0 < slowdown < fifo.compute["collective_slowdown"]


def test_taking_the_units_at_once_never_waits() -> None:
    r = simulate_collective(
        h100("immediate"), "all-reduce", 64 * MIB, compute_kernels=[GEMM], collective_at=AT
    )
    assert r.compute is not None
    assert SM_WAIT not in r.bound_by
    assert r.compute["collective_slowdown"] == pytest.approx(1.0, abs=0.01)


def test_a_collective_launched_with_the_gemm_goes_first() -> None:
    # launched before the GEMM's blocks are dispatched (as a program that issues its
    # collective and then its next kernels): no wait, the GEMM runs on the units left
    r = simulate_collective(h100("fifo"), "all-reduce", 64 * MIB, compute_kernels=[GEMM])
    assert r.compute is not None
    assert SM_WAIT not in r.bound_by
    assert r.compute["kernel_slowdown"] > 1.0


def test_a_memory_bound_kernel_slows_the_collective_through_hbm() -> None:
    # a STREAM-like kernel saturates HBM; under MLP arbitration the collective's kernel gets
    # the share its 16 units' requests hold, less than it needs alone
    stream = Stream(read_bytes=20e9, write_bytes=0.0, flops=0.0)
    r = simulate_collective(h100("fifo"), "all-reduce", 256 * MIB, compute_kernels=[stream])
    assert r.compute is not None
    assert r.compute["collective_slowdown"] > 1.1
    assert r.bound == "HBM"


@pytest.mark.parametrize(("value", "words"), [(-1e-6, "at least 0"), (math.inf, "finite")])
def test_a_bad_collective_start_is_one_line(value: float, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        simulate_collective(
            "h100-nvswitch-8", "all-reduce", MIB, compute_kernels=[GEMM], collective_at=value
        )
    assert "collective_at" in str(err.value) and words in str(err.value)
    with pytest.raises(ConfigError):
        simulate_collective("h100-nvswitch-8", "all-reduce", MIB, collective_at=1e-6)
