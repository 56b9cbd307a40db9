"""Copy engines issuing a direct step in waves, and a switch's incast (issue 13).

The expectations are derived from the model's own terms: a step's transfer time is its bytes
over the egress capacity (divided by the incast efficiency when more writers than the switch's
``incast_fan_in`` write into each receiver at once); every step (wave) pays the engines' setup
and one message delivery (link latency plus the endpoint delay) before it completes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from systems import dim, make_system

from acesim.config.resolve import resolve_system
from acesim.errors import AcesimError, ConfigError
from acesim.hardware.endpoints import ENDPOINT_KINDS
from acesim.hardware.endpoints.copy_engine import in_waves
from acesim.network.algorithms import GATHER
from acesim.network.step import Step
from acesim.simulate import simulate_collective

MiB = 2**20
P = 16
BANDWIDTH = 100e9  # B/s, one link
LATENCY = 1e-6  # s
DELAY = 2e-6  # s, collective.endpoint_delay
SETUP = 5e-6  # s, per copy step (wave)


def _system(*, incast: float | None = None, **copy_engine: Any) -> Any:
    switch = dim("switch", P, BANDWIDTH, LATENCY)
    if incast is not None:
        switch.update(incast_fan_in=8, incast_efficiency=incast)
    base = make_system([switch], protocol_efficiency=1.0, endpoint_delay=DELAY)
    settings = {"engine_bandwidth": 1e15, "setup": SETUP, "write_hbm_bytes_per_byte": 0.0}
    settings.update(copy_engine)
    return base.with_endpoint("copy_engine", **settings)


def _transfer(size: float) -> float:
    """One NPU's all-gather bytes, (p-1)/p of the output, over its egress (s)."""
    return size * (P - 1) / P / BANDWIDTH


def test_waves_cover_every_peer_once_and_every_receiver_takes_the_wave_size() -> None:
    step = Step(1.0, "all", 0, GATHER)
    waves = in_waves(step, P, 4)
    assert [(w.pattern, w.distance, w.count) for w in waves] == [
        ("span", 1, 4),
        ("span", 5, 4),
        ("span", 9, 4),
        ("span", 13, 3),
    ]
    for c in range(P):
        sent = [d for w in waves for d in w.destinations(c, P)]
        assert sorted(sent) == [x for x in range(P) if x != c]
    for w in waves:  # anti-diagonal: every NPU is written by as many peers as it writes to
        received = Counter(d for c in range(P) for d in w.destinations(c, P))
        assert set(received.values()) == {w.message_count(P)}
    assert in_waves(step, P, 0) == [step] and in_waves(step, P, P - 1) == [step]


def test_one_batch_above_the_fan_in_runs_at_the_incast_efficiency() -> None:
    size = 64 * MiB
    clean = simulate_collective(_system(), "all-gather", size)
    lossy = simulate_collective(_system(incast=0.5), "all-gather", size)
    # the same setup and latency; the transfer takes 1 / 0.5 as long
    assert lossy.time - clean.time == pytest.approx(_transfer(size), rel=1e-9)
    assert clean.time == pytest.approx(SETUP + _transfer(size) + LATENCY + DELAY, rel=1e-9)


def test_waves_at_the_fan_in_avoid_the_loss_and_pay_a_setup_and_a_delivery_each() -> None:
    size = 64 * MiB
    waves = simulate_collective(_system(incast=0.5, wave_size=8), "all-gather", size)
    # two waves (8 and 7 copies), neither above the fan-in: no loss, two setups and deliveries
    assert waves.time == pytest.approx(2 * (SETUP + LATENCY + DELAY) + _transfer(size), rel=1e-9)
    lossy = simulate_collective(_system(incast=0.5), "all-gather", size)
    assert waves.time < lossy.time


def test_copies_submitted_one_by_one_pay_their_submission() -> None:
    size = 1 * MiB
    batched = simulate_collective(_system(command_setup=1e-6), "all-gather", size)
    single = simulate_collective(
        _system(command_setup=1e-6, batched_submission=False), "all-gather", size
    )
    assert single.time - batched.time == pytest.approx((P - 1) * 1e-6, rel=1e-9)


def test_exact_and_symmetric_modes_agree_on_waves_with_incast() -> None:
    system = _system(incast=0.5, wave_size=4)
    exact = simulate_collective(system, "all-gather", 8 * MiB, exact=True)
    symmetric = simulate_collective(system, "all-gather", 8 * MiB)
    assert exact.time == pytest.approx(symmetric.time, rel=1e-9)


def test_the_wave_sizes_are_the_kinds_variants() -> None:
    system = _system(wave_sizes=[0, 4, 8, 8])
    variants = ENDPOINT_KINDS.get("copy_engine").variants_of(system)
    assert [v.label for v in variants] == ["one batch", "waves of 4", "waves of 8"]
    times = {
        v.label: simulate_collective(
            system.with_endpoint("copy_engine", **v.changes), "all-gather", 64 * MiB
        ).time
        for v in variants
    }
    assert min(times, key=times.__getitem__) != "waves of 4"  # 4 waves pay 4 setups


def test_the_gb200_preset_searches_wave_sizes_and_waves_of_8_win_at_512_mib() -> None:
    system = resolve_system("gb200-nvl72", overrides={"network.dimensions[0].size": 64})
    variants = ENDPOINT_KINDS.get("copy_engine").variants_of(system)
    times = {
        v.label: simulate_collective(
            system.with_endpoint("copy_engine", **v.changes), "all-gather", 512 * MiB
        ).time
        for v in variants
    }
    assert min(times, key=times.__getitem__) == "waves of 8"


@pytest.mark.parametrize(
    ("dimension", "field"),
    [
        ({**dim("ring", 8), "incast_fan_in": 4}, "incast_fan_in"),
        ({**dim("switch", 8), "incast_fan_in": 0}, "incast_fan_in"),
        ({**dim("switch", 8), "incast_fan_in": 4, "incast_efficiency": 1.5}, "incast_efficiency"),
    ],
)
def test_bad_incast_settings_are_refused_by_name(dimension: dict[str, Any], field: str) -> None:
    with pytest.raises(AcesimError) as err:
        make_system([dimension])
    assert field in str(err.value)


@pytest.mark.parametrize("value", [-1, 2.5, "many"])
def test_a_bad_wave_size_is_refused_by_name(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_system("gb200-nvl72", overrides={"endpoint.copy_engine.wave_size": value})
    assert "wave_size" in str(err.value)
