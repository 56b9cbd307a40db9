"""A GPT-style decoder-only transformer, data parallel.

Shape (defaults): GPT-2 medium — 24 layers, hidden 1024, 16 heads, context 1024 tokens, vocabulary
50,257 (Radford et al., "Language Models are Unsupervised Multitask Learners", 2019, table 2:
"345M"; the released checkpoint has 354,823,168 parameters), the same shape as GPT-3 350M (Brown et
al. 2020, table 2.1, except its 2048-token context). Pre-LayerNorm blocks: LN, QKV projection,
causal self-attention, output projection, residual; LN, MLP 4x with GELU, residual. Learned
position embeddings; a final LayerNorm; the output head is tied to the token embedding.

Parameters: ``12*L*h^2 + 13*L*h`` in the blocks, ``(vocab + seq_len)*h`` in the embeddings and
``2h`` in the final LayerNorm; the tests check the total against ``12*L*h^2 + vocab*h`` (the
usual approximation) and the forward FLOPs against ``24*B*s*L*h^2 + 4*B*s^2*L*h + 2*B*s*h*V``
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC 2021, eq. 3 is 3x this without recomputation).

Layers: ``embedding`` (token + position; its weight-gradient pass zero-fills and scatters the
dense table gradient, and its all-reduce carries the tied head's gradient too, since the head's
weight-gradient is accumulated into the same tensor before the embedding's backward), then per
block ``block_<i>_attn`` and ``block_<i>_mlp``, then ``head`` (final LayerNorm, projection onto
the vocabulary, softmax cross-entropy; its only own parameters are the LayerNorm's). Attention
counts the full ``s x s`` score products (no causal skipping), as the Megatron formula does;
with ``flash_attention`` (default) the scores stay on chip (FlashAttention: Q, K, V read, O
written), otherwise the ``heads x s x s`` score and probability tensors go through HBM. The
attention backward computes ``dQ, dK, dV`` (two products per forward product); FlashAttention's
recomputation of the scores is not counted. Dropout is not modelled.

Defaults: 8 sequences per NPU and 2-byte elements (BF16 mixed precision, gradients all-reduced
in BF16 — the common setting for GPT training; FP32 master weights and the optimizer are outside
the iteration's traffic here).
"""

from __future__ import annotations

from ...errors import WorkloadError
from ..model import Workload
from .costs import (
    ADD_FLOPS,
    GELU_FLOPS,
    SOFTMAX_FLOPS,
    LayerCost,
    PassCost,
    batched_matmul,
    embedding_lookup,
    gemm,
    layer_norm,
    pointwise,
    softmax_loss,
    tiles,
    to_layer,
    total,
)

NAME = "gpt"
DEFAULT_BATCH = 8
DEFAULT_DTYPE = 2
OPTIONS: dict[str, object] = {
    "layers": 24,
    "hidden": 1024,
    "heads": 16,
    "seq_len": 1024,
    "vocab": 50257,
    "flash_attention": True,
}
MLP_RATIO = 4


def attention_core(batch: int, heads: int, seq: int, head_dim: int, *, fused: bool) -> LayerCost:
    """``softmax(Q K^T / sqrt(d)) V`` for ``batch x heads`` sequences of ``seq`` tokens."""
    b = batch * heads
    scores = batched_matmul(b, seq, seq, head_dim)
    softmax = pointwise(b * seq * seq, fwd_flops=SOFTMAX_FLOPS, bwd_flops=3.0)
    context = batched_matmul(b, seq, head_dim, seq)
    unfused = total([scores, softmax, context])
    if not fused:
        return unfused
    qkvo = 4 * b * seq * head_dim
    return LayerCost(
        forward=PassCost(unfused.forward.flops, qkvo, tiles(batch * seq, heads * head_dim)),
        # reads Q, K, V, O, dO and the softmax statistics; writes dQ, dK, dV
        input_grad=PassCost(unfused.input_grad.flops, 2 * qkvo),
    )


def residual(n: float) -> LayerCost:
    return pointwise(
        n, fwd_flops=ADD_FLOPS, bwd_flops=0, fwd_reads=2, fwd_writes=1, bwd_reads=0, bwd_writes=0
    )


def build(
    batch: int,
    dtype_bytes: int,
    *,
    layers: int = 24,
    hidden: int = 1024,
    heads: int = 16,
    seq_len: int = 1024,
    vocab: int = 50257,
    flash_attention: bool = True,
) -> Workload:
    if hidden % heads:
        raise WorkloadError(
            f"hidden ({hidden}) must be a multiple of heads, got {heads}",
            location=f"zoo:{NAME}",
            field="heads",
        )
    tokens = batch * seq_len
    out = []

    emb = embedding_lookup(tokens, hidden, vocab + seq_len, dense_grad=True)
    emb = emb + residual(tokens * hidden)  # token + position
    out.append(to_layer("embedding", emb.without_input_grad(), dtype_bytes))

    for i in range(layers):
        attn = total(
            [
                layer_norm(tokens, hidden),
                gemm(tokens, 3 * hidden, hidden),
                attention_core(batch, heads, seq_len, hidden // heads, fused=flash_attention),
                gemm(tokens, hidden, hidden),
                residual(tokens * hidden),
            ]
        )
        out.append(to_layer(f"block_{i}_attn", attn, dtype_bytes))
        mlp = total(
            [
                layer_norm(tokens, hidden),
                gemm(tokens, MLP_RATIO * hidden, hidden),
                pointwise(tokens * MLP_RATIO * hidden, fwd_flops=GELU_FLOPS, bwd_flops=GELU_FLOPS),
                gemm(tokens, hidden, MLP_RATIO * hidden),
                residual(tokens * hidden),
            ]
        )
        out.append(to_layer(f"block_{i}_mlp", mlp, dtype_bytes))

    projection = gemm(tokens, vocab, hidden, bias=False)
    tied = LayerCost(projection.forward, projection.input_grad, projection.weight_grad, params=0)
    loss = softmax_loss(tokens, vocab)
    out.append(to_layer("head", total([layer_norm(tokens, hidden), tied, loss]), dtype_bytes))

    return Workload(
        name=NAME,
        layers=tuple(out),
        parallelism="data",
        description=(
            f"GPT decoder: {layers} layers, hidden {hidden}, {heads} heads, "
            f"{seq_len} tokens, vocab {vocab}, {batch} sequences/NPU"
        ),
        source="GPT-2 medium shape (Radford et al. 2019); FLOPs as Narayanan et al. SC 2021",
        batch_per_npu=batch,
        dtype_bytes=dtype_bytes,
    )
