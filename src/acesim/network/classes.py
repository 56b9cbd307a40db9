"""Class mode: one simulated representative per class of identical ranks.

Symmetric mode simulates one NPU and maps every peer of a collective onto it. Class mode
generalises it to ``C`` classes of ranks that are identical by symmetry (an LLM run's
pipeline stages: the TP/CP/DP/EP replicas of a stage do the same work at the same times on a
symmetric platform). The classes are contiguous blocks of ``block`` global ranks (class ``i``
holds ranks ``i * block .. (i + 1) * block - 1``) and class ``i`` is simulated by the NPU of
simulated rank ``i``, standing for its representative global rank ``i * block``.

What stays exact (a reduction, not an approximation):

* a collective whose group lies within one class: every member runs the same traffic, so the
  representative receiving its own messages for its peers' is symmetric mode's model, per
  class;
* a point-to-point message between representatives (``a`` to ``b``) stands for the messages
  from every member ``r`` of ``a`` to ``r + (rep_b - rep_a)``: each member sends one. It is
  routed from ``rep_a`` to ``rep_b`` dimension by dimension (:mod:`.p2p`), each hop on the
  egress of the class that holds the rank it leaves from and the ingress of the class of the
  rank it reaches. That is exact when every member takes the same dimensions and, at each hop,
  the ranks all members pass through lie in one class (then they are distinct: the map from a
  member to its hop rank is one-to-one, so every member of that class forwards exactly one
  message). :meth:`RankClasses.route_problem` checks it; a case that fails it runs in exact
  mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import TopologyError
from .topology import Topology

__all__ = ["RankClasses", "hops"]


def hops(topology: Topology, src: int, dst: int) -> list[tuple[int, int]]:
    """(dimension, next global rank) hops of a message from ``src`` to ``dst``, in dimension
    order (one per dimension in which their coordinates differ)."""
    out = []
    here = src
    for d in range(len(topology.dimensions)):
        target = topology.coordinate(dst, d)
        if topology.coordinate(here, d) != target:
            here = topology.peer(here, d, target)
            out.append((d, here))
    return out


@dataclass(frozen=True)
class RankClasses:
    """``count`` classes of ``block`` consecutive global ranks each (module docstring)."""

    count: int
    block: int

    def __post_init__(self) -> None:
        if self.count < 1 or self.block < 1:
            raise TopologyError(
                f"rank classes need at least one class of at least one rank, got {self.count} "
                f"of {self.block}"
            )

    @property
    def npus(self) -> int:
        """Global ranks the classes cover."""
        return self.count * self.block

    def representative(self, cls: int) -> int:
        """The global rank that class ``cls``'s simulated NPU stands for."""
        return cls * self.block

    def of(self, rank: int) -> int:
        """The class (simulated rank) of global rank ``rank``."""
        return rank // self.block

    def route(self, topology: Topology, src: int, dst: int) -> list[tuple[int, int]]:
        """(dimension, class reached) hops of a message from class ``src`` to ``dst``."""
        return [
            (d, self.of(r))
            for d, r in hops(topology, self.representative(src), self.representative(dst))
        ]

    def route_problem(self, topology: Topology, pairs: Iterable[tuple[int, int]]) -> str | None:
        """Why messages between the class pairs ``pairs`` are not symmetric over the classes'
        members (module docstring), or None when class mode is exact for them."""
        if topology.npus != self.npus:
            return f"the classes cover {self.npus} ranks but the network has {topology.npus}"
        for a, b in sorted(set(pairs)):
            delta = self.representative(b) - self.representative(a)
            want = self.route(topology, a, b)
            for member in range(self.representative(a), self.representative(a) + self.block):
                got = [(d, self.of(r)) for d, r in hops(topology, member, member + delta)]
                if got != want:
                    return (
                        f"rank {member}'s messages to rank {member + delta} take "
                        f"{_describe(got)}, its class representative's {_describe(want)}"
                    )
        return None


def _describe(route: list[tuple[int, int]]) -> str:
    return ", ".join(f"dimension {d} to class {c}" for d, c in route) or "no hop"
