"""Selective recomputation by module (Megatron's --recompute-modules; issue 29): per module, the
saved bytes dropped equal a hand count on a small model, the backward reruns the module's
kernels, bad names and modules a model lacks are one-line errors, and the GPT-OSS 120B row
simulates as Megatron-Bridge ran it."""

from __future__ import annotations

from collections import Counter

import pytest

from acesim.errors import ConfigError
from acesim.precision import PRECISIONS
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.chunk import ChunkWork
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, parse_parallel
from acesim.workload.llm.recompute import MODULES

B, S, H, A = 2, 256, 64, 2  # micro-batch, sequence, hidden, BF16 bytes
T = B * S  # rows of a micro-batch (tp = cp = 1)
MOE = TransformerConfig(
    "tiny-moe",
    layers=2,
    hidden=H,
    heads=4,
    kv_heads=2,
    ffn=128,
    vocab=512,
    seq=S,
    experts=4,
    top_k=2,
    expert_ffn=32,
    shared_experts=1,
    dense_layers=1,
)
MLA = TransformerConfig(
    "tiny-mla",
    layers=1,
    hidden=H,
    heads=4,
    head_dim=16,
    ffn=128,
    vocab=512,
    seq=S,
    q_lora_rank=32,
    kv_lora_rank=16,
    rope_dim=8,
    v_head_dim=16,
)
DENSE = TransformerConfig("tiny-dense", layers=1, hidden=H, heads=4, ffn=128, vocab=512, seq=S)


def _work(model: TransformerConfig, layer: int, *modules: str) -> ChunkWork:
    return chunk_work(
        model,
        PRECISIONS.get("bf16"),
        range(layer, layer + 1),
        micro_batch=B,
        seq=S,
        recompute="selective" if modules else "none",
        recompute_modules=modules or None,
    )


def _backward(work: ChunkWork) -> Counter[str]:
    return Counter(k.name for st in work.backward for k in st.kernels)


def _forward(work: ChunkWork) -> Counter[str]:
    return Counter(k.name for st in work.forward for k in st.kernels)


# -- memory: what each module stops keeping, counted by hand -------------------------------------

NORM_STATS = 2 * T * 4  # the norm's FP32 statistics (acesim's norm kernel writes two per row)
NORM_OUT = T * H * A  # a norm's output, the next GEMM's input
ACT_OUT = T * 2 * 32 * A  # top-2 copies of every token through the experts' activation (32)
SHARED = T * 32 * 2 * A + T * 32 * A  # shared activation's two inputs, fc2's input


@pytest.mark.parametrize(
    ("modules", "dropped"),
    [
        (("layernorm",), NORM_STATS + NORM_OUT),
        (("moe_act",), ACT_OUT),
        (("shared_experts",), SHARED),
        (("layernorm", "moe_act"), NORM_STATS + NORM_OUT + ACT_OUT),
    ],
)
def test_moe_modules_drop_what_megatron_frees(modules: tuple[str, ...], dropped: int) -> None:
    base = _work(MOE, 1).saved  # layer 1: attention + MoE
    assert base - _work(MOE, 1, *modules).saved == dropped


def test_moe_recompute_keeps_only_the_layer_input() -> None:
    # the MoE layer's checkpoint keeps its input (the norm's output); the norm keeps its own
    # input and statistics; the attention is unchanged
    dropped = _work(MOE, 1, "core_attn").saved - _work(MOE, 1, "core_attn", "moe").saved
    # the router's FP32 scores, the token copies, the experts' fc1 output and activation output
    routed = T * 4 * 4 + T * 2 * H * A + T * 2 * 64 * A + ACT_OUT
    assert dropped == routed + SHARED


def test_mlp_recompute_keeps_only_the_sublayer_input() -> None:
    base, mlp = _work(DENSE, 0), _work(DENSE, 0, "mlp")
    kept_mlp = T * H * A + NORM_STATS + NORM_OUT + T * 2 * 128 * A + T * 128 * A
    assert base.saved - mlp.saved == kept_mlp - T * H * A
    # the dense layers of an MoE model too (layer 0 is dense)
    assert _work(MOE, 0).saved - _work(MOE, 0, "mlp").saved == kept_mlp - T * H * A


def test_mla_modules_drop_the_norm_output_and_q_k_v() -> None:
    assert _work(MLA, 0).saved - _work(MLA, 0, "layernorm").saved == NORM_STATS + NORM_OUT
    heads, qk, v = 4, 16 + 8, 16
    qkv = T * heads * (2 * qk + v) * A
    latent_norms = (T * 32 * A + T * 4) + (T * 16 * A + T * 4)  # their outputs and statistics
    assert _work(MLA, 0).saved - _work(MLA, 0, "mla_up_proj").saved == qkv + latent_norms


def test_selective_alone_is_core_attn() -> None:
    plain = chunk_work(
        MOE, PRECISIONS.get("bf16"), range(2), micro_batch=B, seq=S, recompute="selective"
    )
    both = chunk_work(
        MOE,
        PRECISIONS.get("bf16"),
        range(2),
        micro_batch=B,
        seq=S,
        recompute="selective",
        recompute_modules=("core_attn",),
    )
    assert both.saved == plain.saved and both.backward == plain.backward


# -- time: the backward reruns the module's kernels ----------------------------------------------


@pytest.mark.parametrize(
    ("model", "layer", "module", "rerun"),
    [
        (MOE, 1, "layernorm", {"l1.moe_norm"}),
        (MOE, 1, "moe_act", {"l1.experts.act"}),
        (MOE, 1, "shared_experts", {"l1.shared.fc1.fwd", "l1.shared.act", "l1.shared.fc2"}),
        (
            MOE,
            1,
            "moe",
            {"l1.router", "l1.topk", "l1.permute", "l1.experts.fc1", "l1.experts.act"}
            | {"l1.experts.fc2", "l1.unpermute", "l1.shared.fc1.fwd", "l1.shared.act"}
            | {"l1.shared.fc2"},
        ),
        (DENSE, 0, "mlp", {"l0.mlp_norm", "l0.mlp.fc1.fwd", "l0.mlp.act", "l0.mlp.fc2"}),
        (MLA, 0, "layernorm", {"l0.attn_norm"}),
        (MLA, 0, "mla_up_proj", {"l0.q_norm", "l0.q_up", "l0.kv_norm", "l0.kv_up", "l0.rope"}),
    ],
)
def test_the_backward_reruns_the_recomputed_kernels(
    model: TransformerConfig, layer: int, module: str, rerun: set[str]
) -> None:
    base, rc = _work(model, layer), _work(model, layer, module)
    added = _backward(rc) - _backward(base)
    assert set(added) == rerun and all(n == 1 for n in added.values())
    assert _forward(rc) == _forward(base)  # the forward runs as before
    # each rerun kernel is the forward's own (same shape, same cost)
    fwd = {k.name: k for st in rc.forward for k in st.kernels}
    bwd = [k for st in rc.backward for k in st.kernels if k.name in rerun]
    assert all(k == fwd[k.name] for k in bwd)


def test_moe_act_reruns_before_fc2_gradients_and_layernorm_first() -> None:
    names = [k.name for st in _work(MOE, 1, "layernorm", "moe_act").backward for k in st.kernels]
    assert names[0] == "l1.moe_norm"
    assert names.index("l1.experts.act") + 1 == names.index("l1.experts.fc2.dgrad")


# -- errors: one line, naming the field ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "model", "message"),
    [
        ("recompute=selective,recompute_modules=bogus", MOE, "bogus"),
        ("recompute=selective,recompute_modules=moe_act+moe_act", MOE, "twice"),
        ("recompute_modules=moe_act", MOE, "needs recompute=selective"),
        ("recompute=full,recompute_modules=moe_act", MOE, "needs recompute=selective"),
        ("recompute=selective,recompute_modules=moe_act", DENSE, "routed experts"),
        ("recompute=selective,recompute_modules=layernorm", DENSE, "stand-alone norm"),
        ("recompute=selective,recompute_modules=mla_up_proj", MOE, "latent attention"),
        ("recompute=selective,recompute_modules=shared_experts", DENSE, "shared experts"),
        (
            "recompute=selective,recompute_modules=shared_experts,shared_expert_overlap=1",
            MOE,
            "shared_expert_overlap",
        ),
    ],
)
def test_bad_modules_are_one_line_errors(text: str, model: TransformerConfig, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_parallel(text, global_batch=8, micro_batch=1, seq=S).check_model(model)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "recompute_modules" in str(err.value)


def test_the_text_round_trips_and_names_every_module() -> None:
    par = parse_parallel(
        "recompute=selective,recompute_modules=layernorm+moe_act",
        global_batch=8,
        micro_batch=1,
        seq=S,
    )
    assert par.recompute_modules == ("layernorm", "moe_act")
    assert "recompute_modules=layernorm+moe_act" in par.describe()
    again = parse_parallel(par.describe(), global_batch=8, micro_batch=1, seq=S)
    assert again == par
    assert set(MODULES) == {
        "core_attn", "layernorm", "moe_act", "mlp", "moe", "shared_experts", "mla_up_proj",
    }  # fmt: skip
    with pytest.raises(ConfigError, match="tuple of module names"):
        ParallelConfig(recompute="selective", recompute_modules=["moe_act"])  # type: ignore[arg-type]


# -- the GPT-OSS 120B row ------------------------------------------------------------------------


@pytest.mark.usefixtures("shipped_rows_once")  # the row's figure as test_validate's (conftest)
@pytest.mark.xdist_group("validate")
def test_the_gpt_oss_row_simulates_as_megatron_bridge_ran_it() -> None:
    from acesim.validation.corpus import load_corpus
    from acesim.validation.evaluate import evaluate_case

    family = load_corpus().families["llm"]
    case = next(c for c in family.cases if c.id == "mbridge-dgxh100-gpt-oss-120b-bf16")
    # a test row at entry; since issue 32 the fit row of the host figure (acesim.training.host)
    assert case.status == "live" and case.before_fit == "entry"
    assert case.fit and case.fits == ["host.ops_per_launch"]
    assert case.run is not None and "recompute" not in case.run.parallel  # granularity unset
    result = evaluate_case(case, family)
    assert result.status == "ok" and result.simulated is not None and result.simulated > 0


def test_chunk_work_refuses_shared_experts_recompute_beside_the_all_to_alls() -> None:
    from acesim.errors import WorkloadError

    with pytest.raises(WorkloadError, match="shared_experts recompute"):
        chunk_work(
            MOE,
            PRECISIONS.get("bf16"),
            range(2),
            micro_batch=B,
            seq=S,
            recompute="selective",
            recompute_modules=("shared_experts",),
            shared_overlap=True,
        )
