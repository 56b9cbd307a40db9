"""The plan's search: enumerate, refuse what does not fit, prune by the lower bounds,
simulate the rest, rank.

For each endpoint kind asked for, a best-first branch and bound over the candidates of
:mod:`acesim.plan.space` (bounds of :mod:`acesim.plan.bound`): a queue holds each candidate
keyed by the larger of its GEMM and layer bounds until it is built (its work and memory, as
``acesim run`` builds it),
then by its kernel bound; the smallest key is taken next: built when it was not (refused when
it does not fit in HBM, counted by its dominant memory term; or refused unbuilt when its
layers' weights, gradients and optimizer state alone exceed HBM), simulated when it was (on
the workers while the search goes on: :class:`_Search`). The search ends when the smallest
key reaches the ``K``-th best iteration time simulated: no candidate left can enter the top
``K``. Those left are pruned, built or not (the memory of the unbuilt ones is not checked:
the output says how many). ``exhaustive`` simulates every candidate that fits.

Each simulation is a sweep point (:func:`acesim.sweep.worker.execute_point`): in this
process, in local worker processes, or on a Dask cluster, as ``acesim sweep`` runs them (one
pool or client for the whole search: :func:`~acesim.sweep.runner.point_stream`), so a plan's
row is exactly what ``acesim run`` prints for the command line the row gives. By
default a candidate is simulated in mode ``composed`` (each distinct pipeline pass once:
:mod:`acesim.training.compose`, within 0.03% of class mode on issue 27's cases, at 10-30
times less CPU) and the row's command line says ``--composed``; ``mode="class"`` simulates
each in full.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config.system import SystemConfig
from ..errors import ConfigError, TopologyError
from ..hardware.endpoints.copy_engine import check_facts_stated
from ..precision import PRECISIONS
from ..runs.case import check_math
from ..runs.compare import check_endpoints
from ..runs.llm import compose_problem, make_llm_case, misfit
from ..sweep.runner import point_stream
from ..sweep.streams import PointStream
from ..workload.llm.models import TransformerConfig
from .bound import gemm_bound, kernel_bound, layer_bound, memory_floor, network_bound
from .space import Candidate, Cluster, Space, enumerate_space, rule_name

__all__ = ["PlanRequest", "PlanRow", "PlanOutcome", "search"]


@dataclass(frozen=True)
class PlanRequest:
    """What to plan: ``model`` trained on ``system`` (resolved: nodes and overrides applied)
    at ``global_batch`` sequences of ``seq`` tokens in ``precision``; ``endpoints``: the
    substrates to rank under (the first is the table's); ``top``: how many to rank;
    ``space``: axis values replacing the defaults; ``command``: the ``acesim run`` options
    that name the system (``-s NAME --nodes N --set ...``), for the rows' command lines."""

    model: TransformerConfig
    system: SystemConfig
    global_batch: int
    seq: int
    precision: str = "bf16"
    endpoints: tuple[str, ...] = ()
    top: int = 10
    space: Mapping[str, list[object]] = field(default_factory=dict)
    exhaustive: bool = False
    command: str = ""
    #: how each candidate is simulated: ``composed`` (mode composed, acesim.training.compose)
    #: or ``class`` (class mode, the full simulation)
    mode: str = "composed"
    #: the search's budget (None: search until the bounds end it): wall seconds, and
    #: simulations per endpoint (:class:`Budget`)
    time_limit: float | None = None
    max_simulations: int | None = None


@dataclass
class PlanRow:
    """One simulated (candidate, endpoint): the candidate, its bounds, its memory per GPU by
    term (bytes) and the run's flat metrics (``acesim run --json``'s figures)."""

    candidate: Candidate
    endpoint: str
    gemm_bound: float
    kernel_bound: float
    memory: dict[str, float]
    metrics: dict[str, Any]
    layer_bound: float = 0.0
    #: the network bound (s; 0: not computed, the candidate's simulation costing about what
    #: the bound does: :meth:`_Cases.network`)
    network_bound: float = 0.0

    @property
    def iteration_time(self) -> float:
        return float(self.metrics["iteration_time"])


@dataclass
class PlanOutcome:
    """The search's record: the space, what was refused, pruned, simulated and failed, and
    the rows simulated per endpoint (ranked: fastest first)."""

    space: Space
    memory_refused: Counter[str] = field(default_factory=Counter)
    refused_other: Counter[str] = field(default_factory=Counter)
    pruned_unbuilt: dict[str, int] = field(default_factory=dict)
    pruned_kernel: dict[str, int] = field(default_factory=dict)
    #: of those pruned after building, those the network bound pruned
    pruned_network: dict[str, int] = field(default_factory=dict)
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    rows: dict[str, list[PlanRow]] = field(default_factory=dict)
    fits: int = 0
    built: int = 0
    #: of the memory refusals, those made before building, on the layers' weights,
    #: gradients and optimizer state alone (:func:`~acesim.plan.bound.memory_floor`)
    unbuilt_refused: int = 0
    #: per endpoint whose search the budget stopped before its bounds ended it: what stopped
    #: it, the candidates left unexplored (their keys below the K-th best time) and the least
    #: of their lower bounds (s): no configuration left is faster than that
    stopped: dict[str, str] = field(default_factory=dict)
    unexplored: dict[str, int] = field(default_factory=dict)
    unexplored_bound: dict[str, float] = field(default_factory=dict)


def _cluster(system: SystemConfig) -> Cluster:
    shape = list(system.network.shape)
    return Cluster(gpus=math.prod(shape), domain=shape[0])


class _Cases:
    """Built candidates, memoised: one build per candidate, whatever the endpoint. What is
    kept of a build is its memory per GPU by term (bytes) and its kernel bound (s), not the
    case: a simulation rebuilds it from its sweep point, and the cases of a few thousand
    built candidates held several GB."""

    def __init__(self, request: PlanRequest, outcome: PlanOutcome):
        self.request = request
        self.outcome = outcome
        self.built: dict[int, tuple[dict[str, float], float] | None] = {}
        self.networks: dict[int, float] = {}
        #: whether each candidate that fits composes (its simulation's mode, composed asked)
        self.composes: dict[int, bool] = {}
        self.capacity = request.system.npu.hbm_capacity

    def get(self, index: int, candidate: Candidate) -> tuple[dict[str, float], float] | None:
        """The candidate's memory per GPU by term (bytes) and kernel bound (s), or None
        (refused, counted)."""
        if index in self.built:
            return self.built[index]
        r = self.request
        entry: tuple[dict[str, float], float] | None = None
        floor = memory_floor(r.system, r.model, candidate.parallel, r.precision)
        if floor is not None and floor[0] > self.capacity:  # refused before it is built
            self.outcome.memory_refused[floor[1]] += 1
            self.outcome.unbuilt_refused += 1
            self.built[index] = None
            return None
        try:
            case = make_llm_case(
                r.system,
                r.model,
                candidate.parallel,
                precision=r.precision,
                check_memory=False,
                layer_names=False,  # its memory and bounds are read, it is never run
            )
        except (ConfigError, TopologyError) as err:
            self.outcome.refused_other[rule_name(err)] += 1
        else:
            self.outcome.built += 1
            dominant = misfit(case.memory, self.capacity)
            if dominant is not None:
                self.outcome.memory_refused[dominant] += 1
            else:
                self.outcome.fits += 1
                entry = (dict(case.memory), kernel_bound(case))
                self.composes[index] = compose_problem(case) is None
                if r.mode != "composed" or not self.composes[index]:
                    self.networks[index] = network_bound(case)
        self.built[index] = entry
        return entry

    def network(self, index: int) -> float:
        """The candidate's network bound (s; computed when it was built), where its
        simulation runs class mode (asked for, or its passes cannot be composed: FSDP over DP
        with pipeline stages); 0 where it is composed: a composed run times each pass alone,
        its collectives off the links the run's other collectives use, so the bound, which
        sums them on the same links, holds for class mode only."""
        return self.networks.get(index, 0.0)


@dataclass(frozen=True)
class Budget:
    """What one endpoint's search may spend before it stops short of its bounds' end: a wall
    clock ``deadline`` (``time.monotonic()`` s; None: none) and ``simulations`` (None: no
    limit). A search stopped by its budget says so, with the least lower bound of what it left
    unexplored (:class:`PlanOutcome`): its best row is then within a stated factor of the
    best possible, not certainly the best."""

    deadline: float | None = None
    simulations: int | None = None

    @classmethod
    def share(cls, request: PlanRequest, started: float, endpoints_left: int) -> Budget:
        """The next endpoint's share of ``request``'s budget: the time left since
        ``started`` (``time.monotonic()`` s) split evenly over the endpoints left."""
        deadline = None
        if request.time_limit is not None:
            left = request.time_limit - (time.monotonic() - started)
            deadline = time.monotonic() + max(0.0, left) / endpoints_left
        return cls(deadline, request.max_simulations)

    def stop(self, simulated: int, simulating_next: bool) -> str | None:
        """Why the search must stop now (None: it may go on), after ``simulated``
        simulations, ``simulating_next``: the next step is a simulation."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time limit"
        if simulating_next and self.simulations is not None and simulated >= self.simulations:
            return "simulation limit"
        return None

    def spent(self, kind: str, simulated: int, simulating_next: bool, outcome: PlanOutcome) -> bool:
        """Whether ``kind``'s search must stop now (:meth:`stop`), recorded in ``outcome``."""
        why = self.stop(simulated, simulating_next)
        if why is not None:
            outcome.stopped[kind] = why
        return why is not None


def _point(
    request: PlanRequest, docs: Mapping[str, dict[str, Any]], c: Candidate, kind: str, search: bool
) -> dict[str, Any]:
    return {
        "kind": "llm",
        "system": docs[kind],
        # the model itself, not its name: a worker knows the shipped models only
        "model": dataclasses.asdict(request.model),
        "parallel": c.text,
        "global_batch": request.global_batch,
        "micro_batch": c.parallel.micro_batch,
        "seq": request.seq,
        "precision": request.precision,
        "nodes": None,
        "mode": request.mode,
        "search": search,
    }


def search(
    request: PlanRequest,
    *,
    workers: int = 0,
    dask: Any = None,
    progress: Callable[[str, int], None] | None = None,
) -> PlanOutcome:
    """Run the plan's search (module docstring); ``progress(endpoint, simulated)`` after
    each simulation taken."""
    started = time.monotonic()
    r = request
    check_math(r.system, PRECISIONS.get(r.precision, "precision").math, r.precision)
    endpoints = check_endpoints(list(r.endpoints) or [r.system.endpoint.kind], "--endpoints")
    for kind in endpoints:  # before the system goes on as documents (no provenance there)
        check_facts_stated(r.system, kind)
    cluster = _cluster(r.system)
    space = enumerate_space(r.model, cluster, global_batch=r.global_batch, seq=r.seq, space=r.space)
    outcome = PlanOutcome(space)
    math_dtype = PRECISIONS.get(r.precision).math
    bounds = [
        (
            gemm_bound(r.model, c.parallel, cluster.gpus, r.system.npu, math_dtype),
            layer_bound(r.system, r.model, c.parallel, r.precision),
        )
        for c in space.candidates
    ]
    docs = {
        kind: r.system.with_endpoint(kind).model_dump(mode="json", exclude={"sources"})
        for kind in endpoints
    }
    cases = _Cases(r, outcome)
    compare = len(endpoints) > 1
    with point_stream(dask=dask, workers=workers) as stream:  # its workers kept throughout
        for n, kind in enumerate(endpoints):
            budget = Budget.share(r, started, len(endpoints) - n)
            search = _Search(r, kind, bounds, cases, outcome, docs, stream, compare, progress)
            outcome.rows[kind] = search.run(budget)
    return outcome


class _Search:
    """One endpoint's branch and bound (module docstring) on a point stream.

    Simulations run while the search goes on: the candidate at position ``p`` of the
    simulations (in the order the search submits them) is decided on the results of every
    position up to ``p - lag`` (``lag``: half the stream's window, two per worker; one in
    this process), taken in position order, whenever they finished. The positions after them may
    still be running, so the workers stay busy while one simulation takes long, and what is
    simulated depends on the inputs and the window only, never on which simulation
    finished first (the same rows, counts and ranking from run to run)."""

    def __init__(
        self,
        request: PlanRequest,
        kind: str,
        bounds: Sequence[tuple[float, float]],
        cases: _Cases,
        outcome: PlanOutcome,
        docs: Mapping[str, dict[str, Any]],
        stream: PointStream,
        compare: bool,
        progress: Callable[[str, int], None] | None,
    ):
        self.r, self.kind, self.bounds, self.cases = request, kind, bounds, cases
        self.outcome, self.docs, self.stream = outcome, docs, stream
        self.compare, self.progress = compare, progress
        self.best: list[float] = []  # max-heap (negated) of the K best times taken
        self.rows: list[PlanRow] = []
        self.submitted: list[tuple[int, dict[str, float], float]] = []
        self.finished: dict[int, dict[str, Any]] = {}  # position -> its outcome
        self.taken = 0  # positions taken into best and rows, in order

    def threshold(self) -> float:
        if self.r.exhaustive or len(self.best) < self.r.top:
            return math.inf
        return -self.best[0]

    def run(self, budget: Budget) -> list[PlanRow]:
        space, cases = self.outcome.space, self.cases
        lag = max(1, self.stream.window // 2)  # one running and one waiting per worker
        # best first: unbuilt candidates (stage 0) keyed by their GEMM and layer bounds, built
        # ones (1) by their kernel bound, then (2) by their network bound too (never below
        # the key before); a key at or above the K-th best time ends the search
        queue: list[tuple[float, int, int]] = [(max(b), 0, i) for i, b in enumerate(self.bounds)]
        heapq.heapify(queue)
        while queue:
            self.take(len(self.submitted) - lag + 1)
            key, stage, i = queue[0]
            if key >= self.threshold():
                break
            if budget.spent(self.kind, len(self.submitted), stage == 2, self.outcome):
                break
            heapq.heappop(queue)
            if stage == 0:
                built = cases.get(i, space.candidates[i])
                if built is not None:
                    heapq.heappush(queue, (max(built[1], key), 1, i))
            elif stage == 1:
                network = cases.network(i)
                heapq.heappush(queue, (max(network, key), 2, i))
            else:
                self.submit(i)
        self.take(len(self.submitted))
        _account(self.kind, queue, self.threshold(), cases, self.outcome)
        return sorted(
            self.rows,
            key=lambda row: (
                row.iteration_time,
                row.candidate.text,
                row.candidate.parallel.micro_batch,
            ),
        )

    def submit(self, i: int) -> None:
        entry = self.cases.built[i]
        assert entry is not None
        c = self.outcome.space.candidates[i]
        point = _point(self.r, self.docs, c, self.kind, self.compare)
        self.stream.submit(str(len(self.submitted)), point)
        self.submitted.append((i, entry[0], entry[1]))

    def take(self, upto: int) -> None:
        """Take the results of the positions before ``upto`` into the rows and the K best,
        in position order (waiting for those still running)."""
        while self.taken < upto:
            while self.taken not in self.finished:
                key, result = self.stream.next()
                self.finished[int(key)] = result
            result = self.finished.pop(self.taken)
            i, memory, kb = self.submitted[self.taken]
            self.taken += 1
            c = self.outcome.space.candidates[i]
            if result["status"] != "ok":
                self.outcome.failed.append((c.text, self.kind, str(result.get("error"))))
                continue
            gemm, layer = self.bounds[i]
            network = self.cases.networks.get(i, 0.0)
            row = PlanRow(c, self.kind, gemm, kb, dict(memory), result["metrics"], layer, network)
            self.rows.append(row)
            heapq.heappush(self.best, -row.iteration_time)
            if len(self.best) > self.r.top:
                heapq.heappop(self.best)
            if self.progress is not None:
                self.progress(self.kind, len(self.rows))


def _account(
    kind: str,
    queue: list[tuple[float, int, int]],
    limit: float,
    cases: _Cases,
    outcome: PlanOutcome,
) -> None:
    """Count what the search left in its ``queue``: pruned (keyed at or above the K-th best
    time ``limit``: unbuilt, built, of those by the network bound) and, where the budget
    stopped it, unexplored (keyed below: their least key, a lower bound)."""
    pruned = [(key, b, i) for key, b, i in queue if key >= limit]
    outcome.pruned_unbuilt[kind] = sum(1 for _, b, _ in pruned if not b)
    outcome.pruned_kernel[kind] = sum(1 for _, b, _ in pruned if b)
    outcome.pruned_network[kind] = sum(
        1 for key, b, i in pruned if b == 2 and cases.network(i) == key
    )
    left = [key for key, _, _ in queue if key < limit]
    if kind in outcome.stopped and left:
        outcome.unexplored[kind] = len(left)
        outcome.unexplored_bound[kind] = min(left)
    else:  # stopped as the bounds would have ended it: nothing was left unexplored
        outcome.stopped.pop(kind, None)
