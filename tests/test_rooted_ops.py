"""Broadcast, reduce (NCCL's pipelined ring chain, rooted: exact mode) and sendrecv (a shift).

Expectations come from the model's own step terms: on free links a chain of ``p`` NPUs moving
``S`` in ``k`` pieces takes ``(k + p - 2)`` piece times ``(S/k)/B`` plus ``p - 1`` message
delays ``a`` (one per hop: a position waits only for the piece it forwards), with ``B`` the
dimension's egress bandwidth and ``a`` its link latency plus ``collective.endpoint_delay``.
"""

from __future__ import annotations

import math

import pytest
from systems import dim, make_system
from systems import simulate_as_configured as simulate_collective

from acesim.config.variation import LinkChange, Variation
from acesim.errors import AcesimError, ConfigError, TopologyError
from acesim.hardware.platform import Platform
from acesim.network import vectorized
from acesim.network.algorithms import chain_steps, phase_steps
from acesim.network.ops import COLLECTIVE_OPS
from acesim.results.collective import bus_factor

MiB = 1 << 20
LATENCY = 1e-6
DELAY = 10e-9  # collective.endpoint_delay's default


def _system(kind: str = "switch", p: int = 8, piece: int = MiB, **collective: object):
    return make_system([dim(kind, p, 100e9, LATENCY)], chain_piece_bytes=piece, **collective)


def _chain_time(size: float, p: int, piece: float, bandwidth: float, a: float) -> float:
    k = max(1, math.ceil(size / piece))
    return (k + p - 2) * (size / k) / bandwidth + (p - 1) * a


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize(("size", "p"), [(8 * MiB, 8), (3 * MiB + 5, 5), (256 * 1024, 8)])
def test_chain_takes_k_plus_p_minus_2_piece_times_and_one_delay_per_hop(
    op: str, size: int, p: int
) -> None:
    cfg = _system(p=p)
    bandwidth = Platform(cfg).topology.dimensions[0].egress_bandwidth
    r = simulate_collective(cfg, op, size, exact=True)
    assert r.time == pytest.approx(_chain_time(size, p, MiB, bandwidth, LATENCY + DELAY), rel=1e-12)
    # every member but the chain's last sends the whole buffer once
    assert r.bytes_sent_per_npu == pytest.approx(size * (p - 1) / p, rel=1e-12)
    assert r.busbw == r.algbw  # nccl-tests: broadcast_perf / reduce_perf busbw = algbw


def test_chain_steps_are_k_plus_p_minus_2_and_rooted() -> None:
    steps = chain_steps("broadcast", 8, 8 * MiB, MiB)
    assert len(steps) == 8 + 8 - 2
    assert {s.message_bytes for s in steps} == {MiB}
    first = steps[0]
    # step 0: only the root sends (to 1); only 1 receives
    assert first.destinations(0, 8) == [1]
    assert all(first.destinations(c, 8) == [] for c in range(1, 8))
    assert [first.arrivals(c, 8) for c in range(8)] == [0, 1, 0, 0, 0, 0, 0, 0]
    # the last member of the chain never sends; the root never receives
    assert all(s.destinations(7, 8) == [] for s in steps)
    assert all(s.arrivals(0, 8) == 0 for s in steps)
    # a reduce's chain starts after the root and ends at it
    reduce = chain_steps("reduce", 8, MiB, MiB)
    assert reduce[0].destinations(1, 8) == [2] and reduce[-1].destinations(0, 8) == []
    assert reduce[-1].arrivals(0, 8) == 1
    # the planner hands collective.chain_piece_bytes to the ring's chain
    assert len(phase_steps("broadcast", "ring", 8, 8 * MiB, 2 * MiB)) == 4 + 8 - 2


def test_chain_on_a_ring_dimension_and_with_several_chunks() -> None:
    cfg = _system("ring", p=4)
    bandwidth = Platform(cfg).topology.dimensions[0].egress_bandwidth
    r = simulate_collective(cfg, "broadcast", 4 * MiB, exact=True)
    assert r.time == pytest.approx(_chain_time(4 * MiB, 4, MiB, bandwidth, LATENCY + DELAY))
    # two runtime chunks of two pieces each pipeline back to back: the same chain of 4 pieces
    two = simulate_collective(_system("ring", p=4, chunks=2), "broadcast", 4 * MiB, exact=True)
    assert two.time == pytest.approx(r.time, rel=1e-12)


def test_root_is_the_chain_start_a_slow_last_member_costs_nothing() -> None:
    cfg = _system(p=4)
    slow = Variation(links=(LinkChange(dim=0, rank=2, bandwidth=10e9),))
    times = {
        root: simulate_collective(
            cfg, "broadcast", 4 * MiB, exact=True, root=root, variation=slow
        ).time
        for root in range(4)
    }
    fair = simulate_collective(cfg, "broadcast", 4 * MiB, exact=True).time
    # root 3: chain 3, 0, 1, 2: rank 2 only receives, its slow egress is never used
    assert times[3] == pytest.approx(fair, rel=1e-12)
    assert all(times[r] > 2 * fair for r in (0, 1, 2))
    # a reduce's root only receives: root 2 leaves rank 2's egress idle
    red = simulate_collective(cfg, "reduce", 4 * MiB, exact=True, root=2, variation=slow).time
    assert red == pytest.approx(fair, rel=1e-12)


def test_sendrecv_is_one_shift_symmetric_and_exact_agree() -> None:
    cfg = _system(p=8)
    bandwidth = Platform(cfg).topology.dimensions[0].egress_bandwidth
    sym = simulate_collective(cfg, "sendrecv", 64 * MiB)
    exact = simulate_collective(cfg, "sendrecv", 64 * MiB, exact=True)
    assert sym.time == pytest.approx(64 * MiB / bandwidth + LATENCY + DELAY, rel=1e-12)
    assert exact.time == sym.time and exact.busbw == sym.busbw == sym.algbw
    assert sym.bytes_sent_per_npu == 64 * MiB
    vectorized.ENABLED = False
    try:
        events = simulate_collective(cfg, "sendrecv", 64 * MiB, exact=True)
    finally:
        vectorized.ENABLED = True
    assert events.time == exact.time  # the vectorized exact path runs the shift identically


def test_vectorized_path_declines_the_chain() -> None:
    platform = Platform(_system(p=8), exact=True)
    why = vectorized.run_alone(platform.collectives, "broadcast", 8 * MiB)
    assert why == "step pattern chain is not taught to the lockstep backend"
    assert not isinstance(vectorized.run_alone(platform.collectives, "sendrecv", 8 * MiB), str)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_rooted_ops_asked_in_symmetric_mode_run_exact_and_say_why(op: str) -> None:
    switched = simulate_collective(_system(), op, MiB)
    assert switched.mode == "exact"
    assert switched.mode_note.startswith("exact mode (every NPU simulated): " + op)
    assert switched.time == simulate_collective(_system(), op, MiB, exact=True).time


def test_sendrecv_across_dimensions_is_a_routed_shift_in_exact_mode() -> None:
    cfg = make_system([dim("switch", 4, 100e9, 1e-6), dim("switch", 2, 25e9, 5e-6)])
    topo = Platform(cfg).topology
    fast, slow = (d.egress_bandwidth for d in topo.dimensions)
    size = 64 * MiB
    r = simulate_collective(cfg, "sendrecv", size, exact=True)
    # the last member of each inner line sends to the first of the next line: one hop on the
    # inner dimension, then one on the outer; nothing else contends with it
    assert r.time == pytest.approx(
        size / fast + size / slow + (1e-6 + DELAY) + (5e-6 + DELAY), rel=1e-12
    )
    # every member's message takes the inner hop; one in four also the outer one
    assert r.per_dimension_bytes == {"local": size, "vertical": size / 4}
    assert r.busbw == r.algbw
    switched = simulate_collective(cfg, "sendrecv", size)  # symmetric mode cannot: exact mode
    assert switched.mode == "exact" and "sendrecv" in switched.mode_note
    assert switched.time == r.time
    platform = Platform(cfg, exact=True)
    why = vectorized.run_alone(platform.collectives, "sendrecv", size)
    assert why == "no chunk phases (a routed point-to-point shift)"


def test_rooted_ops_refuse_groups_over_several_dimensions() -> None:
    cfg = make_system([dim("switch", 4), dim("switch", 2)], chain_piece_bytes=MiB)
    for op in ("broadcast", "reduce"):
        with pytest.raises(TopologyError, match=f"{op} runs on a group along one dimension"):
            simulate_collective(cfg, op, MiB, exact=True)
    # ... but run on one of its dimensions
    assert simulate_collective(cfg, "broadcast", MiB, exact=True, dims=(0,)).time > 0


@pytest.mark.parametrize("root", [-1, 8, 9, True, 1.5])
def test_bad_roots_are_one_line_errors(root: object) -> None:
    with pytest.raises(ConfigError) as info:
        simulate_collective(_system(), "broadcast", MiB, exact=True, root=root)  # type: ignore[arg-type]
    assert info.value.field == "root" and "0 to 7" in str(info.value)


def test_a_root_for_an_op_without_one_and_unknown_ops_are_refused() -> None:
    with pytest.raises(ConfigError, match="all-reduce takes no root"):
        simulate_collective(_system(), "all-reduce", MiB, root=1)
    with pytest.raises(AcesimError, match="broadcast"):  # did you mean
        simulate_collective(_system(), "bcast", MiB, exact=True)


def test_registry_conventions() -> None:
    for op in ("broadcast", "reduce", "sendrecv"):
        assert bus_factor(op, 8) == 1.0 and bus_factor(op, 1) == 0.0
    assert COLLECTIVE_OPS.get("broadcast").rooted and not COLLECTIVE_OPS.get("broadcast").symmetric
    assert COLLECTIVE_OPS.get("sendrecv").symmetric and not COLLECTIVE_OPS.get("sendrecv").rooted


def test_tuner_forcing_and_protocols() -> None:
    forced = _system(algorithm="nvls")
    with pytest.raises(ConfigError, match="nvls cannot run broadcast"):
        simulate_collective(forced, "broadcast", MiB, exact=True)
    with pytest.raises(ConfigError, match="ring cannot run sendrecv"):
        simulate_collective(_system(algorithm="ring"), "sendrecv", MiB)
    # the ring's NCCL protocols apply to its chain (NCCL runs broadcast/reduce on its ring)
    protocols = {
        "ring": {
            "LL": {"bandwidth": 0.5, "hop_latency": 0.5e-6},
            "Simple": {"bandwidth": 1.0, "hop_latency": 2e-6, "base_latency": 5e-6},
        }
    }
    cfg = _system(p=4, protocols=protocols)
    small = simulate_collective(cfg, "broadcast", 4096, exact=True)
    large = simulate_collective(cfg, "broadcast", 64 * MiB, exact=True)
    assert (small.protocol, large.protocol) == ("LL", "Simple")
    bandwidth = Platform(cfg).topology.dimensions[0].egress_bandwidth
    assert small.time == pytest.approx(
        _chain_time(4096, 4, MiB, bandwidth * 0.5, LATENCY + 0.5e-6), rel=1e-12
    )
    assert large.time == pytest.approx(
        5e-6 + _chain_time(64 * MiB, 4, MiB, bandwidth, LATENCY + 2e-6), rel=1e-12
    )


def test_the_tuner_predicts_the_chain_it_simulates() -> None:
    protocols = {
        "ring": {
            "LL": {"bandwidth": 0.5, "hop_latency": 0.5e-6},
            "LL128": {"bandwidth": 0.9, "hop_latency": 1e-6},
            "Simple": {"bandwidth": 1.0, "hop_latency": 2e-6, "base_latency": 5e-6},
        }
    }
    cfg = _system(p=8, protocols=protocols)
    platform = Platform(cfg, exact=True)
    for size in (4096, 3 * MiB, 64 * MiB):
        _axes, _chunks, choice = platform.collectives.choose("broadcast", size)
        predicted = dict(choice.protocol.predicted)
        for name, time in predicted.items():
            forced = _system(p=8, protocols=protocols, protocol=name)
            simulated = simulate_collective(forced, "broadcast", size, exact=True).time
            assert time == pytest.approx(simulated, rel=1e-9), (size, name)
