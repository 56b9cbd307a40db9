"""Rank placement (exact mode, ``run.placement``): workload rank ``r`` runs on NPU ``p[r]``.

A placement is a permutation ``p`` of the platform's NPU positions (checked by
:func:`acesim.config.variation.check_placement`). :func:`place_graph` maps a graph made for
workload ranks onto NPU positions:

* NPU ``p[r]`` runs rank ``r``'s node list (one list for every rank: that list);
* a point-to-point node's peer ``q`` becomes ``p[q]``;
* a collective's communicator (``dims`` or a :class:`~acesim.network.group.Group`, relative to
  the issuing rank) is mapped member by member: rank ``r``'s instance holds ranks ``M``; on
  the platform it runs on NPUs ``p[M]``. Where that is the instance the same communicator
  names at NPU ``p[r]`` (every collective over the whole platform, and groups the placement
  keeps together) the node is unchanged; otherwise the set is written as the group of one span
  per dimension its members differ in (their coordinates must be evenly spaced, tile the
  dimension, and span a ring dimension whole: :mod:`acesim.network.group`'s rules), checked to
  name exactly ``p[M]``, and a ConfigError naming ``run.placement`` and the group says the
  placement splits the group into a set the network cannot express when no such group exists.

Nothing else changes: stragglers, link changes and NPU types name NPU positions (the
hardware), and results are reported per NPU position. A placement that changes no node (the
identity, or any permutation of a one-list graph with only whole-platform collectives)
returns the graph itself, so exact mode's replicated and vectorized paths run as without it
(bit-identical results). Class-mode graphs (one list per class of ranks) take no placement.
Rooted collectives keep the runtime's root rule (the graph names no root).

:func:`place_job` does the same for a job of several sharing one system
(:mod:`acesim.runs.jobs`): a graph made for the job's own system (``source``, as many NPUs
as the job has) runs on NPUs ``npus[r]`` of the shared system (``target``); its communicators
are mapped member by member from the source's to the target's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..errors import ConfigError, TopologyError
from ..network.group import Group, Span, members
from ..network.topology import Topology
from .graph import Graph, Node

__all__ = ["place_graph", "place_job"]


def place_graph(
    graph: Graph, placement: Sequence[int] | None, topology: Topology, field: str = "run.placement"
) -> Graph:
    """``graph`` with workload rank ``r`` on NPU ``placement[r]`` (see the module docstring;
    ``placement`` already checked to be a permutation of the topology's NPUs; None: ``graph``).
    ConfigError naming ``field`` for a class-mode graph, a graph of another size, or a group
    the placement splits into a set the network cannot express."""
    if placement is None:
        return graph
    npus = topology.npus
    if graph.classes is not None:
        raise ConfigError(field, "applies to graphs with one node list per rank, not per class")
    if len(graph.ranks) not in (1, npus):
        return graph  # the executor reports the size mismatch
    cache: dict[tuple[int, tuple[int, ...] | None, Group | None], Group | None] = {}
    mapped: list[list[Node]] = [[] for _ in range(npus)]
    changed = False
    for rank in range(npus):
        nodes = graph.ranks[rank if len(graph.ranks) > 1 else 0]
        out = []
        for node in nodes:
            new = _place_node(node, rank, placement, topology, cache, field)
            changed = changed or new is not node
            out.append(new)
        mapped[placement[rank]] = out
    if not changed and (len(graph.ranks) == 1 or all(p == r for r, p in enumerate(placement))):
        return graph  # every NPU runs what it ran without the placement
    return replace(graph, ranks=mapped)


def place_job(
    graph: Graph, npus: Sequence[int], source: Topology, target: Topology, field: str
) -> dict[int, list[Node]]:
    """The node list of each NPU of ``target`` that ``graph`` (made for ``source``, one list
    for every rank or one per rank) runs on, rank ``r`` on NPU ``npus[r]`` (distinct NPUs of
    ``target``, one per NPU of ``source``). ConfigError naming ``field`` as
    :func:`place_graph`'s."""
    if graph.classes is not None:
        raise ConfigError(field, "applies to graphs with one node list per rank, not per class")
    if len(graph.ranks) not in (1, len(npus)):
        raise ConfigError(
            field, f"the job's graph has {len(graph.ranks)} ranks for {len(npus)} NPUs", npus
        )
    cache: dict[tuple[int, tuple[int, ...] | None, Group | None], Group | None] = {}
    out: dict[int, list[Node]] = {}
    for rank, npu in enumerate(npus):
        nodes = graph.ranks[rank if len(graph.ranks) > 1 else 0]
        out[npu] = [_place_node(n, rank, npus, target, cache, field, source) for n in nodes]
    return out


def _place_node(
    node: Node,
    rank: int,
    placement: Sequence[int],
    topology: Topology,
    cache: dict[tuple[int, tuple[int, ...] | None, Group | None], Group | None],
    field: str,
    source: Topology | None = None,
) -> Node:
    if node.kind in ("send", "recv"):
        if node.peer is not None and 0 <= node.peer < len(placement):
            peer = placement[node.peer]
            return node if peer == node.peer else replace(node, peer=peer)
        return node  # the executor reports a peer that does not exist
    whole = node.dims is None and node.group is None and source is None
    if node.kind != "collective" or whole:
        return node  # compute, or a collective over the whole platform
    key = (rank, node.dims, node.group)
    if key not in cache:
        cache[key] = _placed_group(node, rank, placement, topology, field, source)
    group = cache[key]
    return node if group is None else replace(node, dims=None, group=group)


def _placed_group(
    node: Node,
    rank: int,
    placement: Sequence[int],
    topology: Topology,
    field: str,
    source: Topology | None = None,
) -> Group | None:
    """The group naming, at NPU ``placement[rank]``, the NPUs rank ``rank``'s instance of
    ``node``'s communicator (on ``source``, default ``topology``) runs on; None when the
    node's own communicator already does."""
    comm = node.group if node.group is not None else node.dims
    where = f"collective {node.name!r}"
    try:
        own = members(topology if source is None else source, comm, rank)
    except TopologyError:
        return None  # the runtime reports a communicator the network cannot hold
    npu = placement[rank]
    target = tuple(sorted(placement[m] for m in own))
    try:
        unchanged = members(topology, comm, npu) == target
    except TopologyError:  # a communicator of the source that the target cannot hold
        unchanged = False
    if unchanged:
        return None
    name = node.group.name if node.group is not None else ""
    label = f"group {name!r}" if name else f"the group of dims {list(node.dims or ())}"
    spans = []
    for d in topology.dimensions:
        coords = sorted({topology.coordinate(m, d.index) for m in target})
        if len(coords) < 2:
            continue
        stride = coords[1] - coords[0]
        spans.append(Span(d.index, len(coords), stride))
    group = Group(tuple(spans), name)
    try:
        expressed = members(topology, group, npu)
    except TopologyError:
        expressed = ()
    if expressed != target:
        raise ConfigError(
            field,
            f"splits {label} of {where} (workload ranks {list(own)}) into NPUs "
            f"{list(target)}, a set the network cannot express as a group (one evenly "
            "spaced span per dimension; a ring dimension whole)",
        )
    return group
