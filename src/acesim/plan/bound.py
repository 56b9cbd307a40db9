"""Lower bounds on a candidate's iteration time, for pruning a plan before simulation.

Three bounds, each provably at most the iteration time acesim simulates for the candidate, so
that a candidate whose bound is above the ``K``-th best simulated time cannot enter the top
``K`` and need not be simulated (branch and bound; nothing is approximated):

* :func:`gemm_bound` (before the case is built, microseconds): the dense GEMM FLOPs a GPU of
  the most loaded pipeline stage runs in an iteration (the attention projections and the
  dense MLPs, forward and both gradients, the forward again under full recomputation; the
  attention core, MoE experts, norms and the output head left out), at the NPU's datasheet
  matrix peak in the precision's math dtype. The simulated GEMMs run at ``gemm_efficiency``
  (at most 1) of that peak with whole tiles, so they take at least this long; a stage holds
  at least the mean ``layers / pp`` layers.
* :func:`layer_bound` (before the case is built, from a layer of each kind built alone and
  timed once per the axes that shape it: a plan's 7,000 candidates in about a CPU second):
  the kernel bound's per-stage work counting the transformer layers only (no embedding, head,
  collectives, fill or drain; partial recomputation left out), at most the kernel bound.
  Median 84% of the kernel bound on Llama 3 70B's default space on 64 H100 (the GEMM bound:
  40%), so most candidates need not be built to be pruned.
* :func:`kernel_bound` (from the built case): each pipeline stage's kernels, every micro-batch
  and chunk (forward, backward with recomputation), at their time alone on the whole NPU
  (:attr:`~acesim.hardware.kernel_model.KernelPlan.time_alone`; a kernel sharing the NPU
  with a collective or another kernel only runs slower), run one after another as a rank
  runs them, with the collectives that block the next step at their least time (the
  network bound's terms of each); under FSDP over DP every pass gathers its units'
  parameters one after another (each unit's all-gather issued when the one before it ends,
  the first when the pass starts), each unit's steps waiting for their own: a pass lasts at
  least the gathers up to some unit and the steps from that unit on (a two-machine flow
  shop in a fixed order). A stage cannot start before the first micro-batch's forward has
  passed the stages before it (one-direction schedules), nor, with the distributed
  optimizer over DP, before its first chunk's parameter all-gather (issued at the start);
  where the schedule has no ``W`` op (every backward whole), a stage's last op is a backward
  whose micro-batch must still go back through every earlier virtual stage, each backward at
  least its least time (the pipeline's drain; the least over the chunks the last op could
  be); and after its last op the stage's gradients of that op's chunk (under FSDP: its first
  unit's) are still reduced over DP, then the optimizer step runs (its kernels alone): the
  least over the chunks. Schedules that run two ops of a rank at once (DualPipe's paired
  F&B) get the resource bound instead: the compute units' busy time (tiles x tile time /
  units) and HBM's (bytes / sustained bandwidth), each summed over the stage's kernels,
  whichever is larger, without the optimizer step.

* :func:`network_bound` (from the built case: its simulated ranks' collectives as the
  class-mode graph issues them, counted without building it, :func:`stage_collectives`; for
  candidates simulated in class mode): a simulated rank's collectives, each at its
  least time on some set of links, summed over the collectives that use the same set:
  every link of the dimensions it runs on (:func:`comm_bound`: the bytes that must reach the
  rank at its links' raw bandwidth one way), summed over the collectives on those dimensions;
  and one dimension's links of the rank's slice of its communicator (:func:`slice_bounds`:
  the bytes that must enter the members sharing its coordinate on that dimension, at their
  links' raw bandwidth), summed over the communicator's collectives. Whatever the
  collectives overlap (compute, each other), those bytes cross those links, so the iteration
  lasts at least the largest sum (over the run's iterations). It is what bounds
  communication-heavy candidates (FSDP's gathers and reduce-scatters in every pass, DP over
  the scale-out network) that the kernel bound leaves far below the simulation. Pipeline
  sends and receives are left out.

The kernel bound counts no overlapped communication, no bubbles beyond the fill and the drain
and no contention; the network bound counts no compute: each is far below the simulated time
on candidates bound by the other or by both at once, which then get simulated.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Sequence

from ..config.system import NPUConfig, SystemConfig
from ..errors import ConfigError
from ..hardware.kernel_model import expand, plan_kernel
from ..hardware.kernels import Kernel
from ..network.group import Group, resolve
from ..network.topology import Topology
from ..precision import PRECISIONS, Precision
from ..runs.llm import OPTIMIZER, LlmCase, optimizer_steps
from ..training.pipeline import dp_parts, unit_parts
from ..training.schedules import SCHEDULES, PipelineSchedule, default_schedule
from ..workload.llm.block import chunk_work, layer_params
from ..workload.llm.chunk import ChunkWork, Step
from ..workload.llm.memory import grad_bytes
from ..workload.llm.models import TransformerConfig
from ..workload.llm.parallel import ParallelConfig, Placement, placement
from ..workload.model import Comm
from ..workload.optimizer import state_bytes_per_param

__all__ = [
    "gemm_bound",
    "kernel_bound",
    "layer_bound",
    "memory_floor",
    "network_bound",
    "slice_bounds",
    "stage_collectives",
]


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

    def __init__(self, npu: NPUConfig, topology: Topology | None = None):
        self.npu = npu
        self.topology = topology
        self.alone: dict[Kernel, float] = {}
        self.busy: dict[Kernel, tuple[float, float]] = {}
        self.comms: dict[Comm, float] = {}
        #: each collective's network bound terms (:func:`_network_terms`)
        self.network: dict[Comm, list[tuple[tuple[object, ...], float]]] = {}
        #: one layer's (kernel time alone, unit-seconds over the units, HBM seconds, saved
        #: bytes) per the axes that shape it and its kind (:func:`_layer_time`)
        self.layers: dict[tuple[object, ...], tuple[float, float, float, float]] = {}

    def sequential(self, kernels: Iterable[Kernel]) -> float:
        total = 0.0
        for kernel in expand(self.npu, kernels):
            t = self.alone.get(kernel)
            if t is None:
                t = self.alone[kernel] = plan_kernel(self.npu, kernel).time_alone
            total += t
        return total

    def blocking(self, steps: Iterable[Step]) -> float:
        """The least time (s) the collectives among ``steps`` that block the next step take
        (each the largest of its network bound terms, :func:`_least`; overlapped ones count
        nothing)."""
        topology = self.topology
        if topology is None:
            return 0.0
        total = 0.0
        for step in steps:
            if step.comm is None or step.overlap:
                continue
            t = self.comms.get(step.comm)
            if t is None:
                t = self.comms[step.comm] = _least(self, topology, step.comm)
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


def least_received(op: str, n: int, switch_reduction: bool = True) -> float:
    """The least fraction of ``S`` (nccl-tests' size convention, :mod:`acesim.network.ops`)
    that must reach a member of a group of ``n`` before its part of ``op`` can be done,
    whatever the algorithm or where the reduction happens: an all-gather's and an
    all-to-all's shares of the other members ((n - 1) / n), an all-reduce's result beyond
    what the member holds (at least (n - 1) / n: a ring receives twice that, an in-switch
    reduction all of it), a reduce-scatter's reduced shard (1 / n where a switch of the
    group reduces in the network), a send/receive's buffer (1); a rooted operation nothing
    (the root receives nothing).

    Without a switch that reduces (``switch_reduction`` False) a reduce-scatter's sums are
    made by the members: each shard (``S / n``) combines ``n`` contributions, and each
    combination but the first brings a partial of ``S / n`` to the member that combines it
    (pre-reduced or not), so the members together receive at least ``(n - 1) S``: ``(n - 1)
    / n`` of ``S`` each on average, which every member receives where they are alike (class
    mode's ranks, a symmetric collective)."""
    if op in ("all-gather", "all-to-all", "all-reduce"):
        return (n - 1) / n
    if op == "reduce-scatter":
        return 1 / n if switch_reduction else (n - 1) / n
    if op == "sendrecv":
        return 1.0
    return 0.0


def comm_bound(topology: Topology, comm: Comm) -> float:
    """The least time (s) a collective can take at a member in the model: the bytes that must
    reach it (:func:`least_received`) at the sum of its links' raw bandwidth one way on the
    group's dimensions. A message's byte takes at least the dimension's efficiency of a
    link's capacity (the NVLS, protocol and endpoint efficiencies that weigh it are fractions:
    ``collective.py``'s step demand), so no message runs faster than the raw links; a NIC's
    proxy or PCIe path, latency and the endpoint's costs only add time."""
    axes = resolve(topology, comm.group if comm.group is not None else comm.dims)
    if not axes:
        return 0.0
    n = math.prod(a.size for a in axes)
    dims = topology.dimensions
    raw = sum(dims[a.dim].egress_bandwidth / dims[a.dim].efficiency for a in axes)
    reduces = any(dims[a.dim].switch_reduction for a in axes)
    return least_received(comm.op, n, reduces) * comm.size / raw


def entering(op: str, n: int, across: int, switch_reduction: bool = True) -> float:
    """The least fraction of ``S`` that must enter a *slice* of a group of ``n`` members over
    one of its dimensions, where the group has ``across`` members along it (the slice: the
    ``n / across`` members that share a coordinate on it, who reach each other without it):
    what the members outside the slice hold that a slice member needs, counted once for the
    slice where its members need the same bytes. An all-gather's shards from outside
    (``1 - 1/across``, shared by the slice), an all-reduce's likewise (at least what
    :func:`least_received` counts for one member), a reduce-scatter's reduced shards of the
    slice's members (``1/across``: each pre-reduced outside at best), an all-to-all's
    messages from outside to each slice member (``n/across x (1 - 1/across)``: none shared),
    a send/receive's buffer; rooted operations nothing. For a group on one dimension (a
    slice of one member) this is :func:`least_received`.

    Where the dimension's switch does not reduce (``switch_reduction`` False), a
    reduce-scatter's shard combines a partial of every slice, and each combination but the
    first brings one into the slice that combines it over the dimension's links (no other
    dimension joins members of different slices): the slices together take in at least
    ``(across - 1) S``, ``1 - 1/across`` of it each where they are alike."""
    if op in ("all-gather", "all-reduce"):
        return 1 - 1 / across
    if op == "reduce-scatter":
        return 1 / across if switch_reduction else 1 - 1 / across
    if op == "all-to-all":
        return n / across * (1 - 1 / across)
    if op == "sendrecv":
        return 1.0
    return 0.0


def slice_bounds(topology: Topology, comm: Comm) -> dict[int, float]:
    """Per dimension of the collective's group, the least time (s) it takes at a member: the
    bytes that must enter the member's slice over that dimension (:func:`entering`) at the
    raw bandwidth of the slice members' links on it, spread evenly over them. The model runs
    a group's collective on its members' links only, so nothing enters the slice over the
    links of NPUs outside the group. On a group spanning several dimensions this is what the
    scale-out dimension bounds (a ring or tree across nodes still brings every remote shard
    in through the node's members' NICs), where :func:`comm_bound` counts every dimension's
    links together."""
    axes = resolve(topology, comm.group if comm.group is not None else comm.dims)
    n = math.prod(a.size for a in axes)
    dims = topology.dimensions
    out: dict[int, float] = {}
    for a in axes:
        raw = dims[a.dim].egress_bandwidth / dims[a.dim].efficiency
        fraction = entering(comm.op, n, a.size, dims[a.dim].switch_reduction)
        out[a.dim] = fraction * comm.size / (n // a.size * raw)
    return out


def _chunk_kernels(chunk: ChunkWork) -> list[Kernel]:
    return [*_kernels(chunk.forward), *_kernels(chunk.backward)]


#: the last system's kernel times (a plan bounds thousands of candidates on one system: their
#: kernels repeat across candidates), as (system, its times)
_LAST: list[tuple[SystemConfig, _Times]] = []


def _times_of(system: SystemConfig) -> _Times:
    """Kernel times on ``system``, kept while the system is the last one asked for."""
    if _LAST and _LAST[0][0] is system:
        return _LAST[0][1]
    times = _Times(system.npu, Topology(system.network, system.collective))
    _LAST[:] = [(system, times)]
    return times


def kernel_bound(case: LlmCase) -> float:
    """The kernel bound (s; module docstring) of a built case."""
    times = _times_of(case.system)
    order = SCHEDULES.get(case.schedule)
    micro = case.micro_batches // order.directions  # micro-batches each chunk runs
    pp = case.parallel.pp
    paired = order.directions > 1 or any(
        op.paired
        for s in range(pp)
        for op in order.stage_ops(pp, s, case.micro_batches, len(case.stages[s]))
    )
    if paired:
        return max(
            micro * max(times.resources([k for c in chunks for k in _chunk_kernels(c)]))
            for chunks in case.stages
        )
    passes = _Passes(case, times, _full_backwards(case))
    drain = _drain(case, passes) if passes.whole else [0.0] * pp
    bound = start = 0.0
    for s in range(pp):
        # the stage's first forward waits for the one before it and for its parameters
        start = max(passes.gathered[s], start + (passes.forward[s - 1][0] if s else 0.0))
        work = micro * (sum(passes.forward[s]) + sum(passes.backward[s]))
        bound = max(bound, start + work + max(drain[s], passes.tail[s]))
    return bound


class _Passes:
    """A built case's passes at their least (s) on each stage, per chunk: the forward and the
    backward (kernels alone one after another, the collectives that block the next step at
    their least; under FSDP each unit's steps wait for its parameters' all-gather, which
    follows the unit before's: :func:`_gathered_in_turn`); the least wait for the first
    forward's parameters (the distributed optimizer's all-gather, issued at the start); and
    the least that must follow the stage's last op (its chunk's gradient reduction, at the
    least over the chunks, then the optimizer step's kernels alone)."""

    def __init__(self, case: LlmCase, times: _Times, whole: bool):
        self.whole = whole
        topology = times.topology
        assert topology is not None
        place, p, par = case.place, case.precision, case.parallel
        fsdp = par.zero == 3 and place.dp_group is not None
        gradient = grad_bytes(p, par.grad_fp32)
        reduce = "reduce-scatter" if par.zero >= 1 else "all-reduce"
        updates = optimizer_steps(case)[0]

        def least(op: str, parts: list[tuple[Group, int, str]], nbytes: float) -> float:
            return max(
                (_least(times, topology, Comm(op, n * nbytes, None, g)) for g, n, _ in parts),
                default=0.0,
            )

        self.forward: list[list[float]] = []
        self.backward: list[list[float]] = []
        self.gathered: list[float] = []
        self.tail: list[float] = []
        for s, chunks in enumerate(case.stages):
            if fsdp:
                units = [
                    [least("all-gather", unit_parts(place, c, u), p.param_bytes)
                     for u in range(len(c.unit_params))]
                    for c in chunks
                ]  # fmt: skip
                self.forward.append(
                    [_gathered_in_turn(times, c.forward, c.forward_starts, g)
                     for c, g in zip(chunks, units, strict=True)]
                )  # fmt: skip
                self.backward.append(
                    [_gathered_in_turn(times, c.backward, c.backward_starts, g[::-1])
                     for c, g in zip(chunks, units, strict=True)]
                )  # fmt: skip
                self.gathered.append(0.0)  # in the first forward's own time
                reduced = [
                    least(reduce, unit_parts(place, c, 0), gradient) if c.unit_params else 0.0
                    for c in chunks
                ]
            else:
                self.forward.append(
                    [times.sequential(_kernels(c.forward)) + times.blocking(c.forward)
                     for c in chunks]
                )  # fmt: skip
                self.backward.append(
                    [times.sequential(_kernels(c.backward))
                     + (times.blocking(c.backward) if whole else 0.0) for c in chunks]
                )  # fmt: skip
                zero = par.zero >= 1
                self.gathered.append(
                    least("all-gather", dp_parts(place, chunks[0]), p.param_bytes) if zero else 0.0
                )
                reduced = [least(reduce, dp_parts(place, c), gradient) for c in chunks]
            self.tail.append(min(reduced) + times.sequential(updates[s].kernels))


def _least(times: _Times, topology: Topology, comm: Comm) -> float:
    """A collective's least time (s): the largest of its network bound terms."""
    return max((t for _, t in _network_terms(times, topology, comm)), default=0.0)


def _gathered_in_turn(
    times: _Times, steps: Sequence[Step], starts: Sequence[int], gathers: Sequence[float]
) -> float:
    """The least time (s) of an FSDP pass: its steps before the first unit, then its units,
    unit ``j`` (steps ``starts[j]`` to ``starts[j + 1]``) after unit ``j - 1`` and after its
    parameters' all-gather (at least ``gathers[j]``), issued when the one before it ends
    (the first when the pass reaches it: :meth:`~acesim.training.pipeline._RankGraph.
    _enter_unit`). Two machines in a fixed order (a flow shop): the pass lasts at least the
    gathers up to some unit ``i`` and the units' steps from ``i`` on."""
    bounds = [*starts, len(steps)]

    def alone(part: Sequence[Step]) -> float:
        return times.sequential(_kernels(part)) + times.blocking(part)

    work = [alone(steps[bounds[j] : bounds[j + 1]]) for j in range(len(starts))]
    best = gathered = 0.0
    rest = sum(work)
    for g, w in zip(gathers, work, strict=True):
        gathered += g
        best = max(best, gathered + rest)
        rest -= w
    return alone(steps[: bounds[0]]) + best


def _layout(
    system: SystemConfig, model: TransformerConfig, par: ParallelConfig
) -> tuple[Placement, int, PipelineSchedule, tuple[int, ...]] | None:
    """A candidate's placement, micro-batches, schedule and layers per virtual stage, as
    building it would make them; None where it does not resolve (building it says why)."""
    try:
        place = placement(par, tuple(system.network.shape))
        micro = par.micro_batches(place.dp)
        order = SCHEDULES.get(par.schedule or default_schedule(par.vpp))
        return place, micro, order, par.layer_split(model.layers)
    except ConfigError:
        return None


def layer_bound(
    system: SystemConfig, model: TransformerConfig, par: ParallelConfig, precision: str
) -> float:
    """A lower bound (s) on the kernel bound of a candidate not yet built, from its layers
    alone: each pipeline stage's transformer layers' kernels at their time alone (as the
    kernel bound times them; resources only where ops pair up), times the micro-batches each
    chunk runs, the most loaded stage's; the embedding, the head, the blocking collectives,
    the pipeline fill and drain and any recomputation of only some layers are left out (each
    only adds). A layer's kernels are timed once per kind (MoE or dense, recomputed whole or
    not) and per the axes that shape them, so a plan's thousands of candidates cost a few
    layers each. 0.0 where the candidate does not resolve (building it says why)."""
    layout = _layout(system, model, par)
    if layout is None:
        return 0.0
    place, micro, order, split = layout
    p = PRECISIONS.get(precision)
    times = _times_of(system)
    pp, chain = par.pp, par.pp * par.vpp
    paired = order.directions > 1 or _paired(order, pp, micro, par.vpp * order.directions)
    full = par.recompute == "full" and par.recompute_layers is None
    starts = [sum(split[:vs]) for vs in range(chain + 1)]
    worst = 0.0
    for s in range(pp):
        seq_time = units = hbm = 0.0
        for c in range(par.vpp * order.directions):
            vs = order.virtual_stage(c, s, pp) % chain
            for i in range(starts[vs], starts[vs + 1]):
                a, u, h, _ = _layer_time(times, model, p, par, place, model.is_moe_layer(i), full)
                seq_time, units, hbm = seq_time + a, units + u, hbm + h
        worst = max(worst, max(units, hbm) if paired else seq_time)
    return micro // order.directions * worst


def memory_floor(
    system: SystemConfig, model: TransformerConfig, par: ParallelConfig, precision: str
) -> tuple[float, str] | None:
    """A lower bound on a candidate's largest pipeline stage's memory per GPU (bytes) before
    it is built, with the term that weighs most in it: its transformer layers' weights,
    gradients and optimizer state as :func:`~acesim.workload.llm.memory.rank_footprint`
    counts them, and the activations its layers keep at the schedule's peak, each freed at
    the micro-batch's B (a W keeps some longer) and each layer saving at most what it saves
    when recomputed whole where any layer is (the embedding, the head and the rest left out:
    each only adds); under FSDP the activations only (its state is sharded otherwise), with
    activation offload the state only. None where neither is left, or where the candidate does
    not resolve (building it says why)."""
    sharded = par.zero == 3 or par.offload_weights  # FSDP: the layers' state left out
    offload = bool(par.offload_activations or par.offload_layers)
    if sharded and offload:
        return None
    layout = _layout(system, model, par)
    if layout is None:
        return None
    place, micro, order, split = layout
    p = PRECISIONS.get(precision)
    times = _times_of(system)
    per, grad = state_bytes_per_param(OPTIMIZER, p), grad_bytes(p, par.grad_fp32)
    pp, chain, chunks = par.pp, par.pp * par.vpp, par.vpp * order.directions
    starts = [sum(split[:vs]) for vs in range(chain + 1)]
    worst: dict[str, float] = {}
    for s in range(pp):
        params = experts = 0.0
        saved = [0.0] * chunks
        for c in range(chunks):
            vs = order.virtual_stage(c, s, pp) % chain
            for i in range(starts[vs], starts[vs + 1]):
                dense, routed = layer_params(model, i, par.tp, par.ep)
                params, experts = params + dense + routed, experts + routed
                if not offload:
                    moe, full = model.is_moe_layer(i), par.recompute == "full"
                    saved[c] += _layer_time(times, model, p, par, place, moe, full)[3]
        state = per * params
        if par.zero >= 1:
            state = per * ((params - experts) / place.grad_ranks + experts / place.expert_dp)
        kept = 0.0 if sharded else 1.0
        sizes = {
            "weights": kept * params * p.param_bytes,
            "gradients": kept * params * grad,
            "optimizer": kept * state * (1 - par.offload_optimizer),
            "activations": _peak_saved(order, pp, s, micro, chunks, tuple(saved)),
        }
        if sum(sizes.values()) > sum(worst.values()):
            worst = sizes
    if not worst:
        return None
    return sum(worst.values()), max(worst, key=lambda t: worst[t])


@functools.lru_cache(maxsize=1024)
def _stage_ops(
    order: PipelineSchedule, pp: int, stage: int, micro: int, chunks: int
) -> tuple[tuple[str, int], ...]:
    """A stage's ops as (kind, chunk), in order (kept: candidates share schedule shapes)."""
    return tuple((op.kind, op.chunk) for op in order.stage_ops(pp, stage, micro, chunks))


def _peak_saved(
    order: PipelineSchedule, pp: int, stage: int, micro: int, chunks: int, saved: tuple[float, ...]
) -> float:
    """The most of ``saved`` (bytes per micro-batch of each chunk) held at once over the
    stage's ops: added at each F, freed at each B (at most what the memory walk holds)."""
    if not any(saved):
        return 0.0
    held = peak = 0.0
    for kind, chunk in _stage_ops(order, pp, stage, micro, chunks):
        if kind == "F":
            held += saved[chunk]
            peak = max(peak, held)
        elif kind == "B":
            held -= saved[chunk]
    return peak


@functools.lru_cache(maxsize=256)
def _paired(order: PipelineSchedule, pp: int, micro: int, chunks: int) -> bool:
    """Whether any stage's ops pair up under ``order`` (the kernel bound then times each
    stage by its resources)."""
    return any(op.paired for s in range(pp) for op in order.stage_ops(pp, s, micro, chunks))


def _layer_time(
    times: _Times,
    model: TransformerConfig,
    p: Precision,
    par: ParallelConfig,
    place: Placement,
    moe: bool,
    full: bool,
) -> tuple[float, float, float, float]:
    """A layer's kernels timed alone (:func:`layer_bound`) and what it saves: (sequential s,
    unit-s over the units, HBM s, activation bytes one micro-batch keeps for the backward),
    the first layer of its kind built alone as a chunk of one layer."""
    key = (model, p.name, par.tp, par.sp, par.cp, par.ep, par.micro_batch, par.seq,
           par.tp_overlap, par.recompute_modules, moe, full)  # fmt: skip
    held = times.layers.get(key)
    if held is not None:
        return held
    index = next(i for i in range(model.layers) if model.is_moe_layer(i) == moe)
    work = chunk_work(
        model, p, range(index, index + 1), micro_batch=par.micro_batch, seq=par.seq,
        tp=par.tp, sp=bool(par.sp), tp_overlap=par.tp_overlap,
        recompute="full" if full else ("none" if par.recompute == "full" else par.recompute),
        recompute_modules=par.recompute_modules, tp_group=place.tp_group, ep=par.ep,
        ep_group=place.ep_group, cp=par.cp, cp_group=place.cp_group,
        ep_units=par.ep_comm_units, shared_overlap=par.shared_expert_overlap,
    )  # fmt: skip
    kernels = _chunk_kernels(work)
    units, hbm = times.resources(kernels)
    held = times.layers[key] = (times.sequential(kernels), units, hbm, work.saved)
    return held


def _full_backwards(case: LlmCase) -> bool:
    """Whether the case's schedule runs no ``W`` op (every backward is whole: a rank's last
    op is then a backward whose input gradient the virtual stage before it waits for)."""
    order = SCHEDULES.get(case.schedule)
    pp = case.parallel.pp
    return not any(
        op.kind == "W"
        for s in range(pp)
        for op in order.stage_ops(pp, s, case.micro_batches, len(case.stages[s]))
    )


def _drain(case: LlmCase, passes: _Passes) -> list[float]:
    """Per stage, the least backward work that must follow its last op (s): that op is a
    whole backward of some chunk (no ``W`` ops), and the same micro-batch's backwards of
    every earlier virtual stage wait for it, one after another, each at least its least time
    (:class:`_Passes`); the least over the stage's chunks (whichever ends last)."""
    order = SCHEDULES.get(case.schedule)
    pp = case.parallel.pp
    place = {
        order.virtual_stage(c, s, pp): (s, c) for s in range(pp) for c in range(len(case.stages[s]))
    }
    before: dict[int, float] = {}
    total = 0.0
    for v in sorted(place):
        before[v] = total
        s, c = place[v]
        total += passes.backward[s][c]
    return [
        min(before[order.virtual_stage(c, s, pp)] for c in range(len(case.stages[s])))
        for s in range(pp)
    ]


def network_bound(case: LlmCase) -> float:
    """The network bound (s per iteration; module docstring) of a built case: its simulated
    ranks' collectives as the class-mode graph issues them (:func:`stage_collectives`),
    without building the graph."""
    times = _times_of(case.system)
    topology = times.topology
    assert topology is not None
    most = 0.0
    for s in range(case.parallel.pp):
        # every link of the dimensions a collective runs on (comm_bound), summed over the
        # collectives on the same dimensions; and one dimension's links of a communicator's
        # slice (slice_bounds), summed over the communicator's collectives
        sums: dict[tuple[object, ...], float] = {}
        for comm, count in stage_collectives(case, s).items():
            for key, t in _network_terms(times, topology, comm):
                sums[key] = sums.get(key, 0.0) + count * t
        most = max(most, *sums.values(), 0.0)
    return most


def stage_collectives(case: LlmCase, stage: int) -> Counter[Comm]:
    """The collectives a rank of pipeline stage ``stage`` issues in one iteration, counted,
    as :func:`~acesim.training.pipeline.pipeline_graph` issues them: each op's steps'
    (forward; backward, split between B and W where the schedule defers the W), under FSDP
    over DP each unit's parameter all-gather in every F and B and its gradient
    reduce-scatter in every B; otherwise, over DP, each chunk's gradient reduce-scatter
    (distributed optimizer) or all-reduce once, and with the distributed optimizer its
    parameter all-gather once. A test checks them against the graph's."""
    par, place, p = case.parallel, case.place, case.precision
    order = SCHEDULES.get(case.schedule)
    chunks = case.stages[stage]
    ops = order.stage_ops(par.pp, stage, case.micro_batches, len(chunks))
    deferred = {(op.chunk, op.micro) for op in ops if op.kind == "W"}
    # FSDP's units gather and reduce where a DP group or the host holds the shards
    sharded = par.zero == 3 and (place.dp_group is not None or par.offload_weights)
    gradient = grad_bytes(p, par.grad_fp32)
    out: Counter[Comm] = Counter()

    def dp(op: str, parts: list[tuple[Group, int, str]], nbytes: float, times: int = 1) -> None:
        for group, params, _ in parts:
            out[Comm(op, params * nbytes, None, group)] += times

    # ops alike (kind, chunk, whether its W is deferred) issue alike collectives
    alike = Counter(
        (op.kind, op.chunk, op.kind == "B" and (op.chunk, op.micro) in deferred) for op in ops
    )
    for (kind, chunk, split), times in alike.items():
        work = chunks[chunk]
        if kind == "F":
            steps = work.forward
        elif kind == "W":
            steps = work.weight_grad
        else:
            steps = work.input_grad if split else work.backward
        for step in steps:
            c = step.comm
            if c is not None:
                out[Comm(c.op, c.size, c.dims, c.group)] += times
        if sharded and kind != "W":
            for u in range(len(work.unit_params)):
                dp("all-gather", unit_parts(place, work, u), p.param_bytes, times)
                if kind == "B":
                    dp("reduce-scatter", unit_parts(place, work, u), gradient, times)
    if par.zero != 3:
        for work in chunks:
            dp("reduce-scatter" if par.zero >= 1 else "all-reduce", dp_parts(place, work), gradient)
            if par.zero >= 1:
                dp("all-gather", dp_parts(place, work), p.param_bytes)
    return out


def _network_terms(
    times: _Times, topology: Topology, comm: Comm
) -> list[tuple[tuple[object, ...], float]]:
    """A collective's least times (s), each keyed by the links it counts (memoised)."""
    terms = times.network.get(comm)
    if terms is None:
        axes = resolve(topology, comm.group if comm.group is not None else comm.dims)
        dims = tuple(a.dim for a in axes)
        terms = times.network[comm] = (
            [(("all", dims), comm_bound(topology, comm))]
            + [
                (("slice", comm.group, comm.dims, d), t)
                for d, t in slice_bounds(topology, comm).items()
            ]
            if dims
            else []
        )
    return terms
