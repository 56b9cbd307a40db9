"""GNMT v2 (LSTM sequence-to-sequence translation with attention), data parallel.

Variant: "GNMT v2" as implemented by the MLPerf Training reference ``rnn_translator``
(mlcommons/training, PR #100, 2018) and NVIDIA DeepLearningExamples
``PyTorch/Translation/GNMT`` (README, "Default configuration"), after Wu et al., "Google's Neural
Machine Translation System" (arXiv 1609.08144):

* hidden size 1024, embedding size 1024; one embedding table **shared** by encoder and decoder
  over a joint BPE vocabulary of **32,320** tokens (WMT16 English-German, 32,000 BPE merges plus
  specials; the size is that of the MLPerf checkpoint's ``[32320, 1024]`` embedding);
* encoder: the first LSTM layer is bidirectional (outputs 2x1024), the second takes 2048 inputs,
  the rest 1024; residual connections from the third layer on;
* decoder: the first LSTM layer feeds normalised Bahdanau attention over the encoder outputs
  (``linear_q``, ``linear_k`` 1024x1024 without bias, a score vector, a normalisation scalar and
  bias); every later layer takes its input concatenated with the attention context (2048
  inputs); residual connections from the third layer on; a 1024 x 32,320 classifier with bias
  and a softmax cross-entropy loss.

``layers`` (LSTM layers in the encoder and in the decoder) defaults to **8**, GNMT's published
depth and the one the ACE paper's GNMT refers to; this gives 244,622,913 parameters. The MLPerf
and NVIDIA reference default is **4** layers: 160,671,297 parameters, the figure NVIDIA's MLPerf
GNMT code states ("MLPerf GNMT has 160671297 parameters", NVIDIA's distributed-optimizer test for
its MLPerf GNMT submission), which the tests check with ``layers=4``. Both are computed from the
shapes here, not typed in.

Sequence lengths: ``src_len`` = ``tgt_len`` = 50 tokens by default, the reference's
``--max-length-train 50``: every sentence padded to the training maximum, an upper bound (the
reference's bucketing sampler makes batches of similar length, so real padded lengths are
shorter on average). Defaults: 128 sentence pairs per NPU (``--train-batch-size`` default of the
NVIDIA reference) and FP32 (the reference also trains in mixed precision; pass
``dtype_bytes=2``).

Layers: ``embedding`` (shared; forward looks up source and target tokens; its gradient is dense
over the whole table, as PyTorch's default embedding produces and data-parallel training
all-reduces), ``encoder_lstm_<i>``, ``decoder_lstm_0``, ``attention``, ``decoder_lstm_<i>``,
``classifier`` (projection plus loss). Residual adds are folded into the following LSTM layer's
traffic. LSTM costs: :func:`.costs.lstm` (recurrent weights re-read every step).
"""

from __future__ import annotations

from ...errors import WorkloadError
from ..model import Workload
from .costs import (
    ADD_FLOPS,
    ATTN_SCORE_FLOPS,
    SOFTMAX_FLOPS,
    LayerCost,
    PassCost,
    batched_matmul,
    embedding_lookup,
    gemm,
    lstm,
    pointwise,
    softmax_loss,
    to_layer,
    total,
)

NAME = "gnmt"
DEFAULT_BATCH = 128
DEFAULT_DTYPE = 4
OPTIONS: dict[str, object] = {
    "layers": 8,
    "hidden": 1024,
    "vocab": 32320,
    "src_len": 50,
    "tgt_len": 50,
}
FIRST_RESIDUAL_LAYER = 2
"""0-based index of the first LSTM layer with a residual connection ("from the 3rd layer")."""


def attention(batch: int, src: int, tgt: int, hidden: int) -> LayerCost:
    """Normalised Bahdanau attention of ``tgt`` queries over ``src`` encoder outputs.

    Keys and queries are projected (two GEMMs); the score ``v . tanh(q + k + b)`` is one fused
    kernel over ``batch x tgt x src x hidden`` (as NVIDIA's MLPerf ``attn_score`` kernel: the 4-D
    tensor is never written), then a softmax over ``src`` and the context ``[T,S] x [S,H]``.
    """
    keys = gemm(batch * src, hidden, hidden, bias=False)
    queries = gemm(batch * tgt, hidden, hidden, bias=False)
    n_score = batch * tgt * src * hidden
    score_io = batch * tgt * hidden + batch * src * hidden + batch * tgt * src
    score = LayerCost(
        forward=PassCost(ATTN_SCORE_FLOPS * n_score, score_io),
        input_grad=PassCost(2 * ATTN_SCORE_FLOPS * n_score, 2 * score_io),
        # gradients of the score vector and normalisation bias: reductions over the same space
        weight_grad=PassCost(2.0 * n_score, score_io + 2 * hidden),
        params=2 * hidden + 1,
    )
    softmax = pointwise(batch * tgt * src, fwd_flops=SOFTMAX_FLOPS, bwd_flops=3.0)
    context = batched_matmul(batch, tgt, hidden, src)
    return total([keys, queries, score, softmax, context])


def build(
    batch: int,
    dtype_bytes: int,
    *,
    layers: int = 8,
    hidden: int = 1024,
    vocab: int = 32320,
    src_len: int = 50,
    tgt_len: int = 50,
) -> Workload:
    if layers < 2:
        raise WorkloadError(
            f"GNMT needs at least 2 LSTM layers (bidirectional, then one that "
            f"merges directions), got {layers}",
            location=f"zoo:{NAME}",
            field="layers",
        )
    out = []

    def add(name: str, cost: LayerCost) -> None:
        out.append(to_layer(name, cost, dtype_bytes))

    emb = embedding_lookup(batch * (src_len + tgt_len), hidden, vocab, dense_grad=True)
    add("embedding", emb.without_input_grad())

    def residual(n_tokens: int, i: int) -> LayerCost:
        if i < FIRST_RESIDUAL_LAYER:
            return LayerCost()
        return pointwise(
            n_tokens * hidden,
            fwd_flops=ADD_FLOPS,
            bwd_flops=0,
            fwd_reads=2,
            fwd_writes=1,
            bwd_reads=0,
            bwd_writes=0,
        )

    for i in range(layers):
        inputs = hidden if i != 1 else 2 * hidden  # layer 0 is bidirectional: 2H out
        cost = lstm(batch, src_len, inputs, hidden, directions=2 if i == 0 else 1)
        add(f"encoder_lstm_{i}", cost + residual(batch * src_len, i))

    add("decoder_lstm_0", lstm(batch, tgt_len, hidden, hidden))
    add("attention", attention(batch, src_len, tgt_len, hidden))
    for i in range(1, layers):
        cost = lstm(batch, tgt_len, 2 * hidden, hidden) + residual(batch * tgt_len, i)
        add(f"decoder_lstm_{i}", cost)

    tokens = batch * tgt_len
    loss = softmax_loss(tokens, vocab)
    add("classifier", gemm(tokens, vocab, hidden) + loss)

    return Workload(
        name=NAME,
        layers=tuple(out),
        parallelism="data",
        description=(
            f"GNMT v2, {layers}+{layers} LSTM layers x {hidden}, shared vocab {vocab}, "
            f"{src_len}/{tgt_len} tokens, {batch} pairs/NPU"
        ),
        source="MLPerf rnn_translator / NVIDIA DeepLearningExamples GNMT v2; Wu et al. 2016",
        batch_per_npu=batch,
        dtype_bytes=dtype_bytes,
    )
