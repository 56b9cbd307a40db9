"""The event kernel (time, priority, sequence ordering) and the fluid max-min allocator."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim.engine import INF, Activity, Engine, Resource
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
    with pytest.raises(SimulationError, match="capacity must be positive"):
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


class CheckedEngine(Engine):
    """An engine that checks, after every allocation and every completion, that no resource is
    allocated above its capacity (recomputed independently from the activities' rates)."""

    checks = 0

    def _check(self) -> None:
        CheckedEngine.checks += 1
        for res in self.resources:
            total = sum(u.rate * u.demand[res] for u in res.users if u.rate < INF)
            assert total <= res.capacity * (1 + _REL), (res, total)
            assert res.allocated <= res.capacity * (1 + _REL), (res, res.allocated)
            assert res.allocated == pytest.approx(total, rel=1e-9, abs=1e-9 * res.capacity)

    def _reallocate(self) -> None:
        super()._reallocate()
        self._check()

    def _finish(self, act: Activity) -> None:
        super()._finish(act)
        self._check()


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


def _run(engine_cls: type[Engine], scenario: tuple) -> tuple[Engine, list[Resource], list]:
    capacities, specs = scenario
    engine = engine_cls()
    resources = [engine.add_resource(f"r{i}", c) for i, c in enumerate(capacities)]
    acts: list[Activity] = []

    def begin(work: float, demand: dict[Resource, float], cap: float, weight: float) -> None:
        acts.append(engine.start(work, demand, cap=cap, weight=weight))

    for start, work, demand_spec, cap, weight in specs:
        demand: dict[Resource, float] = {}
        for index, amount in demand_spec:
            demand[resources[index]] = amount
        engine.schedule(start, begin, work, demand, cap, weight)
    engine.run()
    return engine, resources, acts


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_no_resource_is_ever_allocated_above_capacity(scenario: tuple) -> None:
    before = CheckedEngine.checks
    _engine, _resources, acts = _run(CheckedEngine, scenario)
    assert CheckedEngine.checks > before
    assert all(a.finished is not None for a in acts)


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_resource_usage_is_conserved(scenario: tuple) -> None:
    _engine, resources, acts = _run(Engine, scenario)
    for res in resources:
        consumed = sum(a.consumed.get(res, 0.0) for a in acts)
        expected = sum(a.work * a.demand.get(res, 0.0) for a in acts)
        assert consumed == pytest.approx(expected, rel=1e-12)
        # The resource's own integral of its allocated rate over time agrees.
        assert res.used == pytest.approx(consumed, rel=1e-9, abs=1e-9)


@settings(max_examples=examples(100), deadline=None)
@given(_scenario)
def test_no_activity_finishes_faster_than_its_bottleneck_allows(scenario: tuple) -> None:
    _engine, _resources, acts = _run(Engine, scenario)
    for a in acts:
        bound = a.work / a.cap if a.cap < INF else 0.0
        for res, amount in a.demand.items():
            bound = max(bound, a.work * amount / res.capacity)
        assert a.finished - a.started >= bound * (1 - _REL)


@settings(max_examples=examples(60), deadline=None)
@given(st.floats(1.0, 100.0), st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.1, 50.0)),
                                       min_size=1, max_size=10))
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


@settings(max_examples=examples(40), deadline=None)
@given(_scenario)
def test_a_repeated_run_is_bit_identical(scenario: tuple) -> None:
    _e1, r1, a1 = _run(Engine, scenario)
    _e2, r2, a2 = _run(Engine, scenario)
    assert [a.finished for a in a1] == [a.finished for a in a2]
    assert [r.used for r in r1] == [r.used for r in r2]
    assert all(math.isfinite(a.finished) for a in a1)
