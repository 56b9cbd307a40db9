"""The engine's fast paths, for an activity alone on its resources
(:data:`acesim.engine.kernel.SOLO_PATH`, :func:`acesim.engine.fluid.solo_rate`) and a component
whose filling inputs were seen before (:data:`acesim.engine.kernel.FILL_MEMO`), give what the
general component and max-min filling give, to the last bit: on random activity sets (rates,
events, integrals, what bound each tracked activity) and on 50 LLM training iterations drawn
over models, parallelisms, schedules, systems and endpoints (every reported figure)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_draws import SCHEDULES, SYSTEMS, finish_draw, resolving, small_models
from systems import examples

from acesim.engine import INF, Activity, Engine, Resource
from acesim.engine import kernel as engine_kernel
from acesim.runs.llm import run_llm


@contextmanager
def _general_path() -> Iterator[None]:
    """Every reallocation through the general component and filling (the path before the
    fast one)."""
    engine_kernel.SOLO_PATH = False
    engine_kernel.FILL_MEMO = False
    try:
        yield
    finally:
        engine_kernel.SOLO_PATH = True
        engine_kernel.FILL_MEMO = True


class _Segments:
    """A bound listener that keeps every call it hears, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def opened(self, kind: str, time: float) -> None:
        self.calls.append(("opened", kind, time))

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None:
        name = bound.name if isinstance(bound, Resource) else bound
        self.calls.append(("segment", kind, name, start, end))

    def closed(self, kind: str, time: float) -> None:
        self.calls.append(("closed", kind, time))


_activity = st.tuples(
    st.floats(0.0, 5.0),  # start time
    st.floats(0.1, 100.0),  # work
    st.lists(st.tuples(st.integers(0, 5), st.floats(0.1, 5.0)), min_size=0, max_size=3),
    st.one_of(st.just(INF), st.floats(0.5, 50.0)),  # cap
    st.sampled_from([0.5, 1.0, 2.0, 3.0]),  # weight
    st.booleans(),  # the first resource is its basis
    st.one_of(st.none(), st.tuples(st.floats(0.0, 5.0), st.floats(0.5, 50.0))),  # cap change
)
_scenario = st.tuples(
    # capacities: two infinite ones among them (uncapped activities finish at once)
    st.lists(st.one_of(st.floats(1.0, 100.0), st.just(INF)), min_size=6, max_size=6),
    st.lists(_activity, min_size=1, max_size=10),
    # capacity changes: (time, resource, capacity)
    st.lists(st.tuples(st.floats(0.0, 5.0), st.integers(0, 5), st.floats(1.0, 100.0)), max_size=2),
)


def _simulate(scenario: tuple) -> tuple[Any, ...]:
    """Everything the engine computes for ``scenario``, in a comparable form."""
    capacities, specs, changes = scenario
    engine = Engine()
    listener = _Segments()
    engine.add_bound_listener(listener)
    resources = [engine.add_resource(f"r{i}", c) for i, c in enumerate(capacities)]
    acts: list[Activity] = []
    allocations: list[tuple[str, float, float]] = []
    for res in resources:
        engine.observe(res, lambda t, a, name=res.name: allocations.append((name, t, a)))

    def begin(work: float, demand: dict[Resource, float], spec: tuple) -> None:
        cap, weight, basis, change = spec
        act = engine.start(
            work,
            demand,
            cap=cap,
            weight=weight,
            basis=next(iter(demand)) if basis and demand else None,
            track="kernel",
        )
        acts.append(act)
        if change is not None:
            engine.schedule(change[0], engine.set_cap, act, change[1])

    for start, work, demand_spec, cap, weight, basis, change in specs:
        demand = {resources[index]: amount for index, amount in demand_spec}
        engine.schedule(start, begin, work, demand, (cap, weight, basis, change))
    for time, index, capacity in changes:
        engine.schedule(time, engine.set_capacity, resources[index], capacity)
    end = engine.run()
    return (
        end,
        engine.events_processed,
        [(a.finished, a.rate, tuple(a.consumed.values())) for a in acts],
        [(r.used, r.peak, r.allocated) for r in resources],
        allocations,
        listener.calls,
    )


@settings(max_examples=examples(150), deadline=None)
@given(_scenario)
def test_the_solo_path_computes_what_the_general_path_computes(scenario: tuple) -> None:
    fast = _simulate(scenario)
    with _general_path():
        full = _simulate(scenario)
    assert fast == full


def _pair_on_a_link() -> tuple[Engine, Resource, Callable[[], None], list[tuple[float, float]]]:
    """An engine with a link of 10 units/s and ``pair()``, which starts two activities of
    weights 1 and 3 on it and notes their rates in the list returned."""
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    rates: list[tuple[float, float]] = []

    def pair() -> None:
        a = engine.start(10.0, {link: 1.0}, weight=1.0)
        b = engine.start(10.0, {link: 1.0}, weight=3.0)
        engine.settle()
        rates.append((a.rate, b.rate))

    return engine, link, pair, rates


def test_a_remembered_filling_is_forgotten_when_a_capacity_changes() -> None:
    engine, link, pair, rates = _pair_on_a_link()
    engine.schedule(0.0, pair)
    engine.schedule(10.0, pair)  # the same component: remembered
    engine.schedule(20.0, engine.set_capacity, link, 20.0)
    engine.schedule(20.0, pair)  # the same inputs but the capacity
    engine.run()
    assert rates == [(2.5, 7.5), (2.5, 7.5), (5.0, 15.0)]


def test_forgotten_fillings_are_computed_again_alike() -> None:
    """``Engine.forget_fills`` (a run's end: freed at once, not by the collector) empties the
    memory; the same component later gets the same rates; a run ends with it empty."""
    engine, _link, pair, rates = _pair_on_a_link()
    engine.schedule(0.0, pair)
    engine.run()
    assert engine._fills
    engine.forget_fills()
    assert engine._fills == {}
    engine.schedule(10.0, pair)
    engine.run()
    assert rates == [(2.5, 7.5), (2.5, 7.5)]
    from acesim.runs.kinds import make_run_case
    from acesim.runs.single import execute

    _result, execution = execute(make_run_case("ace-isca21", "resnet50", {"npus": 8}))
    assert execution.platform.engine._fills == {}


def test_a_compacted_heap_pops_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap's stale entries dropped as often as can be (``Engine._compact`` after every
    reallocation that leaves more entries than active activities): every figure the same, an
    exact all-reduce with a slow link and training runs alike."""
    from acesim.config import load_system
    from acesim.config.variation import LinkChange, Variation
    from acesim.runs.kinds import make_run_case
    from acesim.runs.single import execute
    from acesim.simulate import simulate_collective

    system = load_system("ace-isca21")
    slow = Variation(links=(LinkChange(dim=0, rank=3, bandwidth=12.5e9),))

    def runs() -> list[Any]:
        lone = simulate_collective(
            system, "all-reduce", 4 * 2**20, endpoint="baseline", variation=slow
        )
        symmetric = make_run_case(system, "resnet50", {"npus": 16})
        exact = make_run_case(system.with_endpoint("ace"), "resnet50", {"npus": 8, "mode": "exact"})
        return [lone.to_dict()] + [execute(case)[0].to_dict() for case in (symmetric, exact)]

    as_usual = runs()
    monkeypatch.setattr(engine_kernel, "HEAP_SLACK", 1)
    monkeypatch.setattr(engine_kernel, "HEAP_FLOOR", 0)
    assert runs() == as_usual


def test_compacting_drops_the_stale_entries_only() -> None:
    """Superseded completions and cancelled events leave the heap; the rest run as before."""
    engine = Engine()
    link = engine.add_resource("link", 10.0)
    done: list[tuple[str, float]] = []
    first = engine.start(10.0, {link: 1.0}, lambda _a: done.append(("first", engine.now)))
    engine.settle()
    for k in range(5):  # each start re-rates the first: its earlier completions go stale
        engine.start(1.0, {link: 1.0}, lambda _a, k=k: done.append((f"short{k}", engine.now)))
        engine.settle()
    cancelled = engine.schedule_at(0.5, lambda: done.append(("cancelled", engine.now)))
    cancelled.cancel()
    before = len(engine._heap)
    engine._compact()
    assert len(engine._heap) == 6 < before  # the first's last completion, the five shorts
    engine.run()
    assert [name for name, _t in done] == [f"short{k}" for k in range(5)] + ["first"]
    assert first.finished == engine.now


# -- LLM iterations drawn over configurations -------------------------------------------------

#: small transformers, dense and MoE
_MODELS = small_models(4)


def _draw(rng: random.Random) -> tuple[Any, ...]:
    """One configuration: model, system, nodes, parallel string, global batch, endpoint."""
    model = rng.choice(_MODELS)
    system = rng.choice(SYSTEMS)
    nodes = rng.choice([1, 1, 2])
    tp = rng.choice([1, 2, 4])
    pp = rng.choice([1, 2, 2, 4])
    parts = [f"tp={tp}", f"pp={pp}"]
    if pp == 2 and rng.random() < 0.5:
        parts.append("vpp=2")
    elif pp > 1:
        kind = rng.choice(SCHEDULES)
        if kind:
            parts.append(f"schedule={kind}")
    # a micro-batch or two per stage
    return finish_draw(rng, model, system, nodes, tp, pp, parts, [1, 2])


def _cases(count: int) -> Iterator[Any]:
    """``count`` drawn configurations that resolve (a seeded draw: the same every run)."""
    return resolving(_draw, count, 27)


def _figures(case: Any) -> dict[str, Any]:
    result, execution = run_llm(case)
    data = result.to_dict()
    data.pop("provenance", None)
    records = [[(r.start, r.end) for r in ranks.values()] for ranks in execution.records]
    return {
        "result": data,
        "records": records,
        "events": execution.platform.engine.events_processed,
    }


@pytest.mark.parametrize("index", range(50))
def test_llm_iterations_equal_the_general_path(index: int, drawn: list[Any]) -> None:
    case = drawn[index]
    fast = _figures(case)
    with _general_path():
        full = _figures(case)
    assert fast["result"]["iteration_time"] == full["result"]["iteration_time"]
    assert fast == full


@pytest.fixture(scope="module")
def drawn() -> list[Any]:
    return list(_cases(50))
