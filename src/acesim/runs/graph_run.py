"""Running an execution graph in a decided strategy: the one tail every graph run kind shares
(training graphs, LLM iterations, jobs).

A platform is built in the strategy (:func:`acesim.training.strategy.decide` chose it), traced
when asked, the executor told of the graph, the run's estimate reported before it starts (the
run path checks it against the work bound, :func:`acesim.runs.single.execute`), and run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config.system import SystemConfig
from ..hardware.platform import Platform
from ..hardware.strategy import Strategy
from ..results.trace import enable_tracing
from ..training.executor import Execution, GraphExecutor
from ..workload.graph import Graph

__all__ = ["run_graph"]


def run_graph(
    system: SystemConfig,
    strategy: Strategy,
    graph: Graph,
    *,
    trace: bool = False,
    on_estimate: Callable[[int], Any] | None = None,
    on_iteration: Callable[[int, int], Any] | None = None,
    prepare: Callable[[Platform], Any] | None = None,
    **executor_options: Any,
) -> Execution:
    """Run ``graph`` on ``system`` in ``strategy``. ``trace``: record what
    :func:`acesim.results.trace.write_trace` needs; ``prepare(platform)``: set the platform
    up before the executor (after tracing); ``on_estimate(messages)`` is told the run's cost
    before it starts, ``on_iteration(done, total)`` after each iteration; the other keywords
    go to :class:`~acesim.training.executor.GraphExecutor`."""
    platform = Platform(system, strategy)
    if trace:
        enable_tracing(platform)
    if prepare is not None:
        prepare(platform)
    total = graph.iterations
    executor = GraphExecutor(
        platform,
        graph,
        on_iteration=(lambda k: on_iteration(k + 1, total)) if on_iteration else None,
        **executor_options,
    )
    if on_estimate is not None:
        on_estimate(executor.estimate_messages())
    return executor.run()
