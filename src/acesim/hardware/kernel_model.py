"""Kernel times: how long a kernel takes on an NPU, and why.

Model
-----
A kernel (:mod:`acesim.hardware.kernels`) is planned once per NPU into a :class:`KernelPlan`:

* **Compute.** A GEMM is cut into output tiles ``[tm, tn]`` (the NPU's ``npu.kernels.tile``);
  each tile is a thread-block that one compute unit works on for
  ``2 tm tn k / (peak(dtype) * gemm_efficiency(dtype) / units)`` seconds, partial edge tiles costing
  a whole tile. ``blocks`` tiles on ``u`` units take ``ceil(blocks / u)`` waves: the tail wave
  is why a GEMM that fills the units exactly once slows twofold when a collective takes a few
  of them. When there are fewer tiles than units, the K dimension may be split (split-K) into
  ``s`` slices of at least :data:`MIN_SPLIT_K` elements, each slice writing and re-reading an
  FP32 partial result; of the splits, the one with the shortest time alone is chosen (what a
  library's heuristic aims for). One tile shape per NPU: a list of shapes to choose from would
  always pick the smallest, since nothing here charges a small tile its lower operand reuse.
  Fused attention is tiled as FlashAttention tiles it (:func:`attention_blocks`). The forward's
  thread-blocks are query tiles of :data:`ATTENTION_TILE` rows, one per head and tile, each
  iterating over key tiles; the backward's are key tiles of :data:`ATTENTION_BACKWARD_TILE`
  rows iterating over query tiles (the key-parallel backward). An iteration runs its products
  (two forward, five backward, 2 FLOPs each per element of the tile) at
  ``attention_efficiency`` of the matrix peak forward and ``attention_backward_efficiency``
  backward (its five products and the recomputed softmax run further from the peak than the
  forward's two: FlashAttention-3's and cuDNN's published H100 figures). Sequence length
  enters three ways:

  - *causal mask*: a causal block iterates only up to the diagonal, so blocks are uneven (the
    i-th query tile does i + 1 key tiles) and the tiles straddling the diagonal are computed
    whole and masked: ``ceil(outer / inner) - outer / (2 inner)`` iterations per block more
    than the useful half (half a tile forward, 128 x 128; one 64-row tile backward). The
    kernel's counted FLOPs are the useful half, so a causal kernel of ``n`` tiles per head
    runs at ``n / (n + 1)`` of its efficiency forward: 94% at 2k tokens, 99% at 16k;
  - *per-block overhead*: each block costs ``attention_block_overhead`` (backward:
    ``attention_backward_block_overhead``) iterations beside its own: prologue (Q, or K and
    V, tile load and pipeline fill), epilogue (pipeline drain, normalise and write the
    output and log-sum-exp; backward: dK and dV), and in the backward its share of the
    preprocessing (dO . O) and dQ conversion kernels, which scale with the rows as blocks do.
    A block of few iterations (a short sequence) runs below the steady rate;
  - *waves*: ``blocks`` on ``units`` take ``ceil(blocks / units)`` waves of the mean block.

  Partial tiles count whole, as a GEMM's do.
  Memory-bound kernels spread evenly over any number of units (grid-stride loops: no waves);
  their FLOPs run on the FP32 vector units. Without a tile (the ideal default) every kernel
  spreads evenly.
* **Memory.** HBM sustains ``hbm_efficiency`` of its datasheet bandwidth for reads; a written
  byte costs ``1 + write_penalty`` read bytes of that capacity (read/write bus turnaround).
  ``hbm_demand`` is the capacity a kernel consumes; ``read_bytes + write_bytes`` what it moves.
  On ``u`` units a kernel draws at most ``u * unit_hbm_bandwidth`` (memory-level parallelism:
  what that many units can keep in flight).
* **Latency.** Every kernel but a measured (:class:`~acesim.hardware.kernels.Fixed`) one costs
  ``latency`` before it moves data or computes: launch, pipeline fill and drain.

Alone on the whole NPU a kernel takes ``latency + max(compute, memory)``; its :attr:`bound`
says which term it is (``latency`` when the latency is more than either).

Assumptions (named here, values per NPU in the presets' sources): one tile per unit at a time;
perfect operand reuse inside a kernel (each operand crosses HBM once), none between kernels.
Fused attention: FlashAttention-3's causal Hopper tiles for every NPU and head width (cuDNN,
whose rows the H100/H200/GB200 efficiencies are fitted on, publishes no tile sizes; the A100
rows are FlashAttention-2, whose forward iterates 64-key tiles); uneven causal blocks are
scheduled as waves of their mean (a persistent or longest-first scheduler evens the tail out,
a first-come one does worse); the diagonal is one crossing per block whatever the query and
key lengths (a context-parallel rank's load-balanced chunks too); the per-block overhead is
in iterations of the block's main loop (pipeline fill and drain scale with an iteration's
time), not in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..config.system import NPUConfig
from ..errors import SimulationError
from .kernels import Attention, Choice, Fixed, Gemm, Kernel, Roofline, Stream

__all__ = [
    "ATTENTION_BACKWARD_TILE",
    "ATTENTION_TILE",
    "MIN_SPLIT_K",
    "VECTOR",
    "KernelPlan",
    "attention_blocks",
    "expand",
    "math_of",
    "plan_kernel",
]

#: The math of FLOPs on the FP32 vector (non-matrix) units (a :attr:`KernelPlan.math`).
VECTOR = "vector"

MIN_SPLIT_K = 256
"""Smallest K slice (elements) of a split-K GEMM: a few main-loop iterations of 64-deep tiles
(assumption; cuBLAS and CUTLASS split-K kernels use slices of this order)."""

ATTENTION_TILE = (128, 128)
"""Fused attention forward, head dim 128, BF16/FP16: (query rows per thread-block, key columns
per iteration of its main loop), FlashAttention-3's causal Hopper tile (Dao-AILab/flash-attention,
``hopper/tile_size.h``, ``tile_size_fwd_sm90``: kBlockM 128, kBlockN 128 with a causal mask)."""

ATTENTION_BACKWARD_TILE = (128, 64)
"""Fused attention backward, head dim 128: (key rows per thread-block, query rows per
iteration), FlashAttention-3's causal Hopper tile (``hopper/flash_bwd_launch_template.h``,
``run_mha_bwd_hdim128``: kBlockN 128, kBlockM 64 with a causal mask; FlashAttention-2's
A100 backward uses the same 128 x 64)."""

PARTIAL_BYTES = 4
"""Bytes per element of a split-K partial result (FP32 accumulators)."""


@dataclass(frozen=True)
class KernelPlan:
    """A kernel as the NPU runs it.

    Attributes:
        kind: ``gemm``, ``attention``, ``stream``, ``roofline`` or ``fixed``.
        name: the kernel's name.
        flops: FLOPs (FLOP).
        read_bytes, write_bytes: HBM bytes moved (B).
        hbm_demand: HBM capacity consumed (B): reads plus writes with their penalty.
        blocks: thread-blocks at launch, or None when the work spreads evenly over any units.
        block_seconds: compute time of one block on one unit (s); with ``blocks`` None, the
            compute time of all the work on one unit.
        latency: fixed time before the kernel computes (s).
        units: compute units of the NPU.
        hbm_rate: sustained HBM capacity of the NPU (B/s).
        unit_hbm_bandwidth: most HBM B/s one unit draws (inf: no limit).
        detail: how it was tiled, for people.
        math: what its FLOPs run on: a matrix dtype (``bf16``), :data:`VECTOR`, or ``""``
            (no FLOPs); the energy model charges each its own energy per FLOP.
    """

    kind: str
    name: str
    flops: float
    read_bytes: float
    write_bytes: float
    hbm_demand: float
    blocks: int | None
    block_seconds: float
    latency: float
    units: int
    hbm_rate: float
    unit_hbm_bandwidth: float
    detail: str = ""
    math: str = ""

    @property
    def hbm_bytes(self) -> float:
        return self.read_bytes + self.write_bytes

    def waves(self, units: int) -> int:
        """Waves of blocks on ``units`` units (1 when the work spreads evenly)."""
        if self.blocks is None or units <= 0:
            return 1
        return math.ceil(self.blocks / units)

    def compute_time(self, units: int) -> float:
        """Compute time on ``units`` units (s); inf with none."""
        if self.block_seconds <= 0:
            return 0.0
        if units <= 0:
            return math.inf
        if self.blocks is None:
            return self.block_seconds / units
        return self.waves(units) * self.block_seconds

    def memory_time(self, units: int) -> float:
        """Memory time alone on ``units`` units (s): HBM capacity, and what the units draw."""
        if self.hbm_demand <= 0:
            return 0.0
        t = self.hbm_demand / self.hbm_rate
        if math.isfinite(self.unit_hbm_bandwidth):
            if units <= 0:
                return math.inf
            t = max(t, self.hbm_bytes / (units * self.unit_hbm_bandwidth))
        return t

    def rate_cap(self, units: int) -> float:
        """Most kernels per second on ``units`` units (its compute and its units' memory
        parallelism; HBM capacity is the engine's to share)."""
        t = self.compute_time(units)
        if math.isfinite(self.unit_hbm_bandwidth) and self.hbm_bytes > 0:
            if units <= 0:
                return 0.0
            t = max(t, self.hbm_bytes / (units * self.unit_hbm_bandwidth))
        if t == math.inf:
            return 0.0
        return 1.0 / t if t > 0 else math.inf

    @property
    def time_alone(self) -> float:
        """Time on the whole NPU with nothing else running (s)."""
        return self.latency + max(self.compute_time(self.units), self.memory_time(self.units))

    @property
    def bound(self) -> str:
        """``compute``, ``memory`` or ``latency``: what the time alone is mostly spent on."""
        compute = self.compute_time(self.units)
        memory = self.memory_time(self.units)
        if self.latency > max(compute, memory):
            return "latency"
        return "compute" if compute >= memory else "memory"

    @property
    def achieved_flops(self) -> float:
        """FLOP/s alone (FLOPs over the time alone)."""
        t = self.time_alone
        return self.flops / t if t > 0 else 0.0


def expand(npu: NPUConfig, kernels: Iterable[Kernel]) -> list[Kernel]:
    """``kernels`` with every :class:`~acesim.hardware.kernels.Choice` replaced by its option
    that is fastest alone on ``npu`` (the first of equals), as an autotuner picks."""
    out: list[Kernel] = []
    for kernel in kernels:
        if isinstance(kernel, Choice):
            best = min(
                kernel.options,
                key=lambda option: sum(plan_kernel(npu, k).time_alone for k in option),
            )
            out.extend(best)
        else:
            out.append(kernel)
    return out


def math_of(npu: NPUConfig, kernel: Kernel) -> str:
    """What ``kernel``'s FLOPs run on (:attr:`KernelPlan.math`): its matrix dtype (a
    :class:`~acesim.hardware.kernels.Roofline` without one: the NPU's fastest, as planned),
    :data:`VECTOR` for a memory-bound kernel's FP32 math, ``""`` for a measured kernel."""
    if isinstance(kernel, (Gemm, Attention)):
        return kernel.dtype
    if isinstance(kernel, Stream):
        return VECTOR
    if isinstance(kernel, Roofline):
        return kernel.dtype or max(npu.matrix_flops, key=npu.matrix_flops.__getitem__)
    return ""


def plan_kernel(npu: NPUConfig, kernel: Kernel) -> KernelPlan:
    """Plan ``kernel`` on ``npu`` (see the module docstring); ConfigError when the NPU has no
    peak for the kernel's dtype. A :class:`~acesim.hardware.kernels.Choice` is planned as one
    kernel only when its fastest option is one kernel; use :func:`expand` first."""
    if isinstance(kernel, Choice):
        chosen = expand(npu, [kernel])
        if len(chosen) != 1:
            raise SimulationError(f"{kernel.name}: expand a choice of several kernels first")
        return plan_kernel(npu, chosen[0])
    return replace(_plan_kernel(npu, kernel), math=math_of(npu, kernel))


def _plan_kernel(npu: NPUConfig, kernel: Kernel) -> KernelPlan:
    if isinstance(kernel, Gemm):
        return _gemm(npu, kernel)
    if isinstance(kernel, Attention):
        return _attention(npu, kernel)
    if isinstance(kernel, Stream):
        unit_rate = npu.vector_flops / npu.compute_units
        return _plan(
            npu,
            "stream",
            kernel.name,
            kernel.flops,
            kernel.read_bytes,
            kernel.write_bytes,
            None,
            kernel.flops / unit_rate,
        )
    if isinstance(kernel, Roofline):
        dtype = kernel.dtype or max(npu.matrix_flops, key=npu.matrix_flops.__getitem__)
        efficiency = npu.kernels.gemm_efficiency_for(dtype)
        unit_rate = npu.matrix_peak(dtype) * efficiency / npu.compute_units
        blocks = kernel.blocks
        per_block = kernel.flops / blocks if blocks else kernel.flops
        return _plan(
            npu,
            "roofline",
            kernel.name,
            kernel.flops,
            kernel.hbm_bytes,
            0.0,
            blocks,
            per_block / unit_rate,
        )
    if isinstance(kernel, Fixed):
        return _plan(
            npu,
            "fixed",
            kernel.name,
            0.0,
            kernel.hbm_bytes,
            0.0,
            None,
            kernel.duration * npu.compute_units,
            latency=0.0,
        )
    raise SimulationError(f"not a kernel: {kernel!r}")  # pragma: no cover - Kernel is a union


def _plan(
    npu: NPUConfig,
    kind: str,
    name: str,
    flops: float,
    read: float,
    write: float,
    blocks: int | None,
    block_seconds: float,
    *,
    latency: float | None = None,
    detail: str = "",
) -> KernelPlan:
    k = npu.kernels
    unit_bw = k.unit_hbm_bandwidth if k.unit_hbm_bandwidth is not None else math.inf
    return KernelPlan(
        kind=kind,
        name=name,
        flops=flops,
        read_bytes=read,
        write_bytes=write,
        hbm_demand=read + write * (1 + k.write_penalty),
        blocks=blocks,
        block_seconds=block_seconds,
        latency=k.latency if latency is None else latency,
        units=npu.compute_units,
        hbm_rate=npu.hbm_bandwidth * k.hbm_efficiency,
        unit_hbm_bandwidth=unit_bw,
        detail=detail,
    )


def _gemm(npu: NPUConfig, g: Gemm) -> KernelPlan:
    units = npu.compute_units
    unit_rate = npu.matrix_peak(g.dtype) * npu.kernels.gemm_efficiency_for(g.dtype) / units
    read, write = g.read_bytes, g.write_bytes
    if npu.kernels.tile is None:
        return _plan(npu, "gemm", g.name, g.flops, read, write, None, g.flops / unit_rate)
    best: KernelPlan | None = None
    batch = math.ceil(g.batch)
    for tm, tn in [npu.kernels.tile]:
        tiles = math.ceil(g.m / tm) * math.ceil(g.n / tn) * batch
        splits = [1]
        if tiles < units:
            most = min(units // tiles, math.floor(g.k / MIN_SPLIT_K))
            splits += list(range(2, most + 1))
        for s in splits:
            partial = (s * g.m * g.n * batch * PARTIAL_BYTES) if s > 1 else 0.0
            plan = _plan(
                npu,
                "gemm",
                g.name,
                g.flops,
                read + partial,
                write + partial,
                tiles * s,
                2.0 * tm * tn * (g.k / s) / unit_rate,
                detail=f"tile {tm}x{tn}, split-K {s}, {tiles * s} blocks",
            )
            if best is None or plan.time_alone < best.time_alone * (1 - 1e-12):
                best = plan
    assert best is not None
    return best


def _attention(npu: NPUConfig, a: Attention) -> KernelPlan:
    k = npu.kernels
    efficiency = k.attention_efficiency
    overhead = k.attention_block_overhead
    if a.backward:
        if k.attention_backward_efficiency is not None:
            efficiency = k.attention_backward_efficiency
        if k.attention_backward_block_overhead is not None:
            overhead = k.attention_backward_block_overhead
    unit_rate = npu.matrix_peak(a.dtype) * efficiency / npu.compute_units
    if npu.kernels.tile is None:
        whole = a.flops / unit_rate
        return _plan(npu, "attention", a.name, a.flops, a.read_bytes, a.write_bytes, None, whole)
    blocks, iterations, tile_flops = attention_blocks(a)
    block_seconds = (iterations + overhead) * tile_flops / unit_rate
    outer, inner = ATTENTION_BACKWARD_TILE if a.backward else ATTENTION_TILE
    detail = (
        f"{outer} {'key' if a.backward else 'query'} rows per block over "
        f"{inner}-row tiles, {blocks} blocks of {iterations:.4g} iterations"
    )
    return _plan(
        npu,
        "attention",
        a.name,
        a.flops,
        a.read_bytes,
        a.write_bytes,
        blocks,
        block_seconds,
        detail=detail,
    )


def attention_blocks(a: Attention) -> tuple[int, float, float]:
    """(blocks, mean tile iterations per block, FLOPs of one iteration) of fused attention
    ``a`` (see the module docstring): the forward's blocks are :data:`ATTENTION_TILE` query
    tiles iterating over key tiles, the backward's :data:`ATTENTION_BACKWARD_TILE` key tiles
    iterating over query tiles; partial tiles count whole. A causal block iterates up to the
    diagonal only: half the tiles on average, plus the tiles straddling the diagonal, computed
    whole and masked (``ceil(outer / inner) - outer / (2 inner)`` iterations per block more
    than the useful half)."""
    outer, inner = ATTENTION_BACKWARD_TILE if a.backward else ATTENTION_TILE
    own, other = (a.kv_len, a.q_len) if a.backward else (a.q_len, a.kv_len)
    blocks = math.ceil(a.heads) * math.ceil(own / outer)
    full = float(math.ceil(other / inner))
    iterations = full
    if a.causal:
        diagonal = math.ceil(outer / inner) - outer / (2 * inner)
        iterations = min(full, full / 2 + diagonal)
    products = 10.0 if a.backward else 4.0  # 2 FLOPs x (2 products forward, 5 backward)
    return blocks, iterations, products * outer * inner * a.head_dim
