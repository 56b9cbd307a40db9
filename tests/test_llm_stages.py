"""Uneven pipeline stages as Megatron-core builds them (issue 29): explicit first/last stage
layer counts, the embedding and the loss counted as layers, the per-stage breakdown."""

from __future__ import annotations

import pytest

from acesim.errors import ConfigError
from acesim.runs.llm import make_llm_case, run_llm
from acesim.workload.llm.models import MODELS, TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, parse_parallel

TINY = TransformerConfig(
    "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=1024
)


def test_the_405b_recipe_counts_the_embedding_and_the_loss_as_layers() -> None:
    # Megatron-Bridge's Llama 3.1 405B: 126 layers + embedding + loss = 128 over PP8 x VPP8
    par = ParallelConfig(pp=8, vpp=8, account_embedding=True, account_loss=True)
    split = par.layer_split(126)
    assert split == (1,) + (2,) * 62 + (1,)
    with pytest.raises(ConfigError, match="pp x vpp = 64 must divide the 126 layers"):
        ParallelConfig(pp=8, vpp=8).check_model(MODELS.get("llama3-405b"))
    one = ParallelConfig(pp=4, account_embedding=True)  # 33 layers do not divide over 4
    with pytest.raises(ConfigError, match="must divide the 33 layers .with the embedding"):
        one.layer_split(32)


def test_first_and_last_stage_layers_take_their_own_count_and_the_rest_divide() -> None:
    assert ParallelConfig(pp=4, first_stage_layers=5, last_stage_layers=9).layer_split(32) == (
        5,
        9,
        9,
        9,
    )
    assert ParallelConfig(pp=4, first_stage_layers=2).layer_split(32) == (2, 10, 10, 10)
    # interleaved: each stage's layers over its chunks, in virtual-stage order c pp + s
    assert ParallelConfig(pp=2, vpp=2, first_stage_layers=2, last_stage_layers=6).layer_split(
        8
    ) == (1, 3, 1, 3)
    with pytest.raises(ConfigError, match="left must divide over the 2 middle stages"):
        ParallelConfig(pp=4, first_stage_layers=3, last_stage_layers=4).layer_split(32)
    with pytest.raises(ConfigError, match="must add up to the 32 layers"):
        ParallelConfig(pp=2, first_stage_layers=3, last_stage_layers=4).layer_split(32)
    with pytest.raises(ConfigError, match="vpp: must divide the 3 layers of pipeline stage 0"):
        ParallelConfig(pp=2, vpp=2, first_stage_layers=3, last_stage_layers=5).layer_split(8)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("pp=4,first_stage_layers=2,account_loss=1", "do not combine with account_embedding"),
        ("first_stage_layers=2", "uneven pipeline stages need pp > 1"),
        ("pp=2,last_stage_layers=-1", "must be a whole number"),
        ("pp=2,account_loss=2", "account_loss must be 0 or 1"),
    ],
)
def test_bad_stage_splits_are_one_line_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_parallel(text, global_batch=8, micro_batch=1, seq=128)


def test_uneven_stages_run_and_the_result_shows_each_stage() -> None:
    text = "tp=2,pp=2,first_stage_layers=2,last_stage_layers=6"
    par = parse_parallel(text, global_batch=4, micro_batch=1, seq=1024)
    assert par.describe().endswith("first_stage_layers=2,last_stage_layers=6")
    case = make_llm_case("h100-nvswitch-8", TINY, par, nodes=1)
    assert [sum(c.layers for c in chunks) for chunks in case.stages] == [2, 6]
    result, _ = run_llm(case, mode="class")
    first, last = result.stages
    assert (first["layers"], first["embedding"], first["loss"]) == (2, True, False)
    assert (last["layers"], last["embedding"], last["loss"]) == (6, False, True)
    # the heavier stage computes longer and waits less: the imbalance is visible
    assert last["compute_time"] > 2 * first["compute_time"]
    assert first["idle_time"] > last["idle_time"]
    for row in result.stages:
        assert row["compute_time"] + row["idle_time"] == pytest.approx(result.iteration_time)
    assert max(r["memory"] for r in result.stages) == result.memory["total"]
    even, _ = run_llm(
        make_llm_case(
            "h100-nvswitch-8", TINY, ParallelConfig(tp=2, pp=2, global_batch=4, seq=1024), nodes=1
        )
    )
    assert result.iteration_time > even.iteration_time  # the slow stage sets the pace


def test_class_mode_agrees_with_exact_mode_on_accounted_interleaved_stages() -> None:
    par = ParallelConfig(
        tp=2, pp=2, vpp=2, account_embedding=True, account_loss=True, global_batch=4, seq=1024
    )
    tiny = TransformerConfig(
        "tiny6", layers=6, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=1024
    )
    assert par.layer_split(6) == (1, 2, 2, 1)
    case = make_llm_case("h100-nvswitch-8", tiny, par, nodes=1)
    fast, _ = run_llm(case, mode="class")
    full, _ = run_llm(case, mode="exact")
    assert fast.mode == "class" and full.mode == "exact"
    assert fast.iteration_time == pytest.approx(full.iteration_time, rel=1e-9)
    assert [r["compute_time"] for r in fast.stages] == pytest.approx(
        [r["compute_time"] for r in full.stages], rel=1e-9
    )
