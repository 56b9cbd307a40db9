"""Per-rank HBM footprint of Megatron-style LLM training.

For a rank of pipeline stage ``s`` holding ``P`` parameters (its chunks' layers over TP, the
vocabulary-parallel embedding or head where it holds them), in bytes:

* ``weights``: ``P x param_bytes`` (the recipe's parameter dtype);
* ``gradients``: ``P x grad_bytes``, the main-gradient buffer: FP32 when the recipe keeps FP32
  master weights (Megatron-LM forces gradient accumulation and reduction in FP32 for BF16
  parameters: ``megatron/training/arguments.py``, "bfloat16 requires gradient accumulation
  and all-reduce to be done in fp32"), else the parameter dtype; a configuration may say
  otherwise (``grad_fp32``: Megatron-Bridge's performance recipes reduce in BF16);
* ``optimizer``: the master weights and the optimizer's moments
  (:func:`~acesim.workload.optimizer.state_bytes_per_param`), divided over DP with the
  distributed optimizer (ZeRO-1; the experts' over the expert-data-parallel group);
* with FSDP (ZeRO-3) weights and gradients are divided over DP too, plus the largest unit's
  gathered parameters twice (the unit running and the one prefetched) and its unsharded
  gradient before the reduce-scatter; with FSDP's CPU offload of parameters
  (``offload=weights``) the shards and the optimizer state leave the GPU
  (:func:`_fsdp_offloaded` says what stays);
* ``activations``: the most bytes the rank's schedule ever keeps at once: walking its ops in
  order (:mod:`acesim.training.schedules`), an F of chunk ``c`` adds that chunk's saved bytes
  per micro-batch; a B with no W after it frees them; where the schedule defers weight
  gradients (a W op of the same chunk and micro-batch follows), the B frees them but keeps the
  weight gradients' operands (``weight_saved``), which the W frees (:mod:`.chunk`) (1F1B:
  stage ``s`` of ``p`` holds ``p - s`` micro-batches; interleaving more). With activation
  offload (:mod:`acesim.training.offload`) an offloaded micro-batch keeps ``1 - f`` of its
  saved bytes on the GPU between its copy out and its reload. With layer-granular activation
  offload (``offload_layers``) the walk follows each pass unit by unit
  (:func:`layer_offload_profile`).

Not counted, as in :mod:`acesim.workload.footprint`: workspaces, communication buffers, the
framework's and NCCL's own memory, allocator fragmentation (together often several GB on a
GPU: a configuration within a few GB of the capacity may still not fit in practice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ...precision import Precision
from ..optimizer import state_bytes_per_param
from .chunk import ChunkWork

__all__ = [
    "TERMS", "grad_bytes", "rank_footprint", "peak_activations", "offloaded", "op_groups",
    "layer_offload_profile", "offloaded_units",
]  # fmt: skip

#: The footprint's terms, in the order messages name them.
TERMS = ("weights", "gradients", "optimizer", "activations")


def grad_bytes(p: Precision, fp32: bool | None = None) -> int:
    """Bytes per element of the main-gradient buffer: FP32 when ``fp32`` (None: Megatron-LM's
    rule of the module docstring), else the parameter dtype."""
    if fp32 is None:
        fp32 = p.master is not None
    return 4 if fp32 else p.param_bytes


class _Op(Protocol):
    """A schedule's op as the memory walk reads it (:class:`acesim.training.schedules.Op`)."""

    @property
    def kind(self) -> str: ...

    @property
    def chunk(self) -> int: ...

    @property
    def micro(self) -> int: ...

    @property
    def paired(self) -> bool: ...


def op_groups(ops: Sequence[_Op]) -> list[list[_Op]]:
    """The ops as they run: one by one, a paired op together with the op after it."""
    groups: list[list[_Op]] = [[]]
    for op in ops:
        groups[-1].append(op)
        if not op.paired:
            groups.append([])
    return groups[:-1] if not groups[-1] else groups


def offloaded(groups: Sequence[Sequence[_Op]]) -> set[tuple[int, int]]:
    """The (chunk, micro-batch) pairs whose activations offload sends to host memory
    (:mod:`acesim.training.offload`): those with at least two groups between their F and
    their B (the copy out overlaps the first, the reload the last: with fewer the
    activations would never leave the GPU)."""
    forward_at: dict[tuple[int, int], int] = {}
    out: set[tuple[int, int]] = set()
    for k, group in enumerate(groups):
        for op in group:
            key = (op.chunk, op.micro)
            if op.kind == "F":
                forward_at[key] = k
            elif op.kind == "B" and k > forward_at[key] + 2:
                out.add(key)
    return out


def offloaded_units(work: ChunkWork, layers: int) -> range:
    """The units (:attr:`ChunkWork.unit_saved`'s indices) of the first ``layers`` transformer
    layers of a chunk: those layer-granular offload sends to host memory (Transformer
    Engine's CPU offload context offloads the first ``N`` layers of a pass)."""
    first = int(work.embedding)
    return range(first, first + min(layers, work.layers))


def layer_offload_profile(work: ChunkWork, layers: int) -> tuple[float, float, float]:
    """A chunk's activation bytes with its first ``layers`` layers offloaded within each pass
    (:mod:`acesim.training.offload`): (the most held during its forward, held after it, the
    most held during its backward above what its start held).

    Forward: unit ``u``'s saved bytes are allocated as it runs; the end of unit ``u`` waits
    for the copy out of offloaded unit ``u - 1``, whose bytes are then freed (one layer's
    copy overlaps the next layer). Backward (units reversed): the start of unit ``u``
    reloads offloaded unit ``u - 1`` (prefetch one layer ahead); the end of unit ``u`` frees
    its bytes."""
    sizes = work.unit_saved
    out = set(offloaded_units(work, layers))
    held = forward_peak = 0.0
    for u, size in enumerate(sizes):
        held += size
        forward_peak = max(forward_peak, held)
        if u - 1 in out:
            held -= sizes[u - 1]
    rise = backward_peak = 0.0
    for u in range(len(sizes) - 1, -1, -1):
        if u - 1 in out:
            rise += sizes[u - 1]
            backward_peak = max(backward_peak, rise)
        rise -= sizes[u]
    return forward_peak, held, backward_peak


def _peak_layer_offload(chunks: Sequence[ChunkWork], ops: Sequence[_Op], layers: int) -> float:
    """:func:`peak_activations` with layer-granular offload (:func:`layer_offload_profile`)."""
    profiles = [layer_offload_profile(work, layers) for work in chunks]
    split = {(op.chunk, op.micro) for op in ops if op.kind == "W"}
    held = peak = 0.0
    for op in ops:
        work = chunks[op.chunk]
        forward_peak, kept, backward_peak = profiles[op.chunk]
        if op.kind == "F":
            peak = max(peak, held + forward_peak)
            held += kept
        elif op.kind == "W":
            held -= work.weight_saved
        else:
            peak = max(peak, held + backward_peak)
            held += (work.weight_saved if (op.chunk, op.micro) in split else 0.0) - kept
        peak = max(peak, held)
    return peak


def peak_activations(
    chunks: Sequence[ChunkWork], ops: Sequence[_Op], offload: float = 0.0, layers: int = 0
) -> float:
    """The most activation bytes held at once over a schedule's ``ops`` (module docstring);
    ``offload``: the share of each offloaded micro-batch's saved bytes in host memory
    (:func:`_peak_offloaded`); ``layers``: the layers of each chunk offloaded within its
    passes (:func:`layer_offload_profile`)."""
    if layers > 0:
        return _peak_layer_offload(chunks, ops, layers)
    if offload > 0:
        return _peak_offloaded(chunks, ops, offload)
    split = {(op.chunk, op.micro) for op in ops if op.kind == "W"}
    held = peak = 0.0
    for op in ops:
        work = chunks[op.chunk]
        if op.kind == "F":
            held += work.saved
        elif op.kind == "W":
            held -= work.weight_saved
        elif (op.chunk, op.micro) in split:
            held += work.weight_saved - work.saved
        else:
            held -= work.saved
        peak = max(peak, held)
    return peak


def _peak_offloaded(chunks: Sequence[ChunkWork], ops: Sequence[_Op], offload: float) -> float:
    """:func:`peak_activations` with activation offload: an offloaded pair keeps ``1 -
    offload`` of its saved bytes on the GPU, and all of them from its F to the end of the
    group after it (the copy out) and from the start of the group before its B (the reload)."""
    groups = op_groups(ops)
    chosen = offloaded(groups)
    split = {(op.chunk, op.micro) for op in ops if op.kind == "W"}
    near: list[float] = [0.0] * (len(groups) + 1)  # offloaded shares in flight, per group
    for k, group in enumerate(groups):
        for op in group:
            if (op.chunk, op.micro) not in chosen or op.kind == "W":
                continue
            share = offload * chunks[op.chunk].saved
            for at in (k, k + 1) if op.kind == "F" else (k - 1,):
                near[at] += share
    held = peak = 0.0
    for k, group in enumerate(groups):
        for op in group:
            work = chunks[op.chunk]
            kept = work.saved * ((1 - offload) if (op.chunk, op.micro) in chosen else 1.0)
            if op.kind == "F":
                held += kept
            elif op.kind == "W":
                held -= work.weight_saved
            elif (op.chunk, op.micro) in split:
                held += work.weight_saved - kept
            else:
                held -= kept
            peak = max(peak, held + near[k])
    return peak


def _fsdp_offloaded(
    chunks: Sequence[ChunkWork], p: Precision, dp: int, expert_dp: int, grad_fp32: bool | None
) -> tuple[float, float]:
    """Weights and gradients on the GPU (bytes) under FSDP's CPU offload of parameters (PyTorch
    ``CPUOffloadPolicy``, :mod:`acesim.training.offload`): the shards, their gradients and the
    optimizer state live in host memory; the GPU holds the largest unit's gathered parameters
    twice (the unit running and the one prefetched), its shard as copied in (in the shards'
    dtype, ``p.state_bytes``, until its all-gather has taken it), its unsharded gradient
    before the reduce-scatter and its reduced gradient shard (shards' dtype) until its copy out."""
    largest = float(max((u for c in chunks for u in c.unit_params), default=0))
    shard = max(
        (
            (units - experts) / dp + experts / expert_dp
            for c in chunks
            for units, experts in zip(
                c.unit_params, c.unit_experts or (0,) * len(c.unit_params), strict=True
            )
        ),
        default=0.0,
    )
    weights = 2 * largest * p.param_bytes + shard * p.state_bytes
    return weights, largest * grad_bytes(p, grad_fp32) + shard * p.state_bytes


def rank_footprint(
    chunks: Sequence[ChunkWork],
    ops: Sequence[_Op],
    p: Precision,
    optimizer: str,
    *,
    dp: int,
    distributed_optimizer: bool,
    expert_dp: int | None = None,
    grad_fp32: bool | None = None,
    fsdp: bool = False,
    offload_activations: float = 0.0,
    offload_layers: int = 0,
    offload_optimizer: float = 0.0,
    offload_weights: bool = False,
) -> dict[str, float]:
    """Bytes per rank of each term and their ``total`` (module docstring); experts' optimizer
    state is divided over ``expert_dp`` (default ``dp``); ``offload_activations``: the share
    of offloaded micro-batches' saved activations in host memory; ``offload_layers``: the
    layers of each chunk whose activations go to host memory within each pass;
    ``offload_optimizer``: the share of the optimizer state (master weights and moments)
    kept in host memory (Megatron-core's ``HybridDeviceOptimizer``); ``offload_weights``
    (with ``fsdp``): FSDP's parameter, gradient and optimizer shards in host memory
    (:func:`_fsdp_offloaded`)."""
    params = float(sum(c.params for c in chunks))
    experts = float(sum(c.expert_params for c in chunks))
    per = state_bytes_per_param(optimizer, p)
    if distributed_optimizer:
        state = per * ((params - experts) / dp + experts / (expert_dp or dp))
    else:
        state = per * params
    weights = params * p.param_bytes
    gradients = params * grad_bytes(p, grad_fp32)
    if fsdp and offload_weights:
        weights, gradients = _fsdp_offloaded(chunks, p, dp, expert_dp or dp, grad_fp32)
        state = 0.0
    elif fsdp:
        largest = float(max((u for c in chunks for u in c.unit_params), default=0))
        if experts:  # experts sharded over the expert-data-parallel group
            shard = (params - experts) / dp + experts / (expert_dp or dp)
            weights = shard * p.param_bytes + 2 * largest * p.param_bytes
            gradients = shard * grad_bytes(p, grad_fp32) + largest * grad_bytes(p, grad_fp32)
        else:
            weights = weights / dp + 2 * largest * p.param_bytes
            gradients = gradients / dp + largest * grad_bytes(p, grad_fp32)
    sizes = {
        "weights": weights,
        "gradients": gradients,
        "optimizer": state * (1 - offload_optimizer),
        "activations": peak_activations(chunks, ops, offload_activations, offload_layers),
    }
    sizes["total"] = sum(sizes[t] for t in TERMS)
    return sizes
