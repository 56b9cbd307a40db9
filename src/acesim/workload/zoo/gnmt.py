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
NVIDIA reference), FP32 (``fp32``; the reference also trains in ``amp_fp16``) and Adam (the
reference's optimizer).

Layers: ``embedding`` (shared; forward looks up source and target tokens in one kernel; its
gradient is dense over the whole table, as PyTorch's default embedding produces and
data-parallel training all-reduces), ``encoder_lstm_<i>``, ``decoder_lstm_0``, ``attention``,
``decoder_lstm_<i>``, ``classifier`` (projection plus Apex's fused softmax cross-entropy, which
the NVIDIA reference uses). A residual add is in the layer whose output it makes; every decoder
layer after the first concatenates its input with the attention context (a copy kernel). LSTM
kernels: :func:`.costs.lstm` (the recurrence as one GEMM and one cell kernel per step).
"""

from __future__ import annotations

from ...errors import WorkloadError
from ...hardware.kernels import Stream
from ...precision import Precision
from ..model import Workload
from .costs import (
    ATTN_SCORE_FLOPS,
    SOFTMAX_BWD_FLOPS,
    SOFTMAX_FLOPS,
    LayerCost,
    add,
    batched_matmul,
    copy,
    cross_entropy,
    elementwise,
    embedding,
    linear,
    lstm,
    to_layer,
    total,
)

NAME = "gnmt"
DEFAULT_BATCH = 128
DEFAULT_PRECISION = "fp32"
DEFAULT_OPTIMIZER = "adam"
FIRST_RESIDUAL_LAYER = 2
"""0-based index of the first LSTM layer with a residual connection ("from the 3rd layer")."""


def attention(p: Precision, batch: int, src: int, tgt: int, hidden: int) -> LayerCost:
    """Normalised Bahdanau attention of ``tgt`` queries over ``src`` encoder outputs.

    Keys and queries are projected (two GEMMs without bias); the score ``v . tanh(q + k + b)``
    is one fused kernel over ``batch x tgt x src x hidden`` (as NVIDIA's MLPerf ``attn_score``
    CUDA kernel: the 4-D tensor is never written; its FLOPs run on the vector units), its
    backward one kernel for the query and key gradients and one reduction for the score
    vector's and normalisation bias's gradients; then a softmax over ``src`` and the context
    ``[T,S] x [S,H]`` (batched GEMMs). Saved: the encoder outputs (the keys' input, also the
    context's values), both projections, the probabilities.
    """
    a = p.activation_bytes
    keys = linear(p, batch * src, hidden, hidden, bias=False, name="linear_k")
    queries = linear(p, batch * tgt, hidden, hidden, bias=False, save_input=False, name="linear_q")
    n_score = batch * tgt * src * hidden
    q_k = (batch * tgt + batch * src) * hidden
    scores = batch * tgt * src
    score = LayerCost(
        forward=(Stream(q_k * a, scores * a, ATTN_SCORE_FLOPS * n_score, name="attn_score"),),
        input_grad=(
            Stream(
                (q_k + scores) * a, q_k * a, 2 * ATTN_SCORE_FLOPS * n_score, name="attn_score.bwd"
            ),
        ),
        weight_grad=(
            Stream(
                (q_k + scores) * a,
                (2 * hidden + 1) * p.param_bytes,
                2.0 * n_score,
                name="attn_score.bwd_params",
            ),
        ),
        params=2 * hidden + 1,
        saved=q_k * a,
    )
    softmax = elementwise(
        p, scores, "softmax", flops=SOFTMAX_FLOPS, bwd_flops=SOFTMAX_BWD_FLOPS, save=1
    )
    context = batched_matmul(p, batch, tgt, hidden, src, save_a=False, save_b=False, name="context")
    return total([keys, queries, score, softmax, context])


def build(
    batch: int,
    precision: Precision,
    optimizer: str,
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
    p = precision
    out = []

    def add_layer(name: str, cost: LayerCost) -> None:
        out.append(to_layer(name, cost, p, optimizer))

    emb = embedding(p, batch * (src_len + tgt_len), hidden, vocab, dense_grad=True)
    add_layer("embedding", emb.without_input_grad())

    def residual(n_tokens: int, i: int) -> LayerCost:
        return add(p, n_tokens * hidden) if i >= FIRST_RESIDUAL_LAYER else LayerCost()

    src_tokens = batch * src_len
    for i in range(layers):
        inputs = hidden if i != 1 else 2 * hidden  # layer 0 is bidirectional: 2H out
        # The input is kept here unless it is the previous LSTM's own output (kept there).
        fresh_input = i == 0 or i > FIRST_RESIDUAL_LAYER
        cost = lstm(
            p, batch, src_len, inputs, hidden, directions=2 if i == 0 else 1, save_input=fresh_input
        )
        add_layer(f"encoder_lstm_{i}", cost + residual(src_tokens, i))

    tgt_tokens = batch * tgt_len
    add_layer("decoder_lstm_0", lstm(p, batch, tgt_len, hidden, hidden))
    add_layer("attention", attention(p, batch, src_len, tgt_len, hidden))
    for i in range(1, layers):
        cat = copy(p, tgt_tokens * 2 * hidden)  # [x, context]
        cost = cat + lstm(p, batch, tgt_len, 2 * hidden, hidden) + residual(tgt_tokens, i)
        add_layer(f"decoder_lstm_{i}", cost)

    head = linear(p, tgt_tokens, vocab, hidden, name="classifier")
    add_layer("classifier", head + cross_entropy(p, tgt_tokens, vocab, fused=True))

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
        precision=p.name,
        optimizer=optimizer,
    )
