"""Contention where it happens: a receiver's ingress (incast) and the NICs of a scale-out."""

from __future__ import annotations

import pytest

from acesim import simulate_collective
from acesim.config.resolve import resolve_system
from acesim.hardware.platform import Platform
from acesim.training.executor import GraphExecutor
from acesim.workload.graph import Graph, Node

GB = 1e9


def _switch(npus: int, bandwidth: float) -> object:
    return resolve_system(
        {
            "network": {
                "dimensions": [{"kind": "switch", "size": npus, "link_bandwidth": bandwidth}]
            },
            "collective": {"endpoint_delay": 0.0},
            "endpoint": {"kind": "ideal"},
        }
    )


def test_an_incast_of_63_senders_is_bound_by_the_receivers_ingress() -> None:
    # 63 ranks each send S bytes to rank 0 at once on a 64-NPU switch of B per NPU and direction:
    # each sender could send at B, but rank 0's ingress takes 63 S at B, so the last byte
    # arrives at 63 S / B (the link latency is 0), not at S / B.
    npus, size, bandwidth = 64, 1e8, 10 * GB
    ranks = [[Node(i, "recv", "recv", peer=i + 1, tag=0, size=size) for i in range(npus - 1)]]
    ranks += [[Node(0, "send", "send", peer=0, tag=0, size=size)] for _ in range(1, npus)]
    system = _switch(npus, bandwidth)
    ex = GraphExecutor(Platform(system, exact=True), Graph(ranks, npus=npus)).run()
    assert ex.makespan == pytest.approx((npus - 1) * size / bandwidth, rel=1e-9)


def test_one_sender_alone_runs_at_its_egress() -> None:
    npus, size, bandwidth = 4, 1e8, 10 * GB
    ranks = [[Node(0, "recv", "recv", peer=1, tag=0, size=size)]]
    ranks += [[Node(0, "send", "send", peer=0, tag=0, size=size)]] + [[] for _ in range(2)]
    ex = GraphExecutor(Platform(_switch(npus, bandwidth), exact=True), Graph(ranks, npus=npus))
    assert ex.run().makespan == pytest.approx(size / bandwidth, rel=1e-9)


def test_all_to_all_on_64_gpus_over_8_nodes_is_bound_by_the_nics() -> None:
    # h100-nvswitch-8 with --nodes 8: NVLink (18 x 25 GB/s) inside a node, one 400 Gb/s NIC
    # per GPU between nodes. The hierarchical all-to-all runs its in-node phase, then its
    # scale-out phase (the preset's chunks = 1: no pipelining across the dimensions), each at
    # its egress: the time is the two phases' bytes over their egress (plus latencies), and
    # the NICs' phase, carrying 7/8 of the data at a ninth of the bandwidth, is most of it.
    size = 1 << 30
    system = resolve_system("h100-nvswitch-8", nodes=8)
    result = simulate_collective(system, "all-to-all", size)
    nvlink, nic = system.network.dimensions
    assert nic.efficiency is not None
    in_node = result.per_dimension_bytes["nvswitch"] / (
        nvlink.link_bandwidth * nvlink.links_per_npu * system.collective.protocol_efficiency
    )
    across = result.per_dimension_bytes["scaleout"] / (
        nic.link_bandwidth * nic.links_per_npu * nic.efficiency
    )
    assert result.time == pytest.approx(in_node + across, rel=1e-3)
    assert across > 5 * in_node
    # halving the NICs nearly doubles it
    slower = resolve_system(
        "h100-nvswitch-8", nodes=8, overrides={"scale_out.link_bandwidth": "200 Gb/s"}
    )
    assert simulate_collective(slower, "all-to-all", size).time / result.time > 1.8
