"""Kernels of common layers, shared by the zoo: each pass as the kernels a framework launches.

Everything is per NPU and per training iteration (one micro-batch). A pass is a tuple of
:mod:`~acesim.hardware.kernels` (``Gemm``, ``Attention``, ``Stream``), run one after another;
timing them (tiles, waves, efficiencies, latency) is the NPU's kernel model's job, not this
module's. The framework described is PyTorch in eager mode (one kernel per operator, cuDNN
convolutions and RNNs, cuBLAS(Lt) GEMMs); where a model's reference uses a fused kernel, its
module says so.

Conventions:

* **Shapes.** A linear layer ``Y[M,N] = X[M,K] W[K,N]`` runs forward ``Gemm(m=M, n=N, k=K)``,
  input gradient ``dX = dY W^T`` as ``Gemm(M, K, N)`` and weight gradient ``dW = X^T dY`` as
  ``Gemm(K, N, M)`` (the long batch dimension as the reduction). Convolutions are implicit
  GEMMs (:func:`conv2d`). FLOPs are the kernels': ``2 m n k`` per GEMM.
* **Dtypes** (:class:`~acesim.precision.Precision`): GEMMs and attention compute in
  ``precision.math`` and write ``precision.activations`` (FP8 GEMMs write BF16); element-wise
  kernels move activations in ``activation_bytes`` and parameters and gradients in
  ``param_bytes``; statistics (batch-norm and layer-norm means and variances) are FP32.
* **Casts.** When parameters are stored in another dtype than the math reads (PyTorch AMP:
  FP32 weights, FP16 GEMMs; FP8: BF16 weights, FP8 GEMMs), the forward pass casts each weight
  (a Stream reading it in ``param_bytes`` and writing ``math_input_bytes``; autocast keeps the
  copy for the backward pass, which is why it counts as activation memory), and when the
  weight-gradient GEMM writes another dtype than gradients are kept in (AMP: FP16 out, FP32
  gradients) a Stream casts the gradient. Activations are assumed to be in
  ``precision.activations`` throughout: ops autocast runs in FP32 (softmax, layer-norm) are
  taken to read and write the activation dtype, and FP8 recipes' activation casts are taken as
  fused into the producing kernel (as Transformer Engine fuses them).
* **Not counted** (each under a percent of a layer's bytes): bias vectors and per-channel
  vectors read or written (``N`` or ``C`` elements next to ``M x N``), integer indices, bias
  adds fused into a GEMM's epilogue (cuBLASLt's bias epilogue, which PyTorch's ``addmm`` uses),
  scalar losses. Each kernel reads each operand and writes each result once (perfect on-chip
  reuse inside a kernel, none between kernels).
* **Composition.** ``a + b`` is ``a`` then ``b`` in the forward pass: forward kernels
  concatenate; in backward ``b``'s kernels run before ``a``'s. A layer's input-gradient pass is
  only what computes the gradient of its input from the gradient of its first operator's
  output (the first operator's ``input_grad``, or the first's with backward kernels when the
  first ones have none, as a concatenation whose backward is views); every other backward
  kernel (``b``'s input gradient, every weight gradient) is in the weight-gradient pass, which
  the training loop runs first. So a layer's gradient all-reduce is issued once all its weight
  gradients exist.
* **Activation memory** (:attr:`LayerCost.saved`): bytes of the tensors an operator keeps for
  its backward. A tensor two operators keep (a ReLU's output that the next convolution reads)
  is counted once: operators take ``save_input`` to say whether they count their input.

FLOPs per element of element-wise kernels (estimates counted from the formulas, each add,
multiply, compare, exponential or square root one FLOP; they run on the vector units) are the
constants below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...errors import WorkloadError
from ...hardware.kernels import Attention, Choice, Gemm, Kernel, Stream
from ...precision import Precision
from ..model import Comm, Compute, Layer, Pass
from ..optimizer import update_kernel

Kernels = tuple[Kernel, ...]
"""A pass: kernels run one after another."""

FP32 = 4
"""Bytes of an FP32 statistic (means, variances, log-sum-exps)."""
INDEX_BYTES = 8
"""Bytes of an int64 index (PyTorch's max-pool indices)."""

BN_STATS_FLOPS = 3.0
"""Batch-norm statistics per element: square, two adds (sum and sum of squares)."""
BN_APPLY_FLOPS = 4.0
"""Batch-norm normalisation per element: subtract mean, multiply by 1/std, scale, shift."""
BN_REDUCE_FLOPS = 4.0
"""Batch-norm backward reduction per element: sum of dy (1) and of dy (x - mean) (3)."""
BN_ELEMT_FLOPS = 6.0
"""Batch-norm input gradient per element: x_hat (2), two subtracts, two multiplies."""
RELU_FLOPS = 1.0
ADD_FLOPS = 1.0
SOFTMAX_FLOPS = 5.0
"""Softmax / log-softmax per element: max, subtract, exp, sum, scale."""
SOFTMAX_BWD_FLOPS = 4.0
"""Softmax(-cross-entropy) backward per element: exp (or the saved output), multiply, sum,
subtract."""
LAYERNORM_FWD_FLOPS = 7.0
"""LayerNorm forward per element: sum, square and sum (3), normalise (2), scale, shift."""
LAYERNORM_BWD_FLOPS = 10.0
"""LayerNorm input gradient per element: x_hat (2), two row reductions (4), combine (4)."""
LAYERNORM_PARAM_FLOPS = 4.0
"""LayerNorm dgamma/dbeta per element: x_hat (2), multiply-add into dgamma (1), add dbeta (1)."""
GELU_FLOPS = 8.0
"""GELU (tanh approximation) per element, forward; backward taken as the same (it reuses the
tanh; assumption)."""
LSTM_CELL_FLOPS = 12.0
"""One LSTM cell per hidden unit and step: 3 sigmoids, 2 tanh, 3 multiplies, adds."""
LSTM_CELL_BWD_FLOPS = 20.0
"""Its backward: the derivatives of the five non-linearities and the products."""
SIGMOID_FLOPS = 4.0
"""Sigmoid per element: negate, exp, add, divide."""
SIGMOID_BWD_FLOPS = 3.0
"""Its backward ``dy y (1 - y)``: subtract, two multiplies."""
ATTN_SCORE_FLOPS = 5.0
"""Additive (Bahdanau) attention score per (query, key, unit): 2 adds, tanh, multiply-add."""
MAXPOOL_FLOPS = 9.0
"""3x3 max-pool: nine compares per output."""


@dataclass(frozen=True)
class LayerCost:
    """Kernels of one layer's (or operator's) three passes, its parameters and saved bytes.

    Attributes:
        forward, input_grad, weight_grad: the passes' kernels (see the module docstring for
            what goes where).
        params: parameters.
        saved: activation bytes kept from forward to backward.
        sparse_grad: bytes of a sparse gradient (an embedding updated in place), or None for
            dense gradients of all ``params``.
    """

    forward: Kernels = ()
    input_grad: Kernels = ()
    weight_grad: Kernels = ()
    params: int = 0
    saved: float = 0.0
    sparse_grad: float | None = None

    @property
    def empty(self) -> bool:
        return not (self.forward or self.input_grad or self.weight_grad or self.params)

    def __add__(self, other: LayerCost) -> LayerCost:
        """``self`` then ``other`` (module docstring, "Composition"); the empty cost is the
        identity."""
        if self.empty:
            return replace(other, saved=other.saved + self.saved)
        if other.empty:
            return replace(self, saved=self.saved + other.saved)
        if (self.sparse_grad is not None and other.params) or (
            other.sparse_grad is not None and self.params
        ):
            raise WorkloadError("cannot combine a sparse-gradient layer with dense parameters")
        sparse = (
            None
            if self.sparse_grad is None and other.sparse_grad is None
            else (self.sparse_grad or 0.0) + (other.sparse_grad or 0.0)
        )
        if not (self.input_grad or self.weight_grad or self.params):
            # ``self`` has no backward kernels (a copy whose backward is views): the gradient
            # passes through it, so ``other``'s input gradient is the layer's.
            input_grad, weight_grad = other.input_grad, other.weight_grad
        else:
            input_grad = self.input_grad
            weight_grad = other.weight_grad + other.input_grad + self.weight_grad
        return LayerCost(
            forward=self.forward + other.forward,
            input_grad=input_grad,
            weight_grad=weight_grad,
            params=self.params + other.params,
            saved=self.saved + other.saved,
            sparse_grad=sparse,
        )

    def without_input_grad(self) -> LayerCost:
        """The layer's input is data (an image, token ids, dense features): no gradient for it."""
        return replace(self, input_grad=())

    def tied(self) -> LayerCost:
        """The same kernels with no parameters of its own (a weight tied to another layer's)."""
        return replace(self, params=0)


def total(costs: list[LayerCost]) -> LayerCost:
    """Operators one after another, as one layer."""
    out = LayerCost()
    for cost in costs:
        out = out + cost
    return out


def _gemm(p: Precision, m: float, n: float, k: float, name: str, **kw: float) -> Gemm:
    return Gemm(m, n, k, dtype=p.math, out_dtype=p.activations, name=name, **kw)


def _stored(dtype: str) -> str:
    return "fp32" if dtype == "tf32" else dtype  # TF32 math reads FP32 tensors


def weight_casts(p: Precision, elems: float, name: str) -> LayerCost:
    """The casts of a weight of ``elems`` elements (module docstring, "Casts"); none when the
    recipe keeps weights in the math dtype."""
    forward: Kernels = ()
    saved = 0.0
    if _stored(p.params) != _stored(p.math):
        forward = (Stream(elems * p.param_bytes, elems * p.math_input_bytes, name=f"{name}.cast"),)
        saved = elems * p.math_input_bytes
    weight_grad: Kernels = ()
    if p.activations != p.params:
        weight_grad = (
            Stream(elems * p.activation_bytes, elems * p.param_bytes, name=f"{name}.grad_cast"),
        )
    return LayerCost(forward=forward, weight_grad=weight_grad, saved=saved)


def linear(
    p: Precision,
    m: float,
    n: float,
    k: float,
    *,
    bias: bool = True,
    save_input: bool = True,
    name: str = "linear",
) -> LayerCost:
    """``Y[M,N] = X[M,K] W[K,N] (+ b)``: M rows (batch x tokens), K in, N out.

    Forward: the GEMM, its bias in the epilogue. Backward: ``dX`` (input gradient), ``dW`` and
    the bias gradient (a reduction of ``dY`` over its rows). Saves ``X`` (for ``dW``) when
    ``save_input``.
    """
    casts = weight_casts(p, k * n, name)
    weight_grad: Kernels = (_gemm(p, k, n, m, f"{name}.wgrad"),)
    if bias:
        weight_grad += (
            Stream(m * n * p.activation_bytes, n * p.param_bytes, m * n, name=f"{name}.bias_grad"),
        )
    return LayerCost(
        forward=casts.forward + (_gemm(p, m, n, k, f"{name}.fwd"),),
        input_grad=(_gemm(p, m, k, n, f"{name}.dgrad"),),
        weight_grad=weight_grad + casts.weight_grad,
        params=int(k * n + (n if bias else 0)),
        saved=(m * k * p.activation_bytes if save_input else 0.0) + casts.saved,
    )


def conv_out(size: int, kernel: int, stride: int) -> int:
    """Output height (= width) of a square convolution padded by ``kernel // 2``."""
    return (size + 2 * (kernel // 2) - kernel) // stride + 1


def conv2d(
    p: Precision,
    batch: int,
    c_in: int,
    c_out: int,
    size: int,
    kernel: int,
    stride: int,
    *,
    save_input: bool = False,
    name: str = "conv",
) -> tuple[LayerCost, int]:
    """A square convolution without bias as implicit GEMMs; returns its cost and output size.

    With ``H`` = ``size``, ``O`` = the output size and ``kk`` = ``kernel**2`` taps:

    * forward ``Gemm(m = batch O^2, n = c_out, k = c_in kk)``;
    * input gradient ``Gemm(m = batch H^2, n = c_in, k = c_out kk O^2 / H^2)``: every input
      pixel gathers ``kk`` taps at stride 1, ``kk / stride^2`` on average at a larger stride
      (cuDNN computes a strided data gradient as ``stride^2`` phase sub-convolutions; one GEMM
      with the mean depth has their FLOPs, which equal the forward's);
    * weight gradient ``Gemm(m = c_in kk, n = c_out, k = batch O^2)``.

    The gathered (im2col) operand is never stored: what crosses HBM is the input tensor
    (forward, weight gradient) or the output gradient (input gradient), given as the GEMM's
    ``a_elems``; the weights as ``b_elems`` where the GEMM's ``k x n`` is not their size.

    Args:
        batch: images; c_in, c_out: channels; size: input height = width (pixels);
        kernel: kernel height = width, padding ``kernel // 2``; stride: in both directions;
        save_input: count the input as saved here (the image; other inputs are the previous
            ReLU's output, counted there).
    """
    out = conv_out(size, kernel, stride)
    taps = kernel * kernel
    x = batch * c_in * size * size
    y = batch * c_out * out * out
    w = c_out * c_in * taps
    casts = weight_casts(p, w, name)
    direct_fwd = _gemm(p, batch * out * out, c_out, c_in * taps, f"{name}.fwd", a_elems=x)
    direct_dgrad = _gemm(
        p,
        batch * size * size,
        c_in,
        c_out * taps * out * out / (size * size),
        f"{name}.dgrad",
        a_elems=y,
        b_elems=w,
    )
    fwd: Kernel = direct_fwd
    dgrad: Kernel = direct_dgrad
    if kernel == 3 and stride == 1 and p.math in WINOGRAD_DTYPES:
        fwd = Choice(
            ((direct_fwd,), (_winograd(p, batch, size, c_in, c_out, x, w, y, name),)),
            f"{name}.fwd",
        )
        dgrad = Choice(
            (
                (direct_dgrad,),
                (_winograd(p, batch, size, c_out, c_in, y, w, x, f"{name}.dgrad"),),
            ),
            f"{name}.dgrad",
        )
    cost = LayerCost(
        forward=casts.forward + (fwd,),
        input_grad=(dgrad,),
        weight_grad=(_gemm(p, c_in * taps, c_out, batch * out * out, f"{name}.wgrad", a_elems=x),)
        + casts.weight_grad,
        params=w,
        saved=(x * p.activation_bytes if save_input else 0.0) + casts.saved,
    )
    return cost, out


WINOGRAD_DTYPES = ("fp32",)
"""Math dtypes whose 3x3 convolutions may run by Winograd's minimal filtering. cuDNN's fused
Winograd kernels (``CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD``, the ``*_scudnn_winograd_*`` kernels
of FP32 ResNet-50 profiles on Volta) are FP32; its FP16 tensor-core paths are implicit GEMMs
(``*_s884cudnn_*``), so half-precision recipes get no Winograd option."""

WINOGRAD_TILE = 2
"""Output tile edge ``m`` of the fused Winograd convolution F(m x m, 3 x 3): F(2x2, 3x3),
(m + 2)^2 = 16 products per tile instead of 36 multiplies (Lavin and Gray, "Fast Algorithms
for Convolutional Neural Networks", CVPR 2016)."""


def _winograd(
    p: Precision,
    batch: int,
    size: int,
    c_in: int,
    c_out: int,
    x: float,
    w: float,
    y: float,
    name: str,
) -> Gemm:
    """A stride-1 3x3 convolution (``c_in`` to ``c_out`` channels, ``size`` x ``size``) by
    fused Winograd F(2x2, 3x3): 16 products ``[P, c_in] x [c_in, c_out]`` over the
    ``P = batch ceil(size/2)^2`` output tiles, 4/9 of the direct FLOPs. The transforms run in
    the kernel (the fused algorithm): its input, filter and output each cross HBM once; their
    additions (about 32 per input tile and channel, 24 per output tile and channel) are under
    2% of the products' FLOPs at 64 or more channels and are left out."""
    points = (WINOGRAD_TILE + 2) ** 2
    tiles = batch * math.ceil(size / WINOGRAD_TILE) ** 2
    return _gemm(
        p,
        tiles,
        c_out,
        c_in,
        f"{name}.winograd",
        batch=points,
        a_elems=x / points,
        b_elems=w / points,
        c_elems=y / points,
    )


def batch_norm(p: Precision, n: float, channels: int, *, name: str = "bn") -> LayerCost:
    """Training-mode batch-norm over ``n`` elements of ``channels`` channels (PyTorch's two
    kernels each way: statistics then normalisation; backward reduction then input gradient).
    Saves its input and the FP32 mean and inverse deviation."""
    a = n * p.activation_bytes
    return LayerCost(
        forward=(
            Stream(a, 2 * channels * FP32, BN_STATS_FLOPS * n, name=f"{name}.stats"),
            Stream(a, a, BN_APPLY_FLOPS * n, name=f"{name}.apply"),
        ),
        weight_grad=(
            Stream(
                2 * a, 2 * channels * p.param_bytes, BN_REDUCE_FLOPS * n, name=f"{name}.bwd_reduce"
            ),
        ),
        input_grad=(Stream(2 * a, a, BN_ELEMT_FLOPS * n, name=f"{name}.bwd"),),
        params=2 * channels,
        saved=a + 2 * channels * FP32,
    )


def elementwise(
    p: Precision,
    n: float,
    name: str,
    *,
    flops: float,
    bwd_flops: float,
    reads: float = 1,
    bwd_reads: float = 2,
    save: float = 0,
) -> LayerCost:
    """An element-wise operator over ``n`` elements: forward reads ``reads`` tensors and writes
    one; backward reads ``bwd_reads`` (the output gradient and what it saved) and writes the
    input gradient; ``save`` tensors of ``n`` are kept (0, or 1 for its input or output)."""
    a = n * p.activation_bytes
    backward: Kernels = ()
    if bwd_reads:
        backward = (Stream(bwd_reads * a, a, bwd_flops * n, name=f"{name}.bwd"),)
    return LayerCost(
        forward=(Stream(reads * a, a, flops * n, name=name),),
        input_grad=backward,
        saved=save * a,
    )


def relu(p: Precision, n: float, *, name: str = "relu") -> LayerCost:
    """ReLU (in place): its backward reads ``dy`` and the output it saves."""
    return elementwise(p, n, name, flops=RELU_FLOPS, bwd_flops=RELU_FLOPS, save=1)


def add(p: Precision, n: float, *, name: str = "add") -> LayerCost:
    """A residual add (``y = a + b``): two reads, one write; its backward passes the gradient
    on to both inputs without a kernel."""
    return elementwise(p, n, name, flops=ADD_FLOPS, bwd_flops=0, reads=2, bwd_reads=0)


def grad_sum(p: Precision, n: float, *, name: str = "grad_sum") -> LayerCost:
    """Autograd summing the two gradients of a tensor two operators read (a residual block's
    input): no forward work; in backward, read both and write the sum."""
    a = n * p.activation_bytes
    return LayerCost(input_grad=(Stream(2 * a, a, ADD_FLOPS * n, name=name),))


def copy(p: Precision, n: float, *, name: str = "cat") -> LayerCost:
    """A concatenation: ``n`` elements read and written (its backward is views, no kernel)."""
    a = n * p.activation_bytes
    return LayerCost(forward=(Stream(a, a, name=name),))


def max_pool(
    p: Precision, n_in: float, n_out: float, *, save_output: bool = True, name: str = "maxpool"
) -> LayerCost:
    """3x3 max-pool with int64 argmax indices (PyTorch ``max_pool2d_with_indices``); backward
    writes the whole input gradient from ``dy`` and the indices. Saves the indices and, with
    ``save_output``, its output (which the next convolutions keep for their weight
    gradients)."""
    a = p.activation_bytes
    return LayerCost(
        forward=(Stream(n_in * a, n_out * (a + INDEX_BYTES), MAXPOOL_FLOPS * n_out, name=name),),
        input_grad=(Stream(n_out * (a + INDEX_BYTES), n_in * a, n_out, name=f"{name}.bwd"),),
        saved=n_out * (INDEX_BYTES + (a if save_output else 0)),
    )


def global_avg_pool(p: Precision, n: float, spatial: int, *, name: str = "avgpool") -> LayerCost:
    """Mean over ``spatial`` pixels of ``n`` elements; backward spreads ``dy / spatial``."""
    a = p.activation_bytes
    return LayerCost(
        forward=(Stream(n * a, n / spatial * a, n, name=name),),
        input_grad=(Stream(n / spatial * a, n * a, n, name=f"{name}.bwd"),),
    )


def cross_entropy(p: Precision, rows: float, classes: int, *, fused: bool) -> LayerCost:
    """Softmax cross-entropy over ``rows x classes`` logits.

    ``fused`` (Apex's ``xentropy``, Megatron's fused cross-entropy): forward reads the logits
    and writes FP32 row statistics; backward reads the logits again (saved) and writes
    ``dlogits``. Unfused (PyTorch ``nn.CrossEntropyLoss``: log-softmax, then NLL): forward
    writes the log-probabilities (saved); backward writes the NLL gradient (zeros and one entry
    a row), then the log-softmax backward reads it and the log-probabilities.
    """
    n = rows * classes
    a = n * p.activation_bytes
    if fused:
        return LayerCost(
            forward=(Stream(a, 2 * rows * FP32, SOFTMAX_FLOPS * n, name="xentropy"),),
            input_grad=(Stream(a, a, SOFTMAX_BWD_FLOPS * n, name="xentropy.bwd"),),
            saved=a,
        )
    return LayerCost(
        forward=(Stream(a, a, SOFTMAX_FLOPS * n, name="log_softmax"),),
        input_grad=(
            Stream(0.0, a, name="nll_loss.bwd"),
            Stream(2 * a, a, SOFTMAX_BWD_FLOPS * n, name="log_softmax.bwd"),
        ),
        saved=a,
    )


def layer_norm(p: Precision, rows: float, width: int, *, name: str = "ln") -> LayerCost:
    """LayerNorm over ``rows`` rows of ``width`` (gamma and beta): forward writes the output
    and FP32 row statistics; backward has PyTorch's two kernels, the input gradient and the
    dgamma/dbeta reduction over rows, each reading ``dy`` and ``x``. Saves its input and the
    statistics."""
    n = rows * width
    a = n * p.activation_bytes
    stats = 2 * rows * FP32
    return LayerCost(
        forward=(Stream(a, a + stats, LAYERNORM_FWD_FLOPS * n, name=name),),
        input_grad=(Stream(2 * a + stats, a, LAYERNORM_BWD_FLOPS * n, name=f"{name}.bwd"),),
        weight_grad=(
            Stream(
                2 * a + stats,
                2 * width * p.param_bytes,
                LAYERNORM_PARAM_FLOPS * n,
                name=f"{name}.bwd_params",
            ),
        ),
        params=2 * width,
        saved=a + stats,
    )


def gelu(p: Precision, n: float, *, name: str = "gelu") -> LayerCost:
    """GELU: backward reads ``dy`` and the input it saves."""
    return elementwise(p, n, name, flops=GELU_FLOPS, bwd_flops=GELU_FLOPS, save=1)


def batched_matmul(
    p: Precision,
    batch: float,
    m: float,
    n: float,
    k: float,
    *,
    save_a: bool = True,
    save_b: bool = True,
    name: str = "bmm",
) -> LayerCost:
    """``batch`` independent products ``C[M,N] = A[M,K] B[K,N]`` of two activations (no
    parameters). Both operands need gradients: ``dA = dC B^T`` and ``dB = A^T dC``.
    ``save_a``, ``save_b``: count the operand as saved here (it is kept for the other's
    gradient; False when another operator already counts it)."""
    saved = (batch * m * k if save_a else 0) + (batch * k * n if save_b else 0)
    return LayerCost(
        forward=(_gemm(p, m, n, k, name, batch=batch),),
        input_grad=(
            _gemm(p, m, k, n, f"{name}.dgrad_a", batch=batch),
            _gemm(p, k, n, m, f"{name}.dgrad_b", batch=batch),
        ),
        saved=saved * p.activation_bytes,
    )


def flash_attention(
    p: Precision, sequences: int, seq: int, head_dim: int, *, causal: bool = True
) -> LayerCost:
    """Fused (FlashAttention) causal self-attention ``softmax(Q K^T / sqrt(d)) V`` over
    ``sequences`` (batch x heads) sequences: one forward kernel, one backward kernel
    (:class:`~acesim.hardware.kernels.Attention`: the causal kernel skips the masked half of
    the score blocks; its backward recomputes the scores). Saves Q, K, V, O and the FP32
    log-sum-exp of every row."""
    fwd = Attention(sequences, seq, seq, head_dim, dtype=p.math, causal=causal, name="flash_attn")
    bwd = replace(fwd, backward=True, name="flash_attn.bwd")
    qkvo = 4 * sequences * seq * head_dim
    return LayerCost(
        forward=(fwd,),
        input_grad=(bwd,),
        saved=qkvo * p.activation_bytes + sequences * seq * FP32,
    )


def lstm(
    p: Precision,
    batch: int,
    steps: int,
    inputs: int,
    hidden: int,
    *,
    directions: int = 1,
    save_input: bool = True,
    name: str = "lstm",
) -> LayerCost:
    """One LSTM layer (PyTorch ``nn.LSTM`` on cuDNN) over ``steps`` time steps.

    Per direction, the kernels cuDNN's standard (non-persistent) algorithm launches:

    * forward: the input projection of all steps, one ``Gemm(batch*steps, 4H, I)``; then, step
      after step, the recurrent ``Gemm(batch, 4H, H)`` and the cell's element-wise kernel
      (reads both pre-activations and ``c_{t-1}``, writes ``h``, ``c`` and the gates it keeps);
    * backward through time, step after step from the last: the cell's backward (reads the
      gradients of ``h`` and ``c``, the kept gates and states; writes the gate gradients and
      ``dc_{t-1}``) and the recurrent input gradient ``Gemm(batch, H, 4H)``; then the weight
      gradients over all steps, ``Gemm(I, 4H, batch*steps)`` and ``Gemm(H, 4H, batch*steps)``,
      and the bias gradient; the input gradient ``Gemm(batch*steps, I, 4H)``.

    The recurrence is sequential: ``steps`` separate GEMM kernels (one GEMM with
    ``batch=steps`` would run the steps concurrently), each re-reading the recurrent weights
    from HBM (assumption: no persistent-RNN kernel; 16 MiB at H = 1024 in FP32 does not stay on
    chip). A bidirectional layer runs its directions one after another on the one compute
    stream (cuDNN runs them on two streams concurrently; assumption). Parameters ``4H(I + H) +
    8H`` per direction (PyTorch's two bias vectors). Saves, per direction, the kept gates and
    cell states (``5H`` a token), the output ``h`` (``H`` a token) and, with ``save_input``,
    the input.
    """
    g = 4 * hidden
    rows = batch * steps
    a = p.activation_bytes
    step_cell = Stream(
        (2 * batch * g + batch * hidden) * a,
        (2 * batch * hidden + batch * g) * a,
        LSTM_CELL_FLOPS * batch * hidden,
        name=f"{name}.cell",
    )
    step_cell_bwd = Stream(
        (4 * batch * hidden + batch * g) * a,
        (batch * g + batch * hidden) * a,
        LSTM_CELL_BWD_FLOPS * batch * hidden,
        name=f"{name}.cell_bwd",
    )
    step_gemm = _gemm(p, batch, g, hidden, f"{name}.h_proj")
    step_dgrad = _gemm(p, batch, hidden, g, f"{name}.h_dgrad")
    casts = weight_casts(p, g * inputs, f"{name}.w_ih") + weight_casts(
        p, g * hidden, f"{name}.w_hh"
    )
    one = LayerCost(
        forward=casts.forward
        + (_gemm(p, rows, g, inputs, f"{name}.x_proj"),)
        + (step_gemm, step_cell) * steps,
        input_grad=(_gemm(p, rows, inputs, g, f"{name}.x_dgrad"),),
        weight_grad=(step_cell_bwd, step_dgrad) * steps
        + (
            _gemm(p, inputs, g, rows, f"{name}.w_ih_wgrad"),
            _gemm(p, hidden, g, rows, f"{name}.w_hh_wgrad"),
            Stream(rows * g * a, 2 * g * p.param_bytes, rows * g, name=f"{name}.bias_grad"),
        )
        + casts.weight_grad,
        params=g * (inputs + hidden) + 2 * g,
        saved=(5 * hidden + hidden) * rows * a
        + (rows * inputs * a if save_input else 0.0)
        + casts.saved,
    )
    out = one
    for _ in range(directions - 1):
        out = LayerCost(
            forward=out.forward + one.forward,
            input_grad=out.input_grad + one.input_grad,
            weight_grad=out.weight_grad + one.weight_grad,
            params=out.params + one.params,
            saved=out.saved + one.saved - (rows * inputs * a if save_input else 0.0),
        )
    return out


def embedding(
    p: Precision,
    lookups: float,
    dim: int,
    rows: int,
    *,
    dense_grad: bool,
    name: str = "embedding",
) -> LayerCost:
    """Gather of ``lookups`` rows of width ``dim`` from tables of ``rows`` rows in all (one
    kernel for all tables, as FBGEMM's table-batched embedding does).

    The rows are read and written in the tables' dtype (``param_bytes``: embeddings are not
    autocast; under AMP the consumer's cast of the FP32 rows to FP16 is not modelled). The
    weight-gradient pass either builds a dense gradient of the whole table (``dense_grad``:
    zero-fill, then read-add-write per lookup; PyTorch's default ``nn.Embedding``, whose
    gradient data-parallel training all-reduces in full) or applies a sparse SGD update in
    place (read the row gradient and the row, write the row; the
    model-parallel DLRM tables), whose gradient is ``lookups x dim`` values (``sparse_grad``).
    Nothing is saved (the indices only).
    """
    n = lookups * dim
    b = p.param_bytes
    gather = Stream(n * b, n * b, name=name)
    if dense_grad:
        weight_grad: Kernels = (
            Stream(0.0, rows * dim * b, name=f"{name}.zero_grad"),
            Stream(2 * n * b, n * b, n, name=f"{name}.scatter_grad"),
        )
        return LayerCost(forward=(gather,), weight_grad=weight_grad, params=rows * dim)
    update = Stream(2 * n * b, n * b, 2.0 * n, name=f"{name}.sparse_sgd")
    return LayerCost(forward=(gather,), weight_grad=(update,), params=rows * dim, sparse_grad=n * b)


def to_layer(
    name: str,
    cost: LayerCost,
    p: Precision,
    optimizer: str,
    *,
    allreduce: bool = True,
    update: bool = True,
    forward_comm: Comm | None = None,
    input_grad_comm: Comm | None = None,
) -> Layer:
    """A :class:`Layer` of the cost's kernels. A data-parallel layer with parameters gets a
    weight-gradient all-reduce of ``params * param_bytes`` bytes (``allreduce``) and, with
    ``update``, the optimizer step of its parameters (:func:`.optimizer.update_kernel`)."""
    wg_comm = Comm("all-reduce", cost.params * p.param_bytes) if allreduce and cost.params else None
    step = (
        Compute(kernels=(update_kernel(optimizer, p, cost.params),))
        if update and cost.params
        else Compute()
    )
    return Layer(
        name=name,
        forward=Pass(Compute(kernels=cost.forward), _comms(forward_comm)),
        input_grad=Pass(Compute(kernels=cost.input_grad), _comms(input_grad_comm)),
        weight_grad=Pass(Compute(kernels=cost.weight_grad), _comms(wg_comm)),
        params=cost.params,
        update=step,
        activation_bytes=cost.saved,
        gradient_bytes=cost.sparse_grad,
    )


def _comms(comm: Comm | None) -> tuple[Comm, ...]:
    return () if comm is None else (comm,)
