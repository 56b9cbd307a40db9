"""The host thread that issues a rank's GPU work, where it cannot run ahead of the GPU.

A training framework's host thread (Python, the framework's dispatcher, the driver) issues a
rank's kernels in program order; the GPU runs them asynchronously. Where the host never waits
for the GPU it runs ahead, and its issue time hides under the GPU's work. Where it
*synchronises* (waits until the GPU has finished everything issued before), the work after
the sync point cannot start before the host has issued it, and if issuing it takes the host
longer than running it takes the GPU, the host sets the pace.

Megatron-core's all-to-all MoE token dispatcher (``MoEAlltoAllTokenDispatcher``,
``megatron/core/transformer/moe/token_dispatcher.py``) with expert parallelism copies the
tokens-per-expert counts to the host and synchronises before every dispatch all-to-all
(``_maybe_dtoh_and_synchronize`` at ``cuda_sync_point = "before_ep_alltoall"``): the
all-to-all's split sizes are host lists. That happens in the dispatch, which runs in the
forward (and in a recomputed forward); the backward's all-to-alls reuse the split sizes the
forward kept on the host and do not wait. Such a dispatch is a :class:`Step` with ``sync``
(:mod:`acesim.workload.llm.block`).

The model (per rank, per pass with sync points; ``c`` = ``npu.host_launch_time``):

* a *segment* runs from one sync point to the next (or to the pass's end); its host time is
  ``c`` times its launches: one per kernel and per collective, a batched GEMM's members one
  each (Transformer Engine's ``GroupedLinear``, which runs the experts' GEMMs as one cuBLAS
  GEMM per local expert);
* at a sync point the host waits for the GPU work issued before it and for its own issuing
  of the segment before; only then is the dispatch issued (the dispatch waits for both);
* the next sync point then comes when both the GPU has run the segment and the host has
  issued it: the segment takes the longer of the two (the host and the GPU each at its own
  pace; one GPU kernel's wait for its own launch within the segment is not resolved);
* the pass's end waits for its last segment's issuing, so the next pass's work is issued
  after it.

Not modelled: the host's issue time where it does not synchronise (hidden under the GPU's work
by running ahead), and launches replayed from CUDA graphs (``cuda_graphs=1``: nothing is
charged). A pass without a sync point is unchanged, and so is every run with
``npu.host_launch_time`` unset.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..hardware.kernels import Gemm, Kernel
from ..workload.llm.chunk import Step

__all__ = ["launches", "segments"]


def _kernel_launches(kernel: Kernel) -> int:
    """Launches of one kernel: a batched GEMM's members one each, any other kernel one."""
    if isinstance(kernel, Gemm):
        return max(1, round(kernel.batch))
    return 1


def launches(step: Step) -> int:
    """Kernel launches the host issues for ``step`` (a collective: one)."""
    if step.comm is not None:
        return 1
    return sum(_kernel_launches(k) for k in step.kernels)


def segments(steps: Sequence[Step]) -> dict[int, int]:
    """Per sync step (its index in ``steps``), the launches from it to the next sync step or
    the end of ``steps``; {} when no step synchronises."""
    out: dict[int, int] = {}
    current: int | None = None
    for k, step in enumerate(steps):
        if step.sync:
            current = k
            out[k] = 0
        if current is not None:
            out[current] += launches(step)
    return out
