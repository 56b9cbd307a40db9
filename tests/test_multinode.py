"""Collectives across nodes as NCCL runs them: the flat ring (NVLink in the node, each GPU's
NIC between nodes), the tree between nodes, network step latencies, and the tuner's choice."""

from __future__ import annotations

import math

import pytest
from systems import simulate_as_configured as simulate_collective

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.errors import AcesimError, ConfigError

GIB = 2**30


def h100(nodes: int, **overrides: object) -> object:
    return resolve_system("h100-nvswitch-8", nodes=nodes, overrides=overrides or None)


def test_scale_out_dimension_is_a_network_dimension() -> None:
    s = resolve_system("h100-nvswitch-8", nodes=2)
    assert [d.network for d in s.network.dimensions] == [False, True]


def test_flat_ring_is_bound_by_the_nics_of_the_node() -> None:
    # 16 nodes x 8 GPUs, one NIC each: a flat ring crosses each node boundary once per
    # channel, so every GPU's NIC carries 1/8 of each step's bytes and the busbw is the
    # node's 8 NICs (not one NIC, as the hierarchical phases run one after another give).
    # no protocol loss on NVLink, so the NICs bind (at the preset's 0.7525 the NVLink share of
    # each step, 7/8 of its bytes on 450 GB/s, takes about as long as the NIC's eighth)
    s = h100(16, **{"collective.algorithm": "flat_ring", "collective.protocol_efficiency": 1.0})
    r = simulate_collective(s, "all-reduce", 8 * GIB, endpoint="ideal")
    out = s.scale_out
    assert out is not None and out.efficiency is not None
    nic = out.link_bandwidth * out.links_per_npu * out.efficiency
    assert r.algorithm == "flat_ring"
    assert r.protocol == "Simple"
    n, nodes = 128, 16
    moved = 2 * (n - 1) / n * 8 * GIB
    simple = s.collective.protocols["ring"]["Simple"]
    nvl, net = s.network.dimensions
    assert simple.net_hop_latency is not None
    inner = nvl.link_latency + simple.hop_latency
    outer = net.link_latency + simple.net_hop_latency
    latency = simple.base_latency + 2 * (n - 1) * inner + 2 * nodes * (outer - inner)
    assert r.time == pytest.approx(latency + moved / 8 / nic, rel=1e-3)
    assert r.busbw > 0.95 * 8 * nic
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(moved / 8)
    assert r.per_dimension_bytes["nvswitch"] == pytest.approx(moved * 7 / 8)
    hier = simulate_collective(
        h100(16, **{"collective.algorithm": "ring"}), "all-reduce", 8 * GIB, endpoint="ideal"
    )
    assert r.busbw > 1.5 * hier.busbw


def test_tuner_picks_the_tree_small_and_nvls_tree_large() -> None:
    # as NCCL on H100 nodes: the tree (LL) for small buffers, NVLS_TREE for large ones (its
    # NICs carry the tree's 2 S/G, about what the flat ring's carry, 2 (n-1)/n S/G, its
    # NVLinks less than the ring's). At 8 GiB the flat ring's 1% fewer NIC bytes win only
    # where its NVLink share does not bind: at the A100's fitted ring efficiency (0.776), not
    # at the H100's transferred 0.7525, where 7/8 of each step's bytes on NVLink take about as
    # long as the NIC's eighth and NVLS_TREE stays ahead
    s = h100(16)
    small = simulate_collective(s, "all-reduce", "64 KiB")
    large = simulate_collective(s, "all-reduce", GIB)
    assert small.algorithm == "double_binary_tree" and small.protocol == "LL"
    assert large.algorithm == "nvls_tree"
    assert simulate_collective(s, "all-reduce", 8 * GIB).algorithm == "nvls_tree"
    a100_ring = h100(16, **{"collective.protocol_efficiency": 0.776})
    assert simulate_collective(a100_ring, "all-reduce", 8 * GIB).algorithm == "flat_ring"
    # on one node neither can run: the ring or NVLS, as before
    one = simulate_collective(h100(1), "all-reduce", 8 * GIB)
    assert one.algorithm == "nvls"


def test_flat_ring_latency_counts_its_node_crossings() -> None:
    # A tiny forced flat ring with Simple: NCCL's base latency, 2(n-1) steps at the NVLink
    # delay and 2N crossings paying the network delay instead (plan.crossing_latency).
    s = h100(4, **{"collective.algorithm": "flat_ring", "collective.protocol": "Simple"})
    r = simulate_collective(s, "all-reduce", 8, endpoint="ideal")
    simple = s.collective.protocols["ring"]["Simple"]
    nvl, net = s.network.dimensions
    assert simple.net_hop_latency is not None
    inner = nvl.link_latency + simple.hop_latency
    outer = net.link_latency + simple.net_hop_latency
    n, nodes = 32, 4
    expected = simple.base_latency + 2 * (n - 1) * inner + 2 * nodes * (outer - inner)
    assert r.time == pytest.approx(expected, rel=1e-3)


def test_flat_ring_exact_equals_symmetric() -> None:
    s = h100(2, **{"collective.algorithm": "flat_ring"})
    for op in ("all-reduce", "all-gather", "reduce-scatter"):
        sym = simulate_collective(s, op, "8 MiB")
        exact = simulate_collective(s, op, "8 MiB", exact=True)
        assert math.isclose(sym.time, exact.time, rel_tol=1e-9)
        assert sym.algorithm == exact.algorithm == "flat_ring"


def test_hierarchical_steps_across_nodes_pay_network_latency() -> None:
    s = h100(2, **{"collective.algorithm": "ring", "collective.protocol": "LL"})
    r = simulate_collective(s, "all-reduce", 8, endpoint="ideal")
    ll = s.collective.protocols["ring"]["LL"]
    nvl, net = s.network.dimensions
    assert ll.net_hop_latency is not None
    # ring reduce-scatter (7) and all-gather (7) in the node, all-reduce of 2 steps across
    expected = (
        ll.base_latency
        + 14 * (nvl.link_latency + ll.hop_latency)
        + 2 * (net.link_latency + ll.net_hop_latency)
    )
    assert r.time == pytest.approx(expected, rel=1e-3)


def test_flat_ring_on_one_node_is_refused_in_one_line() -> None:
    s = h100(1, **{"collective.algorithm": "flat_ring"})
    with pytest.raises(ConfigError) as err:
        simulate_collective(s, "all-reduce", "1 MiB")
    assert "two or more dimensions" in str(err.value)
    assert "\n" not in str(err.value)


def test_flat_ring_per_dimension_is_refused() -> None:
    with pytest.raises(AcesimError) as err:
        simulate_collective(
            resolve_system(
                "h100-nvswitch-8", overrides={"collective.algorithms": {"all-gather": "flat_ring"}}
            ),
            "all-gather",
            "1 MiB",
        )
    assert "not per dimension" in str(err.value)


def test_gpus_sharing_a_nic_get_their_share() -> None:
    # four NICs for eight GPUs (npus_per_link = 2): each GPU's NIC share halves, and the
    # NIC-bound flat ring with it (no protocol loss on NVLink, so the NICs bind)
    lossless = {"collective.protocol_efficiency": 1.0, "collective.algorithm": "flat_ring"}
    full = simulate_collective(h100(2, **lossless), "all-reduce", 8 * GIB, endpoint="ideal")
    shared = simulate_collective(
        h100(2, **lossless, **{"scale_out.npus_per_link": 2}),
        "all-reduce",
        8 * GIB,
        endpoint="ideal",
    )
    assert full.algorithm == shared.algorithm == "flat_ring"
    assert shared.busbw == pytest.approx(full.busbw / 2, rel=0.01)
    # and an all-to-all over the nodes' NICs only (one GPU per node) likewise
    a2a = [
        simulate_collective(h100(8, **ov), "all-to-all", "64 MiB", dims=(1,), endpoint="ideal")
        for ov in ({}, {"scale_out.npus_per_link": 2})
    ]
    assert a2a[1].time == pytest.approx(2 * a2a[0].time, rel=0.02)


def test_npus_per_link_must_be_a_positive_whole_number() -> None:
    with pytest.raises(ConfigError) as err:
        h100(2, **{"scale_out.npus_per_link": 0})
    assert "npus_per_link" in str(err.value)
    assert "\n" not in str(err.value)


def _leafy(nodes: int, leaf: int, ratio: float) -> object:
    return h100(nodes, **{"scale_out.leaf_size": leaf, "scale_out.oversubscription": ratio})


def test_all_to_all_between_leaves_is_bound_by_the_oversubscribed_spine() -> None:
    # 8 nodes, 4 under each leaf, 2:1: of a GPU's all-to-all over the NICs, the half bound for
    # the other leaf (4 of 8 pieces) shares its leaf's uplinks, half its NIC's bandwidth each
    s = _leafy(8, 4, 2.0)
    r = simulate_collective(s, "all-to-all", "64 MiB", dims=(1,), endpoint="ideal", exact=True)
    out = s.scale_out
    assert out is not None and out.efficiency is not None
    nic = out.link_bandwidth * out.efficiency
    wire = (4 / 8) * 64 * 2**20 / (nic / 2)
    assert wire < r.time < wire * 1.02
    flat = simulate_collective(
        h100(8), "all-to-all", "64 MiB", dims=(1,), endpoint="ideal", exact=True
    )
    assert r.time > 1.1 * flat.time


def test_a_ring_loads_the_spine_only_past_the_leaf_size() -> None:
    # a flat ring crosses each leaf boundary with one flow per rail: a 2:1 spine under leaves
    # of 4 nodes does not slow it, a 4:1 spine under leaves of 2 does (exact mode)
    def ring(s: object) -> float:
        return simulate_collective(s, "all-reduce", "64 MiB", endpoint="ideal", exact=True).time

    free = ring(h100(8))
    assert ring(_leafy(8, 4, 2.0)) == pytest.approx(free, rel=1e-9)
    assert ring(_leafy(8, 2, 4.0)) > 1.1 * free


def test_an_oversubscribed_spine_asked_in_symmetric_mode_runs_exact() -> None:
    switched = simulate_collective(_leafy(8, 4, 2.0), "all-reduce", "64 MiB")
    assert switched.mode == "exact" and "leaf/spine" in switched.mode_note
    # within one leaf there is no spine to cross: symmetric mode runs
    assert simulate_collective(_leafy(4, 4, 2.0), "all-reduce", "64 MiB").mode == "symmetric"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"scale_out.oversubscription": 2.0}, "oversubscription"),
        ({"scale_out.leaf_size": 3}, "leaf_size"),
        ({"scale_out.leaf_size": 2, "scale_out.oversubscription": 0.5}, "oversubscription"),
    ],
)
def test_leaf_spine_settings_are_checked(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        h100(8, **overrides)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_flat_ring_feels_one_ranks_slower_nic_in_exact_mode() -> None:
    from acesim.config.variation import LinkChange, Variation

    s = h100(2, **{"collective.algorithm": "flat_ring"})

    def run(**change: float) -> float:
        v = Variation(links=(LinkChange(dim=1, rank=3, **change),)) if change else None
        return simulate_collective(
            s, "all-reduce", "64 MiB", exact=True, endpoint="ideal", variation=v
        ).time

    base = run()
    assert run(latency=3e-6) == base  # the dimension's own latency: nothing changes
    assert run(latency=20e-6) > base + 100e-6
    assert run(bandwidth=25e9) > 1.3 * base


def test_a_one_dimension_leaf_spine_network_takes_its_spine() -> None:
    # 8 NPUs on one switch dimension, leaves of 2, 4:1: 6 of a GPU's 8 all-to-all pieces go
    # to other leaves at a quarter of its link (exact mode's event path, not the vectorized)
    s = SystemConfig.model_validate(
        {
            "network": {
                "dimensions": [
                    {
                        "kind": "switch",
                        "size": 8,
                        "link_bandwidth": 50e9,
                        "leaf_size": 2,
                        "oversubscription": 4.0,
                    }
                ]
            }
        }
    )
    r = simulate_collective(s, "all-to-all", "64 MiB", exact=True, endpoint="ideal")
    wire = (6 / 8) * 64 * 2**20 / (50e9 / 4)
    assert wire < r.time < 1.02 * wire
