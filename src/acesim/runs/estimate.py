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
the result, the graph already built), median of 3 runs. The event path compiled runs 2-3x
faster than as Python, so each install takes the constants of its build.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._compiled import compiled

__all__ = [
    "RunCost",
    "RUN_COSTS",
    "MEASURED",
    "RUN_COSTS_COMPILED",
    "RUN_COSTS_PYTHON",
    "Estimate",
    "cost_name",
]


@dataclass(frozen=True)
class RunCost:
    """CPU seconds of one run of a kind in a mode: ``per_run`` (s), and per simulated
    ``message`` and compute ``kernel`` (s each)."""

    per_run: float
    per_message: float
    per_kernel: float


#: Cost constants by ``"<run kind> <mode>"``: with the event path compiled (``pip install .``
#: where a C compiler is found: :mod:`acesim._compiled`), then as Python (``ACESIM_PURE_PYTHON=1``
#: or no C compiler at install). Module docstring: how they were measured; each the fit over
#: its kind's cases there (stop 56, 2026-12-07, both builds in one sitting; rounded to two
#: digits; a 0 is a term the fit found no use for on those cases). Composed LLM runs are
#: counted from their first composed run: what is left when the estimate is told, the passes
#: alone already simulated.
MEASURED: dict[str, tuple[RunCost, RunCost]] = {
    "collective symmetric": (RunCost(8.6e-5, 1.7e-5, 0.0), RunCost(0.0, 4.0e-5, 0.0)),
    "collective exact": (RunCost(0.0, 1.3e-5, 0.0), RunCost(0.0, 2.3e-5, 0.0)),
    # stop 61 (refitted, both builds the same day: the event path's folds since stop 56 left
    # the old constants 1.3-1.8 high on the fit cases; stop 56: 0.0053 s, 1.7e-5 and 4.6e-6,
    # and as Python 0, 3.7e-5 and 1.3e-5)
    # stop 65: a lone collective with a variation on an endpoint that charges the NPUs, every
    # rank at once (network/rank_fluid.py: numpy passes, not the compiled event path; the
    # same constants for both builds); refitted at stop 66 on its three fit cases, compiled,
    # after its passes were made cheaper (0.031 s and 2.6e-6 s a message before)
    "collective per-rank": (RunCost(0.026, 1.1e-6, 0.0), RunCost(0.026, 1.1e-6, 0.0)),
    "training symmetric": (RunCost(0.0, 1.0e-5, 3.9e-6), RunCost(0.0, 2.7e-5, 9.2e-6)),
    # stop 62: the ideal endpoint's runs, fitted on their own three fit cases (both builds the
    # same day; the held-out ResNet-50 at 64 NPUs had read 2.1-2.6 under the constants above)
    "training symmetric ideal": (RunCost(0.0, 7.2e-6, 3.2e-6), RunCost(0.048, 3.3e-6, 3.0e-6)),
    "training exact": (RunCost(0.02, 1.3e-5, 4.5e-6), RunCost(0.0072, 2.2e-5, 9.3e-6)),
    # stop 60 (refitted after the kernel folds, both builds the same day; stop 59: 6.2e-6
    # and 1.1e-5 per kernel): a training run with variation whose collectives are computed
    # in agreed orders as it goes (every rank's passes and completions simulated, each pass
    # folded; its one rank's steps, the messages, found no use in the fit)
    "training exact agreed": (RunCost(0.32, 0.0, 3.0e-6), RunCost(0.29, 0.0, 5.9e-6)),
    "llm class": (RunCost(0.22, 1.0e-5, 9.2e-7), RunCost(0.34, 1.3e-5, 1.8e-6)),
    "llm composed": (RunCost(0.0081, 1.7e-6, 0.0), RunCost(0.01, 1.2e-6, 0.0)),
    "llm exact": (RunCost(0.051, 4.7e-6, 2.3e-5), RunCost(0.094, 8.7e-6, 3.3e-5)),
    "jobs exact": (RunCost(0.059, 1.6e-5, 0.0), RunCost(0.068, 2.4e-5, 0.0)),
}
#: The constants with the event path compiled, and as Python (:data:`MEASURED`).
RUN_COSTS_COMPILED = {name: costs[0] for name, costs in MEASURED.items()}
RUN_COSTS_PYTHON = {name: costs[1] for name, costs in MEASURED.items()}

#: The constants of this install: compiled where the event path runs compiled.
RUN_COSTS: dict[str, RunCost] = RUN_COSTS_COMPILED if compiled() else RUN_COSTS_PYTHON


def cost_name(kind: str, mode: str, agreed: bool = False, endpoint: str | None = None) -> str:
    """The :data:`RUN_COSTS` key of run kind ``kind`` in ``mode``: its own, else the kind's
    exact-mode one (every kind has one; a mode a kind never runs in has no measurement).
    ``agreed``: its collectives computed in agreed orders as the run goes
    (:mod:`acesim.network.agreed_lockstep`: every rank's kernels and completions simulated,
    its collectives' steps computed once for all ranks), whose costs are their own
    (``"<kind> exact agreed"``) where measured. ``endpoint``: the endpoint kind the run's
    collectives run on, whose messages cost their own (``"<kind> <mode> <endpoint>"``) where
    measured: the ``ideal`` endpoint's hold links only, each reallocated alone, not beside
    the NPU's kernels on its HBM and units."""
    name = f"{kind} {mode}"
    if agreed and f"{name} agreed" in RUN_COSTS:
        return f"{name} agreed"
    if endpoint is not None and f"{name} {endpoint}" in RUN_COSTS:
        return f"{name} {endpoint}"
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
