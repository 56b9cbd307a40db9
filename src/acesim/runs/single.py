"""One run of a case: unroll the workload, elaborate the platform, run, summarise.

With ``options.search`` the case's endpoint kind is run in every one of its variants (the
baseline's splits) and the fastest is reported, as a practitioner would tune it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config.experiment import ExperimentConfig, RunOptions, measurement_problem
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS, Variant
from ..hardware.platform import Platform
from ..results.run import RunInfo, RunResult, summarize
from ..results.trace import enable_tracing
from ..training.executor import Execution, GraphExecutor
from ..training.loops import build_graph
from ..workload.graph import Graph
from ..workload.placement import place_graph
from .case import Case, SystemLike, WorkloadLike, case_from_experiment, make_case

__all__ = [
    "execute",
    "run_case",
    "run",
    "run_system",
    "run_experiment",
    "variant_case",
    "scalar_settings",
    "MESSAGES_PER_SECOND",
]


def scalar_settings(settings: Any) -> dict[str, Any]:
    """The endpoint settings worth echoing in a result: the scalar ones, and tables of names as
    ``key:value`` text (the ideal endpoint's ``algorithms``); lists of variants to search and
    tables of numbers are left out."""
    dumped: dict[str, Any] = settings.model_dump(mode="json")
    out: dict[str, Any] = {}
    for k, v in dumped.items():
        if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
            out[k] = ",".join(f"{a}:{b}" for a, b in v.items()) or "-"
        elif not isinstance(v, list | dict):
            out[k] = v
    return out


def variant_case(case: Case, kind: str | None, variant: Variant | None) -> Case:
    """``case`` with endpoint ``kind`` (default: unchanged) in ``variant``'s settings."""
    system = case.system.with_endpoint(kind, **(variant.changes if variant else {}))
    return case.with_system(system)


#: Messages a second the simulator processes on one core (measured: ~70,000 on the 2-core CI
#: machine kind), for the cost estimate shown before long runs.
MESSAGES_PER_SECOND = 70_000.0


def execute(
    case: Case,
    *,
    trace: bool = False,
    variant: str = "",
    on_estimate: Callable[[int], Any] | None = None,
    on_iteration: Callable[[int, int], Any] | None = None,
) -> tuple[RunResult, Execution]:
    """Run ``case`` as given; the result and the execution (for traces).

    ``trace``: record what :func:`acesim.results.trace.write_trace` needs (chunk phases, HBM
    and link samples) during the run. ``on_estimate(messages)`` is told the run's cost before
    it starts; ``on_iteration(done, total)`` after each iteration (progress bars).
    """
    opts = case.options
    workload = case.workload
    if isinstance(workload, Graph):
        graph = workload
        warmup = 0 if graph.iterations == 1 else opts.warmup  # one iteration: measured whole
        problem = measurement_problem(graph.iterations, warmup)
        if problem:
            raise ConfigError(
                "run.warmup",
                f"the graph has {graph.iterations} iterations; {problem}",
                opts.warmup,
            )
        loop = graph.meta.get("loop", "graph")
    else:
        graph = build_graph(workload, opts.iterations, opts.loop, opts.bucket_size)
        warmup = opts.warmup
        loop = opts.loop
    platform = Platform(case.system, exact=opts.exact, variation=opts.variation)
    graph = place_graph(graph, opts.placement, platform.topology)
    if trace:
        enable_tracing(platform)
    total = graph.iterations
    executor = GraphExecutor(
        platform,
        graph,
        on_iteration=(lambda k: on_iteration(k + 1, total)) if on_iteration else None,
    )
    if on_estimate is not None:
        on_estimate(executor.estimate_messages())
    execution = executor.run()
    execution.warmup = warmup
    system = case.system
    info = RunInfo(
        system=system.name,
        shape=list(system.network.shape),
        npus=platform.topology.npus,
        workload=case.workload_name,
        batch_per_npu=case.batch_per_npu,
        precision=case.precision,
        loop=loop,
        mode=opts.mode,
        iterations=graph.iterations,
        warmup=warmup,
        measured=0,
        endpoint=system.endpoint.kind,
        variant=variant or ENDPOINT_KINDS.get(system.endpoint.kind).label,
        settings=scalar_settings(system.endpoint.settings()),
    )
    result = summarize(execution, info)
    result.assumptions = sorted(f for f, s in system.sources.items() if s.assumed)
    return result, execution


def run_case(
    case: Case,
    *,
    trace: bool = False,
    on_estimate: Callable[[int], Any] | None = None,
    on_iteration: Callable[[int, int], Any] | None = None,
) -> tuple[RunResult, Execution]:
    """Run ``case``; with ``options.search`` (always for the bound kind, ``ideal``), every
    variant of its endpoint kind, keeping the fastest (ties: the first listed). Callbacks as
    :func:`execute`'s."""
    hooks: dict[str, Any] = {"on_estimate": on_estimate, "on_iteration": on_iteration}
    kind = ENDPOINT_KINDS.get(case.system.endpoint.kind)
    if not case.options.search and kind.role != "bound":  # the bound is always its best
        return execute(case, trace=trace, **hooks)
    best: tuple[RunResult, Execution] | None = None
    for v in kind.variants_of(case.system):
        outcome = execute(variant_case(case, None, v), trace=trace, variant=v.label, **hooks)
        if best is None or outcome[0].iteration_time < best[0].iteration_time:
            best = outcome
    assert best is not None  # variants_of returns at least one
    return best


def run(
    system: SystemLike = "ace-isca21",
    workload: WorkloadLike = "resnet50",
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    endpoint: str | None = None,
    batch_per_npu: int | None = None,
    precision: str | None = None,
    **option_changes: Any,
) -> RunResult:
    """Simulate training iterations of ``workload`` on ``system`` with one endpoint.

    Args:
        system: a preset name, a system file, a table or a :class:`~acesim.SystemConfig`.
        workload: a zoo name (loaded with the system's settings for it), a workload file, a
            Chakra trace prefix, a :class:`~acesim.workload.model.Workload` or a graph.
        options: :class:`~acesim.config.experiment.RunOptions` (or a table of them);
            ``option_changes`` override single fields (``iterations=5``, ``npus=16``,
            ``search=True``).
        endpoint: run this endpoint kind instead of the system's.
        batch_per_npu, precision: for zoo workloads given by name (``precision``: a
            :data:`acesim.precision.PRECISIONS` name).
    """
    case = make_case(
        system,
        workload,
        options,
        batch_per_npu=batch_per_npu,
        precision=precision,
        **option_changes,
    )
    if endpoint is not None:
        case = variant_case(case, endpoint, None)
    return run_case(case)[0]


def run_system(
    system: SystemLike, workload: WorkloadLike, *, trace: bool = False, **option_changes: Any
) -> tuple[RunResult, Execution]:
    """Run ``workload`` on ``system`` as configured (its endpoint kind and settings), with run
    options as keywords; the result and the execution (for traces and inspection)."""
    return run_case(make_case(system, workload, **option_changes), trace=trace)


def run_experiment(exp: ExperimentConfig | Mapping[str, Any]) -> RunResult:
    """One run as an experiment document (or its table) says."""
    return run_case(case_from_experiment(exp))[0]
