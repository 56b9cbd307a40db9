"""Chakra traces of LLM runs: collectives on communicator groups are written with ``pg_name``
and ASTRA-sim's ``--comm-group-configuration`` file, and read back to the same simulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acesim.config.resolve import resolve_system
from acesim.errors import TopologyError, TraceError, WorkloadError
from acesim.hardware.platform import Platform
from acesim.network.group import Group, Span, group_from_json, group_to_json, members
from acesim.network.topology import Topology
from acesim.runs.llm import llm_graph, make_llm_case
from acesim.training.executor import GraphExecutor
from acesim.workload.chakra import attrs as A
from acesim.workload.chakra import read_chakra, write_chakra
from acesim.workload.chakra import schema as S
from acesim.workload.chakra.stream import iter_records, load_bytes
from acesim.workload.graph import Graph, Node
from acesim.workload.llm.parallel import parse_parallel


def _topology(nodes: int = 2) -> tuple[object, Topology]:
    system = resolve_system("h100-nvswitch-8", nodes=nodes)
    return system, Topology(system.network, system.collective)


def test_members_are_the_group_instance_that_holds_the_rank() -> None:
    _, topo = _topology(4)
    assert members(topo, Group((Span(0, 4),)), 5) == (4, 5, 6, 7)
    dp = Group((Span(0, 2, stride=4), Span(1)))
    assert members(topo, dp, 1) == (1, 5, 9, 13, 17, 21, 25, 29)
    assert members(topo, None, 0) == tuple(range(32))
    with pytest.raises(TopologyError):
        members(topo, Group((Span(0, 3),)), 0)  # 3 does not tile 8
    assert group_from_json(group_to_json(dp)) == dp


def test_an_llm_iteration_round_trips_through_chakra_with_its_groups(tmp_path: Path) -> None:
    system, topo = _topology(2)
    par = parse_parallel("tp=2,pp=2", global_batch=4, micro_batch=1, seq=1024)
    case = make_llm_case(system, "llama3-8b", par, precision="bf16", nodes=None)
    graph = llm_graph(case)
    files = write_chakra(graph, tmp_path / "l", dim_sizes=[8, 2], topology=topo)
    assert files[-1].name == "l.comm_groups.json"
    table = {int(k): tuple(v) for k, v in json.loads(files[-1].read_text()).items()}
    assert sorted(table) == list(range(1, len(table) + 1))
    # every group collective names a group that holds its rank
    for rank in (0, 9):
        path = tmp_path / f"l.{rank}.et"
        named = 0
        raw = load_bytes(str(path), path.read_bytes())
        for _offset, record in list(iter_records(raw))[1:]:
            node = S.Node.FromString(bytes(record))
            attrs = {a.name: a for a in node.attr}
            if A.PG_NAME in attrs:
                assert rank in table[int(attrs[A.PG_NAME].string_val)]
                named += 1
        assert named > 0
    back = read_chakra(tmp_path / "l", dim_sizes=[8, 2])
    pairs = zip(graph.ranks[9], back.ranks[9], strict=True)
    assert all(
        (a.kind, a.op, a.size, a.group, a.peer) == (b.kind, b.op, b.size, b.group, b.peer)
        for a, b in pairs
    )
    before = GraphExecutor(Platform(case.system, exact=True), graph).run().makespan
    after = GraphExecutor(Platform(case.system, exact=True), back).run().makespan
    assert after == before > 0


def test_a_group_collective_without_the_topology_is_refused(tmp_path: Path) -> None:
    tp = Group((Span(0, 2),))
    node = Node(id=0, name="c", kind="collective", op="all-reduce", size=1e6, group=tp)
    graph = Graph([[node]] * 2)
    with pytest.raises(WorkloadError, match="topology"):
        write_chakra(graph, tmp_path / "g")


def test_a_corrupt_group_attribute_is_a_trace_error(tmp_path: Path) -> None:
    _, topo = _topology(1)
    tp = Group((Span(0, 8),))
    node = Node(id=0, name="c", kind="collective", op="all-reduce", size=1e6, group=tp)
    graph = Graph([[node]] * 8)
    write_chakra(graph, tmp_path / "g", topology=topo)
    path = tmp_path / "g.0.et"
    data = path.read_bytes().replace(b"[[0,8,1]]", b"[[0,8,x]]")
    path.write_bytes(data)
    with pytest.raises(TraceError, match=A.A_GROUP):
        read_chakra(tmp_path / "g")
