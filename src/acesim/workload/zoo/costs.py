"""Cost formulas shared by the zoo: FLOPs, HBM traffic and thread-blocks of common layers.

Everything is per NPU and per training iteration (one micro-batch of ``batch`` samples).

Conventions:

* **FLOPs**: a multiply-add is 2 FLOPs. A GEMM ``[M,K] x [K,N]`` costs ``2*M*N*K``. Its
  input-gradient (``dX = dY W^T``) and weight-gradient (``dW = X^T dY``) are GEMMs of the same
  size, so each costs the forward FLOPs again (the standard "backward = 2x forward" rule).
  Convolutions are counted as implicit GEMMs (``M = batch*H_out*W_out``, ``N = C_out``,
  ``K = C_in*k*k``). Pointwise work (normalisation, activations, losses) is counted with the
  per-element constants below; it is small next to the GEMMs and only matters for traffic.
* **HBM traffic** is counted in *elements* here (:class:`PassCost.elems`) and turned into bytes
  with the workload's ``dtype_bytes`` by :func:`to_layer`. Each kernel reads each operand and
  writes each result once (perfect on-chip reuse inside a kernel, none between kernels; L2
  hits across kernels are ignored). Integer indices (embedding lookups) are not counted.
* **Thread-blocks** (``Compute.blocks``, for wave quantisation): an *assumption* of output tiles
  of ``TILE x TILE`` = 128x128 elements, a common large cuBLAS/CUTLASS tile. Forward and
  input-gradient GEMMs get ``ceil(M/128)*ceil(N/128)`` for their output. Weight-gradient GEMMs
  get ``None``: their output (the weights) is small and libraries split the long batch
  dimension (split-K) by heuristics we cannot predict. When a pass combines several kernels
  (a conv plus its batch-norm), ``blocks`` is that of the pass's largest-FLOP kernel that has a
  tile count — an approximation. Recurrent (LSTM) passes get ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..model import Comm, Compute, Layer, Pass

TILE = 128
"""Output-tile edge (elements) of the GEMM tiling assumed for ``Compute.blocks``."""

# Pointwise FLOPs per element (documented estimates, not measured).
BN_FWD_FLOPS = 7.0
"""Batch-norm training forward: sum and sum of squares (3), normalise, scale, shift (4)."""
BN_BWD_FLOPS = 10.0
"""Batch-norm backward: two reductions (dgamma, dbeta) and the input gradient."""
RELU_FLOPS = 1.0
ADD_FLOPS = 1.0
SOFTMAX_FLOPS = 5.0
"""Softmax / log-softmax per element: max, subtract, exp, sum, scale."""
LAYERNORM_FWD_FLOPS = 7.0
LAYERNORM_BWD_FLOPS = 10.0
GELU_FLOPS = 8.0
"""GELU (tanh approximation): about eight FLOPs per element."""
LSTM_CELL_FLOPS = 12.0
"""One LSTM cell per hidden unit and step: 3 sigmoids, 2 tanh, 3 multiplies, adds."""
LSTM_CELL_BWD_FLOPS = 20.0
ATTN_SCORE_FLOPS = 5.0
"""Additive (Bahdanau) attention score per (query, key, unit): 2 adds, tanh, multiply-add."""


def tiles(rows: float, cols: float) -> int:
    """Output tiles of ``TILE x TILE`` covering a ``rows x cols`` result."""
    return math.ceil(rows / TILE) * math.ceil(cols / TILE)


@dataclass(frozen=True)
class PassCost:
    """Compute of one pass before it gets a dtype.

    Attributes:
        flops: floating-point operations (FLOP).
        elems: elements read plus written in HBM (multiply by the dtype for bytes).
        blocks: thread-blocks of the dominant kernel, or None.
    """

    flops: float = 0.0
    elems: float = 0.0
    blocks: int | None = None

    def __add__(self, other: PassCost) -> PassCost:
        first, second = (self, other) if self.flops >= other.flops else (other, self)
        blocks = first.blocks if first.blocks is not None else second.blocks
        return PassCost(self.flops + other.flops, self.elems + other.elems, blocks)


@dataclass(frozen=True)
class LayerCost:
    """Forward, input-gradient and weight-gradient costs of a layer, and its parameters."""

    forward: PassCost = field(default_factory=PassCost)
    input_grad: PassCost = field(default_factory=PassCost)
    weight_grad: PassCost = field(default_factory=PassCost)
    params: int = 0

    def __add__(self, other: LayerCost) -> LayerCost:
        return LayerCost(
            self.forward + other.forward,
            self.input_grad + other.input_grad,
            self.weight_grad + other.weight_grad,
            self.params + other.params,
        )

    def without_input_grad(self) -> LayerCost:
        """The layer's input is data (an image, token ids, dense features): no gradient for it."""
        return replace(self, input_grad=PassCost())


def total(costs: list[LayerCost]) -> LayerCost:
    """Sum of several kernels' costs, as one layer."""
    out = LayerCost()
    for cost in costs:
        out = out + cost
    return out


def gemm(m: float, n: float, k: float, *, bias: bool = True) -> LayerCost:
    """A linear layer ``Y[M,N] = X[M,K] W[K,N] (+ b)``: M rows (batch x tokens), K in, N out."""
    flops = 2.0 * m * n * k
    weights = k * n
    bias_elems = n if bias else 0
    return LayerCost(
        forward=PassCost(
            flops + (m * n if bias else 0), m * k + weights + bias_elems + m * n, tiles(m, n)
        ),
        input_grad=PassCost(flops, m * n + weights + m * k, tiles(m, k)),
        weight_grad=PassCost(flops + (m * n if bias else 0), m * k + m * n + weights + bias_elems),
        params=int(weights + bias_elems),
    )


def conv2d(
    batch: int, c_in: int, c_out: int, size: int, kernel: int, stride: int, *, bias: bool = False
) -> tuple[LayerCost, int]:
    """A square convolution as an implicit GEMM; returns its cost and the output size.

    Args:
        batch: images.
        c_in, c_out: channels in and out.
        size: input height = width (pixels).
        kernel: kernel height = width; padding is ``kernel // 2`` ("same" before striding).
        stride: stride in both directions.
    """
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    m = batch * out * out
    k = c_in * kernel * kernel
    flops = 2.0 * m * c_out * k
    x = batch * c_in * size * size
    y = m * c_out
    weights = c_out * k + (c_out if bias else 0)
    cost = LayerCost(
        forward=PassCost(flops, x + weights + y, tiles(m, c_out)),
        input_grad=PassCost(flops, y + weights + x, tiles(batch * size * size, c_in)),
        weight_grad=PassCost(flops, x + y + weights),
        params=int(weights),
    )
    return cost, out


def pointwise(
    n: float,
    *,
    fwd_flops: float,
    bwd_flops: float,
    fwd_reads: float = 1,
    fwd_writes: float = 1,
    bwd_reads: float = 2,
    bwd_writes: float = 1,
    params: int = 0,
    bwd_in_weight_grad: bool = False,
) -> LayerCost:
    """An element-wise kernel over ``n`` elements, with per-element FLOPs and tensor counts.

    Its backward goes in the input-gradient pass, or in the weight-gradient pass when
    ``bwd_in_weight_grad`` (a layer with parameters whose one backward kernel yields both, like
    batch-norm, and which must run before the preceding GEMM's weight gradient).
    """
    fwd = PassCost(n * fwd_flops, n * (fwd_reads + fwd_writes))
    bwd = PassCost(n * bwd_flops, n * (bwd_reads + bwd_writes))
    if bwd_in_weight_grad:
        return LayerCost(forward=fwd, weight_grad=bwd, params=params)
    return LayerCost(forward=fwd, input_grad=bwd, params=params)


def softmax_loss(tokens: float, vocab: int) -> LayerCost:
    """Softmax cross-entropy over ``tokens x vocab`` logits: forward reads the logits, backward
    reads them and writes ``dlogits``, which precede both projection gradients (so the
    backward kernel runs in the weight-gradient pass)."""
    return pointwise(
        tokens * vocab,
        fwd_flops=SOFTMAX_FLOPS,
        bwd_flops=ADD_FLOPS,
        fwd_reads=1,
        fwd_writes=0,
        bwd_reads=1,
        bwd_writes=1,
        bwd_in_weight_grad=True,
    )


def batch_norm_relu(
    n: float, channels: int, *, relu: bool = True, residual: bool = False
) -> LayerCost:
    """Training-mode batch-norm (+ ReLU, + residual add) fused over ``n`` elements.

    Forward reads its input twice (statistics, then normalisation) and writes once; a residual
    add reads the shortcut once more. Backward reads ``dy`` and ``x`` for the reductions, again
    for the input gradient (plus the output for the ReLU mask) and writes ``dx``; it is placed in
    the weight-gradient pass because it yields dgamma/dbeta and must precede the conv's gradients.
    """
    flops = BN_FWD_FLOPS + (RELU_FLOPS if relu else 0) + (ADD_FLOPS if residual else 0)
    return pointwise(
        n,
        fwd_flops=flops,
        bwd_flops=BN_BWD_FLOPS + (RELU_FLOPS if relu else 0),
        fwd_reads=2 + (1 if residual else 0),
        fwd_writes=1,
        bwd_reads=4 + (1 if relu else 0),
        bwd_writes=1,
        params=2 * channels,
        bwd_in_weight_grad=True,
    )


def layer_norm(n_rows: float, width: int) -> LayerCost:
    """LayerNorm over ``n_rows`` rows of ``width`` (gamma and beta parameters)."""
    n = n_rows * width
    norm = pointwise(
        n,
        fwd_flops=LAYERNORM_FWD_FLOPS,
        bwd_flops=LAYERNORM_BWD_FLOPS,
        fwd_reads=1,
        fwd_writes=1,
        bwd_reads=2,
        bwd_writes=1,
    )
    # dgamma/dbeta: a reduction over rows of dy * x_hat, reading dy and x once more.
    wgrad = PassCost(2.0 * n, 2 * n + 2 * width)
    return LayerCost(norm.forward, norm.input_grad, wgrad, params=2 * width)


def batched_matmul(batch: float, m: float, n: float, k: float) -> LayerCost:
    """``batch`` independent products ``[M,K] x [K,N]`` of two activations (no parameters).

    Both operands need gradients, so the input-gradient pass is two such products.
    """
    flops = 2.0 * batch * m * n * k
    a, b, c = batch * m * k, batch * k * n, batch * m * n
    return LayerCost(
        forward=PassCost(flops, a + b + c, math.ceil(batch) * tiles(m, n)),
        input_grad=PassCost(2 * flops, 2 * c + 2 * (a + b), math.ceil(batch) * tiles(m, k)),
    )


def lstm(batch: int, steps: int, inputs: int, hidden: int, *, directions: int = 1) -> LayerCost:
    """One LSTM layer (PyTorch ``nn.LSTM`` parameterisation) over ``steps`` time steps.

    Per direction: the input projection of all steps is one GEMM ``[B*T, I] x [I, 4H]``; the
    recurrence is ``T`` GEMMs ``[B, H] x [H, 4H]`` plus the cell's pointwise work. Parameters are
    ``4H*(I+H) + 8H`` (two bias vectors, as PyTorch). Assumption: the recurrent weights are
    re-read from HBM at every step (no persistent-RNN kernel; 16 MiB at H=1024 in FP32 does not
    stay on chip), so traffic grows with ``T``. Backward through time (the input-gradient pass)
    repeats the recurrent GEMMs; the weight gradients are two large GEMMs over all steps.
    """
    g = 4 * hidden
    rows = batch * steps
    flops = 2.0 * rows * g * (inputs + hidden)
    cell = rows * hidden
    fwd = PassCost(
        flops + LSTM_CELL_FLOPS * cell,
        rows * inputs
        + g * inputs
        + 2 * rows * g  # x, W_ih, pre-activations written and read
        + steps * g * hidden
        + rows * hidden  # W_hh every step, h_{t-1}
        + rows * hidden
        + 2 * rows * hidden
        + rows * g,  # c_{t-1}; h, c; saved gates
    )
    igrad = PassCost(
        flops + LSTM_CELL_BWD_FLOPS * cell,
        3 * rows * hidden
        + rows * g  # dh, dc, c, saved gates
        + rows * g
        + steps * g * hidden  # dGates written; W_hh every step
        + rows * g
        + g * inputs
        + rows * inputs,  # dX = dGates W_ih
    )
    wgrad = PassCost(
        flops + 2.0 * rows * g,
        2 * rows * g + rows * inputs + rows * hidden + g * (inputs + hidden) + 2 * g,
    )
    per_dir = LayerCost(fwd, igrad, wgrad, params=g * (inputs + hidden) + 2 * g)
    return total([per_dir] * directions)


def embedding_lookup(lookups: float, dim: int, rows: int, *, dense_grad: bool) -> LayerCost:
    """Gather of ``lookups`` rows of width ``dim`` from tables of ``rows`` rows in all.

    Forward reads each looked-up row and writes it. The weight-gradient pass either scatters the
    row gradients into a dense gradient of the whole table (``dense_grad``: zero-fill, then
    read-add-write per lookup; what PyTorch's default ``nn.Embedding`` does, which data-parallel
    training then all-reduces in full) or applies a sparse SGD update in place (read gradient,
    read row, write row; model-parallel DLRM tables).
    """
    n = lookups * dim
    fwd = PassCost(0.0, 2 * n)
    if dense_grad:
        wgrad = PassCost(n, rows * dim + 3 * n)
    else:
        wgrad = PassCost(2.0 * n, 3 * n)
    return LayerCost(forward=fwd, weight_grad=wgrad, params=rows * dim)


def to_layer(
    name: str,
    cost: LayerCost,
    dtype_bytes: int,
    *,
    allreduce: bool = True,
    forward_comm: Comm | None = None,
    input_grad_comm: Comm | None = None,
) -> Layer:
    """A :class:`Layer` with bytes from elements; a data-parallel layer with parameters gets a
    weight-gradient all-reduce of ``params * dtype_bytes`` bytes (gradients in the model dtype)."""

    def compute(p: PassCost) -> Compute:
        return Compute(flops=p.flops, hbm_bytes=p.elems * dtype_bytes, blocks=p.blocks)

    wg_comm = Comm("all-reduce", cost.params * dtype_bytes) if allreduce and cost.params else None
    return Layer(
        name=name,
        forward=Pass(compute(cost.forward), _comms(forward_comm)),
        input_grad=Pass(compute(cost.input_grad), _comms(input_grad_comm)),
        weight_grad=Pass(compute(cost.weight_grad), _comms(wg_comm)),
        params=cost.params,
    )


def _comms(comm: Comm | None) -> tuple[Comm, ...]:
    return () if comm is None else (comm,)
