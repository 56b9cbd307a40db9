"""The allocator's scratch state (issue 27, stop 56): the filling, the component search and the
engine's rate application keep their per-resource sums and marks on the resources and
activities rather than in dictionaries, and the filling keeps each activity's dominant share
between fillings. Checked here against the dictionary-based filling they replaced (kept below
as the oracle), call after call on the same objects, and through capacity changes; and the
agreed orders' shortcut (only the phase a line wants next is checked) against the full scan."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim.engine import INF, Activity, Engine, Resource
from acesim.engine.fluid import CAP, component, max_min_rates, solo_rate
from acesim.network.agreement import LineOrders

_EPS = 1e-9


def _oracle(activities: list[Activity]) -> tuple[dict[Activity, float], dict[Activity, Any]]:
    """The weighted max-min filling as it was written before (dictionaries keyed by resource
    and activity, the same arithmetic in the same order): the rates, and what bound each."""
    rates: dict[Activity, float] = {}
    bound: dict[Activity, Any] = {}
    residual: dict[Resource, float] = {}
    share = _shares(activities, residual)
    unfrozen = activities
    while unfrozen:
        best, load, saturated = _level(unfrozen, share, residual)
        if best == INF:
            for act in unfrozen:
                rates[act], bound[act] = INF, None
            break
        limit = best * (1 + _EPS)
        still = []
        for act in unfrozen:
            freeze = act.cap < INF and act.cap / share[act] <= limit
            freeze = freeze or any(a > 0 and r in saturated for r, a in act.demand.items())
            if freeze:
                rates[act] = min(share[act] * best, act.cap)
                bound[act] = _why(act, share[act] * best, saturated)
                for res, amount in act.demand.items():
                    residual[res] -= rates[act] * amount
            else:
                still.append(act)
        if len(still) == len(unfrozen):
            for act in still:
                rates[act] = share[act] * best
                bound[act] = _why(act, share[act] * best, saturated)
            break
        unfrozen = still
    return rates, bound


def _shares(activities: list[Activity], residual: dict[Resource, float]) -> dict[Activity, float]:
    """Each activity's weight per unit of rate (the oracle's), every resource's residual set
    to its capacity."""
    share: dict[Activity, float] = {}
    for act in activities:
        dominant = 0.0
        for res, amount in act.demand.items():
            residual[res] = res.capacity
            if amount > 0 and res.capacity != INF:
                dominant = max(dominant, amount / res.capacity)
        basis = act.basis
        if basis is not None and basis.capacity != INF and act.demand.get(basis, 0.0) > 0:
            dominant = act.demand[basis] / basis.capacity
        share[act] = act.weight if dominant <= 1e-300 else act.weight / dominant
    return share


def _level(
    unfrozen: list[Activity], share: dict[Activity, float], residual: dict[Resource, float]
) -> tuple[float, dict[Resource, float], set[Resource]]:
    """The oracle's fill level of a round, the loads and the resources saturated at it."""
    best = INF
    load: dict[Resource, float] = {}
    for act in unfrozen:
        for res, amount in act.demand.items():
            if amount > 0:
                load[res] = load.get(res, 0.0) + share[act] * amount
        if act.cap < INF:
            best = min(best, act.cap / share[act])
    bottlenecks: list[Resource] = []
    for res, weighted in load.items():
        if res.capacity == INF:
            continue
        level = _spare(residual[res]) / weighted
        if level == INF:
            continue
        if level < best * (1 - _EPS):
            best, bottlenecks = level, [res]
        elif level <= best * (1 + _EPS):
            bottlenecks.append(res)
    limit = best * (1 + _EPS)
    saturated = {r for r in bottlenecks if load[r] > 0 and _spare(residual[r]) / load[r] <= limit}
    return best, load, saturated


def _spare(residual: float) -> float:
    return residual if residual > 0.0 else 0.0


def _why(act: Activity, level_rate: float, saturated: set[Resource]) -> Any:
    resource = next((r for r, a in act.demand.items() if a > 0 and r in saturated), None)
    if resource is not None and not act.cap < level_rate * (1 - 1e-9):
        return resource
    return CAP if act.cap < INF else resource


_spec = st.tuples(
    # amounts as the engine's start leaves them: none below 1e-300 (rounding residue) but 0
    st.lists(
        st.tuples(st.integers(0, 5), st.one_of(st.just(0.0), st.floats(1e-3, 5.0))),
        min_size=1,
        max_size=4,
    ),
    st.one_of(st.just(INF), st.floats(0.5, 50.0)),  # cap
    st.sampled_from([0.5, 1.0, 2.0, 3.0]),  # weight
    st.one_of(st.none(), st.integers(0, 5)),  # basis
)
_problem = st.tuples(
    st.lists(
        st.one_of(st.just(INF), st.floats(1.0, 100.0), st.sampled_from([10.0, 20.0])),
        min_size=6,
        max_size=6,
    ),
    st.lists(_spec, min_size=1, max_size=10),
)


def _activities(problem: tuple) -> tuple[list[Resource], list[Activity]]:
    capacities, specs = problem
    resources = [Resource(f"r{i}", c, i) for i, c in enumerate(capacities)]
    acts = []
    for seq, (demand_spec, cap, weight, basis) in enumerate(specs):
        demand = {resources[i]: amount for i, amount in demand_spec}
        act = Activity(1.0, demand, cap, weight, None, None, seq)
        act.basis = resources[basis] if basis is not None else None
        act.track = "kernel"  # what bound it is set
        for res in demand:
            res.users[act] = None
        acts.append(act)
    return resources, acts


def _same(a: float, b: float) -> bool:
    return float(a).hex() == float(b).hex()  # bit for bit (0.0 and -0.0 differ)


@settings(max_examples=examples(300), deadline=None)
@given(_problem)
def test_the_filling_is_the_dictionary_filling_bit_for_bit_call_after_call(
    problem: tuple,
) -> None:
    _, acts = _activities(problem)
    expected, bound = _oracle(acts)
    for _ in range(2):  # the second call finds the first one's scratch and dominant shares
        rates = max_min_rates(acts)
        assert list(rates) == [a for a in expected]
        for act in acts:
            assert _same(rates[act], expected[act])
            assert act.bound_now is bound[act]
        if len(acts) == 1:
            assert _same(solo_rate(acts[0]), expected[acts[0]])


@settings(max_examples=examples(100), deadline=None)
@given(_problem)
def test_a_component_is_the_same_from_its_users_or_from_their_resources(
    problem: tuple,
) -> None:
    resources, acts = _activities(problem)
    for res in resources:
        users = list(res.users)
        if not users:
            continue
        by_users = component(users)
        assert by_users == component([], [res]) == component(users, [res])
        assert [a.seq for a in by_users] == sorted(a.seq for a in by_users)
        # everything reached shares a resource with something reached, and nothing else does
        reached = set(by_users)
        for act in acts:
            touches = any(u in reached for r in act.demand for u in r.users if len(r.users) > 1)
            assert (act in reached) == (act in users or touches)


def test_a_capacity_change_makes_the_filling_find_the_dominant_shares_again() -> None:
    """Activity a takes 1 of r1 and 2 of r2 per unit, b 1 of r1. With both at 10/s, a's
    dominant share is r2's (0.2): shares 5 and 10 on r1, rates 10/3 and 20/3. Once r2 has
    100/s, a's dominant share is r1's (0.1): equal shares, 5 and 5. A dominant share kept from
    before the change would keep the old rates."""
    engine = Engine()
    r1 = engine.add_resource("r1", 10.0)
    r2 = engine.add_resource("r2", 10.0)
    a = engine.start(1e3, {r1: 1.0, r2: 2.0})
    b = engine.start(1e3, {r1: 1.0})
    engine.settle()
    assert a.rate == pytest.approx(10 / 3) and b.rate == pytest.approx(20 / 3)
    engine.schedule(1.0, engine.set_capacity, r2, 100.0)
    engine.run(until=1.5)
    assert a.rate == pytest.approx(5.0) and b.rate == pytest.approx(5.0)


def test_a_finished_activity_consumed_its_work_times_its_demand() -> None:
    engine = Engine()
    r1 = engine.add_resource("r1", 3.0)
    r2 = engine.add_resource("r2", 7.0)
    act = engine.start(0.1, {r1: 3.0, r2: 0.7})
    engine.run()
    assert act.finished is not None
    assert act.consumed == {r1: 0.1 * 3.0, r2: 0.1 * 0.7}


def _straggler_run() -> str:
    from acesim.results.jsonout import dumps
    from acesim.runs import run_system

    result, _ = run_system(
        "ace-isca21",
        "resnet50",
        npus=16,
        iterations=1,
        warmup=0,
        mode="exact",
        stragglers=[{"rank": 3, "slowdown": 1.5}],
        max_messages=10**9,
    )
    return str(dumps(result.to_dict()))


def test_the_agreed_orders_shortcut_admits_what_the_full_scan_admits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exact run with a straggler (ranks run ahead of it, queues many phases deep, the
    agreed lines holding most of them back): the same result document when every admission
    scans the whole queue in order, and the shortcut was taken."""
    taken = 0
    wanted = LineOrders._wanted

    def counted(self: LineOrders, *args: Any) -> Any:
        nonlocal taken
        taken += 1
        return wanted(self, *args)

    monkeypatch.setattr(LineOrders, "_wanted", counted)
    shortcut = _straggler_run()
    assert taken > 0
    monkeypatch.setattr(
        LineOrders, "_wanted", lambda self, waiting, line, item: self._first_admissible(waiting)
    )
    full = _straggler_run()
    assert json.loads(shortcut) == json.loads(full)
    assert shortcut == full


@pytest.mark.parametrize("count", [2, 5, 16, 17, 40])
def test_a_component_found_out_of_start_order_comes_in_start_order(count: int) -> None:
    """A chain of activities (each shares a resource with the next) searched from its last:
    found last to first, returned first to last, below and above the insertion sort's size."""
    engine = Engine()
    links = [engine.add_resource(f"r{i}", 1.0) for i in range(count + 1)]
    chain = [engine.start(1.0, {links[i]: 1.0, links[i + 1]: 1.0}) for i in range(count)]
    found = component([chain[-1]])
    assert found == chain
    assert component(list(reversed(chain)), [links[0]]) == chain
