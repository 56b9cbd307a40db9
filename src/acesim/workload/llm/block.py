"""One model chunk's work on one rank for one micro-batch, as Megatron-LM runs it.

A chunk is a run of consecutive transformer layers (plus the embedding on the first chunk of
the first stage and the output head on the last chunk of the last stage). Its forward and its
backward are sequences of :class:`Step`: compute (kernels of
:mod:`acesim.hardware.kernels`, run one after another) or one tensor-parallel collective that
the next compute waits for. Per micro-batch of ``b`` sequences of ``s`` tokens (``T = b s``
rows) on a rank of a TP group of ``t``:

* attention sublayer, forward: norm; QKV projection ``Gemm(T, (q + 2 kv)/t, h)`` (column
  parallel: heads and query groups split over TP); fused causal attention over ``b heads/t``
  sequences (:class:`~acesim.hardware.kernels.Attention`, FlashAttention); output projection
  ``Gemm(T, h, q/t)`` (row parallel); its partial sums all-reduced over TP (with sequence
  parallelism ``sp``: reduce-scattered, and the norm's output all-gathered before the QKV
  GEMM); the residual add.
* MLP sublayer: norm; ``Gemm(T, 2 ffn/t, h)`` (gated: gate and up projections fused, as
  Megatron's ``linear_fc1``; else ``ffn/t``); the activation (SwiGLU or GELU, element-wise);
  ``Gemm(T, h, ffn/t)``; TP all-reduce (sp: reduce-scatter, all-gather before fc1); add.
* MoE sublayer (tokens balanced over experts, as the Megatron-Bridge MoE benchmarks force):
  the router ``Gemm(T, E, h)`` and its top-k; the permutation of ``T k`` token copies; with
  expert parallelism ``ep``, the all-to-all dispatch of the copies over the EP group (``T k h``
  bytes of activations sent per rank, the all-to-all's send buffer); the rank's ``E / ep``
  experts' MLPs as grouped GEMMs (``batch = E / ep``, ``T k ep / E`` rows each, expert widths
  split over TP); the all-to-all combine; the shared experts as one dense MLP; the
  unpermutation. With ``ep > 1`` and more than one local expert, Megatron-core's all-to-all
  dispatcher (``token_dispatcher.py``: ``dispatch_postprocess``, ``combine_preprocess``) also
  sorts the received copies by local expert before the experts and back by source rank after
  them (``sort_chunks_by_idxs``, with permute fusion TE's ``moe_sort_chunks_by_index``: one
  gather reading and writing the copies, the routing probabilities sorted with them); their
  gradients run the same gathers backward. Backward runs the two all-to-alls the other way.
  With ``shared_overlap`` (Megatron's ``--moe-shared-expert-overlap``) the dispatch runs
  beside the shared experts' first GEMM and activation and the combine beside their second
  GEMM (backward: the combine's gradient beside the second GEMM's gradients, the dispatch's
  beside the rest), instead of blocking. ``ep_units``: the all-to-alls' kernels hold that
  many compute units of their own while they run (DeepEP's SM budget: ``Comm.units``), the
  compute beside them running on the rest; None: the endpoint's own collective kernels.
* backward, per sublayer in reverse: (sp: the all-gathers of the output gradient and of the
  saved input for the weight gradients) the data- and weight-gradient GEMMs and the attention
  backward; the column-parallel input gradient all-reduced over TP (sp: reduce-scattered);
  the norm's backward. Backward is one pass (Megatron computes data and weight gradients of a
  micro-batch together); its weight-gradient kernels are marked as such where they are made
  (the weight-gradient GEMMs, the FP8 transposes that only feed them, the embedding's
  scatter-add into its gradient), so a schedule that defers them to a W op runs the rest as
  its B (:mod:`.chunk`).
* TP communication overlap (``tp_overlap``, with sequence parallelism: Megatron's
  ``--tp-comm-overlap``, Transformer Engine's userbuffers): each dense sublayer's all-gathers
  and reduce-scatters run beside the GEMM they feed or drain (:meth:`_Builder._overlapped`),
  sharing the GPU with it as the endpoint charges them; the embedding's, the head's and MoE
  layers' TP collectives stay blocking.
* context parallelism ``cp``: a rank holds ``s / cp`` tokens of each sequence (Megatron's
  load-balanced split: its share of the causal attention work is ``1 / cp``), so every kernel
  above runs on ``T = b s / cp`` rows; the attention kernel takes its ``s / cp`` queries
  against all ``s`` keys, beside an all-gather of K and V over the CP group (the ring
  exchange, which runs under the attention compute); backward gathers K and V again beside
  the attention backward and reduce-scatters their gradients.
* recomputation: ``selective`` reruns the attention forward kernel before its backward from
  the Q, K and V it keeps (Megatron-core's checkpoint wraps the core attention only, after the
  RoPE) and does not keep its log-sum-exp (its output O is the output projection's saved input,
  kept); ``full`` keeps only each layer's input and reruns the layer's
  whole forward (its TP collectives too) before its backward. ``selective`` with
  ``recompute_modules`` (Megatron's ``--recompute-modules``, :mod:`.recompute`): per module,
  the kernels rerun in backward and the saved bytes dropped: ``core_attn`` as ``selective``;
  ``layernorm``: an MoE layer's pre-MLP norm reruns at the start of its backward, its output
  and statistics not kept (the norms of attention and of a dense MLP are fused into the next
  GEMM by Transformer Engine and stay as they are); ``moe_act``: the experts' activation
  reruns before fc2's gradients, its output not kept; ``mlp``: a dense MLP keeps its input
  only and reruns its forward (norm, GEMMs, activation, TP collectives) before its backward;
  ``moe``: an MoE layer keeps its input (the norm's output) and reruns router, permutation,
  all-to-alls, experts and shared experts first; ``shared_experts``: their forward reruns
  before their backward, their GEMMs' inputs kept only as the layer's input
  (``mla_up_proj``: :mod:`.mla`).

Dtypes: GEMMs in the precision's math dtype writing its activation dtype; attention in the
activation dtype when the math is FP8 (Transformer Engine's FP8 recipes keep dot-product
attention in BF16 unless FP8 attention is asked for); norms, activations and residuals move
activations. The output layer is Megatron's own ``ColumnParallelLinear``, outside Transformer
Engine's FP8 autocast: its GEMMs run in the activation dtype under an FP8 recipe.

FP8 (Transformer Engine 2.x current scaling, Megatron-Bridge's ``fp8_cs``; :meth:`_Builder.
cast`): every GEMM operand produced in BF16 (the QKV and fc1 inputs from the norms, the
projection's and fc2's inputs, and backward the four output gradients) is quantized before
its GEMM: an amax reduction over the tensor (``nvte_compute_amax``; for the norms' outputs
computed by the norm kernel, TE's fused norm + amax), the scale from it, and a cast writing
the row-wise FP8 copy and the column-wise (transposed) copy the other backward GEMM reads.
With sequence parallelism the cast runs on the rank's shard, the row-wise copy is all-gathered
in FP8 (one byte an element) and the gathered copy transposed (TE's ``_all_gather_fp8``).
Weight casts run once an iteration (TE caches them across micro-batches) and are not counted;
nor are the amax all-reduces over TP of gathered operands (a few bytes each).

Rotary embeddings: the fused kernel (``apply_rope_fusion``) reads and writes Q and K forward,
their gradients backward. Not counted (each well under a percent of a layer): biases and
their gradients, dropout (Megatron-Bridge's LLM recipes use none), the vocab-parallel
cross-entropy's small all-reduces of per-token statistics.

Saved bytes (activation memory per micro-batch in flight) are the tensors the backward reads:
norm inputs and FP32 statistics, GEMM inputs, attention's Q, K, V, O and log-sum-exp, the
activation's input; with ``sp`` the tensors before the all-gathers are kept sharded.

Saved bytes under an FP8 recipe (Transformer Engine 2.6+ with Megatron-core, current
scaling): a Transformer Engine GEMM module keeps for its weight gradient the FP8 copy of its
input it made, not the BF16 tensor (``Linear``, ``LayerNormLinear``, ``GroupedLinear`` in
``transformer_engine/pytorch/module/``: the quantized input is saved with its row-wise data
dropped, or kept row-wise and sharded when sequence parallelism gathers it again; one byte an
element), and no BF16 copy survives where nothing else holds it. So the QKV and fc1 inputs
(the fused norms' outputs), fc2's input (the activation's output), the routed experts' fc1
input (the token copies) and fc2 input, and the shared experts' fc2 input are kept in FP8.
Kept in BF16: the norms' inputs, the activation's input (fc1's output: Megatron's SwiGLU
keeps its input), the router's input (the router runs outside FP8), the attention core's Q,
K, V and O, and the output projection's input, which is O itself: Megatron-core sets
``save_original_input`` on the output projection for non-delayed FP8 recipes, since the
attention keeps O anyway (``megatron/core/transformer/attention.py``), and on the shared
experts' fc1, whose input the router keeps (``moe/shared_experts.py``).
"""

from __future__ import annotations

import functools
from dataclasses import KW_ONLY, dataclass, field, replace

from ...errors import WorkloadError
from ...hardware.kernels import Attention, Gemm, Kernel, Stream
from ...network.group import Group
from ...precision import Precision
from ..model import Comm
from ..zoo.costs import (
    ADD_FLOPS,
    FP32,
    GELU_FLOPS,
    LAYERNORM_BWD_FLOPS,
    LAYERNORM_FWD_FLOPS,
    LAYERNORM_PARAM_FLOPS,
    SOFTMAX_BWD_FLOPS,
    SOFTMAX_FLOPS,
)
from .chunk import ChunkWork, Pass, Step, Weight, Work
from .mla import mla_attention
from .models import TransformerConfig
from .recompute import modules_of

__all__ = ["Step", "ChunkWork", "chunk_work", "layer_params", "SWIGLU_FLOPS"]

SWIGLU_FLOPS = 6.0
"""SwiGLU ``silu(a) * b`` per output element: negate, exp, add, divide (sigmoid), two
multiplies; its backward taken as the same plus the product rule (8; estimate)."""
SWIGLU_BWD_FLOPS = 8.0

FP8_BYTES = 1
"""Bytes of an FP8 element (E4M3 or E5M2)."""
CAST_FLOPS = 2.0
"""FP8 cast per element: the multiply by the scale and the conversion (estimate)."""
AMAX_FLOPS = 1.0
"""Absolute-maximum reduction per element (estimate)."""
SCALE_BYTES = FP32
"""The amax read and the scale written by Transformer Engine's compute-scale kernel (one FP32
each): a kernel of launch latency only."""
ROPE_FLOPS = 3.0
"""Rotary embedding per element: two multiplies and an add with the cached cos/sin (the
fused kernel Megatron-Bridge enables, ``apply_rope_fusion``)."""


@dataclass(frozen=True)
class _Routed:
    """A MoE layer's routed experts: the kernels before the dispatch (``route``), between it
    and the combine (``experts``), after it (``unpermute``), and backward the same in reverse;
    the bytes of token copies an all-to-all moves; the activations kept."""

    copies: float
    route: tuple[Kernel, ...]
    experts: tuple[Kernel, ...]
    unpermute: Kernel
    unpermute_b: Kernel
    experts_b: tuple[Work, ...]
    route_b: tuple[Work, ...]
    saved: tuple[float, ...]
    #: the all-to-all dispatcher's chunk sorts with EP > 1 and several local experts (forward:
    #: by local expert after the dispatch, back to source rank before the combine; backward:
    #: their gradients in reverse); empty otherwise
    sort: tuple[Kernel, ...] = ()
    unsort: tuple[Kernel, ...] = ()
    unsort_b: tuple[Kernel, ...] = ()
    sort_b: tuple[Kernel, ...] = ()


@dataclass(frozen=True)
class _Shared:
    """A MoE layer's shared experts: forward (fc1, activation, fc2) and backward kernels."""

    fwd: tuple[Kernel, ...]
    bwd: tuple[Work, ...]
    saved: float


def _exchange(part: Pass, a2a: Comm | None, beside: tuple[Work, ...], sync: bool = False) -> None:
    """An expert all-to-all (dispatch or combine) in ``part``: blocking, or, with ``beside``
    kernels, issued with them (they do not wait for it; what follows waits for both);
    ``sync``: the host synchronises with the GPU before issuing it (the forward dispatch)."""
    if a2a is None:
        if beside:
            part.compute(*beside)
        return
    if not beside:
        part.comm(a2a, "ep", sync=sync)
        return
    part.comm(a2a, "ep", overlap="next", sync=sync)
    part.compute(*beside)
    part.seal()


def _copy(part: Pass) -> Pass:
    """A copy of ``part`` (its steps as they are now)."""
    return Pass(list(part.steps), part.kept)


def _rerun(forward: Pass, backward: Pass) -> Pass:
    """``backward`` preceded by the rerun of ``forward`` (recomputation)."""
    out = _copy(forward)
    out.extend(backward)
    return out


def _weights(kernels: tuple[Kernel, ...]) -> tuple[Weight, ...]:
    """Kernels that only feed weight gradients (the FP8 transposes of their operands): weight
    work that keeps nothing of its own (the GEMM they feed counts the operands)."""
    return tuple(Weight(k, keeps=0.0) for k in kernels)


@dataclass
class _Builder:
    """The kernels and passes of a model's layers on one rank: the model, the precision and
    the chunk's layout as :func:`chunk_work` takes them, and what follows from them."""

    m: TransformerConfig
    p: Precision
    _: KW_ONLY
    micro_batch: int
    seq: int
    tp: int
    sp: bool
    recompute: str
    #: the TP communicator (None: ``tp == 1``), likewise the EP and CP ones
    tp_group: Group | None
    recompute_modules: tuple[str, ...] | None = None
    tp_overlap: bool = False
    ep: int = 1
    ep_group: Group | None = None
    cp: int = 1
    cp_group: Group | None = None
    ep_units: int | None = None
    shared_overlap: bool = False
    #: the modules recomputed (selective: by module)
    rc: frozenset[str] = field(init=False)
    #: TP collectives run beside the GEMMs they feed or drain
    ov: bool = field(init=False)
    #: queries (and tokens) a rank holds with context parallelism
    q_len: int = field(init=False)
    #: tokens of a micro-batch on this rank (rows of the GEMMs)
    T: int = field(init=False)
    #: rows of norms and residuals (split over TP with sequence parallelism)
    rows: int = field(init=False)
    #: bytes per activation element
    a: int = field(init=False)
    fp8: bool = field(init=False)
    attn_dtype: str = field(init=False)
    #: bytes per element of a GEMM input a Transformer Engine module keeps for its weight
    #: gradient: its FP8 copy under an FP8 recipe (module docstring), else the activation
    kept_input: int = field(init=False)
    #: with sequence parallelism the inputs of column-parallel GEMMs (and the output
    #: gradients of row-parallel ones) are all-gathered over TP, in FP8 when the math is
    gathered: bool = field(init=False)

    def __post_init__(self) -> None:
        self.rc = modules_of(self.recompute, self.recompute_modules)
        if self.shared_overlap and "shared_experts" in self.rc:
            raise WorkloadError(
                "shared_experts recompute does not combine with the shared experts' overlap",
                field="recompute_modules",
            )
        self.ov = self.tp_overlap and self.tp_group is not None
        self.q_len = self.seq // self.cp
        self.T = self.micro_batch * self.q_len
        self.rows = self.T // self.tp if self.sp else self.T
        self.a = self.p.activation_bytes
        self.fp8 = self.p.math == "fp8"
        self.attn_dtype = self.p.activations if self.fp8 else self.p.math
        self.kept_input = FP8_BYTES if self.fp8 else self.a
        self.gathered = self.sp and self.tp_group is not None

    # -- kernels -----------------------------------------------------------------------------
    def gemm(self, m: float, n: float, k: float, name: str) -> Gemm:
        return Gemm(m, n, k, dtype=self.p.math, out_dtype=self.p.activations, name=name)

    def norm(self, name: str) -> tuple[Stream, Stream, float]:
        n = self.rows * self.m.hidden
        a = n * self.a
        stats = 2 * self.rows * FP32
        fwd = Stream(a, a + stats, LAYERNORM_FWD_FLOPS * n, name=name)
        bwd = Stream(
            3 * a + stats,
            a,
            (LAYERNORM_BWD_FLOPS + LAYERNORM_PARAM_FLOPS) * n,
            name=f"{name}.bwd",
        )
        return fwd, bwd, a + stats

    def add(self, name: str) -> Stream:
        n = self.rows * self.m.hidden
        return Stream(2 * n * self.a, n * self.a, ADD_FLOPS * n, name=name)

    def act(self, width: float, name: str) -> tuple[Stream, Stream, float]:
        """The MLP activation over ``T x width`` outputs (gated: two inputs)."""
        n = self.T * width
        a = self.a
        if self.m.gated:
            return (
                Stream(2 * n * a, n * a, SWIGLU_FLOPS * n, name=name),
                Stream(3 * n * a, 2 * n * a, SWIGLU_BWD_FLOPS * n, name=f"{name}.bwd"),
                2 * n * a,
            )
        return (
            Stream(n * a, n * a, GELU_FLOPS * n, name=name),
            Stream(2 * n * a, n * a, GELU_FLOPS * n, name=f"{name}.bwd"),
            n * a,
        )

    def cast(
        self, width: float, name: str, *, fused_amax: bool = False, gathered: bool = False
    ) -> tuple[tuple[Stream, ...], tuple[Stream, ...]]:
        """Transformer Engine's FP8 current scaling of a GEMM operand ``[T, width]`` held in
        BF16 (an input, or an output gradient): its amax (a reduction over the tensor, unless
        the norm producing it computed it: ``fused_amax``), the scale from it, and the cast to
        the row-wise FP8 copy the GEMM reads and the column-wise (transposed) one the other
        backward GEMM reads (Hopper's FP8 GEMMs take K-major operands only). ``gathered``
        (sequence parallelism): the cast runs on the rank's ``T / tp`` rows, the row-wise FP8
        copy is all-gathered, and the gathered copy is transposed. Returns the kernels before
        the gather (all of them when not gathered) and after it; nothing when the math is not
        FP8."""
        if not self.fp8:
            return (), ()
        a = self.a
        rows = self.T // self.tp if gathered else self.T
        n = rows * width
        before: list[Stream] = []
        if not fused_amax:
            before.append(Stream(n * a, 0.0, AMAX_FLOPS * n, name=f"{name}.amax"))
        before.append(Stream(SCALE_BYTES, SCALE_BYTES, name=f"{name}.scale"))
        if not gathered:
            before.append(
                Stream(n * a, 2 * n * FP8_BYTES, CAST_FLOPS * n, name=f"{name}.cast_transpose")
            )
            return tuple(before), ()
        before.append(Stream(n * a, n * FP8_BYTES, CAST_FLOPS * n, name=f"{name}.cast"))
        full = self.T * width
        after = (Stream(full * FP8_BYTES, full * FP8_BYTES, name=f"{name}.transpose"),)
        return tuple(before), after

    # -- TP collectives ----------------------------------------------------------------------
    def _tp(self, op: str, fp8: bool = False) -> Comm | None:
        """A TP collective of the ``[T, hidden]`` activation; ``fp8``: a Transformer Engine
        layer's all-gather of an FP8 operand (one byte an element when the math is FP8)."""
        if self.tp_group is None:
            return None
        elem = FP8_BYTES if fp8 and self.fp8 else self.a
        return Comm(op, self.T * self.m.hidden * elem, group=self.tp_group)

    def after_row_parallel(self) -> Comm | None:
        """Forward of a row-parallel GEMM's output: all-reduce, or reduce-scatter with sp."""
        return self._tp("reduce-scatter" if self.sp else "all-reduce")

    def before_column_parallel(self, fp8: bool = False) -> Comm | None:
        """Forward into a column-parallel GEMM: the all-gather of sp (nothing without);
        ``fp8``: of an FP8 operand (a Transformer Engine layer)."""
        return self._tp("all-gather", fp8) if self.sp else None

    def _overlapped(
        self,
        fwd: Pass,
        bwd: Pass,
        col: Gemm,
        middle: Pass,
        row: Gemm,
        row_dgrad: Gemm,
        between: Pass,
        col_dgrad: Gemm,
        col_wgrad: Gemm,
        regathered: tuple[Kernel, ...] = (),
    ) -> None:
        """A sublayer's column-parallel GEMM ``col``, ``middle`` kernels and row-parallel GEMM
        ``row`` with TP communication overlap (sequence parallelism; Transformer Engine's
        userbuffers, Megatron's ``--tp-comm-overlap``): forward, the all-gather runs beside
        ``col`` and the reduce-scatter beside ``row``; backward, the output gradient's
        all-gather beside the row-parallel data gradient, the input's re-gather beside the
        column-parallel data gradient and the input gradient's reduce-scatter beside its
        weight gradient. The backward's other kernels are ``between``; ``regathered`` run
        after the input's re-gather, before the weight gradient (its FP8 transpose)."""
        fwd.comm(self._tp("all-gather", fp8=True), overlap="next")
        fwd.alone(col)
        fwd.extend(middle)
        fwd.alone(row)
        fwd.comm(self._tp("reduce-scatter"), overlap="prev")
        bwd.comm(self._tp("all-gather", fp8=True), overlap="next")
        bwd.alone(row_dgrad)
        bwd.extend(between)
        bwd.comm(self._tp("all-gather", fp8=True), overlap="next")
        bwd.alone(col_dgrad)
        if regathered:
            bwd.compute(*_weights(regathered))
        bwd.comm(self._tp("reduce-scatter"), overlap="next")
        bwd.alone(Weight(col_wgrad))

    # -- sublayers ---------------------------------------------------------------------------
    def _linear_pair(self, width_in: float, name: str) -> tuple[Gemm, Gemm, Gemm]:
        h = self.m.hidden
        return (
            self.gemm(self.T, width_in, h, f"{name}.fwd"),
            self.gemm(self.T, h, width_in, f"{name}.dgrad"),
            self.gemm(h, width_in, self.T, f"{name}.wgrad"),
        )

    def attention(self, i: int) -> tuple[Pass, Pass, float]:
        m, t = self.m, self.tp
        fwd, bwd = Pass(), Pass()
        nf, nb, nsaved = self.norm(f"l{i}.attn_norm")
        qkv_w = (m.q_width + 2 * m.kv_width) / t
        qkv = self.gemm(self.T, qkv_w, m.hidden, f"l{i}.qkv")
        qkv_d = self.gemm(self.T, m.hidden, qkv_w, f"l{i}.qkv.dgrad")
        qkv_g = self.gemm(m.hidden, qkv_w, self.T, f"l{i}.qkv.wgrad")
        seqs = self.micro_batch * m.heads / t
        q = self.q_len
        core = Attention(
            seqs, q, self.seq, m.dim, dtype=self.attn_dtype, causal=True, name=f"l{i}.flash_attn"
        )
        core_b = replace(core, backward=True, name=f"{core.name}.bwd")
        proj = self.gemm(self.T, m.hidden, m.q_width / t, f"l{i}.proj")
        proj_d = self.gemm(self.T, m.q_width / t, m.hidden, f"l{i}.proj.dgrad")
        proj_g = self.gemm(m.q_width / t, m.hidden, self.T, f"l{i}.proj.wgrad")
        # FP8 casts (module docstring): the QKV input (amax fused into the norm), the
        # projection's input (the attention output), and backward the projection's output
        # gradient and the QKV output gradient (dQ, dK, dV)
        g = self.gathered
        qkv_in, qkv_in_t = self.cast(m.hidden, f"l{i}.qkv.input", fused_amax=True, gathered=g)
        proj_in, _ = self.cast(m.q_width / t, f"l{i}.proj.input")
        proj_dy, proj_dy_t = self.cast(m.hidden, f"l{i}.proj.dgrad_output", gathered=g)
        qkv_dy, _ = self.cast(qkv_w, f"l{i}.qkv.dgrad_output")
        rope_n = self.T * (m.q_width + m.kv_width) / t
        rope = Stream(rope_n * self.a, rope_n * self.a, ROPE_FLOPS * rope_n, name=f"l{i}.rope")
        rope_b = Stream(
            rope_n * self.a, rope_n * self.a, ROPE_FLOPS * rope_n, name=f"l{i}.rope.bwd"
        )
        fwd.compute(nf, *qkv_in)
        # core_attn: Megatron-core's checkpoint wraps the core attention only, after the RoPE
        # (Attention._checkpointed_attention_forward): it reruns from the kept Q, K, V
        recomputed = (core,) if "core_attn" in self.rc else ()
        middle, between = self._core(
            rope, core, core_b, (*_weights(proj_dy_t), Weight(proj_g), *recomputed)
        )
        middle.compute(*proj_in)
        between.compute(rope_b, *qkv_dy)
        bwd.compute(*proj_dy)
        if self.ov:
            self._overlapped(fwd, bwd, qkv, middle, proj, proj_d, between, qkv_d, qkv_g, qkv_in_t)
        else:
            fwd.comm(self.before_column_parallel(fp8=True))
            fwd.compute(qkv)
            fwd.extend(middle)
            fwd.compute(proj)
            fwd.comm(self.after_row_parallel())
            if self.sp:
                bwd.comm(self._tp("all-gather", fp8=True))  # dY of the reduce-scatter
                bwd.comm(self._tp("all-gather", fp8=True))  # the norm output, for the wgrad
            bwd.compute(proj_d)
            bwd.extend(between)
            bwd.compute(qkv_d, *_weights(qkv_in_t), Weight(qkv_g))
            bwd.comm(self._tp("reduce-scatter" if self.sp else "all-reduce"))
        fwd.compute(self.add(f"l{i}.attn_residual"))
        bwd.compute(nb)
        a = self.a
        qkvo = self.T * (2 * m.q_width + 2 * m.kv_width) / t * a
        lse = seqs * q * FP32
        attn_saved = qkvo + lse
        if "core_attn" in self.rc:  # its statistics; O stays, the projection's saved input
            attn_saved -= lse
        # the norm's input and statistics, the QKV GEMM's input, the core's Q, K, V, O (O is
        # also the projection's input: one tensor) and log-sum-exp
        saved = nsaved + self.rows * m.hidden * self.kept_input + attn_saved
        return fwd, bwd, saved

    def _core(
        self, rope: Kernel, core: Kernel, core_b: Kernel, before_b: tuple[Work, ...]
    ) -> tuple[Pass, Pass]:
        """The attention core: forward (RoPE, the attention) and backward (``before_b``, the
        attention backward); with context parallelism the K and V of the whole sequence
        gathered over the CP group beside the attention kernel (the ring exchange of
        Megatron's CP runs under the attention compute), and in backward gathered again and
        their gradients reduce-scattered."""
        m, t = self.m, self.tp
        middle, between = Pass(), Pass()
        middle.compute(rope)
        if self.cp_group is None:
            middle.compute(core)
            between.compute(*before_b, core_b)
            return middle, between
        size = self.micro_batch * self.seq * 2 * m.kv_width / t * self.a
        kv = Comm("all-gather", size, group=self.cp_group)
        middle.comm(kv, "cp", overlap="next")
        middle.alone(core)
        between.compute(*before_b)
        between.comm(kv, "cp", overlap="next")
        between.alone(core_b)
        between.comm(Comm("reduce-scatter", size, group=self.cp_group), "cp")
        return middle, between

    def mlp(self, i: int, width: float, name: str) -> tuple[Pass, Pass, float]:
        """A dense MLP of inner width ``width`` (already divided over TP)."""
        m = self.m
        fwd, bwd = Pass(), Pass()
        nf, nb, nsaved = self.norm(f"l{i}.{name}_norm")
        inputs = 2 if m.gated else 1
        fc1, fc1_d, fc1_g = self._linear_pair(inputs * width, f"l{i}.{name}.fc1")
        af, ab, asaved = self.act(width, f"l{i}.{name}.act")
        fc2 = self.gemm(self.T, m.hidden, width, f"l{i}.{name}.fc2")
        fc2_d = self.gemm(self.T, width, m.hidden, f"l{i}.{name}.fc2.dgrad")
        fc2_g = self.gemm(width, m.hidden, self.T, f"l{i}.{name}.fc2.wgrad")
        g = self.gathered
        fc1_in, fc1_in_t = self.cast(
            m.hidden, f"l{i}.{name}.fc1.input", fused_amax=True, gathered=g
        )
        fc2_in, _ = self.cast(width, f"l{i}.{name}.fc2.input")
        fc2_dy, fc2_dy_t = self.cast(m.hidden, f"l{i}.{name}.fc2.dgrad_output", gathered=g)
        fc1_dy, _ = self.cast(inputs * width, f"l{i}.{name}.fc1.dgrad_output")
        fwd.compute(nf, *fc1_in)
        bwd.compute(*fc2_dy)
        if self.ov:
            middle, between = Pass(), Pass()
            middle.compute(af, *fc2_in)
            between.compute(*_weights(fc2_dy_t), Weight(fc2_g), ab, *fc1_dy)
            self._overlapped(fwd, bwd, fc1, middle, fc2, fc2_d, between, fc1_d, fc1_g, fc1_in_t)
        else:
            fwd.comm(self.before_column_parallel(fp8=True))
            fwd.compute(fc1, af, *fc2_in, fc2)
            fwd.comm(self.after_row_parallel())
            if self.sp:
                bwd.comm(self._tp("all-gather", fp8=True))
                bwd.comm(self._tp("all-gather", fp8=True))
            bwd.compute(
                *_weights(fc2_dy_t),
                fc2_d,
                Weight(fc2_g),
                ab,
                *fc1_dy,
                fc1_d,
                *_weights(fc1_in_t),
                Weight(fc1_g),
            )
            bwd.comm(self._tp("reduce-scatter" if self.sp else "all-reduce"))
        body = _copy(fwd)  # what "mlp" recomputation reruns: all but the residual add
        fwd.compute(self.add(f"l{i}.{name}_residual"))
        bwd.compute(nb)
        if "mlp" in self.rc:  # normal checkpointing: the sublayer's input only
            return fwd, _rerun(body, bwd), float(self.rows * m.hidden * self.a)
        # the norm's input and statistics, fc1's input, the activation's input, fc2's input
        kept = self.kept_input
        saved = nsaved + self.rows * m.hidden * kept + asaved + self.T * width * kept
        return fwd, bwd, saved

    def moe(self, i: int) -> tuple[Pass, Pass, float]:
        """Router, permutation, grouped expert GEMMs, shared experts, unpermutation; with
        ``shared_overlap`` the dispatch and combine all-to-alls run beside the shared experts'
        two halves (module docstring)."""
        fwd, bwd = Pass(), Pass()
        nf, nb, nsaved = self.norm(f"l{i}.moe_norm")
        r = self._routed(i)
        sh = self._shared(i) if self.m.shared_experts else None
        a2a = (
            Comm("all-to-all", r.copies, group=self.ep_group, units=self.ep_units)
            if self.ep_group
            else None
        )
        beside = sh is not None and self.shared_overlap
        rc = self.rc

        def layer_body(part: Pass) -> None:  # the MoE layer: all but the norm and residual
            part.comm(self.before_column_parallel())
            part.compute(*r.route)
            _exchange(part, a2a, sh.fwd[:2] if beside and sh else (), sync=True)
            part.compute(*r.sort, *r.experts, *r.unsort)
            _exchange(part, a2a, sh.fwd[2:] if beside and sh else ())
            part.compute(r.unpermute, *(sh.fwd if sh and not beside else ()))
            part.comm(self.after_row_parallel())

        fwd.compute(nf)
        layer_body(fwd)
        fwd.compute(self.add(f"l{i}.moe_residual"))
        if "layernorm" in rc:  # output-discarding: the norm reruns first
            bwd.compute(nf)
        if "moe" in rc:  # normal checkpointing: the layer reruns from its input
            layer_body(bwd)
        if self.sp:
            bwd.comm(self._tp("all-gather"))
            bwd.comm(self._tp("all-gather"))
        bwd.compute(r.unpermute_b)
        _exchange(bwd, a2a, sh.bwd[:2] if beside and sh else ())
        act_again = r.experts[1:2] if "moe_act" in rc else ()  # before fc2's gradients
        bwd.compute(*r.unsort_b, *act_again, *r.experts_b, *r.sort_b)
        _exchange(bwd, a2a, sh.bwd[2:] if beside and sh else ())
        shared_b = (*sh.fwd, *sh.bwd) if sh and "shared_experts" in rc else sh.bwd if sh else ()
        bwd.compute(*(shared_b if not beside else ()), *r.route_b)
        bwd.comm(self._tp("reduce-scatter" if self.sp else "all-reduce"))
        bwd.compute(nb)
        if rc & {"layernorm", "moe", "moe_act", "shared_experts"}:
            return fwd, bwd, self._moe_saved(nsaved, r, sh)
        saved = nsaved
        for term in r.saved:
            saved += term
        if sh is not None:
            saved += sh.saved
        return fwd, bwd, saved

    def _moe_saved(self, nsaved: float, r: _Routed, sh: _Shared | None) -> float:
        """An MoE sublayer's saved bytes under recomputation by module (:mod:`.recompute`):
        the norm's input always; its statistics and output (``r.saved[0]``, the layer's
        input) unless ``layernorm``; the routed terms (but the activation's output with
        ``moe_act``) and the shared experts' (unless ``shared_experts``) unless ``moe``."""
        rc = self.rc
        norm_in = float(self.rows * self.m.hidden * self.a)
        saved = norm_in
        if "layernorm" not in rc:
            saved += (nsaved - norm_in) + r.saved[0]
        if "moe" in rc:
            return saved
        routed = r.saved[1:4] if "moe_act" in rc else r.saved[1:]
        saved += sum(routed)
        if sh is not None and "shared_experts" not in rc:
            saved += sh.saved
        return saved

    def _routed(self, i: int) -> _Routed:
        """The routed experts of MoE layer ``i``: router, top-k, permutation, grouped GEMMs."""
        m, t, a = self.m, self.tp, self.a
        E, k, h = m.experts, m.top_k, m.hidden
        router = self.gemm(self.T, E, h, f"l{i}.router")
        router_d = self.gemm(self.T, h, E, f"l{i}.router.dgrad")
        router_g = self.gemm(h, E, self.T, f"l{i}.router.wgrad")
        scores = self.T * E
        topk = Stream(scores * a, scores * FP32, SOFTMAX_FLOPS * scores, name=f"l{i}.topk")
        topk_b = Stream(
            2 * scores * FP32, scores * a, SOFTMAX_BWD_FLOPS * scores, name=f"l{i}.topk.bwd"
        )
        copies = self.T * k * h * a
        permute = Stream(self.T * h * a, copies, name=f"l{i}.permute")
        permute_b = Stream(copies, self.T * h * a, self.T * k * h, name=f"l{i}.permute.bwd")
        local = E // self.ep
        rows = self.T * k / local
        width = m.expert_ffn / t
        inputs = 2 if m.gated else 1

        def grouped(mm: float, n: float, kk: float, name: str) -> Gemm:
            return Gemm(
                mm, n, kk, dtype=self.p.math, out_dtype=self.p.activations, batch=local, name=name
            )

        eact, eact_b, _ = self.act(k * width, f"l{i}.experts.act")
        sort, unsort, unsort_b, sort_b = self._chunk_sorts(i, copies)
        return _Routed(
            copies=copies,
            route=(router, topk, permute),
            experts=(
                grouped(rows, inputs * width, h, f"l{i}.experts.fc1"),
                eact,
                grouped(rows, h, width, f"l{i}.experts.fc2"),
            ),
            unpermute=Stream(copies, self.T * h * a, self.T * k * h, name=f"l{i}.unpermute"),
            unpermute_b=Stream(self.T * h * a, copies, name=f"l{i}.unpermute.bwd"),
            experts_b=(
                grouped(rows, width, h, f"l{i}.experts.fc2.dgrad"),
                Weight(grouped(width, h, rows, f"l{i}.experts.fc2.wgrad")),
                eact_b,
                grouped(rows, h, inputs * width, f"l{i}.experts.fc1.dgrad"),
                Weight(grouped(h, inputs * width, rows, f"l{i}.experts.fc1.wgrad")),
            ),
            route_b=(permute_b, topk_b, router_d, Weight(router_g)),
            saved=(  # the router's input (outside FP8), its scores, fc1's input (the token
                # copies), the activation's input, fc2's input
                self.rows * h * a,
                scores * FP32,
                self.T * k * h * self.kept_input,
                self.T * k * inputs * width * a,
                self.T * k * width * self.kept_input,
            ),
            sort=sort,
            unsort=unsort,
            unsort_b=unsort_b,
            sort_b=sort_b,
        )

    def _chunk_sorts(self, i: int, copies: float) -> tuple[tuple[Kernel, ...], ...]:
        """MoE layer ``i``'s chunk sorts (module docstring): with EP > 1 and more than one
        local expert, Megatron-core's all-to-all dispatcher sorts the received token copies
        by local expert (their routing probabilities with them, FP32) and restores the order
        before the combine, each one fused gather (TE's ``moe_sort_chunks_by_index``) that
        reads and writes the ``copies`` bytes (B); backward, their gradients do the same in
        reverse. Else none: ``(sort, unsort, unsort_b, sort_b)`` are empty."""
        if self.ep_group is None or self.m.experts // self.ep <= 1:
            return (), (), (), ()
        probs = self.T * self.m.top_k * FP32

        def gather(name: str, with_probs: bool) -> tuple[Kernel, ...]:
            moved = copies + (probs if with_probs else 0.0)
            return (Stream(moved, moved, name=f"l{i}.{name}"),)

        return (
            gather("experts.sort", True),
            gather("experts.unsort", False),
            gather("experts.unsort.bwd", False),
            gather("experts.sort.bwd", True),
        )

    def _shared(self, i: int) -> _Shared:
        """The shared experts of MoE layer ``i`` as one dense MLP: forward fc1, activation |
        fc2; backward fc2's gradients | activation, fc1's gradients (the halves that run
        beside the dispatch and the combine with ``shared_overlap``)."""
        m, h = self.m, self.m.hidden
        inputs = 2 if m.gated else 1
        sw = m.shared_experts * (m.expert_ffn / self.tp)
        s1, s1_d, s1_g = self._linear_pair(inputs * sw, f"l{i}.shared.fc1")
        sf, sb, ssaved = self.act(sw, f"l{i}.shared.act")
        s2 = self.gemm(self.T, h, sw, f"l{i}.shared.fc2")
        s2_d = self.gemm(self.T, sw, h, f"l{i}.shared.fc2.dgrad")
        s2_g = self.gemm(sw, h, self.T, f"l{i}.shared.fc2.wgrad")
        return _Shared(
            fwd=(s1, sf, s2),
            bwd=(s2_d, Weight(s2_g), sb, s1_d, Weight(s1_g)),
            saved=ssaved + self.T * sw * self.kept_input,  # the activation's and fc2's inputs
        )

    def layer(self, i: int, full: bool | None = None) -> tuple[Pass, Pass, float]:
        """Layer ``i``'s passes and saved bytes; ``full``: recompute it whole (None: as
        ``recompute`` says)."""
        af, ab, asv = mla_attention(self, i) if self.m.mla else self.attention(i)
        if self.m.is_moe_layer(i):
            mf, mb, msv = self.moe(i)
        else:
            mf, mb, msv = self.mlp(i, self.m.ffn / self.tp, "mlp")
        fwd, bwd = Pass(), Pass()
        fwd.extend(af)
        fwd.extend(mf)
        if full if full is not None else self.recompute == "full":
            bwd.extend(fwd)
            saved = float(self.rows * self.m.hidden * self.a)  # the layer's input only
        else:
            saved = asv + msv
        bwd.extend(mb)
        bwd.extend(ab)
        return fwd, bwd, saved

    def embedding(self) -> tuple[Pass, Pass]:
        """Vocab-parallel lookup: each TP rank gathers the rows of its vocabulary shard, the
        partial embeddings are all-reduced (sp: reduce-scattered); backward scatter-adds the
        output gradient into the (persistent) gradient buffer."""
        h, a = self.m.hidden, self.a
        n = self.T * h
        pb = self.p.param_bytes
        fwd, bwd = Pass(), Pass()
        fwd.compute(Stream(n * pb, n * a, name="embedding"))
        fwd.comm(self.after_row_parallel())
        if self.sp:
            bwd.comm(self._tp("all-gather"))
        # the scatter-add into the gradient buffer is the embedding's weight gradient: it
        # keeps the output gradient
        bwd.compute(Weight(Stream(n * a + n * pb, n * pb, n, name="embedding.bwd"), keeps=n * a))
        return fwd, bwd

    def head(self) -> tuple[Pass, Pass, float]:
        """Final norm, the vocab-parallel output GEMM and the fused cross-entropy."""
        m, a = self.m, self.a
        v = m.vocab / self.tp
        fwd, bwd = Pass(), Pass()
        nf, nb, nsaved = self.norm("final_norm")
        # Megatron's output layer is its own ColumnParallelLinear, outside Transformer
        # Engine's FP8 autocast: its GEMMs run in the activation dtype under an FP8 recipe
        hp = self.p.activations
        out = Gemm(self.T, v, m.hidden, dtype=hp, out_dtype=hp, name="output")
        out_d = Gemm(self.T, m.hidden, v, dtype=hp, out_dtype=hp, name="output.dgrad")
        out_g = Gemm(m.hidden, v, self.T, dtype=hp, out_dtype=hp, name="output.wgrad")
        logits = self.T * v
        xent = Stream(logits * a, 2 * self.T * FP32, SOFTMAX_FLOPS * logits, name="xentropy")
        xent_b = Stream(logits * a, logits * a, SOFTMAX_BWD_FLOPS * logits, name="xentropy.bwd")
        fwd.compute(nf)
        fwd.comm(self.before_column_parallel())
        fwd.compute(out, xent)
        if self.sp:
            bwd.comm(self._tp("all-gather"))  # the norm output again, for the wgrad
        bwd.compute(xent_b, out_d, Weight(out_g))
        bwd.comm(self._tp("reduce-scatter" if self.sp else "all-reduce"))
        bwd.compute(nb)
        saved = nsaved + self.rows * m.hidden * a + logits * a
        return fwd, bwd, saved


#: chunk works kept (a plan builds thousands of candidates whose chunks repeat: the same
#: arguments give the same, immutable, work)
CHUNK_CACHE = 512


@functools.lru_cache(maxsize=CHUNK_CACHE)
def chunk_work(
    model: TransformerConfig,
    precision: Precision,
    layers: range,
    *,
    micro_batch: int,
    seq: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    tp_group: Group | None = None,
    tp_overlap: bool = False,
    embedding: bool = False,
    head: bool = False,
    ep: int = 1,
    ep_group: Group | None = None,
    cp: int = 1,
    cp_group: Group | None = None,
    units: bool = False,
    recompute_layers: int | None = None,
    ep_units: int | None = None,
    shared_overlap: bool = False,
    recompute_modules: tuple[str, ...] | None = None,
    names: bool = True,
) -> ChunkWork:
    """The :class:`ChunkWork` of model ``layers`` (indices) on one rank (module docstring);
    ``embedding`` / ``head``: the chunk also holds the input embedding / the output head;
    ``tp_group`` is the TP communicator (needed when ``tp > 1``); ``units``: keep each
    layer's (and the embedding's and head's) steps apart and say where they start (FSDP);
    ``recompute_layers``: with ``recompute = "full"``, only the chunk's first that many layers
    are recomputed (Megatron's ``--recompute-method block --recompute-num-layers``);
    ``ep_units``: the compute units the expert all-to-alls' kernels hold (None: the endpoint's
    setting); ``shared_overlap``: the dispatch and combine beside the shared experts;
    ``recompute_modules``: with ``recompute = "selective"``, Megatron's modules recomputed
    (:mod:`.recompute`; None: ``core_attn``); ``names`` False: a layer like one before it
    holds that layer's kernels, named for it (the same work and figures, cheaper to make:
    what a bound or a memory check reads, never what a run simulates, whose per-layer rows
    read the names)."""
    _check_groups(tp, tp_group, cp, cp_group, ep, ep_group)
    b = _Builder(
        model,
        precision,
        micro_batch=micro_batch,
        seq=seq,
        tp=tp,
        sp=sp,
        recompute=recompute,
        recompute_modules=recompute_modules,
        tp_group=tp_group if tp > 1 else None,
        tp_overlap=tp_overlap,
        ep=ep,
        ep_group=ep_group if ep > 1 else None,
        cp=cp,
        cp_group=cp_group if cp > 1 else None,
        ep_units=ep_units,
        shared_overlap=shared_overlap,
    )
    a = _Assembly(units)
    if embedding:
        ef, eb = b.embedding()
        a.add(ef, eb, model.embedding_params // tp, model.embedding_params // tp)
    built: dict[tuple[bool, bool], tuple[int, Pass, Pass, float]] = {}
    for i in layers:
        full = recompute == "full" and (
            recompute_layers is None or i - layers.start < recompute_layers
        )
        lf, lb, ls = _layer(b, i, full, built, names)
        dense, routed = layer_params(model, i, tp, ep)
        a.add(lf, lb, dense + routed, dense, ls, routed)
    if head:
        hf, hb, hs = b.head()
        own = (model.head_params - model.norm_params) // tp + model.norm_params
        a.add(hf, hb, own, own, hs)
    return a.work(
        b.rows * model.hidden * precision.activation_bytes, len(layers), embedding, head, ep > 1
    )


def _check_groups(
    tp: int,
    tp_group: Group | None,
    cp: int,
    cp_group: Group | None,
    ep: int,
    ep_group: Group | None,
) -> None:
    """Refuse a parallel size over 1 without the communicator its collectives run on."""
    for size, group, what, runs in (
        (tp, tp_group, "tp", "collectives"),
        (cp, cp_group, "cp", "exchanges"),
        (ep, ep_group, "ep", "all-to-alls"),
    ):
        if size > 1 and group is None:
            raise WorkloadError(
                f"{what} > 1 needs the {what.upper()} group its {runs} run on",
                field=f"{what}_group",
            )


def _layer(
    b: _Builder,
    i: int,
    full: bool,
    built: dict[tuple[bool, bool], tuple[int, Pass, Pass, float]],
    names: bool = True,
) -> tuple[Pass, Pass, float]:
    """Layer ``i``'s passes and saved bytes, as ``b.layer(i, full)`` makes them. A layer's
    work depends on its index only through whether it is an MoE layer and its kernels'
    names (``l{i}.``...): a layer like one ``built`` before (``(moe, full)``: the index built,
    its passes untouched) is that layer's passes with its kernels renamed (``names`` False:
    not renamed), the same values at a fraction of the cost of making and checking every
    kernel again (a plan builds thousands of candidates of tens of layers each)."""
    key = (b.m.is_moe_layer(i), full)
    held = built.get(key)
    if held is None:
        lf, lb, ls = b.layer(i, full)
        built[key] = (i, Pass(list(lf.steps), lf.kept), Pass(list(lb.steps), lb.kept), ls)
        return lf, lb, ls
    first, hf, hb, ls = held
    if not names:
        return Pass(list(hf.steps), hf.kept), Pass(list(hb.steps), hb.kept), ls
    old, new = f"l{first}.", f"l{i}."
    return _renamed_pass(hf, old, new), _renamed_pass(hb, old, new), ls


def _renamed_pass(p: Pass, old: str, new: str) -> Pass:
    """``p`` with every kernel named ``old...`` renamed ``new...`` (a new pass)."""
    steps = [
        replace(st, kernels=tuple(_renamed(k, old, new) for k in st.kernels)) if st.kernels else st
        for st in p.steps
    ]
    return Pass(steps, p.kept)


def _renamed(kernel: Kernel, old: str, new: str) -> Kernel:
    """``kernel`` named ``new`` where its name starts ``old`` (its fields as they are: a
    kernel's checks do not read its name, so they are not run again)."""
    name = kernel.name
    if not name.startswith(old):
        return kernel
    clone = object.__new__(type(kernel))
    clone.__dict__.update(kernel.__dict__)
    clone.__dict__["name"] = new + name[len(old) :]
    return clone


def layer_params(model: TransformerConfig, i: int, tp: int, ep: int) -> tuple[int, int]:
    """Layer ``i``'s parameters on one rank: (dense: split over TP but the norms and MLA's
    duplicated down projections, held whole; routed experts: over TP x EP)."""
    norms = 2 * model.norm_params
    routed = model.experts * model.mlp_params(model.expert_ffn) if model.is_moe_layer(i) else 0
    whole = model.mla_params[0] if model.mla else 0
    dense = (model.layer_params(i) - norms - routed - whole) // tp + norms + whole
    return dense, routed // (tp * ep)


@dataclass
class _Assembly:
    """A chunk's units (the embedding, each layer, the head) in forward order: the forward so
    far, each unit's backward, parameters, saved bytes, and (FSDP, ``units``) where each starts."""

    units: bool
    fwd: Pass = field(default_factory=Pass)
    bwd_parts: list[Pass] = field(default_factory=list)
    saved: float = 0.0
    params: int = 0
    experts: int = 0
    unit_params: list[int] = field(default_factory=list)
    unit_experts: list[int] = field(default_factory=list)
    forward_starts: list[int] = field(default_factory=list)
    unit_saved: list[float] = field(default_factory=list)

    def add(
        self,
        fwd: Pass,
        bwd: Pass,
        own: int,
        dense: int,
        saved: float | None = None,
        routed: int = 0,
    ) -> None:
        """One unit: its passes, the parameters the rank holds of it (``own``: ``dense`` and
        ``routed`` experts'), the activation bytes it keeps."""
        self.forward_starts.append(len(self.fwd.steps))
        self.fwd.extend(fwd)
        self.unit_params.append(own)
        self.unit_experts.append(routed)
        if self.units:
            self.fwd.seal()
        self.bwd_parts.append(bwd)
        if saved is not None:
            self.saved += saved
        self.unit_saved.append(saved or 0.0)
        self.params += dense
        self.experts += routed

    def work(
        self, boundary: float, layers: int, embedding: bool, head: bool, experts: bool
    ) -> ChunkWork:
        """The chunk's :class:`ChunkWork` (``boundary``: bytes sent to the next stage)."""
        bwd, backward_starts = self.backward()
        u = self.units
        return ChunkWork(
            tuple(self.fwd.steps),
            tuple(bwd.steps),
            self.saved,
            self.params + self.experts,
            boundary,
            self.experts,
            tuple(self.unit_params) if u else (),
            tuple(self.forward_starts) if u else (),
            tuple(backward_starts) if u else (),
            weight_saved=bwd.kept,
            layers=layers,
            unit_experts=tuple(self.unit_experts) if u and experts else (),
            embedding=embedding,
            head=head,
            unit_saved=tuple(self.unit_saved),
        )

    def backward(self) -> tuple[Pass, list[int]]:
        """The units' backwards in reverse, and where each starts."""
        bwd = Pass()
        starts: list[int] = []
        for part in reversed(self.bwd_parts):
            starts.append(len(bwd.steps))
            bwd.extend(part)
            if self.units:
                bwd.seal()
        return bwd, starts
