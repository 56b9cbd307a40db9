"""Network topology: a list of dimensions; NPU ranks are mixed-radix coordinates.

Leaf/spine dimensions (``leaf_size``, ``oversubscription``) add, in exact mode, the leaves'
up- and downlinks that messages between leaves share (:mod:`acesim.network.collective`).

A network dimension (the NICs between nodes) may also state what the path from a GPU to its
NIC sustains: the NIC's proxy (``nic_efficiency``, NCCL's proxy thread) and the NPU's share of
the PCIe link from the NIC to its PCIe switch (``pcie_bandwidth`` x ``pcie_efficiency`` x
``links_per_npu`` / (``ports_per_nic`` x ``npus_per_link``)); the collective runtime makes each
a resource of every NPU (:mod:`acesim.network.collective`).

Model: each dimension gives every NPU an *egress* capacity ``links_per_npu * link_bandwidth *
protocol_efficiency / npus_per_link`` (B/s; ``npus_per_link`` > 1 where NPUs share a link, e.g.
a NIC serving two GPUs: each NPU's fair share while all of them send, which every collective
over whole nodes does) shared by everything it sends along that dimension, and a fixed
per-message latency, and the same *ingress* capacity for what it receives (the runtime charges
both, so incast binds at the receiver); a bidirectional
ring (``links_per_npu >= 2``) splits each message over both directions, which the aggregate
egress capacity represents exactly. Rank ``r`` has coordinate ``(r // stride_d) % size_d`` in
dimension ``d`` (dimension 0 varies fastest).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.system import CollectiveConfig, DimensionConfig, NetworkConfig, dimension_name
from ..errors import TopologyError


@dataclass(frozen=True)
class Dimension:
    """One dimension, with capacities already in SI units.

    Attributes:
        index: position in the topology (0 = innermost, e.g. "local").
        name: label.
        kind: ring, fully_connected or switch.
        size: NPUs along the dimension.
        egress_bandwidth: payload B/s one NPU can send into this dimension.
        latency: s per message (link latency).
        stride: rank distance between neighbours in this dimension.
        switch_reduction: its switch reduces in the network (in-switch algorithms may run).
        efficiency: the payload fraction of its links (egress = links x bandwidth x this).
        incast_fan_in: the most writers per receiver a switch port takes at full rate (None:
            any number).
        incast_efficiency: the fraction of the links' bandwidth a step with more writers per
            receiver than ``incast_fan_in`` delivers.
        network: its links are NICs between nodes (NCCL's network step latencies apply).
    """

    index: int
    name: str
    kind: str
    size: int
    egress_bandwidth: float
    latency: float
    links: int
    stride: int
    switch_reduction: bool = False
    efficiency: float = 1.0
    incast_fan_in: int | None = None
    incast_efficiency: float = 1.0
    #: NICs on a scale-out network (NCCL's network step latencies apply)
    network: bool = False
    #: coordinates under one leaf switch (None: one non-blocking switch) and the leaves'
    #: downlink over uplink bandwidth
    leaf_size: int | None = None
    oversubscription: float = 1.0
    #: network dimensions: the fraction of its egress the NIC's proxy sustains (a per-NPU
    #: resource every send takes; 1: none), and the NPU's share of the PCIe path to its NIC,
    #: payload B/s each way (None: not modelled)
    nic_efficiency: float = 1.0
    pcie_bandwidth: float | None = None
    #: network dimensions: NCCL's network overhead, the least latency of a step of a ring
    #: through several nodes (Simple: three times it), s
    net_overhead: float = 0.0

    @property
    def proxy_bandwidth(self) -> float:
        """What the NIC's proxy sustains of one NPU's sends, payload B/s."""
        return self.egress_bandwidth * self.nic_efficiency

    @property
    def send_bandwidth(self) -> float:
        """One NPU's sending rate alone on this dimension, payload B/s: its links' egress,
        or less where its NIC's proxy or its PCIe path to the NIC sustains less (what NCCL's
        tuner sees of the path, :mod:`acesim.network.plan`)."""
        rate = self.proxy_bandwidth
        if self.pcie_bandwidth is not None:
            rate = min(rate, self.pcie_bandwidth)
        return rate

    def leaf(self, coordinate: int) -> int:
        """The leaf switch of a coordinate (0 without leaves)."""
        return 0 if self.leaf_size is None else coordinate // self.leaf_size

    @property
    def spine(self) -> bool:
        """Messages between leaves cross an oversubscribed spine here."""
        return (
            self.leaf_size is not None
            and self.size > self.leaf_size
            and self.oversubscription > 1.0
        )


class Topology:
    """The NPUs and the dimensions connecting them."""

    def __init__(self, network: NetworkConfig, collective: CollectiveConfig):
        dims = []
        stride = 1
        for i, cfg in enumerate(network.dimensions):
            dims.append(self._dimension(i, cfg, stride, collective))
            stride *= cfg.size
        self.dimensions: tuple[Dimension, ...] = tuple(dims)
        self.npus = stride

    @staticmethod
    def _dimension(
        i: int,
        cfg: DimensionConfig,
        stride: int,
        collective: CollectiveConfig,
    ) -> Dimension:
        if cfg.kind == "ring" and cfg.size > 2 and cfg.links_per_npu > 1 and cfg.links_per_npu % 2:
            raise TopologyError(
                f"network.dimensions[{i}].links_per_npu: a ring with more than one link per NPU "
                f"must have an even count (half each way), got {cfg.links_per_npu}"
            )
        name = dimension_name(i, cfg.name)
        efficiency = collective.protocol_efficiency if cfg.efficiency is None else cfg.efficiency
        return Dimension(
            index=i,
            name=name,
            kind=cfg.kind,
            size=cfg.size,
            egress_bandwidth=cfg.link_bandwidth
            * cfg.links_per_npu
            * efficiency
            / cfg.npus_per_link,
            latency=cfg.link_latency,
            links=cfg.links_per_npu,
            stride=stride,
            switch_reduction=cfg.switch_reduction,
            efficiency=efficiency,
            incast_fan_in=cfg.incast_fan_in,
            incast_efficiency=cfg.incast_efficiency,
            network=cfg.network,
            leaf_size=cfg.leaf_size,
            oversubscription=cfg.oversubscription,
            nic_efficiency=cfg.nic_efficiency,
            net_overhead=cfg.net_overhead,
            pcie_bandwidth=None
            if cfg.pcie_bandwidth is None
            else cfg.pcie_bandwidth
            * cfg.pcie_efficiency
            * cfg.links_per_npu
            / (cfg.ports_per_nic * cfg.npus_per_link),
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dimensions)

    def coordinate(self, rank: int, dim: int) -> int:
        d = self.dimensions[dim]
        return (rank // d.stride) % d.size

    def peer(self, rank: int, dim: int, coordinate: int) -> int:
        """The rank that differs from ``rank`` only in ``dim``, where it has ``coordinate``."""
        d = self.dimensions[dim]
        own = (rank // d.stride) % d.size
        return rank + (coordinate - own) * d.stride

    def describe(self) -> str:
        return " x ".join(f"{d.name}:{d.kind}({d.size})" for d in self.dimensions)
