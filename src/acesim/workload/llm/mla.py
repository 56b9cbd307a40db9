"""Multi-head latent attention (DeepSeek-V2/V3's MLA) as one chunk's steps on one rank.

Per micro-batch of ``T`` rows on a rank of a TP group of ``t`` (Megatron-core's
``MLASelfAttention``): the norm; (sequence parallelism: the all-gather of its output); the
query down projection ``Gemm(T, q_lora, h)`` and the key/value down projection
``Gemm(T, kv_lora + rope, h)``, each held whole by every TP rank (Megatron builds them
duplicated), their norms over the latents; the up projections split over TP by heads,
``Gemm(T, heads/t (head_dim + rope), q_lora)`` and ``Gemm(T, heads/t (head_dim + v), kv_lora)``;
the rotary embedding of the rotary channels; FlashAttention over ``b heads/t`` sequences with
query/key width ``head_dim + rope`` and value width ``v`` (one :class:`~acesim.hardware.
kernels.Attention` of their mean width: the same FLOPs); the output projection
``Gemm(T, h, heads/t v)``, row parallel, its partial sums all-reduced over TP (sp:
reduce-scattered); the residual. Backward runs each GEMM's data and weight gradient (the
weight gradients marked as such) in reverse, the attention backward, and the TP collectives
of a dense attention sublayer.

Assumptions (each under a percent or two of a layer): the all-reduce over TP of the latents'
input gradients (they are far narrower than the hidden state) and of the duplicated down
projections' weight gradients is not counted; FP8 casts of MLA's operands are not counted;
TP communication overlap and context parallelism leave MLA's collectives blocking and its
attention unsplit (a ConfigError refuses MLA with ``cp > 1``).

Recomputation by module (:mod:`.recompute`): ``layernorm``: the input norm (a module of its
own in Megatron's MLA layer spec, not fused into a GEMM) reruns at the start of the
sublayer's backward, its statistics and output not kept; ``mla_up_proj``: the latent norms,
the up projections and the RoPE rerun before the attention backward, and Q, K, V and the
latent norms' outputs and statistics are not kept (the latents before their norms are);
``core_attn``: as Megatron-core's ``MultiLatentAttention`` (``checkpoint_core_attention``,
inherited from ``Attention``: ``_checkpointed_attention_forward`` wraps the core attention
only, after the RoPE), the FlashAttention forward reruns before its backward from Q, K and V
(kept as the checkpoint's inputs); its log-sum-exp is not kept; its output O still is (it is
the output projection's saved input).

Saved bytes under an FP8 recipe (as :mod:`.block`, Transformer Engine with Megatron-core):
the down projections are two Transformer Engine ``Linear`` modules on the same norm output,
each keeping its own FP8 copy (1 byte an element each); the up projections are
``LayerNormLinear`` modules that fuse the latent norms and keep the norms' outputs in FP8;
the output projection keeps the attention's BF16 output (``save_original_input``); Q, K, V
and O stay BF16 (dot-product attention in BF16).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...hardware.kernels import Attention, Gemm, Kernel, Stream
from ..zoo.costs import FP32, LAYERNORM_BWD_FLOPS, LAYERNORM_FWD_FLOPS
from .chunk import Pass, Weight

if TYPE_CHECKING:
    from .block import _Builder

__all__ = ["mla_attention"]

ROPE_FLOPS = 3.0
"""Rotary embedding per element (as :data:`acesim.workload.llm.block.ROPE_FLOPS`)."""


def _latent_norm(b: _Builder, width: int, name: str) -> tuple[Stream, Stream, float]:
    """RMSNorm over a ``[T, width]`` latent: forward, backward, bytes kept (its output, the
    up projection's input, in FP8 under an FP8 recipe: module docstring; its statistics)."""
    n = b.T * width
    a = n * b.a
    stats = b.T * FP32
    fwd = Stream(a, a + stats, LAYERNORM_FWD_FLOPS * n, name=name)
    bwd = Stream(3 * a + stats, a, LAYERNORM_BWD_FLOPS * n, name=f"{name}.bwd")
    return fwd, bwd, n * b.kept_input + stats


def mla_attention(b: _Builder, i: int) -> tuple[Pass, Pass, float]:
    """Layer ``i``'s MLA sublayer: forward, backward, saved bytes (module docstring)."""
    m, t, a, T = b.m, b.tp, b.a, b.T
    h, heads = m.hidden, m.heads / t
    qk, v = m.dim + m.rope_dim, m.v_dim
    fwd, bwd = Pass(), Pass()
    nf, nb, nsaved = b.norm(f"l{i}.attn_norm")
    q_in = m.q_lora_rank or h
    kv_norm = _latent_norm(b, m.kv_lora_rank, f"l{i}.kv_norm")
    q_norm = _latent_norm(b, m.q_lora_rank, f"l{i}.q_norm") if m.q_lora_rank else None
    # (name, output width, input width, the latent norm after it): forward order
    projections = [
        *([("q_down", m.q_lora_rank, h, q_norm)] if m.q_lora_rank else []),
        ("q_up", heads * qk, q_in, None),
        ("kv_down", m.kv_lora_rank + m.rope_dim, h, kv_norm),
        ("kv_up", heads * (m.dim + v), m.kv_lora_rank, None),
    ]
    seqs = b.micro_batch * heads
    mean = (qk + v) / 2
    core = Attention(seqs, b.q_len, b.seq, mean, dtype=b.attn_dtype, name=f"l{i}.flash_attn")
    core_b = replace(core, backward=True, name=f"{core.name}.bwd")
    rope_n = T * (heads + 1) * m.rope_dim
    rope = Stream(rope_n * a, rope_n * a, ROPE_FLOPS * rope_n, name=f"l{i}.rope")
    rope_b = Stream(rope_n * a, rope_n * a, ROPE_FLOPS * rope_n, name=f"l{i}.rope.bwd")
    fwd.compute(nf)
    fwd.comm(b.before_column_parallel())
    up: list[Stream | Gemm] = []  # mla_up_proj's rerun: latent norms, up projections, RoPE
    for name, n, k, norm in projections:
        gemm = b.gemm(T, n, k, f"l{i}.{name}")
        fwd.compute(gemm)
        if norm is not None:
            fwd.compute(norm[0])
            up.append(norm[0])
        elif name.endswith("_up"):
            up.append(gemm)
    o_proj = f"l{i}.o_proj"
    fwd.compute(rope, core, b.gemm(T, h, heads * v, o_proj))
    fwd.comm(b.after_row_parallel())
    fwd.compute(b.add(f"l{i}.attn_residual"))
    if "layernorm" in b.rc:  # the input norm's output discarded, rerun first
        bwd.compute(nf)
    if b.sp:
        bwd.comm(b._tp("all-gather"))  # dY of the reduce-scatter
        bwd.comm(b._tp("all-gather"))  # the norm output, for the down projections' wgrads
    bwd.compute(b.gemm(T, heads * v, h, f"{o_proj}.dgrad"))
    # before the attention's backward: mla_up_proj's rerun; core_attn's checkpointed core
    # attention, rerun from Q, K, V (after the RoPE)
    again: tuple[Kernel, ...] = (*up, rope) if "mla_up_proj" in b.rc else ()
    if "core_attn" in b.rc:
        again = (*again, core)
    bwd.compute(Weight(b.gemm(heads * v, h, T, f"{o_proj}.wgrad")), *again, core_b, rope_b)
    for name, n, k, norm in reversed(projections):
        if norm is not None:
            bwd.compute(norm[1])
        bwd.compute(
            b.gemm(T, k, n, f"l{i}.{name}.dgrad"), Weight(b.gemm(k, n, T, f"l{i}.{name}.wgrad"))
        )
    bwd.comm(b._tp("reduce-scatter" if b.sp else "all-reduce"))
    bwd.compute(nb)
    # kept: the norm's input and statistics, the down projections' (sharded) input, the
    # latents (the latent norms' inputs), the latent norms' outputs and statistics, Q, K, V,
    # O and the log-sum-exp (not with core_attn: module docstring)
    latents = sum(n for _, n, _, norm in projections if norm is not None)
    qkvo = T * heads * (2 * qk + 2 * v) * a
    kept = sum(norm[2] for *_, norm in projections if norm is not None)
    lse = 0.0 if "core_attn" in b.rc else seqs * b.q_len * FP32
    # under FP8 the two down projections (Transformer Engine Linear modules) each keep their
    # own FP8 copy of the norm's output
    down_in = b.rows * h * (2 * b.kept_input if b.fp8 else a)
    if b.rc & {"layernorm", "mla_up_proj"}:
        return fwd, bwd, _saved_recomputed(b, nsaved + down_in, latents, kept, qkvo + lse)
    saved = nsaved + down_in + T * latents * a + kept
    return fwd, bwd, saved + qkvo + lse


def _saved_recomputed(b: _Builder, norm: float, latents: float, kept: float, core: float) -> float:
    """The sublayer's saved bytes with ``layernorm`` (the input norm's statistics and output,
    the down projections' input, not kept) or ``mla_up_proj`` (the latent norms' statistics
    and outputs, Q, K and V not kept: the latents before their norms stay, as the
    recomputation's input); ``norm``: the input norm's saved bytes with the down projections'
    input; ``core``: the attention core's Q, K, V, O and log-sum-exp (no log-sum-exp with
    ``core_attn``)."""
    m, a, T = b.m, b.a, b.T
    heads = m.heads / b.tp
    saved = float(b.rows * m.hidden * a) if "layernorm" in b.rc else norm
    if "mla_up_proj" in b.rc:
        qkv = T * heads * (2 * (m.dim + m.rope_dim) + m.v_dim) * a
        return saved + T * latents * a + core - qkv
    return saved + T * latents * a + kept + core
