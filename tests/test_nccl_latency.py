"""Small-message latency of every algorithm and protocol against NCCL's own formula (issue 32):
NCCL 2.19.3's ``src/graph/tuning.cc`` (``baseLat``, ``hwLat[NVLINK|NET]``, the per-algorithm
latency formulas, ``getNetOverhead``), written out here from the source, plus acesim's link
latency per hop (1 us NVLink, 3 us from GPU to GPU across the InfiniBand switch: the h100
preset's). An all-reduce of 8 bytes moves next to nothing, so its time is its latency."""

from __future__ import annotations

import pytest

from acesim.config.resolve import resolve_system
from acesim.hardware.platform import Platform
from acesim.network.plan import nvls_pipeline_latency
from acesim.simulate import simulate_collective

US = 1e-6
G, N = 8, 16  # GPUs per node, nodes
LOG2I_N = 4  # NCCL's log2i(16)
NVLINK, NET = 1 * US, 3 * US  # the preset's link latencies
NET_OVERHEAD = 1 * US  # getNetOverhead: Intel host CPUs (DGX H100: Xeon 8480C)

#: NCCL 2.19.3 tuning.cc, per (algorithm, protocol): (baseLat, hwLat[NVLINK], hwLat[NET]), us
NCCL = {
    ("ring", "LL"): (6.6, 0.6, 2.7),
    ("ring", "LL128"): (14.0, 1.9, 4.0),
    ("ring", "Simple"): (8.4, 3.4, 14.0),
    ("tree", "LL"): (6.8, 0.6, 5.0),
    ("tree", "LL128"): (14.0, 1.25, 8.5),
    ("tree", "Simple"): (0.0, 28.0, 28.0),
    ("nvls_tree", "Simple"): (0.0, 23.0, 14.0),
    ("collnet", "Simple"): (0.0, 3.7, 31.0),
    ("nvls", "Simple"): (0.0, 23.0, 18.0),
}


def _time(algorithm: str, protocol: str, sharp: bool = False, nodes: int = N) -> float:
    overrides: dict[str, object] = {
        "collective.algorithm": algorithm,
        "collective.protocol": protocol,
        "scale_out.switch_reduction": sharp,
    }
    s = resolve_system("h100-nvswitch-8", nodes=nodes, overrides=overrides)
    return simulate_collective(s, "all-reduce", 8, endpoint="ideal").time


def _nvls_pipeline(algorithm: str, sharp: bool) -> float:
    """What the model's NVLS kernel pipeline adds for 8 bytes (its stand-in for NCCL's 23 us
    hwLat[NVLINK][NVLS] / [NVLSTree], docs/model.md: fitted on the H100 NVLS rows)."""
    s = resolve_system(
        "h100-nvswitch-8",
        nodes=N,
        overrides={"collective.algorithm": algorithm, "scale_out.switch_reduction": sharp},
    )
    platform = Platform(s.with_endpoint("ideal"))
    _axes, chunks, choice = platform.collectives.choose("all-reduce", 8)
    return nvls_pipeline_latency(s.collective, platform.topology, choice.phases, chunks)


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
def test_the_ring_on_one_node(protocol: str) -> None:
    # baseLat + nsteps intraLat, nsteps = 2 (n - 1)
    base, intra, _ = NCCL[("ring", protocol)]
    nsteps = 2 * (G - 1)
    expected = base * US + nsteps * (intra * US + NVLINK)
    assert _time("ring", protocol, nodes=1) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
def test_the_ring_through_every_node(protocol: str) -> None:
    # baseLat + (nsteps - nInterSteps) max(intraLat, netOverhead) + nInterSteps interLat,
    # nInterSteps = 2 N, the overhead three times over for Simple
    base, intra, inter = NCCL[("ring", protocol)]
    n = G * N
    nsteps, inter_steps = 2 * (n - 1), 2 * N
    floor = NET_OVERHEAD * (3 if protocol == "Simple" else 1)
    expected = (
        base * US
        + (nsteps - inter_steps) * (max(intra * US, floor) + NVLINK)
        + inter_steps * (inter * US + NET)
    )
    assert _time("flat_ring", protocol) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
def test_the_tree(protocol: str) -> None:
    # baseLat + 2 ((nRanks/nNodes - 1) intraLat + log2i(nNodes) interLat)
    base, intra, inter = NCCL[("tree", protocol)]
    expected = base * US + 2 * ((G - 1) * (intra * US + NVLINK) + LOG2I_N * (inter * US + NET))
    assert _time("double_binary_tree", protocol) == pytest.approx(expected, abs=1e-9)


def test_nvls_tree() -> None:
    # baseLat + intraLat + 2 log2i(nNodes) interLat; the model's NVLS pipeline stands for
    # NCCL's 23 us intraLat (the preset's hop latency on NVLink is 0)
    base, _intra, inter = NCCL[("nvls_tree", "Simple")]
    expected = (
        base * US
        + NVLINK
        + _nvls_pipeline("nvls_tree", sharp=False)
        + 2 * LOG2I_N * (inter * US + NET)
    )
    assert _time("nvls_tree", "Simple") == pytest.approx(expected, abs=1e-9)


def test_collnet_direct() -> None:
    # baseLat + 2 (min(1, nRanks/nNodes - 1) intraLat + (nRanks/nNodes - 1) 0.4 us) + interLat
    base, intra, inter = NCCL[("collnet", "Simple")]
    expected = base * US + 2 * ((intra * US + NVLINK) + (G - 1) * 0.4 * US) + inter * US + NET
    assert _time("collnet", "Simple", sharp=True) == pytest.approx(expected, abs=1e-9)


def test_nvls_with_sharp() -> None:
    # intraLat + interLat (nNodes > 1), the NVLS pipeline for intraLat as for NVLS_TREE
    _base, _intra, inter = NCCL[("nvls", "Simple")]
    expected = NVLINK + _nvls_pipeline("nvls", sharp=True) + inter * US + NET
    assert _time("nvls", "Simple", sharp=True) == pytest.approx(expected, abs=1e-9)


def test_the_presets_protocol_tables_are_nccls() -> None:
    s = resolve_system("h100-nvswitch-8", nodes=2)
    names = {"tree": "double_binary_tree"}
    for (algorithm, protocol), (base, intra, inter) in NCCL.items():
        proto = s.collective.protocols[names.get(algorithm, algorithm)][protocol]
        assert proto.base_latency == pytest.approx(base * US)
        assert proto.net_hop_latency == pytest.approx(inter * US)
        if algorithm not in ("nvls_tree", "nvls"):  # NVLS's intraLat: the pipeline's
            assert proto.hop_latency == pytest.approx(intra * US)
