"""The tuner's prediction sees an oversubscribed leaf/spine fabric (acesim.network.spine)."""

from __future__ import annotations

import pytest
from systems import simulate_as_configured as simulate_collective

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.network.algorithms import REDUCE
from acesim.network.group import resolve
from acesim.network.plan import choose_algorithm
from acesim.network.spine import spine_factor
from acesim.network.step import Step
from acesim.network.topology import Topology

SIZE = 256 * 2**20


def _system(leaf: int | None, ratio: float, **overrides: object) -> SystemConfig:
    o: dict[str, object] = {}
    if leaf is not None:
        o = {"scale_out.leaf_size": leaf, "scale_out.oversubscription": ratio}
    return resolve_system("h100-nvswitch-8", nodes=8, overrides={**o, **overrides})


def _predicted(system: SystemConfig) -> tuple[str | None, dict[str, float]]:
    topo = Topology(system.network, system.collective)
    choice = choose_algorithm(system.collective, topo, "all-reduce", SIZE, resolve(topo, None), 1)
    return choice.algorithm, dict(choice.predicted)


def test_spine_factor_of_a_ring_and_of_a_direct_step() -> None:
    topo = Topology(_system(2, 4.0).network, _system(2, 4.0).collective)
    nics = topo.dimensions[1]
    # a ring: one flow leaves each leaf of 2; its uplinks carry 2 NICs / 4 = half a NIC
    assert spine_factor(nics, 8, 1, Step(1.0, "next", 0, REDUCE)) == pytest.approx(2.0)
    wide = Topology(_system(4, 2.0).network, _system(4, 2.0).collective).dimensions[1]
    # leaves of 4, 2:1: a ring's one flow per leaf fits in 2 NICs' worth of uplink
    assert spine_factor(wide, 8, 1, Step(1.0, "next", 0, REDUCE)) == 1.0
    # a direct step: each member sends 4 of its 7 pieces to the other leaf through uplinks
    # of 4 NICs / 2 shared by 4 members: 16 pieces at 2 NICs against 7 at one
    assert spine_factor(wide, 8, 1, Step(1.0, "all", 0, REDUCE)) == pytest.approx(16 / 2 / 7)
    # no spine: nothing added
    flat = Topology(_system(None, 1.0).network, _system(None, 1.0).collective).dimensions[1]
    assert spine_factor(flat, 8, 1, Step(1.0, "all", 0, REDUCE)) == 1.0


def test_the_tuner_predicts_the_spines_share_and_picks_what_runs_fastest() -> None:
    # 8 nodes, each its own leaf, 8:1 to the spine (exact mode runs it): every byte between
    # nodes crosses an uplink of 1/8 NIC; the hierarchical ring sends fewer such bytes than
    # the flat ring and the pipelined trees (NVLS_TREE, the fastest on a free fabric), so it
    # is the faster, and the tuner says so. No protocol loss on NVLink, so the spine binds
    # (at the H100's transferred ring efficiency, 0.7525, the ring's NVLink phases take as
    # long as NVLS_TREE's spine-bound lanes: within 0.2%, no margin to test a choice on)
    lossless = {"collective.protocol_efficiency": 1.0}
    free_choice, free = _predicted(_system(None, 1.0, **lossless))
    choice, predicted = _predicted(_system(1, 8.0, **lossless))
    assert free_choice == "nvls_tree" and choice == "ring"
    for algo, t in predicted.items():
        assert t > 1.5 * free[algo]
        forced = _system(1, 8.0, **lossless, **{"collective.algorithm": algo})
        r = simulate_collective(forced, "all-reduce", SIZE, endpoint="ideal", exact=True)
        assert t == pytest.approx(r.time, rel=0.02), algo  # bandwidth-bound: as simulated
    # within a leaf's capacity a ring is not slowed and its prediction does not move; nor do
    # the pipelined trees', whose NIC lanes send one flow per NPU across a leaf's boundary
    _, roomy = _predicted(_system(4, 2.0, **lossless))
    for algo in ("flat_ring", "double_binary_tree", "nvls_tree"):
        assert roomy[algo] == pytest.approx(free[algo], rel=1e-12)
