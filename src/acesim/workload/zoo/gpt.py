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
Megatron-LM", SC 2021, eq. 3 is 3x this without recomputation), whose attention term counts the
full ``s x s`` scores: the causal fused kernel computes half of it.

Layers: ``embedding`` (token + position; its weight-gradient pass zero-fills and scatters the
dense table gradients and adds in the tied head's gradient, and its all-reduce carries the
head's gradient too, since the head's weight gradient is accumulated into the same tensor before
the embedding's backward), then per block ``block_<i>_attn`` and ``block_<i>_mlp``, then
``head`` (final LayerNorm, projection onto the vocabulary, fused softmax cross-entropy as
Megatron-LM's; its only own parameters are the LayerNorm's).

Attention: with ``flash_attention`` (default) one fused causal kernel forward and one backward
(:class:`~acesim.hardware.kernels.Attention`, FlashAttention-2: Q, K, V read, O written, the
scores stay on chip; the causal kernel skips the masked half of the score blocks, and its
backward recomputes the scores), so its FLOPs are half of the ``4 B s^2 L h`` term of the
Megatron formula forward. Otherwise (``flash_attention=False``, GPT-2's original attention)
the full ``s x s`` score products as batched GEMMs, one fused scale-mask-softmax kernel
(Megatron-LM's) whose ``heads x s x s`` probabilities go through HBM, and the context product.
Layout copies between the QKV GEMM and attention are not modelled, nor is dropout.

Defaults: 8 sequences per NPU, ``bf16`` (BF16 parameters, activations and gradients,
all-reduced in BF16, with FP32 master weights and Adam moments — Megatron-LM's BF16 training;
the optimizer step is each layer's ``update``) and Adam (GPT-2/3's optimizer).
"""

from __future__ import annotations

from ...errors import WorkloadError
from ...hardware.kernels import Stream
from ...precision import Precision
from ..model import Workload
from .costs import (
    ADD_FLOPS,
    SOFTMAX_BWD_FLOPS,
    SOFTMAX_FLOPS,
    LayerCost,
    add,
    batched_matmul,
    cross_entropy,
    elementwise,
    embedding,
    flash_attention,
    gelu,
    layer_norm,
    linear,
    to_layer,
    total,
)

NAME = "gpt"
DEFAULT_BATCH = 8
DEFAULT_PRECISION = "bf16"
DEFAULT_OPTIMIZER = "adam"
MLP_RATIO = 4


def attention_core(
    p: Precision, batch: int, heads: int, seq: int, head_dim: int, *, fused: bool
) -> LayerCost:
    """``softmax(Q K^T / sqrt(d) + mask) V`` for ``batch x heads`` sequences of ``seq`` tokens
    (see the module docstring). Saves Q, K, V (and O fused; the probabilities unfused)."""
    b = batch * heads
    if fused:
        return flash_attention(p, b, seq, head_dim, causal=True)
    scores = batched_matmul(p, b, seq, seq, head_dim, name="scores")
    softmax = elementwise(
        p,
        b * seq * seq,
        "masked_softmax",
        flops=SOFTMAX_FLOPS,
        bwd_flops=SOFTMAX_BWD_FLOPS,
        save=1,
    )
    context = batched_matmul(p, b, seq, head_dim, seq, save_a=False, name="context")
    return total([scores, softmax, context])


def token_embedding(p: Precision, batch: int, seq: int, hidden: int, vocab: int) -> LayerCost:
    """Token and position lookups and their sum, with the backward of both tables and the
    accumulation of the tied head's gradient into the token table's."""
    tokens = batch * seq
    tok = embedding(p, tokens, hidden, vocab, dense_grad=True, name="wte")
    pos = embedding(p, seq, hidden, seq, dense_grad=True, name="wpe")
    a, b = p.activation_bytes, p.param_bytes
    n = tokens * hidden
    # x = wte[ids] + wpe[positions] (broadcast over the batch); backward sums dy over the
    # batch for the position table
    add_pos = LayerCost(
        forward=(Stream(n * b + seq * hidden * b, n * a, ADD_FLOPS * n, name="add_pos"),),
        weight_grad=(Stream(n * a, seq * hidden * b, n, name="add_pos.bwd"),),
    )
    tied = LayerCost(
        weight_grad=(
            Stream(
                2 * vocab * hidden * b,
                vocab * hidden * b,
                vocab * hidden,
                name="wte.accumulate_grad",
            ),
        )
    )
    return total([tok, pos, add_pos, tied])


def build(
    batch: int,
    precision: Precision,
    optimizer: str,
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
    p = precision
    tokens = batch * seq_len
    n = tokens * hidden
    out = []

    def add_layer(name: str, cost: LayerCost) -> None:
        out.append(to_layer(name, cost, p, optimizer))

    emb = token_embedding(p, batch, seq_len, hidden, vocab)
    add_layer("embedding", emb.without_input_grad())

    for i in range(layers):
        attn = total(
            [
                layer_norm(p, tokens, hidden),
                linear(p, tokens, 3 * hidden, hidden, name="qkv"),
                attention_core(p, batch, heads, seq_len, hidden // heads, fused=flash_attention),
                # its input (O) is kept by the fused attention; unfused, by nobody else
                linear(p, tokens, hidden, hidden, save_input=not flash_attention, name="proj"),
                add(p, n),
            ]
        )
        add_layer(f"block_{i}_attn", attn)
        mlp = total(
            [
                layer_norm(p, tokens, hidden),
                linear(p, tokens, MLP_RATIO * hidden, hidden, name="fc1"),
                gelu(p, tokens * MLP_RATIO * hidden),
                linear(p, tokens, hidden, MLP_RATIO * hidden, name="fc2"),
                add(p, n),
            ]
        )
        add_layer(f"block_{i}_mlp", mlp)

    projection = linear(p, tokens, vocab, hidden, bias=False, name="lm_head").tied()
    loss = cross_entropy(p, tokens, vocab, fused=True)
    add_layer("head", total([layer_norm(p, tokens, hidden), projection, loss]))

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
        precision=p.name,
        optimizer=optimizer,
    )
