"""Per-step endpoint hooks: a plug-in endpoint kind that holds compute units and pays a setup
latency for every step of every chunk.

The kind (``held_steps``), defined here: ``step_begin`` acquires ``K`` of the NPU's ``U`` compute
units, then waits ``setup`` before the step sends; ``step_end`` releases the units. It charges no
HBM or engine byte, so a collective's messages cost what the ideal endpoint's do.

Closed forms (one chunk, ring all-reduce on ``p`` NPUs, ``n = 2(p-1)`` steps of
``a + S/(pB)``): the collective takes ``T = n (setup + a + S/(pB))``, the ideal time plus
``n * setup``. The units are held from the first step's start to the last step's end (a step's
end releases them and the next step's start takes them back at the same instant), so the pool
integrates ``K T`` unit-seconds. A compute-bound kernel of ``T0`` on all ``U`` units runs at
``(U-K)/U`` of its speed while they are held: if it outlasts the collective it has done
``T (U-K)/(U T0)`` of its work by ``T`` and finishes at ``T0 + T K/U``; if not, it takes
``T0 U/(U-K)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import Field
from systems import dim

from acesim import simulate_collective
from acesim.config import SystemConfig, system_from_dict
from acesim.config.quantities import Seconds
from acesim.config.system import Strict
from acesim.errors import ConfigError
from acesim.hardware.endpoints import (
    ENDPOINT_KINDS,
    EndpointContext,
    EndpointKind,
    register_endpoint,
    unregister_endpoint,
)
from acesim.hardware.platform import Platform
from acesim.network.endpoint import Endpoint
from acesim.runs import compare
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

MiB = 2**20
REL = 1e-9  # floating-point slack only
NAME = "held_steps"

U, F_UNIT = 80, 1e12  # compute units, FLOP/s per unit
K, SETUP = 20, 3e-6  # units held per step, setup latency per step (s)
P, BW, LAT, DELAY = 4, 100e9, 1e-6, 10e-9
A = LAT + DELAY
S = 8 * MiB
STEPS = 2 * (P - 1)  # ring all-reduce


class HeldStepsSettings(Strict):
    """Units held and setup latency paid by every step."""

    units: int = Field(K, description="compute units a step holds")
    setup: Seconds = Field(SETUP, description="setup latency before a step sends, s")


class HeldStepsEndpoint(Endpoint):
    """Holds ``units`` compute units during every step, after a ``setup`` latency."""

    name = NAME

    def __init__(self, ctx: EndpointContext):
        self.engine = ctx.engine
        self.npus = ctx.npus
        self.cfg: HeldStepsSettings = ctx.settings
        self.steps = 0

    def step_begin(
        self, rank: int, kind: str, proceed: Callable[[], None], messages: int = 1
    ) -> None:
        def held() -> None:
            self.steps += 1
            self.engine.schedule(self.cfg.setup, proceed)

        self.npus[rank].units.acquire(self.cfg.units, held)

    def step_end(self, rank: int, kind: str) -> None:
        self.npus[rank].units.release(self.cfg.units)


def _check(settings: HeldStepsSettings, system: SystemConfig) -> None:
    if settings.units >= system.npu.compute_units:
        raise ConfigError(
            f"endpoint.{NAME}.units",
            f"must be fewer than npu.compute_units ({system.npu.compute_units}), "
            f"got {settings.units}",
        )


KIND = EndpointKind(
    name=NAME,
    label="held steps",
    summary="every step holds compute units and pays a setup latency (test kind)",
    settings=HeldStepsSettings,
    build=HeldStepsEndpoint,
    check=_check,
)


@pytest.fixture(autouse=True)
def held_steps_kind() -> Iterator[EndpointKind]:
    register_endpoint(KIND)
    try:
        yield KIND
    finally:
        unregister_endpoint(NAME)


def system(**settings: Any) -> SystemConfig:
    return system_from_dict(
        {
            "name": "step-hooks",
            "npu": {
                "compute_units": U,
                "matrix_flops": {"fp32": U * F_UNIT},
                "vector_flops": U * F_UNIT,
                "hbm_bandwidth": 900e9,
            },
            "network": {"dimensions": [dim("switch", P, BW, LAT)]},
            "collective": {"chunks": 1, "endpoint_delay": DELAY},
            "endpoint": {"kind": NAME, NAME: settings},
        }
    )


def ideal_time(size: float = S) -> float:
    return STEPS * (A + size / P / BW)


def held_time(size: float = S, setup: float = SETUP) -> float:
    return ideal_time(size) + STEPS * setup


# -- (a) the collective alone -----------------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
def test_a_collective_pays_the_setup_latency_once_per_step(exact: bool) -> None:
    result = simulate_collective(system(), "all-reduce", S, exact=exact)
    assert result.endpoint == NAME
    assert result.time == pytest.approx(held_time(), rel=REL)
    ideal = simulate_collective(system(), "all-reduce", S, endpoint="ideal", exact=exact)
    assert ideal.time == pytest.approx(ideal_time(), rel=REL)
    assert result.time - ideal.time == pytest.approx(STEPS * SETUP, rel=1e-6)
    # no byte is charged to the endpoint
    assert result.hbm_bytes_per_npu == 0.0


def test_settings_come_from_the_endpoint_table() -> None:
    result = simulate_collective(system(setup="10 us"), "all-gather", S)
    assert result.time == pytest.approx((P - 1) * (10e-6 + A + S / P / BW), rel=REL)
    cfg = system(units=5)
    assert cfg.endpoint.of(HeldStepsSettings).units == 5
    with pytest.raises(ConfigError, match=f"endpoint.{NAME}.units: must be fewer than"):
        system(units=U)


def test_the_endpoint_sees_every_step_of_every_chunk() -> None:
    cfg = system()
    cfg.collective.chunks = 3
    platform = Platform(cfg, exact=True)
    coll = platform.collectives.issue("all-reduce", S)
    platform.engine.run()
    endpoint = platform.endpoint
    assert isinstance(endpoint, HeldStepsEndpoint)
    assert endpoint.steps == P * 3 * STEPS  # ranks x chunks x steps
    # one chunk in flight per dimension: the chunks run back to back
    assert coll.duration == pytest.approx(3 * held_time(S / 3), rel=REL)


def test_a_step_waiting_for_units_is_not_completed_by_a_peer_message() -> None:
    """Regression: rank 0's units are all taken until ``T``, so its first step waits in
    ``step_begin`` while rank 1's first message arrives; the step must still send.

    Two ranks, two ring steps, ``u = (S/2)/B``: rank 1 has sent step 0 at ``s``; rank 0 gets
    its units at ``T`` and completes step 0 at ``T+s+u`` (rank 1's message is there), step 1 at
    ``T+2(s+u+a)`` once rank 1 (which got rank 0's step 0 at ``T+s+u+a``) has sent its step 1;
    rank 1 completes a latency earlier.
    """
    cfg = system()
    cfg.network.dimensions[0].size = 2
    platform = Platform(cfg, exact=True)
    engine, pool = platform.engine, platform.npus[0].units
    late = 1e-3
    pool.acquire(U, lambda: None)
    engine.schedule(late, pool.release, U)
    coll = platform.collectives.issue("all-reduce", S)
    engine.run()
    u = S / 2 / BW
    assert coll.rank_finished[0] == pytest.approx(late + 2 * (SETUP + u + A), rel=REL)
    assert coll.rank_finished[1] == pytest.approx(late + 2 * (SETUP + u + A) - A, rel=REL)
    assert coll.bytes_sent == coll.bytes_received == 2 * 2 * S / 2  # ranks x steps x S/2
    for npu in platform.npus:
        assert npu.units.held == 0.0
    engine.sync()
    assert pool.held_time == pytest.approx(U * late + K * 2 * (SETUP + u + A), rel=REL)


# -- (b) a compute kernel alongside -----------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
def test_a_kernel_that_outlasts_the_collective_loses_k_over_u_of_its_time(exact: bool) -> None:
    t = held_time()
    t0 = 3 * t  # alone on all U units
    flops = t0 * U * F_UNIT
    result = simulate_collective(system(), "all-reduce", S, exact=exact, compute=(flops, 0.0))
    assert result.compute is not None
    assert result.compute["kernel_time_alone"] == pytest.approx(t0, rel=1e-12)
    assert result.compute["kernel_time"] == pytest.approx(t0 + t * K / U, rel=REL)
    assert result.compute["kernel_slowdown"] == pytest.approx(1 + t * K / (U * t0), rel=REL)
    # the collective needs nothing the kernel has
    assert result.time == pytest.approx(t, rel=REL)
    assert result.compute["collective_slowdown"] == pytest.approx(1.0, rel=REL)


def test_a_kernel_inside_the_collective_runs_on_the_free_units() -> None:
    t = held_time()
    t0 = t / 4  # done while the units are held
    result = simulate_collective(system(), "all-reduce", S, compute=(t0 * U * F_UNIT, 0.0))
    assert result.compute is not None
    assert result.compute["kernel_time"] == pytest.approx(t0 * U / (U - K), rel=REL)


# -- (c) the pool's integral ------------------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
def test_the_units_are_held_for_the_whole_collective(exact: bool) -> None:
    platform = Platform(system(), exact=exact)
    coll = platform.collectives.issue("all-reduce", S)
    platform.engine.run()
    platform.engine.sync()
    assert coll.duration == pytest.approx(held_time(), rel=REL)
    for npu in platform.npus:
        assert npu.units.held == 0.0
        assert npu.units.peak == K
        assert npu.units.held_time == pytest.approx(K * coll.duration, rel=REL)


def test_units_held_by_a_later_collective_count_only_while_it_runs() -> None:
    platform = Platform(system())
    engine = platform.engine
    start = 1e-3
    colls: list[Any] = []
    engine.schedule(start, lambda: colls.append(platform.collectives.issue("all-reduce", S)))
    engine.run()
    assert colls[0].finished == pytest.approx(start + held_time(), rel=REL)
    engine.run(until=2 * engine.now)  # nothing held afterwards: the integral stays
    engine.sync()
    assert platform.npus[0].units.held_time == pytest.approx(K * held_time(), rel=REL)


# -- (d) in a comparison ----------------------------------------------------------------------


def test_a_comparison_includes_the_plug_in_kind_with_a_speedup() -> None:
    # Zero compute: an iteration is its one all-reduce, so iteration times are collective times.
    layer = Layer("g", weight_grad=Pass(Compute(), Comm("all-reduce", S)))
    workload = Workload("one-all-reduce", (layer,))
    cfg = system()
    comparison = compare(cfg, workload, endpoints=[NAME])
    assert list(comparison.endpoints) == ["baseline", NAME]
    assert comparison.endpoints[NAME].label == "held steps"
    ours = comparison.best(NAME)
    assert ours.iteration_time == pytest.approx(held_time(), rel=REL)
    baseline = simulate_collective(cfg, "all-reduce", S, endpoint="baseline").time
    assert comparison.best_baseline.iteration_time == pytest.approx(baseline, rel=REL)
    assert comparison.speedup(NAME) == pytest.approx(baseline / held_time(), rel=REL)
    assert comparison.to_dict()["endpoints"][NAME]["speedup"] == comparison.speedup(NAME)


def test_the_kind_is_withdrawn_after_the_test(held_steps_kind: EndpointKind) -> None:
    assert NAME in ENDPOINT_KINDS
    unregister_endpoint(NAME)
    assert NAME not in ENDPOINT_KINDS
    with pytest.raises(ConfigError, match="endpoint.kind: must be one of"):
        system()
    register_endpoint(held_steps_kind)  # the fixture's teardown unregisters it again
