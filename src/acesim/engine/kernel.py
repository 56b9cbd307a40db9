"""The event kernel: a clock, a heap of timed callbacks, and the fluid activities.

Like SimPy's core, the heap is keyed by ``(time, priority, sequence)``: events at equal time run
in priority order, then in the order they were scheduled, so a run is deterministic and
repeatable bit for bit. Unlike SimPy, processes are plain callbacks (faster, and the models
above are state machines anyway).

Rates of activities are recomputed lazily: every start, finish, capacity or cap change marks
activities dirty, and the allocator runs once before the clock advances past the current
instant, over the connected components of the dirty activities only. A component's filling
is a pure function of its activities' demands, caps, weights and bases and of the capacities:
one whose inputs were seen before takes the rates found then (:data:`FILL_MEMO`).

Public API (nothing outside ``engine/`` touches the underscored state): ``add_resource``,
``add_pool``, ``schedule``, ``call``, ``call_at``, ``start``, ``set_cap``, ``set_capacity``;
``peek`` (time of the next event), ``step`` (process one event), ``run(until=...)``; ``quiet``
and ``advance_to`` (for work a model computes without events) and ``plan_usage`` (the
allocations of such work); ``observe(resource, callback)`` (called with ``(time, allocated)``
at every allocation change); ``sync`` (bring every resource's and pool's integral to now) and
``work_done(activity)`` (its progress up to now); ``settle`` (compute the rates of the current
instant without advancing time); ``before_reallocation(callback)`` (a model's last changes of
an instant, made once just before the rates of that instant are computed); ``idle``, ``claim``,
``account_alone``, ``resume``, ``schedule_at`` and ``complete_at`` (for a model that computes a
run of work in closed form while it is alone on its resources, and materialises it the instant
anything else touches them: see :meth:`Engine.claim`).
"""

from __future__ import annotations

import heapq
import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import numpy as np

from ..errors import SimulationError
from ..sums import add_repeatedly
from .fluid import (
    INF,
    Activity,
    Mark,
    Resource,
    component,
    dominant_share,
    max_min_rates,
    solo_rate,
)
from .heap import Entry, pop, push
from .planned import PlannedRun
from .pool import Pool

#: Priority of activity completions relative to plain timers at the same instant: completions
#: first, so that work finishing at t is visible to callbacks scheduled for t.
PRIORITY_COMPLETION = -1
PRIORITY_NORMAL = 0
#: :meth:`Engine.schedule_last`: after every other event of its instant, those scheduled
#: while that instant runs included
PRIORITY_LAST = 1


#: Reallocate an activity alone on its resources by :func:`~acesim.engine.fluid.solo_rate`
#: (the same rates, events and integrals to the last bit as the general component and
#: max-min filling, at a fraction of the cost: most reallocations are of one activity). False
#: runs every reallocation through the general path (tests compare the two).
SOLO_PATH = True

#: Reuse the rates of a component (or of an activity alone) whose inputs to the max-min filling
#: (each one's demand, cap, weight, basis and whether it is tracked, the capacities) a
#: component had before: the filling is a pure function of them, so the same rates and bounds
#: to the last bit (a model's steps repeat: most reallocations of a kernel beside a message
#: are one seen before). False fills every component afresh (tests compare the two).
FILL_MEMO = True

#: Components remembered per engine at most (then forgotten; a run whose components repeat too
#: seldom stops remembering them).
FILL_MEMO_SIZE = 1 << 13
#: the heap is compacted (its stale entries dropped) when it holds more than this many times
#: the active activities and :data:`HEAP_FLOOR` (:meth:`Engine._compact`)
HEAP_SLACK = 4
HEAP_FLOOR = 4096

#: Capacities below this (units/s) are numerically zero: shares would overflow.
MIN_CAPACITY = 1e-300

#: Keep meters out of the allocation (:meth:`Engine.add_resource`). False makes every meter an
#: ordinary resource from the start (tests compare the two).
METERS = True

#: A meter (:meth:`Engine.add_resource`) becomes an ordinary resource once its users'
#: allocation exceeds this fraction of its capacity: well short of where the filling would
#: count it saturated (levels within a relative 1e-9 count as equal there).
METER_MARGIN = 1 - 1e-6


def _check_capacity(name: str, capacity: float) -> None:
    if not (capacity >= MIN_CAPACITY):  # also refuses NaN
        raise SimulationError(
            f"resource {name!r}: capacity must be at least {MIN_CAPACITY:g} per second "
            f"(or inf), got {capacity}"
        )


class BoundListener(Protocol):
    """Receives what bound tracked activities (an activity's life is cut into segments of one
    binding: a Resource, ``CAP`` (its own rate cap) or None)."""

    def opened(self, kind: str, time: float) -> None: ...

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None: ...

    def closed(self, kind: str, time: float) -> None: ...


class _Fanout:
    """Several bound listeners heard as one (:meth:`Engine.add_bound_listener`)."""

    __slots__ = ("listeners",)

    def __init__(self, listeners: tuple[BoundListener, ...]):
        self.listeners = listeners

    def opened(self, kind: str, time: float) -> None:
        for listener in self.listeners:
            listener.opened(kind, time)

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None:
        for listener in self.listeners:
            listener.segment(kind, bound, start, end)

    def closed(self, kind: str, time: float) -> None:
        for listener in self.listeners:
            listener.closed(kind, time)


class EventHandle:
    """A scheduled callback; ``cancel()`` prevents it from running."""

    __slots__ = ("cancelled", "time")

    def __init__(self, time: float):
        self.cancelled = False
        self.time = time

    def cancel(self) -> None:
        self.cancelled = True


#: a timed callback's payload in the heap: the callback and its arguments
_Call = tuple[Callable[..., Any], tuple[Any, ...]]

#: the handle of events scheduled with :meth:`Engine.call` (never cancelled)
_LIVE = EventHandle(0.0)


class _Claim:
    """Resources a model runs work on in closed form, and how to materialise it."""

    __slots__ = ("resources", "release")

    def __init__(self, resources: list[Resource], release: Callable[[], Any]):
        self.resources = resources
        self.release = release


class _Prepared:
    """A demand a caller passes again and again unchanged (:meth:`Engine.start` with
    ``shared``): its cleaned form and shape, made once, whether it has meters, and its
    filling numbers by (basis, tracked)."""

    __slots__ = ("source", "clean", "shape", "metered", "numbers")

    def __init__(
        self,
        source: dict[Resource, float],
        clean: dict[Resource, float],
        metered: bool,
    ):
        self.source = source  # held: its id is not reused while it is a key
        self.clean = clean
        self.shape = tuple(clean.items())
        self.metered = metered
        self.numbers: dict[tuple[Resource | None, bool], int] = {}


class Engine:
    """Owns simulated time (seconds), timers, resources and activities."""

    def __init__(self) -> None:
        self._now = 0.0
        self._heap: list[Entry] = []
        self._seq = 0
        self._act_seq = 0
        self.resources: list[Resource] = []
        self._dirty: dict[Activity, None] = {}
        #: resources whose users must be re-allocated (a user finished): marking the resource
        #: once instead of each user keeps a finish O(its resources), not O(their users)
        self._dirty_res: dict[Resource, None] = {}
        self.active: dict[Activity, None] = {}
        self.events_processed = 0
        #: the pools (:meth:`add_pool`), held weakly: each holds this engine's clock, and held
        #: strongly here the engine and its pools would be a cycle, a run's engine (its
        #: resources, the models that hold them) freed by the cyclic collector only; its NPU
        #: holds a pool for the run
        self._pools: list[weakref.ref[Pool]] = []
        self._observers: dict[Resource, list[Callable[[float, float], Any]]] = {}
        #: told what bound each tracked activity, segment by segment (see :meth:`start`;
        #: :meth:`add_bound_listener`)
        self._bound_listeners: tuple[BoundListener, ...] = ()
        self._bound_listener: BoundListener | None = None
        #: allocations a model computed without activities (:meth:`plan_usage`), per resource:
        #: [start s, end s, units/s], folded into ``used`` by :meth:`sync`
        self._planned: dict[Resource, list[list[float] | PlannedRun]] = {}
        #: each planned span's resource, by the span's identity, while it is planned (the span
        #: kept in ``_planned``, so its id is not reused): :meth:`can_replan` in O(1)
        self._span_owner: dict[int, Resource] = {}
        #: the last instant :meth:`sync` folded planned allocations into ``used`` (s)
        self._folded = -INF
        #: callbacks to run once before the next reallocation (:meth:`before_reallocation`)
        self._pending: list[Callable[[], Any]] = []
        #: resources a model runs work on without activities (:meth:`claim`): the claim that
        #: materialises that work before anything else touches them
        self._claims: dict[Resource, _Claim] = {}
        #: components' filling inputs -> their rates and bounds (:data:`FILL_MEMO`; None: no
        #: longer remembered), and how many were found there since it was last emptied
        self._fills: dict[Any, tuple[list[float], list[Any]]] | None = {}
        self._fills_found = 0
        #: an activity's fixed filling inputs (shape, basis, tracked) -> its number
        #: (``Activity.fill_id``): a remembered filling's key is, per activity, that number,
        #: its cap and its weight, a flat tuple (not the inputs as tuples of tuples, hashed
        #: and compared at every look-up). Numbers are never reused (``_fill_next``), so one
        #: stands for one set of inputs even after the table is emptied (then inputs seen
        #: again take a new number: a miss, no error).
        self._fill_ids: dict[tuple[Any, ...], int] = {}
        self._fill_next = 0
        #: demands started with ``shared`` (:meth:`start`), by the dict's id
        self._prepared: dict[int, _Prepared] = {}
        #: the meters (:meth:`add_resource`), and those found able to bind this instant
        self._meters: list[Resource] = []
        self._over: dict[Resource, None] = {}
        #: :meth:`stop` asked the running :meth:`run` to return after the current event
        self._stopping = False

    # -- resources ---------------------------------------------------------------------------
    def add_resource(self, name: str, capacity: float, *, meter: bool = False) -> Resource:
        """Create a resource of ``capacity`` units per second (``inf`` allowed).

        ``meter``: the model expects the resource never to bind (an engine's reduction
        units, whose every byte also crosses a link of lower capacity). It is then kept out
        of the allocation (see :mod:`acesim.engine.fluid`, "Meters"): activities that use it
        are not joined through it, so work it alone would join runs apart (a fold is not
        interrupted). While its users' allocation stays below :data:`METER_MARGIN` of the
        capacity and it is no user's dominant resource, the rates are the filling's; the
        instant either fails it becomes an ordinary resource for the rest of the run."""
        _check_capacity(name, capacity)
        meter = meter and METERS
        res = Resource(name, capacity, len(self.resources), metered=meter)
        self.resources.append(res)
        if meter:
            self._meters.append(res)
        return res

    def add_pool(self, name: str, capacity: float) -> Pool:
        """Create a space-shared pool of ``capacity`` units (see :mod:`acesim.engine.pool`)."""
        pool = Pool(name, capacity, self._clock)
        self._pools.append(weakref.ref(pool))
        return pool

    def _clock(self) -> float:
        """The simulated time (s), as a pool reads it."""
        return self._now

    @property
    def now(self) -> float:
        """Simulated time, s (read-only: only the event loop advances it)."""
        return self._now

    def observe(self, resource: Resource, callback: Callable[[float, float], Any]) -> None:
        """Call ``callback(time s, allocated units/s)`` whenever ``resource``'s allocation
        changes (at that instant the users already carry their new rates). The callback
        records: it runs inside the rate application, so it must not run the engine
        (``settle``, ``step``, ``run``)."""
        self._release(resource)
        if resource.metered:
            self._promote(resource)
        self._observers.setdefault(resource, []).append(callback)

    def sync(self) -> None:
        """Bring every resource's ``used`` and every pool's ``held_time`` up to now (work a
        model runs on claimed resources is materialised first, :meth:`claim`)."""
        while self._claims:
            self._release(next(iter(self._claims)))
        now = self._now
        for res in self.resources:
            if not res.metered:
                res._advance(now)
        if self._planned:
            self._fold_planned(now)
        for meter in self._meters:
            if meter.metered:
                self._bring_meter(meter)
        for ref in self._pools:
            pool = ref()
            if pool is not None:
                pool.sync()

    def _bring_meter(self, meter: Resource) -> None:
        """A meter's ``used`` at now: the work ended, and its users' work done so far."""
        used = meter.base
        for act in meter.users:
            assert act.meters is not None
            used += act.meters[meter] * self.work_done(act)
        meter.used = used
        meter._since = self._now

    def mirror_resource(self, source: Resource, target: Resource) -> None:
        """Give ``target`` the integrals of ``source`` (``used``, ``allocated``, ``peak``),
        neither having users now: a resource whose every allocation was ``source``'s (a
        replicated rank's, see :meth:`acesim.hardware.npu.NPU.mirror`)."""
        if source.users or target.users or source in self._planned or target in self._planned:
            raise SimulationError(f"cannot mirror {source.name!r} onto {target.name!r} now")
        if source.metered != target.metered:
            raise SimulationError(f"cannot mirror {source.name!r} onto {target.name!r}: meters")
        source._advance(self._now)
        target.base = source.base
        target.used = source.used
        target.allocated = source.allocated
        target.peak = source.peak
        target._since = source._since

    def plan_usage(
        self, resource: Resource, start: float, end: float, rate: float
    ) -> list[float] | None:
        """Record that ``resource`` is allocated ``rate`` units/s over [``start``, ``end``) s
        by work a model computed without activities (exact mode's vectorized collectives):
        :meth:`sync` adds it to ``used`` as time passes (and to ``peak``). Returns the span
        (for :meth:`replan`), or None when it allocates nothing."""
        if end > start and rate > 0:
            span = [start, end, rate]
            self._planned.setdefault(resource, []).append(span)
            self._span_owner[id(span)] = resource
            if rate > resource.peak:
                resource.peak = rate
            return span
        return None

    def plan_usage_run(
        self, resource: Resource, starts: np.ndarray, ends: np.ndarray, rate: float
    ) -> None:
        """:meth:`plan_usage` of spans one after another (``starts`` and ``ends``, s: each
        span ending no later than the next starts) at ``rate`` units/s, kept as one run
        (:class:`~acesim.engine.planned.PlannedRun`: folded as time passes with the same float
        operations); the spans cannot be moved (:meth:`replan`)."""
        if not rate > 0:
            return
        taking = ends > starts
        if not bool(taking.any()):
            return
        self._planned.setdefault(resource, []).append(
            PlannedRun(starts[taking], ends[taking], rate)
        )
        if rate > resource.peak:
            resource.peak = rate

    def can_replan(self, resource: Resource, span: list[float], start: float) -> bool:
        """Whether :meth:`replan` may move ``span`` (of :meth:`plan_usage` on ``resource``)
        to begin at ``start`` (s): no part of it was folded into ``used`` yet, nor would be
        of the new one."""
        if not (span[0] >= self._folded and start >= self._folded):
            return False
        return self._span_owner.get(id(span)) is resource

    def replan(
        self, resource: Resource, span: list[float], start: float, end: float, rate: float
    ) -> None:
        """Move a span of :meth:`plan_usage` to [``start``, ``end``) s at ``rate`` units/s (a
        model recomputed its work), in place (its order among the resource's spans is kept);
        :meth:`can_replan` must allow it."""
        if not self.can_replan(resource, span, start) or not (end > start and rate > 0):
            raise SimulationError(f"{resource.name}: a planned span cannot move now")
        span[0], span[1], span[2] = start, end, rate
        if rate > resource.peak:
            resource.peak = rate

    def _fold_planned(self, now: float) -> None:
        self._folded = now
        for res, spans in list(self._planned.items()):
            keep: list[list[float] | PlannedRun] = []
            for span in spans:
                if isinstance(span, PlannedRun):
                    if res.metered:
                        res.base, left = span.fold(res.base, now)
                    else:
                        res.used, left = span.fold(res.used, now)
                    if left:
                        keep.append(span)
                    continue
                start, end, rate = span
                if start >= now:
                    keep.append(span)
                    continue
                upto = end if end < now else now
                if res.metered:
                    res.base += rate * (upto - start)
                else:
                    res.used += rate * (upto - start)
                if end > now:
                    span[0] = now
                    keep.append(span)
                else:
                    del self._span_owner[id(span)]
            if keep:
                self._planned[res] = keep
            else:
                del self._planned[res]

    def work_done(self, activity: Activity) -> float:
        """Work ``activity`` has done up to now (its units: bytes, or 1.0 for a kernel)."""
        if activity.finished is not None:
            return activity.work
        done = activity.work - activity.remaining
        if activity.rate < INF:
            done += activity.rate * (self._now - activity._last)
        return min(max(done, 0.0), activity.work)

    def set_capacity(self, resource: Resource, capacity: float) -> None:
        """Change a resource's capacity (units/s) from now on; users are re-allocated."""
        _check_capacity(resource.name, capacity)
        self._release(resource)
        if resource.metered:
            self._promote(resource)
        resource.capacity = float(capacity)
        if self._fills:
            self._fills = {}  # the capacities are inputs of the fillings remembered
            self._fill_ids = {}
        for act in resource.users:
            act._dominant = -1.0  # its dominant share is computed again
            self._dirty[act] = None

    # -- timers ------------------------------------------------------------------------------
    def schedule(
        self, delay: float, callback: Callable[..., Any], *args: Any, priority: int = 0
    ) -> EventHandle:
        """Run ``callback(*args)`` after ``delay`` seconds (>= 0)."""
        if not (delay >= 0):
            raise SimulationError(f"cannot schedule an event {delay} s in the past")
        when = self._now + delay
        if when == INF:
            raise SimulationError(
                f"simulated time overflowed: an event {delay:g} s after {self._now:g} s "
                "(check the latencies and durations given)"
            )
        handle = EventHandle(when)
        self._seq += 1
        push(self._heap, (self._now + delay, priority, self._seq, handle, (callback, args)))
        return handle

    def call(self, delay: float, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` after ``delay`` seconds (>= 0), at normal priority, with no
        handle to cancel it (:meth:`schedule` without the handle: the hot path of messages)."""
        when = self._now + delay
        if not (delay >= 0) or when == INF:
            self.schedule(delay, callback, *args)  # raises the error
        self._seq += 1
        push(self._heap, (when, PRIORITY_NORMAL, self._seq, _LIVE, (callback, args)))

    def call_at(self, time: float, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` at ``time`` (s, not before now, finite), at normal priority
        (:meth:`call` at an absolute time: no rounding of ``now + (time - now)``)."""
        if not (time >= self._now) or time == INF:
            raise SimulationError(f"cannot schedule an event at {time} s (now {self._now} s)")
        self._seq += 1
        push(self._heap, (time, PRIORITY_NORMAL, self._seq, _LIVE, (callback, args)))

    # -- activities --------------------------------------------------------------------------
    def start(
        self,
        work: float,
        demand: dict[Resource, float],
        on_done: Callable[[Activity], Any] | None = None,
        *,
        cap: float = INF,
        weight: float = 1.0,
        tag: Any = None,
        track: str | None = None,
        basis: Resource | None = None,
        shared: bool = False,
    ) -> Activity:
        """Start an activity of ``work`` units consuming ``demand[r]`` of ``r`` per unit.

        ``cap`` bounds its rate (work/s); ``weight`` is its max-min share weight, of its
        dominant resource or, when given, of ``basis``. ``track``
        (a kind such as ``"kernel"``): tell the bound listeners, when there are any, what
        binds the activity's rate over its life. ``shared``: the caller keeps ``demand``
        unchanged and passes the same dict again (a message demand made once): it is checked
        and cleaned once, and activities without meters share its cleaned form.
        """
        if not (work >= 0) or not math.isfinite(work):
            raise SimulationError(f"activity {tag!r}: work must be finite and >= 0, got {work}")
        if not (weight > 0):
            raise SimulationError(f"activity {tag!r}: weight must be positive, got {weight}")
        if shared:
            prepared = self._prepared.get(id(demand))
            if prepared is None or prepared.source is not demand:
                clean, metered = self._clean(demand, tag)
                prepared = self._prepared[id(demand)] = _Prepared(demand, clean, metered)
            if not prepared.metered:  # nothing to split off: one cleaned dict for all
                return self._begin(
                    work, prepared.clean, None, cap, weight, on_done, tag, track, basis, prepared
                )
        clean, metered = self._clean(demand, tag)
        meters = self._split_meters(clean, basis) if metered else None
        return self._begin(work, clean, meters, cap, weight, on_done, tag, track, basis, None)

    def _clean(self, demand: dict[Resource, float], tag: Any) -> tuple[dict[Resource, float], bool]:
        """``demand`` checked (finite, non-negative amounts) without its rounding residue
        (amounts below 1e-300 are not demand: they would overflow shares), and whether it
        uses a meter."""
        clean: dict[Resource, float] = {}
        metered = False
        for res, amount in demand.items():
            if not (amount >= 0) or amount == INF:
                raise SimulationError(
                    f"activity {tag!r}: demand on {res.name!r} must be finite and >= 0, "
                    f"got {amount}"
                )
            if amount > 1e-300:
                clean[res] = float(amount)
                if res.metered:
                    metered = True
        return clean, metered

    def _begin(
        self,
        work: float,
        demand: dict[Resource, float],
        meters: dict[Resource, float] | None,
        cap: float,
        weight: float,
        on_done: Callable[[Activity], Any] | None,
        tag: Any,
        track: str | None,
        basis: Resource | None,
        prepared: _Prepared | None,
    ) -> Activity:
        """:meth:`start`'s activity on the checked ``demand`` (and ``meters``, split off)."""
        if self._claims:
            for res in demand:
                self._release(res)  # the claimed work becomes activities first
        self._act_seq += 1
        shape = prepared.shape if prepared is not None else None
        act = Activity(work, demand, cap, weight, on_done, tag, self._act_seq, shape)
        act.basis = basis
        if meters:
            act.meters = meters
            for res in meters:
                res.users[act] = None
        act.started = self._now
        act._last = self._now
        if track is not None and self._bound_listener is not None:
            act.track = track
            act.bound_since = self._now
            self._bound_listener.opened(track, self._now)
        if prepared is not None:  # its filling number, found once per (basis, tracked)
            key = (basis, act.track is not None)
            number = prepared.numbers.get(key)
            if number is None:
                prepared.numbers[key] = self._number(act)
            else:
                act.fill_id = number
        self.active[act] = None
        for res in demand:
            res.users[act] = None
        self._dirty[act] = None
        return act

    # -- meters ------------------------------------------------------------------------------
    def _split_meters(
        self, demand: dict[Resource, float], basis: Resource | None
    ) -> dict[Resource, float] | None:
        """Take the meters out of ``demand`` (in place) and return them; a meter that would
        be the activity's dominant resource is promoted first and stays in ``demand``."""
        meters: dict[Resource, float] | None = None
        for res, amount in demand.items():
            if res.metered:
                if meters is None:
                    meters = {}
                meters[res] = amount
        if meters is None:
            return None
        dominant = dominant_share(demand, basis)
        for res, amount in meters.items():
            if amount / res.capacity > dominant or res is basis:
                self._promote(res)
            else:
                del demand[res]
        return {res: amount for res, amount in meters.items() if res.metered} or None

    def hold_meters(
        self,
        meters: dict[Resource, float],
        rate: float,
        demand: dict[Resource, float],
        basis: Resource | None,
    ) -> bool:
        """Allocate ``meters`` (units per unit of work) to work that runs at ``rate`` (units
        of work/s) without an activity, as :meth:`start` would (a fold of steps, with
        ``demand`` its other resources and ``basis`` its weight's basis): False (nothing
        held) where a meter would be dominant or near its capacity. :meth:`release_meters`
        ends it; :meth:`count_on_meter` counts the work done."""
        dominant = dominant_share(demand, basis)
        for res, amount in meters.items():
            if not res.metered or amount / res.capacity > dominant or res is basis:
                return False
            if not res.allocated + rate * amount <= res.capacity * METER_MARGIN:
                return False
        for res, amount in meters.items():
            res.allocated += rate * amount
            if res.allocated > res.peak:
                res.peak = res.allocated
        return True

    def release_meters(self, meters: dict[Resource, float], rate: float) -> None:
        """End what :meth:`hold_meters` allocated."""
        for res, amount in meters.items():
            res.allocated -= rate * amount
            if res.allocated < 0:
                res.allocated = 0.0

    def count_on_meter(self, meter: Resource, units: float, count: int) -> None:
        """Add ``count`` pieces of work of ``units`` each to a meter's ``used`` (work that
        :meth:`hold_meters` ran, now done: the sum of each piece in order)."""
        meter.base = add_repeatedly(meter.base, units, count)

    def _meters_fit(self, acts: list[Activity], rates: list[float]) -> bool:
        """Whether the meters of ``acts`` stay below :data:`METER_MARGIN` of their capacity
        at the new ``rates`` (work/s); those that would not are marked for
        :meth:`_promote_over`."""
        seen = Mark()  # the meters met, each one's new load in its ``_load`` (scratch)
        loaded: list[Resource] = []
        for i, act in enumerate(acts):  # (indexed, not zip(strict=True): compiled natively)
            rate = rates[i]
            meters = act.meters
            if meters is None:
                continue
            old = act.rate if act.rate < INF else 0.0
            for res, amount in meters.items():
                if rate == INF:
                    self._over[res] = None
                    continue
                if res._mark is not seen:
                    res._mark = seen
                    res._load = res.allocated
                    loaded.append(res)
                res._load = res._load + (max(rate, 0.0) - old) * amount
        for res in loaded:
            if res._load > res.capacity * METER_MARGIN:
                self._over[res] = None
        return not self._over

    def _meter_rates(self, changed: list[tuple[Activity, float]]) -> None:
        """Activities' rates changed from the old rates given (work/s; checked by
        :meth:`_meters_fit`): their meters' allocations follow, and then their peaks."""
        touched: dict[Resource, None] = {}
        for act, old_rate in changed:
            assert act.meters is not None
            change = act.rate - (old_rate if old_rate < INF else 0.0)
            for res, amount in act.meters.items():
                allocated = res.allocated + change * amount
                res.allocated = allocated if allocated > 0 else 0.0
                touched[res] = None
        for res in touched:
            if res.allocated > res.peak:
                res.peak = res.allocated

    def _promote(self, meter: Resource) -> None:
        """``meter`` becomes an ordinary resource from now on: its users carry it in their
        demand and are marked for reallocation (folds holding it are released first)."""
        if not meter.metered:
            return
        while self._claims:
            self._release(next(iter(self._claims)))
        self._bring_meter(meter)
        meter.metered = False
        allocated = 0.0
        for act in meter.users:
            meters = act.meters
            assert meters is not None
            amount = meters.pop(meter)
            if not meters:
                act.meters = None
            act.demand[meter] = amount
            act.shape = tuple(act.demand.items())
            act.fill_id = -1
            act._dominant = -1.0
            if act.rate < INF:
                allocated += act.rate * amount
            self._dirty[act] = None
        meter.allocated = allocated
        if allocated > meter.peak:
            meter.peak = allocated
        self._over.pop(meter, None)

    def _promote_over(self) -> None:
        """Promote the meters :meth:`_meters_fit` found able to bind."""
        while self._over:
            self._promote(next(iter(self._over)))

    # -- work computed in closed form while alone on its resources ----------------------------
    def idle(self, resource: Resource) -> bool:
        """Whether nothing uses, watches or claims ``resource`` now."""
        return (
            not resource.users
            and resource not in self._observers
            and (resource not in self._claims)
        )

    def claim(self, resources: list[Resource], release: Callable[[], Any]) -> None:
        """A model runs work on ``resources`` (each :meth:`idle`) without activities, having
        computed it as the fluid allocation would run it alone. Before anything else touches
        one of them (:meth:`start` of an activity on it, :meth:`set_capacity`, :meth:`observe`,
        :meth:`sync`) the claim ends and ``release()`` is called, which must bring the
        resources and the model to the state the activities would have left at that instant
        (:meth:`account_alone` for the work done, :meth:`resume` for the work running). A
        model whose work ends unreleased ends its claim with :meth:`unclaim`."""
        claim = _Claim(resources, release)
        for res in resources:
            if not self.idle(res):
                raise SimulationError(f"{res.name}: cannot be claimed now")
        for res in resources:
            self._claims[res] = claim

    def unclaim(self, resources: list[Resource]) -> None:
        """End the claim on ``resources`` (its work done: nothing to release)."""
        for res in resources:
            self._claims.pop(res, None)

    def _release(self, resource: Resource) -> None:
        claim = self._claims.get(resource)
        if claim is None:
            return
        for res in claim.resources:
            self._claims.pop(res, None)
        claim.release()

    def account_alone(self, resource: Resource, allocated: float, start: float, end: float) -> None:
        """Add to ``resource``'s integrals what an activity alone on it, allocated
        ``allocated`` units/s from ``start`` to its completion at ``end`` (s, not after now),
        added through its allocation and completion: the same operations in the same order
        (work a claim ran, :meth:`claim`)."""
        since = resource._since
        if start > since:
            resource.used += resource.allocated * (start - since)
            resource._since = start
        resource.allocated = allocated
        if allocated > resource.peak:
            resource.peak = allocated
        if end > start:
            resource.used += allocated * (end - start)
            resource._since = end
        resource.allocated -= allocated
        if resource.allocated < 0:
            resource.allocated = 0.0

    def account_alone_many(
        self, resource: Resource, allocated: float, starts: Sequence[float], ends: Sequence[float]
    ) -> None:
        """:meth:`account_alone` of activities one after another (``starts[i] <= ends[i] <=
        starts[i + 1]``, s), each allocated ``allocated`` units/s: the same sums in the same
        order (many as a sequential cumulative sum)."""
        count = len(starts)
        if count <= 64:
            for start, end in zip(starts, ends, strict=True):
                self.account_alone(resource, allocated, float(start), float(end))
            return
        self.account_alone(resource, allocated, float(starts[0]), float(ends[0]))
        begin, finish = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
        terms = np.empty(count)
        terms[0] = resource.used
        terms[1:] = allocated * (finish[1:] - begin[1:])
        resource.used = float(np.cumsum(terms)[-1])
        start, end = float(begin[-1]), float(finish[-1])
        resource._since = end if end > start else max(start, resource._since)

    def account_alone_runs(
        self,
        resource: Resource,
        allocated: float,
        first: tuple[float, float],
        durations: Sequence[tuple[float, int]],
        last: tuple[float, float],
    ) -> None:
        """:meth:`account_alone_many` of activities one after another whose durations (s)
        after the ``first`` one's ``(start, end)`` come as runs ``(duration, count)``, the
        ``last`` one's ``(start, end)`` given: the same sums in the same order, a run of
        equal terms added in closed form (:func:`~acesim.engine.sums.add_repeatedly`)."""
        self.account_alone(resource, allocated, first[0], first[1])
        if not durations:
            return
        used = resource.used
        for duration, count in durations:
            used = add_repeatedly(used, allocated * duration, count)
        resource.used = used
        start, end = last
        resource._since = end if end > start else max(start, resource._since)

    def resume(
        self,
        work: float,
        demand: dict[Resource, float],
        on_done: Callable[[Activity], Any],
        *,
        started: float,
        rate: float,
        bound: Any,
        weight: float,
        basis: Resource | None,
        tag: Any,
        track: str | None,
        cap: float = INF,
    ) -> Activity:
        """The activity of ``work`` units that :meth:`start` began at ``started`` (s, not
        after now) alone on its resources (``demand``, cleaned as :meth:`start` cleans it, each
        :meth:`idle`; its rate cap ``cap``, work/s) and the allocation gave ``rate`` (units/s,
        finite and positive: :func:`~acesim.engine.fluid.solo_rate`, bound by ``bound``) then,
        as it stands now: its completion scheduled, its resources' integrals brought to
        ``started`` and their allocations set (what :meth:`_reallocate_solo` did at
        ``started``)."""
        if not (started <= self._now) or not (0 < rate < INF):
            raise SimulationError(f"activity {tag!r}: cannot resume at {started} s, rate {rate}")
        self._act_seq += 1
        act = Activity(work, demand, cap, weight, on_done, tag, self._act_seq)
        act.basis = basis
        act.started = started
        act._last = started
        listener = self._bound_listener
        if track is not None and listener is not None:
            act.track = track
            act.bound = act.bound_now = bound
            act.bound_since = started
            listener.opened(track, started)
        self.active[act] = None
        if self._meters and any(res.metered for res in demand):
            meters = {res: amount for res, amount in demand.items() if res.metered}
            demand = {res: amount for res, amount in demand.items() if not res.metered}
            act.demand = demand
            act.shape = tuple(demand.items())
            act.fill_id = -1
            act.meters = meters
            for res, amount in meters.items():  # what the fold held (released before)
                res.users[act] = None
                res.allocated += rate * amount
                if res.allocated > res.peak:
                    res.peak = res.allocated
        for res, amount in demand.items():
            if not self.idle(res):
                raise SimulationError(f"activity {tag!r}: {res.name} is not free to resume on")
            res.users[act] = None
            since = res._since
            if started > since:
                res.used += res.allocated * (started - since)
                res._since = started
            allocated = rate * amount
            res.allocated = allocated
            if allocated > res.peak:
                res.peak = allocated
        act._version = 1
        act.rate = rate
        self._seq += 1
        finish = started + work / rate
        push(self._heap, (finish, PRIORITY_COMPLETION, self._seq, act, act._version))
        return act

    def schedule_at(self, time: float, callback: Callable[..., Any], *args: Any) -> EventHandle:
        """:meth:`call_at` with a handle that cancels it."""
        return self._handled(time, PRIORITY_NORMAL, callback, args)

    def complete_at(self, time: float, callback: Callable[..., Any], *args: Any) -> EventHandle:
        """:meth:`schedule_at` among the activity completions of ``time`` (s), before its
        timers: the end of work a model computed in closed form, heard when its activity's
        completion would be."""
        return self._handled(time, PRIORITY_COMPLETION, callback, args)

    def schedule_last(self, time: float, callback: Callable[..., Any], *args: Any) -> EventHandle:
        """:meth:`schedule_at`, run after every other event at ``time`` (s): when it runs,
        everything the run does at that instant has happened."""
        return self._handled(time, PRIORITY_LAST, callback, args)

    def _handled(
        self, time: float, priority: int, callback: Callable[..., Any], args: tuple[Any, ...]
    ) -> EventHandle:
        """A cancellable event at ``time`` (s) of ``priority`` among those of its instant."""
        if not (time >= self._now) or time == INF:
            raise SimulationError(f"cannot schedule an event at {time} s (now {self._now} s)")
        handle = EventHandle(time)
        self._seq += 1
        push(self._heap, (time, priority, self._seq, handle, (callback, args)))
        return handle

    def set_cap(self, activity: Activity, cap: float) -> None:
        """Change an activity's rate cap (work/s)."""
        if activity.finished is not None or activity.cap == cap:
            return
        activity.cap = cap
        self._dirty[activity] = None

    def set_weight(self, activity: Activity, weight: float) -> None:
        """Change an activity's share weight (> 0)."""
        if not (weight > 0) or weight == INF:
            raise SimulationError(
                f"activity {activity.tag!r}: weight must be positive and finite, got {weight}"
            )
        if activity.finished is not None or activity.weight == weight:
            return
        activity.weight = weight
        self._dirty[activity] = None

    def _progress(self, act: Activity) -> None:
        dt = self._now - act._last
        if dt > 0 and act.rate > 0:
            done = act.rate * dt
            act.remaining -= done
        act._last = self._now

    def before_reallocation(self, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` once, just before the next reallocation of rates (after every
        start, finish and change of the current instant, before the clock advances): a model
        that would change many activities at each of several starts or finishes of one instant
        (weights re-split over the messages in flight) makes the last change only. Call it
        after something was marked for reallocation (a start, a finish, a change), so that
        one follows."""
        self._pending.append(callback)

    def _take_seeds(self) -> tuple[list[Activity], list[Resource]]:
        """The unfinished activities marked for reallocation, and the resources marked (a
        finish marks its resources: their users are reallocated too), the marks cleared."""
        if self._pending:
            pending = self._pending
            self._pending = []
            for callback in pending:
                callback()
        dirty = self._dirty
        if len(dirty) == 1:  # one start or change (the usual): no comprehension
            (only,) = dirty
            seeds = [only] if only.finished is None else []
            dirty.clear()
        elif dirty:
            seeds = [a for a in dirty if a.finished is None]
            dirty.clear()
        else:  # (a finish marks its resources only)
            seeds = []
        dirty_res = self._dirty_res
        # their users are unfinished (a finish removes itself); a comprehension, not
        # list(): compiled, it iterates the dict natively
        resources = [res for res in dirty_res]
        dirty_res.clear()
        return seeds, resources

    def _reallocate(self) -> None:
        # The hot path of every simulation: loops are written out (no helper calls per
        # activity); the arithmetic and its order are those of _progress and of summing each
        # resource's users in start order.
        seeds, resources = self._take_seeds()
        count = len(seeds)
        for res in resources:
            count += len(res.users)
        if count == 0:
            return
        alone = count == 1 and SOLO_PATH
        if alone:
            if not seeds:  # the one user of the one resource marked
                seeds = [user for res in resources for user in res.users]
            for res in seeds[0].demand:
                if len(res.users) > 1:
                    alone = False
                    break
        if alone:  # alone on its resources: its component is itself
            self._reallocate_solo(seeds[0])
        else:
            acts = component(seeds, resources)
            if len(acts) == 1 and SOLO_PATH:  # found alone (a finish left it so)
                self._reallocate_solo(acts[0])
            else:
                self._reallocate_component(acts)
        if self._over:  # a meter could bind: promoted (its users marked), components again
            self._promote_over()
            self._reallocate()

    def _reallocate_component(self, acts: list[Activity]) -> None:
        """Fill the component ``acts`` (in start order) and apply its rates, unless a meter
        could bind (then none is applied: the whole component is marked again)."""
        rates = self._fill(acts)
        if not self._meters or self._meters_fit(acts, rates):
            self._apply_rates(acts, rates)
        else:
            for act in acts:
                self._dirty[act] = None

    def _apply_rates(self, acts: list[Activity], rates: list[float]) -> None:
        """Give the component ``acts`` (in start order) its new ``rates`` (work/s): their
        progress, the resources' integrals and allocations, the completion events."""
        now = self._now
        # the component's resources, first met first (their integrals brought to now), each
        # one's new allocation summed in its ``_load`` (scratch: see fluid.Resource) in the
        # users' start order
        seen = Mark()
        touched: list[Resource] = []
        assert len(rates) == len(acts)
        for i, act in enumerate(acts):  # (indexed, not zip(strict=True): compiled natively)
            new_rate = rates[i]
            dt = now - act._last
            rate = act.rate
            if dt > 0 and rate > 0:
                done = rate * dt
                act.remaining -= done
            act._last = now
            # a zero rate with work left adds nothing (it waits, below), nor does an infinite one
            adds = not (new_rate <= 0 and act.remaining > 0) and new_rate != INF
            for res, amount in act.demand.items():
                if res._mark is not seen:
                    res._mark = seen
                    res._load = 0.0
                    touched.append(res)
                    since = res._since
                    if now > since:  # Resource._advance, inlined
                        res.used += res.allocated * (now - since)
                        res._since = now
                if adds:
                    res._load += new_rate * amount
        heap = self._heap
        seq = self._seq
        listener = self._bound_listener
        metered: list[tuple[Activity, float]] | None = None
        for i, act in enumerate(acts):
            new_rate = rates[i]
            act._version += 1
            if act.meters is not None:
                if metered is None:
                    metered = []
                metered.append((act, act.rate))
            if act.track is not None and act.bound_now is not act.bound:
                if listener is not None and now > act.bound_since:
                    listener.segment(act.track, act.bound, act.bound_since, now)
                act.bound = act.bound_now
                act.bound_since = now
            if new_rate <= 0 and act.remaining > 0:
                # A zero rate with work left can only come from a zero-capacity share; it
                # waits for the next reallocation (a capacity or cap change).
                act.rate = 0.0
                continue
            act.rate = new_rate
            remaining = act.remaining
            if new_rate == INF:
                finish = now
            else:
                finish = now if remaining <= 0 else now + remaining / new_rate
                if finish == INF:
                    self._never(act, remaining, new_rate)
            seq += 1
            push(heap, (finish, PRIORITY_COMPLETION, seq, act, act._version))
        self._seq = seq
        if len(heap) > HEAP_SLACK * (len(self.active) + HEAP_FLOOR):
            self._compact()
        observers = self._observers
        for res in touched:
            allocated = res._load
            res.allocated = allocated
            if allocated > res.peak:
                res.peak = allocated
            if observers and res in observers:
                for callback in observers[res]:
                    callback(now, allocated)
        if metered is not None:
            self._meter_rates(metered)

    def _compact(self) -> None:
        """Drop the heap's stale entries (completions an activity's later rate superseded,
        events cancelled), in place: each reallocation pushes a new completion for every
        activity of its component, and a large component reallocated often left the heap
        mostly stale (millions of entries, each pop ordered among them). The live entries
        keep their keys (time, priority, sequence: all distinct), so they are popped in the
        same order."""
        heap = self._heap
        live = []
        for entry in heap:
            target = entry[3]
            if isinstance(target, Activity):
                if target.finished is None and entry[4] == target._version:
                    live.append(entry)
            elif not target.cancelled:
                live.append(entry)
        heapq.heapify(live)
        heap[:] = live

    def _fill(self, acts: list[Activity]) -> list[float]:
        """:func:`~acesim.engine.fluid.max_min_rates` of ``acts`` (a component, in start
        order), as a list in their order: remembered by its inputs (:data:`FILL_MEMO`), each
        tracked activity's ``bound_now`` set as the filling sets it."""
        fills = self._fills
        if fills is None or not FILL_MEMO:
            rates = max_min_rates(acts)
            return [rates[act] for act in acts]
        key: tuple[float, ...]
        if len(acts) == 2:  # the usual component (a kernel beside a message): no list
            a, b = acts
            ida = a.fill_id if a.fill_id >= 0 else self._number(a)
            idb = b.fill_id if b.fill_id >= 0 else self._number(b)
            key = (ida, a.cap, a.weight, idb, b.cap, b.weight)
        else:
            flat: list[float] = []
            for a in acts:
                flat.append(a.fill_id if a.fill_id >= 0 else self._number(a))
                flat.append(a.cap)
                flat.append(a.weight)
            key = tuple(flat)
        known = fills.get(key)
        if known is not None:
            self._fills_found += 1
            bounds = known[1]
            for i, act in enumerate(acts):  # (indexed: compiled natively)
                if act.track is not None:
                    act.bound_now = bounds[i]
            return known[0]
        if len(fills) >= FILL_MEMO_SIZE:  # forget them, or stop where they seldom repeat
            fills = self._fills = {} if self._fills_found >= FILL_MEMO_SIZE else None
            self._fills_found = 0
            self._fill_ids = {}
        rates = max_min_rates(acts)
        found = [rates[act] for act in acts]
        if fills is not None:
            fills[key] = (found, [act.bound_now for act in acts])
        return found

    def _number(self, act: Activity) -> int:
        """``act``'s number for its fixed filling inputs (``Activity.fill_id``), given now."""
        inputs = (act.shape, act.basis, act.track is not None)
        number = self._fill_ids.get(inputs)
        if number is None:
            number = self._fill_ids[inputs] = self._fill_next
            self._fill_next += 1
        act.fill_id = number
        return number

    def forget_fills(self) -> None:
        """Forget the remembered fillings (:data:`FILL_MEMO`): a run that has ended needs
        them no longer, and forgotten here they are freed at once, by reference counting,
        not walked by the cyclic collector with the run's other garbage (a 64 MiB all-reduce
        on 1,024 NPUs, exact, with a slow link, remembers hundreds of fillings of 2,048
        activities). Nothing is computed differently after: a filling forgotten is computed
        again."""
        if self._fills is not None:
            self._fills = {}
            self._fills_found = 0
        self._fill_ids = {}

    def _solo(self, act: Activity) -> float:
        """:func:`~acesim.engine.fluid.solo_rate` of ``act``, remembered by its inputs as
        :meth:`_fill` remembers a component's."""
        fills = self._fills
        if fills is None or not FILL_MEMO:
            return solo_rate(act)
        key = (act.fill_id if act.fill_id >= 0 else self._number(act), act.cap, act.weight)
        known = fills.get(key)
        if known is not None:
            self._fills_found += 1
            if act.track is not None:
                act.bound_now = known[1][0]
            return known[0][0]
        if len(fills) >= FILL_MEMO_SIZE:
            fills = self._fills = {} if self._fills_found >= FILL_MEMO_SIZE else None
            self._fills_found = 0
            self._fill_ids = {}
        rate = solo_rate(act)
        if fills is not None:
            fills[key] = ([rate], [act.bound_now])
        return rate

    def _reallocate_solo(self, act: Activity) -> None:
        # _reallocate of a component of one activity: the same arithmetic in the same order
        # (progress, the resources' integrals, the rate of fluid.solo_rate, the allocations and
        # the completion event), without the general component and filling machinery.
        now = self._now
        dt = now - act._last
        rate = act.rate
        demand = act.demand
        if dt > 0 and rate > 0:
            done = rate * dt
            act.remaining -= done
        act._last = now
        new_rate = self._solo(act)
        metered = act.meters is not None
        if metered and not self._meters_fit([act], [new_rate]):
            return  # a meter could bind: promoted and reallocated by the caller
        for res in demand:
            since = res._since
            if now > since:  # Resource._advance, inlined
                res.used += res.allocated * (now - since)
                res._since = now
        act._version += 1
        if act.track is not None and act.bound_now is not act.bound:
            listener = self._bound_listener
            if listener is not None and now > act.bound_since:
                listener.segment(act.track, act.bound, act.bound_since, now)
            act.bound = act.bound_now
            act.bound_since = now
        remaining = act.remaining
        finite = True
        if new_rate <= 0 and remaining > 0:
            act.rate = 0.0  # waits for a capacity or cap change (see _reallocate)
            finite = False
        else:
            act.rate = new_rate
            if new_rate == INF:
                finish = now
                finite = False
            else:
                finish = now if remaining <= 0 else now + remaining / new_rate
                if finish == INF:
                    self._never(act, remaining, new_rate)
            self._seq += 1
            push(self._heap, (finish, PRIORITY_COMPLETION, self._seq, act, act._version))
        observers = self._observers
        for res, amount in demand.items():
            allocated = new_rate * amount if finite else 0.0
            res.allocated = allocated
            if allocated > res.peak:
                res.peak = allocated
            if observers and res in observers:
                for callback in observers[res]:
                    callback(now, allocated)
        if metered:
            self._meter_rates([(act, rate)])

    def _never(self, act: Activity, remaining: float, rate: float) -> None:
        raise SimulationError(
            f"activity {act.tag!r} would never finish: {remaining:g} units of work "
            f"at {rate:g} per second from {self._now:g} s (check the capacities, "
            "sizes and latencies given)"
        )

    def _finish(self, act: Activity) -> None:
        # No _progress here: the activity's remaining work is set to 0.0 exactly below (so
        # what it consumed is its work times its demand, Activity.consumed), which is all
        # progressing it to now would have produced.
        now = self._now
        act.remaining = 0.0
        act.finished = now
        del self.active[act]
        rate = act.rate
        observers = self._observers
        dirty_res = self._dirty_res
        work = act.work
        for res, amount in act.demand.items():
            since = res._since
            if now > since:  # Resource._advance, inlined
                res.used += res.allocated * (now - since)
                res._since = now
            users = res.users
            del users[act]
            res.allocated -= rate * amount if rate < INF else 0.0
            if res.allocated < 0:
                res.allocated = 0.0
            if observers and res in observers:
                for callback in observers[res]:
                    callback(now, res.allocated)
            if users:
                dirty_res[res] = None
        meters = act.meters
        if meters is not None:
            for res, amount in meters.items():
                res.base += work * amount
                del res.users[act]
                res.allocated -= rate * amount if rate < INF else 0.0
                if res.allocated < 0:
                    res.allocated = 0.0
        listener = self._bound_listener
        if act.track is not None and listener is not None:
            if now > act.bound_since:
                listener.segment(act.track, act.bound, act.bound_since, now)
            listener.closed(act.track, now)
        act.rate = 0.0
        if act.on_done is not None:
            act.on_done(act)

    # -- observers ---------------------------------------------------------------------------
    def add_bound_listener(self, listener: BoundListener) -> None:
        """Tell ``listener`` what bound each tracked activity from now on (segment by
        segment, see :meth:`start`); every listener added hears every segment."""
        self._bound_listeners = (*self._bound_listeners, listener)
        many = len(self._bound_listeners) > 1
        self._bound_listener = _Fanout(self._bound_listeners) if many else listener

    @property
    def bound_listeners(self) -> tuple[BoundListener, ...]:
        """The bound listeners, in the order added."""
        return self._bound_listeners

    @property
    def bound_listener(self) -> BoundListener | None:
        """What the model tells of bounds: None without listeners, else one object that
        tells every listener (read-only: :meth:`add_bound_listener` adds one)."""
        return self._bound_listener

    # -- running -----------------------------------------------------------------------------
    def quiet(self, *, listened: bool = False) -> bool:
        """Nothing scheduled, running or watched: no events, activities, observers or bound
        listener (``listened``: a bound listener allowed) -- a model may then compute a run of
        its own in closed form."""
        if self._heap or self.active or self._dirty or self._observers:
            return False
        return listened or self._bound_listener is None

    def advance_to(self, time: float) -> None:
        """Move a quiet engine's clock to ``time`` (s, not before now): the end of work a model
        computed without events."""
        if not self.quiet(listened=True):
            raise SimulationError("advance_to: the engine has events or activities")
        if not (time >= self._now) or time == INF:
            raise SimulationError(f"advance_to: cannot move the clock from {self._now} to {time}")
        self._now = time

    def settle(self) -> None:
        """Compute the rates of every activity started or changed at the current instant
        (normally done lazily, just before time advances)."""
        if self._dirty or self._dirty_res:
            self._reallocate()

    def peek(self) -> float:
        """Time (s) of the next event, ``inf`` when none remains."""
        heap = self._heap
        while True:
            if (self._dirty or self._dirty_res) and (not heap or heap[0][0] > self._now):
                self._reallocate()
            if not heap:
                return INF
            time, _prio, _seq, target, payload = heap[0]
            if isinstance(target, Activity):
                stale = target.finished is not None or payload != target._version
            else:
                stale = target.cancelled
            if not stale:
                return time
            pop(heap)

    def step(self, until: float = INF) -> bool:
        """Process the next event if it is due by ``until`` (s); False when there is none."""
        if self.peek() > until or not self._heap:  # peek: the top is live, rates settled
            return False
        time, _prio, _seq, target, payload = self._heap[0]
        pop(self._heap)
        self._now = time
        self.events_processed += 1
        if isinstance(target, Activity):
            self._finish(target)
        else:
            callback, args = payload
            callback(*args)
        return True

    def _loop(self, until: float) -> None:
        # step() in a loop, written out (the simulator's outer loop): same order, same events.
        heap = self._heap
        dirty = self._dirty
        dirty_res = self._dirty_res
        finish = self._finish
        processed = 0
        try:
            while True:
                if self._stopping:
                    return
                if (dirty or dirty_res) and (not heap or heap[0][0] > self._now):
                    self._reallocate()
                if not heap:
                    return
                entry = heap[0]
                time = entry[0]
                if time > until:
                    return
                pop(heap)
                target = entry[3]
                # the payload read by its type (an activity's version; a callback and its
                # arguments), not through the generic protocols an ``Any`` would take
                if isinstance(target, Activity):
                    if target.finished is not None or cast(int, entry[4]) != target._version:
                        continue
                    self._now = time
                    processed += 1
                    finish(target)
                else:
                    if cast(EventHandle, target).cancelled:
                        continue
                    self._now = time
                    processed += 1
                    callback, args = cast(_Call, entry[4])
                    callback(*args)
        finally:
            self.events_processed += processed

    def stop(self) -> None:
        """End the :meth:`run` in progress once the event being processed is done: the clock
        stays at that event's instant, the activities and events left stay where they are
        (not run, not refused as stuck), and the rates of what started then are not yet
        computed. For a model that has what it measures before its work ends (a training run
        whose measured window is complete); :meth:`close_segments` then tells the bound
        listener what bound the activities left, up to now."""
        self._stopping = True

    def close_segments(self) -> None:
        """Tell the bound listener, for every tracked activity still running, its segment
        from when its bound last changed to now (what it would be told when the bound next
        changes or the activity ends, cut at now), and start its next segment now: a run
        stopped before its activities ended (:meth:`stop`) reports what bound them up to the
        stop."""
        listener = self._bound_listener
        if listener is None:
            return
        now = self._now
        for act in self.active:
            if act.track is not None and now > act.bound_since:
                listener.segment(act.track, act.bound, act.bound_since, now)
                act.bound_since = now

    def run(self, until: float | None = None) -> float:
        """Process events until none remain (or until ``until`` s, or :meth:`stop`); return
        the final time."""
        limit = INF if until is None else until
        self._loop(limit)
        if self._stopping:  # stop(): what is left stays as it is
            self._stopping = False
            return self._now
        if until is not None:
            if self.peek() > until >= self._now:
                self._now = until
            return self._now
        if self.active:
            stuck = ", ".join(repr(a.tag) for a in list(self.active)[:5])
            raise SimulationError(
                f"{len(self.active)} activities can never finish (zero rate): {stuck}"
            )
        return self._now
