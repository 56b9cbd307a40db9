"""LLM training runs: a model, a Megatron parallel configuration and a system, simulated.

:func:`make_llm_case` resolves everything once: the system (preset, file or table, with
``nodes`` nodes), the model (a :data:`~acesim.workload.llm.models.MODELS` name or a
:class:`~acesim.workload.llm.models.TransformerConfig`), the parallel configuration (checked
against the model and the NPU count), the placement of its groups on the network, each
stage's chunks (:func:`~acesim.workload.llm.block.chunk_work`) and every rank's memory
footprint (:mod:`acesim.workload.llm.memory`): a configuration whose largest rank does not fit
in ``npu.hbm_capacity`` is a ConfigError saying by how much and which term dominates.
:func:`run_llm` builds the graphs (:func:`~acesim.training.pipeline.pipeline_graph`) and runs
them, giving an :class:`~acesim.results.llm.LlmResult`, in one of two modes:

``class`` (the default)
    One simulated rank per pipeline stage: the TP/CP/DP/EP replicas of a stage run the same
    graph on a symmetric platform, so one representative stands for all of them; the
    representatives exchange the pipeline's sends and receives, and each collective within a
    stage's groups runs symmetric mode's per-group model (:mod:`acesim.network.classes`). An
    exact reduction: the same figures as exact mode (to rounding), at a cost that grows with
    the pipeline depth, not the GPU count. Where ranks differ (stragglers, a compute spread,
    link changes), or a stage's members would route their pipeline messages differently, the
    run is exact mode instead and the result says why (``mode``, ``mode_note``).
``exact``
    Every rank simulated.

The optimizer is Adam (Megatron's default and the published models' recipe).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ..config.experiment import RunOptions
from ..config.resolve import resolve_system
from ..config.system import NPUConfig, SystemConfig, defaults
from ..config.variation import Variation, check_placement
from ..engine.collector import collector_paused
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.kernels import Stream
from ..hardware.platform import Platform, SharedPlansByConfig, elaborate
from ..hardware.power import Meters
from ..hardware.variation import npu_configs
from ..precision import PRECISIONS, Precision
from ..results.energy import EnergyResult, platform_energy, run_windows
from ..results.llm import (
    POINT_INPUTS,
    LlmResult,
    compute_spans,
    idle_breakdown,
    rank_compute_times,
)
from ..results.protocol import assumptions, scalar_settings
from ..training import steady
from ..training.bounds import Attribution, attribution, collective_bounds
from ..training.compose import PassTimes, run_composed
from ..training.executor import Execution
from ..training.pipeline import PassSink, pipeline_graph
from ..training.schedules import SCHEDULES, PipelineSchedule, default_schedule
from ..training.strategy import decide, mode_note
from ..units import format_size
from ..workload.graph import Graph
from ..workload.llm.block import ChunkWork, chunk_work
from ..workload.llm.memory import TERMS, grad_bytes, rank_footprint
from ..workload.llm.models import MODELS, TransformerConfig, model_flops
from ..workload.llm.parallel import ParallelConfig, Placement, parse_parallel, placement
from ..workload.model import Compute
from ..workload.optimizer import state_bytes_per_param, update_kernel
from ..workload.placement import place_graph
from .case import check_math, run_options
from .estimate import Estimate, cost_name
from .graph_run import run_graph
from .how import How

__all__ = [
    "HOST_SYNC_NOTE",
    "host_note",
    "LlmCase",
    "make_llm_case",
    "execute_llm",
    "run_llm",
    "llm_graph",
    "optimizer_steps",
    "OPTIMIZER",
]

OPTIMIZER = "adam"

SystemLike = SystemConfig | str | Path | Mapping[str, Any]


@dataclass(frozen=True)
class LlmCase:
    """A resolved LLM training case (see the module docstring); ``options``: how to run it
    (its ``mode`` and what makes ranks differ; the other run options are the training-graph
    kind's)."""

    kind: ClassVar[str] = "llm"

    system: SystemConfig
    model: TransformerConfig
    parallel: ParallelConfig
    precision: Precision
    place: Placement
    micro_batches: int
    schedule: str
    stages: tuple[tuple[ChunkWork, ...], ...]
    memory: dict[str, float]
    memory_stage: int
    iterations: int = 1
    #: each pipeline stage's memory per GPU by term and in total (bytes)
    footprints: tuple[Mapping[str, float], ...] = ()
    options: RunOptions = field(default_factory=defaults(RunOptions))
    #: the memory check ran (make_llm_case's check_memory): run again on other options
    memory_checked: bool = True

    def with_system(self, system: SystemConfig) -> LlmCase:
        """The same case on another system (an endpoint variant)."""
        return replace(self, system=system)

    def with_options(self, **changes: Any) -> LlmCase:
        """The same case with some run options changed (validated; NPU types and a
        placement checked against the case as :func:`make_llm_case` checks them)."""
        case = replace(self, options=llm_options(self.options, **changes))
        _check_gpus(case)
        return case

    def with_endpoint(self, kind: str) -> LlmCase:
        """The same case with endpoint ``kind`` in its settings as configured."""
        ENDPOINT_KINDS.get(kind, "--endpoint")
        return self.with_system(self.system.with_endpoint(kind))


#: Run options LLM runs take (the others size training graphs: batch, loop, iterations...).
LLM_OPTIONS = (
    "mode", "search", "nodes", "stragglers", "compute_spread", "links", "npu_types", "placement",
    "max_messages", "max_micro_batches",
)  # fmt: skip


def llm_options(
    options: RunOptions | Mapping[str, Any] | None = None, **changes: Any
) -> RunOptions:
    """Validated run options of an LLM case; ConfigError naming ``run.<option>`` for one
    that does not apply to LLM runs (they size themselves by their parallel configuration
    and batch)."""
    opts = run_options(options, **changes)
    default = RunOptions.model_validate({})
    for name in RunOptions.model_fields:
        if name not in LLM_OPTIONS and getattr(opts, name) != getattr(default, name):
            raise ConfigError(
                f"run.{name}",
                "does not apply to LLM runs (they size themselves with nodes, the parallel "
                "configuration, global batch, micro-batch and sequence length)",
                getattr(opts, name),
            )
    return opts


def _model(model: TransformerConfig | str) -> TransformerConfig:
    if isinstance(model, TransformerConfig):
        return model
    return MODELS.get(model, "workload.name")


#: Simulation seconds per micro-batch of an LLM iteration, for the estimate in the refusal.
SECONDS_PER_MICRO_BATCH = 0.2


def make_llm_case(
    system: SystemLike,
    model: TransformerConfig | str,
    parallel: ParallelConfig,
    *,
    precision: str = "bf16",
    nodes: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    iterations: int = 1,
    check_memory: bool = True,
    options: RunOptions | Mapping[str, Any] | None = None,
    max_micro_batches: int | None = None,
    force: bool = False,
    layer_names: bool = True,
) -> LlmCase:
    """Resolve an LLM case (module docstring); ConfigErrors name the field at fault, among
    them more than ``max_micro_batches`` micro-batches an iteration (the work bound; default
    the options' ``max_micro_batches``). ``options``: how to run it (:func:`llm_options`;
    ``nodes`` is one of them); ``force`` accepts bare numbers implausible for their fields
    (:mod:`acesim.config.plausible`); ``layer_names`` False: layers alike share their
    kernels, named for the first (:func:`~acesim.workload.llm.block.chunk_work`'s
    ``names``): the same memory and work, for what reads only those (a plan's bounds), never
    for a run (its per-layer rows read the names)."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ConfigError("run.iterations", "must be a whole number of at least 1", iterations)
    changes: dict[str, Any] = {} if nodes is None else {"nodes": nodes}
    if max_micro_batches is not None:
        changes["max_micro_batches"] = max_micro_batches
    opts = llm_options(options, **changes)
    resolved = resolve_system(system, overrides=overrides, nodes=opts.nodes, force=force)
    cfg = _model(model)
    p = PRECISIONS.get(precision, "workload.precision")
    check_math(resolved, p.math, precision)
    parallel.check_model(cfg)
    _check_npu_supports(parallel, resolved.npu)
    shape = tuple(resolved.network.shape)
    place = placement(parallel, shape)
    micro = parallel.micro_batches(place.dp)
    _check_work_bound(parallel, place, micro * iterations, opts.max_micro_batches)
    kind = parallel.schedule or default_schedule(parallel.vpp)
    order = SCHEDULES.get(kind, "parallel.schedule")
    order.check(parallel.pp, parallel.vpp, micro)
    _check_offload_schedule(parallel, order, micro)
    stages = _stages(cfg, p, parallel, place, order, layer_names)
    sizes = _footprints(stages, order, p, parallel, place, micro)
    worst_stage = max(range(len(sizes)), key=lambda s: sizes[s]["total"])
    case = LlmCase(
        resolved,
        cfg,
        parallel,
        p,
        place,
        micro,
        kind,
        stages,
        sizes[worst_stage],
        worst_stage,
        iterations,
        tuple(sizes),
        opts,
        check_memory,
    )
    if check_memory and not opts.npu_types:
        _check_memory(cfg, parallel, p, resolved, sizes[worst_stage], worst_stage)
    _check_gpus(case)
    return case


def _check_npu_supports(parallel: ParallelConfig, npu: NPUConfig) -> None:
    """Refuse what the parallel configuration asks of the NPU that it lacks: a host link to
    offload to, more compute units than it has for expert-parallel communication."""
    if parallel.offload is not None and npu.host_link_bandwidth is None:
        raise ConfigError(
            "npu.host_link_bandwidth",
            f"must be set to offload {parallel.offload} ({npu.name} has no host link)",
        )
    if parallel.offload in ("optimizer", "weights") and npu.host_memory_bandwidth is None:
        what = "the optimizer" if parallel.offload == "optimizer" else "weights (FSDP's CPU step)"
        raise ConfigError(
            "npu.host_memory_bandwidth",
            f"must be set to offload {what} (the CPU step's bound; {npu.name} has none)",
        )
    units = npu.compute_units
    if parallel.ep_comm_units is not None and parallel.ep_comm_units >= units:
        raise ConfigError(
            "parallel.ep_comm_units",
            f"must be fewer than the {units} compute units of {npu.name}",
            parallel.ep_comm_units,
        )


def _check_offload_schedule(parallel: ParallelConfig, order: PipelineSchedule, micro: int) -> None:
    """Layer-granular offload reloads a layer ahead of its backward: a schedule that defers
    weight gradients to W ops is refused (not modelled)."""
    if parallel.offload_layers is None:
        return
    if any(op.kind == "W" for op in order.stage_ops(parallel.pp, 0, micro, parallel.vpp)):
        raise ConfigError(
            "parallel.offload_layers",
            f"with the {order.name} schedule's deferred weight gradients is not modelled",
            parallel.offload_layers,
        )


def _check_work_bound(
    parallel: ParallelConfig, place: Placement, micro_batches: int, bound: int
) -> None:
    """Refuse a run of more than ``bound`` micro-batches in all (run.max_micro_batches),
    with an estimate of how long it would take."""
    if micro_batches > bound:
        hours = micro_batches * SECONDS_PER_MICRO_BATCH / 3600
        raise ConfigError(
            "parallel.global_batch",
            f"makes {micro_batches} micro-batches to simulate ({parallel.global_batch} "
            f"sequences / (micro-batch {parallel.micro_batch} x dp {place.dp}), about "
            f"{hours:.3g} hours at {SECONDS_PER_MICRO_BATCH} s each), more than the bound "
            f"{bound} (run.max_micro_batches; --max-micro-batches N "
            "raises it knowingly)",
            parallel.global_batch,
        )


def _footprints(
    stages: tuple[tuple[ChunkWork, ...], ...],
    order: PipelineSchedule,
    p: Precision,
    parallel: ParallelConfig,
    place: Placement,
    micro: int,
) -> list[dict[str, float]]:
    """Each pipeline stage's memory per GPU by term and in total (bytes)."""
    return [
        rank_footprint(
            chunks,
            order.stage_ops(parallel.pp, s, micro, len(chunks)),
            p,
            OPTIMIZER,
            dp=place.grad_ranks,
            distributed_optimizer=parallel.zero >= 1,
            expert_dp=place.expert_dp,
            grad_fp32=parallel.grad_fp32,
            fsdp=parallel.zero == 3,
            offload_activations=parallel.offload_activations,
            offload_layers=parallel.offload_layers or 0,
            offload_optimizer=parallel.offload_optimizer,
            offload_weights=parallel.offload_weights,
        )
        for s, chunks in enumerate(stages)
    ]


def _stages(
    model: TransformerConfig,
    p: Precision,
    parallel: ParallelConfig,
    place: Placement,
    order: PipelineSchedule,
    names: bool = True,
) -> tuple[tuple[ChunkWork, ...], ...]:
    pp, v = parallel.pp, parallel.vpp
    split = parallel.layer_split(model.layers)  # one chain: pp x vpp virtual stages
    chain = pp * v
    starts = [sum(split[:vs]) for vs in range(chain + 1)]
    out = []
    for s in range(pp):
        chunks = []
        for c in range(v * order.directions):
            vs = order.virtual_stage(c, s, pp) % chain  # its place in its chain
            chunks.append(
                chunk_work(
                    model,
                    p,
                    range(starts[vs], starts[vs + 1]),
                    micro_batch=parallel.micro_batch,
                    seq=parallel.seq,
                    tp=parallel.tp,
                    sp=bool(parallel.sp),
                    tp_overlap=parallel.tp_overlap,
                    recompute=parallel.recompute,
                    recompute_modules=parallel.recompute_modules,
                    tp_group=place.tp_group,
                    embedding=vs == 0,
                    head=vs == chain - 1,
                    ep=parallel.ep,
                    ep_group=place.ep_group,
                    cp=parallel.cp,
                    cp_group=place.cp_group,
                    units=parallel.zero == 3 or parallel.offload_layers is not None,
                    recompute_layers=parallel.recompute_layers,
                    ep_units=parallel.ep_comm_units,
                    shared_overlap=parallel.shared_expert_overlap,
                    names=names,
                )
            )
        out.append(tuple(chunks))
    return tuple(out)


def misfit(sizes: Mapping[str, float], capacity: float) -> str | None:
    """The memory term that dominates ``sizes`` (one GPU's bytes by term and ``total``) when
    they do not fit in ``capacity`` bytes; None when they fit."""
    if sizes["total"] <= capacity:
        return None
    return max(TERMS, key=lambda t: sizes[t])


def _check_memory(
    model: TransformerConfig,
    parallel: ParallelConfig,
    p: Precision,
    system: SystemConfig,
    sizes: Mapping[str, float],
    stage: int,
    npu: NPUConfig | None = None,
    field: str = "npu.hbm_capacity",
) -> None:
    """ConfigError naming ``field`` when ``sizes`` (pipeline stage ``stage``'s per GPU) do not
    fit in the HBM of ``npu`` (None: the system's)."""
    capacity = (npu or system.npu).hbm_capacity
    dominant = misfit(sizes, capacity)
    if dominant is None:
        return
    parts = ", ".join(f"{t} {format_size(sizes[t])}" for t in TERMS)
    advice = ["more tensor or pipeline parallelism"]
    if parallel.zero == 0:
        advice.append("the distributed optimizer (zero=1)")
    if parallel.recompute != "full":
        advice.append("recomputation")
    if parallel.micro_batch > 1:
        advice.append("a smaller micro-batch")
    held = f"the {format_size(capacity)} of HBM" + (f" of {npu.name}" if npu else "")
    raise ConfigError(
        field,
        f"{model.name} with {parallel.describe()} ({p.name}) needs "
        f"{format_size(sizes['total'])} per GPU on pipeline stage {stage} ({parts}), "
        f"{format_size(sizes['total'] - capacity)} more than {held}; "
        f"{dominant} dominate{'s' if not dominant.endswith('s') else ''}: use "
        + ", ".join(advice[:-1])
        + (" or " if len(advice) > 1 else "")
        + advice[-1],
        hint=f"acesim plan -w {model.name}, with the same system and nodes, ranks the "
        "configurations that fit",
    )


def _gpu_types(case: LlmCase) -> list[tuple[str, NPUConfig, list[int]]]:
    """(field, NPU configuration, NPU positions) of each other NPU type the case runs on
    (``run.npu_types``) and, first, the system's NPU where some positions keep it; one entry
    (the system's) when nothing varies. ConfigError naming the field for a bad entry."""
    opts, npus = case.options, case.place.npus
    check_placement(opts.placement, npus)
    if not opts.npu_types:
        return [("npu", case.system.npu, list(range(npus)))]
    configs = npu_configs(opts.variation, case.system, npus)
    out = []
    owned: set[int] = set()
    for i, entry in enumerate(opts.npu_types):
        positions = entry.rank_list()
        owned.update(positions)
        out.append((f"run.npu_types[{i}]", configs[positions[0]], positions))
    rest = [q for q in range(npus) if q not in owned]
    return [("npu", case.system.npu, rest)] * bool(rest) + out


def _check_gpus(case: LlmCase) -> None:
    """Mixed GPUs (``run.npu_types``): each type runs the precision's matrix math, has more
    units than the expert all-to-alls' budget, and holds the largest pipeline stage it hosts
    (workload rank ``r`` on NPU position ``run.placement[r]``); a placement is a permutation
    of the NPUs. ConfigError naming the entry otherwise."""
    types = _gpu_types(case)
    if len(types) == 1 and types[0][0] == "npu":
        return  # the system's NPU: checked by make_llm_case
    par, p = case.parallel, case.precision
    stage_of = _position_stages(case)
    for where, npu, positions in types:
        if p.math not in npu.matrix_flops:
            raise ConfigError(
                where,
                f"{npu.name} lists no {p.math} matrix peak, the math of {p.name} (it lists "
                f"{', '.join(npu.matrix_flops)})",
                npu.name,
            )
        if par.ep_comm_units is not None and par.ep_comm_units >= npu.compute_units:
            raise ConfigError(
                "parallel.ep_comm_units",
                f"must be fewer than the {npu.compute_units} compute units of {npu.name}",
                par.ep_comm_units,
            )
        if case.memory_checked:
            stage = max({stage_of[q] for q in positions}, key=lambda s: case.footprints[s]["total"])
            _check_memory(
                case.model,
                par,
                p,
                case.system,
                case.footprints[stage],
                stage,
                *((None, "npu.hbm_capacity") if where == "npu" else (npu, where)),
            )


def _position_stages(case: LlmCase) -> list[int]:
    """The pipeline stage each NPU position runs (workload rank ``r`` on position
    ``run.placement[r]``)."""
    place, placed = case.place, case.options.placement
    out = [0] * place.npus
    for rank in range(place.npus):
        out[placed[rank] if placed is not None else rank] = place.stage(rank)
    return out


def _update(p: Precision, params: float, gradient_bytes: int) -> Stream:
    """The optimizer step of ``params`` parameters (:func:`~acesim.workload.optimizer.
    update_kernel`) reading the main gradients in ``gradient_bytes`` per element instead of
    the parameter dtype."""
    kernel = update_kernel(OPTIMIZER, p, params)
    extra = params * (gradient_bytes - p.param_bytes)
    return Stream(kernel.read_bytes + extra, kernel.write_bytes, kernel.flops, name=kernel.name)


def _host_update(p: Precision, params: float, gradient_bytes: int) -> tuple[float, float, float]:
    """The offloaded optimizer share of ``params`` parameters (Megatron-core's
    ``HybridDeviceOptimizer`` with ``param_update_in_fp32``): main gradients copied to the host
    in ``gradient_bytes`` per element; the CPU step streams the FP32 gradient copy, master
    weight and moments through host memory (read all, write the weight and moments:
    :func:`~acesim.workload.optimizer.update_bytes_per_param` without the half-precision
    copy, which stays on the GPU); the updated FP32 weights copied back. Bytes each."""
    state = state_bytes_per_param(OPTIMIZER, p)  # master weight and moments
    fp32 = 4.0  # the host's gradient copy and the weights copied back
    step = fp32 + 2 * state  # read the gradient copy and the state; write the state
    return params * gradient_bytes, params * step, params * fp32


def optimizer_steps(case: LlmCase) -> tuple[list[Compute], list[tuple[float, float, float]]]:
    """Each pipeline stage's optimizer step on the GPU (its share of the stage's parameters:
    over the DP ranks with the distributed optimizer or FSDP) and, where the optimizer (or
    FSDP's whole shard) steps on the host, each stage's host share (:func:`_host_update`'s
    bytes; empty where nothing is offloaded)."""
    par, p = case.parallel, case.precision
    gradient = grad_bytes(p, par.grad_fp32)
    updates: list[Compute] = []
    hosted: list[tuple[float, float, float]] = []
    offload = par.offload_optimizer
    for chunks in case.stages:
        params = sum(c.params for c in chunks)
        experts = sum(c.expert_params for c in chunks)
        share = (
            (params - experts) / case.place.grad_ranks + experts / case.place.expert_dp
            if par.zero >= 1
            else params
        )
        if par.offload_weights:  # FSDP's CPU offload: the whole shard steps on the CPU
            hosted.append((0.0, _host_update(p, share, gradient)[1], 0.0))
            updates.append(Compute())
            continue
        if offload:
            hosted.append(_host_update(p, offload * share, gradient))
            share *= 1 - offload
        updates.append(Compute(kernels=(_update(p, share, gradient),)))
    return updates, hosted


def llm_graph(case: LlmCase, *, classes: bool = False, passes: PassSink | None = None) -> Graph:
    """Every rank's execution graph of the case's iterations (``classes``: one per pipeline
    stage, class mode; ``passes``: the composed graph, each pass one timer handed to this
    sink, :mod:`acesim.training.compose`)."""
    par, p = case.parallel, case.precision
    zero = par.zero >= 1
    updates, hosted = optimizer_steps(case)
    return pipeline_graph(
        case.stages,
        case.place,
        case.micro_batches,
        kind=case.schedule,
        dp_op="reduce-scatter" if zero else "all-reduce",
        grad_bytes=grad_bytes(p, par.grad_fp32),
        param_bytes=p.param_bytes,
        update=updates,
        gather_params=zero,
        fsdp=par.zero == 3,
        iterations=case.iterations,
        name=case.model.name,
        classes=classes,
        offload_activations=par.offload_activations,
        offload_layers=par.offload_layers or 0,
        host_update=hosted or None,
        host_params=p.state_bytes if par.offload_weights else 0.0,
        launch_time=None if par.cuda_graphs else case.system.host.launch_time,
        passes=passes,
    )


def _order_problem(case: LlmCase) -> str | None:
    """Why the rank order keeps class mode out (each stage must be one block of ranks)."""
    if case.place.stages_outermost:
        return None
    return (
        f"order {case.parallel.order} puts the pipeline stages inside data parallelism: a "
        "stage is not one block of ranks"
    )


def fsdp_over_dp(case: LlmCase) -> bool:
    """FSDP (ZeRO-3) sharding over a DP group of more than one rank."""
    return case.parallel.zero == 3 and case.place.dp_group is not None


def compose_problem(case: LlmCase) -> str | None:
    """Why the case's iteration cannot be composed from passes simulated alone
    (:mod:`acesim.training.compose`; None: it can)."""
    if fsdp_over_dp(case) and (case.parallel.pp > 1 or case.parallel.offload_weights):
        return (
            "FSDP gathers each unit's parameters and reduce-scatters its gradients in every "
            "pass, beside the pass before and after it: with pipeline stages (or its CPU "
            "offload's copies) no pass runs in one context"
        )
    if case.parallel.offload_layers:
        return (
            "layer-granular activation offload copies each layer's activations out in a "
            "forward and back in its backward, within both passes: no pass runs alone"
        )
    return None


@collector_paused()
def execute_llm(case: LlmCase, how: How = How()) -> tuple[LlmResult, Execution]:
    """Simulate the case as ``how`` says and summarise it (:mod:`acesim.results.llm`), in the
    strategy :func:`~acesim.training.strategy.decide` chooses: by default mode ``composed``
    (class mode's iteration, one rank per pipeline stage, composed from passes simulated
    alone: :mod:`acesim.training.compose`), class mode where the iteration does not compose
    (FSDP over DP, layer-granular offload, a trace: the result's ``mode_note`` says why);
    ``case.options.mode`` ``class`` asks for class mode's full simulation, ``exact`` for
    exact mode, which something that makes ranks differ also chooses (the note says what)."""
    opts = case.options
    uncomposable = compose_problem(case)
    requested = opts.mode
    if requested == "symmetric":  # the default: composed where its error is within 0.1%
        requested = "composed"
        if how.trace and uncomposable is None:
            uncomposable = "a trace records every kernel"
    # FSDP without pipeline stages: each pass keyed by the one before it, whose last
    # gradient reduce-scatter runs on into it (training.compose, PassTimes.contexts)
    sink = PassTimes(contexts=fsdp_over_dp(case)) if requested == "composed" else None
    # a composed iteration's steady state extrapolated from smaller runs: the graph decided
    # on is the smaller one's
    sizes = _steady_sizes(case) if sink is not None and uncomposable is None else None
    first = case if sizes is None else replace(case, micro_batches=sizes[0])

    def graphs(reduced: bool) -> Graph:
        composed = reduced and uncomposable is None
        graph = llm_graph(
            first if composed else case, classes=reduced, passes=sink if composed else None
        )
        if reduced or opts.placement is None:
            return graph
        return place_graph(graph, opts.placement, elaborate(case.system))

    strategy, graph = decide(
        case.system,
        graphs,
        requested=requested,
        variation=opts.variation,
        placed=opts.placement is not None,
        trace=how.trace,
        problem=_order_problem(case) if requested != "exact" else None,
        uncomposable=uncomposable,
    )
    sums: RunSums | None = None
    if strategy.composed and sink is not None:
        # the first composed run is estimated with the passes simulated alone before it (the
        # work bound counts their messages), and a steady state's with the second run it
        # plans; the rounds and runs after it are told nothing
        runs = 1.0 if sizes is None else sum(sizes) / sizes[0]
        told = [_with_passes(how, sink, runs), replace(how, on_estimate=None)]
        plans: SharedPlansByConfig = {}  # the kernels' plans, made once for every platform

        def composed(at: LlmCase, passes: PassTimes, graph: Graph) -> Execution:
            return run_composed(
                passes,
                graph,
                platform=lambda: Platform(case.system, strategy, plans=plans),
                rebuild=lambda: llm_graph(at, classes=True, passes=passes),
                run=lambda g: run_graph(
                    case.system,
                    strategy,
                    g,
                    kind="llm",
                    how=told.pop(0) if len(told) > 1 else told[0],
                    plans=plans,
                ),
            )

        if sizes is None:
            execution = composed(case, sink, graph)
        else:
            execution, sums = _steady(case, sizes, composed(first, sink, graph), sink, composed)
    else:
        execution = run_graph(case.system, strategy, graph, kind="llm", how=how)
    note = mode_note(strategy, execution)
    return _summary(case, execution, note, how.variant, sums), execution


def _steady(
    case: LlmCase,
    sizes: tuple[int, int],
    first: Execution,
    sink: PassTimes,
    composed: Callable[[LlmCase, PassTimes, Graph], Execution],
) -> tuple[Execution, RunSums | None]:
    """``case``'s composed iteration from its steady state (:mod:`acesim.training.steady`):
    ``first`` is its composed run at ``sizes[0]`` micro-batches (with ``sink``), ``composed``
    runs another size. The runs go on a period at a time from ``sizes[1]`` until one is the
    one before with one period inserted, whose sums are extrapolated to the case's
    micro-batches; or, past the budget, the case is composed at its own size, its sums its
    own (None)."""
    small, large = sizes
    spent = small
    before, passes, rounds = first, sink, 0
    why: str | None = None
    while steady.within_budget(spent + large, case.micro_batches, beside_dp=_beside_dp(case)):
        spent += large
        at = replace(case, micro_batches=large)
        passes = passes.seeded()
        second = composed(at, passes, llm_graph(at, classes=True, passes=passes))
        one, two = before.composed, second.composed
        assert one is not None and two is not None
        rounds += one.rounds
        why = steady.inserted_period(before, second)
        if why is None:
            n = steady.periods_past(small, large, case.micro_batches)
            try:
                sums = steady.extrapolated(run_sums(before), run_sums(second), n)
            except ValueError as exc:
                why = f"the two runs' figures differ in form ({exc})"
                break
            second.composed = replace(
                two,
                distinct=len(passes.memos),
                timed=round(steady.extrapolated(one.timed, two.timed, n)),
                expanded=round(steady.extrapolated(one.expanded, two.expanded, n)),
                rounds=rounds + two.rounds,
                converged=one.converged and two.converged,
                extrapolated=(small, large),
            )
            return second, sums
        before, small, large = second, large, 2 * large - small
    passes = passes.seeded()
    execution = composed(case, passes, llm_graph(case, classes=True, passes=passes))
    assert execution.composed is not None
    why = why or "the runs that would stand for it cost too much"
    execution.composed = replace(execution.composed, not_extrapolated=why)
    return execution, None


def _steady_sizes(case: LlmCase) -> tuple[int, int] | None:
    """The first two reduced sizes whose composed runs may stand for ``case``'s composable
    iteration (:func:`acesim.training.steady.reduced_sizes`; None: it runs at its size). One
    iteration only: a period inserted in each of several would move them apart. Not where
    each pass is measured in its context (FSDP over DP: :attr:`PassTimes.contexts`): a
    context that does not hold in a smaller run expands every pass of it, and its seeded
    sink would carry that into the runs after it (Llama 3 8B FSDP, ``llm_scale.py`` ``8b``:
    every pass simulated in full, 0.10 -> 0.55 CPU s, before this rule)."""
    if not steady.ENABLED or case.iterations != 1 or fsdp_over_dp(case):
        return None
    order = SCHEDULES.get(case.schedule)
    vpp, chunks = case.parallel.vpp, len(case.stages[0])
    return steady.reduced_sizes(
        order, case.place.pp, vpp, chunks, case.micro_batches, beside_dp=_beside_dp(case)
    )


def _beside_dp(case: LlmCase) -> bool:
    """DP collectives run beside the case's passes (a DP or expert-DP group)."""
    return case.place.dp_group is not None or case.place.expert_dp_group is not None


def _with_passes(how: How, sink: PassTimes, runs: float = 1.0) -> How:
    """``how`` with its estimate counting the passes ``sink`` simulated alone too; ``runs``:
    the composed runs the first one's estimate stands for, in its sizes (a steady state's
    first two: :mod:`acesim.training.steady`)."""
    told = how.on_estimate
    if told is None:
        return how

    def estimate(composed: Estimate) -> None:
        told(
            replace(
                composed,
                messages=round(composed.messages * runs) + sink.alone_messages,
                kernels=round(composed.kernels * runs) + sink.alone_kernels,
                nodes=round(composed.nodes * runs),
                cost=cost_name("llm", "composed"),
            )
        )

    return replace(how, on_estimate=estimate)


@dataclass
class RunSums:
    """What an LLM run's result sums over its run (s, per the whole run; the NPUs' counters):
    the figures a steady state's extrapolation carries from two runs to the iteration
    (:mod:`acesim.training.steady`), the ratios following from them."""

    makespan: float
    compute: float
    bubble: float
    exposed: dict[str, float]
    bound_by: Attribution | None  # NPU 0's bound attribution's sums (None: not recorded)
    comm_by: dict[str, float]
    computes: list[float]  # each simulated rank's compute time per iteration
    windows: list[Meters] | None  # each simulated NPU's counters (None: no power model)


def run_sums(execution: Execution) -> RunSums:
    """The sums of ``execution`` (:class:`RunSums`)."""
    compute, bubble, exposed = idle_breakdown(execution)
    bound_by: Attribution | None = None
    comm_by: dict[str, float] = {}
    if execution.bounds is not None:
        kernels = compute_spans(
            execution,
            0,
            [
                (r.start, r.end)
                for r in execution.records[0].values()
                if r.node.kind == "compute" and r.end > r.start
            ],
        )
        bound_by = attribution(execution.bounds, kernels, 0.0, execution.makespan)
        comm_by = collective_bounds(execution.bounds, 0.0, execution.makespan, waiting=False)
    return RunSums(
        makespan=execution.makespan,
        compute=compute,
        bubble=bubble,
        exposed=exposed,
        bound_by=bound_by,
        comm_by=comm_by,
        computes=rank_compute_times(execution),
        windows=run_windows(execution.platform, execution.added_meters),
    )


def _summary(
    case: LlmCase, execution: Execution, note: str, variant: str, sums: RunSums | None = None
) -> LlmResult:
    """The result of ``case``'s ``execution`` (:mod:`acesim.results.llm`), of ``sums`` where
    given (else the execution's own: :func:`run_sums`)."""
    sums = run_sums(execution) if sums is None else sums
    ranks = len(execution.records)
    iters = case.iterations
    iteration = sums.makespan / iters
    compute, bubble, exposed = sums.compute, sums.bubble, sums.exposed
    per = ranks * iters
    par = case.parallel
    npus = case.place.npus
    dtype = case.precision.math
    flops = model_flops(case.model, par.global_batch, par.seq)
    system = case.system
    raw = {} if sums.bound_by is None else sums.bound_by.seconds()
    bound_by = dict(sorted(raw.items(), key=lambda kv: (-kv[1], kv[0])))
    comm_by = sums.comm_by
    return LlmResult(
        model=case.model.name,
        system=system.name,
        npus=npus,
        parallel=replace(par, dp=case.place.dp).describe(),  # dp=auto resolved
        schedule=case.schedule,
        precision=case.precision.name,
        global_batch=par.global_batch,
        micro_batch=par.micro_batch,
        seq=par.seq,
        micro_batches=case.micro_batches,
        iterations=iters,
        iteration_time=iteration,
        tokens_per_s_per_gpu=par.global_batch * par.seq / (iteration * npus),
        mfu=_mfu(flops, iteration, execution, npus, dtype),
        mfu_dtype=dtype,
        compute_time=compute / per,
        bubble_time=bubble / per,
        bubble_fraction=bubble / per / iteration,
        exposed={k: v / per for k, v in exposed.items()},
        memory=dict(case.memory),
        memory_stage=case.memory_stage,
        hbm_capacity=system.npu.hbm_capacity,
        endpoint=system.endpoint.kind,
        mode="composed" if execution.composed is not None else execution.platform.strategy.mode,
        mode_note=note,
        notes=_model_notes(case),
        assumptions=assumptions(system),
        energy=_energy(execution, sums.windows, iters, npus, par.global_batch * par.seq),
        variant=variant or ENDPOINT_KINDS.get(system.endpoint.kind).label,
        settings=scalar_settings(system.endpoint.settings()),
        bound_by=bound_by,
        comm_bound_by=comm_by,
        stages=_stage_rows(case, execution, sums.computes, iteration),
        provenance=system.provenance.to_dict(),
        idle_note=ENDPOINT_KINDS.get(system.endpoint.kind).idle_note(_ops(execution)) or "",
    )


HOST_SYNC_NOTE = (
    "host time not modelled: with EP > 1 Megatron-core's alltoall dispatcher copies the "
    "token counts to the host and synchronises before every MoE layer's forward dispatch "
    "(token_dispatcher.py, 'before_ep_alltoall'), so the host cannot run ahead of the GPU "
    "across layers and eager kernel launches can set a layer's pace at small micro-batches; "
    "this system states no [host] (host.op_time, host.ops_per_launch: "
    "acesim.training.host, docs/validation.md)"
)
"""The LLM result's note on MoE runs with expert parallelism on a system whose host is not
modelled: what acesim leaves out there."""


def host_note(launch_time: float) -> str:
    """The LLM result's note on MoE runs with expert parallelism whose host is modelled."""
    return (
        "host time modelled at each MoE forward dispatch's host synchronisation (Megatron-core's "
        f"alltoall dispatcher): {launch_time * 1e6:.1f} us a kernel launch (host.op_time x "
        "host.ops_per_launch, the latter fitted on one GPT-OSS row: acesim.training.host, "
        "docs/validation.md)"
    )


TP_OVERLAP_NOTE = (
    "TP communication overlap likely optimistic: the public runs with it in the validation "
    "corpus (Megatron-Bridge's userbuffers overlap at TP 4 and 8) come out faster in acesim "
    "than measured, by more than the rows without TP, and closer when simulated without the "
    "overlap; what its GEMMs lose beside their transfers is not found (docs/validation.md, "
    "'Llama 3.1 405B')"
)
"""The LLM result's note on runs with TP communication overlap: a known bias of the model."""


def _model_notes(case: LlmCase) -> list[str]:
    """The model's own notes; the host's (:data:`HOST_SYNC_NOTE`, :func:`host_note`) when its
    MoE layers dispatch over an EP group with launches not captured in CUDA graphs; the TP
    overlap's (:data:`TP_OVERLAP_NOTE`) when the run overlaps TP communication."""
    notes = [case.model.notes] if case.model.notes else []
    if case.model.experts and case.parallel.ep > 1 and not case.parallel.cuda_graphs:
        launch = case.system.host.launch_time
        notes.append(HOST_SYNC_NOTE if launch is None else host_note(launch))
    if case.parallel.tp_overlap and case.parallel.tp > 1:
        notes.append(TP_OVERLAP_NOTE)
    return notes


def _ops(execution: Execution) -> set[str]:
    """The collective operations the run's graph holds."""
    return {
        r.node.op or "all-reduce"
        for records in execution.records
        for r in records.values()
        if r.node.kind == "collective"
    } | {
        node.op or "all-reduce"
        for rank in range(len(execution.added_spans))
        for node, _, _ in execution.spans(rank, "collective")
    }


def _stage_rows(
    case: LlmCase, execution: Execution, computes: list[float], iteration: float
) -> list[dict[str, Any]]:
    """Each pipeline stage's layers, time and memory (:data:`~acesim.results.llm.
    LlmResult.stages`): the imbalance of uneven stages; with every GPU simulated, its
    slowest GPU (NPU position) and that GPU's compute time (a straggler or a slower NPU
    type, whose stage the others wait for). ``computes``: each simulated rank's compute
    time per iteration (s); ``iteration``: the iteration time (s)."""
    classes = execution.graph.classes is not None
    stage_of = list(range(case.place.pp)) if classes else _position_stages(case)
    members: list[list[int]] = [[] for _ in case.stages]
    for q in range(len(computes)):
        members[stage_of[q]].append(q)
    rows = []
    for s, chunks in enumerate(case.stages):
        held = members[s]
        compute = sum(computes[q] for q in held) / len(held) if held else 0.0
        slowest = max(held, key=lambda q: computes[q]) if held and not classes else None
        rows.append(
            {
                "stage": s,
                "layers": sum(c.layers for c in chunks),
                "embedding": any(c.embedding for c in chunks),
                "loss": any(c.head for c in chunks),
                "compute_time": compute,
                "idle_time": iteration - compute if held else 0.0,
                "memory": case.footprints[s]["total"],
                "slowest_npu": slowest,
                "slowest_compute": None if slowest is None else computes[slowest],
                "slowest_type": (
                    None if slowest is None else execution.platform.npus[slowest].config.name
                ),
            }
        )
    return rows


def _mfu(flops: float, iteration: float, execution: Execution, npus: int, dtype: str) -> float:
    """Model FLOPs per iteration over what the ``npus`` GPUs' dense matrix peaks in ``dtype``
    do in ``iteration`` seconds: the system's NPU's peak times ``npus``, or each NPU's own
    where they differ (mixed GPUs: every NPU simulated)."""
    npu = execution.platform.system.npu
    configs = [n.config for n in execution.platform.npus]
    if all(c is npu or c == npu for c in configs):
        return flops / (iteration * npus * npu.matrix_peak(dtype))
    return flops / (iteration * math.fsum(c.matrix_peak(dtype) for c in configs))


def _energy(
    execution: Execution, windows: list[Meters] | None, iterations: int, npus: int, tokens: int
) -> EnergyResult | None:
    """The energy of the run's NPU counters ``windows`` (:func:`~acesim.results.energy.
    run_windows`; None: no power model) with its per-token figure (``npus`` NPUs train on
    ``tokens`` tokens an iteration)."""
    if windows is None:
        return None
    energy = platform_energy(execution.platform, windows, iterations)
    energy.per_token = energy.per_iteration * npus / tokens
    return energy


def run_llm(
    case: LlmCase,
    *,
    trace: bool = False,
    mode: str | None = None,
    variation: Variation | None = None,
) -> tuple[LlmResult, Execution]:
    """Simulate the case (:func:`execute_llm`); ``mode`` (``composed``, ``class`` or
    ``exact``; None: the case's, by default composed where it applies) and ``variation``
    (stragglers, spread, link changes) replace the case's run options. Returns the result
    and the execution; a composed iteration extrapolated from its steady state returns the
    execution of its larger reduced run (``execution.composed.extrapolated``:
    :mod:`acesim.training.steady`)."""
    changes: dict[str, Any] = {}
    if mode is not None:
        if mode not in ("class", "exact", "composed"):
            raise ConfigError("run.mode", "must be one of class, exact, composed", mode)
        changes["mode"] = mode
    if variation is not None:
        changes.update(variation.run_options())
    if changes:
        case = case.with_options(**changes)
    return execute_llm(case, How(trace=trace))


def make_llm(
    system: SystemLike,
    model: TransformerConfig | str,
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    parallel: str | ParallelConfig = "",
    global_batch: int | None = None,
    micro_batch: int = 1,
    seq: int | None = None,
    recompute: str | None = None,
    precision: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    iterations: int = 1,
    force: bool = False,
    **option_changes: Any,
) -> LlmCase:
    """An LLM case from ``acesim run``'s inputs: ``parallel`` as text (``tp=4,pp=8``; sizes
    by :func:`~acesim.workload.llm.parallel.parse_parallel`, ``global_batch`` defaulting to
    the smallest the configuration runs (:func:`smallest_global_batch`), ``seq`` to the
    model's) or a ParallelConfig; ``recompute`` appended to it; run options as ``options``
    and keywords (``nodes=4``, ``mode="exact"``); ``force`` accepts implausible bare
    numbers."""
    cfg = _model(model)
    opts = llm_options(options, **option_changes)
    if isinstance(parallel, ParallelConfig):
        par = parallel
    else:
        if recompute is not None and recompute not in ("none", "selective", "full"):
            raise ConfigError("parallel.recompute", "must be none, selective or full", recompute)
        text = ",".join(t for t in (parallel, recompute and f"recompute={recompute}") if t)
        par = parse_parallel(
            text,
            global_batch=global_batch if global_batch is not None else micro_batch,
            micro_batch=micro_batch,
            seq=seq if seq is not None else cfg.seq,
            field="parallel",
        )
        if global_batch is None:
            resolved = resolve_system(system, overrides=overrides, nodes=opts.nodes, force=force)
            batch = smallest_global_batch(par, tuple(resolved.network.shape))
            par = replace(par, global_batch=batch) if batch != par.global_batch else par
    return make_llm_case(
        system,
        cfg,
        par,
        precision="bf16" if precision is None else precision,
        overrides=overrides,
        iterations=iterations,
        options=opts,
        force=force,
    )


def smallest_global_batch(parallel: ParallelConfig, shape: tuple[int, ...]) -> int:
    """The smallest global batch ``parallel`` runs on a network of dimension sizes ``shape``
    (sequences): one micro-batch per data-parallel replica, times the fewest micro-batches
    per pipeline its schedule accepts (interleaving: a multiple of the stages; DualPipe: an
    even count, at least two per stage). Where no count up to 4 x stages x directions runs,
    one micro-batch a replica, for the configuration's own error to say why."""
    dp = placement(parallel, shape).dp
    order = SCHEDULES.get(parallel.schedule or default_schedule(parallel.vpp), "parallel.schedule")
    chunks = parallel.vpp * order.directions
    for micro in range(1, 4 * parallel.pp * order.directions + 1):
        try:
            order.check(parallel.pp, parallel.vpp, micro)
            for stage in range(parallel.pp):
                order.stage_ops(parallel.pp, stage, micro, chunks)
        except ConfigError:
            continue
        return parallel.micro_batch * dp * micro
    return parallel.micro_batch * dp


#: Sweep points' LLM inputs (``acesim run``'s for an LLM model).
POINT_PARAMS = (*POINT_INPUTS, "nodes", "mode")


def _int_param(raw: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(key, "must be a whole number of at least 1", value)
    return value


def llm_point_config(
    system: SystemConfig, system_doc: dict[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    """The normalised configuration of an LLM sweep point (:data:`POINT_PARAMS`; defaults
    as ``acesim run``'s), its case resolved once so that a configuration that does not divide
    or does not fit is a ConfigError (or TopologyError) naming the field: the sweep records
    the point as refused, with the reason."""
    name = raw.get("model")
    if not isinstance(name, str):
        raise ConfigError("model", "LLM points need a model name (base.model or an axis)", name)
    model = MODELS.get(name, "model")
    text = raw.get("parallel", "")
    if not isinstance(text, str):
        raise ConfigError("parallel", "must be text such as 'tp=8,pp=4'", text)
    micro = _int_param(raw, "micro_batch", 1)
    assert micro is not None
    config = {
        "kind": "llm",
        "system": system_doc,
        "model": name,
        "parallel": text,
        "global_batch": _int_param(raw, "global_batch", None),
        "micro_batch": micro,
        "seq": _int_param(raw, "seq", model.seq),
        "precision": raw.get("precision", "bf16"),
        "nodes": _int_param(raw, "nodes", None),
        "mode": raw.get("mode", "composed"),
    }
    if not isinstance(config["precision"], str):
        raise ConfigError("precision", "must be a precision name", config["precision"])
    if config["mode"] not in ("class", "exact", "composed"):
        raise ConfigError("mode", "must be one of class, exact, composed", config["mode"])
    case = llm_point_case(config, system)
    config["global_batch"] = case.parallel.global_batch  # the default made explicit
    return config


def llm_point_case(config: Mapping[str, Any], system: SystemConfig | None = None) -> LlmCase:
    """The case of an LLM sweep point (:func:`llm_point_config`'s configuration; its
    ``model`` a registered name, or, from ``acesim plan``, the model's fields)."""
    from ..config.presets import system_from_dict

    model = config["model"]
    return make_llm(
        system if system is not None else system_from_dict(config["system"]),
        TransformerConfig(**model) if isinstance(model, dict) else model,
        parallel=config["parallel"],
        global_batch=config["global_batch"],
        micro_batch=config["micro_batch"],
        seq=config["seq"],
        precision=config["precision"],
        nodes=config["nodes"],
        mode=config["mode"],
        search=bool(config.get("search", False)),
    )
