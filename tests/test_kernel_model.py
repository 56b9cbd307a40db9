"""The kernel model: tiles, waves, split-K, latency, memory efficiency, precision, and the HBM
arbitration between compute kernels and collective kernels."""

from __future__ import annotations

import math
from typing import Any

import pytest

from acesim.config import SystemConfig, system_from_dict
from acesim.config.system import NPUConfig
from acesim.errors import ConfigError
from acesim.hardware.kernel_model import MIN_SPLIT_K, plan_kernel
from acesim.hardware.kernels import Attention, Gemm, Roofline, Stream
from acesim.hardware.platform import Platform

GB, TB = 1e9, 1e12
MiB = 2**20
PEAK = 1000e12  # bf16 matrix peak of the test NPU, FLOP/s
UNITS = 132


def npu(**kernels: Any) -> NPUConfig:
    return NPUConfig.model_validate(
        {
            "compute_units": UNITS,
            "matrix_flops": {"bf16": PEAK, "fp32": PEAK / 16},
            "vector_flops": 60e12,
            "hbm_bandwidth": 3 * TB,
            "kernels": {"tile": [128, 128], **kernels},
        }
    )


def system(
    npu_fields: dict[str, Any],
    baseline: dict[str, Any],
    link: float = 1 * GB,
    hbm: float = 900 * GB,
) -> SystemConfig:
    return system_from_dict(
        {
            "name": "kernel-test",
            "npu": {
                "compute_units": UNITS,
                "matrix_flops": {"bf16": PEAK},
                "vector_flops": 60e12,
                "hbm_bandwidth": hbm,
                **npu_fields,
            },
            "network": {"dimensions": [{"kind": "ring", "size": 8, "link_bandwidth": link}]},
            "collective": {"chunks": 1, "endpoint_delay": 0.0},
            "endpoint": {"kind": "baseline", "baseline": baseline},
        }
    )


def run_beside_collective(
    cfg: SystemConfig, kernels: list[Any], size: float
) -> tuple[float, float]:
    """(kernel time, collective end) of ``kernels`` started with an all-reduce of ``size``."""
    platform = Platform(cfg)
    coll = platform.collectives.issue("all-reduce", size)
    npu0 = platform.npus[0]
    npu0.run_kernels(kernels, lambda: None)
    platform.engine.run()
    _tag, start, end, _alone = npu0.kernel_log[0]
    assert coll.finished is not None
    return end - start, coll.finished


# -- tiles and waves -------------------------------------------------------------------------


def test_a_gemm_is_tiles_in_waves_at_the_sustained_fraction_of_the_peak() -> None:
    cfg = npu(gemm_efficiency=0.8)
    g = Gemm(128 * 12 * 4, 128 * 11, 4096, dtype="bf16")  # 528 tiles: 4 full waves
    plan = plan_kernel(cfg, g)
    assert plan.blocks == 528 and plan.waves(UNITS) == 4
    tile = 2 * 128 * 128 * 4096 / (PEAK * 0.8 / UNITS)
    assert plan.compute_time(UNITS) == pytest.approx(4 * tile, rel=1e-12)
    assert plan.bound == "compute"
    assert plan.achieved_flops == pytest.approx(0.8 * PEAK, rel=1e-9)


def test_partial_tiles_and_a_tail_wave_cost_whole_ones() -> None:
    cfg = npu()
    one = plan_kernel(cfg, Gemm(128 * 12, 128 * 11, 8192, dtype="bf16"))  # 132 tiles: 1 wave
    more = plan_kernel(cfg, Gemm(128 * 12 + 1, 128 * 11, 8192, dtype="bf16"))  # 143: 2 waves
    assert more.blocks == 143 and more.waves(UNITS) == 2
    assert more.time_alone == pytest.approx(2 * one.time_alone, rel=1e-12)


def test_few_tiles_split_k_to_fill_the_units_and_pay_for_fp32_partials() -> None:
    cfg = npu()
    g = Gemm(128, 128, 1 << 16, dtype="bf16")  # one output tile, a long K
    plan = plan_kernel(cfg, g)
    assert plan.blocks is not None and 1 < plan.blocks <= UNITS
    assert "split-K" in plan.detail
    split = plan.blocks
    assert (1 << 16) / split >= MIN_SPLIT_K
    # each split writes and re-reads a 128x128 FP32 partial
    assert plan.write_bytes == pytest.approx(g.write_bytes + split * 128 * 128 * 4)
    unsplit = plan_kernel(npu(), Gemm(128, 128, 1 << 16, dtype="bf16"))
    assert unsplit.time_alone < 2 * 128 * 128 * (1 << 16) / (PEAK / UNITS)


def test_without_a_tile_a_gemm_spreads_over_the_units_at_its_roofline() -> None:
    cfg = NPUConfig.model_validate({"compute_units": UNITS, "matrix_flops": {"bf16": PEAK}})
    g = Gemm(100, 100, 100, dtype="bf16")
    plan = plan_kernel(cfg, g)
    assert plan.blocks is None
    assert plan.time_alone == pytest.approx(max(g.flops / PEAK, plan.hbm_bytes / 900e9))


# -- memory-bound kernels, latency, bounds -----------------------------------------------------


def test_streaming_reads_sustain_the_efficiency_and_writes_pay_the_turnaround_penalty() -> None:
    cfg = npu(hbm_efficiency=0.9, write_penalty=0.2)
    n = 1e9
    dot = plan_kernel(cfg, Stream(2 * n))
    copy = plan_kernel(cfg, Stream(n, n))
    assert 2 * n / dot.time_alone == pytest.approx(0.9 * 3 * TB)
    assert 2 * n / copy.time_alone == pytest.approx(2 / 2.2 * 0.9 * 3 * TB)
    assert dot.bound == copy.bound == "memory"


def test_every_kernel_pays_its_latency_and_a_tiny_one_is_latency_bound() -> None:
    cfg = npu(latency=3e-6)
    tiny = plan_kernel(cfg, Stream(1024, 1024))
    assert tiny.bound == "latency"
    assert tiny.time_alone == pytest.approx(3e-6 + 2048 / (3 * TB))


def test_a_pass_runs_its_kernels_one_after_another_each_with_its_latency() -> None:
    cfg = system({"kernels": {"latency": 2e-6}}, {"comm_units": 8})
    platform = Platform(cfg)
    kernels = [Stream(1e6, 1e6), Stream(2e6), Roofline(1e9, 0.0, dtype="bf16")]
    npu0 = platform.npus[0]
    npu0.run_kernels(kernels, lambda: None)
    platform.engine.run()
    _tag, start, end, alone = npu0.kernel_log[0]
    expected = 3 * 2e-6 + 2e6 / 900e9 + 2e6 / 900e9 + 1e9 / PEAK
    assert end - start == pytest.approx(expected, rel=1e-9)
    assert alone == pytest.approx(expected, rel=1e-9)


def test_attention_flops_follow_flash_attention_counts() -> None:
    fwd = Attention(32, 4096, 4096, 128, dtype="bf16", causal=True)
    bwd = Attention(32, 4096, 4096, 128, dtype="bf16", causal=True, backward=True)
    assert fwd.flops == pytest.approx(0.5 * 4 * 32 * 4096 * 4096 * 128)
    assert bwd.flops == pytest.approx(2.5 * fwd.flops)
    plan = plan_kernel(npu(attention_efficiency=0.5), fwd)
    assert plan.blocks == 32 * 4096 // 128
    assert plan.achieved_flops < 0.5 * PEAK


# -- precision --------------------------------------------------------------------------------


def test_a_kernel_in_a_dtype_the_npu_lacks_is_refused_naming_the_dtype() -> None:
    with pytest.raises(ConfigError) as info:
        plan_kernel(npu(), Gemm(64, 64, 64, dtype="fp8"))
    assert str(info.value).startswith("npu.matrix_flops.fp8: this NPU (npu) lists no fp8")


def test_the_dtype_picks_both_the_rate_and_the_bytes() -> None:
    cfg = npu()
    half = plan_kernel(cfg, Gemm(4096, 4096, 4096, dtype="bf16"))
    single = plan_kernel(cfg, Gemm(4096, 4096, 4096, dtype="fp32"))
    assert single.compute_time(UNITS) == pytest.approx(16 * half.compute_time(UNITS))
    assert single.hbm_bytes == pytest.approx(2 * half.hbm_bytes)


# -- collectives taking units from a running GEMM ----------------------------------------------


def _gemm_of(waves: int) -> Gemm:
    # 132 tiles of 128x128 per wave; compute-bound on a 10 TB/s HBM
    return Gemm(128 * 12 * waves, 128 * 11, 1 << 15, dtype="bf16")


def test_a_one_wave_gemm_takes_twice_as_long_when_a_collective_holds_a_few_units() -> None:
    cfg = system({"kernels": {"tile": [128, 128]}}, {"comm_units": 8}, hbm=10 * TB)
    gemm = _gemm_of(1)
    assert plan_kernel(cfg.npu, gemm).bound == "compute"
    alone = plan_kernel(cfg.npu, gemm).time_alone
    took, coll_end = run_beside_collective(cfg, [gemm], 256 * MiB)
    assert coll_end > took  # the collective holds its units through the whole kernel
    assert took / alone == pytest.approx(2.0, rel=1e-9)  # 132 blocks on 124 units: 2 waves


def test_a_many_wave_gemm_slows_by_about_the_fraction_of_units_taken() -> None:
    cfg = system({"kernels": {"tile": [128, 128]}}, {"comm_units": 8}, hbm=10 * TB)
    gemm = _gemm_of(50)
    assert plan_kernel(cfg.npu, gemm).bound == "compute"
    alone = plan_kernel(cfg.npu, gemm).time_alone
    took, coll_end = run_beside_collective(cfg, [gemm], 4096 * MiB)
    assert coll_end > took
    assert took / alone == pytest.approx(math.ceil(6600 / 124) / 50, rel=1e-9)
    assert took / alone == pytest.approx(132 / 124, rel=0.02)


# -- HBM arbitration ---------------------------------------------------------------------------


def _collective_peaks(cfg: SystemConfig) -> tuple[float, float]:
    """(the payload the communication units' loop covers at its peak, B/s, or 0 without a
    per-unit limit; HBM's peak, B/s) of a 512 MiB all-reduce alone."""
    platform = Platform(cfg)
    platform.collectives.issue("all-reduce", 512 * MiB)
    platform.engine.run()
    (hbm,) = [r for r in platform.engine.resources if r.name == "npu0.hbm"]
    issue = [r.peak for r in platform.engine.resources if r.name == "npu0.comm_units.hbm"]
    return max(issue, default=0.0), hbm.peak


def test_an_8_unit_collective_covers_no_more_payload_than_8_units_keep_in_flight() -> None:
    # a 900 GB/s NPU whose units each keep 25 GB/s of payload in flight (NCCL's loop: the
    # figure bounds the payload a channel covers, not every HBM byte of its steps), a fabric
    # fast enough that the collective would otherwise take all of HBM
    cfg = system(
        {"kernels": {"unit_hbm_bandwidth": 25e9}},
        {"comm_units": 8, "unit_bandwidth": 1e12},
        link=1000 * GB,
    )
    payload, hbm = _collective_peaks(cfg)
    assert payload == pytest.approx(8 * 25e9, rel=1e-9)
    # HBM carries every byte of a step (a reduce step's 5 per payload byte, a gather's 2)
    assert 8 * 25e9 < hbm <= 900e9 * (1 + 1e-9)
    unlimited = system({}, {"comm_units": 8, "unit_bandwidth": 1e12}, link=1000 * GB)
    assert _collective_peaks(unlimited) == (0.0, pytest.approx(900e9, rel=1e-9))


def _kernel_time_beside_a_collective(arbitration: str, baseline: dict[str, Any]) -> float:
    """Time (s) of a memory-bound kernel reading 100 GB beside a long all-gather on 8 units,
    both wanting all of HBM (fast links, no per-unit limit)."""
    cfg = system(
        {"hbm_arbitration": arbitration},
        {"comm_units": 8, "unit_bandwidth": 1e13, **baseline},
        link=10_000 * GB,
    )
    took, coll_end = run_beside_collective(cfg, [Stream(100e9)], 64 * 4096 * MiB)
    assert coll_end > took
    return took


def test_mlp_shares_hbm_in_proportion_to_the_units_each_party_runs_on() -> None:
    took = _kernel_time_beside_a_collective("mlp", {})
    # the kernel runs on 124 units, the collective kernels on 8: 124/132 of HBM for compute
    assert took == pytest.approx(100e9 / (900e9 * (UNITS - 8) / UNITS), rel=1e-6)


def test_drf_gives_a_collective_an_equal_share_whatever_its_units() -> None:
    assert _kernel_time_beside_a_collective("drf", {}) == pytest.approx(100e9 / 450e9, rel=1e-6)
    took = _kernel_time_beside_a_collective("drf", {"hbm_weight": 2.0})
    assert took == pytest.approx(100e9 / 300e9, rel=1e-6)


def test_hbm_weight_under_mlp_is_refused_rather_than_ignored() -> None:
    with pytest.raises(ConfigError) as info:
        system({}, {"comm_units": 8, "hbm_weight": 2.0})
    assert str(info.value).startswith(
        "endpoint.baseline.hbm_weight: applies only with npu.hbm_arbitration = 'drf'"
    )


# -- algorithm choices -------------------------------------------------------------------------


def test_a_choice_runs_the_option_fastest_alone_on_the_npu() -> None:
    from acesim.hardware.kernel_model import expand
    from acesim.hardware.kernels import Choice

    slow = (Gemm(4096, 4096, 4096, dtype="fp32"),)
    fast = (Gemm(4096, 4096, 1024, dtype="fp32"), Stream(1e6))
    choice = Choice((slow, fast), name="conv")
    assert expand(npu(), [Stream(1.0), choice]) == [Stream(1.0), *fast]
    assert choice.flops == slow[0].flops  # reports count the canonical algorithm


def test_fp32_3x3_convolutions_may_run_by_winograd_and_half_precision_ones_may_not() -> None:
    from acesim.config import single_npu_system
    from acesim.hardware.kernel_model import expand
    from acesim.hardware.kernels import Choice
    from acesim.workload.zoo import load_zoo

    v100 = single_npu_system("v100-sxm2").npu

    def kernels(precision: str) -> list[Any]:
        work = load_zoo("resnet50", batch_per_npu=32, precision=precision)
        layer = next(x for x in work.layers if x.name == "layer_64_1_conv2")  # 3x3, stride 1
        return list(layer.forward.compute.kernels)

    fp32 = kernels("fp32")
    choices = [k for k in fp32 if isinstance(k, Choice)]
    assert len(choices) == 1
    chosen = expand(v100, choices)
    assert [k.name for k in chosen] == ["layer_64_1_conv2.winograd"]
    assert chosen[0].flops == pytest.approx(4 / 9 * choices[0].flops)  # F(2x2, 3x3)
    assert not any(isinstance(k, Choice) for k in kernels("amp_fp16"))
