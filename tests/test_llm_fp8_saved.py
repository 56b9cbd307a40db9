"""Activation memory under an FP8 recipe (issue 29): Transformer Engine keeps the FP8 copies of
its GEMMs' inputs for the backward (one byte an element), the BF16 tensors only where something
else keeps them; the saved bytes per layer equal a hand count on small models; and ``core_attn``
recomputation, on MLA and dense attention alike, reruns the core attention only and frees its
log-sum-exp, as Megatron-core's checkpoint of the core attention does."""

from __future__ import annotations

from collections import Counter

from acesim.precision import PRECISIONS
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.chunk import ChunkWork
from acesim.workload.llm.models import TransformerConfig

B, S, H, FFN = 2, 256, 64, 128  # micro-batch, sequence, hidden, MLP width
T = B * S  # rows of a micro-batch (tp = cp = 1)
HEADS, KV_HEADS, DIM = 4, 2, 16
A, FP8, F32 = 2, 1, 4  # BF16, FP8, FP32 bytes
DENSE = TransformerConfig(
    "tiny-dense", layers=1, hidden=H, heads=HEADS, kv_heads=KV_HEADS, ffn=FFN, vocab=512, seq=S
)
MOE = TransformerConfig(
    "tiny-moe",
    layers=2,
    hidden=H,
    heads=HEADS,
    ffn=FFN,
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
    heads=HEADS,
    head_dim=16,
    ffn=FFN,
    vocab=512,
    seq=S,
    q_lora_rank=32,
    kv_lora_rank=16,
    rope_dim=8,
    v_head_dim=16,
)


def _work(
    model: TransformerConfig, precision: str, layer: int = 0, *modules: str, tp: int = 1
) -> ChunkWork:
    return chunk_work(
        model,
        PRECISIONS.get(precision),
        range(layer, layer + 1),
        micro_batch=B,
        seq=S,
        recompute="selective" if modules else "none",
        recompute_modules=modules or None,
    )


def _dense_layer(gemm_input: int) -> int:
    """A dense layer's saved bytes counted by hand, a GEMM input kept at ``gemm_input`` bytes an
    element: per sublayer the norm's input (BF16) and two FP32 statistics a row; attention: the
    QKV input, Q, K, V, O (BF16) and the FP32 log-sum-exp; MLP: fc1's input, its gated output
    (the SwiGLU's two inputs, BF16), fc2's input."""
    norm = T * H * A + 2 * T * F32
    q, kv = HEADS * DIM, KV_HEADS * DIM
    attention = norm + T * H * gemm_input + T * (2 * q + 2 * kv) * A + B * HEADS * S * F32
    mlp = norm + T * H * gemm_input + T * 2 * FFN * A + T * FFN * gemm_input
    return attention + mlp


def test_fp8_keeps_the_gemm_inputs_in_one_byte_on_a_dense_layer() -> None:
    assert _work(DENSE, "bf16").saved == _dense_layer(A)
    assert _work(DENSE, "fp8").saved == _dense_layer(FP8)
    # the QKV and fc1 inputs (the norms' outputs) and fc2's input, one byte an element less
    assert _work(DENSE, "bf16").saved - _work(DENSE, "fp8").saved == T * (2 * H + FFN)


def test_fp8_layer_offload_units_follow_the_saved_bytes() -> None:
    work = _work(DENSE, "fp8")
    assert work.unit_saved == (_dense_layer(FP8),)


def test_fp8_on_an_moe_layer_keeps_expert_gemm_inputs_in_one_byte() -> None:
    # layer 1: attention + MoE; BF16 - FP8: the QKV input (T H), the routed experts' fc1 input
    # (top-2 token copies, T 2 H) and fc2 input (T 2 32), the shared expert's fc2 input (T 32);
    # the router's input, the activations' inputs and the shared fc1's input are BF16
    saved = {p: _work(MOE, p, 1).saved for p in ("bf16", "fp8")}
    assert saved["bf16"] - saved["fp8"] == T * H + T * 2 * H + T * 2 * 32 + T * 32


def test_fp8_on_mla_keeps_the_latent_norm_outputs_in_one_byte() -> None:
    # the up projections fuse the latent norms and keep their outputs in FP8 (32 + 16 wide);
    # the two down projections keep an FP8 copy each of the norm's output (2 x 1 byte = BF16);
    # the dense MLP after it as on a dense layer (fc1's and fc2's inputs)
    assert _work(MLA, "bf16").saved - _work(MLA, "fp8").saved == T * (32 + 16) + T * (H + FFN)


def _backward(work: ChunkWork) -> Counter[str]:
    return Counter(k.name for st in work.backward for k in st.kernels)


def test_mla_core_attn_reruns_the_attention_and_drops_its_statistics() -> None:
    plain, core = _work(MLA, "bf16"), _work(MLA, "bf16", 0, "core_attn")
    # Q, K, V kept as the checkpoint's inputs, O as the output projection's input
    assert plain.saved - core.saved == B * HEADS * S * F32
    rerun = _backward(core) - _backward(plain)
    assert rerun == Counter({"l0.flash_attn": 1})  # the RoPE runs before the checkpoint


def test_mla_core_attn_combines_with_up_projection_recompute() -> None:
    up, both = (
        _work(MLA, "bf16", 0, "mla_up_proj"),
        _work(MLA, "bf16", 0, "mla_up_proj", "core_attn"),
    )
    assert up.saved - both.saved == B * HEADS * S * F32
    assert _backward(both) - _backward(up) == Counter({"l0.flash_attn": 1})


def test_dense_core_attn_keeps_o_and_reruns_the_attention_only() -> None:
    # as MLA: Megatron-core's checkpoint wraps the core attention, after the RoPE; O stays as
    # the output projection's saved input
    plain, core = _work(DENSE, "bf16"), _work(DENSE, "bf16", 0, "core_attn")
    assert plain.saved - core.saved == B * HEADS * S * F32
    assert _backward(core) - _backward(plain) == Counter({"l0.flash_attn": 1})
