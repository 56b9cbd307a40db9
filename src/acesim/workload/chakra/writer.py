"""Write an execution :class:`Graph` as Chakra traces that ASTRA-sim 2.0 can run.

One file per rank, ``<prefix>.<rank>.et``: a GlobalMetadata (``version`` "0.0.4", as Chakra's
generator writes, plus acesim's graph name, iterations and meta), then one Node per graph node
in graph order, with dependencies as ``data_deps`` (the only kind ASTRA-sim's feeder honours).
Attributes use the names and value kinds ASTRA-sim's feeder reads (see :mod:`.attrs`); every
node carries ``is_cpu_op`` = false, since older feeders default it to true.

Compute: a roofline ``Compute(flops, hbm_bytes)`` is written as ``num_ops`` and ``tensor_size``
(ASTRA-sim needs ``roofline-enabled`` in its system file to use them); a duration as
``duration_micros`` (integer microseconds). A pass of several kernels (GEMMs, attention,
memory-bound kernels) is one node with their summed FLOPs and bytes, ASTRA-sim 2.0 having only
a roofline per node; the kernels themselves go in ``acesim_kernels`` (:mod:`.kernels`) for
acesim's reader. ``compute_time`` optionally fills
``duration_micros`` of roofline nodes too, so ASTRA-sim can run them without its roofline; those
durations are marked (``acesim_duration_derived``) and ignored when acesim reads the file back.

Communicator groups (a collective on a :class:`~acesim.network.group.Group`: TP, DP, PP groups
of an LLM run): given the network's topology, each group instance (its sorted member ranks) gets
an id from 1 in order of first appearance (rank by rank); the node carries ``pg_name`` = that id
and ``comm_size`` per the group's size, and ``<prefix>.comm_groups.json`` maps every id to its
ranks: ASTRA-sim 2.0's ``--comm-group-configuration`` file. acesim's reader takes the group
itself back from ``acesim_group`` (its spans, JSON).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TopologyError, WorkloadError
from ...network.group import Group, group_to_json, members
from ...network.topology import Topology
from ...units import format_size
from ..graph import Graph, Node
from ..model import Compute
from . import attrs as A
from . import mapping, schema
from .attrs import attr
from .kernels import encode_kernels
from .stream import write_message

__all__ = ["write_chakra", "export_chakra", "ChakraExport", "CHAKRA_VERSION"]

#: GlobalMetadata.version written (the schema version of Chakra's generator and converters).
CHAKRA_VERSION = "0.0.4"
_INT64_MAX = 2**63 - 1


def _as_int(value: float, what: str, where: str) -> int:
    if not math.isfinite(value) or value < 0 or value > _INT64_MAX:
        raise WorkloadError(
            f"{what} must be a finite non-negative number, got {value}", location=where
        )
    return round(value)


def _exact_attr(name: str, value: float, written: int, scale: float = 1.0) -> list[Any]:
    """acesim's exact value beside a rounded standard field, when rounding lost something."""
    if value * scale == written:
        return []
    return [attr(name, double_val=value)]


def _compute_node(
    msg: Any,
    c: Compute,
    where: str,
    compute_time: Callable[[Compute], float] | None,
) -> None:
    msg.type = schema.NODE_TYPES["COMP_NODE"]
    # Every compute node carries num_ops and tensor_size (0 without work): ASTRA-sim 2.0's
    # roofline mode reads both on every compute node and stops the rank without them.
    num_ops = _as_int(c.flops, "flops", where)
    tensor_size = _as_int(c.hbm_bytes, "hbm_bytes", where)
    if num_ops == 0 and tensor_size > 0:
        # ASTRA-sim 2.0's roofline takes a node's rate as min(peak, num_ops / tensor_size x
        # memory bandwidth): with no operation that is 0, the node's time 0/0, and the rank
        # never finishes. One operation gives it its memory time (acesim_flops keeps the 0).
        num_ops = 1
    msg.attr.append(attr(A.NUM_OPS, int64_val=num_ops))
    msg.attr.append(attr(A.TENSOR_SIZE, uint64_val=tensor_size))
    msg.attr.extend(_exact_attr(A.A_FLOPS, c.flops, num_ops))
    msg.attr.extend(_exact_attr(A.A_HBM_BYTES, c.hbm_bytes, tensor_size))
    if c.duration is not None:
        micros = _as_int(c.duration * 1e6, "duration", where)
        msg.duration_micros = micros
        if micros == 0 or c.duration * 1e6 != micros:
            msg.attr.append(attr(A.A_DURATION, double_val=c.duration))
    elif compute_time is not None and (c.flops or c.hbm_bytes):
        seconds = compute_time(c)
        msg.duration_micros = _as_int(seconds * 1e6, "compute_time", where)
        msg.attr.append(attr(A.A_DURATION_DERIVED, bool_val=True))
    if c.blocks is not None:
        msg.attr.append(attr(A.A_BLOCKS, int64_val=c.blocks))
    rebuilt = Compute(flops=c.flops, hbm_bytes=c.hbm_bytes, duration=c.duration, blocks=c.blocks)
    if c.kernels != rebuilt.kernels:
        msg.attr.append(attr(A.A_KERNELS, string_val=encode_kernels(c.kernels)))


def _to_message(
    node: Node,
    rank: int,
    where: str,
    *,
    npus: int,
    dim_sizes: Sequence[int] | None,
    compute_time: Callable[[Compute], float] | None,
    groups: _Groups | None = None,
) -> Any:
    if node.id < 0:
        raise WorkloadError(f"node id must not be negative, got {node.id}", location=where)
    msg = schema.Node(id=node.id, name=node.name)
    msg.data_deps.extend(node.deps)
    msg.attr.append(attr(A.IS_CPU_OP, bool_val=False))
    if node.kind == "compute":
        _compute_node(msg, node.compute or Compute(), where, compute_time)
    elif node.kind == "collective":
        _collective_node(msg, node, rank, where, npus, dim_sizes, groups)
    elif node.kind in ("send", "recv"):
        _p2p_node(msg, node, rank, where, npus)
    else:
        raise WorkloadError(f"node kind {node.kind!r} has no Chakra node type", location=where)
    _add_node_context(msg, node)
    return msg


def _collective_node(
    msg: Any,
    node: Node,
    rank: int,
    where: str,
    npus: int,
    dim_sizes: Sequence[int] | None,
    groups: _Groups | None,
) -> None:
    """A collective: its Chakra comm_type, its size per contribution (bytes), its group (a
    communicator group's id, or the network dimensions it involves)."""
    op = node.op or ""
    if op not in mapping.COLL_TYPES:
        raise WorkloadError(f"collective {op!r} has no Chakra comm_type", location=where)
    factor, group_id = _contributions(node, op, rank, where, npus, dim_sizes, groups)
    comm_size = _as_int(node.size / factor, "size", where)
    msg.type = schema.NODE_TYPES["COMM_COLL_NODE"]
    msg.attr.append(attr(A.COMM_TYPE, int64_val=mapping.COLL_TYPES[op]))
    msg.attr.append(attr(A.COMM_SIZE, int64_val=comm_size))
    if comm_size * factor != node.size or group_id is not None:
        msg.attr.append(attr(A.A_SIZE, double_val=node.size))
    if group_id is not None and node.group is not None:
        msg.attr.append(attr(A.PG_NAME, string_val=str(group_id)))
        text = json.dumps(group_to_json(node.group), separators=(",", ":"))
        msg.attr.append(attr(A.A_GROUP, string_val=text))
    if node.dims is not None:
        width = len(dim_sizes) if dim_sizes is not None else max(node.dims, default=-1) + 1
        if any(d < 0 or d >= width for d in node.dims) or not node.dims:
            raise WorkloadError(
                f"dims {node.dims} do not fit a {width}-dimensional network", location=where
            )
        flags = [d in node.dims for d in range(width)]
        msg.attr.append(attr(A.INVOLVED_DIM, bool_list=schema.BoolList(values=flags)))


def _contributions(
    node: Node,
    op: str,
    rank: int,
    where: str,
    npus: int,
    dim_sizes: Sequence[int] | None,
    groups: _Groups | None,
) -> tuple[int, int | None]:
    """How many contributions make the collective's size (Chakra's size is per contribution
    for the ops :func:`mapping.size_factor` names, else 1), and its communicator group's id
    (None on whole network dimensions)."""
    if node.group is not None:
        if groups is None:
            raise WorkloadError(
                "a collective on a communicator group (not whole network dimensions) needs "
                "the network's topology to be written (write_chakra(topology=...))",
                location=where,
            )
        try:
            ranks = groups.topology_members(node.group, rank)
        except TopologyError as err:
            raise WorkloadError(str(err), location=where) from None
        group_id = groups.ids.setdefault(ranks, len(groups.ids) + 1)
        return (len(ranks) if mapping.size_factor(op) else 1), group_id
    if not mapping.size_factor(op):
        return 1, None
    group = mapping.group_size(node.dims, dim_sizes, npus)
    if group is None:
        raise WorkloadError(
            f"{op} over dims {node.dims} needs dim_sizes (the network's dimension "
            "sizes) to write Chakra's per-NPU contribution",
            location=where,
        )
    return group, None


def _p2p_node(msg: Any, node: Node, rank: int, where: str, npus: int) -> None:
    """A send or a receive: its source and destination ranks, tag and size (bytes)."""
    if node.peer is None or not 0 <= node.peer < npus:
        raise WorkloadError(f"peer {node.peer} is not a rank of {npus}", location=where)
    send = node.kind == "send"
    msg.type = schema.NODE_TYPES["COMM_SEND_NODE" if send else "COMM_RECV_NODE"]
    size = _as_int(node.size, "size", where)
    msg.attr.append(attr(A.COMM_SRC, int32_val=rank if send else node.peer))
    msg.attr.append(attr(A.COMM_DST, int32_val=node.peer if send else rank))
    msg.attr.append(attr(A.COMM_TAG, int32_val=node.tag))
    msg.attr.append(attr(A.COMM_SIZE, int64_val=size))
    msg.attr.extend(_exact_attr(A.A_SIZE, node.size, size))


def _add_node_context(msg: Any, node: Node) -> None:
    """acesim's attributes of any node: layer, iteration, pass, blocking, priority (each only
    when set)."""
    if node.layer is not None:
        msg.attr.append(attr(A.A_LAYER, string_val=node.layer))
    if node.iteration:
        msg.attr.append(attr(A.A_ITERATION, int64_val=node.iteration))
    if node.pass_name:
        msg.attr.append(attr(A.A_PASS, string_val=node.pass_name))
    if node.blocking:
        msg.attr.append(attr(A.A_BLOCKING, bool_val=True))
    if node.priority is not None:
        msg.attr.append(attr(A.A_PRIORITY, int64_val=node.priority))


@dataclass
class _Groups:
    """The communicator group instances written so far: sorted member ranks -> id."""

    topology: Topology
    ids: dict[tuple[int, ...], int] = field(default_factory=dict)

    def topology_members(self, group: Group, rank: int) -> tuple[int, ...]:
        return members(self.topology, group, rank)


def write_chakra(
    graph: Graph,
    prefix: str | os.PathLike[str],
    *,
    npus: int | None = None,
    dim_sizes: Sequence[int] | None = None,
    compute_time: Callable[[Compute], float] | None = None,
    topology: Topology | None = None,
) -> list[Path]:
    """Write ``graph`` as ``<prefix>.<rank>.et`` files; return their paths in rank order.

    Args:
        graph: the execution graph (validated first).
        prefix: path prefix of the files; its directory is created.
        npus: number of rank files; a one-rank (symmetric) graph is replicated to ``npus``
            files. Default: one file per rank of the graph.
        dim_sizes: NPUs per network dimension: sets the length of ``involved_dim`` and the group
            of an all-gather over a subset of dimensions (Chakra's size is per contribution).
        compute_time: seconds a roofline Compute takes, to fill ``duration_micros`` too.
        topology: the network, for collectives on communicator groups (see the module); the
            group file ``<prefix>.comm_groups.json`` is then written too (last in the list).

    Raises:
        WorkloadError: the graph is invalid or holds something Chakra cannot express.
    """
    graph.validate(where=f"{graph.name or 'graph'} (Chakra export)")
    ranks = _rank_nodes(graph, npus)
    n = len(ranks)
    prefix = Path(prefix)
    if prefix.parent and not prefix.parent.exists():
        prefix.parent.mkdir(parents=True, exist_ok=True)
    metadata = _metadata(graph)
    groups = None
    if topology is not None:
        if n != topology.npus:
            raise WorkloadError(
                f"graph has {n} ranks but the topology {topology.npus} NPUs",
                location=graph.name or None,
            )
        groups = _Groups(topology)
    paths: list[Path] = []
    for rank, nodes in enumerate(ranks):
        path = prefix.parent / f"{prefix.name}.{rank}.et"
        messages = [
            _to_message(
                node,
                rank,
                f"{path}: node {node.id}",
                npus=n,
                dim_sizes=dim_sizes,
                compute_time=compute_time,
                groups=groups,
            )
            for node in nodes
        ]
        _write_rank_file(path, metadata, messages)
        paths.append(path)
    groups_path = _write_groups(prefix, groups)
    if groups_path is not None:
        paths.append(groups_path)
    remove_stale_ranks(prefix, len(ranks))
    return paths


def _rank_nodes(graph: Graph, npus: int | None) -> list[list[Node]]:
    """The nodes of each rank file: the graph's ranks, or its one rank replicated to ``npus``
    files (refused where that cannot stand for every rank)."""
    ranks = graph.ranks
    if npus is None or npus == len(ranks):
        return ranks
    if len(ranks) != 1:
        raise WorkloadError(
            f"graph has {len(ranks)} ranks, cannot write {npus} rank files",
            location=graph.name or None,
        )
    if npus > 1 and any(n.kind in ("send", "recv") for n in ranks[0]):
        # A peer is an absolute rank: copies of one rank's sends would all target it.
        raise WorkloadError(
            "cannot replicate a one-rank graph with send/recv nodes to several rank files; "
            "build the graph for every rank",
            location=graph.name or None,
        )
    return [ranks[0]] * npus


def _metadata(graph: Graph) -> Any:
    """Every rank file's GlobalMetadata: the Chakra version, the graph's name, iterations and
    meta (not what a reader noted about a trace it read)."""
    metadata = schema.GlobalMetadata(version=CHAKRA_VERSION)
    if graph.name:
        metadata.attr.append(attr(A.A_GRAPH_NAME, string_val=graph.name))
    metadata.attr.append(attr(A.A_GRAPH_ITERATIONS, int64_val=graph.iterations))
    for key, value in graph.meta.items():
        if key.startswith("chakra."):
            continue  # what the reader noted about a trace it read, not the graph's own
        metadata.attr.append(attr(A.A_META_PREFIX + key, string_val=str(value)))
    return metadata


def _write_rank_file(path: Path, metadata: Any, messages: list[Any]) -> None:
    """One rank's file, written whole beside it and then moved into place."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        write_message(out, metadata)
        for msg in messages:
            write_message(out, msg)
    os.replace(tmp, path)


def _write_groups(prefix: Path, groups: _Groups | None) -> Path | None:
    """``<prefix>.comm_groups.json`` (ASTRA-sim's communicator group file) when collectives
    ran on groups, and its path; else remove an earlier export's and return None."""
    groups_path = prefix.parent / f"{prefix.name}.comm_groups.json"
    if groups is not None and groups.ids:
        lines = [f' "{i}": {json.dumps(list(ranks))}' for ranks, i in groups.ids.items()]
        groups_path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
        return groups_path
    if groups_path.exists():
        groups_path.unlink()  # an earlier export's groups, which these ranks do not use
    return None


def remove_stale_ranks(prefix: Path, ranks: int) -> list[Path]:
    """Delete ``<prefix>.<r>.et`` for ``r >= ranks``: rank files of an earlier, larger export
    to the same prefix, which a reader (acesim's, ASTRA-sim's) would otherwise take as part of
    this trace. Returns what was deleted."""
    removed: list[Path] = []
    rank = ranks
    while True:  # rank files are numbered without gaps: stop at the first missing one
        path = prefix.parent / f"{prefix.name}.{rank}.et"
        if not path.is_file():
            return removed
        path.unlink()
        removed.append(path)
        rank += 1


@dataclass
class ChakraExport:
    """What :func:`export_chakra` wrote."""

    files: list[Path]
    nodes: int
    kinds: dict[str, int] = field(default_factory=dict)
    collectives: dict[str, int] = field(default_factory=dict)
    comm_bytes: float = 0.0
    bytes_written: int = 0

    @property
    def ranks(self) -> int:
        return sum(1 for f in self.files if f.suffix == ".et")

    def _kinds(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items())) or "none"

    def _collectives(self) -> str:
        return ", ".join(f"{n} {op}" for op, n in sorted(self.collectives.items()))

    def _groups(self) -> Path | None:
        return next((f for f in self.files if f.suffix == ".json"), None)

    def lines(self) -> list[str]:
        """The summary as sentences (``str()``)."""
        first = self.files[0] if self.files else "-"
        out = [
            f"wrote {self.ranks} Chakra rank files ({first} ...), "
            f"{format_size(self.bytes_written)}",
            f"{self.nodes} nodes: {self._kinds()}",
        ]
        groups = self._groups()
        if groups is not None:
            out.append(f"communicator groups: {groups} (--comm-group-configuration)")
        if self.collectives:
            out.append(
                f"collectives: {self._collectives()}; {format_size(self.comm_bytes)} of "
                "communication (all ranks)"
            )
        return out

    def rows(self) -> list[tuple[str, str]]:
        """The summary as (item, value) rows of text (the table `acesim export-chakra`
        prints), sizes with their units."""
        ets = [f for f in self.files if f.suffix == ".et"]
        span = f"{ets[0]} ... {ets[-1]}" if len(ets) > 1 else str(ets[0]) if ets else "-"
        out = [
            ("rank files", f"{self.ranks} ({span})"),
            ("bytes written", format_size(self.bytes_written)),
            ("nodes", f"{self.nodes}: {self._kinds()}"),
        ]
        groups = self._groups()
        if groups is not None:
            out.append(("communicator groups (--comm-group-configuration)", str(groups)))
        if self.collectives:
            out.append(("collectives", self._collectives()))
            out.append(("communication (all ranks)", format_size(self.comm_bytes)))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def export_chakra(
    graph: Graph,
    prefix: str | os.PathLike[str],
    *,
    npus: int | None = None,
    dim_sizes: Sequence[int] | None = None,
    compute_time: Callable[[Compute], float] | None = None,
    topology: Topology | None = None,
) -> ChakraExport:
    """:func:`write_chakra` plus a summary of what was written (for ``acesim export-chakra``)."""
    files = write_chakra(
        graph,
        prefix,
        npus=npus,
        dim_sizes=dim_sizes,
        compute_time=compute_time,
        topology=topology,
    )
    ranks = graph.ranks if npus is None or len(graph.ranks) != 1 else graph.ranks * npus
    kinds: Counter[str] = Counter()
    colls: Counter[str] = Counter()
    comm = 0.0
    for nodes in ranks:
        for node in nodes:
            kinds[node.kind] += 1
            if node.kind == "collective" and node.op:
                colls[node.op] += 1
                comm += node.size
            elif node.kind == "send":
                comm += node.size
    return ChakraExport(
        files=files,
        nodes=sum(kinds.values()),
        kinds=dict(kinds),
        collectives=dict(colls),
        comm_bytes=comm,
        bytes_written=sum(p.stat().st_size for p in files),
    )
