"""The cost of a run before it runs: what it will simulate and the CPU time that takes.

A run's work is counted before it starts, from its graph: the messages its collectives and
point-to-point nodes send (:meth:`~acesim.training.executor.GraphExecutor.estimate_messages`,
every simulated rank's) and the compute kernels it launches
(:meth:`~acesim.training.executor.GraphExecutor.estimate_kernels`): each is an activity of
the event engine, the unit of its work. Its CPU time is estimated as

    seconds = per_run + messages x per_message + kernels x per_kernel

with the constants of its run kind in its mode (:data:`RUN_COSTS`). The work bound
(``run.max_messages``) counts messages; the seconds are what a user is told.

The constants are measurements of this implementation, not physics: they were fitted
(non-negative least squares on the relative error) to the cases of
``benchmarks/estimate_accuracy.py``, which prints each case's estimate over its measured time
(the target: within 2x) and, with ``--fit``, the constants again. Another machine, or a change
to the engine, moves them. Measured on a 2-vCPU AMD EPYC virtual machine shared with other
jobs, Linux, CPython 3.11.7: the process CPU time of the simulation alone (from the estimate to
the result, the graph already built), median of 3 runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunCost", "RUN_COSTS", "Estimate", "cost_name"]


@dataclass(frozen=True)
class RunCost:
    """CPU seconds of one run of a kind in a mode: ``per_run`` (s), and per simulated
    ``message`` and compute ``kernel`` (s each)."""

    per_run: float
    per_message: float
    per_kernel: float


#: Cost constants by ``"<run kind> <mode>"`` (module docstring: how they were measured;
#: each the fit over its kind's cases there, 2026-12-05, rounded to two digits; a 0 is a term
#: the fit found no use for on those cases).
RUN_COSTS: dict[str, RunCost] = {
    "collective symmetric": RunCost(per_run=0.0, per_message=6.7e-5, per_kernel=0.0),
    "collective exact": RunCost(per_run=0.0, per_message=4.9e-5, per_kernel=0.0),
    "training symmetric": RunCost(per_run=0.0, per_message=8.5e-5, per_kernel=4.6e-5),
    "training exact": RunCost(per_run=0.0, per_message=4.6e-5, per_kernel=2.4e-5),
    # the LLM kinds refitted at stop 43 (the event path made cheaper; composed runs, counted
    # from their first composed run: what is left when the estimate is told, the passes
    # alone already simulated)
    "llm class": RunCost(per_run=0.3, per_message=1.3e-5, per_kernel=4.6e-6),
    "llm composed": RunCost(per_run=0.0089, per_message=1.3e-5, per_kernel=0.0),
    "llm exact": RunCost(per_run=0.07, per_message=1.1e-5, per_kernel=2.7e-5),
    "jobs exact": RunCost(per_run=0.12, per_message=5.3e-5, per_kernel=0.0),
}


def cost_name(kind: str, mode: str) -> str:
    """The :data:`RUN_COSTS` key of run kind ``kind`` in ``mode``: its own, else the kind's
    exact-mode one (every kind has one; a mode a kind never runs in has no measurement)."""
    name = f"{kind} {mode}"
    return name if name in RUN_COSTS else f"{kind} exact"


@dataclass(frozen=True)
class Estimate:
    """What a run will simulate (``messages``, compute ``kernels``; the graph ``nodes``, 0
    for a run without a graph) and the :data:`RUN_COSTS` key (``cost``) of its kind and
    mode."""

    messages: int
    kernels: int
    nodes: int
    cost: str

    @property
    def seconds(self) -> float:
        """The estimated CPU time of the simulation, s."""
        c = RUN_COSTS[self.cost]
        return c.per_run + self.messages * c.per_message + self.kernels * c.per_kernel
