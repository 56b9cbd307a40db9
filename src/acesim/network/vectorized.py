"""Exact mode without an event per message: collectives as numpy recurrences over every NPU.

When collectives run with an endpoint that charges nothing (the ``ideal`` kind) and one chunk
in flight per NPU and dimension, the event simulation of :mod:`acesim.network.collective`
reduces to recurrences that numpy evaluates for every NPU at once, step by step (no
per-message Python; every NPU keeps its own times):

* a step of ``k`` messages of ``m`` bytes that starts at ``S`` at rank ``r`` has its messages
  out at ``F = S + m / x_r``, where ``x_r`` is the rate the fluid allocator gives ``k`` equal
  messages on the rank's egress and their receivers' ingress (the same arithmetic as
  :func:`acesim.engine.fluid.max_min_rates`: share ``w / max(1/C)``, load the sequential sum of
  ``k`` shares, level ``C / load``, rate ``share * level``);
* a message from ``q`` arrives at ``F_q + a_q`` (``a``: latency plus endpoint delay); the step
  completes at ``C_r = max(F_r, max over the senders q of r of (F_q + a_q))``, and the next
  step starts then; senders are found per group line (a dimension, a slice or a strided
  group), so every dimension, subset of dimensions and communicator group is expressible;
* each dimension's queue admits one chunk phase at a time, FIFO by arrival within a
  collective: on one dimension the order does not depend on timing (computed once); on
  several (:class:`Lockstep`) the next phase admitted is one that reaches its dimension first
  at every rank, before every other waiting phase there and no later than any chunk that may
  still come to it. On a platform with a variation the ranks keep agreed admission orders
  (:mod:`acesim.network.agreement`): there the next phase of a dimension's order is the one
  the first rank ready to admit one picks (its queue's choice among the phases waiting
  there), every other rank admitting it when it reaches it, so a straggler's package may
  run behind the others. Where neither decides (ranks ready together that would pick
  differently, a phase still on another dimension that could reach the deciding rank
  first), or a phase takes no time (arrivals could tie), or a direct step's line is not in
  lockstep (its messages into one receiver would couple senders in different steps through
  its ingress), the event engine runs it;
* the bytes sent and received are summed message by message in the order the events would
  have been processed (by time; sequential float additions, as the event runtime does).

:func:`run_alone` runs one collective as the only work of a platform
(``simulate_collective(..., exact=True)``). :class:`Deferred` runs a training graph's
collectives (:class:`acesim.training.executor.GraphExecutor`): each is computed when its last
rank joins, from every rank's own join time (stragglers), and each rank's completion is one
event; one that starts while computed ones are in flight is computed after them when it
reaches every dimension after their last admission there, else together with them
(:meth:`Lockstep.run_joint`: each dimension's queue admits, when it frees, the waiting phase
with the smallest key (priority, FIFO/LIFO between collectives, arrival within one), else
the first to arrive; the next admission on a dimension is one every rank makes next, and
phases waiting on another dimension arrive later than that queue frees), moving the
completions of those already computed where the batch changed them (their superseded
completion events cancelled, so that none runs late and advances the clock); any overlap
this cannot express makes the executor redo the run with those collectives on the event
engine.

Every NPU is simulated: a slower link at one rank (``run.links``) delays exactly the steps
that depend on it. The result is bit-identical to the event simulation while the ranks run in
lockstep (no variation); with per-rank capacities or join times each rank's rate uses its own
fill level, where the allocator, reallocating several ranks' messages at one instant, freezes
fill levels within a relative 1e-9 of each other at the lowest, and byte sums that tie in
time are added in step order: the two differ by at most that (in practice by a few units in
the last place); link integrals (``Resource.used``, :meth:`acesim.engine.Engine.plan_usage`)
by rounding. Endpoints that charge HBM or hold units, concurrent chunks per dimension, NCCL
protocols and NVLS steps run on the event engine.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Container, MutableSequence, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from ..engine import EventHandle, Resource
from .algorithms import ALGORITHMS, NVLS_KINDS
from .collective import Collective, CollectiveRuntime
from .endpoint import Endpoint
from .group import Group
from .plan import Phase, nvls_sync_latency
from .ring_form import ring_ends
from .step import Step
from .sums import add_repeatedly

__all__ = [
    "ENABLED",
    "Conflict",
    "Deferred",
    "Diverged",
    "LinkCache",
    "Lockstep",
    "Outcome",
    "add_repeatedly",
    "applies",
    "check_replicas",
    "latency_bound",
    "run_alone",
    "step_bounds",
]

#: Tests turn this off to compare with the event simulation.
ENABLED = True

#: Tests turn this off to compare a ring phase's closed form (:mod:`.ring_form`) with its
#: steps one by one.
RING_CLOSED_FORM = True

_HOOKS = (
    "shape_phases",
    "link_efficiency",
    "hbm_parallelism",
    "message_demand",
    "step_begin",
    "phase_begin",
    "step_end",
    "chunk_begin",
    "chunk_end",
    "collective_started",
    "collective_finished",
    "budget_demand",
    "local_copy_demand",
)


#: Whole numbers of bytes below this add exactly in floating point (the float64 mantissa), so
#: their sum does not depend on the order of the additions.
_EXACT_SUMS = 2**53

#: The most per-rank (time, bytes) records summed in time order (ranks out of lockstep with
#: several message sizes); beyond it the event path runs the case.
_MAX_RECORDS = 1 << 24


def endpoint_problem(endpoint: type[Endpoint] | Endpoint) -> str | None:
    """Why collectives of this endpoint (a model or its class) need the event path: it
    overrides a level the lockstep recurrences leave out (it charges the NPUs, shapes the
    phases or watches steps); None for an endpoint that charges nothing."""
    kind = endpoint if isinstance(endpoint, type) else type(endpoint)
    hooks = [name for name in _HOOKS if getattr(kind, name) is not getattr(Endpoint, name)]
    if hooks:
        return f"{kind.__name__} charges the NPUs or shapes the steps (its {hooks[0]})"
    return None


def backend_problem(runtime: CollectiveRuntime) -> str | None:
    """Why no collective of ``runtime`` may run on this backend (None: each may, as
    :func:`unsupported` says): the backend off, symmetric or class mode, a trace recording
    every message, observers on the engine, an endpoint that charges the NPUs."""
    if not ENABLED:
        return "the lockstep backend is off"
    if not runtime.exact:
        return "not exact mode"
    if runtime.phase_log is not None or not runtime.engine.quiet(listened=True):
        return "a trace records every message"
    return endpoint_problem(runtime.endpoint)


def applies(runtime: CollectiveRuntime) -> bool:
    """Whether exact-mode collectives on ``runtime`` may run on this backend at all."""
    return backend_problem(runtime) is None


def run_alone(
    runtime: CollectiveRuntime,
    op: str,
    size: float,
    *,
    dims: Sequence[int] | None = None,
    group: Group | None = None,
) -> Collective | str:
    """Run ``op`` of ``size`` bytes as the only work of an exact platform, vectorized over the
    ranks; where the event path is needed, the reason (see the module docstring)."""
    problem = backend_problem(runtime)
    if problem is not None:
        return problem
    axes, chunks, choice = runtime.choose(op, size, dims=dims, group=group)
    phases = choice.phases
    problem = unsupported(runtime, phases, chunks, choice.protocol)
    if problem is not None:
        return problem
    now = runtime.engine.now
    n = runtime.topology.npus
    outcome = Lockstep(runtime, phases, chunks).run(np.full(n, now))
    if outcome is None:
        return TIMING
    coll = runtime.record(op, size, axes, chunks, phases, choice, expected=n)
    for listener in runtime.engine.bound_listeners:
        outcome.emit(listener)
    coll.bytes_sent = outcome.sent
    coll.bytes_received = outcome.received
    coll.bytes_sent_per_dim.update(outcome.sent_per_dim)
    coll.rank_finished = dict(zip(range(n), outcome.finished.tolist(), strict=True))
    coll.chunks_left = dict.fromkeys(range(n), 0)
    coll.finished = float(outcome.finished.max())
    if not math.isfinite(coll.finished):
        return coll  # the caller reports a time that is not finite
    runtime.engine.advance_to(coll.finished)
    return coll


#: Why a collective the backend supports still ran on the event path: its ranks' timing
#: (arrivals that tie, a direct step's line out of lockstep, an overlap the recurrences
#: cannot order) needs the event order.
TIMING = "its ranks' timing needs the event order"

#: Step patterns the recurrences compute (senders found per group line); ``span`` waves and
#: rooted ``chain`` steps run on the event path.
PATTERNS = frozenset({"next", "xor", "all"})


def unsupported(
    runtime: CollectiveRuntime, phases: list[Phase], chunks: int, protocol: Any
) -> str | None:
    """Why these chunk phases need the event path (None: the backend computes them): the
    backend's one declared predicate (see the module docstring). Each algorithm declares
    whether the backend computes it (:attr:`~acesim.network.algorithms.Algorithm.lockstep`),
    each step pattern by :data:`PATTERNS`."""
    if not phases:
        return "no chunk phases (a routed point-to-point shift)"
    for phase in phases:
        if phase.algorithm not in ALGORITHMS or not ALGORITHMS.get(phase.algorithm).lockstep:
            return f"algorithm {phase.algorithm} is not taught to the lockstep backend"
        if phase.lanes:
            return "flat-ring lanes"
        for step in phase.steps:
            if step.pattern not in PATTERNS:
                return f"step pattern {step.pattern} is not taught to the lockstep backend"
            if step.kind in NVLS_KINDS:
                return "in-switch (NVLS) steps"
    if min(runtime.config.active_chunks_per_dimension, chunks) != 1:
        return "several chunks in flight per dimension"
    if protocol is not None and (
        protocol.name is not None
        or protocol.base_latency != 0
        or any(f != 1.0 for f in protocol.factors)
        or any(h is not None for h in protocol.hop_latencies)
        or protocol.crossing_latency
    ):
        return "NCCL protocols"
    if nvls_sync_latency(runtime.config, phases, chunks) > 0:
        return "in-switch (NVLS) synchronisation"
    if any(d.spine or d.incast_fan_in is not None for d in runtime.topology.dimensions):
        return "leaf/spine links or switch incast"
    if runtime.paths_may_bind():
        return "a NIC's proxy or PCIe path below the links' capacity"
    # The work bound (collective.max_messages) counts what the simulation iterates over: here
    # steps, each one numpy pass over the ranks, not messages (the event path refuses it).
    if chunks * sum(len(p.steps) for p in phases) > runtime.config.max_messages:
        return "more steps than collective.max_messages"
    return None


def latency_bound(
    runtime: CollectiveRuntime, phases: list[Phase], chunks: int, protocol: Any
) -> float:
    """A time (s) the collective of these chunk phases cannot finish before, counted from its
    issue; 0 where :func:`unsupported` refuses them or a link carries nothing.

    In the model the recurrences compute, a rank's steps on a dimension run one at a time
    (one chunk phase admitted at a time, every rank admitting in one order: lockstep or
    agreed orders), and a step ends no sooner than a message its sender sent at that
    sender's start of the step arrives: after the sender sent the step's bytes (its ``k``
    messages of ``m`` bytes at a rate no more than its egress's or its receiver's ingress
    capacity shared by the ``k``: no sooner than ``k * m`` over the dimension's largest
    capacity) and then its latency and the endpoint delay. So the last step on a dimension
    ends, at every rank, no sooner than the sum over its steps of those two terms (the least
    delay there), less a relative :data:`_BOUND_SLACK` for the rounding of the sums the
    simulation adds in another order."""
    return step_bounds(runtime, phases, chunks, protocol)[0]


def step_bounds(
    runtime: CollectiveRuntime, phases: list[Phase], chunks: int, protocol: Any
) -> tuple[float, float]:
    """:func:`latency_bound`, and a time (s) each rank's part cannot finish before, counted
    from that rank's own start: its own steps one at a time on each dimension, each no
    sooner than its bytes at the dimension's largest capacity (the latencies left out: a
    message it waits on may have arrived before it started). Both 0 where
    :func:`unsupported` refuses the phases or a link carries nothing."""
    if unsupported(runtime, phases, chunks, protocol) is not None:
        return 0.0, 0.0
    bound = own = 0.0
    for dim in {p.dim for p in phases}:
        capacities = [
            row[dim].capacity for rows in (runtime.egress, runtime.ingress) for row in rows
        ]
        if not min(capacities) > 0:
            return 0.0, 0.0
        fastest = max(capacities)
        if runtime.rank_latencies is None:
            delay = runtime.delays[dim]
        else:
            latency = min(row[dim] for row in runtime.rank_latencies)
            delay = latency + runtime.config.endpoint_delay
        steps = 0
        sending = 0.0  # s of one chunk's steps' bytes at the fastest capacity
        for p in phases:
            if p.dim != dim:
                continue
            for step, count in p.steps.runs:
                steps += count
                if fastest < math.inf:
                    moved = step.message_count(p.size) * float(step.message_bytes)
                    sending += count * (moved / fastest)
        bound = max(bound, chunks * (steps * delay + sending) * (1 - _BOUND_SLACK))
        own = max(own, chunks * sending * (1 - _BOUND_SLACK))
    return bound, own


#: :func:`latency_bound`'s relative allowance for rounding: far below the margin by which a
#: bound must exceed a time to skip a variant (1e-6), far above the rounding of its sums
_BOUND_SLACK = 1e-9


#: a step whose sender of rank r is r - 1 (mod the ranks): a shift, not a gather
_RING = object()


@dataclass(slots=True, eq=False)
class SpanRun:
    """Rank 0's messages of a run of steps, one message a step: step ``i`` from
    ``starts[i]`` to ``ends[i]`` (s), each bound by ``bound``."""

    bound: Any
    starts: np.ndarray
    ends: np.ndarray

    def segments(self) -> list[tuple[Any, float, float, int]]:
        """As one segment entry per step (:attr:`Outcome.segments`)."""
        pairs = zip(self.starts.tolist(), self.ends.tolist(), strict=True)
        return [(self.bound, s, e, 1) for s, e in pairs]


@dataclass(slots=True, eq=False)
class UsageRun:
    """Rank 0's egress allocations of a run of steps on dimension ``dim``: ``[starts[i],
    ends[i])`` (s), each at ``rate`` B/s (:meth:`acesim.engine.Engine.plan_usage_run`)."""

    dim: int
    starts: np.ndarray
    ends: np.ndarray
    rate: float


#: one of :attr:`Outcome.segments`: (bound, start s, end s, messages), or a run of them
SegmentEntry = tuple[Any, float, float, int] | SpanRun


@dataclass(slots=True, eq=False)
class Outcome:
    """What a vectorized run produced: per-rank finish times (s), byte sums, and rank 0's
    message segments for the bound listener."""

    finished: np.ndarray
    sent: float
    received: float
    sent_per_dim: dict[int, float]
    segments: list[SegmentEntry]
    #: rank 0's egress allocation per step: (dimension, start s, end s, B/s)
    usage: list[tuple[int, float, float, float]]
    #: runs of those kept as arrays, each with its place among :attr:`usage` (the agreed
    #: orders' ring phases: their outcome is told once, never compared or moved)
    usage_runs: list[tuple[int, UsageRun]] = field(default_factory=list)

    def plan(self, engine: Any, egress: Sequence[Resource]) -> None:
        """Plan rank 0's allocations on its ``egress`` links (one per dimension), in order
        (:meth:`acesim.engine.Engine.plan_usage`, a run's at once)."""
        usage = self.usage
        at = 0
        for index, run in self.usage_runs:
            for d, begin, end, rate in usage[at:index]:
                engine.plan_usage(egress[d], begin, end, rate)
            engine.plan_usage_run(egress[run.dim], run.starts, run.ends, run.rate)
            at = index
        for d, begin, end, rate in usage[at:]:
            engine.plan_usage(egress[d], begin, end, rate)

    def emit(self, listener: Any) -> None:
        """Tell ``listener`` (one of the engine's bound listeners, or None) of rank 0's
        messages (a run of steps as one batch where the listener takes batches)."""
        if listener is None:
            return
        repeated = getattr(listener, "repeated", None)  # BoundRecorder's batch of k
        many = getattr(listener, "spans", None)  # and of spans
        for entry in self.segments:
            if isinstance(entry, SpanRun):
                if many is not None:
                    many("message", entry.bound, entry.starts, entry.ends)
                    continue
                entries = entry.segments()
            else:
                entries = [entry]
            for bound, start, end, k in entries:
                if repeated is not None:
                    if end > start and k > 0:
                        repeated("message", bound, start, end, k)
                    continue
                for _ in range(k):
                    listener.opened("message", start)
                    if end > start:
                        listener.segment("message", bound, start, end)
                    listener.closed("message", end)

    def flat_segments(self) -> list[tuple[Any, float, float, int]]:
        """:attr:`segments` with each run as its steps."""
        out: list[tuple[Any, float, float, int]] = []
        for entry in self.segments:
            if isinstance(entry, SpanRun):
                out.extend(entry.segments())
            else:
                out.append(entry)
        return out


class _Geometry:
    """Where each rank sits in its group line of one phase (dimension, size, stride)."""

    __slots__ = ("pos", "unit", "base", "size", "_rows", "_line_of")

    def __init__(self, runtime: CollectiveRuntime, phase: Phase, ranks: np.ndarray):
        d = runtime.topology.dimensions[phase.dim]
        own = (ranks // d.stride) % d.size
        self.size = phase.size
        self.pos = (own // phase.stride) % phase.size
        self.unit = phase.stride * d.stride
        self.base = ranks - self.pos * self.unit  # the member at position 0
        self._rows: np.ndarray | None = None
        self._line_of: np.ndarray | None = None

    def member(self, position: np.ndarray) -> np.ndarray:
        """The rank at ``position`` (per rank) of each rank's group line."""
        out: np.ndarray = self.base + position * self.unit
        return out

    def line_of(self) -> np.ndarray:
        """Each rank's row in :meth:`rows`."""
        if self._line_of is None:
            line_of = np.empty(len(self.pos), dtype=np.int64)
            rows = self.rows()
            line_of[rows] = np.arange(rows.shape[0])[:, None]
            self._line_of = line_of
        return self._line_of

    def rows(self) -> np.ndarray:
        """The group lines as rows of ranks, by position."""
        if self._rows is None:
            order = np.lexsort((self.pos, self.base))
            self._rows = order.reshape(-1, self.size)
        return self._rows


class _Part:
    """One collective of a :class:`Lockstep` run: its plan and what its messages add up to."""

    __slots__ = (
        "phases", "chunks", "key", "sizes", "coupled", "sent", "received", "records",
        "counts", "first", "segments", "usage", "usage_runs", "exact",
    )  # fmt: skip

    def __init__(self, phases: list[Phase], chunks: int, key: tuple[int, int]):
        self.phases = phases
        self.chunks = chunks
        self.key = key
        self.sizes = {float(s.message_bytes) for p in phases for s in p.steps}
        self.coupled = {p.dim for p in phases for s in p.steps if s.pattern != "next"}
        # (dim, bytes of a message, messages per rank, times: a float when every rank's are
        # equal, else an array per rank), for sent (completion) and received (delivery)
        self.sent: list[tuple[int, float, int, Any]] = []
        self.received: list[tuple[int, float, int, Any]] = []
        self.records = 0
        #: one message size: messages per rank sent on each dimension (order is irrelevant)
        self.counts: dict[int, int] = {}
        #: several sizes, each a multiple of one power of two (see _exact_sum): messages
        #: of every rank per (dimension, size), their sums exact in any order; None: the
        #: sizes are not, and each step's times are kept (sent, received) to add in order
        self.exact: dict[tuple[int, float], int] | None = (
            {} if len(self.sizes) > 1 and _units(self.sizes) is not None else None
        )
        #: the time each dimension's first message completes (s)
        self.first: dict[int, float] = {}
        self.segments: list[SegmentEntry] = []
        self.usage: list[tuple[int, float, float, float]] = []
        #: runs of rank 0's allocations kept as arrays, each with its place in ``usage``
        #: (:attr:`Outcome.usage_runs`)
        self.usage_runs: list[tuple[int, UsageRun]] = []


def _links(runtime: CollectiveRuntime, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Dimension ``d``'s egress and ingress capacities (B/s) and message delays (s) per rank,
    and whether each is alike at every rank."""
    n = runtime.topology.npus
    egress = np.array([row[d].capacity for row in runtime.egress], dtype=float)
    ingress = np.array([row[d].capacity for row in runtime.ingress], dtype=float)
    if runtime.rank_latencies is None:
        delay = np.full(n, runtime.delays[d])
    else:
        latency = np.array([row[d] for row in runtime.rank_latencies], dtype=float)
        delay = latency + runtime.config.endpoint_delay
    uniform = bool(
        np.all(egress == egress[0]) and np.all(ingress == egress[0]) and np.all(delay == delay[0])
    )
    return egress, ingress, delay, uniform


class LinkCache:
    """What every :class:`Lockstep` of one run computes alike, kept for the run's next ones:
    per dimension the links' capacities and delays (set before a run starts:
    ``CollectiveRuntime.set_link``), and per phase shape its group lines, peers, rates,
    send times and prepared steps. Phases are kept by identity beside their entries (a
    phase's id is not reused while it is held)."""

    __slots__ = (
        "links",
        "geometry",
        "peers",
        "rates",
        "times",
        "allocated",
        "prepared",
        "ring",
    )

    def __init__(self) -> None:
        #: per dimension: egress and ingress capacities (B/s) and delays (s) per rank, and
        #: whether they are alike at every rank
        self.links: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = {}
        self.geometry: dict[tuple[int, int, int], _Geometry] = {}
        self.peers: dict[tuple[int, int, int, str, int], tuple[np.ndarray, np.ndarray]] = {}
        self.rates: dict[tuple[int, int, int, str, int, int], np.ndarray] = {}
        self.times: dict[tuple[int, int, int, str, int, int, float], np.ndarray] = {}
        self.allocated: dict[tuple[Any, ...], float] = {}
        self.prepared: dict[int, tuple[Phase, list[tuple[Any, ...]]]] = {}
        #: (phase id, its dimension coupled) -> (phase, :meth:`Lockstep._ring_run`'s answer)
        self.ring: dict[tuple[int, bool], tuple[Phase, Any]] = {}


class Lockstep:
    """Every NPU's chunk phases of one collective as numpy recurrences over the ranks.

    Args:
        runtime: the exact collective runtime (its egress, ingress and latencies are read).
        phases: one chunk's phases.
        chunks: chunks of the collective.
        usage: record rank 0's egress allocations (:attr:`Outcome.usage`).
    """

    def __init__(
        self,
        runtime: CollectiveRuntime,
        phases: list[Phase],
        chunks: int,
        usage: bool = False,
        *,
        others: Sequence[tuple[list[Phase], int, tuple[int, int]]] = (),
        key: tuple[int, int] = (0, 0),
        cache: LinkCache | None = None,
        batched: bool = False,
    ):
        self.record_usage = usage
        #: rank 0's messages and link spans of a run of ring steps kept as one :class:`SpanRun`
        #: and one :class:`UsageRun` (its outcome is told once, never compared or replaced:
        #: the agreed orders' use)
        self.batched = batched
        self.runtime = runtime
        self.phases = phases
        self.chunks = chunks
        #: the collectives run together (:meth:`run_joint`): this one first, then ``others``
        #: (phases, chunks, queue key: smaller keys are admitted first among waiting phases)
        self.parts = [_Part(phases, chunks, key)] + [_Part(p, c, k) for p, c, k in others]
        self.part = self.parts[0]
        n = self.n = runtime.topology.npus
        self.ranks = np.arange(n)
        self.weight = runtime.endpoint.message_weight
        self.dims = sorted({p.dim for part in self.parts for p in part.phases})
        cache = self.cache = LinkCache() if cache is None else cache
        self.egress: dict[int, np.ndarray] = {}
        self.ingress: dict[int, np.ndarray] = {}
        self.delay: dict[int, np.ndarray] = {}
        self.uniform: dict[int, bool] = {}
        for d in self.dims:
            links = cache.links.get(d)
            if links is None:
                links = cache.links[d] = _links(runtime, d)
            self.egress[d], self.ingress[d], self.delay[d], self.uniform[d] = links
        #: dimensions whose steps are not all ring steps: every step there must run in
        #: lockstep within its group lines (senders into one ingress are then in one step)
        self.coupled = set().union(*(part.coupled for part in self.parts))
        self._geometry = cache.geometry
        self._peers = cache.peers
        self._rates = cache.rates
        self._times = cache.times
        self._bound: dict[int, Any] = {}
        self._allocated = cache.allocated
        #: per dimension, when each rank's queue frees, and its last admission (s; see run)
        self.free: dict[int, np.ndarray] = {}
        self.admitted: dict[int, np.ndarray] = {}
        self.listened = runtime.engine.bound_listener is not None
        #: False while a phase is computed for its ends alone (:meth:`phase_end`)
        self._recording = True

    # -- running -----------------------------------------------------------------------------

    def _start_queues(
        self, busy: dict[int, np.ndarray] | None, admitted: dict[int, np.ndarray] | None
    ) -> bool:
        """Take the queues' state before this run (see :meth:`run`); False where this path
        cannot compute it: rank 0's messages not bound by its own egress (what the engine
        reports), or a direct step's messages into one receiver sharing its ingress (which
        couples the senders' rates)."""
        self.free = dict(busy or {})
        self.admitted = dict(admitted or {})
        if self.listened:
            for d in self.dims:
                if not self.egress[d][0] <= self.ingress[d].min():
                    return False
                self._bound[d] = self.runtime.egress[0][d]
        return not any(not self.uniform[d] for d in self.coupled)

    def run(
        self,
        start: np.ndarray,
        busy: dict[int, np.ndarray] | None = None,
        admitted: dict[int, np.ndarray] | None = None,
    ) -> Outcome | None:
        """Every rank joins at ``start`` (s, per rank); None where the event path is needed.

        ``busy``: per dimension, when each rank's queue there frees from earlier collectives
        (s); ``admitted``: when they admitted their last phase there (s). This collective's
        phases must reach each dimension after that (so that none of it could have been
        admitted before an earlier one's waiting phases); after the run :attr:`free` and
        :attr:`admitted` hold the same for what ran."""
        if not self._start_queues(busy, admitted):
            return None
        if len(self.dims) == 1:
            finished = self._one_dimension(start)
        else:
            finished = self._dimensions(start)
        if finished is None:
            return None
        return self._outcome(self.part, finished)

    # -- what :mod:`acesim.network.agreed_lockstep` computes with -----------------------------
    def begin_alone(self) -> bool:
        """Take the queues as free (:meth:`_start_queues`); False where this path cannot
        compute the collective."""
        return self._start_queues(None, None)

    def phase_end(self, phase: Phase, begin: np.ndarray, record: bool) -> np.ndarray | None:
        """Every rank's end of ``phase`` (s) when it starts at ``begin`` (s, per rank; inf:
        unknown, and so are the ends of the group lines holding it); its messages recorded
        for :meth:`outcome` where ``record``, else left out (computed again once known).
        None where the event path is needed."""
        part = self.part
        if not record:
            self.part = _Part(part.phases, part.chunks, part.key)
            self._recording = False
        try:
            return self._phase(phase, begin)
        finally:
            self.part = part
            self._recording = True

    def phase_end_lines(
        self, phase: Phase, begin: np.ndarray, end: np.ndarray, changed: np.ndarray
    ) -> bool:
        """``end`` (every rank's end of ``phase``, s, from :meth:`phase_end`) computed again,
        in place, for the group lines holding a rank of ``changed`` (a bool per rank), when
        they start at ``begin`` (s, per rank): the same float operations as :meth:`_phase` on
        those lines' ranks (their messages stay within the line), nothing recorded. False
        where the event path is needed (a coupled line's members in different steps)."""
        geo = self._geo(phase)
        rows = geo.rows()
        if rows.shape[0] == 1:  # one line holds every rank
            sub = rows
        else:
            sub = rows[np.unique(geo.line_of()[changed])]  # (lines, line size): by position
        run = self._ring_run(phase)
        if run is not None:
            closed = ring_ends(begin[sub], run[2], run[3], len(phase.steps))
            if closed is not None:
                end[sub] = closed[0]
                return True
        flat = sub.ravel()
        d = phase.dim
        coupled = d in self.coupled
        delay = self.delay[d][flat]
        local = np.empty(self.n, dtype=np.int64)
        local[flat] = np.arange(len(flat))
        done = begin[flat]
        for _k, _m, took, src, _allocated in self._prepare(phase):
            if coupled:
                in_line = done.reshape(sub.shape)
                if not bool(np.all(in_line == in_line[:, :1])):
                    return False
            out = done + took[flat]
            arrive = out + delay
            if src is None:
                latest = _max_of_others_rows(arrive.reshape(sub.shape)).ravel()
            else:
                senders = self.ranks - 1 if src is _RING else src
                latest = arrive[local[senders[flat] % self.n]]
            done = np.maximum(out, latest)
        end[flat] = done
        return True

    def outcome(self, finished: np.ndarray) -> Outcome | None:
        """The collective's outcome from its recorded phases (None: the event path)."""
        return self._outcome(self.part, finished)

    def _outcome(self, part: _Part, finished: np.ndarray) -> Outcome | None:
        """``part``'s outcome: its finish times and its byte sums (None: the event path)."""
        per_dim: dict[int, float] = {}
        if len(part.sizes) == 1:
            (m,) = part.sizes
            sent = add_repeatedly(0.0, m, self.n * sum(part.counts.values()))
            received = sent
            for d in self._first_dims(part):
                per_dim[d] = add_repeatedly(0.0, m, self.n * part.counts[d])
            return Outcome(
                finished, sent, received, per_dim, part.segments, part.usage, part.usage_runs
            )
        if part.exact is not None:
            return self._exact_outcome(part, finished)
        total_sent = self._total(part, part.sent)
        total_received = self._total(part, part.received)
        if total_sent is None or total_received is None:
            return None
        sent, received = total_sent, total_received
        for d in self._first_dims(part):
            one = self._total(part, [r for r in part.sent if r[0] == d])
            if one is None:
                return None
            per_dim[d] = one
        return Outcome(
            finished, sent, received, per_dim, part.segments, part.usage, part.usage_runs
        )

    def _exact_outcome(self, part: _Part, finished: np.ndarray) -> Outcome | None:
        """:meth:`_outcome` of a part whose sums are exact in any order (:attr:`_Part.exact`):
        every message's bytes counted, sent and received alike (None: the sum reaches 2**53,
        where it would not be exact)."""
        assert part.exact is not None
        counted = part.exact.items()
        total = _exact_sum([(m, count) for (_d, m), count in counted])
        if total is None:
            return None
        per_dim: dict[int, float] = {}
        for d in self._first_dims(part):
            one = _exact_sum([(m, count) for (e, m), count in counted if e == d])
            if one is None:
                return None
            per_dim[d] = one
        return Outcome(finished, total, total, per_dim, part.segments, part.usage, part.usage_runs)

    def _after_earlier(self, dim: int, arrival: np.ndarray) -> np.ndarray | None:
        """When a first phase on ``dim`` arriving at ``arrival`` starts (s, per rank), after
        earlier collectives' phases there; None when it could have overtaken one."""
        before = self.admitted.get(dim)
        if before is not None and not bool(np.all(arrival > before)):
            return None
        busy = self.free.get(dim)
        return arrival if busy is None else np.maximum(arrival, busy)

    def _one_dimension(self, start: np.ndarray) -> np.ndarray | None:
        """One dimension: phases are admitted in one order whatever the timing."""
        (dim,) = self.dims
        done = self._after_earlier(dim, start)
        if done is None:
            return None
        for _chunk, index in _admissions(self.chunks, len(self.phases)):
            self.admitted[dim] = done
            phase_done = self._phase(self.phases[index], done)
            if phase_done is None:
                return None
            done = phase_done
        self.free[dim] = done
        return done

    def _dimensions(self, start: np.ndarray) -> np.ndarray | None:
        """Several dimensions: each admits the chunk phases that reach it in order of arrival
        (FIFO within a collective), one at a time. The next phase to admit is one that
        arrives first at every rank, before every other waiting phase of its dimension and
        no later than any chunk that may still come to it; where no phase is first at every
        rank, or a phase takes no time (arrivals could then tie), the event path runs it."""
        phases = self.phases
        later = [{p.dim for p in phases[i:]} for i in range(len(phases) + 1)]
        # per chunk: [phase index, arrival (s, per rank), order of arrival among equal times]
        frontier: list[list[Any]] = [[0, start, c] for c in range(self.chunks)]
        free = self.free
        seen: set[int] = set()
        finished: np.ndarray | None = None
        while frontier:
            chosen = None
            for entry in frontier:
                if self._is_next(entry, frontier, later):
                    chosen = entry
                    break
            if chosen is None and self.runtime.agreed:
                chosen = self._agreed_next(frontier, later)
            if chosen is None:
                return None
            index, arrival = chosen[0], chosen[1]
            phase = phases[index]
            if phase.dim in seen:
                begin = np.maximum(arrival, free[phase.dim])
            else:
                seen.add(phase.dim)
                first = self._after_earlier(phase.dim, arrival)
                if first is None:
                    return None
                begin = first
            self.admitted[phase.dim] = begin
            end = self._phase(phase, begin)
            if end is None or not bool(np.all(end > begin)):
                return None
            free[phase.dim] = end
            if index + 1 < len(phases):
                chosen[0], chosen[1], chosen[2] = index + 1, end, None
            else:
                frontier.remove(chosen)
                finished = end if finished is None else np.maximum(finished, end)
        return finished

    def _agreed_next(self, frontier: list[list[Any]], later: list[set[int]]) -> list[Any] | None:
        """The next phase admitted where the ranks keep agreed admission orders
        (:mod:`acesim.network.agreement`, a platform with a variation): see
        :func:`_agreed_choice`; None where no dimension's next is known."""
        phases = self.phases
        for dim in dict.fromkeys(phases[e[0]].dim for e in frontier):
            here = [(e, e[1], (0, 0), e[2]) for e in frontier if phases[e[0]].dim == dim]
            coming = None  # per rank, a time the phases still to come here arrive after
            for o_index, o_arrival, _order in frontier:
                o_dim = phases[o_index].dim
                if o_dim != dim and dim in later[o_index + 1]:
                    bound = self._leaving(phases[o_index], o_arrival, self.free.get(o_dim))
                    coming = bound if coming is None else np.minimum(coming, bound)
            chosen: list[Any] | None = _agreed_choice(here, coming, self.free.get(dim))
            if chosen is not None:
                return chosen
        return None

    def _leaving(self, phase: Phase, arrival: np.ndarray, busy: np.ndarray | None) -> np.ndarray:
        """A time (s, per rank) a chunk waiting for ``phase`` (arrived at ``arrival``, its queue
        freeing at ``busy``) reaches any later phase no sooner than: it starts no sooner than
        both, and each step then takes at least the rank's own send time (the same float
        additions as :meth:`_phase`, each rounding no higher)."""
        bound = arrival if busy is None else np.maximum(arrival, busy)
        for _k, _m, took, _src, _allocated in self._prepare(phase):
            bound = bound + took
        return bound

    def _is_next(self, entry: list[Any], frontier: list[list[Any]], later: list[set[int]]) -> bool:
        index, arrival, order = entry
        dim = self.phases[index].dim
        for other in frontier:
            if other is entry:
                continue
            o_index, o_arrival, o_order = other
            if self.phases[o_index].dim == dim:
                if order is not None and o_order is not None and order < o_order:
                    ok = bool(np.all(arrival <= o_arrival))
                else:
                    ok = bool(np.all(arrival < o_arrival))
            elif dim in later[o_index + 1]:
                ok = bool(np.all(arrival <= o_arrival))
            else:
                ok = True
            if not ok:
                return False
        return True

    # -- several collectives together --------------------------------------------------------
    def run_joint(
        self,
        starts: Sequence[np.ndarray],
        busy: dict[int, np.ndarray] | None = None,
        admitted: dict[int, np.ndarray] | None = None,
    ) -> list[Outcome] | None:
        """Every collective of :attr:`parts` at once, the i-th joined by every rank at
        ``starts[i]`` (s, per rank); their outcomes in that order, or None where the event
        path is needed. ``busy`` and ``admitted`` as for :meth:`run` (earlier collectives).

        Each dimension's queue at each rank admits one chunk phase at a time: when it frees,
        the waiting phase with the smallest key (priority, then FIFO/LIFO between
        collectives, then order of arrival within a collective), else the first to arrive.
        The next phase admitted on a dimension is one that every rank admits next there
        (:meth:`_joint_next`); where none is, or arrivals tie in a way only the event order
        decides, the event path runs the collectives."""
        if not self._start_queues(busy, admitted):
            return None
        # messages into one receiver on a dimension come from one sender at a time only if
        # every phase there has the same group lines
        lines: dict[int, tuple[int, int]] = {}
        for part in self.parts:
            for p in part.phases:
                if lines.setdefault(p.dim, (p.size, p.stride)) != (p.size, p.stride):
                    return None
        parts = self.parts
        later = [
            [{p.dim for p in part.phases[i:]} for i in range(len(part.phases) + 1)]
            for part in parts
        ]
        # per chunk: [part, phase index, arrival (s, per rank), order of arrival among equal
        # times (the join's, chunk by chunk) or None, chunk]
        # (and that arrival as one number when every rank's is the same, else None)
        frontier: list[list[Any]] = []
        for i, part in enumerate(parts):
            if part.phases:
                start = np.asarray(starts[i], dtype=float)
                alike = _alike(start)
                frontier.extend([i, 0, start, c, c, alike] for c in range(part.chunks))
        before = dict(self.admitted)
        free = self.free
        #: free as one number per dimension where every rank's is the same (else None)
        self._free_alike = {d: _alike(f) for d, f in free.items()}
        #: per dimension, the chunk (part, chunk) whose phase there was admitted last
        last: dict[int, tuple[int, int]] = {}
        finished: list[np.ndarray | None] = [None] * len(parts)
        while frontier:
            chosen = self._joint_choose(frontier, later, last)
            if chosen is None:
                return None
            i, index, arrival, _order, chunk, _alike_arrival = chosen
            part = self.part = parts[i]
            phase = part.phases[index]
            d = phase.dim
            earlier = before.get(d)
            if earlier is not None and not bool(np.all(arrival > earlier)):
                return None  # it could have overtaken an earlier collective's phase
            busy_d = free.get(d)
            begin = arrival if busy_d is None else np.maximum(arrival, busy_d)
            self.admitted[d] = begin
            end = self._phase(phase, begin)
            if end is None or not bool(np.all(end > begin)):
                return None
            free[d] = end
            self._free_alike[d] = end_alike = _alike(end)
            last[d] = (i, chunk)
            if index + 1 < len(part.phases):
                chosen[1], chosen[2], chosen[3], chosen[5] = index + 1, end, None, end_alike
            else:
                frontier.remove(chosen)
                done = finished[i]
                finished[i] = end if done is None else np.maximum(done, end)
        outcomes = []
        for i, part in enumerate(parts):
            done = finished[i]
            if done is None:  # no phases: done when joined
                done = np.asarray(starts[i], dtype=float)
            outcome = self._outcome(part, done)
            if outcome is None:
                return None
            outcomes.append(outcome)
        self.part = parts[0]
        return outcomes

    def _joint_next(
        self,
        entry: list[Any],
        frontier: list[list[Any]],
        later: list[list[set[int]]],
        last: dict[int, tuple[int, int]],
    ) -> bool:
        """Whether every rank admits ``entry``'s phase next on its dimension (see
        :meth:`run_joint`). At a rank whose queue there frees at ``F``, a phase arriving at
        ``A > F`` (or ``A == F``) is admitted next iff every other one arrives there later; one
        arriving at ``A < F`` (waiting) iff every other one arrives after ``F``, has a larger
        key, or is the chunk releasing the queue at ``F`` (queued behind the waiting ones).
        Phases still on other dimensions arrive later than their present arrival and than the
        freeing of the queue they wait in (every phase admitted there so far goes first)."""
        i, index, arrival, order, _chunk, _alike_arrival = entry
        parts = self.parts
        key = parts[i].key
        dim = parts[i].phases[index].dim
        busy = self.free.get(dim)
        wait = None if busy is None else arrival < busy
        for other in frontier:
            if other is entry:
                continue
            j, o_index, o_arrival, o_order, o_chunk, _o_alike = other
            same = i == j
            if parts[j].phases[o_index].dim == dim:
                if same and order is not None and o_order is not None and order < o_order:
                    after = arrival <= o_arrival
                else:
                    after = arrival < o_arrival
                if wait is None or not bool(wait.any()):
                    ok = bool(np.all(after))
                elif last.get(dim) == (j, o_chunk):
                    # it arrives as the queue frees, behind the waiting phases
                    ok = bool(np.all(after | wait))
                else:
                    assert busy is not None
                    better = after if same else key < parts[j].key
                    ok = bool(np.all(np.where(wait, (o_arrival > busy) | better, after)))
            elif dim in later[j][o_index + 1]:
                # it is admitted where it is after every phase admitted there so far, so it
                # arrives here later than both its present arrival and that queue's freeing
                o_busy = self.free.get(parts[j].phases[o_index].dim)
                if o_busy is not None:
                    o_arrival = np.maximum(o_arrival, o_busy)
                ahead = arrival <= o_arrival
                if same or wait is None or not bool(wait.any()):
                    ok = bool(np.all(ahead))
                elif key < parts[j].key:
                    ok = bool(np.all(ahead | wait))
                else:
                    assert busy is not None
                    ok = bool(np.all(np.where(wait, o_arrival >= busy, ahead)))
            else:
                ok = True
            if not ok:
                return False
        return True

    def _joint_choose(
        self,
        frontier: list[list[Any]],
        later: list[list[set[int]]],
        last: dict[int, tuple[int, int]],
    ) -> list[Any] | None:
        """The frontier entry admitted next (see :meth:`run_joint`), or None."""
        alike = all(e[5] is not None for e in frontier) and all(
            f is not None for f in self._free_alike.values()
        )
        if alike:  # every rank's times alike: compare numbers, earliest arrivals first
            for entry in sorted(frontier, key=_arrival):
                if self._joint_next_alike(entry, frontier, later, last):
                    return entry
        else:
            for entry in frontier:
                if self._joint_next(entry, frontier, later, last):
                    return entry
        return None

    def _joint_next_alike(
        self,
        entry: list[Any],
        frontier: list[list[Any]],
        later: list[list[set[int]]],
        last: dict[int, tuple[int, int]],
    ) -> bool:
        """:meth:`_joint_next` where every arrival and queue's freeing is one number (every
        rank's alike): the same comparisons, on those numbers."""
        i, index, _arrival, order, _chunk, arrival = entry
        parts = self.parts
        key = parts[i].key
        dim = parts[i].phases[index].dim
        free = self._free_alike
        busy = free.get(dim)
        wait = busy is not None and arrival < busy
        for other in frontier:
            if other is entry:
                continue
            j, o_index, _o_arrays, o_order, o_chunk, o_arrival = other
            same = i == j
            o_dim = parts[j].phases[o_index].dim
            if o_dim == dim:
                if same and order is not None and o_order is not None and order < o_order:
                    after = arrival <= o_arrival
                else:
                    after = arrival < o_arrival
                if not wait:
                    ok = after
                elif last.get(dim) == (j, o_chunk):
                    ok = True  # it arrives as the queue frees, behind the waiting phases
                else:
                    ok = o_arrival > busy or (after if same else key < parts[j].key)
            elif dim in later[j][o_index + 1]:
                o_busy = free.get(o_dim)
                if o_busy is not None and o_busy > o_arrival:
                    o_arrival = o_busy
                if same or not wait:
                    ok = arrival <= o_arrival
                else:
                    ok = key < parts[j].key or o_arrival >= busy
            else:
                ok = True
            if not ok:
                return False
        return True

    # -- one phase ---------------------------------------------------------------------------
    def _geo(self, phase: Phase) -> _Geometry:
        key = (phase.dim, phase.size, phase.stride)
        geo = self._geometry.get(key)
        if geo is None:
            geo = self._geometry[key] = _Geometry(self.runtime, phase, self.ranks)
        return geo

    def _pair(self, phase: Phase, step: Step) -> tuple[np.ndarray, np.ndarray]:
        """(the rank each rank sends to, the rank each rank receives from) of a step."""
        key = (phase.dim, phase.size, phase.stride, step.pattern, step.distance)
        pair = self._peers.get(key)
        if pair is None:
            geo = self._geo(phase)
            p = phase.size
            if step.pattern == "next":
                pair = (geo.member((geo.pos + 1) % p), geo.member((geo.pos - 1) % p))
            else:  # xor: the partner both ways
                partner = geo.member(geo.pos ^ step.distance)
                pair = (partner, partner)
            self._peers[key] = pair
        return pair

    def _took(self, phase: Phase, step: Step, k: int) -> np.ndarray:
        """Each rank's time to send the step's messages (s): their bytes over their rate."""
        m = float(step.message_bytes)
        key = (phase.dim, phase.size, phase.stride, step.pattern, step.distance, k)
        took = self._times.get((*key, m))
        if took is None:
            rate = self._rates.get(key)
            if rate is None:
                d = phase.dim
                if step.pattern == "all":
                    receiver = self.ingress[d]
                else:
                    receiver = self.ingress[d][self._pair(phase, step)[0]]
                rate = self._rates[key] = _rates(self.egress[d], receiver, self.weight, k)
            # finish = now + remaining / rate (an infinite rate, or no bytes: now + 0)
            took = self._times[(*key, m)] = m / rate
        return took

    def _prepare(self, phase: Phase) -> list[tuple[Any, ...]]:
        """Per step of ``phase``: (messages per rank, bytes of one, each rank's send time,
        the rank each rank receives from or None for a direct step, rank 0's allocation)."""
        known = self.cache.prepared.get(id(phase))
        if known is not None and known[0] is phase:
            return known[1]
        steps: list[tuple[Any, ...]] = []
        alike: dict[Step, tuple[Any, ...]] = {}  # ring phases repeat one step
        for step in phase.steps:
            entry = alike.get(step)
            if entry is None:
                k = step.message_count(phase.size)
                took = self._took(phase, step, k)
                src: Any = None if step.pattern == "all" else self._pair(phase, step)[1]
                if src is not None and np.array_equal(src, np.roll(self.ranks, 1)):
                    src = _RING
                allocated = self._rank0_allocated(phase, step, k)
                entry = alike[step] = (k, float(step.message_bytes), took, src, allocated)
            steps.append(entry)
        self.cache.prepared[id(phase)] = (phase, steps)
        return steps

    def _phase(self, phase: Phase, begin: np.ndarray) -> np.ndarray | None:
        """Every rank's completion of ``phase`` (s) when it starts at ``begin``."""
        d = phase.dim
        delay = self.delay[d]
        rows = self._geo(phase).rows() if d in self.coupled else None
        bound = self._bound.get(d)
        listened = self.listened
        part = self.part
        segments, usage = part.segments, part.usage
        record_usage = self.record_usage
        n = self.n
        if self.uniform[d] and phase.size > 1 and float(begin.min()) == float(begin.max()):
            # every rank starts together on links alike: every rank's times are one number
            return self._phase_together(phase, float(begin[0]))
        closed = self._ring_closed(phase, begin)
        if closed is not None:
            return closed
        out, arrive, latest = np.empty(n), np.empty(n), np.empty(n)
        done = begin.copy()
        add, maximum, take = np.add, np.maximum, np.take
        for k, m, took, src, allocated in self._prepare(phase):
            if rows is not None:
                lines = done[rows]
                if not bool(np.all(lines == lines[:, :1])):
                    return None  # members of a line in different steps: the event path
            add(done, took, out=out)
            add(out, delay, out=arrive)
            if src is None:
                latest = self._max_of_others(phase, arrive)
            elif src is _RING:  # the sender of rank r is r - 1
                latest[1:] = arrive[:-1]
                latest[0] = arrive[-1]
            else:
                take(arrive, src, out=latest)
            start0, end0 = float(done[0]), float(out[0])
            if listened:
                segments.append((bound, start0, end0, k))
            if end0 > start0 and record_usage:
                usage.append((d, start0, end0, allocated))
            self._record(part, d, m, k, out, arrive)
            maximum(out, latest, out=done)
        return done

    def _ring_run(self, phase: Phase) -> tuple[int, float, float, float, float] | None:
        """Where ``phase`` is one run of identical ring steps on links alike in its
        dimension (not coupled: its lines need no lockstep check), with rates alike at every
        rank: (messages per rank, bytes of one, each rank's send time s, the delay s, rank 0's
        allocation B/s) for :mod:`acesim.network.ring_form`; else None."""
        d = phase.dim
        key = (id(phase), d in self.coupled)
        known = self.cache.ring.get(key)
        if known is not None and known[0] is phase:
            answer: tuple[int, float, float, float, float] | None = known[1]
            return answer
        run = None
        entries = self._prepare(phase)
        if (
            RING_CLOSED_FORM
            and d not in self.coupled
            and entries
            and all(step.pattern == "next" for step in phase.steps)
        ):
            k, m, took, src, allocated = entries[0]
            took_alike, delay_alike = _alike(took), _alike(self.delay[d])
            # steps that differ in nothing the recurrence reads (a reduce-scatter's and an
            # all-gather's steps of one phase) are one run
            alike = all(
                e is entries[0]
                or (e[0] == k and e[1] == m and e[3] is src and e[4] == allocated
                    and (e[2] is took or _alike(e[2]) == took_alike))
                for e in entries
            )  # fmt: skip
            if alike and src is not None and took_alike is not None and delay_alike is not None:
                run = (k, m, took_alike, delay_alike, allocated)
        self.cache.ring[key] = (phase, run)
        return run

    def _ring_closed(self, phase: Phase, begin: np.ndarray) -> np.ndarray | None:
        """:meth:`_phase` of a run of identical ring steps in closed form
        (:func:`~acesim.network.ring_form.ring_ends`: the same floats), rank 0's messages and
        the byte counts recorded as the steps would; None where it does not apply."""
        run = self._ring_run(phase)
        part = self.part
        if run is None or (len(part.sizes) != 1 and part.exact is None):
            return None
        k, m, took, delay, allocated = run
        geo = self._geo(phase)
        rows = geo.rows()
        steps = len(phase.steps)
        recorded = self._recording and (self.listened or self.record_usage)
        watch = None
        if recorded:  # rank 0's steps: its message segments and link spans
            line = int(geo.line_of()[0])
            watch = (line, int(np.flatnonzero(rows[line] == 0)[0]))
        closed = ring_ends(begin[rows], took, delay, steps, watch)
        if closed is None:
            return None
        ends, trail = closed
        d = phase.dim
        if recorded:
            assert trail is not None
            starts = trail[:-1]
            outs = starts + took  # each step's start + took, as the steps add it
            if self.listened:
                bound = self._bound.get(d)
                if self.batched and k == 1:
                    part.segments.append(SpanRun(bound, starts, outs))
                else:
                    part.segments.extend(
                        zip(repeat(bound), starts.tolist(), outs.tolist(), repeat(k), strict=False)
                    )
            if self.record_usage and self.batched:
                part.usage_runs.append((len(part.usage), UsageRun(d, starts, outs, allocated)))
            elif self.record_usage:
                sending = outs > starts
                part.usage.extend(
                    zip(
                        repeat(d),
                        starts[sending].tolist(),
                        outs[sending].tolist(),
                        repeat(allocated),
                        strict=False,
                    )
                )
        if d not in part.first:
            part.first[d] = float((begin + took).min())
        if len(part.sizes) == 1:
            part.counts[d] = part.counts.get(d, 0) + k * steps
        else:
            assert part.exact is not None
            part.exact[(d, m)] = part.exact.get((d, m), 0) + k * self.n * steps
        done = np.empty(self.n)
        done[rows] = ends
        return done

    def _phase_together(self, phase: Phase, begin: float) -> np.ndarray:
        """:meth:`_phase` when every rank starts at ``begin`` (s) on a dimension whose links
        and latencies are alike at every rank: each step's arrays would hold one value, so
        the same float operations are done once, on that value."""
        d = phase.dim
        delay = float(self.delay[d][0])
        bound = self._bound.get(d)
        listened = self.listened
        part = self.part
        segments, usage = part.segments, part.usage
        record_usage = self.record_usage
        first = d not in part.first
        one_size = len(part.sizes) == 1
        done = begin
        for k, m, took, _src, allocated in self._prepare(phase):
            out = done + float(took[0])
            arrive = out + delay  # every sender's message, the latest one included
            if listened:
                segments.append((bound, done, out, k))
            if out > done and record_usage:
                usage.append((d, done, out, allocated))
            if first:
                part.first[d] = out
                first = False
            if one_size:
                part.counts[d] = part.counts.get(d, 0) + k
            elif part.exact is not None:
                part.exact[(d, m)] = part.exact.get((d, m), 0) + k * self.n
            else:
                part.sent.append((d, m, k, out))
                part.received.append((d, m, k, arrive))
            done = out if out >= arrive else arrive  # np.maximum of the two
        return np.full(self.n, done)

    def _rank0_allocated(self, phase: Phase, step: Step, k: int) -> float:
        """What rank 0's ``k`` messages of the step are allocated on its egress (B/s), summed
        message by message as the engine does."""
        key = (phase.dim, phase.size, phase.stride, step.pattern, step.distance, k)
        allocated = self._allocated.get(key)
        if allocated is None:
            rate = float(self._rates[key][0])
            allocated = 0.0
            for _ in range(k):
                allocated += rate
            self._allocated[key] = allocated
        return allocated

    def _max_of_others(self, phase: Phase, values: np.ndarray) -> np.ndarray:
        """For each rank, the largest value of every other member of its group line."""
        rows = self._geo(phase).rows()
        if rows.shape[0] == 1:
            return _max_of_others(values)
        out = np.empty_like(values)
        out[rows] = _max_of_others_rows(values[rows])
        return out

    # -- bytes -------------------------------------------------------------------------------
    def _record(
        self, part: _Part, d: int, m: float, k: int, out: np.ndarray, arrive: np.ndarray
    ) -> None:
        if d not in part.first:
            part.first[d] = float(out.min())
        if len(part.sizes) == 1:
            # one message size: the sums do not depend on the order of the additions
            part.counts[d] = part.counts.get(d, 0) + k
            return
        exact = part.exact
        if exact is not None:  # sums exact in any order: how many of each size
            exact[(d, m)] = exact.get((d, m), 0) + k * self.n
            return
        for records, times in ((part.sent, out), (part.received, arrive)):
            low, high = float(times.min()), float(times.max())
            if low == high:
                records.append((d, m, k, low))
            else:
                records.append((d, m, k, times.copy()))
                part.records += len(times)

    @staticmethod
    def _first_dims(part: _Part) -> list[int]:
        """Dimensions in the order their first message completes (the event runtime's dict)."""
        first = part.first
        return sorted(first, key=lambda d: (first[d], d))

    def _total(self, part: _Part, records: list[tuple[int, float, int, Any]]) -> float | None:
        """The bytes of ``records``, added one message at a time in the order the events would
        have been processed (by time); None when messages of different sizes tie in time."""
        n = self.n
        if not records:
            return 0.0
        if part.records > _MAX_RECORDS:
            return None
        if part.records == 0:
            return self._total_together(records)
        times: list[np.ndarray] = []
        sizes: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for _d, m, k, t in records:
            if isinstance(t, float):
                times.append(np.array([t]))
                counts.append(np.array([n * k]))
                sizes.append(np.array([m]))
            else:
                times.append(t)
                counts.append(np.full(len(t), k))
                sizes.append(np.full(len(t), m))
        t_all = np.concatenate(times)
        order = np.argsort(t_all, kind="stable")
        t_all = t_all[order]
        m_all = np.concatenate(sizes)[order]
        c_all = np.concatenate(counts)[order]
        differ = m_all[1:] != m_all[:-1]
        if part.records == 0 and bool(np.any(differ & (t_all[1:] == t_all[:-1]))):
            # which size the engine adds first depends on its event order: in lockstep the
            # event path keeps the sums bit-identical; out of lockstep (ranks made to
            # differ) ties are added in step order, within a few units in the last place
            return None
        starts = np.concatenate(([0], np.flatnonzero(differ) + 1))
        runs = np.add.reduceat(c_all, starts)
        total = 0.0
        for m, count in zip(m_all[starts].tolist(), runs.tolist(), strict=True):
            total = add_repeatedly(total, m, int(count))
        return total

    def _total_together(self, records: list[tuple[int, float, int, Any]]) -> float | None:
        """:meth:`_total` where every record's time is one number (every rank's alike): the
        same stable sort by time, runs of one size and additions, without arrays."""
        n = self.n
        entries = sorted(((t, m, n * k) for _d, m, k, t in records), key=_time)
        # whole bytes summing below 2**53: every partial sum is exact, in any order
        exact = all(m == int(m) for _t, m, _c in entries) and (
            sum(int(m) * c for _t, m, c in entries) < _EXACT_SUMS
        )
        total = 0.0
        size: float | None = None
        count = 0
        previous = -math.inf
        for t, m, c in entries:
            if m != size:
                if size is not None:
                    if t == previous and not exact:
                        return None  # sizes that tie in time (see _total)
                    total = add_repeatedly(total, size, count)
                size, count = m, c
            else:
                count += c
            previous = t
        assert size is not None
        return add_repeatedly(total, size, count)


def _units(sizes: set[float]) -> int | None:
    """The least power of two ``u`` such that every one of ``sizes`` (bytes) is a whole
    multiple of ``1 / u`` (1: whole bytes; 4: quarters, ...); None where one is negative, not
    finite or finer than 2**-53."""
    if not all(math.isfinite(m) and m >= 0 for m in sizes):
        return None
    unit = max(m.as_integer_ratio()[1] for m in sizes)  # a power of two (a float's ratio)
    return unit if unit <= _EXACT_SUMS else None


def _exact_sum(counted: list[tuple[float, int]]) -> float | None:
    """The bytes of ``counted`` messages ((size B, how many)) where every size is a multiple
    of one power of two ``2**-k`` (whole bytes, or whole bytes split in halves, quarters, ...:
    chunks cut over rings of power-of-two sizes) and the sum counted in those units stays
    below 2**53: every partial sum is then exact, whatever order the additions run in (the
    event path's: by time), so the sum is the exact one, with no sort by time (None:
    otherwise)."""
    if not counted:
        return 0.0
    unit = _units({m for m, _count in counted})
    if unit is None:
        return None
    total = sum(int(m * unit) * count for m, count in counted)
    if total >= _EXACT_SUMS:
        return None
    return float(total) / unit


def _agreed_choice(
    here: list[tuple[Any, np.ndarray, tuple[int, int], int | None]],
    coming: np.ndarray | None,
    free: np.ndarray | None,
) -> Any:
    """The phase one dimension admits next in its agreed order (:mod:`acesim.network.
    agreement`): the pick of the first rank ready to admit one (when its queue frees, or
    when a phase reaches it while it is free); every other rank follows that order.

    ``here``: the phases on the dimension ((entry, arrival s per rank, queue key, order of
    arrival among chunks that joined together or None)); ``coming``: per rank, a time the
    phases still on other dimensions arrive no sooner than (None: none comes); ``free``: when each
    rank's queue frees (s; None: free). The first entry picked, or None where the event
    order decides: a rank that could be ready as soon with a phase still to come, ranks
    ready together that pick differently, or arrivals that tie."""
    first = here[0][1]
    for _entry, arrival, _key, _order in here[1:]:
        first = np.minimum(first, arrival)
    ready = first if free is None else np.maximum(first, free)
    when = float(ready.min())
    if coming is not None:
        soonest = np.minimum(first, coming)
        if free is not None:
            soonest = np.maximum(soonest, free)
        if not bool(np.all(soonest >= when)) or bool(np.any((soonest == when) & (coming <= when))):
            return None
    chosen = None
    for rank in np.flatnonzero(ready == when).tolist():
        pick = _queue_pick(here, rank, when)
        if pick is None or (chosen is not None and pick is not chosen):
            return None
        chosen = pick
    return chosen


def _queue_pick(
    here: list[tuple[Any, np.ndarray, tuple[int, int], int | None]], rank: int, when: float
) -> Any:
    """The entry ``rank``'s queue admits at ``when`` (s) among ``here``: the smallest queue
    key, then the earliest arrival (chunks that joined together: in chunk order); None where
    that is not decided (equal keys and arrivals)."""
    best: tuple[Any, float, tuple[int, int], int | None] | None = None
    for entry, arrivals, key, order in here:
        arrival = float(arrivals[rank])
        if arrival > when:
            continue
        if best is None or (key, arrival) < (best[2], best[1]):
            best = (entry, arrival, key, order)
        elif (key, arrival) == (best[2], best[1]):
            if order is None or best[3] is None:
                return None
            if order < best[3]:
                best = (entry, arrival, key, order)
    return None if best is None else best[0]


def _time(entry: tuple[float, float, int]) -> float:
    return entry[0]


def _alike(values: np.ndarray) -> float | None:
    """The value of every rank when they are all the same number (not NaN), else None."""
    low = float(values.min())
    return low if low == float(values.max()) else None


def _arrival(entry: list[Any]) -> float:
    arrival: float = entry[5]
    return arrival


def _admissions(chunks: int, phases: int) -> list[tuple[int, int]]:
    """(chunk, phase) in the order one NPU admits them on the dimension (one at a time, waiting
    ones by order of arrival): the queue of :class:`CollectiveRuntime`, without time."""
    waiting: deque[tuple[int, int]] = deque((c, 0) for c in range(1, chunks))
    order = [(0, 0)]
    current = (0, 0)
    while True:
        chunk, phase = current
        follow = (chunk, phase + 1) if phase + 1 < phases else None
        if waiting:
            current = waiting.popleft()
            if follow is not None:
                waiting.append(follow)
        elif follow is not None:
            current = follow
        else:
            return order
        order.append(current)


def _rates(egress: np.ndarray, ingress: np.ndarray, weight: float, k: int) -> np.ndarray:
    """The rate (B/s) of each of a rank's ``k`` equal messages, each demanding one unit per byte
    of its egress and of its receiver's ingress (``ingress``: per sender, that receiver's
    capacity; every receiver gets ``k`` messages), as the fluid allocator computes it when
    every message is frozen at its own fill level (inf on infinite capacities)."""
    finite_e, finite_i = np.isfinite(egress), np.isfinite(ingress)
    frac_e = np.where(finite_e, 1.0 / np.where(finite_e, egress, 1.0), 0.0)
    frac_i = np.where(finite_i, 1.0 / np.where(finite_i, ingress, 1.0), 0.0)
    dominant = np.maximum(frac_e, frac_i)
    safe = np.where(dominant <= 1e-300, 1.0, dominant)
    share = np.where(dominant <= 1e-300, weight, weight / safe)
    load = np.zeros_like(egress)
    for _ in range(k):
        load = load + share * 1.0
    level_e = np.where(finite_e, egress / load, math.inf)
    level_i = np.where(finite_i, ingress / load, math.inf)
    return np.where(finite_e | finite_i, share * np.minimum(level_e, level_i), math.inf)


def _max_of_others_rows(lines: np.ndarray) -> np.ndarray:
    """For each entry of each row of ``lines``, the largest of the other entries of its row
    (:meth:`Lockstep._max_of_others` on rows)."""
    which = np.arange(lines.shape[0])
    top = lines.argmax(axis=1)
    highest = lines[which, top]
    rest = lines.copy()
    rest[which, top] = -math.inf
    second = rest.max(axis=1)
    out: np.ndarray = np.repeat(highest[:, None], lines.shape[1], axis=1)
    out[which, top] = second
    return out


def _max_of_others(values: np.ndarray) -> np.ndarray:
    """For each rank, the largest value of every other rank."""
    top = int(np.argmax(values))
    rest = values.copy()
    rest[top] = -math.inf
    out = np.full(values.shape, values[top])
    out[top] = rest.max()
    return out


class Conflict(Exception):
    """A vectorized collective would have shared the network with another collective: the
    run must be redone with these collectives (the caller's keys) on the event path."""

    def __init__(self, keys: set[Any]):
        super().__init__(f"collectives {sorted(map(repr, keys))} overlap")
        self.keys = keys


class Diverged(Exception):
    """Replicated ranks (:attr:`Deferred.replicated`) would not finish a collective at one
    time: the run must be redone with every rank simulated."""


def check_replicas(
    collectives: Sequence[Collective], vector_ids: Container[int], ranks: int
) -> None:
    """Replicated ranks: every collective of ``collectives`` not computed here (``vector_ids``:
    those were checked when computed) finished at one time at each of the ``ranks`` ranks;
    else :class:`Diverged`."""
    for coll in collectives:
        if coll.id in vector_ids:
            continue
        times = set(coll.rank_finished.values())
        if len(coll.rank_finished) != ranks or len(times) != 1:
            raise Diverged(f"collective {coll.label!r} finishes unevenly")


#: The most collectives :class:`Deferred` computes together (a bound on the cost of
#: recomputing overlapping collectives: each new one recomputes its batch); beyond it the
#: overlapping ones run on the event path. A cost bound, not a model parameter.
MAX_JOINT = 16


class _Computed:
    """A collective :class:`Deferred` computed: what it was computed from, what it produced,
    and what it told the engine and the bound listener (to change them if recomputed)."""

    __slots__ = ("coll", "key", "joined", "outcome", "completions", "messages", "spans")

    def __init__(self, coll: Collective, key: Any, joined: np.ndarray):
        self.coll = coll
        self.key = key
        self.joined = joined
        self.outcome: Outcome | None = None
        #: its completion events (one, or one per rank): a recomputation cancels those that
        #: have not run, so that a superseded completion neither runs nor advances the clock
        self.completions: list[EventHandle] = []
        #: the slice of the bound listener's messages its segments are (BoundRecorder)
        self.messages: tuple[int, int] | None = None
        #: its spans of Engine.plan_usage, one per entry of outcome.usage (None: nothing)
        self.spans: list[list[float] | None] = []


def _entries(outcome: Outcome) -> int:
    """How many messages :meth:`Outcome.emit` gives a batching listener (BoundRecorder)."""
    return sum(k for _bound, start, end, k in outcome.flat_segments() if end > start and k > 0)


def _same(a: Outcome, b: Outcome) -> bool:
    """Whether two outcomes of one collective are the same, bit for bit."""
    return (
        np.array_equal(a.finished, b.finished)
        and a.sent == b.sent
        and a.received == b.received
        and list(a.sent_per_dim.items()) == list(b.sent_per_dim.items())
        and sorted(a.flat_segments(), key=_segment_key)
        == sorted(b.flat_segments(), key=_segment_key)
        and sorted(a.usage) == sorted(b.usage)
    )


def _segment_key(segment: tuple[Any, float, float, int]) -> tuple[float, float, int, int]:
    bound, start, end, k = segment
    return (start, end, k, id(bound))


def instance_problem(
    coll: Collective, key: Any, ranks: int | None, excluded: Container[Any], n: int
) -> str | None:
    """Why a training run's collective instance ``coll`` (the executor's ``key``; ``ranks``
    joining it) runs on the event path whatever its plan (None: its plan decides): a key the
    run put there (``excluded``), or an instance only some of the ``n`` ranks join."""
    if key in excluded:
        return TIMING
    if (coll.members is not None and len(coll.members) != n) or (ranks is not None and ranks != n):
        return "an instance only one group's ranks join"
    return None


def queue_key(runtime: CollectiveRuntime, coll: Collective) -> tuple[int, int]:
    """Where ``coll``'s waiting phases go in a queue between collectives (the runtime's
    ``CollectiveRuntime._key``): smaller first."""
    config = runtime.config
    rank = -coll.priority if config.priorities == "blocking_first" else 0
    return (rank, coll.id if config.scheduling == "fifo" else -coll.id)


class Deferred:
    """Exact-mode training: collectives computed without events, alone or together.

    Ranks join a collective as their programs reach it; its part at each rank cannot finish
    before every member has joined (each phase waits on its group line, and every phase of
    a collective over whole dimensions reaches every member), so the collective is computed
    when the last rank joins (:class:`Lockstep`, with each rank's own join time) and every
    rank's completion is scheduled as one event. A collective that starts while computed
    ones are in flight is computed after them (each dimension's queue frees when theirs
    leave it) when its phases reach every dimension after their last admission there (so
    that it cannot have overtaken one of their waiting phases: LIFO and priorities would
    let it). Otherwise it is computed together with them (:meth:`Lockstep.run_joint`: the
    batch of collectives computed since the network last had nothing waiting, from the
    state before the batch, with the queues' admission order between collectives), and the
    completions of those already computed are moved where the batch changed them (earlier
    too: a newer collective that reorders a queue under LIFO may let one overtake another's
    waiting chunk; the superseded completion events are cancelled, not left to run): a
    change is only possible after the new collective's first join, so nothing the run
    already did depends on it; the executor checks that (a completion that already happened,
    a link integral already folded, a completion now in the past) and raises
    :class:`Conflict` otherwise. Where the batch cannot be computed (arrivals that only the
    event order decides, more than :data:`MAX_JOINT` collectives, phases that share a
    receiver's ingress), :meth:`start` or :meth:`join` raises :class:`Conflict`, naming the
    collectives to run on the event path when the run is redone (a collective that starts
    while only event-path ones are in flight runs there too, without a redo).

    Replicated ranks (``replicated``: the caller simulates rank 0 alone, every rank being
    identical to it): rank 0's join stands for every rank's at the same instant, and when the
    collective finishes at one time at every rank, that is one event (rank 0's completion,
    after every rank's counters are set as their completions would have set them, in rank
    order); where ranks would finish at different times, :meth:`join` raises
    :class:`Diverged`.

    Args:
        runtime: the exact collective runtime.
        excluded: keys of collectives that run on the event path.
        replicated: rank 0 stands for every rank (see above).
    """

    def __init__(
        self,
        runtime: CollectiveRuntime,
        excluded: frozenset[Any] = frozenset(),
        *,
        replicated: bool = False,
    ):
        self.runtime = runtime
        self.excluded = excluded
        self.replicated = replicated
        self.n = runtime.topology.npus
        #: collectives in flight: id -> (key, vectorized?)
        self.inflight: dict[int, tuple[Any, bool]] = {}
        self._joined: dict[int, np.ndarray] = {}
        self._count: dict[int, int] = {}
        self._done: dict[int, int] = {}
        self._plans: dict[tuple[str, float, Any, Any], str | None] = {}
        #: collectives that ran (or run) here
        self.vector_ids: set[int] = set()
        #: why the others ran on the event path: reason -> collectives
        self.reasons: dict[str, int] = {}
        #: keys of collectives that must run on the event path: when not empty, the run's
        #: results are not valid and it must be redone (the caller raises :class:`Conflict`)
        self.conflicts: set[Any] = set()
        #: per dimension, when each rank's queue frees from the computed collectives, and
        #: their last admission there (s)
        self._busy: dict[int, np.ndarray] = {}
        self._admitted: dict[int, np.ndarray] = {}
        #: the collectives computed since the network last had nothing waiting, and the
        #: queues' state before them (busy, admitted)
        self._batch: list[_Computed] = []
        self._base: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = ({}, {})
        #: collectives computed together with others (recomputed batches)
        self.joint = 0
        #: what the run's recurrences compute alike (:class:`LinkCache`)
        self.link_cache = LinkCache()

    def _problem(self, coll: Collective, key: Any, ranks: int | None) -> str | None:
        """Why ``coll`` runs on the event path (None: here)."""
        problem = instance_problem(coll, key, ranks, self.excluded, self.n)
        if problem is not None:
            return problem
        sig = (coll.op, coll.size, coll.dims, tuple(coll.axes))
        if sig not in self._plans:
            self._plans[sig] = unsupported(self.runtime, coll.phases, coll.chunks, coll.protocol)
        return self._plans[sig]

    def start(self, coll: Collective, key: Any, ranks: int | None = None) -> bool:
        """A new collective instance ``coll`` (the caller's ``key``; ``ranks``: how many ranks
        will join it, when not every rank does): True when it runs here (join its ranks with
        :meth:`join`), False for the event path (the reason counted in :attr:`reasons`). One
        that needs the event path while a vectorized one is in flight is a conflict
        (:attr:`conflicts`): it runs on the event path, and the run goes on only to find
        further conflicts before it is redone."""
        vectors = [k for k, v in self.inflight.values() if v]
        if vectors:
            # after computed ones, or together with them (see join; one whose ranks have
            # not all joined yet is recomputed with it then, if nothing it did has happened)
            problem = self._problem(coll, key, ranks)
            if problem is not None:
                self.conflicts.update((key, *vectors))
        elif self.inflight:  # while event-path collectives are in flight, it joins them there
            problem = "it starts while event-path collectives are in flight"
        else:
            problem = self._problem(coll, key, ranks)
        vector = problem is None
        self.inflight[coll.id] = (key, vector)
        if problem is not None:
            self.reasons[problem] = self.reasons.get(problem, 0) + 1
        else:
            self._joined[coll.id] = np.full(self.n, math.nan)
            self._count[coll.id] = 0
            self.vector_ids.add(coll.id)
        self._done[coll.id] = 0
        return vector

    def event_rank_done(self, coll: Collective) -> None:
        """An event-path collective finished at one rank."""
        self._finished_at_rank(coll)

    def _finished_at_rank(self, coll: Collective) -> None:
        done = self._done[coll.id] = self._done[coll.id] + 1
        if done == self.n:
            del self.inflight[coll.id], self._done[coll.id]

    def join(self, coll: Collective, rank: int) -> None:
        """``rank`` joins the vectorized ``coll`` now."""
        engine = self.runtime.engine
        joined = self._joined[coll.id]
        if self.replicated:
            joined[:] = engine.now
            for r in range(self.n):
                coll.chunks_left[r] = coll.chunks
            self._count[coll.id] = self.n
        else:
            joined[rank] = engine.now
            coll.chunks_left[rank] = coll.chunks
            self._count[coll.id] += 1
        if self._count[coll.id] < self.n:
            return
        del self._joined[coll.id], self._count[coll.id]
        key = self.inflight[coll.id][0]
        computed = _Computed(coll, key, joined)
        lockstep = Lockstep(
            self.runtime, coll.phases, coll.chunks, usage=True, cache=self.link_cache
        )
        outcome = lockstep.run(joined, self._busy, self._admitted)
        if outcome is not None:
            latest = max((float(a.max()) for a in self._admitted.values()), default=-math.inf)
            if latest < engine.now:
                # every computed phase was admitted before now: nothing to come can overtake
                # one, nor does this one (it reaches each dimension after them): a new batch
                self._batch = []
                self._base = (self._busy, self._admitted)
            self._finish(computed, outcome)
            self._busy, self._admitted = lockstep.free, lockstep.admitted
            self._batch.append(computed)
            return
        if self._batch and len(self._batch) < MAX_JOINT and self._together(computed):
            return
        keys = {k for k, v in self.inflight.values() if v}
        if not bool(np.all(joined == engine.now)):
            raise Conflict(self.conflicts | keys)
        # every rank joined now: it can still start on the event path
        self.conflicts.update(keys)
        self.inflight[coll.id] = (key, False)
        self.reasons[TIMING] = self.reasons.get(TIMING, 0) + 1
        self.vector_ids.discard(coll.id)
        for r in range(self.n):
            self.runtime.join(coll, r)

    def _together(self, computed: _Computed) -> bool:
        """Compute ``computed`` with the batch (see the class docstring): True when done
        (the batch's changed completions moved), False when the batch cannot be computed.
        Raises :class:`Conflict` where a change would reach what already happened."""
        members = [*self._batch, computed]
        head = members[0].coll
        lockstep = Lockstep(
            self.runtime,
            head.phases,
            head.chunks,
            usage=True,
            cache=self.link_cache,
            key=queue_key(self.runtime, head),
            others=[
                (m.coll.phases, m.coll.chunks, queue_key(self.runtime, m.coll)) for m in members[1:]
            ],
        )
        busy, admitted = self._base
        outcomes = lockstep.run_joint([m.joined for m in members], busy, admitted)
        if outcomes is None:
            return False
        engine = self.runtime.engine
        now = engine.now
        listener = engine.bound_listener
        changed = []
        for member, outcome in zip(self._batch, outcomes, strict=False):
            assert member.outcome is not None
            if _same(member.outcome, outcome):
                continue
            coll = member.coll
            old = member.outcome.finished
            new = outcome.finished
            if self.replicated:
                done = np.full(self.n, coll.id not in self.inflight)
            else:
                done = np.array([coll.chunks_left[r] == 0 for r in range(self.n)])
            if (
                bool(np.any(done & (new != old)))  # a completion that already happened
                or bool(np.any(~done & (new < now)))  # one that should have happened
                or len(outcome.usage) != len(member.outcome.usage)
                or (
                    listener is not None
                    and (
                        member.messages is None
                        or _entries(outcome) != member.messages[1] - member.messages[0]
                    )
                )
            ):
                raise Conflict(self.conflicts | {member.key, computed.key})
            changed.append((member, outcome))
        if self.replicated:
            for _member, outcome in changed:
                finished = outcome.finished
                if not bool(np.all(finished == finished[0])):
                    raise Diverged("a recomputed collective finishes at different times")
        moves: list[tuple[Resource, list[float], tuple[int, float, float, float]]] = []
        respans: list[list[list[float] | None]] = []
        for member, outcome in changed:
            spans = self._match_spans(member, outcome, moves)
            if spans is None:
                raise Conflict(self.conflicts | {member.key, computed.key})
            respans.append(spans)
        for resource, span, (_d, begin, _end, _rate) in moves:
            if not engine.can_replan(resource, span, begin):
                raise Conflict(self.conflicts | {computed.key, *(m.key for m, _o in changed)})
        for resource, span, (_d, begin, end, rate) in moves:
            engine.replan(resource, span, begin, end, rate)
        for (member, _outcome), spans in zip(changed, respans, strict=True):
            member.spans = spans
        # nothing can fail from here on
        for member, outcome in changed:
            self._replace(member, outcome)
        self._busy, self._admitted = lockstep.free, lockstep.admitted
        self._finish(computed, outcomes[-1])
        self._batch.append(computed)
        self.joint += 1
        return True

    def _match_spans(
        self,
        member: _Computed,
        outcome: Outcome,
        moves: list[tuple[Resource, list[float], tuple[int, float, float, float]]],
    ) -> list[list[float] | None] | None:
        """The planned spans of ``member`` for the entries of its new ``outcome.usage``: an
        unchanged entry keeps its span, a changed one moves an old span of its dimension
        (appended to ``moves``); None when the dimensions' counts differ."""
        old = member.outcome
        assert old is not None
        unused: dict[tuple[int, float, float, float], list[int]] = {}
        for i, entry in enumerate(old.usage):
            unused.setdefault(entry, []).append(i)
        spans: list[list[float] | None] = [None] * len(outcome.usage)
        moved: list[int] = []
        for i, entry in enumerate(outcome.usage):
            same = unused.get(entry)
            if same:
                spans[i] = member.spans[same.pop(0)]
            else:
                moved.append(i)
        left: dict[int, list[int]] = {}
        for entries in unused.values():
            for i in entries:
                left.setdefault(old.usage[i][0], []).append(i)
        for entries in left.values():
            entries.sort()
        egress = self.runtime.egress[0]
        for i in moved:
            entry = outcome.usage[i]
            olds = left.get(entry[0])
            if not olds:
                return None
            span = member.spans[olds.pop(0)]
            if span is None:
                return None
            moves.append((egress[entry[0]], span, entry))
            spans[i] = span
        if any(left.values()):
            return None
        return spans

    def _replace(self, member: _Computed, outcome: Outcome) -> None:
        """A recomputed collective's new outcome (spans already moved)."""
        coll = member.coll
        engine = self.runtime.engine
        listener = engine.bound_listener
        messages = getattr(listener, "messages", None)
        if (
            listener is not None
            and member.messages is not None
            and isinstance(messages, MutableSequence)
        ):
            scratch: Any = type(listener)()  # a BoundRecorder's like (see _finish)
            outcome.emit(scratch)
            lo, hi = member.messages
            messages[lo:hi] = scratch.messages
        coll.bytes_sent = 0.0 + outcome.sent
        coll.bytes_received = 0.0 + outcome.received
        coll.bytes_sent_per_dim.clear()
        coll.bytes_sent_per_dim.update(outcome.sent_per_dim)
        member.outcome = outcome
        # the superseded completions that have not run are cancelled (not merely ignored when
        # they run: a stale event would still advance the clock, past the run's real end)
        for handle in member.completions:
            handle.cancel()
        finished = outcome.finished.tolist()
        if self.replicated:
            member.completions = [engine.schedule_at(finished[0], self._every_rank_done, coll)]
            return
        member.completions = [
            engine.schedule_at(t, self._rank_done, coll, r)
            for r, t in enumerate(finished)
            if coll.chunks_left[r] != 0  # not done yet: every such completion moves
        ]

    def _finish(self, computed: _Computed, outcome: Outcome) -> None:
        """Tell the engine, the listener and the collective what ``outcome`` did, and
        schedule the completions."""
        coll = computed.coll
        engine = self.runtime.engine
        finished = outcome.finished.tolist()
        if self.replicated and finished.count(finished[0]) != len(finished):
            raise Diverged(f"collective {coll.label!r} finishes at different times")
        computed.outcome = outcome
        listener = engine.bound_listener
        messages = getattr(listener, "messages", None)
        before = len(messages) if isinstance(messages, MutableSequence) else None
        outcome.emit(listener)
        if before is not None and isinstance(messages, MutableSequence):
            computed.messages = (before, len(messages))
        coll.bytes_sent += outcome.sent
        coll.bytes_received += outcome.received
        for d, b in outcome.sent_per_dim.items():
            coll.bytes_sent_per_dim[d] = coll.bytes_sent_per_dim.get(d, 0.0) + b
        egress = self.runtime.egress[0]
        computed.spans = [
            engine.plan_usage(egress[d], begin, end, rate) for d, begin, end, rate in outcome.usage
        ]
        if self.replicated:
            computed.completions = [engine.schedule_at(finished[0], self._every_rank_done, coll)]
            return
        computed.completions = [
            engine.schedule_at(t, self._rank_done, coll, r) for r, t in enumerate(finished)
        ]

    def _every_rank_done(self, coll: Collective) -> None:
        """Replicated ranks: ``coll`` finished now at every rank (as :meth:`_rank_done` would
        record it rank by rank); rank 0's completion is reported."""
        now = self.runtime.engine.now
        for r in range(self.n):
            coll.chunks_left[r] = 0
            coll.rank_finished[r] = now
        if coll.finished is None or now > coll.finished:
            coll.finished = now
        if coll.on_rank_done is not None:
            coll.on_rank_done(coll, 0)
        # after rank 0's completion, as after the last rank's on the other ranks' events
        del self.inflight[coll.id], self._done[coll.id]

    def _rank_done(self, coll: Collective, rank: int) -> None:
        coll.chunks_left[rank] = 0
        now = coll.rank_finished[rank] = self.runtime.engine.now
        if coll.finished is None or now > coll.finished:
            coll.finished = now
        self._finished_at_rank(coll)
        if coll.on_rank_done is not None:
            coll.on_rank_done(coll, rank)
