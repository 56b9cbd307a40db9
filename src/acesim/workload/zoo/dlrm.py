"""DLRM, MLPerf Training configuration on Criteo Terabyte, hybrid parallel.

Model: Naumov et al., "Deep Learning Recommendation Model for Personalization and
Recommendation Systems" (arXiv 1906.00091), in the MLPerf Training configuration of the
reference facebookresearch/dlrm (``bench/run_and_time.sh``; the same shapes are in the MLPerf
Inference reference and the TF Model Garden ``ranking`` config):

* 13 dense features -> bottom MLP 13-512-256-128 (ReLU);
* 26 categorical features -> 26 embedding tables of dimension 128, one-hot lookups;
* dot interaction: the pairwise dot products of the 27 vectors (26 embeddings plus the bottom
  MLP's output), 27*26/2 = 351, concatenated with the bottom output: 479 features;
* top MLP 479-1024-1024-512-256-1 (ReLU; sigmoid and binary cross-entropy at the end).

Table sizes: the row counts of the Criteo Terabyte tables with the reference's
``--max-ind-range=40000000`` (indices hashed modulo 40M), as listed in the MLPerf DLRM references
(``ln_emb``; the TF Model Garden calls them ``vocab_sizes``): 187,767,399 rows, 24.0e9 embedding
parameters (96 GB in FP32). ``max_rows`` caps every table further (e.g. to fit a small system).

Parallelism (``hybrid_dlrm``, the ASTRA-sim 1.0 HYBRID_DLRM convention): the tables are
model-parallel, spread evenly over the NPUs; the MLPs are data-parallel. Layer 0 is
``embedding``: its forward is the lookup followed by an all-to-all of the pooled vectors; its
input-gradient pass is the all-to-all of their gradients (no compute); its weight-gradient pass
is the sparse SGD update of the looked-up rows, with no all-reduce and no optimizer step of its
own. The all-to-all size per NPU is ``batch * tables * dim * param_bytes`` bytes (the pooled
vectors are in the tables' dtype: embedding lookups are not autocast) — each NPU sends the
vectors of its tables for every sample of the global batch and receives the vectors of all
tables for its own samples, which is the same amount when tables divide evenly; the size does
not depend on the NPU count (more NPUs than tables would need tables split by rows, which this
model does not do). The embedding's ``params`` is the whole model's table count, not a per-NPU
share (:func:`..footprint.footprint` divides it by the NPUs). Then ``bottom_mlp_<i>``
(``bottom_layers`` is the index of the last), ``interaction`` (no parameters), ``top_mlp_<i>``;
every MLP layer all-reduces its weight gradients. ``bottom_mlp_0`` has no input-gradient pass
(dense features need none). Kernels as the reference's PyTorch code launches them: the lookup
of all tables as one kernel (FBGEMM's table-batched embedding, as the MLPerf submissions use;
the reference's one ``nn.EmbeddingBag`` a table launches 26), each MLP layer's GEMM and its
ReLU (``nn.ReLU``, a kernel of its own; the last layer's sigmoid likewise), the interaction's
concatenation, batched dot products and the gather of their lower triangle.

Defaults: 2,048 samples per NPU (the reference MLPerf run's ``--mini-batch-size=2048``), FP32
(``fp32``), the reference's training precision, and plain SGD (the reference's optimizer: dense
SGD on the MLPs, sparse SGD on the tables).
"""

from __future__ import annotations

from ...errors import WorkloadError
from ...precision import Precision
from ..model import Comm, Layer, Workload
from .costs import (
    ADD_FLOPS,
    SIGMOID_BWD_FLOPS,
    SIGMOID_FLOPS,
    LayerCost,
    batched_matmul,
    copy,
    elementwise,
    embedding,
    linear,
    relu,
    to_layer,
)

NAME = "dlrm"
DEFAULT_BATCH = 2048
DEFAULT_PRECISION = "fp32"
DEFAULT_OPTIMIZER = "sgd"

CRITEO_TB_ROWS = (
    39884406,
    39043,
    17289,
    7420,
    20263,
    3,
    7120,
    1543,
    63,
    38532951,
    2953546,
    403346,
    10,
    2208,
    11938,
    155,
    4,
    976,
    14,
    39979771,
    25641295,
    39664984,
    585935,
    12972,
    108,
    36,
)
"""Rows of the 26 Criteo Terabyte tables with ``--max-ind-range=40000000`` (MLPerf ``ln_emb``)."""


def interaction_features(tables: int, dim: int) -> int:
    """Width of the dot interaction's output: pairwise dots of ``tables + 1`` vectors plus the
    bottom MLP's output (``arch-interaction-itself`` off, as in the reference)."""
    vectors = tables + 1
    return dim + vectors * (vectors - 1) // 2


def mlp_layer(p: Precision, batch: int, n_in: int, n_out: int, *, last: bool = False) -> LayerCost:
    """A linear layer and its activation (ReLU; the sigmoid on the last layer), each a kernel;
    the GEMM keeps its input, the activation its output."""
    gemm = linear(p, batch, n_out, n_in, save_input=False, name="fc")
    if last:  # sigmoid: backward reads dy and the output it keeps
        return gemm + elementwise(
            p, batch * n_out, "sigmoid", flops=SIGMOID_FLOPS, bwd_flops=SIGMOID_BWD_FLOPS, save=1
        )
    return gemm + relu(p, batch * n_out)


def build(
    batch: int,
    precision: Precision,
    optimizer: str,
    *,
    dense_features: int = 13,
    bottom_mlp: tuple[int, ...] = (512, 256, 128),
    top_mlp: tuple[int, ...] = (1024, 1024, 512, 256, 1),
    embedding_dim: int = 128,
    table_rows: tuple[int, ...] = CRITEO_TB_ROWS,
    max_rows: int | None = None,
) -> Workload:
    where = f"zoo:{NAME}"
    if bottom_mlp[-1] != embedding_dim:
        raise WorkloadError(
            f"the bottom MLP's last width must equal embedding_dim ({embedding_dim}) for the dot "
            f"interaction, got {bottom_mlp[-1]}",
            location=where,
            field="bottom_mlp",
        )
    p = precision
    rows = tuple(min(r, max_rows) for r in table_rows) if max_rows else tuple(table_rows)
    tables = len(rows)
    layers = []

    layers.append(_embeddings(p, optimizer, batch, rows, embedding_dim))

    widths = (dense_features, *bottom_mlp)
    for i in range(len(bottom_mlp)):
        cost = mlp_layer(p, batch, widths[i], widths[i + 1])
        if i == 0:  # the dense features are data: kept for the weight gradient, no gradient
            dense = batch * dense_features * p.activation_bytes
            cost = LayerCost(saved=dense) + cost.without_input_grad()
        layers.append(to_layer(f"bottom_mlp_{i}", cost, p, optimizer))
    bottom_layers = len(layers) - 1

    features = interaction_features(tables, embedding_dim)
    layers.append(
        to_layer("interaction", _interaction(p, batch, tables, embedding_dim), p, optimizer)
    )

    widths = (features, *top_mlp)
    for i in range(len(top_mlp)):
        cost = mlp_layer(p, batch, widths[i], widths[i + 1], last=i == len(top_mlp) - 1)
        layers.append(to_layer(f"top_mlp_{i}", cost, p, optimizer))

    return Workload(
        name=NAME,
        layers=tuple(layers),
        parallelism="hybrid_dlrm",
        bottom_layers=bottom_layers,
        description=(
            f"DLRM (MLPerf, Criteo Terabyte): {tables} tables x {embedding_dim}, "
            f"{sum(rows):,} rows, {batch} samples/NPU"
        ),
        source="Naumov et al. 2019; MLPerf Training DLRM reference (facebookresearch/dlrm)",
        batch_per_npu=batch,
        precision=p.name,
        optimizer=optimizer,
    )


def _embeddings(
    p: Precision, optimizer: str, batch: int, rows: tuple[int, ...], embedding_dim: int
) -> Layer:
    """The embedding tables (model-parallel: their vectors exchanged by an all-to-all forward
    and backward, no all-reduce, updated sparsely)."""
    tables = len(rows)
    a2a = Comm("all-to-all", batch * tables * embedding_dim * p.param_bytes)
    emb = embedding(p, batch * tables, embedding_dim, sum(rows), dense_grad=False)
    return to_layer(
        "embedding",
        emb.without_input_grad(),
        p,
        optimizer,
        allreduce=False,
        update=False,
        forward_comm=a2a,
        input_grad_comm=a2a,
    )


def _interaction(p: Precision, batch: int, tables: int, embedding_dim: int) -> LayerCost:
    """The dot interaction: T = [bottom output, the embeddings] per sample (a concatenation,
    kept for the backward), Z = T T^T (batched), the lower triangle gathered and concatenated
    with the dense vector into the top MLP's input (kept by its first GEMM)."""
    vecs = tables + 1
    features = interaction_features(tables, embedding_dim)
    cat = copy(p, batch * vecs * embedding_dim)
    dots = batched_matmul(
        p, batch, vecs, vecs, embedding_dim, save_b=False, name="dots"
    )  # T T^T: one tensor
    gather = elementwise(
        p, batch * features, "tril_gather", flops=0, bwd_flops=ADD_FLOPS, bwd_reads=1, save=1
    )
    return cat + dots + gather
