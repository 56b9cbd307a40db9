"""Variation in LLM runs (issue 29): mixed GPUs, a placement, stragglers and link changes go
through the run path's one rule (exact mode, and the result says why); the slowest GPU and
what it does to the pipeline are shown per stage."""

from __future__ import annotations

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.variation import NpuType, Straggler, Variation
from acesim.errors import ConfigError
from acesim.results.llm import LlmResult
from acesim.runs.llm import make_llm_case, run_llm
from acesim.workload.llm.models import TransformerConfig, model_flops
from acesim.workload.llm.parallel import ParallelConfig

TINY = TransformerConfig(
    "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=256
)
#: 8 GPUs of one H100 node: TP2 x PP2 x DP2, two micro-batches per pipeline
PAR = ParallelConfig(tp=2, pp=2, global_batch=4, seq=256)
SYSTEM = "h100-nvswitch-8"


def _run(**options: object) -> LlmResult:
    """Class mode asked for: what varies switches the run to exact mode."""
    return run_llm(make_llm_case(SYSTEM, TINY, PAR, options=options))[0]


@pytest.fixture(scope="module")
def uniform() -> LlmResult:
    return _run(mode="exact")


def test_a_slower_gpu_type_on_one_stage_slows_that_stage_and_counts_its_own_peak(
    uniform: LlmResult,
) -> None:
    # ranks 4-7 hold pipeline stage 1 (stages outermost): A100s there
    mixed = _run(npu_types=[{"ranks": "4-7", "preset": "a100-sxm"}])
    assert mixed.mode == "exact" and "NPU types" in mixed.mode_note
    slow, fast = mixed.stages[1], mixed.stages[0]
    assert slow["slowest_type"].startswith("A100") and fast["slowest_type"].startswith("H100")
    # between the A100's HBM (2.0 vs 3.35 TB/s) and matrix (312 vs 989 TFLOP/s) ratios
    assert 1.5 < slow["compute_time"] / uniform.stages[1]["compute_time"] < 989 / 312
    assert fast["compute_time"] == pytest.approx(uniform.stages[0]["compute_time"], rel=1e-9)
    assert mixed.iteration_time > uniform.iteration_time
    # MFU over the GPUs' own peaks: four H100s and four A100s
    h100 = resolve_system(SYSTEM).npu
    a100 = NpuType(ranks="4-7", preset="a100-sxm").npu_config(h100, "npu")
    peak = 4 * h100.matrix_peak("bf16") + 4 * a100.matrix_peak("bf16")
    flops = model_flops(TINY, PAR.global_batch, PAR.seq)
    assert mixed.mfu == pytest.approx(flops / (mixed.iteration_time * peak), rel=1e-12)
    assert "slowest GPU: npu4 (A100" in "\n".join(mixed.footnotes())


def test_a_placement_moves_the_stages_and_says_so(uniform: LlmResult) -> None:
    # the stages swap nodes' halves on one NVSwitch: the same time, other GPUs
    placed = _run(placement=[7, 6, 5, 4, 3, 2, 1, 0])
    assert placed.mode == "exact" and "a placement" in placed.mode_note
    assert placed.iteration_time == pytest.approx(uniform.iteration_time, rel=1e-9)
    assert placed.stages[0]["slowest_npu"] >= 4 and placed.stages[1]["slowest_npu"] < 4


def test_a_straggler_is_the_slowest_gpu_of_its_stage_and_the_others_wait(
    uniform: LlmResult,
) -> None:
    case = make_llm_case(SYSTEM, TINY, PAR)  # class mode asked: the straggler switches it
    slow = run_llm(case, variation=Variation(stragglers=(Straggler(rank=5, slowdown=1.5),)))[0]
    assert slow.mode == "exact" and "stragglers" in slow.mode_note
    row = slow.stages[1]
    # its kernels' compute runs 1.5x as long (their memory time does not): the stage's
    # slowest GPU, above the stage's mean and the GPU without the straggler
    assert row["slowest_npu"] == 5
    assert row["slowest_compute"] > row["compute_time"] > uniform.stages[1]["compute_time"]
    assert row["slowest_compute"] > 1.1 * uniform.stages[1]["slowest_compute"]
    # stage 0 waits for it: more idle than without the straggler
    assert slow.stages[0]["idle_time"] > uniform.stages[0]["idle_time"]


def test_mixed_gpus_are_checked_per_type() -> None:
    with pytest.raises(ConfigError, match=r"run.npu_types\[0\]: A100.* lists no fp8"):
        make_llm_case(
            SYSTEM,
            TINY,
            PAR,
            precision="fp8",
            options={"npu_types": [{"ranks": "4-7", "preset": "a100-sxm"}]},
        )
    small = NpuType.model_validate({"ranks": "0-3", "hbm_capacity": "100 MiB"})
    with pytest.raises(ConfigError, match=r"run.npu_types\[0\]: tiny .* pipeline stage 0"):
        make_llm_case(SYSTEM, TINY, PAR, options={"npu_types": [small]})
    case = make_llm_case(SYSTEM, TINY, PAR)  # checked again when the options change
    with pytest.raises(ConfigError, match=r"run.npu_types\[0\]: tiny"):
        run_llm(case, variation=Variation(npu_types=(small,)))
    with pytest.raises(ConfigError, match="run.placement: must place every one"):
        make_llm_case(SYSTEM, TINY, PAR, options={"placement": [0, 1, 2]})
