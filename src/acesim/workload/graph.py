"""Execution graphs: per-rank nodes with dependencies (the form Chakra traces have).

A node is a compute kernel, a collective, a point-to-point send/receive, or a host-device copy
(``host_copy``: ``size`` bytes in direction ``op``, ``h2d`` or ``d2h``, on the NPU's copy
engines over its host link: offload; ``op`` ``cpu``: a CPU step streaming ``size`` bytes
through the NPU's share of host memory, the offloaded optimizer's update), or the host
thread issuing launches (``host``: ``size`` seconds of host time,
:mod:`acesim.training.host`), or a composed pipeline pass (``pass``: ``size`` seconds, the
duration of a like pass simulated alone, holding no resource: :mod:`acesim.training.compose`).
``deps`` lists the ids (same rank) that must finish before the node may start; compute nodes
of one rank run one at a time on its compute stream, in ready order (ties by id). A collective
node runs on a communicator (``dims``: whole network dimensions, None = all; or ``group``: any
:class:`~acesim.network.group.Group`) and finishes at a rank when that rank's part is done;
instances of a collective are matched across ranks by their order of issue among collectives
with the same (op, size, communicator). ``iteration`` and ``layer`` are labels for reports;
``blocking`` marks communication that the training loop waits on (reports count its time as
exposed, and by default its chunks go before others'); ``priority``, when set, overrides that.

A graph holds one node list per rank, or a single list that every rank runs (a builder's
rank-agnostic graph). ``npus`` is the number of ranks the graph was made for (a Chakra trace's
file count) or None when it runs on any number; a system of another size is an error.
Symmetric mode runs one representative for each class of identical ranks: with ``classes``
None that is one class, so it needs every rank's list to be the same; a graph with ``classes``
(:class:`~acesim.network.classes.RankClasses`) holds one node list per class, whose
point-to-point peers are classes (class mode).

A composed graph may leave a pass's form to the run (``choices``: per rank, a timer node's
id and how to build the pass's own nodes). When the timer becomes ready the run decides: with
a collective that runs beside passes (:func:`beside_passes`: a DP collective) in flight at
the rank, the pass's own nodes are built and run, and the timer finishes with the last of
them, leaving no record; else the timer runs (:mod:`acesim.training.compose`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import WorkloadError
from ..network.classes import RankClasses
from ..network.group import Group
from .model import Comm, Compute

NodeKind = Literal["compute", "collective", "send", "recv", "host_copy", "host", "pass"]
#: builds a pipeline pass's own nodes: they (ids 0, 1, ..., each dependency an earlier node
#: of the pass; the first ones depend on nothing) and the id of its end, what follows waits on
PassBuilder = Callable[[], tuple[list["Node"], int]]


@dataclass
class Node:
    """One node of a rank's execution graph.

    Attributes:
        id: unique within the rank.
        name: label.
        kind: compute, collective, send, recv, host_copy, host or pass.
        deps: ids of nodes (same rank) that must finish first.
        compute: for compute nodes.
        op, size, dims, group: for collectives (bytes per NPU; the communicator: dims None =
            all dimensions, or a group).
        priority: chunk priority of a collective (None: blocking collectives first).
        units: compute units a collective's kernels hold (None: the endpoint's setting;
            :class:`~acesim.workload.model.Comm`).
        peer, tag, size: for send/recv (peer rank, matching tag, bytes).
        op, size: for host_copy (``h2d`` or ``d2h``, bytes).
        size: for host (the host thread issuing kernel launches, :mod:`acesim.training.host`):
            seconds of host time; for pass (a composed pass, :mod:`acesim.training.compose`):
            its duration, s; neither holds a GPU resource.
        layer, iteration, pass_name: labels for reports.
        episode: the pipeline pass the node belongs to, ``(shape, instance)``: the shape its
            ops' (name, chunk) pairs, the instance (iteration, micro-batches); None outside a
            pass (mode composed names the passes it keeps in full by it,
            :mod:`acesim.training.compose`).
    """

    id: int
    name: str
    kind: NodeKind
    deps: tuple[int, ...] = ()
    compute: Compute | None = None
    op: str | None = None
    size: float = 0.0
    dims: tuple[int, ...] | None = None
    group: Group | None = None
    peer: int | None = None
    tag: int = 0
    layer: str | None = None
    iteration: int = 0
    pass_name: str = ""
    blocking: bool = False
    priority: int | None = None
    units: int | None = None
    episode: tuple[Any, ...] | None = None


def placed(node: Node, id: int, deps: tuple[int, ...], iteration: int = 0) -> Node:
    """``replace(node, id=id, deps=deps, iteration=iteration)``, made from its fields at once
    (a node's ``__dict__`` holds its fields, and its constructor only sets them)."""
    moved: Node = object.__new__(Node)
    fields = moved.__dict__
    fields.update(node.__dict__)
    fields["id"], fields["deps"], fields["iteration"] = id, deps, iteration
    return moved


def beside_passes(node: Node) -> bool:
    """Whether ``node`` is a collective that runs beside a pipeline's passes, sharing the NPU
    with them: one outside any pass (the DP gradient reduction, the distributed optimizer's
    parameter gather) or labelled ``dp`` within one (FSDP's gathers and reduce-scatters)."""
    return node.kind == "collective" and (node.episode is None or node.pass_name == "dp")


def collective_fields(comm: Comm) -> dict[str, Any]:
    """A collective node's fields from its :class:`~acesim.workload.model.Comm`."""
    return {
        "kind": "collective",
        "op": comm.op,
        "size": comm.size,
        "dims": comm.dims,
        "group": comm.group,
        "units": comm.units,
    }


def _renumbered(nodes: list[Node]) -> list[Node]:
    """``nodes`` with each id replaced by the node's position (deps likewise): what a rank's
    graph is apart from the ids it happens to use."""
    position = {n.id: i for i, n in enumerate(nodes)}
    return [
        replace(n, id=i, deps=tuple(position.get(d, -1 - d) for d in n.deps))
        for i, n in enumerate(nodes)
    ]


@dataclass
class Graph:
    """Execution graphs of every rank (``ranks[r]`` is rank r's node list)."""

    ranks: list[list[Node]]
    name: str = ""
    iterations: int = 1
    meta: dict[str, str] = field(default_factory=dict)
    npus: int | None = None
    #: class mode: ``ranks[i]`` is class i's representative's list (None: one list per rank)
    classes: RankClasses | None = None
    #: passes whose form the run decides (module docstring): per rank, each such pass's
    #: timer id -> its builder (None: none)
    choices: list[dict[int, PassBuilder]] | None = None

    @property
    def symmetric(self) -> bool:
        """True when every rank has the same graph (symmetric mode applies): the same nodes
        in the same order, whatever ids each rank numbers them with (generated Chakra traces,
        ASTRA-sim's microbenchmarks among them, give each rank its own ids)."""
        first = self.ranks[0]
        if all(r is first or r == first for r in self.ranks[1:]):
            return True
        if any(len(r) != len(first) for r in self.ranks[1:]):
            return False
        shape = _renumbered(first)
        return all(r is first or _renumbered(r) == shape for r in self.ranks[1:])

    def validate(self, where: str = "graph") -> None:
        """Raise :class:`WorkloadError` on duplicate ids, missing deps or cycles."""
        for rank, nodes in enumerate(self.ranks):
            if _positional(nodes):
                continue  # ids 0, 1, ...: unique, each dependency an earlier node's
            ids: dict[int, Node] = {}
            for node in nodes:
                if node.id in ids:
                    raise WorkloadError(f"rank {rank}: node id {node.id} repeats", location=where)
                ids[node.id] = node
            ordered = True  # every node depends on nodes of lower ids only: no cycle
            for node in nodes:
                for dep in node.deps:
                    if dep not in ids:
                        raise WorkloadError(
                            f"rank {rank}: node {node.id} depends on missing node {dep}",
                            location=where,
                        )
                    if dep >= node.id:
                        ordered = False
            if ordered:
                continue
            # Kahn's algorithm for cycles.
            indeg = {n.id: len(set(n.deps)) for n in nodes}
            users: dict[int, list[int]] = {}
            for node in nodes:
                for dep in set(node.deps):
                    users.setdefault(dep, []).append(node.id)
            ready = [i for i, d in indeg.items() if d == 0]
            seen = 0
            while ready:
                i = ready.pop()
                seen += 1
                for u in users.get(i, []):
                    indeg[u] -= 1
                    if indeg[u] == 0:
                        ready.append(u)
            if seen != len(nodes):
                stuck = sorted(i for i, d in indeg.items() if d > 0)[:5]
                raise WorkloadError(
                    f"rank {rank}: dependency cycle among nodes {stuck}", location=where
                )


def _positional(nodes: list[Node]) -> bool:
    """Whether each node's id is its index and each of its dependencies a lower id (what
    :meth:`Graph.validate` checks, the builders' usual graph: nothing more to check)."""
    index = 0
    try:
        for node in nodes:
            if node.id != index:
                return False
            for dep in node.deps:
                if not 0 <= dep < index:
                    return False
            index += 1
    except TypeError:  # an id that is no number: the full checks say what is wrong
        return False
    return True
