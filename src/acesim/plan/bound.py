"""Lower bounds on a candidate's iteration time, for pruning a plan before simulation.

Two bounds, each provably at most the iteration time acesim simulates for the candidate, so
that a candidate whose bound is above the ``K``-th best simulated time cannot enter the top
``K`` and need not be simulated (branch and bound; nothing is approximated):

* :func:`gemm_bound` (before the case is built, microseconds): the dense GEMM FLOPs a GPU of
  the most loaded pipeline stage runs in an iteration (the attention projections and the
  dense MLPs, forward and both gradients, the forward again under full recomputation; the
  attention core, MoE experts, norms and the output head left out), at the NPU's datasheet
  matrix peak in the precision's math dtype. The simulated GEMMs run at ``gemm_efficiency``
  (at most 1) of that peak with whole tiles, so they take at least this long; a stage holds
  at least the mean ``layers / pp`` layers.
* :func:`kernel_bound` (from the built case): each pipeline stage's kernels, every micro-batch
  and chunk (forward, backward with recomputation, the optimizer step), at their time alone
  on the whole NPU (:attr:`~acesim.hardware.kernel_model.KernelPlan.time_alone`; a kernel
  sharing the NPU with a collective or another kernel only runs slower), run one after
  another as a rank runs them; and a stage cannot start before the first micro-batch's
  forward has passed the stages before it (one-direction schedules). Schedules that run two
  ops of a rank at once (DualPipe's paired F&B) get the resource bound instead: the compute
  units' busy time (tiles x tile time / units) and HBM's (bytes / sustained bandwidth), each
  summed over the stage's kernels, whichever is larger. The optimizer step is left out.

Neither counts communication, bubbles beyond the fill, or contention: they are far below
the simulated time on communication-bound candidates, which then get simulated.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config.system import NPUConfig
from ..hardware.kernel_model import expand, plan_kernel
from ..hardware.kernels import Kernel
from ..runs.llm import LlmCase
from ..training.schedules import SCHEDULES
from ..workload.llm.chunk import ChunkWork, Step
from ..workload.llm.models import TransformerConfig
from ..workload.llm.parallel import ParallelConfig

__all__ = ["gemm_bound", "kernel_bound"]


def gemm_bound(
    model: TransformerConfig, par: ParallelConfig, gpus: int, npu: NPUConfig, math_dtype: str
) -> float:
    """The dense-GEMM bound (s; module docstring) of ``par`` on ``gpus`` GPUs of ``npu``."""
    h = model.hidden
    per_token = 0.0
    if not model.mla:
        per_token += model.layers * 2.0 * h * (2 * model.q_width + 2 * model.kv_width)
    dense = model.layers - model.moe_layers
    per_token += dense * 2.0 * h * model.ffn * ((2 if model.gated else 1) + 1)
    passes = 4.0 if par.recompute == "full" and par.recompute_layers is None else 3.0
    dp = gpus // (par.tp * par.cp * par.pp)
    tokens = par.global_batch * par.seq / (dp * par.cp)
    flops = passes * per_token * tokens / (par.tp * par.pp)
    return flops / npu.matrix_peak(math_dtype)


def _kernels(steps: Iterable[Step]) -> Iterable[Kernel]:
    for step in steps:
        yield from step.kernels


class _Times:
    """Kernel times alone on one NPU, memoised by kernel (layers repeat their kernels)."""

    def __init__(self, npu: NPUConfig):
        self.npu = npu
        self.alone: dict[Kernel, float] = {}
        self.busy: dict[Kernel, tuple[float, float]] = {}

    def sequential(self, kernels: Iterable[Kernel]) -> float:
        total = 0.0
        for kernel in expand(self.npu, kernels):
            t = self.alone.get(kernel)
            if t is None:
                t = self.alone[kernel] = plan_kernel(self.npu, kernel).time_alone
            total += t
        return total

    def resources(self, kernels: Iterable[Kernel]) -> tuple[float, float]:
        """(compute-unit seconds over the units, HBM seconds) of ``kernels``."""
        units = hbm = 0.0
        for kernel in expand(self.npu, kernels):
            pair = self.busy.get(kernel)
            if pair is None:
                plan = plan_kernel(self.npu, kernel)
                blocks = plan.blocks if plan.blocks is not None else 1
                pair = (
                    blocks * plan.block_seconds / plan.units,
                    plan.hbm_demand / plan.hbm_rate if plan.hbm_demand > 0 else 0.0,
                )
                self.busy[kernel] = pair
            units += pair[0]
            hbm += pair[1]
        return units, hbm


def _chunk_kernels(chunk: ChunkWork) -> list[Kernel]:
    return [*_kernels(chunk.forward), *_kernels(chunk.backward)]


def kernel_bound(case: LlmCase) -> float:
    """The kernel bound (s; module docstring) of a built case (the optimizer step left out)."""
    times = _Times(case.system.npu)
    order = SCHEDULES.get(case.schedule)
    micro = case.micro_batches // order.directions  # micro-batches each chunk runs
    pp = case.parallel.pp
    paired = order.directions > 1 or any(
        op.paired
        for s in range(pp)
        for op in order.stage_ops(pp, s, case.micro_batches, len(case.stages[s]))
    )
    work: list[float] = []
    first_forward: list[float] = []
    for chunks in case.stages:
        kernels = [k for c in chunks for k in _chunk_kernels(c)]
        if paired:
            units, hbm = times.resources(kernels)
            work.append(micro * max(units, hbm))
        else:
            work.append(micro * times.sequential(kernels))
        first_forward.append(times.sequential(_kernels(chunks[0].forward)))
    if paired:
        return max(work)
    return max(sum(first_forward[:s]) + work[s] for s in range(pp))
