"""Communicator groups: which ranks a collective runs on, mapped onto the network's dimensions.

A group is described relative to the rank that issues it, one :class:`Span` per network
dimension it extends over; on every other dimension it is the rank alone. Along a spanned
dimension the members are ``size`` coordinates ``stride`` apart, in the aligned block that holds
the rank's own coordinate: with coordinate ``c``, ``k = (c // stride) % size`` is the rank's
position in the group and the members are ``c + (j - k) * stride`` for ``j`` in ``0..size-1``.
So every rank belongs to exactly one group of the same shape (the ranks are tiled), and the
description is the same at every rank: symmetric mode stays valid.

Examples on a node of 8 GPUs behind an NVSwitch (dimension 0) times 4 nodes (dimension 1):

* ``Group.whole((0, 1))``: all 32 ranks (a data-parallel group);
* ``Group((Span(0, 4),))``: tensor parallelism over half a node (ranks 0-3, 4-7, ...);
* ``Group((Span(0, 2, stride=4), Span(1)))``: the data-parallel group beside TP=4 (ranks
  ``{0, 4, 8, 12, ...}``).

Rules (checked when a collective is issued, :func:`resolve`): a spanned dimension exists, is not
spanned twice, and ``size * stride`` divides its size; on a ``ring`` dimension a group must be
the whole ring (a slice of a ring is a line, not a ring; multi-hop routing is not modelled).
Groups that are not a product of per-dimension spans (an arbitrary rank list) are not
expressible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import TopologyError
from .topology import Topology

__all__ = ["Span", "Group", "Axis", "resolve", "members", "group_to_json", "group_from_json"]


@dataclass(frozen=True)
class Span:
    """A group's extent along one dimension.

    Attributes:
        dim: dimension index (0 = innermost) or its name.
        size: members along the dimension (None = the whole dimension / ``stride``).
        stride: coordinate distance between consecutive members (>= 1).
    """

    dim: int | str
    size: int | None = None
    stride: int = 1


@dataclass(frozen=True)
class Group:
    """A communicator: the spans it extends over, and an optional label (``tp``, ``dp``)."""

    spans: tuple[Span, ...]
    name: str = ""

    @classmethod
    def whole(cls, dims: Iterable[int | str], name: str = "") -> Group:
        """The group of every rank that differs from the issuer only in ``dims``."""
        return cls(tuple(Span(d) for d in dims), name)


@dataclass(frozen=True, order=True)
class Axis:
    """A resolved span: dimension index, members along it, coordinate stride."""

    dim: int
    size: int
    stride: int = 1

    def position(self, coordinate: int) -> int:
        """The index (0..size-1) within the group of a rank with this coordinate."""
        return (coordinate // self.stride) % self.size

    def coordinate(self, own: int, position: int) -> int:
        """The coordinate of the member at ``position`` in the group of coordinate ``own``."""
        return own + (position - self.position(own)) * self.stride


def _dim_index(topology: Topology, dim: int | str, where: str) -> int:
    dims = topology.dimensions
    if isinstance(dim, str):
        for d in dims:
            if d.name == dim:
                return d.index
        names = ", ".join(d.name for d in dims)
        raise TopologyError(f"{where}: no dimension named {dim!r} (dimensions: {names})")
    if not 0 <= dim < len(dims):
        raise TopologyError(f"{where}: dimension {dim} does not exist (topology has {len(dims)})")
    return dim


def resolve(
    topology: Topology,
    group: Group | Iterable[int] | None,
    where: str = "collective group",
) -> tuple[Axis, ...]:
    """The axes of ``group`` on ``topology`` (a Group, dimension indices, or None = every
    dimension), sorted by dimension; dimensions of size 1 and spans of size 1 are dropped.
    Raises TopologyError naming ``where`` when a rule of the module docstring is broken."""
    if group is None:
        spans: tuple[Span, ...] = tuple(Span(d.index) for d in topology.dimensions)
    elif isinstance(group, Group):
        spans = group.spans
        if group.name:
            where = f"{where} {group.name!r}"
    else:
        spans = tuple(Span(int(d)) for d in group)
    axes: dict[int, Axis] = {}
    for span in spans:
        index = _dim_index(topology, span.dim, where)
        if index in axes:
            raise TopologyError(f"{where}: dimension {index} is spanned twice")
        d = topology.dimensions[index]
        stride = span.stride
        if not isinstance(stride, int) or stride < 1:
            raise TopologyError(f"{where}: stride on {d.name!r} must be at least 1, got {stride}")
        size = d.size // stride if span.size is None else span.size
        if not isinstance(size, int) or size < 1:
            raise TopologyError(f"{where}: size on {d.name!r} must be at least 1, got {size}")
        if d.size % (size * stride):
            raise TopologyError(
                f"{where}: {size} members {stride} apart do not tile dimension {d.name!r} of "
                f"{d.size} (size x stride must divide it)"
            )
        if d.kind == "ring" and 1 < size < d.size:
            raise TopologyError(
                f"{where}: a group on ring dimension {d.name!r} must span the whole ring "
                f"({d.size}), got {size} members (a slice of a ring is not a ring)"
            )
        axes[index] = Axis(index, size, stride)
    return tuple(axes[i] for i in sorted(axes) if axes[i].size > 1)


def members(topology: Topology, group: Group | Iterable[int] | None, rank: int) -> tuple[int, ...]:
    """The ranks of the instance of ``group`` that holds ``rank`` (sorted; the rules of
    :func:`resolve` apply)."""
    if not 0 <= rank < topology.npus:
        raise TopologyError(f"rank {rank} is not one of the {topology.npus} NPUs")
    ranks = [rank]
    for axis in resolve(topology, group):
        stride = topology.dimensions[axis.dim].stride
        own = topology.coordinate(rank, axis.dim)
        offsets = [(axis.coordinate(own, j) - own) * stride for j in range(axis.size)]
        ranks = [r + off for r in ranks for off in offsets]
    return tuple(sorted(ranks))


def group_to_json(group: Group) -> list[object]:
    """``group`` as JSON-ready data: ``[name, [[dim, size, stride], ...]]``."""
    return [group.name, [[s.dim, s.size, s.stride] for s in group.spans]]


def group_from_json(data: object) -> Group:
    """The inverse of :func:`group_to_json`; ValueError when ``data`` is not one."""
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)):
        raise ValueError(f"not a group: {data!r}")
    name, spans = data
    if not isinstance(spans, list):
        raise ValueError(f"not a list of spans: {spans!r}")
    out = []
    for span in spans:
        if not (isinstance(span, list) and len(span) == 3):
            raise ValueError(f"not a span [dim, size, stride]: {span!r}")
        dim, size, stride = span
        if not isinstance(dim, int | str) or not (size is None or isinstance(size, int)):
            raise ValueError(f"not a span [dim, size, stride]: {span!r}")
        if not isinstance(stride, int):
            raise ValueError(f"not a span stride: {stride!r}")
        out.append(Span(dim, size, stride))
    return Group(tuple(out), name)
