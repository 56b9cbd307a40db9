"""Point-to-point messages routed dimension by dimension.

A message from ``src`` to ``dst`` travels, in dimension order, one hop per dimension in which
their coordinates differ (a switch or fully connected dimension is one hop; on a ring the
message also takes one modelled hop, with the ring's per-NPU egress capacity — multi-hop ring
routing is not modelled). Each hop is a fluid activity on the egress capacity of the NPU it
leaves from and the ingress capacity of the NPU it reaches (many senders to one receiver share
its ingress: incast), charged like an all-to-all byte by the endpoint, followed by the hop's latency
plus the per-message endpoint delay. Point-to-point traffic names absolute peers, so it is
simulated in exact mode, or in class mode between class representatives
(:mod:`acesim.network.classes`: each hop on the resources of the classes of the ranks it
leaves and reaches).

:func:`shift_destination` names a group member's successor (group positions in mixed radix,
the innermost axis fastest, as NCCL numbers the ranks of a multi-node communicator): a
sendrecv over several dimensions (``CollectiveOp.routed_shift``) sends each member's buffer
there as one such routed message (exact mode; the runtime's ``_join_shift``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..engine import Activity
from .algorithms import ALLTOALL
from .classes import RankClasses, hops
from .group import Axis
from .topology import Topology


def shift_destination(
    topology: Topology, axes: tuple[Axis, ...], rank: int, offset: int = 1
) -> int:
    """The global rank ``offset`` positions after ``rank`` in its group over ``axes``
    (innermost first; group position ``sum_k position_k x size_0 ... size_{k-1}``, modulo the
    group's size)."""
    index = 0
    scale = 1
    for axis in axes:
        index += axis.position(topology.coordinate(rank, axis.dim)) * scale
        scale *= axis.size
    index = (index + offset) % scale
    out = rank
    for axis in axes:
        own = topology.coordinate(rank, axis.dim)
        out = topology.peer(out, axis.dim, axis.coordinate(own, index % axis.size))
        index //= axis.size
    return out


class _Message(NamedTuple):
    """A message on its way: ``size`` bytes, and what :meth:`PointToPoint.send` was told to
    call (on delivery, and as each hop's bytes are out)."""

    size: float
    on_delivered: Callable[[], Any]
    on_hop: Callable[[int, float], Any] | None


class PointToPoint:
    """Sends messages over a :class:`~acesim.network.collective.CollectiveRuntime`'s network."""

    def __init__(self, runtime: Any, classes: RankClasses | None = None):
        self.rt = runtime
        #: class mode: simulated ranks are classes, routed between their representatives
        self.classes = classes
        self.bytes_sent_per_dim: dict[int, float] = {}
        self._routes: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def _hops(self, src: int, dst: int) -> list[tuple[int, int]]:
        """(dimension, next simulated rank) hops from ``src`` to ``dst`` in dimension order."""
        route = self._routes.get((src, dst))
        if route is None:
            topo = self.rt.topology
            route = (
                hops(topo, src, dst) if self.classes is None else self.classes.route(topo, src, dst)
            )
            self._routes[(src, dst)] = route
        return route

    def send(
        self,
        src: int,
        dst: int,
        size: float,
        on_delivered: Callable[[], Any],
        on_hop: Callable[[int, float], Any] | None = None,
    ) -> None:
        """Send ``size`` bytes from simulated rank ``src`` to ``dst`` (exact or class mode); call
        ``on_delivered``, and ``on_hop(dimension, bytes)`` as each hop's bytes are out."""
        hops = self._hops(src, dst)
        if not hops:
            self.rt.engine.schedule(0.0, on_delivered)
            return
        self._hop(hops, 0, src, _Message(size, on_delivered, on_hop))

    def _hop(self, hops: list[tuple[int, int]], index: int, sim_rank: int, msg: _Message) -> None:
        """Send ``msg`` over ``hops[index]`` from simulated rank ``sim_rank``, then the next."""
        rt = self.rt
        size = msg.size
        dim, nxt = hops[index]
        demand = {rt.egress[sim_rank][dim]: 1.0, rt.ingress[nxt][dim]: 1.0}
        demand.update(rt.endpoint.message_demand(sim_rank, ALLTOALL))
        if rt.paths[dim]:  # the NIC's proxy and the PCIe path, where the system states them
            rt.add_path_demand(demand, sim_rank, nxt, dim, 1.0)

        def sent(_act: Activity) -> None:
            self.bytes_sent_per_dim[dim] = self.bytes_sent_per_dim.get(dim, 0.0) + size
            if msg.on_hop is not None:
                msg.on_hop(dim, size)
            if index + 1 < len(hops):
                rt.engine.call(rt.delays[dim], self._hop, hops, index + 1, nxt, msg)
            else:
                rt.engine.call(rt.delays[dim], msg.on_delivered)

        rt.shares.start(
            sim_rank,
            size,
            demand,
            sent,
            tag=("p2p", dim),
            track=rt.tracks.get(sim_rank),
        )
