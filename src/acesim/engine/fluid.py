"""Fluid sharing of resources among concurrent activities.

Model
-----
A *resource* has a capacity in units per second (a link's bytes/s, HBM bytes/s, a collective
engine's reduction bytes/s). An *activity* has an amount of work (in its own unit: bytes of a
message, or 1.0 for "one kernel"), a demand vector ``{resource: units of resource per unit of
work}``, an optional rate cap (work/s) and a weight. While it runs at rate ``x`` (work/s) it
consumes ``x * demand[r]`` of each resource ``r``.

Policy: weighted max-min fairness of dominant shares (DRF) by progressive filling. An
activity may instead name a *basis* resource: its weight is then a share of that resource
(memory-level parallelism: HBM shared in proportion to what each party keeps in flight),
whatever its dominant one. All
unfrozen activities grow their dominant share (the largest fraction of any one resource's
capacity they use) in proportion to their weight; when a resource saturates, the activities
that use it freeze; an activity that reaches its cap freezes; repeat until all are frozen. Rates are
recomputed only inside the connected component (activities linked through shared resources) of
an activity that started, finished or whose cap changed, which keeps large disjoint simulations
(one component per NPU or per link) linear in size.

A static partition (the paper's baseline split) is expressed by giving each party its own
resource (``hbm.comm`` and ``hbm.compute``) rather than by a different allocation rule.

Conservation: each resource integrates its allocated rate over time (``used``), and each
activity records what it consumed, so tests can check that bytes are conserved and no
resource is ever allocated above capacity.

Meters: a resource that counts work other resources pace (an offload engine's reduction
units, whose load cannot exceed the links its messages also take) may be made a *meter*. Its
users do not carry it in their ``demand``, so it links no components and enters no filling:
a resource that never saturates and is no activity's dominant one does not move a max-min
allocation, so the rates are those the filling would give with it (up to the filling's 1e-9
tolerance, components being split where only the meter joined them). Its ``used`` is the sum
of ``work x amount`` over the work its users did (exact at each finish, the work in progress
added at a sync), its ``allocated`` and ``peak`` kept from its users' rate changes. The
engine checks both conditions at every rate change and start, and turns a meter that could
bind into an ordinary resource at that instant (:meth:`acesim.engine.Engine.add_resource`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

INF = math.inf
# Relative slack accepted when checking capacities and remaining work (floating point only).
_EPS = 1e-9


class Resource:
    """A capacity shared by activities.

    Args:
        name: unique, human-readable name (``npu0.hbm``).
        capacity: units per second (bytes/s for links and memory); must be > 0 or ``inf``.
    """

    __slots__ = (
        "name",
        "capacity",
        "users",
        "allocated",
        "used",
        "peak",
        "_since",
        "index",
        "metered",
        "base",
        "_mark",
        "_load",
        "_residual",
    )

    def __init__(self, name: str, capacity: float, index: int, *, metered: bool = False):
        self.name = name
        self.capacity = float(capacity)
        self.users: dict[Activity, None] = {}
        self.allocated = 0.0  # units/s currently allocated
        self.used = 0.0  # units consumed so far (integral of allocated)
        self.peak = 0.0  # highest allocation seen, units/s
        self._since = 0.0
        self.index = index
        #: a meter (:meth:`acesim.engine.Engine.add_resource`): kept out of the allocation
        #: while it cannot bind; its users are in ``users``, not in their ``demand``
        self.metered = metered
        #: a meter's units consumed by work that ended (finished activities, folded steps,
        #: planned spans), exactly ``work x amount`` each; ``used`` is this plus the work
        #: in progress, brought up to date by :meth:`acesim.engine.Engine.sync`
        self.base = 0.0
        # Scratch of one allocation or component search (max_min_rates, component, the
        # engine's rate application): a token saying this call has seen the resource, and its
        # weighted load (or allocation) and residual capacity, units/s. Attributes rather than
        # dictionaries keyed by resource: no hashing, and no float boxed per entry.
        self._mark: object = None
        self._load = 0.0
        self._residual = 0.0

    def _advance(self, now: float) -> None:
        if now > self._since:
            self.used += self.allocated * (now - self._since)
            self._since = now

    def utilisation(self, elapsed: float) -> float:
        """Mean allocated fraction of capacity over ``elapsed`` seconds."""
        if elapsed <= 0 or not math.isfinite(self.capacity):
            return 0.0
        return self.used / (self.capacity * elapsed)

    def __repr__(self) -> str:
        return f"Resource({self.name!r}, capacity={self.capacity:g})"


class Activity:
    """Work progressing at a rate decided by the allocator.

    Activities hash and compare by identity (fast in the allocator's dicts); code that needs a
    deterministic order keeps them in dicts or lists, or sorts them by ``seq``, never iterates a
    set of them.

    Args:
        work: amount of work (units of the activity: bytes, or 1.0 for one kernel); >= 0.
        demand: resource -> units of that resource consumed per unit of work.
        cap: maximum rate, work per second (``inf`` = uncapped).
        weight: share weight under max-min fairness (> 0).
        on_done: called with the activity when its work is finished.
        tag: free-form label for traces and statistics.
        shape: ``tuple(demand.items())``, where the caller already has it.
    """

    __slots__ = (
        "work",
        "remaining",
        "demand",
        "cap",
        "weight",
        "on_done",
        "tag",
        "rate",
        "started",
        "finished",
        "_last",
        "_version",
        "seq",
        "track",
        "bound",
        "bound_now",
        "bound_since",
        "basis",
        "shape",
        "meters",
        "_mark",
        "_share",
        "_dominant",
        "fill_id",
    )

    def __init__(
        self,
        work: float,
        demand: dict[Resource, float],
        cap: float,
        weight: float,
        on_done: Callable[[Activity], Any] | None,
        tag: Any,
        seq: int,
        shape: tuple[tuple[Resource, float], ...] | None = None,
    ):
        self.work = work
        self.remaining = work
        self.demand = demand
        self.cap = cap
        self.weight = weight
        self.on_done = on_done
        self.tag = tag
        self.rate = 0.0
        self.started = 0.0
        self.finished: float | None = None
        self._last = 0.0
        self._version = 0
        self.seq = seq
        #: when not None, what binds this activity is recorded (a kind such as "kernel")
        self.track: str | None = None
        #: what bound the activity's rate at the last allocation: a Resource, ``CAP`` (its
        #: own rate cap) or None (nothing: an infinite rate); kept for tracked activities
        self.bound: Any = None
        self.bound_now: Any = None
        self.bound_since = 0.0
        #: the resource the activity's weight is a share of (None: its dominant resource)
        self.basis: Resource | None = None
        #: the demand's items, as given (a key of the engine's remembered fillings; the
        #: demand does not change once the activity is made)
        self.shape = tuple(demand.items()) if shape is None else shape
        #: the meters it uses (units per unit of work), kept out of ``demand`` while they
        #: cannot bind (:meth:`acesim.engine.Engine.add_resource`); None: none
        self.meters: dict[Resource, float] | None = None
        # Scratch of one allocation or component search (see Resource): a token saying this
        # call has seen the activity, and its weight per unit of rate (DRF-normalised).
        self._mark: object = None
        self._share = 0.0
        #: its dominant share per unit of work (:func:`max_min_rates`), kept between fillings
        #: (< 0: not known; the engine forgets it where a capacity or the demand changes)
        self._dominant = -1.0
        #: the engine's number for its fixed filling inputs (shape, basis, tracked), a part
        #: of its remembered fillings' keys (< 0: not numbered yet; set again to -1 where the
        #: demand changes)
        self.fill_id = -1

    @property
    def consumed(self) -> dict[Resource, float]:
        """Units of each resource the activity consumed: once finished, its work times its
        demand (exactly); before, its work done up to the last change of its rate times its
        demand."""
        done = self.work - self.remaining  # finished: the work itself (remaining 0.0)
        consumed = {res: done * amount for res, amount in self.demand.items()}
        if self.meters is not None:
            consumed.update({res: done * amount for res, amount in self.meters.items()})
        return consumed

    def __repr__(self) -> str:
        return f"Activity({self.tag!r}, remaining={self.remaining:g}, rate={self.rate:g})"


_by_seq = attrgetter("seq")
#: components up to this many activities are put in start order by an insertion sort on
#: their ``seq`` (compiled: native integer comparisons), larger ones by ``list.sort``
_FEW_TO_SORT = 16


class Mark:
    """A fresh marker for one search or filling round (``Activity._mark``, ``Resource._mark``:
    what it has reached, by identity). A class of its own, not ``object()``: compiled, making
    one is a native allocation, not a call of the builtin through the generic protocol."""

    __slots__ = ()


def _in_start_order(found: list[Activity]) -> None:
    """Sort ``found`` by ``seq`` (start order; every ``seq`` is distinct, so any sort gives the
    same order) in place."""
    count = len(found)
    if count > _FEW_TO_SORT:
        found.sort(key=_by_seq)
        return
    for i in range(1, count):
        act = found[i]
        seq = act.seq
        j = i - 1
        while j >= 0 and found[j].seq > seq:
            found[j + 1] = found[j]
            j -= 1
        found[j + 1] = act


#: ``Activity.bound`` of an activity held back by its own rate cap (a kernel's compute units).
CAP = "cap"


def component(seeds: Sequence[Activity], resources: Sequence[Resource] = ()) -> list[Activity]:
    """Activities connected to ``seeds`` and to the users of ``resources`` through shared
    resources, in a deterministic order (by ``seq``, i.e. start order)."""
    seen = Mark()  # marks what this search has reached (Activity._mark, Resource._mark)
    found: list[Activity] = []
    for res in resources:  # every user a seed
        if res._mark is not seen:
            res._mark = seen
            for act in res.users:
                if act._mark is not seen:
                    act._mark = seen
                    found.append(act)
    for act in seeds:
        if act._mark is not seen:
            act._mark = seen
            found.append(act)
    at = 0
    while at < len(found):  # breadth first: each activity and resource met is marked once
        act = found[at]
        at += 1
        for res in act.demand:
            if res._mark is seen:
                continue
            res._mark = seen
            users = res.users
            if len(users) > 1:
                for user in users:
                    if user._mark is not seen:
                        user._mark = seen
                        found.append(user)
    _in_start_order(found)
    return found


def dominant_share(demand: dict[Resource, float], basis: Resource | None) -> float:
    """The dominant share per unit of work ``s_a`` (:func:`max_min_rates`) of an activity of
    ``demand`` whose weight is a share of ``basis`` (None: of its dominant resource): the
    amount of ``basis`` over its capacity, or the largest amount over capacity among its
    finite resources that are not meters (none is in a demand the filling sees). The filling
    keeps it per activity (``Activity._dominant``); :func:`solo_rate` computes the same
    inline (its hot path); the engine uses it where it checks that a meter would not be
    dominant."""
    if basis is not None and basis.capacity != INF and demand.get(basis, 0.0) > 0:
        return demand[basis] / basis.capacity
    dominant = 0.0
    for res, amount in demand.items():
        if amount > 0 and res.capacity != INF and not res.metered:
            fraction = amount / res.capacity
            if fraction > dominant:
                dominant = fraction
    return dominant


def max_min_rates(activities: list[Activity]) -> dict[Activity, float]:
    """Weighted max-min fair rates (work/s) of dominant shares, by progressive filling.

    Activities measure work in different units (a kernel's work is 1.0, a message's is bytes),
    so fairness is over *dominant shares* (dominant resource fairness): activity ``a`` grows
    its rate as ``w_a * t / s_a`` with ``s_a = max_r d[a, r] / C_r`` over finite resources.
    Two activities bound by the same resource then get equal (weighted) shares of it, whatever
    their units. Each round finds the lowest fill level ``t`` at which a resource saturates or
    an activity reaches its cap (levels within a relative ``_EPS`` count as equal), freezes those
    activities at ``weight * t`` (or their cap) and charges their use to the resources'
    residual capacity. The loops are written out by hand: this is the simulator's hot path.
    """
    rates: dict[Activity, float] = {}
    for act in activities:
        dominant = act._dominant
        if dominant < 0.0:
            dominant = act._dominant = dominant_share(act.demand, act.basis)
        # A vanishing dominant share (denormal demand) counts as no demand at all.
        vanishing = dominant <= 1e-300
        act._share = act.weight if vanishing else act.weight / dominant  # weight per unit rate
    unfrozen = activities
    grow = 1 + _EPS
    shrink = 1 - _EPS
    first = True  # the first round: every resource loaded is met, its residual the capacity
    while unfrozen:
        # Fill level t: each unfrozen activity would run at weight * t. Each resource's load
        # is summed in the order its users come (a resource first met starts from 0.0).
        best = INF
        loaded = Mark()  # marks the resources loaded this round
        resources: list[Resource] = []
        for act in unfrozen:
            weight = act._share
            for res, amount in act.demand.items():
                if amount > 0:
                    if res._mark is loaded:
                        res._load = res._load + weight * amount
                    else:
                        res._mark = loaded
                        res._load = 0.0 + weight * amount
                        resources.append(res)
                        if first:
                            res._residual = res.capacity
            cap = act.cap
            if cap < INF:
                level = cap / weight
                if level < best:
                    best = level
        bottlenecks: list[Resource] = []
        for res in resources:
            if res.capacity == INF:
                continue
            spare = res._residual
            level = (spare if spare > 0.0 else 0.0) / res._load
            if level == INF:  # a vanishing (denormal) load never saturates the resource
                continue
            if level < best * shrink:
                best = level
                bottlenecks = [res]
            elif level <= best * grow:
                bottlenecks.append(res)
        if best == INF:
            for act in unfrozen:
                rates[act] = INF
                act.bound_now = None
            break
        limit = best * grow
        saturated = Mark()  # marks the resources saturated at this level
        for res in bottlenecks:
            weighted = res._load
            if weighted > 0:
                spare = res._residual
                if (spare if spare > 0.0 else 0.0) / weighted <= limit:
                    res._mark = saturated
        still: list[Activity] = []
        frozen: list[Activity] = []
        for act in unfrozen:
            cap = act.cap
            weight = act._share
            freeze = cap < INF and cap / weight <= limit
            if not freeze:
                for res, amount in act.demand.items():
                    if amount > 0 and res._mark is saturated:
                        freeze = True
                        break
            if freeze:
                rate = weight * best
                if cap < rate:
                    rate = cap
                rates[act] = rate
                if act.track is not None:
                    act.bound_now = _reason(act, weight * best, saturated)
                frozen.append(act)
            else:
                still.append(act)
        if not still:  # all frozen: the residual capacities are read no more
            break
        if len(still) == len(unfrozen):  # numerical corner: freeze everything at this level
            for act in still:
                rates[act] = act._share * best
                if act.track is not None:
                    act.bound_now = _reason(act, act._share * best, saturated)
            break
        for act in frozen:  # their use charged to the residual capacities, in their order
            rate = rates[act]
            for res, amount in act.demand.items():
                res._residual -= rate * amount  # (read only where some user loads it)
        unfrozen = still
        first = False
    return rates


def solo_rate(act: Activity) -> float:
    """:func:`max_min_rates` of ``[act]`` alone (an activity no other shares a resource with),
    the same arithmetic in the same order, so the same rate to the last bit (and the same
    ``bound_now`` for a tracked activity): most reallocations are of one kernel or message
    alone on its resources, for which the general filling loop is mostly overhead."""
    demand = act.demand
    dominant = 0.0
    for res, amount in demand.items():
        capacity = res.capacity
        if amount > 0 and capacity != INF:
            fraction = amount / capacity
            if fraction > dominant:
                dominant = fraction
    basis = act.basis
    if basis is not None and basis.capacity != INF and demand.get(basis, 0.0) > 0:
        dominant = demand[basis] / basis.capacity
    weight = act.weight if dominant <= 1e-300 else act.weight / dominant
    cap = act.cap
    best = cap / weight if cap < INF else INF
    shrink = 1 - _EPS
    grow = 1 + _EPS
    bottlenecks: list[tuple[Resource, float]] = []
    for res, amount in demand.items():
        capacity = res.capacity
        if amount > 0 and capacity != INF:
            weighted = weight * amount
            level = capacity / weighted
            if level == INF:
                continue
            if level < best * shrink:
                best = level
                bottlenecks = [(res, weighted)]
            elif level <= best * grow:
                bottlenecks.append((res, weighted))
    if best == INF:
        act.bound_now = None
        return INF
    limit = best * grow
    saturated = Mark()  # marks the resources saturated at this level
    for res, weighted in bottlenecks:
        if res.capacity / weighted <= limit:
            res._mark = saturated
    freeze = cap < INF and cap / weight <= limit
    if not freeze:
        for res, amount in demand.items():
            if amount > 0 and res._mark is saturated:
                freeze = True
                break
    rate = weight * best
    if act.track is not None:
        act.bound_now = _reason(act, rate, saturated)
    if freeze and cap < rate:
        rate = cap
    return rate


def _reason(act: Activity, level_rate: float, saturated: object) -> Any:
    """What froze ``act`` at the fill level's rate ``level_rate`` (work/s): a saturated
    resource it uses (one marked ``saturated``), unless its own cap is strictly lower (then
    :data:`CAP`)."""
    resource = None
    for res, amount in act.demand.items():
        if amount > 0 and res._mark is saturated:
            resource = res
            break
    if resource is not None and not act.cap < level_rate * (1 - 1e-9):
        return resource
    if act.cap < INF:
        return CAP
    return resource
