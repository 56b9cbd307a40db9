"""Fused attention by tiles: causal blocks iterate to the diagonal, each block pays a fixed
overhead in iterations, so short sequences run below the long-sequence rate."""

from __future__ import annotations

import math
from typing import Any

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.system import NPUConfig
from acesim.errors import ConfigError, WorkloadError
from acesim.hardware.kernel_model import (
    ATTENTION_BACKWARD_TILE,
    ATTENTION_TILE,
    attention_blocks,
    plan_kernel,
)
from acesim.hardware.kernels import Attention

PEAK = 1000e12  # bf16 matrix peak of the test NPU, FLOP/s
UNITS = 132


def npu(**kernels: Any) -> NPUConfig:
    return NPUConfig.model_validate(
        {
            "compute_units": UNITS,
            "matrix_flops": {"bf16": PEAK},
            "vector_flops": 60e12,
            "hbm_bandwidth": 100e12,  # far from binding: the tests are about compute
            "kernels": {"tile": [128, 128], **kernels},
        }
    )


def test_a_causal_forward_of_two_by_two_tiles_computes_three_tiles_by_hand() -> None:
    # 256 queries, 256 keys, 128 x 128 tiles: query tile 0 computes key tile 0 (diagonal,
    # masked whole), query tile 1 key tiles 0 and 1: 3 tiles, 1.5 per block; 2 useful tiles
    fwd = Attention(1, 256, 256, 128, dtype="bf16", causal=True)
    assert ATTENTION_TILE == (128, 128)
    blocks, iterations, tile_flops = attention_blocks(fwd)
    assert (blocks, iterations, tile_flops) == (2, 1.5, 4 * 128 * 128 * 128)
    assert fwd.flops == 2 * tile_flops  # the counted (useful) FLOPs: half the square
    plan = plan_kernel(npu(attention_efficiency=0.5, attention_block_overhead=1.0), fwd)
    unit_rate = PEAK * 0.5 / UNITS
    assert plan.blocks == 2
    assert plan.block_seconds == pytest.approx((1.5 + 1.0) * tile_flops / unit_rate, rel=1e-12)
    assert plan.compute_time(UNITS) == pytest.approx(plan.block_seconds, rel=1e-12)  # one wave


def test_a_causal_backward_of_two_key_tiles_iterates_three_query_tiles_each_by_hand() -> None:
    # backward blocks own 128 keys and iterate 64-query tiles from the diagonal down: key tile
    # 0 meets query tiles 0-3, key tile 1 query tiles 2-3: 6 iterations, 3 per block
    bwd = Attention(1, 256, 256, 128, dtype="bf16", causal=True, backward=True)
    assert ATTENTION_BACKWARD_TILE == (128, 64)
    blocks, iterations, tile_flops = attention_blocks(bwd)
    assert (blocks, iterations, tile_flops) == (2, 3.0, 10 * 128 * 64 * 128)
    assert bwd.flops == pytest.approx(4 * tile_flops)  # 2.5 x the forward's useful FLOPs


def _enumerated(a: Attention) -> float:
    """Mean tiles per block, counting every (block, tile) pair holding an unmasked element
    (query q, key k with k <= q: the pair's first key at most its last query)."""
    outer, inner = ATTENTION_BACKWARD_TILE if a.backward else ATTENTION_TILE
    own, other = (int(a.kv_len), int(a.q_len)) if a.backward else (int(a.q_len), int(a.kv_len))
    blocks = math.ceil(own / outer)
    total = 0
    for b in range(blocks):
        for t in range(math.ceil(other / inner)):
            mine = range(b * outer, min((b + 1) * outer, own))
            theirs = range(t * inner, min((t + 1) * inner, other))
            keys, queries = (mine, theirs) if a.backward else (theirs, mine)
            total += not a.causal or keys[0] <= queries[-1]
    return total / blocks


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [128, 512, 1024, 2048])
def test_the_mean_iterations_per_block_are_the_tiles_a_kernel_visits(
    seq: int, causal: bool, backward: bool
) -> None:
    a = Attention(1, seq, seq, 128, causal=causal, backward=backward)
    _blocks, iterations, _flops = attention_blocks(a)
    assert iterations == pytest.approx(_enumerated(a), rel=1e-12)


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_short_sequences_run_slower_per_flop_than_long_ones(causal: bool, backward: bool) -> None:
    cfg = npu(attention_efficiency=0.6, attention_block_overhead=3.0)
    rates = [
        plan_kernel(
            cfg, Attention(UNITS, s, s, 128, dtype="bf16", causal=causal, backward=backward)
        ).achieved_flops
        for s in (1024, 2048, 8192, 32768)
    ]
    assert rates == sorted(rates) and rates[0] < 0.9 * rates[-1]
    assert rates[-1] < 0.6 * PEAK  # never above the sustained fraction of the peak


def test_without_an_overhead_a_non_causal_kernel_runs_at_its_efficiency_at_any_length() -> None:
    cfg = npu(attention_efficiency=0.6)
    for s in (256, 2048, 16384):  # 132 heads: whole waves
        plan = plan_kernel(cfg, Attention(UNITS, s, s, 128, dtype="bf16", causal=False))
        assert plan.achieved_flops == pytest.approx(0.6 * PEAK, rel=1e-12)


def test_without_an_overhead_a_causal_kernel_loses_only_its_diagonal_tiles() -> None:
    cfg = npu(attention_efficiency=0.6)
    for n in (2, 16, 128):  # query tiles per head: n (n + 1) / 2 tiles for n^2 / 2 useful
        a = Attention(UNITS, 128 * n, 128 * n, 128, dtype="bf16", causal=True)
        assert plan_kernel(cfg, a).achieved_flops == pytest.approx(
            0.6 * PEAK * n / (n + 1), rel=1e-12
        )


def test_the_backward_overhead_is_the_forwards_unless_it_is_given() -> None:
    bwd = Attention(UNITS, 2048, 2048, 128, dtype="bf16", causal=True, backward=True)
    shared = plan_kernel(npu(attention_block_overhead=4.0), bwd)
    own = plan_kernel(npu(attention_block_overhead=4.0, attention_backward_block_overhead=0.0), bwd)
    _blocks, iterations, tile_flops = attention_blocks(bwd)
    assert shared.block_seconds == pytest.approx(own.block_seconds * (iterations + 4) / iterations)
    fwd = Attention(UNITS, 2048, 2048, 128, dtype="bf16", causal=True)
    assert plan_kernel(npu(attention_backward_block_overhead=9.0), fwd).block_seconds == (
        plan_kernel(npu(), fwd).block_seconds
    )


def test_without_a_tile_attention_spreads_evenly_at_its_counted_flops() -> None:
    cfg = NPUConfig.model_validate(
        {
            "compute_units": UNITS,
            "matrix_flops": {"bf16": PEAK},
            "hbm_bandwidth": 100e12,
            "kernels": {"attention_efficiency": 0.5, "attention_block_overhead": 5.0},
        }
    )
    plan = plan_kernel(cfg, Attention(8, 2048, 2048, 128, dtype="bf16", causal=True))
    assert plan.blocks is None and plan.achieved_flops == pytest.approx(0.5 * PEAK, rel=1e-12)


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf, "many"])
@pytest.mark.parametrize("field", ["attention_block_overhead", "attention_backward_block_overhead"])
def test_a_bad_block_overhead_is_refused_naming_the_field(field: str, value: Any) -> None:
    path = f"npu.kernels.{field}"
    with pytest.raises(ConfigError) as info:
        resolve_system("ace-isca21", overrides={path: value})
    message = str(info.value)
    assert message.startswith(f"ace-isca21: {path}: ") and "\n" not in message


@pytest.mark.parametrize("field", ["heads", "q_len", "kv_len", "head_dim"])
def test_a_bad_attention_shape_is_still_refused(field: str) -> None:
    shape: dict[str, Any] = {"heads": 1, "q_len": 256, "kv_len": 256, "head_dim": 128}
    for bad in (0, -1, math.nan):
        with pytest.raises(WorkloadError) as info:
            Attention(**{**shape, field: bad})
        assert f"attention.{field}" in str(info.value)
