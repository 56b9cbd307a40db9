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
  gradient before the reduce-scatter;
* ``activations``: the most bytes the rank's schedule ever keeps at once: walking its ops in
  order (:mod:`acesim.training.schedules`), an F of chunk ``c`` adds that chunk's saved bytes
  per micro-batch; a B with no W after it frees them; where the schedule defers weight
  gradients (a W op of the same chunk and micro-batch follows), the B frees them but keeps the
  weight gradients' operands (``weight_saved``), which the W frees (:mod:`.chunk`) (1F1B:
  stage ``s`` of ``p`` holds ``p - s`` micro-batches; interleaving more).

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

__all__ = ["TERMS", "grad_bytes", "rank_footprint", "peak_activations"]

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


def peak_activations(chunks: Sequence[ChunkWork], ops: Sequence[_Op]) -> float:
    """The most activation bytes held at once over a schedule's ``ops`` (module docstring)."""
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
) -> dict[str, float]:
    """Bytes per rank of each term and their ``total`` (module docstring); experts' optimizer
    state is divided over ``expert_dp`` (default ``dp``)."""
    params = float(sum(c.params for c in chunks))
    experts = float(sum(c.expert_params for c in chunks))
    per = state_bytes_per_param(optimizer, p)
    if distributed_optimizer:
        state = per * ((params - experts) / dp + experts / (expert_dp or dp))
    else:
        state = per * params
    weights = params * p.param_bytes
    gradients = params * grad_bytes(p, grad_fp32)
    if fsdp:
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
        "optimizer": state,
        "activations": peak_activations(chunks, ops),
    }
    sizes["total"] = sum(sizes[t] for t in TERMS)
    return sizes
