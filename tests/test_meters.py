"""Meters (:meth:`acesim.engine.Engine.add_resource` with ``meter=True``): a resource kept out of
the allocation while it cannot bind gives the rates, completions and integrals it gives as an
ordinary resource (:data:`acesim.engine.kernel.METERS` off), to the filling's tolerance; one that
could bind (near its capacity, or an activity's dominant resource) becomes ordinary at that
instant; an ACE collective, whose reduction units are a meter, takes the same time either way."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim.config.resolve import resolve_system
from acesim.engine import INF, Engine
from acesim.engine import kernel as engine_kernel
from acesim.simulate import simulate_collective

#: the filling counts levels within 1e-9 as equal: rates of components split apart may differ
#: by that much
_REL = 1e-9


@contextmanager
def _no_meters() -> Iterator[None]:
    """Every meter an ordinary resource (the allocation before meters)."""
    engine_kernel.METERS = False
    try:
        yield
    finally:
        engine_kernel.METERS = True


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=_REL, abs_tol=1e-12)


_activity = st.tuples(
    # start time: often one shared with others (several components reallocated at once)
    st.one_of(st.floats(0.0, 5.0), st.sampled_from([0.0, 1.0])),
    st.floats(0.1, 100.0),  # work
    st.lists(st.tuples(st.integers(0, 7), st.floats(0.5, 5.0)), min_size=1, max_size=2),
    st.lists(st.tuples(st.integers(8, 9), st.floats(0.1, 2.0)), min_size=0, max_size=2),
    st.one_of(st.just(INF), st.floats(0.5, 50.0)),  # cap
    st.sampled_from([0.5, 1.0, 2.0]),  # weight
)
_scenario = st.tuples(
    # ordinary resources: enough that activities starting together often form components
    # apart from each other
    st.lists(st.floats(1.0, 100.0), min_size=8, max_size=8),
    # the meters: ample (never binding), or small enough to bind or dominate
    st.lists(st.one_of(st.floats(1e4, 1e6), st.floats(0.5, 50.0)), min_size=2, max_size=2),
    st.lists(_activity, min_size=1, max_size=10),
    st.floats(0.0, 6.0),  # a sync (an energy window's end) at this instant
)


def _simulate(scenario: tuple) -> tuple[Any, ...]:
    capacities, meter_capacities, specs, sync_at = scenario
    engine = Engine()
    resources = [engine.add_resource(f"r{i}", c) for i, c in enumerate(capacities)]
    resources += [
        engine.add_resource(f"m{i}", c, meter=True) for i, c in enumerate(meter_capacities)
    ]
    acts = []
    synced: list[list[float]] = []

    def begin(work: float, demand: dict, cap: float, weight: float) -> None:
        acts.append(engine.start(work, demand, cap=cap, weight=weight))

    def sync() -> None:
        engine.sync()
        synced.append([r.used for r in resources])

    for start, work, links, meters, cap, weight in specs:
        demand = {resources[i]: amount for i, amount in links}
        demand.update({resources[i]: amount for i, amount in meters})
        engine.schedule(start, begin, work, demand, cap, weight)
    engine.schedule(sync_at, sync)
    end = engine.run()
    engine.sync()
    return (
        end,
        [(a.finished, a.consumed) for a in acts],
        # the integrals; not the peaks: a peak is the largest allocation at any instant, and
        # instants that move by units in the last place (the remaining work cut at other
        # instants) can make or remove a state that lasts no time at all (two finishes at
        # 3.0 and 3.0000000000000004 leave a state between them where one instant leaves
        # none); no result reports a resource's peak, and the peaks of runs whose instants
        # do not tie are checked in the tests below
        [r.used for r in resources],
        synced,
    )


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_meters_give_what_ordinary_resources_give(scenario: tuple) -> None:
    metered = _simulate(scenario)
    with _no_meters():
        ordinary = _simulate(scenario)
    assert _close(metered[0], ordinary[0])
    for (finished, consumed), (finished0, consumed0) in zip(metered[1], ordinary[1], strict=True):
        assert _close(finished, finished0)
        assert {r.name: v for r, v in consumed.items()} == pytest.approx(
            {r.name: v for r, v in consumed0.items()}, rel=1e-12
        )
    for used, used0 in zip(metered[2], ordinary[2], strict=True):
        assert _close(used, used0)
    for row, row0 in zip(metered[3], ordinary[3], strict=True):
        assert all(_close(a, b) for a, b in zip(row, row0, strict=True))


def _two_links(alu_capacity: float, work: float) -> tuple[Engine, Any, Any, Any]:
    """Links of 10 and 20 units/s, a message of 10 units on the first and one of ``work``
    units on the second, both on a meter of ``alu_capacity`` units/s; their rates settled."""
    engine = Engine()
    a, b = engine.add_resource("a", 10.0), engine.add_resource("b", 20.0)
    alu = engine.add_resource("alu", alu_capacity, meter=True)
    x = engine.start(10.0, {a: 1.0, alu: 1.0})
    y = engine.start(work, {b: 1.0, alu: 1.0})
    engine.settle()
    return engine, x, y, alu


def test_a_meter_joins_no_component_while_it_cannot_bind() -> None:
    engine, x, y, alu = _two_links(100.0, 40.0)
    assert alu.metered and x.meters == {alu: 1.0} and alu not in x.demand
    assert (x.rate, y.rate) == (10.0, 20.0)
    assert alu.allocated == 30.0
    engine.run(until=0.5)
    engine.sync()
    assert alu.used == 5.0 + 10.0  # the work done so far at each user's rate
    assert engine.run() == 2.0
    engine.sync()
    assert (alu.used, alu.peak, alu.allocated) == (50.0, 30.0, 0.0)
    assert x.consumed == {next(iter(x.demand)): 10.0, alu: 10.0}


def test_a_meter_near_its_capacity_becomes_an_ordinary_resource() -> None:
    engine, x, y, alu = _two_links(25.0, 10.0)
    assert not alu.metered and alu in x.demand and x.meters is None
    assert x.rate + y.rate == pytest.approx(25.0, rel=1e-12)  # the ALU binds them now
    end = engine.run()
    with _no_meters():
        assert _two_links(25.0, 10.0)[0].run() == end


def test_a_meter_an_activity_would_be_dominant_on_is_promoted_at_its_start() -> None:
    engine = Engine()
    link = engine.add_resource("link", 100.0)
    alu = engine.add_resource("alu", 10.0, meter=True)  # 1/10 per byte against 1/100
    act = engine.start(10.0, {link: 1.0, alu: 1.0}, weight=1.0)
    assert not alu.metered and act.demand == {link: 1.0, alu: 1.0}
    assert engine.run() == 1.0


def test_a_capacity_change_or_an_observer_promotes_a_meter() -> None:
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    alu = engine.add_resource("alu", 100.0, meter=True)
    act = engine.start(10.0, {link: 1.0, alu: 1.0})
    engine.run(until=0.5)
    engine.set_capacity(alu, 5.0)
    assert not alu.metered and alu in act.demand
    assert engine.run() == pytest.approx(0.5 + 5.0 / 5.0)
    engine.sync()
    assert alu.used == pytest.approx(10.0)
    other = Engine()
    meter = other.add_resource("m", 1.0, meter=True)
    other.observe(meter, lambda time, allocated: None)
    assert not meter.metered


def _same_with_and_without_meters(system: Any) -> None:
    """An 8 MiB all-reduce on ``system`` takes the same time with meters and without."""
    metered = simulate_collective(system, "all-reduce", 8 * 2**20)
    with _no_meters():
        ordinary = simulate_collective(system, "all-reduce", 8 * 2**20)
    assert metered.time == pytest.approx(ordinary.time, rel=_REL)
    assert metered.network_bandwidth == pytest.approx(ordinary.network_bandwidth, rel=_REL)


def _ace(alu_bandwidth: float | None = None) -> Any:
    system = resolve_system("ace-isca21")
    if alu_bandwidth is None:
        return system.with_endpoint("ace")
    return system.with_endpoint("ace", alu_bandwidth=alu_bandwidth)


@pytest.mark.parametrize("alu_bandwidth", [None, 4.5e11, 5.2e11])
def test_folds_hold_a_meter_and_give_it_up_when_it_could_bind(alu_bandwidth: float | None) -> None:
    """Rings of 16 fold their steps; an ALU of 450 GB/s binds once the local (400 GB/s) and a
    second dimension's reduce steps overlap, in the middle of folds (released, then the
    ALU an ordinary resource); one of 520 GB/s never binds but declines folds near it."""
    system = resolve_system("ace-isca21", shape=[4, 16, 16], overrides={"npu.hbm_bandwidth": 1e18})
    system = (
        system.with_endpoint("ace")
        if alu_bandwidth is None
        else system.with_endpoint("ace", alu_bandwidth=alu_bandwidth)
    )
    _same_with_and_without_meters(system)


@pytest.mark.parametrize("alu_bandwidth", [None, 2e10])
def test_an_ace_collective_takes_the_same_time_with_its_alu_a_meter(
    alu_bandwidth: float | None,
) -> None:
    """The shipped ALU (1.6 TB/s) cannot bind; one of 20 GB/s does (below a link's 50-200)."""
    system = _ace(alu_bandwidth)
    _same_with_and_without_meters(system)


def test_activities_reallocated_beside_a_promotion_get_their_rates() -> None:
    """Three messages start at once, two of them on a meter they would overload: the third,
    apart from the meter, is reallocated with them after the promotion, not left at rate 0."""
    engine = Engine()
    a, b, c = (engine.add_resource(name, 10.0) for name in "abc")
    alu = engine.add_resource("alu", 15.0, meter=True)
    engine.start(10.0, {a: 1.0, b: 1.0})  # joins the component of the two below through b
    x = engine.start(10.0, {a: 1.0, alu: 1.0})
    y = engine.start(10.0, {c: 1.0, alu: 1.0})
    lone = engine.start(10.0, {engine.add_resource("d", 10.0): 1.0})
    engine.settle()
    assert not alu.metered
    assert lone.rate == 10.0 and x.rate > 0 and y.rate > 0
    end = engine.run()
    with _no_meters():
        again = Engine()
        a0, b0, c0 = (again.add_resource(name, 10.0) for name in "abc")
        alu0 = again.add_resource("alu", 15.0, meter=True)
        again.start(10.0, {a0: 1.0, b0: 1.0})
        again.start(10.0, {a0: 1.0, alu0: 1.0})
        again.start(10.0, {c0: 1.0, alu0: 1.0})
        again.start(10.0, {again.add_resource("d", 10.0): 1.0})
        assert again.run() == pytest.approx(end, rel=_REL)
