"""The jobs run kind: several runs of any kind sharing one system, in one simulation.

A job is a training graph (a zoo model, a workload file, a Chakra trace), an LLM with its
parallel configuration, or a loop of one collective (:mod:`acesim.config.jobs`), placed on
NPUs of the shared system:

* its NPUs: node ranges (a node is a coordinate of the outermost dimension; a system of one
  dimension is one node), NPU ranges, a
  placement file (job rank r on NPU ``file[r]``), or a policy over ``count`` NPUs, in the
  order of the spec after the explicit placements: ``packed`` takes the first free aligned
  block of ``count`` consecutive NPU positions, ``random`` one of the free aligned blocks
  drawn with its ``seed`` (numpy's generator), ``spread`` ``count / nodes`` NPUs at the
  same local positions on every node. The NPUs must form a block of the network (every
  combination of their coordinates per dimension): the job's own system is the shared one
  resized to that block's shape, on which its graph is made; placing the graph
  (:func:`acesim.workload.placement.place_job`) maps its communicators onto the shared
  system's groups (a set the network cannot express as a group is a ConfigError).
  Placements may overlap only with ``colocate = true``; their kernels then take turns on
  the NPU's compute stream (time slicing, no MPS), their collectives are kept apart.
* its start: at time ``start``, or when the job it runs ``after`` has finished
  (:class:`~acesim.training.executor.Gate`).

Every job's graph, placed, becomes one graph of the shared system, run once on one platform
in exact mode (the strategy says why); links, switches, NICs and co-located NPUs are
shared by the fluid model. Collectives run on the event path so that the bound listener
hears every job's messages: each job's representative NPU (its first NPU no other job
represents) is tracked as rank 0 is in a single run (its kernels and messages: what bound
the job, :func:`acesim.training.bounds.attribute`), and every NPU's messages name the
resource that bound them, so a job's bottleneck can be matched with the other jobs whose
traffic that same resource bound at the same time. Each job is also run alone (the same
placement, the other NPUs idle): its slowdown is its iteration time shared over alone.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import ValidationError

from ..config.errors import config_error_from
from ..config.experiment import RunOptions, measurement_problem
from ..config.jobs import CollectiveJob, JobsSpec, LlmJob, TrainingJob, parse_ranges
from ..config.presets import read_document
from ..config.reader import read_json_file
from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..config.variation import placement_problem
from ..engine.collector import collector_paused
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.kernels import Fixed
from ..hardware.platform import Platform
from ..network.group import Group
from ..network.ops import COLLECTIVE_OPS
from ..network.topology import Topology
from ..results.jobs import JobResult, JobsRecorder, JobsResult, job_result
from ..results.protocol import assumptions, scalar_settings
from ..training.executor import Execution, Gate
from ..training.strategy import decide, mode_note
from ..workload.graph import Graph, Node
from ..workload.model import Compute
from ..workload.placement import place_job
from .case import make_case, run_options
from .graph_run import run_graph
from .how import How
from .llm import llm_graph, make_llm
from .training import case_graph

__all__ = [
    "JobPlan",
    "JobsCase",
    "make_jobs",
    "load_jobs",
    "execute_jobs",
    "run_jobs",
    "jobs_point_config",
    "jobs_point_case",
]

SpecLike = JobsSpec | Mapping[str, Any] | str | os.PathLike[str]

_KIND_TAG = re.compile(r"^(jobs\[\d+\])\.(?:training|llm|collective)\b")

#: Why the jobs kind runs its collectives on the event path.
EVENTS = "every job's messages are heard for its bounds"


@dataclass(frozen=True)
class JobPlan:
    """One job resolved: its NPUs (job rank r on ``npus[r]``), its own system's shape, its
    graph (made for that system) and how its iterations are measured."""

    name: str
    kind: str
    npus: tuple[int, ...]
    shape: tuple[int, ...]
    graph: Graph
    warmup: int
    start: float = 0.0
    after: str | None = None
    workload: str = ""


@dataclass(frozen=True)
class JobsCase:
    """Jobs sharing a system (module docstring)."""

    kind: ClassVar[str] = "jobs"

    system: SystemConfig
    jobs: tuple[JobPlan, ...]
    colocate: bool = False
    options: RunOptions = field(default_factory=lambda: run_options(mode="exact"))

    def with_system(self, system: SystemConfig) -> JobsCase:
        """The same jobs on another system of the same network (an endpoint variant)."""
        return replace(self, system=system)

    def with_options(self, **changes: Any) -> JobsCase:
        """The same case with some run options changed (validated)."""
        return replace(self, options=run_options(self.options, **changes))


# --- the spec -------------------------------------------------------------------------------


def load_jobs(spec: SpecLike) -> tuple[JobsSpec, Path]:
    """The validated spec and the folder its relative paths start from (a file's own)."""
    base = Path.cwd()
    if isinstance(spec, JobsSpec):
        return spec, base
    if isinstance(spec, str | os.PathLike):
        path = Path(spec)
        data: Any = read_document(path)
        base = path.parent
    else:
        data = dict(spec)
    try:
        return JobsSpec.model_validate(data), base
    except ValidationError as exc:
        error = config_error_from(exc, JobsSpec)
        # the job's kind is the union's tag in pydantic's path: jobs[0].collective.size
        where = _KIND_TAG.sub(r"\1", error.field)
        raise ConfigError(where, error.rule, error.value, hint=error.hint) from None


def make_jobs(spec: SpecLike, *, endpoint: str | None = None) -> JobsCase:
    """The case of a jobs spec (a JobsSpec, a table, or a TOML/YAML/JSON file):
    ConfigError naming the field, the rule and the value where a job does not fit."""
    doc, base = load_jobs(spec)
    system = resolve_system(doc.system, overrides=doc.overrides, nodes=doc.nodes, npus=doc.npus)
    if endpoint is not None:
        ENDPOINT_KINDS.get(endpoint, "--endpoint")
        system = system.with_endpoint(endpoint)
    topology = Topology(system.network, system.collective)
    placed = _place(doc, topology, base)
    plans = []
    for i, job in enumerate(doc.jobs):
        npus = placed[i]
        shape = _block_shape(npus, topology, f"jobs[{i}].placement")
        own = resolve_system(system, shape=list(shape))
        try:
            graph, warmup, workload = _job_graph(job, own, doc, f"jobs[{i}]", base)
        except ConfigError as error:  # the job's own kind names run.<field>, workload.<field>
            if error.field.startswith(f"jobs[{i}]"):
                raise
            name = error.field.removeprefix("run.").removeprefix("workload.")
            raise ConfigError(
                f"jobs[{i}].{name}", error.rule, error.value, hint=error.hint
            ) from None
        # check the placement maps every communicator (errors name the job) before running
        place_job(graph, npus, Topology(own.network, own.collective), topology, f"jobs[{i}]")
        plans.append(
            JobPlan(job.name, job.kind, npus, shape, graph, warmup, job.start, job.after, workload)
        )
    return JobsCase(system, tuple(plans), doc.colocate)


def _place(doc: JobsSpec, topology: Topology, base: Path) -> list[tuple[int, ...]]:
    """Each job's NPUs: explicit placements first, then the policies in spec order."""
    n = topology.npus
    taken: dict[int, str] = {}
    out: dict[int, tuple[int, ...]] = {}
    order = sorted(range(len(doc.jobs)), key=lambda i: doc.jobs[i].placement.policy is not None)
    for i in order:
        job = doc.jobs[i]
        where = f"jobs[{i}].placement"
        npus = _npus_of(job.placement, topology, base, where, taken, doc.colocate)
        if len(set(npus)) != len(npus):
            raise ConfigError(where, "names an NPU twice", list(npus))
        outside = [p for p in npus if not 0 <= p < n]
        if outside:
            raise ConfigError(where, f"names NPU {outside[0]}, the system has {n} (0..{n - 1})")
        shared = sorted({taken[p] for p in npus if p in taken})
        if shared and not doc.colocate:
            raise ConfigError(
                where,
                f"overlaps job {shared[0]!r} (jobs may share NPUs only with colocate = true)",
                list(npus),
            )
        for p in npus:
            taken.setdefault(p, job.name)
        out[i] = tuple(npus)
    return [out[i] for i in range(len(doc.jobs))]


def node_count(topology: Topology) -> int:
    """The system's nodes: the outermost dimension's coordinates (one node with one
    dimension)."""
    return topology.dimensions[-1].size if len(topology.dimensions) > 1 else 1


def _npus_of(
    place: Any, topology: Topology, base: Path, where: str, taken: Mapping[int, str], colocate: bool
) -> list[int]:
    count = node_count(topology)
    per_node = topology.npus // count
    if place.nodes is not None:
        nodes = parse_ranges(place.nodes)
        if max(nodes) >= count:
            raise ConfigError(f"{where}.nodes", f"the system has {count} nodes", place.nodes)
        return [node * per_node + j for node in nodes for j in range(per_node)]
    if place.npus is not None:
        return parse_ranges(place.npus)
    if place.file is not None:
        path = Path(place.file) if Path(place.file).is_absolute() else base / place.file
        value = read_json_file(path, f"{where}.file", "placement file")
        problem = placement_problem(value)
        if problem is not None:
            raise ConfigError(f"{where}.file", problem, str(path))
        return list(value)
    return _policy(place, topology, where, taken, colocate)


def _policy(
    place: Any, topology: Topology, where: str, taken: Mapping[int, str], colocate: bool
) -> list[int]:
    n, count = topology.npus, int(place.count)
    if count > n:
        raise ConfigError(f"{where}.count", f"is more than the system's {n} NPUs", count)
    if place.policy == "spread":
        nodes = node_count(topology)
        per_node = n // nodes
        if count % nodes:
            raise ConfigError(
                f"{where}.count", f"spread needs a multiple of the {nodes} nodes", count
            )
        local = count // nodes
        blocks = [
            [node * per_node + start + j for node in range(nodes) for j in range(local)]
            for start in range(0, per_node - local + 1, local)
        ]
    else:
        blocks = [list(range(s, s + count)) for s in range(0, n - count + 1, count)]
    free = [b for b in blocks if not any(p in taken for p in b)]
    if not free and colocate:
        free = blocks
    if not free:
        raise ConfigError(
            where, f"does not fit: no free {place.policy} block of {count} NPUs is left", count
        )
    if place.policy == "random":
        pick = int(np.random.default_rng(place.seed).integers(len(free)))
        return sorted(free[pick])
    return sorted(free[0])


def _block_shape(npus: Sequence[int], topology: Topology, where: str) -> tuple[int, ...]:
    """The shape of the block of the network ``npus`` form (ConfigError unless they do)."""
    coords = [sorted({topology.coordinate(p, d.index) for p in npus}) for d in topology.dimensions]
    shape = tuple(len(c) for c in coords)
    if math.prod(shape) != len(npus):
        raise ConfigError(
            where,
            "is not a block of the network (every combination of its NPUs' coordinates per "
            f"dimension; their coordinates span {'x'.join(map(str, shape))})",
            list(npus) if len(npus) <= 16 else f"{len(npus)} NPUs",
        )
    return shape


def _job_graph(
    job: Any, system: SystemConfig, doc: JobsSpec, where: str, base: Path
) -> tuple[Graph, int, str]:
    """A job's graph on its own system, the warm-up its measurement drops, its workload (a
    workload file's path relative to the spec's folder where it is there)."""
    iterations = job.iterations or doc.iterations
    warmup = doc.warmup if job.warmup is None else job.warmup
    if isinstance(job, TrainingJob):
        options: dict[str, Any] = {"iterations": iterations, "warmup": warmup}
        if job.loop is not None:
            options["loop"] = job.loop
        workload = job.workload
        if not Path(workload).is_absolute() and (base / workload).is_file():
            workload = str(base / workload)
        case = make_case(
            system,
            workload,
            batch_per_npu=job.batch_per_npu,
            precision=job.precision,
            **options,
        )
        graph, warmup, _loop = case_graph(case)
        return graph, warmup, case.workload_name
    if isinstance(job, LlmJob):
        llm = make_llm(
            system,
            job.model,
            parallel=job.parallel,
            global_batch=job.global_batch,
            micro_batch=job.micro_batch or 1,
            seq=job.seq,
            recompute=job.recompute,
            iterations=iterations,
        )
        return llm_graph(llm), 0, llm.model.name
    assert isinstance(job, CollectiveJob)
    COLLECTIVE_OPS.get(job.op, f"{where}.op")
    problem = measurement_problem(iterations, warmup)
    if problem:
        raise ConfigError(f"{where}.iterations", problem, iterations)
    return collective_loop(job.op, job.size, iterations, job.gap), warmup, job.op


def collective_loop(op: str, size: float, iterations: int, gap: float = 0.0) -> Graph:
    """``iterations`` of one collective of ``size`` bytes over every rank, each after the
    last, with ``gap`` s of idle compute (a fixed-time kernel) before each."""
    nodes: list[Node] = []
    last: tuple[int, ...] = ()
    for k in range(iterations):
        if gap > 0:
            wait = Node(
                len(nodes), f"gap{k}", "compute", last, Compute(kernels=(Fixed(gap),)), iteration=k
            )
            nodes.append(wait)
            last = (wait.id,)
        coll = Node(
            len(nodes), f"{op}{k}", "collective", last, op=op, size=size, iteration=k, blocking=True
        )
        nodes.append(coll)
        last = (coll.id,)
    return Graph([nodes], name=f"{op} loop", iterations=iterations)


# --- running --------------------------------------------------------------------------------


@dataclass
class _Combined:
    """The jobs' graphs placed on the shared system as one graph."""

    graph: Graph
    ids: dict[str, tuple[int, int]]  # job -> its node ids [lo, hi) on every NPU
    gates: tuple[Gate, ...]
    reps: dict[str, int]


def _combine(case: JobsCase, plans: Sequence[JobPlan]) -> _Combined:
    system = case.system
    topology = Topology(system.network, system.collective)
    ranks: list[list[Node]] = [[] for _ in range(topology.npus)]
    owners: dict[int, list[str]] = {}
    for plan in plans:
        for p in plan.npus:
            owners.setdefault(p, []).append(plan.name)
    ids: dict[str, tuple[int, int]] = {}
    sinks: dict[str, tuple[tuple[int, int], ...]] = {}
    roots: dict[str, tuple[tuple[int, int], ...]] = {}
    offset = 0
    for i, plan in enumerate(plans):
        own = resolve_system(system, shape=list(plan.shape))
        placed = place_job(
            plan.graph, plan.npus, Topology(own.network, own.collective), topology, f"jobs[{i}]"
        )
        shared = any(len(owners[p]) > 1 for p in plan.npus)
        span = 1 + max(n.id for nodes in plan.graph.ranks for n in nodes)
        ids[plan.name] = (offset, offset + span)
        job_sinks, job_roots = [], []
        for npu, nodes in placed.items():
            used = {d for n in nodes for d in n.deps}
            for node in nodes:
                moved = _moved(node, offset, plan.name if shared else None, topology)
                ranks[npu].append(moved)
                if node.id not in used:
                    job_sinks.append((npu, moved.id))
                if not node.deps:
                    job_roots.append((npu, moved.id))
        sinks[plan.name], roots[plan.name] = tuple(job_sinks), tuple(job_roots)
        offset += span
    gates = tuple(
        Gate(roots[p.name], p.start, sinks[p.after] if p.after in sinks else ())
        for p in plans
        if p.start > 0 or p.after in sinks
    )
    reps: dict[str, int] = {}
    for plan in plans:
        free = [p for p in plan.npus if p not in reps.values()]
        reps[plan.name] = free[0] if free else plan.npus[0]
    graph = Graph(ranks, name="jobs", iterations=max(p.graph.iterations for p in plans))
    return _Combined(graph, ids, gates, reps)


def _moved(node: Node, offset: int, job: str | None, topology: Topology) -> Node:
    """``node`` with its ids moved by ``offset``; a co-located job's collectives on a group
    named for the job (instances of two jobs on the same NPUs are not one collective)."""
    changes: dict[str, Any] = {"id": node.id + offset, "deps": tuple(d + offset for d in node.deps)}
    if job is not None and node.kind == "collective":
        group = node.group
        if group is None:
            dims = node.dims if node.dims is not None else range(len(topology.dimensions))
            group = Group.whole(dims)
        changes.update(dims=None, group=replace(group, name=f"{job}/{group.name}"))
    return replace(node, **changes)


def _simulate(
    case: JobsCase,
    plans: Sequence[JobPlan],
    how: How = How(),
) -> tuple[Execution, _Combined, str]:
    """Run ``plans`` together on the case's system, as ``how`` says; the execution, the
    combined graph and the mode note."""
    combined = _combine(case, plans)
    what = f"{len(plans)} jobs share the system" if len(plans) > 1 else "a job placed on it"
    strategy, graph = decide(
        case.system,
        lambda _reduced: combined.graph,
        requested="symmetric",
        trace=how.trace,
        problem=what,
    )
    strategy = replace(strategy, lockstep=False, replicate=False, events=strategy.events or EVENTS)
    names = {p: plan.name for plan in plans for p in plan.npus}
    tracks = {p: f"flow:{job}" for p, job in names.items()}
    tracks.update({p: f"message:{job}" for job, p in combined.reps.items()})

    def prepare(platform: Platform) -> None:
        platform.collectives.tracks = tracks

    execution = run_graph(
        case.system,
        strategy,
        graph,
        kind="jobs",
        how=how,
        prepare=prepare,
        gates=combined.gates,
        kernel_tracks={p: f"kernel:{job}" for job, p in combined.reps.items()},
        recorder=JobsRecorder,
    )
    return execution, combined, mode_note(strategy, execution)


@collector_paused()
def execute_jobs(case: JobsCase, how: How = How()) -> tuple[JobsResult, Execution]:
    """Run the jobs together as ``how`` says, then each alone; the result and the shared run's
    execution (its trace: one process per job, :func:`acesim.results.jobs.jobs_trace`)."""
    if case.options.stop != "end":
        raise ConfigError(
            "run.stop",
            "applies to a training graph alone (jobs measure each job over its own iterations: "
            "the shared run goes to its end)",
            case.options.stop,
        )
    execution, combined, note = _simulate(case, case.jobs, how)
    jobs: list[JobResult] = []
    for plan in case.jobs:
        alone = None
        if len(case.jobs) > 1:
            ex, comb, _ = _simulate(case, [plan], How(on_progress=how.on_progress))
            alone = job_result(ex, comb.ids, comb.reps, plan, None)
        jobs.append(job_result(execution, combined.ids, combined.reps, plan, alone))
    system = case.system
    result = JobsResult(
        system=system.name,
        npus=len(execution.records),
        jobs=jobs,
        makespan=execution.makespan,
        mode=execution.platform.strategy.mode,
        mode_note=note,
        endpoint=system.endpoint.kind,
        variant=how.variant or ENDPOINT_KINDS.get(system.endpoint.kind).label,
        settings=scalar_settings(system.endpoint.settings()),
        assumptions=assumptions(system),
        placement={plan.name: list(plan.npus) for plan in case.jobs},
        ids=combined.ids,
    )
    return result, execution


def run_jobs(
    spec: SpecLike, *, endpoint: str | None = None, trace: str | os.PathLike[str] | None = None
) -> JobsResult:
    """Run a jobs spec (a file, a table or a JobsSpec; :mod:`acesim.config.jobs`) with the
    system's endpoint (or ``endpoint``); ``trace``: write the shared run's Perfetto trace
    there, one process per job."""
    from ..results.jobs import write_jobs_trace

    case = make_jobs(spec, endpoint=endpoint)
    result, execution = execute_jobs(case, How(trace=trace is not None))
    if trace is not None:
        write_jobs_trace(execution, result, trace)
    return result


# --- sweep points ---------------------------------------------------------------------------

POINT_PARAMS = ("jobs", "iterations", "warmup", "colocate")


def jobs_point_config(
    system: SystemConfig, system_doc: dict[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    """The normalised configuration of a jobs sweep point (the spec's fields but the system)."""
    spec = {k: raw[k] for k in POINT_PARAMS if k in raw}
    load_jobs({"system": system_doc, **spec})
    return {"kind": "jobs", "system": system_doc, **spec}


def jobs_point_case(config: Mapping[str, Any]) -> JobsCase:
    """The case of a jobs sweep point."""
    return make_jobs({k: v for k, v in config.items() if k != "kind"})
