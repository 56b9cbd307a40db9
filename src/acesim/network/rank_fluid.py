"""Exact mode: a collective on an endpoint that charges its NPUs, every rank at once, alone or
beside each rank's compute kernels.

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

:func:`run_beside` runs it beside each rank's kernel sequence (:mod:`.rank_streams`): the
running kernel is one more column of the rank's configuration, the collective's issue, its
kernel's units granted after the SM wait and its chunks' join are local events, and the run
goes on until every rank's kernels have ended. A kernel and a message started at one instant
are ordered kernel first.

A rank's chunks, queues and agreed orders are arrays too: a phase's end, a chunk's arrival at
its next dimension and each queue's admission are array operations over the ranks of a pass.

Results are the event path's within a relative 1e-9: the engine fills every activity it
reallocates at one instant together, grouping fill levels within a relative 1e-9 across
unrelated ranks, and sums a resource's load in the start order of the instant's events; here
each rank is filled on its own and messages started at one instant are ordered by dimension.
The byte sums and resource integrals are summed per message kind, not in event order; alone,
a rank's compute-unit release is at the collective's end (beside kernels, at the rank's own).
Two chunk phases reaching one rank's dimension at one instant from different events (the
event order would decide between them) raise :class:`~acesim.network.vectorized.Conflict`:
the caller runs the event path.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import Activity, Resource
from ..engine.fluid import max_min_rates
from ..engine.kernel import METER_MARGIN
from . import vectorized
from .algorithms import GATHER, REDUCE
from .collective import Collective, CollectiveRuntime, _ChunkRun, step_at
from .endpoint import SM_WAIT, Endpoint
from .group import Group
from .plan import Phase
from .rank_streams import KernelStream, Streams, StreamsDone
from .vectorized import Conflict, unsupported

__all__ = ["ENABLED", "TableFull", "applies", "run_alone", "run_beside"]

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
    coll = _recorded(runtime, op, size, dims, group)
    if isinstance(coll, str):
        return coll
    chunks = coll.chunks
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


def _recorded(
    runtime: CollectiveRuntime, op: str, size: float, dims: Any, group: Group | None
) -> Collective | str:
    """``op`` of ``size`` bytes recorded on the runtime (nothing started), every rank to
    take part; else why this backend cannot compute it (:func:`problem`)."""
    axes, chunks, choice = runtime.choose(op, size, dims=dims, group=group)
    why = problem(runtime, choice.phases, chunks)
    if why is not None:
        return why
    n = len(runtime.ranks)
    return runtime.record(op, size, axes, chunks, choice.phases, choice, expected=n)


def run_beside(
    runtime: CollectiveRuntime,
    op: str,
    size: float,
    streams: Sequence[KernelStream],
    *,
    at: float = 0.0,
    dims: Any = None,
    group: Group | None = None,
) -> tuple[Collective, StreamsDone] | str:
    """Run ``op`` of ``size`` bytes, issued ``at`` s from now, beside each rank's compute
    stream (``streams``, by rank, started now: :mod:`.rank_streams`) on an exact platform
    whose endpoint charges the NPUs, every rank at once: the collective and what the streams
    did; where the event path is needed, the reason. The caller records the kernels' figures
    and the units' holds on its NPUs; the engine's clock is left at the last end."""
    n = len(runtime.ranks)
    if len(streams) != n:
        raise ValueError(f"one compute stream per rank: {len(streams)} for {n} ranks")
    coll = _recorded(runtime, op, size, dims, group)
    if isinstance(coll, str):
        return coll
    chunks = coll.chunks
    coll.issued = runtime.engine.now + at
    layout = _Layout(runtime, coll, [stream.signature for stream in streams])
    claim = runtime.endpoint.kernel_units(0, coll.algorithms, coll.units)
    beside = Streams(streams, layout.rank_class, layout.classes, claim, runtime.engine.now)
    why = layout.shared_problem() or layout.meters_problem() or _kernel_shares(layout, beside)
    if why is not None:
        runtime.collectives.pop()
        return why
    for rank in runtime.ranks:
        coll.chunks_left[rank] = chunks
    try:
        finished = _Run(runtime, coll, layout, beside, coll.issued).run()
    except Conflict:
        runtime.collectives.pop()
        raise
    done = beside.outcome()
    _account(runtime, coll, layout, finished, beside=float(done.end.max()))
    return coll, done


def _kernel_shares(layout: _Layout, streams: Streams) -> str | None:
    """Set which kernels share a resource with their rank's messages (each shares with every
    message kind of its rank or with none: a kernel is then in one component with all of
    them or apart); else why not."""
    for c, rank in enumerate(layout.classes):
        kinds = [set(m.demand) for m in layout.kinds[rank].values()]
        for k, taken in enumerate(streams.resources(c)):
            hits = [bool(taken & kind) for kind in kinds]
            if any(hits) and not all(hits):
                return "a compute kernel sharing a resource with some of its rank's messages"
            streams.share[c, k] = any(hits)
    return None


@dataclass
class _Kind:
    """One step kind's message at one rank: its demand as the engine keeps it, its meters."""

    demand: dict[Resource, float]
    meters: dict[Resource, float]
    whole: dict[Resource, float]  # every resource it is charged on, meters included


class _Layout:
    """The collective's phases as arrays, each rank's message demands and its rank class."""

    def __init__(
        self,
        runtime: CollectiveRuntime,
        coll: Collective,
        signatures: Sequence[Hashable] | None = None,
    ):
        self.rt = runtime
        self.coll = coll
        #: per rank, what makes its compute stream alike another's (None: no streams)
        self.signatures = signatures
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
        self.delay = self._delays(n)
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
        #: whether any two message kinds of a rank share a resource
        self.share_any = bool(self.share.any())
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

    def _delays(self, n: int) -> np.ndarray:
        """Per phase and sender, its messages' delay from last byte out to delivery (s)."""
        runtime, coll = self.rt, self.coll
        delay = np.zeros((len(coll.phases), n))
        for p, phase in enumerate(coll.phases):
            if runtime.rank_latencies is None:
                delay[p, :] = runtime._step_delay(coll, p, 0)
            else:  # per-rank link latencies (CollectiveRuntime.set_link), as _sent adds them
                protocol = coll.protocol
                hop = protocol.hop_latencies[p] if protocol is not None else None
                extra = hop if hop is not None else runtime.config.endpoint_delay
                delay[p, :] = [runtime.rank_latencies[r][phase.dim] + extra for r in range(n)]
        return delay

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
                else (
                    tuple(
                        (k, tuple((res.capacity, a) for res, a in m.whole.items()))
                        for k, m in sorted(self.kinds[r].items())
                    ),
                    None if self.signatures is None else self.signatures[r],
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
    """The allocator's rates of a rank's activities by local configuration, filled on first
    use: its messages (one column per dimension) and its compute kernel (the last column)."""

    def __init__(self, layout: _Layout, streams: Streams | None):
        self.layout = layout
        self.streams = streams
        rt = layout.rt
        self.endpoint = rt.endpoint
        d = layout.dims
        self.cols = d + 1
        self.types = 3**d  # a kind code (0-2) per dimension
        self.orders = self.cols**self.cols  # a start position per column
        self.kernels = 1 + 2 * streams.kmax if streams is not None else 1  # kernel ids
        #: the configurations met so far, sorted, and their rates (B/s; work/s)
        self.known = np.zeros(0, dtype=np.int64)
        self.values = np.zeros((0, self.cols))
        self.bounds: dict[int, list[Any]] = {}
        self.pow3 = 3 ** np.arange(d, dtype=np.int64)
        self.powc = self.cols ** np.arange(self.cols, dtype=np.int64)

    def keys(
        self,
        cls: np.ndarray,
        codes: np.ndarray,
        seq: np.ndarray,
        kernel: np.ndarray | None = None,
        kseq: np.ndarray | None = None,
    ) -> np.ndarray:
        """The configuration keys of ranks of classes ``cls`` whose dimensions carry kind
        ``codes`` (0: none) and whose stream runs ``kernel`` (an id; 0 or None: none),
        started in the order of ``seq`` and ``kseq``."""
        # column by column (numpy's reductions and products along a short last axis are
        # many times slower): the kind codes in base 3, each active column's position among
        # the active ones (how many started before it) in base ``cols``
        d = codes.shape[1]
        code = [codes[:, j] for j in range(d)]
        active = [c > 0 for c in code]
        order = [seq[:, j] for j in range(d)]
        if kernel is not None and kseq is not None:
            active.append(kernel > 0)
            order.append(kseq)
        types = code[0].copy()
        for j in range(1, d):
            types += code[j] * int(self.pow3[j])
        positions = np.zeros(len(cls), dtype=np.int64)
        for i, (live, mine) in enumerate(zip(active, order, strict=True)):
            before = np.zeros(len(cls), dtype=np.int64)
            for j, (other, theirs) in enumerate(zip(active, order, strict=True)):
                if i != j:
                    before += other & (theirs < mine)
            positions += np.where(live, before, 0) * int(self.powc[i])
        kernel_id: Any = kernel if kernel is not None else 0
        keys: np.ndarray = (
            (cls * self.kernels + kernel_id) * self.types + types
        ) * self.orders + positions
        return keys

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Each key's rates (B/s per dimension, work/s of the kernel), filling those not met
        before."""
        where = self._where(keys)
        if where is None:
            missing = np.unique(keys[~self._hits(keys)])
            rows = np.array([self._fill(int(key)) for key in missing.tolist()])
            known = np.concatenate([self.known, missing])
            values = np.concatenate([self.values, rows])
            order = np.argsort(known, kind="stable")
            self.known, self.values = known[order], values[order]
            where = self._where(keys)
            assert where is not None
        out: np.ndarray = self.values[where]
        return out

    def _hits(self, keys: np.ndarray) -> np.ndarray:
        if not len(self.known):
            return np.zeros(len(keys), dtype=bool)
        index = np.minimum(np.searchsorted(self.known, keys), len(self.known) - 1)
        hits: np.ndarray = self.known[index] == keys
        return hits

    def _where(self, keys: np.ndarray) -> np.ndarray | None:
        """Each key's row among those met (None: some were not)."""
        if not len(self.known):
            return None
        index = np.minimum(np.searchsorted(self.known, keys), len(self.known) - 1)
        if not (self.known[index] == keys).all():
            return None
        return index

    def _fill(self, key: int) -> np.ndarray:
        layout = self.layout
        d, cols = layout.dims, self.cols
        position_code, rest = key % self.orders, key // self.orders
        type_code, rest = rest % self.types, rest // self.types
        kernel, cls = rest % self.kernels, rest // self.kernels
        rank = layout.classes[cls]
        codes = [(type_code // 3**i) % 3 for i in range(d)]
        positions = [(position_code // cols**i) % cols for i in range(cols)]
        active = sorted((positions[i], i) for i in range(d) if codes[i] > 0)
        if kernel > 0:
            active = sorted([*active, (positions[d], d)])
        # the weights MessageShares gives: under memory-level parallelism the rank's units
        # split over its messages that draw on the basis, else each its own
        share = self.endpoint.hbm_parallelism(rank)
        demands = {
            dim: layout.kinds[rank][(dim, codes[dim])].demand for _pos, dim in active if dim < d
        }
        shared = sum(share is not None and m.get(share[0], 0.0) > 0 for m in demands.values())
        acts: list[Activity] = []
        for seq, (_pos, dim) in enumerate(active):
            if dim == d:
                assert self.streams is not None
                acts.append(self.streams.activity(cls, kernel, seq, d))
                continue
            demand = demands[dim]
            act = Activity(1.0, demand, _INF, self.endpoint.message_weight, None, dim, seq)
            if share is not None and demand.get(share[0], 0.0) > 0:
                act.basis = share[0]
                act.weight = share[1] / shared
            if rank == 0:
                act.track = "message"
            acts.append(act)
        rates = max_min_rates(acts) if acts else {}
        row = np.zeros(cols)
        bounds: list[Any] = [None] * cols
        for act in acts:
            row[act.tag] = rates[act]
            bounds[act.tag] = act.bound_now
        if rank == 0:
            self.bounds[key] = bounds
        return row


#: Arrival-table entries (live chunk phases x ranks x longest phase: every step's send time of
#: each chunk phase some rank has admitted and not every rank has ended) above which the event
#: path runs the collective (2^28 floats: 2 GiB; a 64 MiB all-reduce on ``ace-isca21``'s torus
#: at 16,384 NPUs keeps 4 chunk phases of 268 MB, beside a platform of about 1.4 GB; 2^26
#: before stop 66, which sent it to the event path, whose message bound refuses it).
_MAX_TABLE = 1 << 28


class TableFull(Conflict):
    """The arrival table would pass :data:`_MAX_TABLE` entries: the event path runs it."""

    #: why, as a run's note says it
    reason = (
        "its steps' send times would pass the per-rank backend's table "
        f"({_MAX_TABLE * 8 >> 20} MiB)"
    )


class _Run:
    """The per-rank simulation of one collective, alone or beside each rank's compute stream
    (``streams``; the collective issued at ``at``, s) (see the module docstring)."""

    def __init__(
        self,
        runtime: CollectiveRuntime,
        coll: Collective,
        layout: _Layout,
        streams: Streams | None = None,
        at: float = 0.0,
    ):
        self.rt = runtime
        self.coll = coll
        self.lay = layout
        self.streams = streams
        self.rates = _Rates(layout, streams)
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
        chunks, phases = coll.chunks, self.phases
        #: per chunk phase, its slot in the table (-1: none yet or freed), and how many
        #: ranks have ended it (its slot is freed when every rank has)
        self.slot_of = np.full((chunks, phases), -1, dtype=np.int64)
        self.free = [0]
        self.ended_by = np.zeros((chunks, phases), dtype=np.int64)
        self.q_slot = np.zeros((n, d), dtype=np.int64)
        #: per queue, its phase's predecessor (the sender of the messages it waits for) and
        #: their delay from last byte out to delivery (s), set at the phase's admission
        self.q_pred = np.zeros((n, d), dtype=np.int64)
        self.q_delay = np.zeros((n, d))
        self.bound = np.full(n, runtime.engine.now)  # each rank's progress bound, last pass's
        self.blocked = np.full(n, _INF)  # the earliest instant a rank waits for a decision
        self.left = np.full(n, coll.chunks, dtype=np.int64)
        self.finished = np.full(n, _INF)
        self.clock = np.full(n, runtime.engine.now)  # each rank's time: its last event (s)
        # the agreed orders (per dimension: its entries' chunks and phases), each rank's
        # place in them, and the decisions pending: when each rank became ready to decide a
        # dimension's next entry (infinite: not ready)
        self.order_chunk = np.zeros((d, 16), dtype=np.int64)
        self.order_phase = np.zeros((d, 16), dtype=np.int64)
        self.order_len = np.zeros(d, dtype=np.int64)
        self.cursor = np.zeros((n, d), dtype=np.int64)
        self.ready_at = np.full((n, d), _INF)
        # each rank's chunks: the phase each is at, 0 before its join, 1 waiting for its
        # dimension's queue, 2 admitted, 3 done; when and in which turn it reached the queue
        # (the join's chunks by number, later arrivals after them: the tie-breaker)
        self.chunk_phase = np.zeros((n, chunks), dtype=np.int64)
        self.chunk_state = np.zeros((n, chunks), dtype=np.int8)
        self.chunk_arrive = np.full((n, chunks), _INF)
        self.chunk_seq = np.zeros((n, chunks), dtype=np.int64)
        self.waiting_on = np.zeros((n, d), dtype=np.int64)  # chunks waiting per queue
        self.arrivals = chunks  # tie-breaker of arrivals after the join's
        self.to_start = np.zeros((n, d), dtype=bool)  # messages to start at the rank's clock
        self.listeners = runtime.engine.bound_listeners
        self.track = _Track(self.listeners) if self.listeners else None
        #: beside streams: when the collective is issued at each rank and when its chunks
        #: join (s; infinite once done or not yet known)
        self.issue_at = np.full(n, at if streams is not None else _INF)
        self.join_at = np.full(n, _INF)

    def run(self) -> np.ndarray:
        """Every rank's finish time (s)."""
        streams = self.streams
        if streams is None:  # the join, at once at every rank
            now = self.rt.engine.now
            protocol = self.coll.protocol
            if protocol is not None and protocol.base_latency + protocol.crossing_latency > 0:
                # the chunks start after the protocol's latency (CollectiveRuntime.join)
                now = now + (protocol.base_latency + protocol.crossing_latency)
                self.clock[:] = now
                self.bound[:] = now
            self._join_ranks(np.arange(self.n))
            self._start_pending()
            self._reallocate(self._changed())
        while (self.left > 0).any() or (streams is not None and not streams.done()):
            times, lower = self._candidates()
            progress = np.minimum(times, lower)
            before = self.bound
            self.bound = np.minimum(progress, self.blocked)
            if self._decide(progress) or self._step(times, lower):
                continue
            if np.array_equal(before, self.bound):  # (cannot happen: nothing stalls)
                raise Conflict(set())
        return self.finished

    def _issue(self, ranks: np.ndarray) -> None:
        """The collective issued at ``ranks`` now: its kernel takes their units (after their
        SM wait) and its chunks join after that wait and the protocol's latency
        (:meth:`CollectiveRuntime.join`'s arithmetic)."""
        assert self.streams is not None
        due = ranks[self.issue_at[ranks] == self.clock[ranks]]
        if not len(due):
            return
        self.issue_at[due] = _INF
        now = self.clock[due]
        granted = self.streams.issue(due, self.clock)
        base = np.maximum(0.0, granted - now)
        protocol = self.coll.protocol
        if protocol is not None:
            base = base + (protocol.base_latency + protocol.crossing_latency)
        base = base + self.coll.sync_latency
        self.join_at[due] = np.where(base > 0, now + base, now)

    def _join(self, ranks: np.ndarray) -> None:
        """The chunks of ``ranks`` whose join is now reach their first phase's dimension."""
        due = ranks[self.join_at[ranks] == self.clock[ranks]]
        if not len(due):
            return
        self.join_at[due] = _INF
        self._join_ranks(due)

    def _join_ranks(self, ranks: np.ndarray) -> None:
        """Every chunk of ``ranks`` reaches its first phase's dimension at the rank's clock."""
        first = int(self.lay.dim[0])
        chunks = self.coll.chunks
        self.chunk_phase[ranks] = 0
        self.chunk_state[ranks] = 1
        self.chunk_arrive[ranks] = self.clock[ranks][:, None]
        self.chunk_seq[ranks] = np.arange(chunks)
        self.waiting_on[ranks, first] += chunks
        self._admit(ranks, np.full(len(ranks), first))

    def _rows(self, ranks: np.ndarray) -> np.ndarray | slice:
        """``ranks`` (sorted, distinct) as an index: every rank as a slice (views, not copies:
        a pass mostly takes every rank)."""
        return slice(None) if len(ranks) == self.n else ranks

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
        waits = self.stepping & ~self.sending
        pred, delay = self.q_pred, self.q_delay
        index = self._flat(self.q_slot, pred, self.q_step)
        arrival = self.sent[index] + delay
        known = waits & (arrival < _INF)
        done = np.where(known, np.maximum(self.done_at, arrival), _INF)
        times = _least(np.minimum(self.fin, done))
        if self.streams is not None:
            events = np.minimum(self.issue_at, self.join_at)
            times = np.minimum(times, np.minimum(events, self.streams.next_times()))
        unknown = waits & ~(arrival < _INF)
        lower = _least(np.where(unknown, self.bound[pred] + delay, _INF))
        return times, lower

    def _step(self, times: np.ndarray, lower: np.ndarray) -> bool:
        """Process the next event of every rank where it is safe (module docstring); False
        where none is (ranks waiting for a decision that waits for the bounds of ranks
        behind: the next pass's bounds are higher)."""
        least = times.min()
        # an arrival at exactly ``lower`` joins the rank's instant later: processing an
        # instant again changes no progress (no time passed), only the rates from then on
        safe = (times < _INF) & (times <= self.blocked) & ((times <= lower) | (times == least))
        ranks = np.flatnonzero(safe)
        if not len(ranks) or not least < _INF:
            return False
        self.clock[ranks] = times[ranks]
        self._finish(ranks)
        streams = self.streams
        if streams is not None:
            self.counter = streams.advance(ranks, self.clock, self.counter)
            if self.track is not None and 0 in streams.granted:
                since = float(streams.waited_from[0])
                self.track.waited(since, float(self.clock[0]))
            self._issue(ranks)
            self._join(ranks)
        self._complete(ranks)
        self._start_pending()
        self._reallocate(self._changed())
        return True

    def _finish(self, ranks: np.ndarray) -> None:
        """The messages of ``ranks`` that end now: their send times recorded."""
        sel = self._rows(ranks)
        now = self.clock[sel][:, None]
        ends = self.sending[sel] & (self.fin[sel] == now)
        rows, dims = np.nonzero(ends)
        if not len(rows):
            return
        who = ranks[rows]
        at = who * self.d + dims  # (rank, dimension) flat: one index, not two
        clock = self.clock[who]
        self.sent[self._flat(_cells(self.q_slot)[at], who, _cells(self.q_step)[at])] = clock
        _cells(self.sending)[at] = False
        _cells(self.done_at)[at] = clock
        _cells(self.fin)[at] = _INF
        code = _cells(self.code)
        _cells(self.ended)[at] = code[at]
        _cells(self.changed)[at] = True
        code[at] = 0
        if self.track is not None:
            for r, d in zip(who.tolist(), dims.tolist(), strict=True):
                if r == 0:
                    self.track.close(d, float(self.clock[0]))

    def _complete(self, ranks: np.ndarray) -> None:
        """The steps of ``ranks`` complete now (their message out and their predecessor's
        in): the next step starts, or the phase ends."""
        sel = self._rows(ranks)
        lay = self.lay
        waits = self.stepping[sel] & ~self.sending[sel]
        rows, dims = np.nonzero(waits)
        if not len(rows):
            return
        who = ranks[rows]
        at = who * self.d + dims
        phase = _cells(self.q_phase)[at]
        step = _cells(self.q_step)[at]
        pred = _cells(self.q_pred)[at]
        slot = _cells(self.q_slot)[at]
        arrival = self.sent[self._flat(slot, pred, step)] + _cells(self.q_delay)[at]
        due = np.maximum(_cells(self.done_at)[at], arrival) <= self.clock[who]
        who, dims, at, phase, step = who[due], dims[due], at[due], phase[due], step[due]
        _cells(self.stepping)[at] = False
        more = step + 1 < lay.steps[phase]
        going = at[more]
        _cells(self.q_step)[going] += 1
        _cells(self.to_start)[going] = True
        ended = ~more
        if ended.any():
            at = at[ended]
            self._phase_ends(who[ended], dims[ended], _cells(self.q_chunk)[at], phase[ended])

    def _phase_ends(
        self, who: np.ndarray, dims: np.ndarray, chunk: np.ndarray, phase: np.ndarray
    ) -> None:
        """Chunks ``chunk`` end phases ``phase`` on dimensions ``dims`` at ranks ``who`` (in
        rank and dimension order): the queues free, each chunk goes on to its next phase's
        dimension (its arrival numbered in that order) or is done; then the freed and the
        reached queues admit what their orders allow."""
        _cells(self.q_chunk)[who * self.d + dims] = -1
        np.add.at(self.ended_by, (chunk, phase), 1)
        for c, p in sorted(set(zip(chunk.tolist(), phase.tolist(), strict=True))):
            if self.ended_by[c, p] == self.n:  # every rank has every send time it needs
                self.free.append(int(self.slot_of[c, p]))
                self.slot_of[c, p] = -1
        nxt = phase + 1
        going = nxt < self.phases
        g_who, g_chunk, g_phase = who[going], chunk[going], nxt[going]
        g_dim = self.lay.dim[g_phase]
        self.chunk_phase[g_who, g_chunk] = g_phase
        self.chunk_state[g_who, g_chunk] = 1
        self.chunk_arrive[g_who, g_chunk] = self.clock[g_who]
        self.chunk_seq[g_who, g_chunk] = self.arrivals + 1 + np.arange(len(g_who))
        self.arrivals += len(g_who)
        np.add.at(self.waiting_on, (g_who, g_dim), 1)
        done = ~going
        if done.any():
            d_who = who[done]
            self.chunk_state[d_who, chunk[done]] = 3
            np.subtract.at(self.left, d_who, 1)
            over = np.unique(d_who[self.left[d_who] == 0])
            self.finished[over] = self.clock[over]
            if self.streams is not None:  # their kernels' units given back
                self.streams.give_back(over, self.clock)
        self._admit(np.concatenate([who, g_who]), np.concatenate([dims, g_dim]))

    def _admit(self, ranks: np.ndarray, dims: np.ndarray) -> None:
        """Each (rank, dimension) queue of ``ranks`` x ``dims`` that is free admits, at the
        rank's clock, its agreed order's next phase if that phase has reached it; at the
        order's end with phases waiting, the rank is ready to decide the next entry."""
        if not len(ranks):
            return
        at = np.unique(ranks * self.d + dims)
        ranks, dims = at // self.d, at % self.d
        free = _cells(self.q_chunk)[at] < 0
        k = _cells(self.cursor)[at]
        decided = k < self.order_len[dims]
        k = np.minimum(k, self.order_chunk.shape[1] - 1)
        chunk, phase = self.order_chunk[dims, k], self.order_phase[dims, k]
        reached = (self.chunk_phase[ranks, chunk] == phase) & (self.chunk_state[ranks, chunk] == 1)
        admit = free & decided & reached
        if admit.any():
            a, r, c, p = at[admit], ranks[admit], chunk[admit], phase[admit]
            _cells(self.cursor)[a] += 1
            _cells(self.q_chunk)[a] = c
            _cells(self.q_slot)[a] = self.slot_of[c, p]
            _cells(self.q_phase)[a] = p
            pred = self.lay.pred[p, r]
            _cells(self.q_pred)[a] = pred
            _cells(self.q_delay)[a] = self.lay.delay[p, pred]
            _cells(self.q_step)[a] = 0
            _cells(self.to_start)[a] = True
            self.chunk_state[r, c] = 2
            _cells(self.waiting_on)[a] -= 1
        ready = free & ~decided & (_cells(self.waiting_on)[at] > 0)
        if ready.any():
            a, r = at[ready], ranks[ready]
            _cells(self.ready_at)[a] = np.minimum(_cells(self.ready_at)[a], self.clock[r])
            np.minimum.at(self.blocked, r, self.clock[r])

    def _decide(self, progress: np.ndarray) -> bool:
        """Take the earliest pending decision once every rank has passed its instant (each
        order's next entry: the earliest arrival waiting at the lowest-numbered rank ready
        then; the others follow it). False: none could be taken."""
        pending = self.ready_at.min(axis=0)
        d = int(np.argmin(pending))  # the lowest dimension among the earliest
        when = float(pending[d])
        if not when < _INF or not progress.min() > when:
            return False
        decider = int(np.flatnonzero(self.ready_at[:, d] == when)[0])
        state, phase = self.chunk_state[decider], self.chunk_phase[decider]
        chunks = np.flatnonzero((state == 1) & (self.lay.dim[phase] == d))
        waiting = sorted(
            zip(
                self.chunk_arrive[decider, chunks].tolist(),
                self.chunk_seq[decider, chunks].tolist(),
                chunks.tolist(),
                strict=True,
            )
        )
        if (
            len(waiting) > 1
            and waiting[0][0] == waiting[1][0]
            and waiting[1][1] >= self.coll.chunks
        ):
            raise Conflict(set())  # two phases reached it at one instant: the event order decides
        chunk = waiting[0][2]
        self._append(d, chunk, int(phase[chunk]))
        ranks = np.flatnonzero(self.ready_at[:, d] < _INF)
        self.ready_at[:, d] = _INF
        self._admit(ranks, np.full(len(ranks), d))
        self.blocked = _least(self.ready_at)
        self._start_pending()
        self._reallocate(self._changed())
        return True

    def _append(self, d: int, chunk: int, phase: int) -> None:
        """Dimension ``d``'s agreed order gains chunk ``chunk``'s phase ``phase``, and the
        phase a slot of the arrival table."""
        k = int(self.order_len[d])
        if k == self.order_chunk.shape[1]:  # grown by doubling
            self.order_chunk = np.concatenate([self.order_chunk, self.order_chunk], axis=1)
            self.order_phase = np.concatenate([self.order_phase, self.order_phase], axis=1)
        self.order_chunk[d, k] = chunk
        self.order_phase[d, k] = phase
        self.order_len[d] = k + 1
        self._take_slot((chunk, phase))

    def _start_pending(self) -> None:
        """Start the messages queued by admissions and step completions, each at its rank's
        clock (in rank and dimension order)."""
        at = np.flatnonzero(self.to_start)
        if not len(at):
            return
        who = at // self.d
        _cells(self.to_start)[at] = False
        phase = _cells(self.q_phase)[at]
        step = _cells(self.q_step)[at]
        _cells(self.sending)[at] = True
        _cells(self.stepping)[at] = True
        _cells(self.rem)[at] = self.lay.nbytes[phase, step]
        _cells(self.rate)[at] = 0.0
        _cells(self.last)[at] = self.clock[who]
        _cells(self.done_at)[at] = _INF
        _cells(self.code)[at] = self.lay.kind[phase, step]
        _cells(self.changed)[at] = True
        _cells(self.seq)[at] = self.counter + np.arange(len(at))
        self.counter += len(at)
        if self.track is not None and who[0] == 0:
            for d in (at[who == 0] % self.d).tolist():
                self.track.open(d, float(self.clock[0]))

    def _changed(self) -> np.ndarray:
        """The ranks with a message started or ended, or a kernel's change, this instant."""
        changed = _some(self.changed)
        if self.streams is not None:
            changed |= self.streams.changed
        ranks: np.ndarray = np.flatnonzero(changed)
        return ranks

    def _reallocate(self, ranks: np.ndarray) -> None:
        """New rates at each rank's clock for the activities of ``ranks`` the instant's
        changes reach (messages that share a resource with a message started or ended,
        transitively, and the compute kernel where it shares theirs or changed: the engine's
        component): their progress since the last change, then the allocator's rates of that
        component (the engine's arithmetic, elementwise)."""
        sel = self._rows(ranks)
        if not len(ranks):
            return
        now = self.clock[sel][:, None]
        sending = self.sending[sel]
        kernel: np.ndarray | None = None
        if self.streams is None:
            touched = self._component(ranks) & sending
        else:
            touched, kernel = self._with_kernels(ranks, sending)
        self.changed[sel] = False
        codes = np.where(touched, self.code[sel], 0)
        cls = self.lay.rank_class[sel]
        if kernel is None:
            keys = self.rates.keys(cls, codes, self.seq[sel])
        else:
            assert self.streams is not None
            keys = self.rates.keys(cls, codes, self.seq[sel], kernel, self.streams.seq[sel])
        looked = self.rates.lookup(keys)
        # the touched messages alone, each one (rank, dimension) cell
        rows, dims = np.nonzero(touched)
        if len(rows):
            at = ranks[rows] * self.d + dims
            t = now[rows, 0]
            rate = _cells(self.rate)[at]
            rem = _cells(self.rem)[at]
            dt = t - _cells(self.last)[at]
            moved = (dt > 0) & (rate > 0)
            rem = np.where(moved, rem - rate * dt, rem)
            new = looked[rows, dims]
            _cells(self.rem)[at] = rem
            _cells(self.last)[at] = t
            _cells(self.rate)[at] = new
            _cells(self.fin)[at] = np.where(rem <= 0, t, t + rem / new)
        if kernel is not None:
            self._kernel_rates(ranks, kernel > 0, looked[:, self.d], now[:, 0])
        if self.track is not None and ranks[0] == 0:
            self.track.rates(self.rates.bounds[int(keys[0])], touched[0], float(now[0, 0]))

    def _with_kernels(
        self, ranks: np.ndarray, sending: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Beside streams: per rank of ``ranks``, its messages the instant's changes reach and
        the id of its running kernel where they reach it (0: not reached). A kernel shares a
        resource with every message kind of its rank or with none (:func:`_kernel_shares`):
        one that shares joins them all into one component, one that does not leaves the
        messages' components as they are (:meth:`_component`)."""
        sel = self._rows(ranks)
        streams = self.streams
        assert streams is not None
        cls = self.lay.rank_class[sel]
        messages = _some(self.changed[sel])
        kernels = streams.changed[sel]
        running = streams.mode[sel] == 1
        shares = running & streams.share[cls, streams.index[sel]]
        # a kernel that shares, where its messages or itself (or a kernel that shared and
        # ended now) changed: every message of the rank is reached
        whole = (shares & messages) | (kernels & streams.reach[sel])
        touched = np.where(whole[:, None], sending, self._component(ranks) & sending)
        reached = running & (kernels | (shares & messages))
        streams.changed[sel] = False
        streams.reach[sel] = False
        kernel: np.ndarray = np.where(reached, streams.kernel_id(ranks), 0)
        return touched, kernel

    def _kernel_rates(
        self, ranks: np.ndarray, touched: np.ndarray, new: np.ndarray, now: np.ndarray
    ) -> None:
        """The compute kernels of ``ranks`` that ``touched`` marks take rates ``new`` (work/s)
        at ``now`` (s): their progress since their last change first."""
        sel = self._rows(ranks)
        streams = self.streams
        assert streams is not None
        rate = streams.rate[sel]
        rem = streams.rem[sel]
        dt = now - streams.last[sel]
        moved = touched & (dt > 0) & (rate > 0)
        rem = np.where(moved, rem - rate * dt, rem)
        new = np.where(touched, new, rate)
        fin = np.where(rem <= 0, now, now + rem / np.where(touched, new, 1.0))
        streams.rem[sel] = rem
        streams.last[sel] = np.where(touched, now, streams.last[sel])
        streams.rate[sel] = new
        streams.fin[sel] = np.where(touched, fin, streams.fin[sel])

    def _component(self, ranks: np.ndarray) -> np.ndarray:
        """Per rank of ``ranks`` and dimension, whether its message (in flight, or ended this
        instant) shares a resource, transitively, with one that started or ended now."""
        sel = self._rows(ranks)
        reach: np.ndarray = self.changed[sel].copy()
        if not self.lay.share_any:  # no two of a rank's messages share a resource (links)
            return reach
        cls = self.lay.rank_class[sel]
        if self.lay.share_all[cls].all():  # every message of a rank shares its HBM, say
            some = _some(reach)
            whole: np.ndarray = reach | (some[:, None] & self.sending[sel])
            return whole
        kind = np.where(self.sending[sel], self.code[sel], self.ended[sel])
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


def _cells(values: np.ndarray) -> np.ndarray:
    """A (rank, dimension) array as one axis (a view: writes reach it), indexed by ``rank x
    dimensions + dimension`` (one index array, not two: numpy's fancy indexing is several
    times cheaper so)."""
    flat: np.ndarray = values.reshape(-1)
    return flat


def _least(values: np.ndarray) -> np.ndarray:
    """Each row's least value (``values.min(axis=1)``, column by column: numpy's reductions
    along a short last axis are many times slower)."""
    out: np.ndarray = values[:, 0].copy() if values.shape[1] == 1 else values[:, 0]
    for j in range(1, values.shape[1]):
        out = np.minimum(out, values[:, j])
    return out


def _some(flags: np.ndarray) -> np.ndarray:
    """Whether any of each row's flags is set (``flags.any(axis=1)``, column by column)."""
    out: np.ndarray = flags[:, 0].copy() if flags.shape[1] == 1 else flags[:, 0]
    for j in range(1, flags.shape[1]):
        out = out | flags[:, j]
    return out


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

    def waited(self, start: float, end: float) -> None:
        """Rank 0's collective kernel waited for its units from ``start`` to ``end`` (s)."""
        if end > start:
            self._segment(SM_WAIT, start, end)

    def close(self, d: int, now: float) -> None:
        if now > self.since[d]:
            self._segment(self.bound[d], self.since[d], now)
        for listener in self.listeners:
            listener.closed("message", now)

    def _segment(self, bound: Any, start: float, end: float) -> None:
        for listener in self.listeners:
            listener.segment("message", bound, start, end)


def _account(
    runtime: CollectiveRuntime,
    coll: Collective,
    layout: _Layout,
    finished: np.ndarray,
    beside: float | None = None,
) -> None:
    """The collective's bytes, its ranks' finish times, and what its messages charged each
    resource (bytes times amount, summed per message kind), the clock at its end and each
    rank's units released then; ``beside``: the compute streams' last end (s), the clock
    left there (or at the collective's end, if later), the units left to the caller."""
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
    if beside is not None:
        runtime.engine.advance_to(max(coll.finished, beside))
        return
    if math.isfinite(coll.finished):
        runtime.engine.advance_to(coll.finished)
    for rank in runtime.ranks:
        runtime.endpoint.collective_finished(rank, coll.algorithms, coll.units)
