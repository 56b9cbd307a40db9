"""In-network reduction across nodes: NCCL's NVLS_TREE (``nvls_tree``: NVLS in the node, a
pipelined double binary tree between nodes) and CollNet with SHARP (``collnet``: the scale-out
switches reduce). Closed forms from the model's own terms, the tuner's offers and refusals."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from clitools import cli_error
from systems import make_system
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
from acesim.simulate import simulate_collective

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


def test_nvls_tree_is_the_nodes_nvls_plus_a_pipelined_tree_between_nodes() -> None:
    # 16 DGX H100 nodes, 1 GiB, ideal endpoint: the NVLS load-reduce (S up), the tree of each
    # GPU's S/8 slice over its NIC (2 ceil(log2 16) = 8 levels, 2 S/8 through the NIC in all),
    # the NVLS multicast store (S/8 up), plus the NVLS_TREE kernel's loops (plan docstring).
    s = h100(16, **{"collective.algorithm": "nvls_tree"})
    r = simulate_collective(s, "all-reduce", GIB, endpoint="ideal")
    assert r.algorithm == "nvls_tree" and r.protocol == "Simple"
    c = s.collective
    proto = c.protocols["nvls_tree"]["Simple"]
    nvl, net = s.network.dimensions
    assert c.nvls_efficiency is not None and c.nvls_stages is not None
    assert proto.net_hop_latency is not None
    b_n = nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency
    a_n = nvl.link_latency + proto.hop_latency
    b_nic, a_net = _nic(s), net.link_latency + proto.net_hop_latency
    g, levels, size = 8, 4, float(GIB)
    transfer = (
        (a_n + size / b_n)
        + 2 * levels * (a_net + size / (g * levels * b_nic))
        + (a_n + size / (g * b_n))
    )
    # NCCL 2.18.5's NVLS_TREE chunk for 1 GiB over 16 channels x 8 heads: 256 KiB (below
    # 32 loops of 512 KiB chunks, not below 16 of 256 KiB): 32 loops
    chunk, loops = 256 * 1024, 32
    per_byte = (g + 1) / g / b_n
    stage = c.nvls_loop_latency + g * chunk * c.nvls_channels * per_byte
    pipeline = (loops + c.nvls_stages - 1) * stage - size * per_byte
    assert r.time == pytest.approx(proto.base_latency + pipeline + transfer, rel=1e-9)
    # each byte crosses the node's links S (G+1)/G up; the NIC carries the tree's 2 S/G
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(2 * size / g)
    assert r.per_dimension_bytes["nvswitch"] == pytest.approx(size * (g + 1) / g)


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
    assert r.time == pytest.approx(net.link_latency + proto.net_hop_latency + GIB / b_nic)
    assert r.algbw == pytest.approx(b_nic, rel=1e-3)
    assert r.busbw == pytest.approx(2 * (n - 1) / n * b_nic, rel=1e-3)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(GIB)
    ring = simulate_collective(
        h100(16, **{"collective.algorithm": "ring"}), "all-reduce", GIB, dims=(1,), endpoint="ideal"
    )
    assert ring.busbw < b_nic < r.busbw


def test_collnet_over_nodes_runs_the_node_phases_as_configured() -> None:
    # 2 nodes x 8 GPUs: the ring reduce-scatters S in the node, the switches reduce each GPU's
    # S/8 across the nodes, the ring all-gathers; Simple (collnet runs no other protocol), the
    # ring's base latency the larger of the two.
    s = sharp(2, **{"collective.algorithm": "collnet"})
    size = 256.0 * MIB
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "collnet" and r.protocol == "Simple"
    ring = s.collective.protocols["ring"]["Simple"]
    coll = s.collective.protocols["collnet"]["Simple"]
    nvl, net = s.network.dimensions
    assert coll.net_hop_latency is not None
    b_nvl = nvl.links_per_npu * nvl.link_bandwidth * s.collective.protocol_efficiency
    a_nvl = nvl.link_latency + ring.hop_latency
    g = 8
    expected = (
        max(ring.base_latency, coll.base_latency)
        + 2 * (g - 1) * (a_nvl + size / (g * b_nvl))
        + net.link_latency
        + coll.net_hop_latency
        + size / (g * _nic(s))
    )
    assert r.time == pytest.approx(expected, rel=1e-9)
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


def test_vectorized_runs_collnet_and_declines_nvls_tree() -> None:
    for algorithm, runs in (("collnet", True), ("nvls_tree", False)):
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
    # SHARP on: NCCL's NVLS over nodes, the NVLS load-reduce in the node (S up), the network's
    # switches all-reduce each GPU's S/8 (once through its NIC each way, collnet's step and
    # protocol), the NVLS multicast store (S/8 up), plus one node's NVLS loops (NVLS's chunk)
    s = sharp(4, **{"collective.algorithm": "nvls"})
    size = 256.0 * MIB
    r = simulate_collective(s, "all-reduce", size, endpoint="ideal")
    assert r.algorithm == "nvls" and r.protocol == "Simple"
    c = s.collective
    nvls = c.protocols["nvls"]["Simple"]
    coll = c.protocols["collnet"]["Simple"]
    nvl, net = s.network.dimensions
    assert c.nvls_efficiency is not None and c.nvls_stages is not None
    assert coll.net_hop_latency is not None
    b_n = nvl.links_per_npu * nvl.link_bandwidth * c.nvls_efficiency
    a_n = nvl.link_latency + nvls.hop_latency
    g = 8
    transfer = (
        (a_n + size / b_n)
        + (net.link_latency + coll.net_hop_latency + size / (g * _nic(s)))
        + (a_n + size / (g * b_n))
    )
    # NCCL's NVLS chunk for 256 MiB over 16 channels x 8 heads: 64 KiB (below 64 loops of
    # 128 KiB, not below 8 of 64 KiB): 256 MiB / (128 x 64 KiB) = 32 loops
    chunk, loops = 64 * 1024, 32
    per_byte = (g + 1) / g / b_n
    stage = c.nvls_loop_latency + g * chunk * c.nvls_channels * per_byte
    pipeline = (loops + c.nvls_stages - 1) * stage - size * per_byte
    assert r.time == pytest.approx(pipeline + transfer, rel=1e-9)
    assert r.per_dimension_bytes["scaleout"] == pytest.approx(size / g)
    assert simulate_collective(s, "all-reduce", size).comm_units == 16  # the NVLS channels
