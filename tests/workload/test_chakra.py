"""Chakra execution traces: schema, reader, writer, corrupt input, simulated round trips."""

from __future__ import annotations

import gzip
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from systems import dim, make_system

from acesim.errors import TraceError, WorkloadError
from acesim.hardware.platform import Platform
from acesim.training.executor import GraphExecutor
from acesim.training.loops import build_graph
from acesim.workload.chakra import (
    ChakraWarning,
    export_chakra,
    read_chakra,
    write_chakra,
)
from acesim.workload.chakra import schema as S
from acesim.workload.chakra.stream import encode_varint
from acesim.workload.graph import Graph, Node
from acesim.workload.model import Compute
from acesim.workload.zoo import load_zoo

COMP, COLL = S.NODE_TYPES["COMP_NODE"], S.NODE_TYPES["COMM_COLL_NODE"]
SEND, RECV = S.NODE_TYPES["COMM_SEND_NODE"], S.NODE_TYPES["COMM_RECV_NODE"]


# -- helpers: traces written the way Chakra's generator writes them ------------------------------
def frame(msg: Any) -> bytes:
    data = msg.SerializeToString()
    return encode_varint(len(data)) + data


def meta() -> Any:
    return S.GlobalMetadata(version="0.0.4")


def chakra_node(nid: int, type_: int, deps: tuple[int, ...] = (), **attrs: Any) -> Any:
    node = S.Node(id=nid, name=f"n{nid}", type=type_)
    node.data_deps.extend(deps)
    node.attr.append(S.AttributeProto(name="is_cpu_op", bool_val=False))
    for name, value in attrs.items():
        if name == "duration_micros":
            node.duration_micros = value
        elif name == "involved_dim":
            node.attr.append(S.AttributeProto(name=name, bool_list=S.BoolList(values=list(value))))
        elif name in ("comm_src", "comm_dst", "comm_tag"):
            node.attr.append(S.AttributeProto(name=name, int32_val=value))
        elif name in ("comm_size", "tensor_size") and isinstance(
            value, int
        ):  # Chakra's generator: uint64
            node.attr.append(S.AttributeProto(name=name, uint64_val=value))
        elif isinstance(value, bool):
            node.attr.append(S.AttributeProto(name=name, bool_val=value))
        elif isinstance(value, str):
            node.attr.append(S.AttributeProto(name=name, string_val=value))
        else:
            node.attr.append(S.AttributeProto(name=name, int64_val=value))
    return node


def write_rank(path: Path, *nodes: Any, header: Any = None) -> Path:
    data = frame(meta() if header is None else header) + b"".join(frame(n) for n in nodes)
    path.write_bytes(data)
    return path


def attrs_of(node: Any) -> dict[str, tuple[str, Any]]:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        value = getattr(a, kind)
        out[a.name] = (kind, list(value.values) if kind.endswith("_list") else value)
    return out


def read_raw(path: Path) -> tuple[Any, list[Any]]:
    buf = path.read_bytes()
    pos, msgs = 0, []
    while pos < len(buf):
        length = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        msgs.append(buf[pos : pos + length])
        pos += length
    header = S.GlobalMetadata.FromString(msgs[0])
    return header, [S.Node.FromString(m) for m in msgs[1:]]


def sample_graph() -> Graph:
    """Two ranks: every node kind, fractional numbers, labels."""

    def rank(r: int) -> list[Node]:
        peer = 1 - r
        return [
            Node(
                0,
                "fwd",
                "compute",
                compute=Compute(flops=1.5e12 + 0.25, hbm_bytes=3e9),
                layer="l0",
                pass_name="fwd",
            ),
            Node(1, "timed", "compute", (0,), compute=Compute(duration=1.2345e-6, blocks=80)),
            Node(2, "zero", "compute", (1,), compute=Compute(duration=0.0)),
            Node(
                3,
                "ar",
                "collective",
                (0,),
                op="all-reduce",
                size=1048576.5,
                iteration=1,
                blocking=True,
            ),
            Node(4, "ag", "collective", (2,), op="all-gather", size=4096.0, dims=(0,)),
            Node(5, "rs", "collective", (3, 4), op="reduce-scatter", size=2048.0, dims=(0, 1)),
            Node(6, "a2a", "collective", (5,), op="all-to-all", size=512.0),
            Node(7, "send", "send", (6,), peer=peer, tag=7, size=1000.0),
            Node(8, "recv", "recv", (6,), peer=peer, tag=7, size=1000.0),
            Node(
                9,
                "both",
                "compute",
                (7, 8),
                compute=Compute(flops=10.0, hbm_bytes=20.0, duration=2e-6),
            ),
        ]

    return Graph(ranks=[rank(0), rank(1)], name="sample", iterations=2, meta={"loop": "x"})


# -- schema ---------------------------------------------------------------------------------------
def test_shipped_proto_text_matches_the_built_descriptor() -> None:
    text = (Path(S.__file__).parent / "et_def.proto").read_text()
    text = re.sub(r"//[^\n]*", "", text)
    declared: dict[str, dict[str, int]] = {}
    for _kind, name, body in re.findall(
        r"(message|enum)\s+(\w+)\s*\{(.*?)\}\s*(?=message|enum|$)", text, re.S
    ):
        declared[name] = {m[0]: int(m[1]) for m in re.findall(r"(\w+)\s*=\s*(\d+)\s*;", body)}
    built: dict[str, dict[str, int]] = {}
    for m in S.FILE_DESCRIPTOR.message_type:
        built[m.name] = {f.name: f.number for f in m.field}
    for e in S.FILE_DESCRIPTOR.enum_type:
        built[e.name] = {v.name: v.number for v in e.value}
    assert declared == built
    assert S.FILE_DESCRIPTOR.package == "ChakraProtoMsg"


def test_schema_field_numbers_are_chakras() -> None:
    # Spot checks against MLCommons Chakra's et_def.proto.
    node = S.Node.DESCRIPTOR.fields_by_name
    assert [node[n].number for n in ("id", "name", "type", "ctrl_deps", "data_deps")] == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert node["duration_micros"].number == 7 and node["attr"].number == 10
    attr = S.AttributeProto.DESCRIPTOR.fields_by_name
    assert (attr["int64_val"].number, attr["bool_list"].number, attr["string_val"].number) == (
        9,
        28,
        29,
    )
    assert S.COMM_TYPES["REDUCE_SCATTER"] == 7 and S.NODE_TYPES["COMM_COLL_NODE"] == 7


# -- round trip -----------------------------------------------------------------------------------
def test_round_trip_keeps_every_node_field(tmp_path: Path) -> None:
    g = sample_graph()
    files = write_chakra(g, tmp_path / "t" / "sample", dim_sizes=[2, 3])
    assert [f.name for f in files] == ["sample.0.et", "sample.1.et"]
    back = read_chakra(tmp_path / "t" / "sample", dim_sizes=[2, 3])
    assert back.ranks == g.ranks
    assert (back.name, back.iterations) == ("sample", 2)
    assert back.meta == {"loop": "x", "chakra.version": "0.0.4"}


def test_writer_uses_the_attribute_kinds_astra_sim_reads(tmp_path: Path) -> None:
    write_chakra(sample_graph(), tmp_path / "s", dim_sizes=[2, 3])
    header, nodes = read_raw(tmp_path / "s.1.et")
    assert header.version == "0.0.4"
    by_id = {n.id: n for n in nodes}
    assert all(attrs_of(n)["is_cpu_op"] == ("bool_val", False) for n in nodes)
    fwd = attrs_of(by_id[0])
    assert fwd["num_ops"] == ("int64_val", 1_500_000_000_000)
    assert fwd["tensor_size"] == ("uint64_val", 3_000_000_000)
    assert by_id[1].duration_micros == 1 and by_id[1].type == COMP
    ar = attrs_of(by_id[3])
    assert ar["comm_type"] == ("int64_val", S.COMM_TYPES["ALL_REDUCE"])
    assert ar["comm_size"] == ("int64_val", 1048576)  # acesim_size keeps the .5
    assert "involved_dim" not in ar  # all dimensions: ASTRA-sim's default
    ag = attrs_of(by_id[4])
    assert ag["comm_size"] == ("int64_val", 4096 // 2)  # per-NPU contribution, dim 0 of size 2
    assert ag["involved_dim"] == ("bool_list", [True, False])
    send = attrs_of(by_id[7])
    assert by_id[7].type == SEND
    assert (send["comm_src"], send["comm_dst"], send["comm_tag"]) == (
        ("int32_val", 1),
        ("int32_val", 0),
        ("int32_val", 7),
    )
    recv = attrs_of(by_id[8])
    assert (recv["comm_src"][1], recv["comm_dst"][1]) == (0, 1)
    assert list(by_id[5].data_deps) == [3, 4]


def test_symmetric_graph_is_replicated_to_npus_files(tmp_path: Path) -> None:
    g = Graph(ranks=[[Node(0, "c", "compute", compute=Compute(duration=1e-3))]], name="one")
    summary = export_chakra(g, tmp_path / "one", npus=4)
    assert summary.ranks == 4 and summary.nodes == 4 and summary.kinds == {"compute": 4}
    assert "wrote 4 Chakra rank files" in str(summary)
    back = read_chakra(tmp_path / "one")
    assert len(back.ranks) == 4 and back.symmetric


def test_one_rank_graph_with_send_is_not_replicated(tmp_path: Path) -> None:
    g = Graph(
        ranks=[[Node(0, "s", "send", peer=0, size=8.0), Node(1, "r", "recv", peer=0, size=8.0)]]
    )
    with pytest.raises(WorkloadError, match="cannot replicate"):
        write_chakra(g, tmp_path / "p", npus=2)


def test_compute_time_fills_duration_for_astra_sim_but_is_ignored_on_read(tmp_path: Path) -> None:
    g = Graph(ranks=[[Node(0, "c", "compute", compute=Compute(flops=1e9, hbm_bytes=1e6))]])
    write_chakra(g, tmp_path / "c", compute_time=lambda c: c.flops / 1e12)
    _, (node,) = read_raw(tmp_path / "c.0.et")
    assert node.duration_micros == 1000
    assert read_chakra(tmp_path / "c").ranks == g.ranks


# -- the shapes of ASTRA-sim's microbenchmarks (written as Chakra's generator writes them) --------
def test_one_all_reduce_reads_as_one_collective(tmp_path: Path) -> None:
    for r in range(4):
        write_rank(
            tmp_path / f"ar.{r}.et",
            chakra_node(0, COLL, comm_type=S.COMM_TYPES["ALL_REDUCE"], comm_size=65536),
        )
    g = read_chakra(tmp_path / "ar")
    assert len(g.ranks) == 4 and g.symmetric
    (node,) = g.ranks[0]
    assert (node.kind, node.op, node.size, node.dims, node.deps) == (
        "collective",
        "all-reduce",
        65536.0,
        None,
        (),
    )


def test_compute_then_dependent_communication(tmp_path: Path) -> None:
    for r in range(2):
        write_rank(
            tmp_path / f"cc.{r}.et",
            chakra_node(0, COMP, duration_micros=5),
            chakra_node(1, COMP, (0,), num_ops=2_000_000, tensor_size=4096),
            chakra_node(
                2,
                COLL,
                (1,),
                comm_type=S.COMM_TYPES["REDUCE_SCATTER"],
                comm_size=1 << 20,
                involved_dim=[True, False],
            ),
        )
    g = read_chakra(tmp_path / "cc")
    c0, c1, coll = g.ranks[1]
    assert c0.compute == Compute(duration=5e-6)
    assert c1.compute == Compute(flops=2e6, hbm_bytes=4096.0) and c1.deps == (0,)
    assert (coll.op, coll.size, coll.dims, coll.deps) == ("reduce-scatter", 1048576.0, (0,), (1,))


def test_send_recv_pairs_between_two_ranks(tmp_path: Path) -> None:
    write_rank(
        tmp_path / "p2p.0.et",
        chakra_node(0, SEND, comm_src=0, comm_dst=1, comm_tag=3, comm_size=8192),
        chakra_node(1, RECV, (0,), comm_src=1, comm_dst=0, comm_tag=4, comm_size=8192),
    )
    write_rank(
        tmp_path / "p2p.1.et",
        chakra_node(0, RECV, comm_src=0, comm_dst=1, comm_tag=3, comm_size=8192),
        chakra_node(1, SEND, (0,), comm_src=1, comm_dst=0, comm_tag=4, comm_size=8192),
    )
    g = read_chakra(tmp_path / "p2p")
    s0, r0 = g.ranks[0]
    assert (s0.kind, s0.peer, s0.tag, s0.size) == ("send", 1, 3, 8192.0)
    assert (r0.kind, r0.peer, r0.tag, r0.deps) == ("recv", 1, 4, (0,))
    assert [n.kind for n in g.ranks[1]] == ["recv", "send"]


def test_ctrl_deps_count_as_deps(tmp_path: Path) -> None:
    a, b = chakra_node(0, COMP, duration_micros=1), chakra_node(1, COMP, duration_micros=1)
    c = chakra_node(2, COMP, (0,), duration_micros=1)
    c.ctrl_deps.append(1)
    write_rank(tmp_path / "d.0.et", a, b, c)
    assert read_chakra(tmp_path / "d").ranks[0][2].deps == (0, 1)


def test_gzipped_trace_is_read(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "z.0.et", chakra_node(0, COMP, duration_micros=3))
    path.write_bytes(gzip.compress(path.read_bytes()))
    assert read_chakra(tmp_path / "z").ranks[0][0].compute == Compute(duration=3e-6)


# -- skips ---------------------------------------------------------------------------------------
def test_unsupported_nodes_are_skipped_reported_and_bridged(tmp_path: Path) -> None:
    write_rank(
        tmp_path / "s.0.et",
        chakra_node(0, COMP, duration_micros=1),
        chakra_node(1, S.NODE_TYPES["MEM_LOAD_NODE"], (0,), tensor_size=64),
        chakra_node(2, COLL, (1,), comm_type=S.COMM_TYPES["GATHER"], comm_size=8),
        chakra_node(3, COMP, (2,), duration_micros=1, is_cpu_op=True),
        chakra_node(4, COMP, (3,), duration_micros=1),
        chakra_node(5, S.NODE_TYPES["METADATA_NODE"]),
    )
    with pytest.warns(ChakraWarning, match=r"skipped 4 nodes .*first: rank 0 node 1"):
        g = read_chakra(tmp_path / "s")
    assert [(n.id, n.deps) for n in g.ranks[0]] == [(0, ()), (4, (0,))]
    assert g.meta["chakra.skipped"] == (
        "1 COMM_COLL_NODE GATHER, 1 CPU COMP_NODE, 1 MEM_LOAD_NODE, 1 METADATA_NODE"
    )
    assert g.meta["chakra.skipped_nodes"] == "0:1,0:2,0:3,0:5"


def test_unsupported_nodes_can_be_errors(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "u.0.et", chakra_node(0, COLL, comm_type=S.COMM_TYPES["BARRIER"]))
    with pytest.raises(
        TraceError,
        match=re.escape(f"{path}: node 0: COMM_COLL_NODE BARRIER is not supported by acesim"),
    ):
        read_chakra(tmp_path / "u", unsupported="error")
    path = write_rank(tmp_path / "c.0.et", chakra_node(0, COMP, is_cpu_op=True))
    with pytest.raises(TraceError, match=re.escape(f"{path}: node 0: CPU compute")):
        read_chakra(tmp_path / "c", cpu_ops="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_chakra(tmp_path / "c", cpu_ops="compute").ranks[0][0].kind == "compute"


def test_process_group_is_reported(tmp_path: Path) -> None:
    write_rank(tmp_path / "pg.0.et", chakra_node(0, COLL, comm_type=0, comm_size=8, pg_name="3"))
    with pytest.warns(ChakraWarning, match="process groups 3"):
        g = read_chakra(tmp_path / "pg")
    assert g.meta["chakra.pg_names"] == "3"


# -- corrupt input: a TraceError naming the file and the node -------------------------------------
def good_nodes() -> list[Any]:
    return [chakra_node(0, COMP, duration_micros=1), chakra_node(1, COMP, (0,), duration_micros=1)]


def expect(path: Path, message: str, **kw: Any) -> None:
    with pytest.raises(TraceError) as info:
        read_chakra(path, **kw)
    assert str(info.value) == message


def test_truncated_varint(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "t.0.et", *good_nodes())
    path.write_bytes(path.read_bytes() + b"\x85")
    size = path.stat().st_size
    expect(path, f"{path}: truncated varint at byte {size - 1} (record 3, after node 1)")


def test_truncated_message(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "t.0.et", *good_nodes())
    data = path.read_bytes()
    path.write_bytes(data[:-2])
    start = len(data) - len(frame(good_nodes()[1]))
    expect(
        path,
        f"{path}: truncated message: length prefix says "
        f"{len(good_nodes()[1].SerializeToString())} bytes, "
        f"{len(good_nodes()[1].SerializeToString()) - 2} left at byte {start} "
        "(record 2, after node 0)",
    )


def test_node_first_instead_of_global_metadata(tmp_path: Path) -> None:
    path = tmp_path / "n.0.et"
    path.write_bytes(b"".join(frame(n) for n in good_nodes()))
    expect(
        path,
        f"{path}: first message is a Node (node 0), not a GlobalMetadata; "
        "a Chakra trace starts with GlobalMetadata",
    )


def test_metadata_where_a_node_belongs(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "m.0.et", good_nodes()[0], meta())
    offset = len(frame(meta())) + len(frame(good_nodes()[0]))
    expect(
        path,
        f"{path}: message at byte {offset} (record 2, after node 0) is not a Node: "
        "field 1 has wire type 2",
    )


def test_garbage_bytes(tmp_path: Path) -> None:
    path = tmp_path / "g.0.et"
    path.write_bytes(b"\x04\xff\xff\xff\xff")
    expect(
        path,
        f"{path}: first message (byte 0) is not a GlobalMetadata: "
        "truncated varint inside the message",
    )
    path.write_bytes(b"\x02\xff\x07")
    expect(
        path,
        f"{path}: first message (byte 0) is not a GlobalMetadata: "
        "field 127 has unsupported wire type 7",
    )
    path.write_bytes(frame(meta()) + b"\x03\x08\x01\x1f")
    expect(
        path,
        f"{path}: message at byte 8 (record 1, before the first node) is not a Node: "
        "field 3 has wire type 7",
    )


def test_dependency_cycle(tmp_path: Path) -> None:
    path = write_rank(
        tmp_path / "c.0.et",
        chakra_node(0, COMP, duration_micros=1),
        chakra_node(1, COMP, (0, 3), duration_micros=1),
        chakra_node(2, COMP, (1,), duration_micros=1),
        chakra_node(3, COMP, (2,), duration_micros=1),
        chakra_node(4, COMP, (3,), duration_micros=1),
    )
    expect(path, f"{path}: node 1: dependency cycle: 1 -> 3 -> 2 -> 1 (each depends on the next)")


def test_dependency_on_a_missing_node(tmp_path: Path) -> None:
    path = write_rank(
        tmp_path / "m.0.et", good_nodes()[0], chakra_node(1, COMP, (0, 42), duration_micros=1)
    )
    expect(path, f"{path}: node 1: depends on missing node 42")


def test_repeated_node_id(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "r.0.et", good_nodes()[0], good_nodes()[0])
    expect(path, f"{path}: node 0: node id 0 repeats")


def test_rank_file_missing_from_the_set(tmp_path: Path) -> None:
    write_rank(tmp_path / "x.0.et", *good_nodes())
    write_rank(tmp_path / "x.2.et", *good_nodes())
    missing = tmp_path / "x.1.et"
    expect(
        tmp_path / "x",
        f"{missing}: rank file missing from the set of 3: {missing} (found ranks 0, 2)",
    )
    write_rank(tmp_path / "y.0.et", *good_nodes())
    expect(
        tmp_path / "y",
        f"{tmp_path / 'y.1.et'}: rank file missing from the set of 2: "
        f"{tmp_path / 'y.1.et'} (found ranks 0)",
        npus=2,
    )
    with pytest.raises(TraceError, match=re.escape(f"{missing}: rank file missing")):
        read_chakra([tmp_path / "x.0.et", tmp_path / "x.2.et"])
    expect(
        tmp_path / "nothing",
        f"{tmp_path / 'nothing'}.*.et: no Chakra trace files <prefix>.<rank>.et found",
    )


def test_send_without_matching_recv(tmp_path: Path) -> None:
    path = write_rank(
        tmp_path / "p.0.et", chakra_node(0, SEND, comm_src=0, comm_dst=1, comm_tag=1, comm_size=4)
    )
    write_rank(
        tmp_path / "p.1.et", chakra_node(0, RECV, comm_src=0, comm_dst=1, comm_tag=2, comm_size=4)
    )
    expect(
        tmp_path / "p",
        f"{path}: node 0: send to rank 1 (tag 1, 4 bytes) has no matching "
        "recv on rank 1 (1 sends, 0 recvs)",
    )


def test_peer_outside_the_trace(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "q.0.et", chakra_node(0, SEND, comm_dst=5, comm_size=4))
    expect(path, f"{path}: node 0: comm_dst 5 is not a rank of this 1-rank trace")


def test_collectives_that_differ_between_ranks(tmp_path: Path) -> None:
    write_rank(tmp_path / "k.0.et", chakra_node(0, COLL, comm_type=0, comm_size=8))
    path = write_rank(tmp_path / "k.1.et", chakra_node(0, COLL, comm_type=0, comm_size=16))
    expect(
        tmp_path / "k",
        f"{path}: node 0: all-reduce of 16 bytes over all dimensions is "
        "issued 1 times here but 0 times on rank 0",
    )


def test_attribute_of_the_wrong_kind(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "a.0.et", chakra_node(0, COLL, comm_type=0, comm_size="big"))
    expect(path, f"{path}: node 0: attribute 'comm_size' must be an integer, got string_val")


def test_partial_all_gather_needs_dim_sizes(tmp_path: Path) -> None:
    path = write_rank(
        tmp_path / "ag.0.et",
        chakra_node(
            0, COLL, comm_type=S.COMM_TYPES["ALL_GATHER"], comm_size=8, involved_dim=[True, False]
        ),
    )
    with pytest.raises(TraceError, match="needs dim_sizes"):
        read_chakra(path)
    assert read_chakra(path, dim_sizes=[4, 2]).ranks[0][0].size == 32.0
    g = Graph(ranks=[[Node(0, "ag", "collective", op="all-gather", size=8.0, dims=(0,))]])
    with pytest.raises(WorkloadError, match="needs dim_sizes"):
        write_chakra(g, tmp_path / "w")


# a read that warns (skipped nodes) is an outcome like any other
@pytest.mark.filterwarnings("ignore::acesim.workload.chakra.reader.ChakraWarning")
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tail=st.binary(max_size=64))
def test_random_bytes_never_hang_or_crash(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "h.0.et"
    path.write_bytes(frame(meta()) + tail)
    try:
        read_chakra(path)
    except TraceError as exc:
        assert str(path) in str(exc)


# -- simulated: the round trip keeps the iteration time -------------------------------------------
@pytest.mark.parametrize("zoo_name", ["resnet50", "dlrm"])
def test_zoo_workload_round_trip_simulates_the_same(tmp_path: Path, zoo_name: str) -> None:
    system = make_system([dim("ring", 4), dim("ring", 2)])
    graph = build_graph(load_zoo(zoo_name), 2)
    write_chakra(graph, tmp_path / zoo_name, npus=8, dim_sizes=[4, 2])
    back = read_chakra(tmp_path / zoo_name, dim_sizes=[4, 2])
    assert back.ranks[0] == graph.ranks[0] and back.symmetric
    before = GraphExecutor(Platform(system), graph).run().makespan
    after = GraphExecutor(Platform(system), back).run().makespan
    assert after == before > 0


def test_microbenchmark_traces_simulate(tmp_path: Path) -> None:
    system = make_system([dim("ring", 2, bandwidth=100e9, latency=1e-6)])
    for r in range(2):
        write_rank(
            tmp_path / f"mb.{r}.et",
            chakra_node(0, COMP, duration_micros=5),
            chakra_node(1, COLL, (0,), comm_type=0, comm_size=1 << 20),
            chakra_node(2, SEND, (1,), comm_src=r, comm_dst=1 - r, comm_tag=9, comm_size=1 << 20),
            chakra_node(3, RECV, (1,), comm_src=1 - r, comm_dst=r, comm_tag=9, comm_size=1 << 20),
        )
    graph = read_chakra(tmp_path / "mb")
    execution = GraphExecutor(Platform(system, exact=True), graph).run()
    rec = execution.records[0]
    assert rec[0].end == pytest.approx(5e-6)
    assert rec[1].start == pytest.approx(5e-6) and rec[1].end > rec[1].start
    assert rec[2].start == pytest.approx(rec[1].end) and rec[3].end > rec[3].start
    # A 1 MiB message over a 100 GB/s link takes at least 10.5 us.
    assert rec[3].end - rec[3].start >= (1 << 20) / 100e9


def test_every_exported_compute_node_has_num_ops_and_tensor_size(tmp_path: Path) -> None:
    # ASTRA-sim 2.0's roofline mode reads both on every compute node; without them the rank
    # never finishes (and ASTRA-sim still exits 0).
    from acesim.workload.chakra import schema
    from acesim.workload.chakra.stream import iter_records
    from acesim.workload.zoo import load_zoo

    graph = build_graph(load_zoo("resnet50", batch_per_npu=2), 1)
    files = write_chakra(graph, tmp_path / "rn", npus=2)
    checked = 0
    for path in files:
        records = list(iter_records(path.read_bytes()))
        for _offset, data in records[1:]:  # record 0 is the global metadata
            node = schema.Node()
            node.ParseFromString(bytes(data))
            if node.type != schema.NODE_TYPES["COMP_NODE"]:
                continue
            names = {a.name: a for a in node.attr}
            assert {"num_ops", "tensor_size"} <= set(names), node.name
            assert names["num_ops"].WhichOneof("value") == "int64_val"
            assert names["tensor_size"].WhichOneof("value") == "uint64_val"
            checked += 1
    assert checked > 100  # conv1.ig (no work) among them


def test_a_collective_without_comm_type_or_size_is_a_trace_error(tmp_path: Path) -> None:
    from acesim.workload.chakra import schema
    from acesim.workload.chakra.stream import write_message

    for missing in ("comm_type", "comm_size"):
        path = tmp_path / f"{missing}.0.et"
        with open(path, "wb") as out:
            write_message(out, schema.GlobalMetadata(version="0.0.4"))
            node = schema.Node(id=0, name="ar", type=schema.NODE_TYPES["COMM_COLL_NODE"])
            for name, value in (("comm_type", 0), ("comm_size", 1024)):
                if name != missing:
                    attr = node.attr.add()
                    attr.name = name
                    attr.int64_val = value
            write_message(out, node)
        with pytest.raises(TraceError, match=f"needs the attribute '{missing}'"):
            read_chakra(str(tmp_path / missing))


def test_memory_only_nodes_carry_one_operation_for_astra_sim(tmp_path: Path) -> None:
    # ASTRA-sim 2.0's roofline divides 0 by 0 on num_ops = 0 with tensor_size > 0 and never
    # finishes the rank; acesim's own reading keeps the exact 0 FLOPs.
    from acesim.workload.chakra import schema
    from acesim.workload.chakra.stream import iter_records

    node = Node(0, "emb", "compute", compute=Compute(flops=0, hbm_bytes=4096))
    files = write_chakra(Graph([[node]], name="mem"), tmp_path / "m", npus=1)
    (_offset, data) = list(iter_records(files[0].read_bytes()))[1]
    msg = schema.Node()
    msg.ParseFromString(bytes(data))
    attrs = {a.name: a for a in msg.attr}
    assert attrs["num_ops"].int64_val == 1 and attrs["tensor_size"].uint64_val == 4096
    (back,) = read_chakra(str(tmp_path / "m.0.et")).ranks[0]
    assert back.compute == Compute(flops=0, hbm_bytes=4096)


# -- passes of several kernels --------------------------------------------------------------
def _compute_messages(path: Path) -> list[Any]:
    from acesim.workload.chakra.stream import iter_records

    out = []
    for _offset, data in list(iter_records(path.read_bytes()))[1:]:
        node = S.Node()
        node.ParseFromString(bytes(data))
        if node.type == COMP:
            out.append(node)
    return out


def test_a_pass_of_several_kernels_is_one_node_with_their_totals(tmp_path: Path) -> None:
    """ASTRA-sim 2.0 has one roofline per node, so a zoo pass (a GEMM, batch-norm, ReLU, ...)
    is written as one node whose num_ops and tensor_size are its kernels' sums; the kernels
    themselves ride along in acesim_kernels, which acesim reads back exactly."""
    graph = build_graph(load_zoo("resnet50", batch_per_npu=2), 1)
    (path,) = write_chakra(graph, tmp_path / "rn", npus=1)
    nodes = {n.name: n for n in graph.ranks[0]}
    conv = nodes["layer_64_1_conv1.fwd"].compute
    assert conv is not None and len(conv.kernels) == 4
    msg = next(m for m in _compute_messages(path) if m.name == "layer_64_1_conv1.fwd")
    attrs = {a.name: a for a in msg.attr}
    assert attrs["num_ops"].int64_val == round(conv.flops)
    assert attrs["tensor_size"].uint64_val == round(conv.hbm_bytes)
    assert "acesim_kernels" in attrs
    back = read_chakra(path)
    assert back.ranks[0] == graph.ranks[0]
    # As ASTRA-sim's roofline sees it: the totals alone (one roofline kernel a pass).
    rooflined = {n.name: n.compute for n in read_chakra(path, roofline=True).ranks[0]}
    totals = Compute(flops=conv.flops, hbm_bytes=conv.hbm_bytes)
    assert rooflined["layer_64_1_conv1.fwd"] == totals


def test_kernels_that_disagree_with_the_totals_give_way_to_them(tmp_path: Path) -> None:
    # A tool that edits num_ops wins over acesim's kernel list, as with acesim's exact values.
    from acesim.hardware.kernels import Gemm, Stream
    from acesim.workload.chakra.kernels import encode_kernels

    kernels = (Gemm(64, 64, 64), Stream(1024.0))
    text = encode_kernels(kernels)
    ok = Compute(kernels=kernels)
    write_rank(
        tmp_path / "k.0.et",
        chakra_node(
            0, COMP, num_ops=int(ok.flops), tensor_size=int(ok.hbm_bytes), acesim_kernels=text
        ),
        chakra_node(1, COMP, num_ops=7, tensor_size=int(ok.hbm_bytes), acesim_kernels=text),
    )
    first, second = read_chakra(tmp_path / "k").ranks[0]
    assert first.compute == ok
    assert second.compute == Compute(flops=7, hbm_bytes=ok.hbm_bytes)


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '{"k": [["gemm", {"m": -1, "n": 1, "k": 1}]], "o": [0]}',
        '{"k": [["warp", {}]], "o": [0]}',
        '{"k": [], "o": [0]}',
    ],
)
def test_a_bad_kernel_list_is_a_trace_error_naming_the_node(tmp_path: Path, text: str) -> None:
    write_rank(
        tmp_path / "b.0.et", chakra_node(0, COMP, num_ops=1, tensor_size=1, acesim_kernels=text)
    )
    with pytest.raises(TraceError, match=r"b\.0\.et: node 0: attribute 'acesim_kernels' is not"):
        read_chakra(tmp_path / "b")
