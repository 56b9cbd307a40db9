"""The event kernel (time, priority, sequence ordering), its public API, the fluid max-min
allocator and the space-shared pool."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim.engine import INF, Activity, Engine, Pool, Resource
from acesim.errors import SimulationError

# -- the event kernel -------------------------------------------------------------------------


def test_events_run_in_time_order() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.schedule(3.0, seen.append, "c")
    engine.schedule(1.0, seen.append, "a")
    engine.schedule(2.0, seen.append, "b")
    assert engine.run() == 3.0
    assert seen == ["a", "b", "c"]


def test_equal_time_events_run_by_priority_then_scheduling_order() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.schedule(1.0, seen.append, "n1")
    engine.schedule(1.0, seen.append, "late", priority=5)
    engine.schedule(1.0, seen.append, "n2")
    engine.schedule(1.0, seen.append, "early", priority=-5)
    engine.schedule(1.0, seen.append, "n3")
    engine.run()
    assert seen == ["early", "n1", "n2", "n3", "late"]


def test_events_scheduled_at_the_current_instant_run_after_earlier_ones() -> None:
    engine = Engine()
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        engine.schedule(0.0, seen.append, "zero-delay")

    engine.schedule(1.0, first)
    engine.schedule(1.0, seen.append, "second")
    engine.run()
    assert seen == ["first", "second", "zero-delay"]


def test_cancelled_event_does_not_run() -> None:
    engine = Engine()
    seen: list[str] = []
    handle = engine.schedule(1.0, seen.append, "x")
    engine.schedule(2.0, seen.append, "y")
    handle.cancel()
    engine.run()
    assert seen == ["y"]


def test_run_until_stops_the_clock_there() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.schedule(1.0, seen.append, "a")
    engine.schedule(5.0, seen.append, "b")
    assert engine.run(until=2.0) == 2.0
    assert seen == ["a"]
    engine.run()
    assert seen == ["a", "b"]


def test_scheduling_in_the_past_is_refused() -> None:
    with pytest.raises(SimulationError, match="in the past"):
        Engine().schedule(-1.0, lambda: None)


def test_activity_completion_precedes_timer_at_the_same_instant() -> None:
    engine = Engine()
    res = engine.add_resource("r", 1.0)
    seen: list[str] = []
    engine.start(2.0, {res: 1.0}, lambda _a: seen.append("done"))
    engine.schedule(2.0, seen.append, "timer")
    engine.run()
    assert seen == ["done", "timer"]


# -- the public API: peek, step, run(until), settle, observe, work_done, sync ------------------


def test_peek_returns_the_next_event_time_without_advancing_the_clock() -> None:
    engine = Engine()
    assert engine.peek() == INF
    seen: list[str] = []
    engine.schedule(2.0, seen.append, "b")
    cancelled = engine.schedule(1.0, seen.append, "a")
    cancelled.cancel()
    assert engine.peek() == 2.0  # the cancelled event is skipped
    assert engine.peek() == 2.0
    assert engine.now == 0.0 and seen == [] and engine.events_processed == 0
    link = engine.add_resource("link", 4.0)
    engine.start(2.0, {link: 1.0})  # done at 2 / 4 = 0.5: peek settles its rate first
    assert engine.peek() == 0.5
    assert engine.now == 0.0


def test_step_processes_exactly_one_event() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.schedule(1.0, seen.append, "a")
    engine.schedule(1.0, seen.append, "b")
    engine.schedule(3.0, seen.append, "c")
    assert engine.step() is True
    assert (seen, engine.now, engine.events_processed) == (["a"], 1.0, 1)
    assert engine.step() is True
    assert (seen, engine.now, engine.events_processed) == (["a", "b"], 1.0, 2)
    assert engine.step(until=2.0) is False  # the next event is later than until
    assert (seen, engine.now) == (["a", "b"], 1.0)
    assert engine.step() is True
    assert (seen, engine.now) == (["a", "b", "c"], 3.0)
    assert engine.step() is False
    assert engine.events_processed == 3


def test_step_counts_an_activity_completion_as_one_event() -> None:
    engine = Engine()
    link = engine.add_resource("link", 2.0)
    done: list[float] = []
    act = engine.start(3.0, {link: 1.0}, lambda a: done.append(engine.now))
    assert engine.step() is True
    assert done == [1.5] and act.finished == 1.5 and engine.now == 1.5
    assert engine.step() is False


def test_run_until_stops_at_that_time_with_work_in_flight() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    act = engine.start(30.0, {link: 1.0})
    assert engine.run(until=1.25) == 1.25
    assert engine.now == 1.25
    assert act.finished is None
    assert engine.work_done(act) == 12.5
    assert engine.run(until=2.0) == 2.0
    assert engine.work_done(act) == 20.0
    assert engine.run() == 3.0
    assert act.finished == 3.0 and engine.work_done(act) == 30.0


def test_run_until_past_the_last_event_moves_the_clock_there() -> None:
    engine = Engine()
    engine.schedule(1.0, lambda: None)
    assert engine.run(until=5.0) == 5.0
    assert engine.now == 5.0
    assert engine.peek() == INF


def test_settle_computes_the_rates_of_the_current_instant() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    a = engine.start(10.0, {link: 1.0})
    b = engine.start(10.0, {link: 3.0})  # 3 units of the link per unit of work
    assert link.allocated == 0.0  # rates are computed lazily
    engine.settle()
    assert engine.now == 0.0
    # max-min: equal dominant shares, a at x/10 and b at 3y/10 with x + 3y = 10
    assert a.rate == pytest.approx(5.0) and b.rate == pytest.approx(5.0 / 3)
    assert link.allocated == pytest.approx(10.0)
    engine.settle()  # nothing changed: nothing to do
    assert a.rate == pytest.approx(5.0)


def test_observe_sees_every_allocation_change() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    seen: list[tuple[float, float]] = []
    engine.observe(link, lambda t, allocated: seen.append((t, allocated)))
    a = engine.start(20.0, {link: 1.0})
    engine.schedule(1.0, lambda: engine.start(5.0, {link: 1.0}))
    engine.run()
    # a alone at 10 until t=1 (10 done); a and b at 5 each; b (5) done at t=2, a has 5 left:
    # the completion drops the allocation to 5, the reallocation gives a all 10, a done at 2.5.
    assert seen == [(0.0, 10.0), (1.0, 10.0), (2.0, 5.0), (2.0, 10.0), (2.5, 0.0)]
    assert a.finished == 2.5
    engine.sync()
    assert link.used == pytest.approx(25.0, rel=1e-12)
    assert link.peak == 10.0


def test_work_done_of_a_running_activity_follows_its_rate() -> None:
    engine = Engine()
    link = engine.add_resource("link", 8.0)
    act = engine.start(16.0, {link: 1.0}, cap=4.0)
    assert engine.work_done(act) == 0.0
    engine.run(until=1.5)
    assert engine.work_done(act) == 6.0
    engine.set_cap(act, INF)
    engine.run(until=2.0)  # 6 at 4/s by 1.5, then 8/s: 10 by 2
    assert engine.work_done(act) == 10.0
    engine.run()
    assert act.finished == 2.75
    assert engine.work_done(act) == 16.0


def test_sync_brings_resource_integrals_to_now() -> None:
    engine = Engine()
    link = engine.add_resource("link", 4.0)
    engine.start(100.0, {link: 1.0})
    engine.run(until=2.5)
    engine.sync()
    assert link.used == 10.0
    assert link.utilisation(2.5) == 1.0


# -- the pool: space-shared units ---------------------------------------------------------------


def test_pool_grants_at_once_what_is_free() -> None:
    engine = Engine()
    pool = engine.add_pool("units", 10)
    granted: list[str] = []
    pool.acquire(4, lambda: granted.append("a"))
    assert granted == ["a"]
    assert (pool.held, pool.free, pool.peak) == (4.0, 6.0, 4.0)
    pool.acquire(0, lambda: granted.append("zero"))
    assert granted == ["a", "zero"] and pool.held == 4.0


def test_pool_waiters_are_granted_first_come_first_served() -> None:
    engine = Engine()
    pool = engine.add_pool("units", 10)
    log: list[tuple[str, float]] = []
    frees: list[float] = []
    pool.observe(lambda p: frees.append(p.free))

    def take(name: str, amount: float) -> None:
        pool.acquire(amount, lambda: log.append((name, engine.now)))

    take("a", 6)  # t=0: granted
    engine.schedule(1.0, take, "b", 6)  # waits: 4 free
    engine.schedule(1.5, take, "c", 1)  # fits, but b waits before it: waits too
    engine.schedule(3.0, pool.release, 6)  # a done: b (6) and c (1) both fit, in order
    engine.schedule(4.0, pool.release, 6)  # b done
    engine.schedule(5.0, pool.release, 1)  # c done
    engine.run()
    assert log == [("a", 0.0), ("b", 3.0), ("c", 3.0)]
    assert frees == [4.0, 3.0, 9.0, 10.0]
    assert pool.peak == 7.0
    # 6 units over [0, 3), 7 over [3, 4), 1 over [4, 5)
    assert pool.held_time == 6 * 3 + 7 * 1 + 1 * 1


def test_pool_held_time_integrates_up_to_now() -> None:
    engine = Engine()
    pool = engine.add_pool("units", 8)
    engine.schedule(1.0, pool.acquire, 3, lambda: None)
    engine.run(until=3.5)
    assert pool.held_time == 0.0  # integrated lazily
    engine.sync()
    assert pool.held_time == 3 * 2.5
    engine.run(until=4.0)
    pool.sync()
    assert pool.held_time == 3 * 3.0


def test_pool_refuses_impossible_requests() -> None:
    engine = Engine()
    pool = engine.add_pool("npu0.units", 10)
    with pytest.raises(SimulationError, match="pool 'npu0.units': cannot hold 11 of 10 units"):
        pool.acquire(11, lambda: None)
    with pytest.raises(SimulationError, match="cannot hold -1 of 10 units"):
        pool.acquire(-1, lambda: None)
    pool.acquire(2, lambda: None)
    with pytest.raises(SimulationError, match="releasing 3 units, only 2 held"):
        pool.release(3)
    with pytest.raises(SimulationError, match="capacity must be positive, got 0"):
        engine.add_pool("empty", 0)
    assert isinstance(pool, Pool) and pool.held == 2.0


# -- the fluid allocator: closed cases --------------------------------------------------------


def _finish_times(engine: Engine, acts: list[Activity]) -> list[float]:
    engine.run()
    return [a.finished for a in acts]  # type: ignore[misc]


def test_two_activities_share_a_resource_equally() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    a = engine.start(20.0, {link: 1.0})
    b = engine.start(20.0, {link: 1.0})
    engine.run(until=1.0)
    assert a.rate == b.rate == 5.0
    assert _finish_times(engine, [a, b]) == [4.0, 4.0]


def test_a_finished_activity_frees_its_share() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    short = engine.start(10.0, {link: 1.0})
    long = engine.start(30.0, {link: 1.0})
    # Both at 5/s until t=2 (short done), then long alone at 10/s for its last 20.
    assert _finish_times(engine, [short, long]) == [2.0, 4.0]


def test_weights_split_a_resource_in_proportion() -> None:
    engine = Engine()
    link = engine.add_resource("link", 8.0)
    light = engine.start(12.0, {link: 1.0}, weight=1.0)
    heavy = engine.start(12.0, {link: 1.0}, weight=3.0)
    engine.run(until=0.5)
    assert (light.rate, heavy.rate) == (2.0, 6.0)
    # heavy done at 12/6 = 2; light has 8 left, alone at 8/s: done at 3 = total work / capacity.
    assert _finish_times(engine, [light, heavy]) == [3.0, 2.0]


def test_a_capped_activity_leaves_the_rest_to_others() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    capped = engine.start(100.0, {link: 1.0}, cap=2.0)
    free = engine.start(100.0, {link: 1.0})
    engine.run(until=1.0)
    assert (capped.rate, free.rate) == (2.0, 8.0)


def test_a_cap_change_reallocates() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    act = engine.start(10.0, {link: 1.0}, cap=1.0)
    engine.schedule(2.0, engine.set_cap, act, INF)
    # 2 units by t=2, then 8 units at 10/s.
    assert _finish_times(engine, [act]) == [pytest.approx(2.8, rel=1e-15)]


def test_an_activity_is_limited_by_the_tighter_of_two_resources() -> None:
    engine = Engine()
    wide = engine.add_resource("wide", 10.0)
    narrow = engine.add_resource("narrow", 4.0)
    both = engine.start(100.0, {wide: 1.0, narrow: 1.0})
    engine.run(until=1.0)
    assert both.rate == 4.0


def test_max_min_fairness_across_two_resources() -> None:
    engine = Engine()
    wide = engine.add_resource("wide", 10.0)
    narrow = engine.add_resource("narrow", 4.0)
    both = engine.start(100.0, {wide: 1.0, narrow: 1.0})
    only_wide = engine.start(100.0, {wide: 1.0})
    only_narrow = engine.start(100.0, {narrow: 1.0})
    engine.run(until=1.0)
    # narrow saturates first at 2 each; only_wide then takes what is left of wide.
    assert (both.rate, only_wide.rate, only_narrow.rate) == (2.0, 8.0, 2.0)


def test_demand_per_unit_of_work_scales_the_rate() -> None:
    engine = Engine()
    hbm = engine.add_resource("hbm", 10.0)
    act = engine.start(1.0, {hbm: 5.0})  # 5 bytes of HBM per unit of work
    assert _finish_times(engine, [act]) == [0.5]
    assert act.consumed[hbm] == 5.0
    assert hbm.used == pytest.approx(5.0, rel=1e-12)


def test_an_activity_without_finite_demand_finishes_at_once() -> None:
    engine = Engine()
    act = engine.start(5.0, {})
    assert _finish_times(engine, [act]) == [0.0]


def test_a_capacity_change_reallocates_users() -> None:
    engine = Engine()
    link = engine.add_resource("link", 1.0)
    act = engine.start(3.0, {link: 1.0})
    engine.schedule(1.0, engine.set_capacity, link, 2.0)
    assert _finish_times(engine, [act]) == [2.0]


def test_invalid_engine_inputs_are_refused() -> None:
    engine = Engine()
    with pytest.raises(SimulationError, match="capacity must be at least 1e-300"):
        engine.add_resource("r", 0.0)
    res = engine.add_resource("r", 1.0)
    with pytest.raises(SimulationError, match="work must be finite"):
        engine.start(-1.0, {res: 1.0})
    with pytest.raises(SimulationError, match="weight must be positive"):
        engine.start(1.0, {res: 1.0}, weight=0.0)


def test_work_that_can_never_finish_is_reported() -> None:
    engine = Engine()
    res = engine.add_resource("r", 1.0)
    engine.start(1.0, {res: 1.0}, cap=0.0, tag="stuck")
    with pytest.raises(SimulationError, match="can never finish.*'stuck'"):
        engine.run()


# -- properties over random activity sets -----------------------------------------------------

_REL = 1e-9  # floating-point slack only


def _check_resource(res: Resource, acts: list[Activity]) -> None:
    """``res`` is not allocated above its capacity, and its allocation is the sum of its
    running users' rates (recomputed independently from the activities)."""
    total = sum(
        a.rate * a.demand[res]
        for a in acts
        if a.finished is None and res in a.demand and a.rate < INF
    )
    assert total <= res.capacity * (1 + _REL), (res, total)
    assert res.allocated <= res.capacity * (1 + _REL), (res, res.allocated)
    assert res.allocated == pytest.approx(total, rel=1e-9, abs=1e-9 * res.capacity)


class Checker:
    """Checks every resource of an engine through the public API only: at every allocation
    change (``observe``: after each reallocation and each completion, the resource whose
    allocation changed), after every event (``step``) and after the rates of each instant are
    settled (``peek`` settles exactly when the engine itself would, before time advances)."""

    def __init__(self, engine: Engine, resources: list[Resource], acts: list[Activity]):
        self.engine = engine
        self.resources = resources
        self.acts = acts
        self.checks = 0
        self.changes = 0
        for res in resources:
            engine.observe(res, self._observed(res))

    def _observed(self, res: Resource) -> Callable[[float, float], None]:
        def changed(time: float, allocated: float) -> None:
            assert time == self.engine.now
            assert allocated == res.allocated
            self.changes += 1
            _check_resource(res, self.acts)

        return changed

    def check(self) -> None:
        self.checks += 1
        for res in self.resources:
            _check_resource(res, self.acts)

    def run(self) -> float:
        engine = self.engine
        engine.settle()
        self.check()
        while engine.step():
            self.check()
            engine.peek()
            self.check()
        assert not engine.active
        return engine.now


_activity = st.tuples(
    st.floats(0.0, 5.0),  # start time
    st.floats(0.1, 100.0),  # work
    st.lists(st.tuples(st.integers(0, 3), st.floats(0.1, 5.0)), min_size=1, max_size=3),
    st.one_of(st.just(INF), st.floats(0.5, 50.0)),  # cap
    st.sampled_from([0.5, 1.0, 2.0, 3.0]),  # weight
)
_scenario = st.tuples(
    st.lists(st.floats(1.0, 100.0), min_size=4, max_size=4),  # capacities
    st.lists(_activity, min_size=1, max_size=12),
)


def _run(
    scenario: tuple, *, checked: bool = False, shared: bool = False
) -> tuple[Engine, list[Resource], list[Activity], Checker | None]:
    """``shared``: activities of one demand given one dict, started with ``shared``."""
    capacities, specs = scenario
    engine = Engine()
    resources = [engine.add_resource(f"r{i}", c) for i, c in enumerate(capacities)]
    acts: list[Activity] = []
    made: dict[tuple, dict[Resource, float]] = {}

    def begin(work: float, demand: dict[Resource, float], cap: float, weight: float) -> None:
        acts.append(engine.start(work, demand, cap=cap, weight=weight, shared=shared))

    for start, work, demand_spec, cap, weight in specs:
        demand: dict[Resource, float] = {}
        for index, amount in demand_spec:
            demand[resources[index]] = amount
        if shared:
            demand = made.setdefault(tuple(demand_spec), demand)
        engine.schedule(start, begin, work, demand, cap, weight)
    checker = Checker(engine, resources, acts) if checked else None
    if checker is not None:
        checker.run()
    else:
        engine.run()
    return engine, resources, acts, checker


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_no_resource_is_ever_allocated_above_capacity(scenario: tuple) -> None:
    engine, _resources, acts, checker = _run(scenario, checked=True)
    assert checker is not None
    assert checker.checks == 2 * engine.events_processed + 1
    # every start and every completion changes the allocation of the resources it uses
    assert checker.changes >= sum(len(a.demand) for a in acts)
    assert all(a.finished is not None for a in acts)
    # driving the engine step by step ends where run() does
    plain, _r, plain_acts, _c = _run(scenario)
    assert [a.finished for a in acts] == [a.finished for a in plain_acts]
    assert engine.now == plain.now


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_resource_usage_is_conserved(scenario: tuple) -> None:
    _engine, resources, acts, _c = _run(scenario)
    for res in resources:
        consumed = sum(a.consumed.get(res, 0.0) for a in acts)
        expected = sum(a.work * a.demand.get(res, 0.0) for a in acts)
        assert consumed == pytest.approx(expected, rel=1e-12)
        # The resource's own integral of its allocated rate over time agrees.
        assert res.used == pytest.approx(consumed, rel=1e-9, abs=1e-9)


@settings(max_examples=examples(100), deadline=None)
@given(_scenario)
def test_no_activity_finishes_faster_than_its_bottleneck_allows(scenario: tuple) -> None:
    _engine, _resources, acts, _c = _run(scenario)
    for a in acts:
        bound = a.work / a.cap if a.cap < INF else 0.0
        for res, amount in a.demand.items():
            bound = max(bound, a.work * amount / res.capacity)
        assert a.finished - a.started >= bound * (1 - _REL)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.floats(1.0, 100.0),
    st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.1, 50.0)), min_size=1, max_size=10),
)
def test_one_shared_resource_is_work_conserving(capacity: float, specs: list) -> None:
    """Uncapped activities on one resource keep it busy: the last finishes when all the work
    could have finished on the capacity, counting idle gaps before late starts."""
    engine = Engine()
    res = engine.add_resource("r", capacity)
    acts: list[Activity] = []
    for start, work in specs:
        engine.schedule(start, lambda w=work: acts.append(engine.start(w, {res: 1.0})))
    end = engine.run()
    busy_until = 0.0
    for start, work in sorted(specs):
        busy_until = max(busy_until, start) + work / capacity
    assert end == pytest.approx(busy_until, rel=1e-9)


@settings(max_examples=examples(60), deadline=None)
@given(_scenario)
def test_a_demand_started_shared_gives_the_same_run(scenario: tuple) -> None:
    """Activities of one demand dict started with ``shared`` (checked and cleaned once, the
    cleaned form shared) finish when, and use what, those started without it do."""
    engine, resources, acts, _c = _run(scenario)
    again, shared_resources, shared_acts, _c2 = _run(scenario, shared=True)
    assert [a.finished for a in shared_acts] == [a.finished for a in acts]
    assert [r.used for r in shared_resources] == [r.used for r in resources]
    assert [r.peak for r in shared_resources] == [r.peak for r in resources]
    assert again.now == engine.now


def test_a_shared_demand_with_a_meter_is_split_per_activity() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    alu = engine.add_resource("alu", 1000.0, meter=True)
    demand = {link: 1.0, alu: 1.0}
    first = engine.start(5.0, demand, shared=True)
    second = engine.start(5.0, demand, shared=True)
    assert first.demand is not second.demand  # each its own: a meter may be promoted in it
    assert first.meters == second.meters == {alu: 1.0}
    assert demand == {link: 1.0, alu: 1.0}  # the caller's dict untouched
    engine.run()
    assert first.finished == second.finished == 1.0


def test_a_shared_demand_is_checked_once_and_its_errors_name_the_resource() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    with pytest.raises(SimulationError, match="'link'"):
        engine.start(1.0, {link: math.nan}, shared=True)


@settings(max_examples=examples(40), deadline=None)
@given(_scenario)
def test_a_repeated_run_is_bit_identical(scenario: tuple) -> None:
    _e1, r1, a1, _c1 = _run(scenario)
    _e2, r2, a2, _c2 = _run(scenario)
    assert [a.finished for a in a1] == [a.finished for a in a2]
    assert [r.used for r in r1] == [r.used for r in r2]
    assert all(math.isfinite(a.finished) for a in a1)


def test_every_bound_listener_hears_every_segment() -> None:
    """Bound listeners are a list: a second one (a per-job recorder, a trace) hears exactly
    what the first hears, and the engine refuses to have its listener slot overwritten."""
    from acesim.training.bounds import BoundRecorder

    engine = Engine()
    link = engine.add_resource("link", 10.0)
    first, second = BoundRecorder(), BoundRecorder()
    engine.add_bound_listener(first)
    engine.add_bound_listener(second)
    engine.start(20.0, {link: 1.0}, tag="a", track="message")
    engine.start(10.0, {link: 1.0}, tag="b", track="message", cap=2.0)
    engine.run()
    assert engine.bound_listeners == (first, second)
    assert first.messages and first.messages == second.messages
    with pytest.raises(AttributeError):
        engine.bound_listener = first  # type: ignore[misc]
