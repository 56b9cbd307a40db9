"""Running an execution graph in a decided strategy: the one tail every graph run kind shares
(training graphs, LLM iterations, jobs).

A platform is built in the strategy (:func:`acesim.training.strategy.decide` chose it), traced
when asked, the executor told of the graph, the run's estimate reported before it starts (the
run path checks it against the work bound, :func:`acesim.runs.single.execute`), and run, its
progress told as graph nodes finish (progress bars).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config.system import SystemConfig
from ..engine.collector import collector_paused
from ..hardware.platform import Platform, SharedPlansByConfig
from ..hardware.strategy import Strategy
from ..results.trace import enable_tracing
from ..training.executor import Execution, GraphExecutor
from ..workload.graph import Graph, Node
from .estimate import Estimate, cost_name
from .how import How

__all__ = ["run_graph", "PROGRESS_STEPS"]

#: At most this many progress reports a pass (one every total / PROGRESS_STEPS nodes): a bar
#: needs no more, and each report costs a redraw request.
PROGRESS_STEPS = 1000


@collector_paused()
def run_graph(
    system: SystemConfig,
    strategy: Strategy,
    graph: Graph,
    *,
    kind: str,
    how: How = How(),
    prepare: Callable[[Platform], Any] | None = None,
    plans: SharedPlansByConfig | None = None,
    **executor_options: Any,
) -> Execution:
    """Run ``graph`` on ``system`` in ``strategy`` (a run of kind ``kind``: its cost
    constants, :mod:`acesim.runs.estimate`), traced and told as ``how`` says (its variant
    aside); ``prepare(platform)``: set the platform up before the executor (after tracing);
    ``plans``: kernel plans shared with other platforms of the run
    (:class:`~acesim.hardware.platform.Platform`); the other keywords go to
    :class:`~acesim.training.executor.GraphExecutor`."""
    on_estimate, on_progress = how.on_estimate, how.on_progress
    platform = Platform(system, strategy, plans=plans)
    if how.trace:
        enable_tracing(platform)
    if prepare is not None:
        prepare(platform)
    executor = GraphExecutor(
        platform,
        graph,
        node_progress=_node_progress(on_progress) if on_progress else None,
        **executor_options,
    )
    if on_estimate is not None:
        cost = cost_name(kind, strategy.mode, executor.agreed_lockstep, platform.endpoint.name)
        work = (executor.estimate_messages(), executor.estimate_kernels(), executor.node_total)
        on_estimate(Estimate(*work, cost))
    execution = executor.run()
    execution.platform.close()  # freed now, not by the collector (Platform.close)
    return execution


def _node_progress(
    on_progress: Callable[[int, int], Any],
) -> Callable[[int], Callable[[int, Node], Any]]:
    """The executor's ``node_progress`` telling ``on_progress(done, total)`` at most
    :data:`PROGRESS_STEPS` times a pass and at its end."""

    def start(total: int) -> Callable[[int, Node], Any]:
        step = max(1, total // PROGRESS_STEPS)
        done = 0

        def finished(_rank: int, _node: Node) -> None:
            nonlocal done
            done += 1
            if done % step == 0 or done == total:
                on_progress(done, total)

        on_progress(0, total)
        return finished

    return start
