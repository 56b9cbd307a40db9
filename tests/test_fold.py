"""Identical ring steps run in closed form (acesim.network.fold) equal the event path: the
same completion instants to the last bit, the same byte counts and resource integrals (up to
the order of additions where chunk runs overlap), whenever anything else interrupts them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from collective_figures import run_figures
from hypothesis import given, settings
from systems import examples
from test_collectives import scenarios

from acesim.config import SystemConfig, load_system
from acesim.hardware.platform import Platform
from acesim.network import collective as collective_module

REL = 1e-12  # sums of the same terms in another order: a few units in the last place


@pytest.fixture
def no_fold() -> Iterator[None]:
    collective_module.FOLD = False
    try:
        yield
    finally:
        collective_module.FOLD = True


def _run(
    system: SystemConfig,
    work: list[tuple[str, float]],
    *,
    fold: bool,
    kernel_at: float | None = None,
) -> dict[str, object]:
    """Issue ``work`` together (and a memory-bound kernel on every NPU at ``kernel_at`` s);
    every figure the run leaves."""
    collective_module.FOLD = fold
    try:
        return run_figures(system, work, kernel_at)
    finally:
        collective_module.FOLD = True


def _assert_same(folded: dict[str, object], events: dict[str, object]) -> None:
    assert folded["end"] == events["end"]
    assert folded["durations"] == events["durations"]
    assert folded["kernel_end"] == events["kernel_end"]
    assert folded["peak"] == events["peak"]
    for key in ("sent", "received"):
        assert folded[key] == pytest.approx(events[key], rel=REL)
    for got, want in zip(folded["per_dim"], events["per_dim"], strict=True):  # type: ignore[call-overload]
        assert got == pytest.approx(want, rel=REL)
    assert folded["used"] == pytest.approx(events["used"], rel=REL, abs=1e-300)


def _ring(npus: int, endpoint: str = "baseline") -> SystemConfig:
    """ace-isca21 cut down to one ring of ``npus`` NPUs."""
    system = load_system("ace-isca21").model_copy(deep=True)
    system.network.dimensions = system.network.dimensions[:1]
    system.network.dimensions[0].size = npus
    system.network.npus = None
    return system.with_endpoint(endpoint)


@settings(max_examples=examples(40), deadline=None)
@given(scenarios())
def test_folded_steps_equal_the_event_path_on_random_systems(
    scenario: tuple[SystemConfig, list[tuple[str, float]]],
) -> None:
    system, work = scenario
    _assert_same(_run(system, work, fold=True), _run(system, work, fold=False))


@pytest.mark.parametrize("endpoint", ["baseline", "ace", "ideal"])
def test_a_lone_ring_folds_into_few_events_at_the_same_instants(endpoint: str) -> None:
    system = _ring(64, endpoint)
    work = [("all-reduce", 64 * 2**20)]
    folded, events = _run(system, work, fold=True), _run(system, work, fold=False)
    _assert_same(folded, events)
    assert folded["events"] < events["events"] / 10  # type: ignore[operator]


def test_a_kernel_arriving_at_any_instant_materialises_the_fold_exactly() -> None:
    """A memory-bound kernel launched at instants across the ring (step starts, last bytes
    out, deliveries and between) takes HBM from the folded messages: the run goes on from
    the state the events would have left, to the same instants."""
    system = _ring(16)
    work = [("all-reduce", 4 * 2**20)]
    alone = _run(system, work, fold=False)
    span = alone["end"]
    assert isinstance(span, float)
    instants = [span * k / 37 for k in range(1, 37)]
    for at in instants:
        folded = _run(system, work, fold=True, kernel_at=at)
        events = _run(system, work, fold=False, kernel_at=at)
        _assert_same(folded, events)
        assert events["end"] > 0


def test_the_switch_turns_folding_off(no_fold: None) -> None:
    system = _ring(16)
    platform = Platform(system)
    platform.collectives.issue("all-reduce", 2**20)
    platform.engine.run()
    # without folding every step is a completion and a delivery: two events a step
    assert platform.engine.events_processed >= 2 * 2 * 15
