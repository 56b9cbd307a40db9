"""The path from a GPU to its NIC as engine resources: the NIC's proxy (``nic_efficiency``),
the PCIe link from the NIC to its switch (``pcie_bandwidth``, shared by the GPUs and ports
behind the NIC) and the GPU's own PCIe link, which host copies share (acesim.network.topology,
acesim.network.collective, acesim.hardware.platform)."""

from __future__ import annotations

import pytest
from systems import make_system
from systems import simulate_as_configured as simulate_collective

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.errors import ConfigError
from acesim.hardware.platform import Platform

GIB = 2**30
FLAT = {"collective.algorithm": "flat_ring"}


def a100(nodes: int, **overrides: object) -> SystemConfig:
    return resolve_system("a100-nvswitch-8", nodes=nodes, overrides={**FLAT, **overrides})


def _nic(s: SystemConfig) -> float:
    net = s.network.dimensions[-1]
    assert net.efficiency is not None
    return net.link_bandwidth * net.links_per_npu * net.efficiency / net.npus_per_link


def _pcie(s: SystemConfig) -> float:
    net = s.network.dimensions[-1]
    assert net.pcie_bandwidth is not None
    share = net.links_per_npu / (net.ports_per_nic * net.npus_per_link)
    return net.pcie_bandwidth * net.pcie_efficiency * share


def test_dgx_a100_nics_are_not_held_back_by_their_pcie_links() -> None:
    # DGX A100: each 200 Gb/s NIC on its own PCIe Gen4 x16 link (28.6 GB/s of payload) beside
    # its GPU: the NIC (24.8 GB/s) binds, as without the PCIe path
    s = a100(2)
    assert _pcie(s) > _nic(s)
    r = simulate_collective(s, "all-reduce", 8 * GIB, endpoint="ideal")
    assert r.bound == "link scaleout"
    plain = simulate_collective(
        a100(2, **{"scale_out.pcie_bandwidth": None}), "all-reduce", 8 * GIB, endpoint="ideal"
    )
    assert r.time == pytest.approx(plain.time, rel=1e-12)


def test_a_dual_port_nic_on_one_pcie_link_halves_each_ports_share() -> None:
    # four dual-port 200 Gb/s NICs for eight GPUs, each card on one Gen4 x16 link: a GPU's
    # port gets half the card's PCIe, 14.3 GB/s, below the port's 24.8: the flat ring's NIC
    # lane is bound by the PCIe switch, and its busbw is G times that share
    s = a100(2, **{"scale_out.ports_per_nic": 2})
    assert _pcie(s) == pytest.approx(32e9 * 0.894 / 2)
    assert _pcie(s) < _nic(s)
    r = simulate_collective(s, "all-reduce", 8 * GIB, endpoint="ideal")
    assert r.bound == "PCIe switch (to the NIC) scaleout"
    assert r.busbw == pytest.approx(8 * _pcie(s), rel=0.01)
    assert r.busbw < 8 * _nic(s) * 0.6


def test_a_nic_proxy_that_falls_short_binds_and_says_so() -> None:
    s = a100(2, **{"scale_out.nic_efficiency": 0.8})
    r = simulate_collective(s, "all-reduce", 8 * GIB, endpoint="ideal")
    assert r.bound == "NIC proxy scaleout"
    assert r.busbw == pytest.approx(8 * 0.8 * _nic(s), rel=0.01)


def test_the_tuner_sees_the_path_it_runs_on() -> None:
    # the PCIe-bound flat ring is predicted at the PCIe share: its prediction is its time
    s = a100(2, **{"scale_out.ports_per_nic": 2})
    platform = Platform(s.with_endpoint("ideal"))
    _axes, _chunks, choice = platform.collectives.choose("all-reduce", 8 * GIB)
    r = simulate_collective(s, "all-reduce", 8 * GIB, endpoint="ideal")
    assert choice.protocol.time == pytest.approx(r.time, rel=1e-3)


def test_host_copies_share_the_gpus_pcie_link_with_its_nic() -> None:
    # H100 nodes: the GPU's PCIe Gen5 link (64 GB/s each way) carries its NIC's sends (49.7
    # GB/s) and a device-to-host copy at once: both slow down; a host-to-device copy takes
    # the other direction, which the NIC's receives use, and slows too
    s = resolve_system(
        "h100-nvswitch-8", nodes=2, overrides={**FLAT, "collective.protocol": "Simple"}
    )
    r = simulate_collective(s, "all-reduce", GIB, endpoint="ideal", host_copy=(GIB, "d2h"))
    assert r.compute is not None
    assert r.compute["collective_slowdown"] > 1.05
    assert r.compute["host_copy_slowdown"] > 1.05
    one_node = resolve_system("h100-nvswitch-8")
    alone = simulate_collective(
        one_node, "all-gather", GIB, endpoint="ideal", host_copy=(GIB, "d2h")
    )
    assert alone.compute is not None
    assert alone.compute["collective_slowdown"] == pytest.approx(1.0)  # NVLink takes no PCIe


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nic_efficiency", 0.9),
        ("pcie_bandwidth", 32e9),
        ("ports_per_nic", 2),
        ("net_overhead", 1e-6),
    ],
)
def test_nic_facts_on_a_dimension_inside_a_node_are_refused(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        make_system([{"kind": "switch", "size": 8, "link_bandwidth": 25e9, field: value}])
    text = str(err.value)
    assert field in text and "network dimension" in text and "\n" not in text


def test_a_bad_pcie_bandwidth_is_one_line_naming_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_system("a100-nvswitch-8", nodes=2, overrides={"scale_out.pcie_bandwidth": -1})
    assert "pcie_bandwidth" in str(err.value) and "\n" not in str(err.value)
