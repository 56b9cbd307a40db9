"""Exact mode with variation: every collective in agreed orders, decided as the run goes.

On a platform with a variation (a straggler, NPUs of different kinds, a slow link) the ranks
keep agreed admission orders (:mod:`acesim.network.agreement`): on each dimension every rank
admits the chunk phases in one order, each entry the pick of the first rank ready to admit
one (its queue free and a phase waiting; the pick: the smallest queue key, then the earliest
arrival; of ranks ready at one instant, the lowest-numbered). Ranks that run ahead decide
the order; the others follow it as phases reach them.

:class:`AgreedLockstep` computes that without an event per message, for all the collectives
of a training run together: a simulation whose events are the orders' decisions, each
deciding one dimension's next entry, and whose state is numpy arrays over the ranks (when each
rank's queue on each dimension frees; when each waiting chunk phase reaches each rank):

* the next decision on a dimension is at ``T``, the earliest instant a rank is ready there;
  it is made once the run has passed every event at ``T`` (an engine event after all others
  at that instant, :meth:`~acesim.engine.Engine.schedule_last`): every join up to ``T`` is
  known, and a phase still on another dimension reaches this one later (it is admitted there
  no sooner than that dimension's next decision, at or after ``T``, and takes time);
* the decided phase is computed for every rank by the recurrences of
  :class:`~acesim.network.vectorized.Lockstep` (the same float operations): it starts at each
  rank when its queue there frees and the phase has reached it;
* a rank that has not joined a collective yet has its arrivals at infinity: the group lines
  that hold it stay unknown (infinite) in that phase, and so does what follows from them
  (the queues they hold, the next phases); every decision with an unknown part is computed
  again, in decision order, when a rank joins (its known parts come out the same). A decision
  is never unknown at its decider: an unknown time is later than a join still to come, so
  later than ``T``;
* each rank's completion of a collective is one event, scheduled as soon as it is known
  (always after the decision that made it known); the byte sums, rank 0's message segments
  and link spans (:class:`~acesim.network.vectorized.Outcome`) are told once every phase of
  the collective is known at every rank.

Ranks ready at one instant that would pick differently follow the lowest-numbered one's pick,
as the event path's orders decide (:mod:`acesim.network.agreement`). Where the event order
would decide (two chunks of one collective reaching the deciding rank at one instant from
different events), phases of different group lines share a dimension's queue, or a phase the
recurrences cannot compute, the run raises :class:`~acesim.network.vectorized.Conflict`
and is redone with every collective on the event path. Results are those of the event path
within the tolerance of :mod:`acesim.network.vectorized` (bit for bit but link integrals, and
with per-rank capacities or join times within a relative 1e-9).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine import EventHandle
from .collective import Collective, CollectiveRuntime
from .vectorized import (
    Conflict,
    LinkCache,
    Lockstep,
    Outcome,
    instance_problem,
    queue_key,
    unsupported,
)

__all__ = ["AgreedLockstep"]

_INF = math.inf

#: reductions called as ufuncs (numpy's functions and methods add a Python layer per call,
#: and these run a few times per decision): the same results
_least = np.minimum.reduce
_every = np.logical_and.reduce
_some = np.logical_or.reduce


class _Owner:
    """One collective computed here: its joins, its recurrences and what it has finished."""

    __slots__ = (
        "coll",
        "key",
        "queue_key",
        "arrival",
        "lock",
        "part",
        "base",
        "undecided",
        "unknown",
        "chunk_final",
        "chunks_final",
        "latest",
        "done",
        "moved",
    )

    def __init__(self, coll: Collective, key: Any, order_key: tuple[int, int], lock: Lockstep):
        n = lock.n
        self.coll = coll
        self.key = key
        #: where its waiting phases go in a queue between collectives (smaller first)
        self.queue_key = order_key
        #: when each rank's chunks reach their first phase (s; inf: not joined yet)
        self.arrival = np.full(n, _INF)
        self.lock = lock
        self.part = lock.part
        self.base = 0.0
        #: chunk phases not decided yet, and decisions with an unknown part
        self.undecided = coll.chunks * len(coll.phases)
        self.unknown = 0
        #: per chunk, the ranks whose last phase is known; per rank, how many chunks are
        #: known and the latest of their ends (s)
        self.chunk_final = [np.zeros(n, dtype=bool) for _ in range(coll.chunks)]
        self.chunks_final = np.zeros(n, dtype=np.int64)
        self.latest = np.full(n, -_INF)
        #: ranks whose completion has run
        self.done = 0
        #: the pass of computing again (AgreedLockstep._recompute) that sees its arrivals
        #: changed (a rank joined)
        self.moved = 0


class _Decision:
    """One entry of a dimension's agreed order: a chunk phase, computed for every rank."""

    __slots__ = ("owner", "chunk", "index", "before", "source", "end", "known", "moved", "seen")

    def __init__(
        self,
        owner: _Owner,
        chunk: int,
        index: int,
        before: _Decision | None,
        source: _Decision | None,
    ):
        self.owner = owner
        self.chunk = chunk
        self.index = index
        #: the entry before it in its dimension's order (its ranks' queues free at its end)
        self.before = before
        #: the chunk's previous phase (None: the first, reached at the owner's arrival)
        self.source = source
        self.end = np.empty(0)
        #: every rank's end is known (finite), and the outcome records hold it
        self.known = False
        #: the last pass of computing again that changed its ends
        self.moved = 0
        #: the starts its ends were last computed from (s, per rank)
        self.seen = np.empty(0)

    def begin(self) -> np.ndarray:
        """When each rank starts it (s): its queue free and the phase arrived."""
        arrival = self.owner.arrival if self.source is None else self.source.end
        if self.before is None:
            return arrival
        out: np.ndarray = np.maximum(arrival, self.before.end)
        return out


class _Waiting:
    """A chunk's next phase, not admitted anywhere yet."""

    __slots__ = ("owner", "chunk", "index", "source", "order")

    def __init__(self, owner: _Owner, chunk: int):
        self.owner = owner
        self.chunk = chunk
        self.index = 0
        self.source: _Decision | None = None
        #: among phases reaching a rank at one instant, the queue's order: a collective's
        #: chunks joined together are queued in chunk order (None: the event order decides)
        self.order: int | None = chunk

    def arrival(self) -> np.ndarray:
        return self.owner.arrival if self.source is None else self.source.end


class AgreedLockstep:
    """Exact-mode training on an agreed runtime: collectives computed in agreed orders
    (module docstring). The executor's interface of
    :class:`~acesim.network.vectorized.Deferred`: :meth:`start`, :meth:`join`,
    :meth:`event_rank_done`, :attr:`vector_ids`, :attr:`reasons`, :attr:`conflicts`,
    :attr:`joint`.

    Args:
        runtime: the exact collective runtime, keeping agreed orders.
        excluded: keys of collectives that run on the event path.
    """

    def __init__(self, runtime: CollectiveRuntime, excluded: frozenset[Any] = frozenset()):
        self.runtime = runtime
        self.excluded = excluded
        self.n = runtime.topology.npus
        self.vector_ids: set[int] = set()
        self.reasons: dict[str, int] = {}
        self.conflicts: set[Any] = set()
        #: collectives computed while another computed one was in flight
        self.joint = 0
        #: no collective is computed here (the first needed the event path, before any was
        #: computed: every collective of the run then runs there)
        self.off = False
        self._owners: dict[int, _Owner] = {}
        self._waiting: list[_Waiting] = []
        #: per dimension, the last entry of its order, and its group lines (size, stride)
        self._last: dict[int, _Decision] = {}
        self._lines: dict[int, tuple[int, int]] = {}
        #: decisions with an unknown part, in decision order
        self._unknown: list[_Decision] = []
        self._wake: EventHandle | None = None
        #: per dimension, when its next decision is due and each rank is ready there (s), and
        #: the dimensions whose inputs changed since (None: every dimension's)
        self._ready: dict[int, tuple[float, np.ndarray]] = {}
        self._stale: set[int] | None = None
        #: per dimension, the ranks whose arrivals there changed since (a join: each rank's
        #: readiness computed again alone)
        self._touched: dict[int, set[int]] = {}
        #: a rank joined since the last decisions (unknown decisions to compute again), and
        #: how many passes of computing again ran
        self._joined = False
        self._pass = 0
        self._events_done: dict[int, int] = {}
        #: what the run's recurrences compute alike
        self._cache = LinkCache()

    # -- the executor's interface ------------------------------------------------------------
    def start(self, coll: Collective, key: Any, ranks: int | None = None) -> bool:
        """A new collective instance: True when it is computed here (join its ranks with
        :meth:`join`), False for the event path (every collective of the run runs there when
        the first does; one that needs it after others were computed is a conflict)."""
        problem = "an earlier collective runs on the event path" if self.off else None
        if problem is None:
            problem = self._problem(coll, key, ranks)
        if problem is not None:
            return self._event_path(coll, key, problem)
        order_key = queue_key(self.runtime, coll)
        lock = Lockstep(
            self.runtime,
            coll.phases,
            coll.chunks,
            usage=True,
            key=order_key,
            cache=self._cache,
            batched=True,
        )
        if not lock.begin_alone():
            return self._event_path(
                coll,
                key,
                "rank 0's messages not bound by its own egress, or direct steps on "
                "links that differ",
            )
        if self._owners:
            self.joint += 1
        owner = self._owners[coll.id] = _Owner(coll, key, order_key, lock)
        owner.base = self._base(coll)
        self.vector_ids.add(coll.id)
        self._waiting.extend(_Waiting(owner, c) for c in range(coll.chunks))
        self._stale = None
        return True

    def join(self, coll: Collective, rank: int) -> None:
        """``rank`` joins the computed ``coll`` now (what it changes is computed once, after
        every event of this instant: ranks that run alike join at one instant)."""
        owner = self._owners[coll.id]
        engine = self.runtime.engine
        coll.chunks_left[rank] = coll.chunks
        # the runtime's start: now, or after the endpoint's and protocol's delay (engine.call)
        owner.arrival[rank] = engine.now + owner.base if owner.base > 0 else engine.now
        owner.moved = self._pass + 1
        self._joined = True
        if self._stale is not None:  # the arrivals at its chunks' first dimension, at rank
            self._touched.setdefault(owner.coll.phases[0].dim, set()).add(rank)
        wake = self._wake
        if wake is None or wake.cancelled or wake.time != engine.now:
            if wake is not None:
                wake.cancel()
            self._wake = engine.schedule_last(engine.now, self._decide_due)

    def _event_path(self, coll: Collective, key: Any, problem: str) -> bool:
        """``coll`` runs on the event path, and so does every later collective (none may be
        computed here beside the event path's agreed orders); a conflict (the run redone)
        where some were computed here already."""
        self.reasons[problem] = self.reasons.get(problem, 0) + 1
        if self.vector_ids:
            self._conflict({key})
        self.off = True
        self._events_done[coll.id] = 0
        return False

    def event_rank_done(self, coll: Collective) -> None:
        """An event-path collective finished at one rank."""
        done = self._events_done[coll.id] = self._events_done[coll.id] + 1
        if done == self.n:
            del self._events_done[coll.id]

    # -- what runs here ----------------------------------------------------------------------
    def _problem(self, coll: Collective, key: Any, ranks: int | None) -> str | None:
        """Why ``coll`` runs on the event path (None: here)."""
        problem = instance_problem(coll, key, ranks, self.excluded, self.n)
        if problem is not None:
            return problem
        problem = unsupported(self.runtime, coll.phases, coll.chunks, coll.protocol)
        if problem is not None:
            return problem
        for phase in coll.phases:
            if self._lines.setdefault(phase.dim, (phase.size, phase.stride)) != (
                phase.size,
                phase.stride,
            ):
                return "group lines of different sizes share a dimension's queue"
        return None

    def _base(self, coll: Collective) -> float:
        """The delay from a join to its chunks' first queue (s), as the runtime adds it
        (``CollectiveRuntime.join``); its endpoint's part is every rank's alike here (the
        endpoints this path takes charge nothing)."""
        rt = self.runtime
        base = rt.endpoint.start_delay(0)
        if coll.protocol is not None:
            base += coll.protocol.base_latency + coll.protocol.crossing_latency
        base += coll.sync_latency
        return base

    def _conflict(self, keys: set[Any]) -> None:
        """Give up: the run is redone with every collective on the event path."""
        self.conflicts.update(keys | {o.key for o in self._owners.values()})
        raise Conflict(self.conflicts)

    # -- decisions ---------------------------------------------------------------------------
    def _schedule(self, when: float | None = None) -> None:
        """The next decision's wake-up, after every event at its instant (``when``: its
        instant, s, where the caller has just found it with :meth:`_next`)."""
        if when is None:
            when = self._next()[0]
        wake = self._wake
        if wake is not None and not wake.cancelled:
            if wake.time == when:
                return
            wake.cancel()
        self._wake = None
        if when < _INF:
            self._wake = self.runtime.engine.schedule_last(when, self._decide_due)

    def _next(self) -> tuple[float, int, list[_Waiting], np.ndarray | None]:
        """The earliest decision: (its instant s, dimension, the phases waiting there, when
        each rank is ready there); (inf, -1, [], None) when none is known. Each dimension's
        is kept until what it is computed from changes (:attr:`_stale`)."""
        phases_by_dim: dict[int, list[_Waiting]] = {}
        for w in self._waiting:
            phases_by_dim.setdefault(w.owner.coll.phases[w.index].dim, []).append(w)
        kept, stale = self._ready, self._stale
        best: tuple[float, int, list[_Waiting], np.ndarray | None] = (_INF, -1, [], None)
        for dim in sorted(phases_by_dim):
            here = phases_by_dim[dim]
            known = kept.get(dim)
            if known is None or stale is None or dim in stale:
                first = here[0].arrival()
                for w in here[1:]:
                    first = np.minimum(first, w.arrival())
                last = self._last.get(dim)
                ready = first if last is None else np.maximum(first, last.end)
                known = kept[dim] = (float(_least(ready)), ready)
            elif dim in self._touched:  # the ranks that joined: the same, rank by rank
                ready = known[1].copy()
                last = self._last.get(dim)
                for r in self._touched[dim]:
                    arrived = min(float(w.arrival()[r]) for w in here)
                    ready[r] = arrived if last is None else max(arrived, float(last.end[r]))
                known = kept[dim] = (float(_least(ready)), ready)
            if known[0] < best[0]:
                best = (known[0], dim, here, known[1])
        self._stale = set()
        self._touched = {}
        return best

    def _decide_due(self) -> None:
        """Every decision due by now (the wake-up: the run has passed every event now)."""
        self._wake = None
        now = self.runtime.engine.now
        if self._joined:
            self._joined = False
            self._recompute()  # (marks the dimensions whose inputs it moved)
        while True:
            when, dim, here, ready = self._next()
            if when > now or ready is None:
                break
            if when < now:  # a decision missed: never expected, the event path is sure
                self._conflict(set())
            self._decide(when, dim, here, ready)
        self._schedule(when)  # nothing changed since that _next

    def _decide(self, when: float, dim: int, here: list[_Waiting], ready: np.ndarray) -> None:
        """Decide ``dim``'s next entry at ``when`` (s) among ``here`` and compute it."""
        chosen = self._pick(when, dim, here, ready)
        if chosen is None:
            self._conflict(set())
            return
        owner = chosen.owner
        decision = _Decision(owner, chosen.chunk, chosen.index, self._last.get(dim), chosen.source)
        self._last[dim] = decision
        owner.undecided -= 1
        self._compute(decision)
        stale = self._stale
        if stale is not None:  # this dimension's queue, and the chunk's next one
            stale.add(dim)
        if chosen.index + 1 < len(owner.coll.phases):
            chosen.index += 1
            chosen.source = decision
            chosen.order = None
            if stale is not None:
                stale.add(owner.coll.phases[chosen.index].dim)
        else:
            self._waiting.remove(chosen)

    def _pick(
        self, when: float, dim: int, here: list[_Waiting], ready: np.ndarray
    ) -> _Waiting | None:
        """The phase the ranks ready at ``when`` admit: the pick of the lowest-numbered of
        them, as the event path's orders decide (:mod:`acesim.network.agreement`: after every
        event of the instant, so every phase arrived by then counts). None: the event order
        decides (chunks of one collective arriving at once from different events)."""
        decider = int(np.flatnonzero(ready == when)[0])
        arrivals = np.array([w.arrival()[decider] for w in here])
        arrived = arrivals <= when
        keys = [w.owner.queue_key for w in here]
        best_key = min(k for k, a in zip(keys, arrived, strict=True) if a)
        tied = arrived & np.array([k == best_key for k in keys])
        tied &= arrivals == arrivals[tied].min()
        picks = np.flatnonzero(tied)
        if len(picks) > 1:  # equal keys and arrivals: the chunk order
            orders = [here[i].order for i in picks]
            if any(order is None for order in orders):
                return None
            return here[int(picks[int(np.argmin(np.array(orders)))])]
        return here[int(picks[0])]

    # -- computing ---------------------------------------------------------------------------
    def _compute(self, decision: _Decision) -> None:
        """Every rank's end of ``decision``'s phase (unknown ranks: inf); its records and
        completions once known."""
        owner = decision.owner
        lock = owner.lock
        phase = owner.coll.phases[decision.index]
        begin = decision.begin()
        known = bool(_every(np.isfinite(begin)))
        end: np.ndarray | None
        if not known and decision.seen.size:
            # computed again, still unknown somewhere: only the group lines whose starts moved
            # (an unknown start becomes known; a known one never changes)
            end = decision.end.copy()
            changed = begin != decision.seen
            if bool(_some(changed)) and not lock.phase_end_lines(phase, begin, end, changed):
                end = None
        else:
            # the time each dimension's first message completes: the earliest of the
            # collective's phases there, whichever is known first
            first = owner.part.first.pop(phase.dim, None) if known else None
            end = lock.phase_end(phase, begin, record=known)  # unknown: recorded once known
            if first is not None:
                now_first = owner.part.first.get(phase.dim)
                if now_first is None or first <= now_first:
                    owner.part.first[phase.dim] = first
        if end is None:
            self._conflict(set())
            return
        decision.seen = begin.copy()  # (begin may be the owner's arrivals, which joins fill)
        finite = np.isfinite(begin)
        if not bool(_every(end[finite] > begin[finite])):
            self._conflict(set())  # a phase taking no time: arrivals could tie
        was_unknown = decision.end.size and not decision.known
        decision.end = end
        if decision.index == len(owner.coll.phases) - 1:
            self._chunk_ends(decision)
        if known:
            decision.known = True
            if was_unknown:
                owner.unknown -= 1
            if owner.undecided == 0 and owner.unknown == 0:
                self._tell(owner)
        elif not was_unknown:
            owner.unknown += 1
            self._unknown.append(decision)

    def _recompute(self) -> None:
        """Every decision with an unknown part again, in decision order (a rank joined),
        where what it starts from moved: its arrivals (the owner's joins, or the chunk's
        previous phase) or its queue (the entry before it)."""
        self._pass += 1
        if not self._unknown:
            return
        now = self._pass
        unknown, self._unknown = self._unknown, []
        for decision in unknown:
            source, before = decision.source, decision.before
            if (decision.owner.moved == now if source is None else source.moved == now) or (
                before is not None and before.moved == now
            ):
                old = decision.end
                self._compute(decision)
                if not np.array_equal(old, decision.end):
                    decision.moved = now
                    self._moved_dims(decision)
            if not decision.known:
                self._unknown.append(decision)

    def _moved_dims(self, decision: _Decision) -> None:
        """``decision``'s ends moved: its dimension's readiness (its queue), and the next
        phase's (the chunk's arrival there), are stale."""
        stale = self._stale
        if stale is None:
            return
        phases = decision.owner.coll.phases
        stale.add(phases[decision.index].dim)
        if decision.index + 1 < len(phases):
            stale.add(phases[decision.index + 1].dim)

    def _chunk_ends(self, decision: _Decision) -> None:
        """A chunk's last phase computed: the ranks where it is newly known; each rank's
        completion once every chunk is known there."""
        owner = decision.owner
        end = decision.end
        fresh = np.isfinite(end) & ~owner.chunk_final[decision.chunk]
        if not bool(_some(fresh)):
            return
        owner.chunk_final[decision.chunk] |= fresh
        owner.chunks_final[fresh] += 1
        owner.latest[fresh] = np.maximum(owner.latest[fresh], end[fresh])
        complete = fresh & (owner.chunks_final == owner.coll.chunks)
        engine = self.runtime.engine
        coll = owner.coll
        for rank in np.flatnonzero(complete).tolist():
            at = float(owner.latest[rank])
            if not at > engine.now:  # never expected: a completion known only when due
                self._conflict(set())
            engine.call_at(at, self._rank_done, coll, rank)

    def _tell(self, owner: _Owner) -> None:
        """Every phase of ``owner`` known at every rank: its byte sums, rank 0's message
        segments and link spans, as :class:`~acesim.network.vectorized.Deferred` tells them."""
        outcome: Outcome | None = owner.lock.outcome(owner.latest)
        if outcome is None:
            self._conflict(set())
            return
        coll = owner.coll
        engine = self.runtime.engine
        outcome.emit(engine.bound_listener)
        coll.bytes_sent += outcome.sent
        coll.bytes_received += outcome.received
        for d, b in outcome.sent_per_dim.items():
            coll.bytes_sent_per_dim[d] = coll.bytes_sent_per_dim.get(d, 0.0) + b
        outcome.plan(engine, self.runtime.egress[0])

    def _rank_done(self, coll: Collective, rank: int) -> None:
        coll.chunks_left[rank] = 0
        now = coll.rank_finished[rank] = self.runtime.engine.now
        if coll.finished is None or now > coll.finished:
            coll.finished = now
        owner = self._owners[coll.id]
        owner.done += 1
        if owner.done == self.n:
            del self._owners[coll.id]
        if coll.on_rank_done is not None:
            coll.on_rank_done(coll, rank)
