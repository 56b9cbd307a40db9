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
is the sparse SGD update of the looked-up rows, with no all-reduce. The all-to-all size per NPU
is ``batch * tables * dim * dtype`` bytes — each NPU sends the vectors of its tables for every
sample of the global batch and receives the vectors of all tables for its own samples, which is
the same amount when tables divide evenly; the size does not depend on the NPU count (more NPUs
than tables would need tables split by rows, which this model does not do). The embedding's
``params`` is the whole model's table count, not a per-NPU share. Then ``bottom_mlp_<i>``
(``bottom_layers`` is the index of the last), ``interaction`` (no parameters), ``top_mlp_<i>``;
every MLP layer all-reduces its weight gradients. ``bottom_mlp_0`` has no input-gradient pass
(dense features need none).

Defaults: 2,048 samples per NPU (the reference MLPerf run's ``--mini-batch-size=2048``) and FP32,
the reference's training precision.
"""

from __future__ import annotations

from ...errors import WorkloadError
from ..model import Comm, Workload
from .costs import (
    ADD_FLOPS,
    RELU_FLOPS,
    LayerCost,
    PassCost,
    batched_matmul,
    embedding_lookup,
    gemm,
    pointwise,
    to_layer,
)

NAME = "dlrm"
DEFAULT_BATCH = 2048
DEFAULT_DTYPE = 4

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

OPTIONS: dict[str, object] = {
    "dense_features": 13,
    "bottom_mlp": (512, 256, 128),
    "top_mlp": (1024, 1024, 512, 256, 1),
    "embedding_dim": 128,
    "table_rows": CRITEO_TB_ROWS,
    "max_rows": None,
}


def interaction_features(tables: int, dim: int) -> int:
    """Width of the dot interaction's output: pairwise dots of ``tables + 1`` vectors plus the
    bottom MLP's output (``arch-interaction-itself`` off, as in the reference)."""
    vectors = tables + 1
    return dim + vectors * (vectors - 1) // 2


def mlp_layer(batch: int, n_in: int, n_out: int) -> LayerCost:
    """A linear layer with its activation fused into the GEMM's epilogue (no extra traffic)."""
    return gemm(batch, n_out, n_in) + LayerCost(
        forward=PassCost(RELU_FLOPS * batch * n_out),
        input_grad=PassCost(RELU_FLOPS * batch * n_out),
    )


def build(
    batch: int,
    dtype_bytes: int,
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
    rows = tuple(min(r, max_rows) for r in table_rows) if max_rows else tuple(table_rows)
    tables = len(rows)
    layers = []

    vectors = batch * tables * embedding_dim
    a2a = Comm("all-to-all", vectors * dtype_bytes)
    emb = embedding_lookup(batch * tables, embedding_dim, sum(rows), dense_grad=False)
    layers.append(
        to_layer(
            "embedding",
            emb.without_input_grad(),
            dtype_bytes,
            allreduce=False,
            forward_comm=a2a,
            input_grad_comm=a2a,
        )
    )

    widths = (dense_features, *bottom_mlp)
    for i in range(len(bottom_mlp)):
        cost = mlp_layer(batch, widths[i], widths[i + 1])
        if i == 0:
            cost = cost.without_input_grad()
        layers.append(to_layer(f"bottom_mlp_{i}", cost, dtype_bytes))
    bottom_layers = len(layers) - 1

    vecs = tables + 1
    features = interaction_features(tables, embedding_dim)
    # Z = T T^T per sample over the 27 vectors (T read from the bottom output and the
    # all-to-all's result); the lower triangle is gathered and concatenated with the dense
    # vector into the top MLP's input.
    dots = batched_matmul(batch, vecs, vecs, embedding_dim)
    gather = pointwise(
        batch * features,
        fwd_flops=0,
        bwd_flops=ADD_FLOPS,
        fwd_reads=1,
        fwd_writes=1,
        bwd_reads=1,
        bwd_writes=1,
    )
    layers.append(to_layer("interaction", dots + gather, dtype_bytes))

    widths = (features, *top_mlp)
    for i in range(len(top_mlp)):
        layers.append(
            to_layer(f"top_mlp_{i}", mlp_layer(batch, widths[i], widths[i + 1]), dtype_bytes)
        )

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
        dtype_bytes=dtype_bytes,
    )
