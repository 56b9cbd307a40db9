"""Exact mode: a lone collective on an endpoint that charges its NPUs, every rank at once.

On an endpoint whose collective kernels run on the NPU's own units (``baseline``), a message
takes its sender's HBM, units' throughput, load issue and reduction FLOPs, its sender's egress
link and its receiver's ingress link, which on a ring no other sender feeds. So a message's
rate depends on its sender's state alone: which of the rank's dimensions have a message in
flight, of which step kind, started in which order (memory-level-parallelism weights split the
rank's units over them). The event path's fluid problem is a set of small per-rank problems,
joined only by message arrivals. :func:`run_alone` computes that without an event per message,
one numpy pass over the ranks per local event:

* each rank keeps its own clock; a pass takes every rank's next local event (a message's end,
  a step's completion once its own message is out and its predecessor's has arrived, at
  ``max`` of the two) where no arrival still unknown could come first (conservative
  synchronisation: a predecessor's message finishes no sooner than that predecessor's next
  possible event, and arrives its delay later); the rank whose event is earliest anywhere is
  always safe;
* a rank's rates are the allocator's own (:func:`~acesim.engine.fluid.max_min_rates` on
  activities of the event path's demands and weights), filled once per rank class (the
  capacities its messages meet) and local configuration, and looked up; its messages'
  progress and finish times are the engine's arithmetic (``remaining -= rate x dt``,
  ``finish = now + remaining / rate``), elementwise;
* chunk phases are admitted in the agreed orders of :mod:`acesim.network.agreement`: on each
  dimension the next entry is the pick (earliest arrival) of the lowest-numbered rank ready
  first, decided once every rank has passed that instant; the others follow it.

It applies to a lone collective of ring steps (one message per step) with one chunk in
flight per dimension, no NVLS, spine or NIC path, on an endpoint that adds no step, chunk or
phase hooks and whose reduction meters cannot bind, in agreed orders (a platform with a
variation). NCCL protocols are taught: their link weights are the step demands', their base
latency delays the join and their hop latency is the messages' delay. Elsewhere it says why
and the event path runs the collective.

Results are the event path's within a relative 1e-9: the engine fills every activity it
reallocates at one instant together, grouping fill levels within a relative 1e-9 across
unrelated ranks, and sums a resource's load in the start order of the instant's events; here
each rank is filled on its own and messages started at one instant are ordered by dimension.
The byte sums and resource integrals are summed per message kind, not in event order; a
rank's compute-unit release is at the collective's end. Two chunk phases reaching one rank's
dimension at one instant from different events (the event order would decide between them)
raise :class:`~acesim.network.vectorized.Conflict`: the caller runs the event path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import Activity, Resource
from ..engine.fluid import max_min_rates
from ..engine.kernel import METER_MARGIN
from . import vectorized
from .algorithms import GATHER, REDUCE
from .collective import Collective, CollectiveRuntime, _ChunkRun, step_at
from .endpoint import Endpoint
from .group import Group
from .plan import Phase
from .vectorized import Conflict, unsupported

__all__ = ["ENABLED", "TableFull", "applies", "run_alone"]

#: Tests turn this off (or :data:`acesim.network.vectorized.ENABLED`) to compare with the event
#: simulation.
ENABLED = True

_INF = math.inf
#: step kinds by code (0: no message in flight on the dimension)
_KINDS = (REDUCE, GATHER)
_HOOKS = ("shape_phases", "step_begin", "phase_begin", "step_end", "chunk_begin", "chunk_end")


def problem(runtime: CollectiveRuntime, phases: list[Phase], chunks: int) -> str | None:
    """Why this lone collective needs the event path here (None: :func:`run_alone` computes
    it; see the module docstring)."""
    if not ENABLED or not vectorized.ENABLED:  # tests turn either off for the event path
        return "the per-rank backend is off"
    if not runtime.exact:
        return "not exact mode"
    if not runtime.agreed:
        return "no variation: its ranks alike, without agreed orders"
    if runtime.phase_log is not None or not runtime.engine.quiet(listened=True):
        return "a trace records every message"
    kind = type(runtime.endpoint)
    for name in _HOOKS:
        if getattr(kind, name) is not getattr(Endpoint, name):
            return f"{kind.__name__} shapes or watches the steps (its {name})"
    # the lockstep backend's structural checks; NCCL protocols are taught here (their link
    # weights are the step demands', their latencies the join's and the messages' delays)
    shared = unsupported(runtime, phases, chunks, None)
    if shared is not None:
        return shared
    axes: dict[int, tuple[int, int]] = {}
    for phase in phases:
        # one agreed order per dimension here; the runtime keeps one per group axis
        if axes.setdefault(phase.dim, (phase.size, phase.stride)) != (phase.size, phase.stride):
            return "group axes of two sizes or strides on one dimension"
        for i in range(len(phase.steps)):
            step = step_at(phase.steps, i)
            if step.pattern != "next" or step.kind not in _KINDS or not step.message_bytes > 0:
                return "steps other than ring steps of bytes"
    if any(runtime.endpoint.start_delay(r) > 0 for r in runtime.ranks):
        return "a collective kernel waiting for its units"
    return None


def applies(
    runtime: CollectiveRuntime,
    op: str,
    size: float,
    *,
    dims: Any = None,
    group: Group | None = None,
) -> bool:
    """Whether :func:`run_alone` would compute ``op`` of ``size`` bytes here (a tie it meets
    as it runs may still send it to the event path)."""
    _axes, chunks, choice = runtime.choose(op, size, dims=dims, group=group)
    return problem(runtime, choice.phases, chunks) is None


def run_alone(
    runtime: CollectiveRuntime,
    op: str,
    size: float,
    *,
    dims: Any = None,
    group: Group | None = None,
) -> Collective | str:
    """Run ``op`` of ``size`` bytes as the only work of an exact platform whose endpoint
    charges the NPUs, every rank at once; where the event path is needed, the reason."""
    axes, chunks, choice = runtime.choose(op, size, dims=dims, group=group)
    phases = choice.phases
    why = problem(runtime, phases, chunks)
    if why is not None:
        return why
    n = len(runtime.ranks)
    coll = runtime.record(op, size, axes, chunks, phases, choice, expected=n)
    layout = _Layout(runtime, coll)
    why = layout.shared_problem() or layout.meters_problem()
    if why is not None:
        runtime.collectives.pop()
        return why
    for rank in runtime.ranks:
        coll.chunks_left[rank] = chunks
        runtime.endpoint.collective_started(rank, coll.algorithms, coll.units)
    try:
        finished = _Run(runtime, coll, layout).run()
    except Conflict:  # the event path runs it from the start: its units given back first
        for rank in runtime.ranks:
            runtime.endpoint.collective_finished(rank, coll.algorithms, coll.units)
        runtime.collectives.pop()
        raise
    _account(runtime, coll, layout, finished)
    return coll


@dataclass
class _Kind:
    """One step kind's message at one rank: its demand as the engine keeps it, its meters."""

    demand: dict[Resource, float]
    meters: dict[Resource, float]
    whole: dict[Resource, float]  # every resource it is charged on, meters included


class _Layout:
    """The collective's phases as arrays, each rank's message demands and its rank class."""

    def __init__(self, runtime: CollectiveRuntime, coll: Collective):
        self.rt = runtime
        self.coll = coll
        phases = coll.phases
        n = len(runtime.ranks)
        self.dims = len(runtime.topology.dimensions)
        self.dim = np.array([p.dim for p in phases], dtype=np.int64)
        self.steps = np.array([len(p.steps) for p in phases], dtype=np.int64)
        longest = int(self.steps.max())
        self.nbytes = np.zeros((len(phases), longest))
        self.kind = np.zeros((len(phases), longest), dtype=np.int64)
        for p, phase in enumerate(phases):
            for s in range(len(phase.steps)):
                step = step_at(phase.steps, s)
                self.nbytes[p, s] = step.message_bytes
                self.kind[p, s] = _KINDS.index(step.kind) + 1
        self.succ = np.zeros((len(phases), n), dtype=np.int64)
        self.pred = np.zeros((len(phases), n), dtype=np.int64)
        #: per phase and sender, its messages' delay from last byte out to delivery (s)
        self.delay = np.zeros((len(phases), n))
        for p, phase in enumerate(phases):
            if runtime.rank_latencies is None:
                self.delay[p, :] = runtime._step_delay(coll, p, 0)
            else:  # per-rank link latencies (CollectiveRuntime.set_link), as _sent adds them
                protocol = coll.protocol
                hop = protocol.hop_latencies[p] if protocol is not None else None
                extra = hop if hop is not None else runtime.config.endpoint_delay
                self.delay[p, :] = [runtime.rank_latencies[r][phase.dim] + extra for r in range(n)]
        for p, phase in enumerate(phases):
            step = step_at(phase.steps, 0)
            for r in runtime.ranks:
                dest = runtime._destinations(r, phase, step)[0]
                self.succ[p, r] = dest
                self.pred[p, dest] = r
        #: per rank, dimension and kind code: its message's demand
        self.kinds: list[dict[tuple[int, int], _Kind]] = [{} for _ in range(n)]
        for p, phase in enumerate(phases):
            for code in {int(c) for c in self.kind[p, : self.steps[p]]}:
                step = next(
                    step_at(phase.steps, s)
                    for s in range(len(phase.steps))
                    if _KINDS.index(step_at(phase.steps, s).kind) + 1 == code
                )
                for r in runtime.ranks:
                    run = _ChunkRun(coll, r, 0)
                    run.phase = p
                    demand, weight, _innet = runtime._step_demand(run, phase, step)
                    whole = runtime._message_demand(
                        demand, weight, r, int(self.succ[p, r]), phase.dim, (), True
                    )
                    self.kinds[r][(phase.dim, code)] = _split(whole)
        self.classes, self.rank_class = self._classes(n)
        #: per class, whether a message of (dimension, kind) shares a resource with one of
        #: another (dimension, kind) at its rank (kind 0: none, shares nothing)
        self.share = np.zeros((len(self.classes), self.dims, 3, self.dims, 3), dtype=bool)
        for c, rank in enumerate(self.classes):
            for (a, ka), ma in self.kinds[rank].items():
                for (b, kb), mb in self.kinds[rank].items():
                    if a != b and any(res in mb.demand for res in ma.demand):
                        self.share[c, a, ka, b, kb] = True
        #: per class, whether every message kind it sends shares a resource with every other
        #: (the component of a change is then all of the rank's messages)
        self.share_all = np.array(
            [
                all(
                    self.share[c, a, ka, b, kb]
                    for (a, ka) in self.kinds[rank]
                    for (b, kb) in self.kinds[rank]
                    if a != b
                )
                for c, rank in enumerate(self.classes)
            ],
            dtype=bool,
        )

    def _classes(self, n: int) -> tuple[list[int], np.ndarray]:
        """Each rank's class (the capacities and amounts its messages meet; rank 0, whose
        messages the bound listeners hear, one of its own) and each class's first rank."""
        first: list[int] = []
        seen: dict[tuple[Any, ...], int] = {}
        out = np.zeros(n, dtype=np.int64)
        for r in range(n):
            key: tuple[Any, ...] = (
                (r,)
                if r == 0
                else tuple(
                    (k, tuple((res.capacity, a) for res, a in m.whole.items()))
                    for k, m in sorted(self.kinds[r].items())
                )
            )
            c = seen.get(key)
            if c is None:
                c = seen[key] = len(first)
                first.append(r)
            out[r] = c
        return first, out

    def shared_problem(self) -> str | None:
        """Why the ranks' messages are not separate fluid problems (a resource two senders'
        messages take: a receiver fed by two senders, a resource of the endpoint's shared
        by NPUs); None: each resource serves one sender."""
        owner: dict[Resource, int] = {}
        for r, per_rank in enumerate(self.kinds):
            for m in per_rank.values():
                for res in m.whole:
                    if owner.setdefault(res, r) != r:
                        return f"messages of ranks {owner[res]} and {r} share {res.name}"
        return None

    def meters_problem(self) -> str | None:
        """Why a reduction meter could bind (its capacity within :data:`METER_MARGIN` of
        what the rank's messages could draw: every message takes its units' throughput,
        which bounds their sum), or be a message's dominant resource; None: it cannot."""
        for per_rank in self.kinds:
            for m in per_rank.values():
                for meter, amount in m.meters.items():
                    most = min(
                        res.capacity / a
                        for res, a in m.demand.items()
                        if a > 0 and res.name.endswith(".bytes")
                    )
                    if not amount * most <= meter.capacity * METER_MARGIN:
                        return f"a reduction meter ({meter.name}) could bind"
        return None


def _split(whole: dict[Resource, float]) -> _Kind:
    """A message's demand as the engine keeps it (amounts above 1e-300; meters that are not
    its dominant resource split off: :meth:`~acesim.engine.Engine.start`)."""
    clean = {res: float(a) for res, a in whole.items() if a > 1e-300}
    demand = {res: a for res, a in clean.items() if not res.metered}
    meters = {res: a for res, a in clean.items() if res.metered}
    return _Kind(demand, meters, clean)


class _Rates:
    """The allocator's rates of a rank's messages by local configuration, filled on first use."""

    def __init__(self, layout: _Layout):
        self.layout = layout
        rt = layout.rt
        self.endpoint = rt.endpoint
        d = layout.dims
        self.types = 3**d  # a kind code (0-2) per dimension
        self.orders = d**d  # a start position (0..d-1) per dimension
        size = len(layout.classes) * self.types * self.orders
        self.rates = np.full((size, d), np.nan)
        self.bounds: dict[int, list[Any]] = {}
        self.pow3 = 3 ** np.arange(d, dtype=np.int64)
        self.powd = d ** np.arange(d, dtype=np.int64)

    def keys(self, cls: np.ndarray, codes: np.ndarray, seq: np.ndarray) -> np.ndarray:
        """The configuration keys of ranks of classes ``cls`` whose dimensions carry kind
        ``codes`` (0: none), started in the order of ``seq``."""
        active = codes > 0
        before = active[:, None, :] & (seq[:, None, :] < seq[:, :, None])
        position = np.where(active, before.sum(axis=2), 0)
        keys: np.ndarray = (
            cls * self.types + codes @ self.pow3
        ) * self.orders + position @ self.powd
        return keys

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Each key's rates (B/s per dimension), filling those not met before."""
        out: np.ndarray = self.rates[keys]
        missing = np.isnan(out).any(axis=1)
        if missing.any():
            for key in np.unique(keys[missing]).tolist():
                self._fill(int(key))
            out = self.rates[keys]
        return out

    def _fill(self, key: int) -> None:
        layout = self.layout
        d = layout.dims
        position_code, rest = key % self.orders, key // self.orders
        type_code, cls = rest % self.types, rest // self.types
        rank = layout.classes[cls]
        codes = [(type_code // 3**i) % 3 for i in range(d)]
        positions = [(position_code // d**i) % d for i in range(d)]
        active = sorted((positions[i], i) for i in range(d) if codes[i] > 0)
        # the weights MessageShares gives: under memory-level parallelism the rank's units
        # split over its messages that draw on the basis, else each its own
        share = self.endpoint.hbm_parallelism(rank)
        demands = [layout.kinds[rank][(dim, codes[dim])].demand for _pos, dim in active]
        shared = [share is not None and m.get(share[0], 0.0) > 0 for m in demands]
        acts: list[Activity] = []
        for seq, (_pos, dim) in enumerate(active):
            act = Activity(1.0, demands[seq], _INF, self.endpoint.message_weight, None, dim, seq)
            if share is not None and shared[seq]:
                act.basis = share[0]
                act.weight = share[1] / sum(shared)
            if rank == 0:
                act.track = "message"
            acts.append(act)
        rates = max_min_rates(acts) if acts else {}
        row = np.zeros(d)
        bounds: list[Any] = [None] * d
        for act in acts:
            row[act.tag] = rates[act]
            bounds[act.tag] = act.bound_now
        self.rates[key] = row
        if rank == 0:
            self.bounds[key] = bounds


#: Arrival-table entries (live chunk phases x ranks x longest phase: every step's send time of
#: each chunk phase some rank has admitted and not every rank has ended) above which the event
#: path runs the collective (2^26 floats: 512 MiB).
_MAX_TABLE = 1 << 26


class TableFull(Conflict):
    """The arrival table would pass :data:`_MAX_TABLE` entries: the event path runs it."""

    #: why, as a run's note says it
    reason = (
        "its steps' send times would pass the per-rank backend's table "
        f"({_MAX_TABLE * 8 >> 20} MiB)"
    )


class _Run:
    """The per-rank simulation of one lone collective (see the module docstring)."""

    def __init__(self, runtime: CollectiveRuntime, coll: Collective, layout: _Layout):
        self.rt = runtime
        self.coll = coll
        self.lay = layout
        self.rates = _Rates(layout)
        n, d = len(runtime.ranks), layout.dims
        self.n, self.d = n, d
        self.phases = len(coll.phases)
        self.longest = layout.nbytes.shape[1]
        self.q_chunk = np.full((n, d), -1, dtype=np.int64)
        self.q_phase = np.zeros((n, d), dtype=np.int64)
        self.q_step = np.zeros((n, d), dtype=np.int64)
        self.sending = np.zeros((n, d), dtype=bool)
        self.stepping = np.zeros((n, d), dtype=bool)
        self.rem = np.zeros((n, d))
        self.rate = np.zeros((n, d))
        self.last = np.zeros((n, d))
        self.fin = np.full((n, d), _INF)
        self.done_at = np.full((n, d), _INF)
        self.code = np.zeros((n, d), dtype=np.int64)
        #: this instant's starts and ends (their components are reallocated), and the kind
        #: of each message that ended (its resources reach the messages that share them)
        self.changed = np.zeros((n, d), dtype=bool)
        self.ended = np.zeros((n, d), dtype=np.int64)
        self.seq = np.zeros((n, d), dtype=np.int64)
        self.counter = 0
        # the arrival table: a slot of every rank's step send times per live chunk phase
        self.pool = np.full((1, n, self.longest), _INF)
        self.sent = self.pool.reshape(-1)
        self.slot_of: dict[tuple[int, int], int] = {}
        self.free = [0]
        self.ended_by: dict[tuple[int, int], int] = {}  # chunk phase -> ranks that ended it
        self.q_slot = np.zeros((n, d), dtype=np.int64)
        self.bound = np.full(n, runtime.engine.now)  # each rank's progress bound, last pass's
        self.blocked = np.full(n, _INF)  # the earliest instant a rank waits for a decision
        self.left = np.full(n, coll.chunks, dtype=np.int64)
        self.finished = np.full(n, _INF)
        self.clock = np.full(n, runtime.engine.now)  # each rank's time: its last event (s)
        # the agreed orders, each rank's waiting phases per dimension and decisions pending
        self.order: list[list[tuple[int, int]]] = [[] for _ in range(d)]
        self.cursor = np.zeros((n, d), dtype=np.int64)
        self.waiting: list[list[list[tuple[float, int, int, int]]]] = [
            [[] for _ in range(d)] for _ in range(n)
        ]
        self.ready: list[dict[int, float]] = [{} for _ in range(d)]
        self.arrivals = coll.chunks  # tie-breaker of arrivals after the join's
        self.to_start = np.zeros((n, d), dtype=bool)  # messages to start at the rank's clock
        self.listeners = runtime.engine.bound_listeners
        self.track = _Track(self.listeners) if self.listeners else None

    def run(self) -> np.ndarray:
        """Every rank's finish time (s)."""
        now = self.rt.engine.now
        protocol = self.coll.protocol
        if protocol is not None and protocol.base_latency + protocol.crossing_latency > 0:
            # the chunks start after the protocol's latency (CollectiveRuntime.join)
            now = now + (protocol.base_latency + protocol.crossing_latency)
            self.clock[:] = now
            self.bound[:] = now
        first = int(self.lay.dim[0])
        for r in range(self.n):  # the join: every chunk reaches its first phase's dimension
            for c in range(self.coll.chunks):
                self.waiting[r][first].append((now, c, c, 0))
            self._try_admit(r, first, now)
        self._start_pending()
        self._reallocate(self._changed())
        while (self.left > 0).any():
            times, lower = self._candidates()
            progress = np.minimum(times, lower)
            before = self.bound
            self.bound = np.minimum(progress, self.blocked)
            if self._decide(progress) or self._step(times, lower):
                continue
            if np.array_equal(before, self.bound):  # (cannot happen: no collective stalls)
                raise Conflict(set())
        return self.finished

    # -- a pass ------------------------------------------------------------------------------
    def _flat(self, slot: np.ndarray, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
        flat: np.ndarray = (slot * self.n + rank) * self.longest + step
        return flat

    def _take_slot(self, item: tuple[int, int]) -> None:
        """An arrival-table slot for chunk phase ``item`` (chunk, phase), its send times
        unknown (the table grown where none is free; Conflict past :data:`_MAX_TABLE`)."""
        if not self.free:
            grown = self.pool.shape[0] * 2
            if grown * self.n * self.longest > _MAX_TABLE:
                raise TableFull(set())
            more = np.full((grown - self.pool.shape[0], self.n, self.longest), _INF)
            self.free = list(range(grown - 1, self.pool.shape[0] - 1, -1))
            self.pool = np.concatenate([self.pool, more])
            self.sent = self.pool.reshape(-1)
        slot = self.free.pop()
        self.pool[slot] = _INF
        self.slot_of[item] = slot

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """Each rank's next event time, and the least time an arrival it still waits for
        without knowing it could come (s)."""
        lay = self.lay
        waits = self.stepping & ~self.sending
        ranks = np.broadcast_to(np.arange(self.n)[:, None], waits.shape)
        phase = self.q_phase
        pred = lay.pred[phase, ranks]
        index = self._flat(self.q_slot, pred, self.q_step)
        arrival = self.sent[index] + lay.delay[phase, pred]
        known = waits & (arrival < _INF)
        done = np.where(known, np.maximum(self.done_at, arrival), _INF)
        times = np.minimum(self.fin, done).min(axis=1)
        unknown = waits & ~(arrival < _INF)
        lower = np.where(unknown, self.bound[pred] + lay.delay[phase, pred], _INF).min(axis=1)
        return times, lower

    def _step(self, times: np.ndarray, lower: np.ndarray) -> bool:
        """Process the next event of every rank where it is safe (module docstring); False
        where none is (ranks waiting for a decision that waits for the bounds of ranks
        behind: the next pass's bounds are higher)."""
        least = times.min()
        # an arrival at exactly ``lower`` joins the rank's instant later: processing an
        # instant again changes no progress (no time passed), only the rates from then on
        safe = (times <= self.blocked) & ((times <= lower) | (times == least))
        ranks = np.flatnonzero(safe)
        if not len(ranks) or not least < _INF:
            return False
        self.clock[ranks] = times[ranks]
        self._finish(ranks)
        self._complete(ranks)
        self._start_pending()
        self._reallocate(self._changed())
        return True

    def _finish(self, ranks: np.ndarray) -> None:
        """The messages of ``ranks`` that end now: their send times recorded."""
        now = self.clock[ranks][:, None]
        ends = self.sending[ranks] & (self.fin[ranks] == now)
        rows, dims = np.nonzero(ends)
        if not len(rows):
            return
        who = ranks[rows]
        self.sent[self._flat(self.q_slot[who, dims], who, self.q_step[who, dims])] = self.clock[who]
        self.sending[who, dims] = False
        self.done_at[who, dims] = self.clock[who]
        self.fin[who, dims] = _INF
        self.ended[who, dims] = self.code[who, dims]
        self.changed[who, dims] = True
        self.code[who, dims] = 0
        if self.track is not None:
            for r, d in zip(who.tolist(), dims.tolist(), strict=True):
                if r == 0:
                    self.track.close(d, float(self.clock[0]))

    def _complete(self, ranks: np.ndarray) -> None:
        """The steps of ``ranks`` complete now (their message out and their predecessor's
        in): the next step starts, or the phase ends."""
        lay = self.lay
        waits = self.stepping[ranks] & ~self.sending[ranks]
        rows, dims = np.nonzero(waits)
        if not len(rows):
            return
        who = ranks[rows]
        phase = self.q_phase[who, dims]
        chunk = self.q_chunk[who, dims]
        step = self.q_step[who, dims]
        pred = lay.pred[phase, who]
        slot = self.q_slot[who, dims]
        arrival = self.sent[self._flat(slot, pred, step)] + lay.delay[phase, pred]
        now = self.clock[who]
        due = np.maximum(self.done_at[who, dims], arrival) <= now
        who, dims, phase, chunk, step = who[due], dims[due], phase[due], chunk[due], step[due]
        self.stepping[who, dims] = False
        more = step + 1 < lay.steps[phase]
        self.q_step[who[more], dims[more]] += 1
        self.to_start[who[more], dims[more]] = True
        ended = ~more
        for r, d, c, p in zip(
            who[ended].tolist(),
            dims[ended].tolist(),
            chunk[ended].tolist(),
            phase[ended].tolist(),
            strict=True,
        ):
            self._phase_end(r, d, c, p)

    def _phase_end(self, r: int, d: int, c: int, p: int) -> None:
        """Chunk ``c`` ends phase ``p`` on dimension ``d`` at rank ``r``: the queue frees, the
        chunk goes on to its next phase's dimension or is done."""
        now = float(self.clock[r])
        self.q_chunk[r, d] = -1
        ended = self.ended_by[(c, p)] = self.ended_by.get((c, p), 0) + 1
        if ended == self.n:  # every rank has every send time it needs of it
            self.free.append(self.slot_of.pop((c, p)))
        self._try_admit(r, d, now)
        if p + 1 < self.phases:
            nxt = int(self.lay.dim[p + 1])
            self.arrivals += 1
            self.waiting[r][nxt].append((now, self.arrivals, c, p + 1))
            self._try_admit(r, nxt, now)
            return
        self.left[r] -= 1
        if self.left[r] == 0:
            self.finished[r] = now

    def _try_admit(self, r: int, d: int, now: float) -> None:
        """Admit at ``now`` the next phase of dimension ``d``'s agreed order at rank ``r``
        if its queue is free and the phase has reached it; at the order's end with phases
        waiting, the rank is ready to decide the next entry."""
        if self.q_chunk[r, d] >= 0:
            return
        waiting = self.waiting[r][d]
        k = int(self.cursor[r, d])
        order = self.order[d]
        if k < len(order):
            want = order[k]
            for i, entry in enumerate(waiting):
                if (entry[2], entry[3]) == want:
                    del waiting[i]
                    self.cursor[r, d] = k + 1
                    self.q_chunk[r, d] = want[0]
                    self.q_slot[r, d] = self.slot_of[want]
                    self.q_phase[r, d] = want[1]
                    self.q_step[r, d] = 0
                    self.to_start[r, d] = True
                    return
            return
        if waiting and r not in self.ready[d]:
            self.ready[d][r] = now
            if now < self.blocked[r]:
                self.blocked[r] = now

    def _decide(self, progress: np.ndarray) -> bool:
        """Take the earliest pending decision once every rank has passed its instant (each
        order's next entry: the earliest arrival waiting at the lowest-numbered rank ready
        then; the others follow it). False: none could be taken."""
        pending = [(min(ready.values()), d) for d, ready in enumerate(self.ready) if ready]
        if not pending:
            return False
        when, d = min(pending)
        if not progress.min() > when:
            return False
        ready = self.ready[d]
        decider = min(r for r, t in ready.items() if t == when)
        waiting = sorted(self.waiting[decider][d])
        if (
            len(waiting) > 1
            and waiting[0][0] == waiting[1][0]
            and waiting[1][1] >= self.coll.chunks
        ):
            raise Conflict(set())  # two phases reached it at one instant: the event order decides
        self.order[d].append((waiting[0][2], waiting[0][3]))
        self._take_slot((waiting[0][2], waiting[0][3]))
        self.ready[d] = {}
        for r, t in sorted(ready.items()):
            self._try_admit(r, d, t)
        self.blocked[:] = _INF
        for per_dim in self.ready:
            for r, t in per_dim.items():
                self.blocked[r] = min(self.blocked[r], t)
        self._start_pending()
        self._reallocate(self._changed())
        return True

    def _start_pending(self) -> None:
        """Start the messages queued by admissions and step completions, each at its rank's
        clock (in rank and dimension order)."""
        who, dims = np.nonzero(self.to_start)
        if not len(who):
            return
        self.to_start[who, dims] = False
        phase = self.q_phase[who, dims]
        step = self.q_step[who, dims]
        self.sending[who, dims] = True
        self.stepping[who, dims] = True
        self.rem[who, dims] = self.lay.nbytes[phase, step]
        self.rate[who, dims] = 0.0
        self.last[who, dims] = self.clock[who]
        self.done_at[who, dims] = _INF
        self.code[who, dims] = self.lay.kind[phase, step]
        self.changed[who, dims] = True
        self.seq[who, dims] = self.counter + np.arange(len(who))
        self.counter += len(who)
        if self.track is not None and who[0] == 0:
            for d in dims[who == 0].tolist():
                self.track.open(d, float(self.clock[0]))

    def _changed(self) -> np.ndarray:
        """The ranks with a message started or ended this instant."""
        ranks: np.ndarray = np.flatnonzero(self.changed.any(axis=1))
        return ranks

    def _reallocate(self, ranks: np.ndarray) -> None:
        """New rates at each rank's clock for the messages of ``ranks`` the instant's changes
        reach (those that share a resource with a message started or ended, transitively:
        the engine's component): their progress since the last change, then the allocator's
        rates of that component (the engine's arithmetic, elementwise)."""
        if not len(ranks):
            return
        now = self.clock[ranks][:, None]
        sending = self.sending[ranks]
        touched = self._component(ranks) & sending
        self.changed[ranks] = False
        rate = self.rate[ranks]
        rem = self.rem[ranks]
        dt = now - self.last[ranks]
        moved = touched & (dt > 0) & (rate > 0)
        rem = np.where(moved, rem - rate * dt, rem)
        codes = np.where(touched, self.code[ranks], 0)
        keys = self.rates.keys(self.lay.rank_class[ranks], codes, self.seq[ranks])
        new = np.where(touched, self.rates.lookup(keys), rate)
        fin = np.where(rem <= 0, now, now + rem / np.where(touched, new, 1.0))
        self.rem[ranks] = rem
        self.last[ranks] = np.where(touched, now, self.last[ranks])
        self.rate[ranks] = new
        self.fin[ranks] = np.where(touched, fin, self.fin[ranks])
        if self.track is not None and ranks[0] == 0:
            self.track.rates(self.rates.bounds[int(keys[0])], touched[0], float(now[0, 0]))

    def _component(self, ranks: np.ndarray) -> np.ndarray:
        """Per rank of ``ranks`` and dimension, whether its message (in flight, or ended this
        instant) shares a resource, transitively, with one that started or ended now."""
        reach: np.ndarray = self.changed[ranks].copy()
        cls = self.lay.rank_class[ranks]
        if self.lay.share_all[cls].all():  # every message of a rank shares its HBM, say
            some: np.ndarray = np.any(reach, axis=1)
            whole: np.ndarray = reach | (some[:, None] & self.sending[ranks])
            return whole
        kind = np.where(self.sending[ranks], self.code[ranks], self.ended[ranks])
        share = self.lay.share  # [class, dim, kind, dim, kind]
        for _ in range(self.d - 1):
            grown: np.ndarray = reach.copy()
            for a in range(self.d):
                for b in range(self.d):
                    if a != b:
                        grown[:, b] |= reach[:, a] & share[cls, a, kind[:, a], b, kind[:, b]]
            if np.array_equal(grown, reach):
                break
            reach = grown
        return reach


class _Track:
    """What bound rank 0's messages, told to the engine's bound listeners as the engine tells
    them (``opened``, a ``segment`` at each change of bound and at the end, ``closed``)."""

    def __init__(self, listeners: tuple[Any, ...]):
        self.listeners = listeners
        self.bound: dict[int, Any] = {}
        self.since: dict[int, float] = {}

    def open(self, d: int, now: float) -> None:
        for listener in self.listeners:
            listener.opened("message", now)
        self.bound[d] = None
        self.since[d] = now

    def rates(self, bounds: list[Any], sending: np.ndarray, now: float) -> None:
        for d in np.flatnonzero(sending).tolist():
            bound = bounds[d]
            if bound is not self.bound[d]:
                if now > self.since[d]:
                    self._segment(self.bound[d], self.since[d], now)
                self.bound[d] = bound
                self.since[d] = now

    def close(self, d: int, now: float) -> None:
        if now > self.since[d]:
            self._segment(self.bound[d], self.since[d], now)
        for listener in self.listeners:
            listener.closed("message", now)

    def _segment(self, bound: Any, start: float, end: float) -> None:
        for listener in self.listeners:
            listener.segment("message", bound, start, end)


def _account(
    runtime: CollectiveRuntime, coll: Collective, layout: _Layout, finished: np.ndarray
) -> None:
    """The collective's bytes, its ranks' finish times, and what its messages charged each
    resource (bytes times amount, summed per message kind), the clock at its end and each
    rank's units released then."""
    n = len(runtime.ranks)
    total = 0.0
    per_dim: dict[int, float] = {}
    for p in range(len(coll.phases)):
        phase_bytes = math.fsum(layout.nbytes[p, : layout.steps[p]].tolist())
        moved = phase_bytes * coll.chunks * n
        total += moved
        dim = int(layout.dim[p])
        per_dim[dim] = per_dim.get(dim, 0.0) + moved
    coll.bytes_sent = total
    coll.bytes_received = total
    coll.bytes_sent_per_dim.update(per_dim)
    # every rank sends the same bytes of each (dimension, step kind): summed once
    sent: list[tuple[tuple[int, int], float]] = []
    for p in range(len(coll.phases)):
        steps = int(layout.steps[p])
        for code in (1, 2):
            nbytes = float(layout.nbytes[p, :steps][layout.kind[p, :steps] == code].sum())
            if nbytes > 0:
                sent.append(((int(layout.dim[p]), code), nbytes * coll.chunks))
    for r in range(n):
        charged: dict[Resource, float] = {}
        for kind, nbytes in sent:
            for res, amount in layout.kinds[r][kind].whole.items():
                charged[res] = charged.get(res, 0.0) + nbytes * amount
        for res, units in charged.items():
            res.used += units
            if res.metered:
                res.base += units
    coll.rank_finished = dict(zip(range(n), finished.tolist(), strict=True))
    coll.chunks_left = dict.fromkeys(range(n), 0)
    coll.finished = float(finished.max())
    if math.isfinite(coll.finished):
        runtime.engine.advance_to(coll.finished)
    for rank in runtime.ranks:
        runtime.endpoint.collective_finished(rank, coll.algorithms, coll.units)
