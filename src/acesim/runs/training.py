"""The training-graph run kind: a zoo model, a workload file or a Chakra trace, run as an
execution graph.

:func:`execute_training` unrolls the workload into a graph (a registered loop, or the trace's
own), places its ranks (``run.placement``), lets :func:`~acesim.training.strategy.decide`
choose the strategy, elaborates the platform for it, runs the graph and summarises the run
(:func:`~acesim.results.run.summarize`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config.experiment import measurement_problem
from ..engine.collector import collector_paused
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.platform import Platform, elaborate
from ..results.protocol import assumptions, scalar_settings
from ..results.run import RunInfo, RunResult, summarize
from ..training.executor import Execution
from ..training.figure_bound import figure_bound
from ..training.loops import build_graph
from ..training.strategy import decide, mode_note
from ..workload.graph import Graph
from ..workload.placement import place_graph
from .case import Case
from .graph_run import run_graph
from .how import How, check_beat

__all__ = ["execute_training", "case_graph"]


def case_graph(case: Case) -> tuple[Graph, int, str]:
    """The case's graph, the warm-up its measurement drops, and its loop's name."""
    opts = case.options
    workload = case.workload
    if not isinstance(workload, Graph):
        graph = build_graph(workload, opts.iterations, opts.loop, opts.bucket_size)
        return graph, opts.warmup, opts.loop
    warmup = 0 if workload.iterations == 1 else opts.warmup
    problem = measurement_problem(workload.iterations, warmup)
    if problem:
        raise ConfigError(
            "run.warmup", f"the graph has {workload.iterations} iterations; {problem}", opts.warmup
        )
    return workload, warmup, workload.meta.get("loop", "graph")


@collector_paused()
def execute_training(case: Case, how: How = How()) -> tuple[RunResult, Execution]:
    """Run ``case`` as given, as ``how`` says; the result and the execution (for traces).
    The cyclic collector stays paused through the summary too (its passes over the run's
    records found nothing to free: :mod:`acesim.engine.collector`)."""
    opts = case.options
    system = case.system
    if opts.stop == "measured" and how.trace:
        raise ConfigError(
            "run.stop",
            "a trace records the whole run, and measured stops before its end: use end "
            "(the default) with a trace",
            opts.stop,
        )
    graph, warmup, loop = case_graph(case)
    placed = place_graph(graph, opts.placement, elaborate(system))
    strategy, graph = decide(
        system,
        lambda _reduced: placed,
        requested=opts.mode,
        variation=opts.variation,
        placed=opts.placement is not None,
        trace=how.trace,
    )
    # a warm-up's measurement ends at the last iteration's start (without one, the run's end)
    stop_at = graph.iterations - 1 if opts.stop == "measured" and warmup > 0 else None
    # what ended before the measured window is never read, unless a trace shows the run whole
    measure_from = warmup if warmup > 0 and not how.trace else None
    execution = run_graph(
        system,
        strategy,
        graph,
        kind="training",
        how=how,
        prepare=_beat_check(how, graph, warmup),
        stop_at=stop_at,
        measure_from=measure_from,
    )
    execution.warmup = warmup
    info = RunInfo(
        system=system.name,
        shape=list(system.network.shape),
        npus=execution.platform.topology.npus,
        workload=case.workload_name,
        batch_per_npu=case.batch_per_npu,
        precision=case.precision,
        loop=loop,
        mode=strategy.mode,
        iterations=graph.iterations,
        warmup=warmup,
        measured=0,
        endpoint=system.endpoint.kind,
        variant=how.variant or ENDPOINT_KINDS.get(system.endpoint.kind).label,
        settings=scalar_settings(system.endpoint.settings()),
        mode_note=_with_stop_note(mode_note(strategy, execution), execution),
        provenance=system.provenance.to_dict(),
        stop="measured" if execution.stopped else "end",
    )
    result = summarize(execution, info)
    result.assumptions = assumptions(system)
    return result, execution


def _beat_check(how: How, graph: Graph, warmup: int) -> Callable[[Platform], None] | None:
    """Where ``how`` names a figure to beat (a search's fastest so far): the check, once the
    platform is built, that the run can beat it (:func:`~acesim.runs.how.check_beat` on
    :func:`~acesim.training.figure_bound.figure_bound`)."""
    if how.beat is None:
        return None

    def check(platform: Platform) -> None:
        check_beat(how, figure_bound(platform, graph, warmup))

    return check


def _with_stop_note(note: str, execution: Execution) -> str:
    """The strategy's note, and why a run asked to stop at its measurement's end ran to its
    end (``run.stop = "measured"``), where it did."""
    if not execution.unstopped:
        return note
    why = f"run to its end although run.stop = measured: {execution.unstopped}"
    return f"{note}; {why}" if note else why
