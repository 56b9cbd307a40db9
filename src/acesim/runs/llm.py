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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..config.variation import Variation
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.kernels import Stream
from ..hardware.platform import Platform
from ..network.topology import Topology
from ..precision import PRECISIONS, Precision
from ..results.energy import run_energy
from ..results.llm import LlmResult, idle_breakdown
from ..results.trace import enable_tracing
from ..training.executor import Execution, GraphExecutor
from ..training.pipeline import Schedule, pipeline_graph, schedule
from ..units import format_size
from ..workload.graph import Graph
from ..workload.llm.block import ChunkWork, chunk_work
from ..workload.llm.memory import TERMS, grad_bytes, rank_footprint
from ..workload.llm.models import MODELS, TransformerConfig, model_flops
from ..workload.llm.parallel import ParallelConfig, Placement, parse_parallel, placement
from ..workload.model import Compute
from ..workload.optimizer import update_kernel

__all__ = [
    "LlmCase",
    "make_llm_case",
    "run_llm",
    "llm_graph",
    "class_mode_problem",
    "OPTIMIZER",
    "MODES",
    "Mode",
    "llm_point_config",
    "run_llm_point",
]

OPTIMIZER = "adam"

Mode = Literal["class", "exact"]
#: The simulation modes of LLM runs (module docstring).
MODES: tuple[Mode, ...] = ("class", "exact")

SystemLike = SystemConfig | str | Path | Mapping[str, Any]


@dataclass(frozen=True)
class LlmCase:
    """A resolved LLM training case (see the module docstring)."""

    system: SystemConfig
    model: TransformerConfig
    parallel: ParallelConfig
    precision: Precision
    place: Placement
    micro_batches: int
    schedule: Schedule
    stages: tuple[tuple[ChunkWork, ...], ...]
    memory: dict[str, float]
    memory_stage: int
    iterations: int = 1

    def with_endpoint(self, kind: str) -> LlmCase:
        ENDPOINT_KINDS.get(kind, "--endpoint")
        return LlmCase(
            self.system.with_endpoint(kind),
            self.model,
            self.parallel,
            self.precision,
            self.place,
            self.micro_batches,
            self.schedule,
            self.stages,
            self.memory,
            self.memory_stage,
            self.iterations,
        )


def _model(model: TransformerConfig | str) -> TransformerConfig:
    if isinstance(model, TransformerConfig):
        return model
    return MODELS.get(model, "workload.name")


#: Most micro-batches one LLM iteration may have (per pipeline): each adds about 0.2 s and 1.6 MB
#: of simulation (measured on the CI machine kind: llama3-8b on one node), so 4,096 is about a
#: quarter of an hour, and ``--global-batch 10**12`` is refused at once instead of never ending.
#: Raise it knowingly: ``make_llm_case(..., max_micro_batches=N)``.
MAX_MICRO_BATCHES = 4096

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
    max_micro_batches: int = MAX_MICRO_BATCHES,
) -> LlmCase:
    """Resolve an LLM case (module docstring); ConfigErrors name the field at fault, among
    them more than ``max_micro_batches`` micro-batches an iteration (the work bound)."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ConfigError("run.iterations", "must be a whole number of at least 1", iterations)
    resolved = resolve_system(system, overrides=overrides, nodes=nodes)
    cfg = _model(model)
    p = PRECISIONS.get(precision, "workload.precision")
    if p.math not in resolved.npu.matrix_flops:
        npu = resolved.npu
        runnable = [n for n, q in PRECISIONS.items() if q.math in npu.matrix_flops]
        raise ConfigError(
            "workload.precision",
            f"runs its matrix math in {p.math}, which this NPU ({npu.name}) has no peak for "
            f"(npu.matrix_flops lists {', '.join(npu.matrix_flops)}); precisions it can run: "
            f"{', '.join(runnable) or 'none'}",
            precision,
        )
    parallel.check_model(cfg)
    shape = tuple(resolved.network.shape)
    place = placement(parallel, shape)
    micro = parallel.micro_batches(place.dp)
    if micro * iterations > max_micro_batches:
        hours = micro * iterations * SECONDS_PER_MICRO_BATCH / 3600
        raise ConfigError(
            "parallel.global_batch",
            f"makes {micro * iterations} micro-batches to simulate ({parallel.global_batch} "
            f"sequences / (micro-batch {parallel.micro_batch} x dp {place.dp}), about "
            f"{hours:.3g} hours at {SECONDS_PER_MICRO_BATCH} s each), more than the bound "
            f"{max_micro_batches} (MAX_MICRO_BATCHES; make_llm_case(max_micro_batches=N) "
            "raises it knowingly)",
            parallel.global_batch,
        )
    kind: Schedule = "interleaved" if parallel.vpp > 1 else "1f1b"
    stages = _stages(cfg, p, parallel, place)
    worst: dict[str, float] = {}
    worst_stage = 0
    for s, chunks in enumerate(stages):
        sizes = rank_footprint(
            chunks,
            schedule(kind, parallel.pp, s, micro, parallel.vpp),
            p,
            OPTIMIZER,
            dp=place.grad_ranks,
            distributed_optimizer=parallel.zero >= 1,
            expert_dp=place.expert_dp,
            grad_fp32=parallel.grad_fp32,
            fsdp=parallel.zero == 3,
        )
        if not worst or sizes["total"] > worst["total"]:
            worst, worst_stage = sizes, s
    if check_memory:
        _check_memory(cfg, parallel, p, resolved, worst, worst_stage)
    return LlmCase(
        resolved, cfg, parallel, p, place, micro, kind, stages, worst, worst_stage, iterations
    )


def _stages(
    model: TransformerConfig, p: Precision, parallel: ParallelConfig, place: Placement
) -> tuple[tuple[ChunkWork, ...], ...]:
    pp, v = parallel.pp, parallel.vpp
    per = model.layers // (pp * v)
    out = []
    for s in range(pp):
        chunks = []
        for c in range(v):
            vs = c * pp + s
            chunks.append(
                chunk_work(
                    model,
                    p,
                    range(vs * per, (vs + 1) * per),
                    micro_batch=parallel.micro_batch,
                    seq=parallel.seq,
                    tp=parallel.tp,
                    sp=bool(parallel.sp),
                    tp_overlap=parallel.tp_overlap,
                    recompute=parallel.recompute,
                    tp_group=place.tp_group,
                    embedding=vs == 0,
                    head=vs == pp * v - 1,
                    ep=parallel.ep,
                    ep_group=place.ep_group,
                    cp=parallel.cp,
                    cp_group=place.cp_group,
                    units=parallel.zero == 3,
                    recompute_layers=parallel.recompute_layers,
                )
            )
        out.append(tuple(chunks))
    return tuple(out)


def _check_memory(
    model: TransformerConfig,
    parallel: ParallelConfig,
    p: Precision,
    system: SystemConfig,
    sizes: dict[str, float],
    stage: int,
) -> None:
    capacity = system.npu.hbm_capacity
    if sizes["total"] <= capacity:
        return
    dominant = max(TERMS, key=lambda t: sizes[t])
    parts = ", ".join(f"{t} {format_size(sizes[t])}" for t in TERMS)
    advice = ["more tensor or pipeline parallelism"]
    if parallel.zero == 0:
        advice.append("the distributed optimizer (zero=1)")
    if parallel.recompute != "full":
        advice.append("recomputation")
    if parallel.micro_batch > 1:
        advice.append("a smaller micro-batch")
    raise ConfigError(
        "npu.hbm_capacity",
        f"{model.name} with {parallel.describe()} ({p.name}) needs "
        f"{format_size(sizes['total'])} per GPU on pipeline stage {stage} ({parts}), "
        f"{format_size(sizes['total'] - capacity)} more than the {format_size(capacity)} of HBM; "
        f"{dominant} dominate{'s' if not dominant.endswith('s') else ''}: use "
        + ", ".join(advice[:-1])
        + (" or " if len(advice) > 1 else "")
        + advice[-1],
    )


def _update(p: Precision, params: float, gradient_bytes: int) -> Stream:
    """The optimizer step of ``params`` parameters (:func:`~acesim.workload.optimizer.
    update_kernel`) reading the main gradients in ``gradient_bytes`` per element instead of
    the parameter dtype."""
    kernel = update_kernel(OPTIMIZER, p, params)
    extra = params * (gradient_bytes - p.param_bytes)
    return Stream(kernel.read_bytes + extra, kernel.write_bytes, kernel.flops, name=kernel.name)


def llm_graph(case: LlmCase, *, classes: bool = False) -> Graph:
    """Every rank's execution graph of the case's iterations (``classes``: one per pipeline
    stage, class mode)."""
    par, p = case.parallel, case.precision
    zero = par.zero >= 1
    updates = []
    for chunks in case.stages:
        params = sum(c.params for c in chunks)
        experts = sum(c.expert_params for c in chunks)
        share = (
            (params - experts) / case.place.grad_ranks + experts / case.place.expert_dp
            if zero
            else params
        )
        updates.append(Compute(kernels=(_update(p, share, grad_bytes(p, par.grad_fp32)),)))
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
    )


def _order_problem(case: LlmCase) -> str | None:
    """Why the rank order keeps class mode out (each stage must be one block of ranks)."""
    if case.place.stages_outermost:
        return None
    return (
        f"order {case.parallel.order} puts the pipeline stages inside data parallelism: a "
        "stage is not one block of ranks"
    )


def class_mode_problem(
    case: LlmCase, graph: Graph | None = None, variation: Variation | None = None
) -> str | None:
    """Why class mode would not be an exact reduction of ``case`` (module docstring), or
    None. ``graph``: its class-mode graph (built when not given)."""
    if variation:
        return "stragglers, a compute spread or link changes make ranks differ"
    order = _order_problem(case)
    if order is not None:
        return order
    graph = graph if graph is not None else llm_graph(case, classes=True)
    classes = graph.classes
    assert classes is not None
    pairs = {
        (c, n.peer)
        for c, nodes in enumerate(graph.ranks)
        for n in nodes
        if n.kind == "send" and n.peer is not None
    }
    topology = Topology(case.system.network, case.system.collective)
    problem = classes.route_problem(topology, pairs)
    return None if problem is None else f"pipeline messages are not symmetric: {problem}"


def run_llm(
    case: LlmCase,
    *,
    trace: bool = False,
    mode: Mode = "class",
    variation: Variation | None = None,
) -> tuple[LlmResult, Execution]:
    """Simulate the case and summarise it (:mod:`acesim.results.llm`); ``trace``: record what
    :func:`acesim.results.trace.write_trace` needs; ``mode``: ``class`` (one rank per pipeline
    stage where that is exact, else every rank, said in the result) or ``exact`` (every rank);
    ``variation``: stragglers and link changes (exact mode)."""
    if mode not in MODES:
        raise ConfigError("run.mode", f"must be one of {', '.join(MODES)}", mode)
    note = ""
    graph: Graph | None = None
    if mode == "class":
        problem = _order_problem(case)
        if problem is None:
            graph = llm_graph(case, classes=True)
            problem = class_mode_problem(case, graph, variation)
        if problem is not None:
            note = f"exact mode (every GPU simulated): {problem}"
            graph = None
    if graph is not None:
        platform = Platform(case.system, classes=graph.classes)
    else:
        graph = llm_graph(case)
        platform = Platform(case.system, exact=True, variation=variation)
    if trace:
        enable_tracing(platform)
    execution = GraphExecutor(platform, graph).run()
    ranks = len(execution.records)
    iters = case.iterations
    iteration = execution.makespan / iters
    compute, bubble, exposed = idle_breakdown(execution)
    per = ranks * iters
    par = case.parallel
    tokens = par.global_batch * par.seq
    npus = case.place.npus
    dtype = case.precision.math
    flops = model_flops(case.model, par.global_batch, par.seq)
    system = case.system
    notes = []
    if case.model.notes:
        notes.append(case.model.notes)
    result = LlmResult(
        model=case.model.name,
        system=system.name,
        npus=npus,
        parallel=par.describe(),
        schedule=case.schedule,
        precision=case.precision.name,
        global_batch=par.global_batch,
        micro_batch=par.micro_batch,
        seq=par.seq,
        micro_batches=case.micro_batches,
        iterations=iters,
        iteration_time=iteration,
        tokens_per_s_per_gpu=tokens / (iteration * npus),
        mfu=flops / (iteration * npus * system.npu.matrix_peak(dtype)),
        mfu_dtype=dtype,
        compute_time=compute / per,
        bubble_time=bubble / per,
        bubble_fraction=bubble / per / iteration,
        exposed={k: v / per for k, v in exposed.items()},
        memory=dict(case.memory),
        memory_stage=case.memory_stage,
        hbm_capacity=system.npu.hbm_capacity,
        endpoint=system.endpoint.kind,
        mode="class" if graph.classes is not None else "exact",
        mode_note=note,
        notes=notes,
        assumptions=sorted(f for f, s in system.sources.items() if s.assumed),
        energy=run_energy(execution.platform, iters),
    )
    if result.energy is not None:
        result.energy.per_token = result.energy.per_iteration * npus / tokens
    return result, execution


#: LLM sweep points' parameters echoed by the result (configuration, not results)
_POINT_ECHO = ("model", "parallel", "global_batch", "micro_batch", "seq", "precision", "schema")


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
    """The normalised configuration of an LLM sweep point (``model``, ``parallel``,
    ``global_batch``, ``micro_batch``, ``seq``, ``precision``, ``nodes``, ``mode``; defaults
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
    global_batch = _int_param(raw, "global_batch", micro)
    seq = _int_param(raw, "seq", model.seq)
    nodes = _int_param(raw, "nodes", None)
    precision = raw.get("precision", "bf16")
    if not isinstance(precision, str):
        raise ConfigError("precision", "must be a precision name", precision)
    mode = raw.get("mode", "class")
    if mode not in MODES:
        raise ConfigError("mode", f"must be one of {', '.join(MODES)}", mode)
    assert global_batch is not None and seq is not None
    par = parse_parallel(
        text, global_batch=global_batch, micro_batch=micro, seq=seq, field="parallel"
    )
    make_llm_case(system, model, par, precision=precision, nodes=nodes)
    return {
        "kind": "llm",
        "system": system_doc,
        "model": name,
        "parallel": text,
        "global_batch": global_batch,
        "micro_batch": micro,
        "seq": seq,
        "precision": precision,
        "nodes": nodes,
        "mode": mode,
    }


def run_llm_point(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run an LLM sweep point (:func:`llm_point_config`'s configuration): the result's
    figures (:meth:`~acesim.results.llm.LlmResult.to_dict`) without the echoed inputs."""
    from ..config.presets import system_from_dict

    par = parse_parallel(
        config["parallel"],
        global_batch=config["global_batch"],
        micro_batch=config["micro_batch"],
        seq=config["seq"],
        field="parallel",
    )
    case = make_llm_case(
        system_from_dict(config["system"]),
        config["model"],
        par,
        precision=config["precision"],
        nodes=config["nodes"],
    )
    result, _ = run_llm(case, mode=config["mode"])
    data = result.to_dict()
    data["parallel_resolved"] = data["parallel"]
    for key in _POINT_ECHO:
        data.pop(key, None)
    return data
