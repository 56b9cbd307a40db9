"""In-network reduction across nodes: NCCL's NVLS_TREE (``nvls_tree``: NVLS in the node, a
pipelined double binary tree between nodes) and CollNet with SHARP (``collnet``: the scale-out
switches reduce). Closed forms from the model's own terms, the tuner's offers and refusals."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from clitools import cli_error
from systems import make_system
from systems import simulate_as_configured as simulate_collective
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.errors import AcesimError, ConfigError
from acesim.hardware.platform import Platform
from acesim.network import vectorized
from acesim.network.group import resolve
from acesim.network.plan import choose_algorithm
from acesim.network.topology import Topology

GIB = 2**30
MIB = 2**20


def h100(nodes: int, **overrides: object) -> SystemConfig:
    return resolve_system("h100-nvswitch-8", nodes=nodes, overrides=overrides or None)


def sharp(nodes: int, **overrides: object) -> SystemConfig:
    """The h100 preset on ``nodes`` nodes whose scale-out switches reduce (SHARP on)."""
    return h100(nodes, **{"scale_out.switch_reduction": True, **overrides})


def _nic(s: SystemConfig) -> float:
    net = s.network.dimensions[-1]
    assert net.efficiency is not None
    return net.link_bandwidth * net.links_per_npu * net.efficiency / net.npus_per_link


def _nvls_pipeline(s: SystemConfig, size: float, chunk: float, loops: int) -> float:
    """What NCCL's NVLS kernel's loops add beyond the NVLS bytes' time (plan docstring), s."""
    c = s.collective
    nvl = s.network.dimensions[0]
    assert c.nvls_efficiency is not None and c.nvls_stages is not None
    g = nvl.size
    per_byte = (g + 1) / g / (nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency)
    stage = c.nvls_loop_latency + g * chunk * c.nvls_channels * per_byte
    return (loops + c.nvls_stages - 1) * stage - size * per_byte


def test_two_node_nvls_tree_sends_the_slice_once_and_pipelines_its_parts() -> None:
    # 2 DGX H100 nodes, 1 GiB, ideal endpoint. NCCL's NVLS_TREE on two nodes: each GPU's NIC
    # carries its S/8 slice's tree, 0.5 S/8 up and 0.5 S/8 down (each node is the other's
    # parent in one of the two trees), S/8 in all; the node's links carry NVLS's load-reduce
    # (S) and multicast (S/8). Pipelined, as NCCL's kernel runs them: the busier of the two,
    # not their sum, plus the path's latency (NCCL 2.19.3: intraLat + 2 log2i(N) interLat)
    # and the NVLS loops.
    s = h100(2, **{"collective.algorithm": "nvls_tree"})
    size = float(GIB)
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "nvls_tree" and r.protocol == "Simple"
    c = s.collective
    proto = c.protocols["nvls_tree"]["Simple"]
    nvl, net = s.network.dimensions
    assert c.nvls_efficiency is not None and proto.net_hop_latency is not None
    g = 8
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(size / g)
    assert r.per_dimension_bytes["nvswitch"] == pytest.approx(size * (g + 1) / g)
    b_n = nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency
    nvlink = size * (g + 1) / g / b_n
    nic = size / g / _nic(s)
    assert nic < nvlink  # two nodes: NVLink-bound
    intra = nvl.link_latency + proto.hop_latency
    inter = net.link_latency + proto.net_hop_latency
    path = intra + 2 * 1 * inter
    # NCCL 2.18.5's NVLS_TREE chunk for 1 GiB over 16 channels x 8 heads: 256 KiB, 32 loops
    pipeline = _nvls_pipeline(s, size, 256 * 1024, 32)
    expected = proto.base_latency + path + max(nvlink, nic) + pipeline
    assert r.time == pytest.approx(expected, rel=1e-9)
    serial = proto.base_latency + path + nvlink + nic + pipeline
    assert r.time < serial - 0.9 * nic  # not the phases one after the other


def test_nvls_tree_on_sixteen_nodes_is_bound_by_the_nics_twice_the_slice() -> None:
    # 16 nodes: the busiest node of the double binary tree sends its slice up twice and down
    # twice (NCCL 2.19.3's bwInter / 2), 2 S/8 through each NIC; 2 log2i(16) = 8 tree hops
    s = h100(16, **{"collective.algorithm": "nvls_tree"})
    size = float(GIB)
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    c = s.collective
    proto = c.protocols["nvls_tree"]["Simple"]
    nvl, net = s.network.dimensions
    assert c.nvls_efficiency is not None and proto.net_hop_latency is not None
    g = 8
    b_n = nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency
    nic = 2 * size / g / _nic(s)
    assert nic > size * (g + 1) / g / b_n  # NIC-bound
    path = (nvl.link_latency + proto.hop_latency) + 8 * (net.link_latency + proto.net_hop_latency)
    pipeline = _nvls_pipeline(s, size, 256 * 1024, 32)
    assert r.time == pytest.approx(proto.base_latency + path + nic + pipeline, rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(2 * size / g)
    assert r.bound == "link scaleout"


@pytest.mark.parametrize("nodes", [2, 16])
def test_tree_over_nodes_is_a_chain_and_a_tree_at_once(nodes: int) -> None:
    # NCCL's TREE: a chain through the node's 8 GPUs (2 (G-1)/G S over each GPU's NVLinks,
    # as a ring's reduce-scatter and all-gather) and the nodes' double binary tree of each
    # GPU's S/8 (S/8 through each NIC on two nodes, 2 S/8 from four), pipelined
    # (runTreeSplit); latency NCCL 2.19.3's 2 ((G-1) intraLat + log2i(N) interLat) plus the
    # link latencies; Simple at the tree's 0.92
    s = h100(
        nodes, **{"collective.algorithm": "double_binary_tree", "collective.protocol": "Simple"}
    )
    size = 256.0 * MIB
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "double_binary_tree"
    proto = s.collective.protocols["double_binary_tree"]["Simple"]
    nvl, net = s.network.dimensions
    assert proto.net_hop_latency is not None
    g = 8
    tree = 1.0 if nodes == 2 else 2.0
    b_nvl = nvl.links_per_npu * nvl.link_bandwidth * s.collective.protocol_efficiency
    nvlink = 2 * (g - 1) / g * size / (b_nvl * proto.bandwidth)
    nic = tree * size / g / (_nic(s) * proto.bandwidth)
    intra = nvl.link_latency + proto.hop_latency
    inter = net.link_latency + proto.net_hop_latency
    levels = {2: 1, 16: 4}[nodes]
    path = 2 * ((g - 1) * intra + levels * inter)
    assert r.time == pytest.approx(proto.base_latency + path + max(nvlink, nic), rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(tree * size / g)
    assert r.per_dimension_bytes["nvswitch"] == pytest.approx(2 * (g - 1) / g * size)


def test_nvls_tree_holds_the_nvls_channels() -> None:
    # NCCL runs NVLS_TREE on its NVLS channels (nvlsChannels, 16 SMs), not the ring's 24
    s = h100(2, **{"collective.algorithm": "nvls_tree"})
    r = simulate_collective(s, "all-reduce", 64 * MIB)
    assert r.comm_units == s.endpoint.settings("baseline").nvls_units == 16


def test_collnet_moves_each_byte_through_the_nic_once_each_way() -> None:
    # One GPU per node (the network dimension alone), 16 nodes, SHARP: the all-reduce takes
    # one network step, a + S / B_nic, so its algbw is the NIC's bandwidth and its busbw
    # 2(N-1)/N of that; a ring moves 2(N-1)/N S through the NIC, busbw at most B_nic.
    s = sharp(16, **{"collective.algorithm": "collnet"})
    r = simulate_collective(s, "all-reduce", GIB, dims=(1,), endpoint="ideal")
    assert r.algorithm == "collnet" and r.protocol == "Simple"
    proto = s.collective.protocols["collnet"]["Simple"]
    net = s.network.dimensions[1]
    assert proto.net_hop_latency is not None
    b_nic, n = _nic(s), 16
    time = net.link_latency + proto.net_hop_latency + GIB / b_nic
    assert r.time == pytest.approx(time)
    assert r.algbw == pytest.approx(GIB / time, rel=1e-9)
    assert r.busbw == pytest.approx(2 * (n - 1) / n * GIB / time, rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(GIB)
    ring = simulate_collective(
        h100(16, **{"collective.algorithm": "ring"}), "all-reduce", GIB, dims=(1,), endpoint="ideal"
    )
    assert ring.busbw < b_nic < r.busbw


def test_collnet_over_nodes_is_pipelined_collnet_direct() -> None:
    # 2 nodes x 8 GPUs, SHARP on: NCCL's CollNet Direct, the node's direct scatter and gather
    # ((G-1)/G S each over the NVLinks) and each GPU's S/8 into the switches and back over its
    # NIC, at once; latency NCCL 2.19.3's 2 (min(1, G-1) intraLat + 0.4 us (G-1)) + interLat
    s = sharp(2, **{"collective.algorithm": "collnet"})
    size = 256.0 * MIB
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "collnet" and r.protocol == "Simple"
    coll = s.collective.protocols["collnet"]["Simple"]
    nvl, net = s.network.dimensions
    assert coll.net_hop_latency is not None
    b_nvl = nvl.links_per_npu * nvl.link_bandwidth * s.collective.protocol_efficiency
    g = 8
    intra = nvl.link_latency + coll.hop_latency
    inter = net.link_latency + coll.net_hop_latency
    path = 2 * (intra + 0.4e-6 * (g - 1)) + inter
    moved = max(2 * (g - 1) / g * size / b_nvl, size / g / _nic(s))
    assert r.time == pytest.approx(coll.base_latency + path + moved, rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(size / g)


def _choice(s: SystemConfig, size: float) -> tuple[str | None, dict[str, float]]:
    topo = Topology(s.network, s.collective)
    axes = resolve(topo, None)
    choice = choose_algorithm(s.collective, topo, "all-reduce", size, axes, 1)
    return choice.algorithm, dict(choice.predicted)


def test_the_tuner_offers_each_where_it_can_run() -> None:
    for size in (64 * 1024, 16 * MIB, GIB):
        chosen, predicted = _choice(h100(16), size)
        # NVSwitch reduces, the scale-out switches do not (the preset's default)
        assert "nvls_tree" in predicted and "collnet" not in predicted
        assert "nvls" not in predicted  # NVLS alone does not run across nodes
        assert chosen == min(predicted, key=lambda k: predicted[k])
        chosen, predicted = _choice(sharp(16), size)
        assert {"nvls_tree", "collnet", "nvls"} <= set(predicted)  # NVLS with SHARP too
        assert chosen == min(predicted, key=lambda k: predicted[k])
    # on one node neither runs; a node switch that does not reduce (A100) has no nvls_tree
    _, predicted = _choice(h100(1), 16 * MIB)
    assert "nvls_tree" not in predicted and "collnet" not in predicted
    a100 = resolve_system(
        "a100-nvswitch-8",
        nodes=2,
        overrides={"collective.choices": {"all-reduce": ["ring", "nvls_tree", "collnet"]}},
    )
    _, predicted = _choice(a100, 16 * MIB)
    assert set(predicted) == {"ring"}


def test_the_tuner_runs_its_pick() -> None:
    # what the tuner predicts fastest is what the collective runs, forced or not
    s = sharp(16)
    for size in (MIB, 64 * MIB):
        chosen, _ = _choice(s, size)
        assert simulate_collective(s, "all-reduce", size).algorithm == chosen


@pytest.mark.parametrize(
    ("system", "algorithm", "words"),
    [
        (lambda: h100(1), "nvls_tree", "needs a group over nodes"),
        (
            lambda: resolve_system("a100-nvswitch-8", nodes=2),
            "nvls_tree",
            "needs a node switch that reduces",
        ),
        (lambda: h100(16), "collnet", "switch_reduction = true on [scale_out]"),
        (lambda: sharp(1), "collnet", "needs a group over nodes"),
        (lambda: h100(2), "nvls", "only where the scale-out switches reduce"),
    ],
)
def test_a_forced_algorithm_that_cannot_run_says_why_in_one_line(
    system: Callable[[], SystemConfig], algorithm: str, words: str
) -> None:
    s = system()
    forced = s.model_copy(
        update={"collective": s.collective.model_copy(update={"algorithm": algorithm})}
    )
    with pytest.raises(ConfigError) as err:
        simulate_collective(forced, "all-reduce", MIB)
    text = str(err.value)
    assert words in text and algorithm in text and "\n" not in text


def test_each_reduces_only_on_its_own_fabric() -> None:
    node = {"kind": "switch", "size": 4, "link_bandwidth": 100e9, "switch_reduction": True}
    nics = {**node, "network": True}
    collnet_in_node = make_system([node], algorithms={"all-reduce": "collnet"})
    with pytest.raises(AcesimError) as err:
        simulate_collective(collnet_in_node, "all-reduce", MIB)
    assert "scale-out network dimension" in str(err.value) and "\n" not in str(err.value)
    nvls_on_nics = make_system([nics], algorithms={"all-reduce": "nvls"})
    with pytest.raises(AcesimError) as err:
        simulate_collective(nvls_on_nics, "all-reduce", MIB)
    assert "node's switch" in str(err.value) and "\n" not in str(err.value)
    per_dimension = make_system([node, nics], algorithms={"all-reduce": "nvls_tree"})
    with pytest.raises(AcesimError) as err:
        simulate_collective(per_dimension, "all-reduce", MIB)
    assert "not per dimension" in str(err.value)


def test_only_simple_is_configurable_for_them() -> None:
    for algorithm in ("nvls_tree", "collnet"):
        with pytest.raises(ConfigError) as err:
            h100(
                2, **{f"collective.protocols.{algorithm}.LL": {"bandwidth": 0.5, "hop_latency": 0}}
            )
        assert "must be one of Simple" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("algorithm", "sharp_on"), [("nvls_tree", False), ("collnet", True)])
def test_exact_equals_symmetric(algorithm: str, sharp_on: bool) -> None:
    s = h100(2, **{"collective.algorithm": algorithm, "scale_out.switch_reduction": sharp_on})
    sym = simulate_collective(s, "all-reduce", 8 * MIB)
    exact = simulate_collective(s, "all-reduce", 8 * MIB, exact=True)
    assert sym.algorithm == exact.algorithm == algorithm
    assert math.isclose(sym.time, exact.time, rel_tol=1e-9)


def _plain(algorithm: str) -> SystemConfig:
    """4 NPUs on a reducing node switch x 4 nodes on reducing network switches, no NCCL
    protocols (what the vectorized path may run)."""
    node = {
        "kind": "switch",
        "size": 4,
        "link_bandwidth": 100e9,
        "link_latency": 1e-6,
        "switch_reduction": True,
    }
    nics = {
        "kind": "switch",
        "size": 4,
        "link_bandwidth": 25e9,
        "link_latency": 3e-6,
        "switch_reduction": True,
        "network": True,
    }
    return make_system([node, nics], algorithm=algorithm, endpoint_delay=1e-6)


def test_vectorized_declines_the_pipelined_phases_and_agrees() -> None:
    # over a node axis and a network axis both run as one pipelined phase (lanes): the event
    # path runs them, and the results are the same run's
    for algorithm, runs in (("collnet", False), ("nvls_tree", False)):
        s = _plain(algorithm)
        platform = Platform(s, exact=True)
        coll = vectorized.run_alone(platform.collectives, "all-reduce", 4 * MIB)
        assert (not isinstance(coll, str)) is runs
        fast = simulate_collective(s, "all-reduce", 4 * MIB, exact=True)
        vectorized.ENABLED = False
        try:
            events = simulate_collective(s, "all-reduce", 4 * MIB, exact=True)
        finally:
            vectorized.ENABLED = True
        assert fast.algorithm == events.algorithm == algorithm
        assert fast.time == events.time  # bit-identical where vectorized, the same run where not


def test_collnet_takes_no_spine_links() -> None:
    # the switches' aggregation tree sends one reduced stream per leaf up, not one per NPU pair:
    # a 2:1 oversubscribed leaf/spine (4 nodes per leaf) does not slow it down (exact mode)
    flat = sharp(8, **{"collective.algorithm": "collnet"})
    leafy = sharp(
        8,
        **{
            "collective.algorithm": "collnet",
            "scale_out.leaf_size": 4,
            "scale_out.oversubscription": 2.0,
        },
    )
    args = ("all-reduce", 64 * MIB)
    one = simulate_collective(flat, *args, dims=(1,), exact=True, endpoint="ideal")
    two = simulate_collective(leafy, *args, dims=(1,), exact=True, endpoint="ideal")
    assert two.time == pytest.approx(one.time, rel=1e-12)


def test_cli_forces_nvls_tree_and_prints_a_table() -> None:
    result = CliRunner().invoke(
        app,
        [
            "collective",
            "--system",
            "dgx-h100",
            "--nodes",
            "16",
            "--op",
            "all-reduce",
            "--algo",
            "nvls_tree",
            "--sizes",
            "1MiB,1GiB",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "all-reduce on h100-nvswitch-8" in out and "128 NPUs" in out
    assert out.count("nvls_tree") == 2 and "Simple" in out


def test_cli_refuses_collnet_without_sharp(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch,
        capsys,
        "collective",
        "--system",
        "dgx-h100",
        "--nodes",
        "4",
        "--algo",
        "collnet",
        "--sizes",
        "1MiB",
    )
    assert line.startswith("error: --algo") and "switch_reduction" in line


def test_cli_names_sharp_as_an_assumption_when_collnet_runs() -> None:
    result = CliRunner().invoke(
        app,
        [
            "collective",
            "--system",
            "dgx-h100",
            "--nodes",
            "4",
            "--algo",
            "collnet",
            "--sizes",
            "1MiB",
            "--set",
            "scale_out.switch_reduction=true",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "collnet" in result.stdout
    assert "scale_out.switch_reduction = true, an assumption" in result.stderr


def test_collnet_takes_no_incast_loss() -> None:
    # a switch port that takes fewer writers than collnet's p-1 messages would slow a direct
    # step down; the switches' reduction is no incast, so collnet runs at the links' rate
    def nics(**incast: object) -> SystemConfig:
        d = {
            "kind": "switch",
            "size": 8,
            "link_bandwidth": 25e9,
            "link_latency": 3e-6,
            "switch_reduction": True,
            "network": True,
            **incast,
        }
        return make_system([d], algorithm="collnet")

    plain = simulate_collective(nics(), "all-reduce", 64 * MIB)
    lossy = simulate_collective(
        nics(incast_fan_in=2, incast_efficiency=0.5), "all-reduce", 64 * MIB
    )
    assert plain.algorithm == lossy.algorithm == "collnet"
    assert lossy.time == plain.time
    assert plain.time == pytest.approx(3e-6 + 10e-9 + 64 * MIB / 25e9)


def test_nvls_over_nodes_reduces_in_both_switches() -> None:
    # SHARP on: NCCL's NVLS over nodes, pipelined: the NVLS load-reduce (S) and multicast
    # (S/8) over the node's links while each GPU's S/8 goes through its NIC into the network's
    # switches and back once; latency NCCL 2.19.3's intraLat + interLat; one node's NVLS loops
    # (NVLS's chunk)
    s = sharp(4, **{"collective.algorithm": "nvls"})
    size = 256.0 * MIB
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "nvls" and r.protocol == "Simple"
    c = s.collective
    nvls = c.protocols["nvls"]["Simple"]
    nvl, net = s.network.dimensions
    assert c.nvls_efficiency is not None and nvls.net_hop_latency is not None
    b_n = nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency
    g = 8
    path = (nvl.link_latency + nvls.hop_latency) + (net.link_latency + nvls.net_hop_latency)
    moved = max(size * (g + 1) / g / b_n, size / g / _nic(s))
    # NCCL's NVLS chunk for 256 MiB over 16 channels x 8 heads: 64 KiB, 32 loops
    pipeline = _nvls_pipeline(s, size, 64 * 1024, 32)
    assert r.time == pytest.approx(pipeline + path + moved, rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(size / g)
    assert simulate_collective(s, "all-reduce", size).comm_units == 16  # the NVLS channels
