"""A system as ASTRA-sim 2.0's network, system and remote-memory files (``acesim
export-chakra --astra``): the platform that runs the exported Chakra traces there.

The inverse of :mod:`acesim.config.astra` (whose module docstring states the conventions): a
dimension's ASTRA-sim ``bandwidth`` is its egress capacity (``links_per_npu x link_bandwidth x
efficiency / npus_per_link``) in GB/s of 2^30 bytes, per link for a ``FullyConnected`` one
(divided over its ``n - 1`` links); ``latency`` is acesim's per-message latency in ns, halved on
a switch (two links a message). The system file carries the collective settings, each
operation's algorithm on each dimension, ``local-mem-bw`` = the HBM bandwidth (GB/s of 10^9
bytes) and ``roofline-enabled = 0``: ASTRA-sim replays the traces' ``duration_micros``, the
kernel times acesim computed. What ASTRA-sim's files cannot say (an endpoint that charges SMs
or HBM, a tuner choosing algorithms, leaf/spine oversubscription, incast) is listed in the
notes, never dropped silently; an algorithm ASTRA-sim does not have is an error.
"""

from __future__ import annotations

from typing import Any

from ..config.astra import ASTRA_ALGORITHMS, ASTRA_TOPOLOGIES, GIB
from ..config.system import SystemConfig
from ..errors import ConfigError
from .plan import algorithm_for
from .topology import Topology

__all__ = ["AstraFiles", "astra_files"]

_TOPOLOGY_OF_KIND = {kind: name for name, kind in ASTRA_TOPOLOGIES.items()}
_NAME_OF_ALGORITHM = {algo: name for name, algo in ASTRA_ALGORITHMS.items()}
_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


class AstraFiles:
    """The three documents and the notes on what they cannot express."""

    def __init__(
        self,
        network: dict[str, Any],
        system: dict[str, Any],
        memory: dict[str, Any],
        notes: list[str],
    ):
        self.network = network
        self.system = system
        self.memory = memory
        self.notes = notes


def _number(value: float) -> float | int:
    """``value`` rounded to 1e-6 of its unit (ns, GB/s: a float product's last bits are not
    the system's), a whole number as an int (ASTRA-sim's files write cycles that way)."""
    value = round(value, 6)
    return int(value) if float(value).is_integer() else value


def astra_files(system: SystemConfig) -> AstraFiles:
    """ASTRA-sim's network, system and remote-memory documents for ``system`` (module
    docstring); ConfigError naming the field for an algorithm ASTRA-sim does not have."""
    topology = Topology(system.network, system.collective)
    notes: list[str] = []
    kinds, sizes, bandwidths, latencies = [], [], [], []
    for d in topology.dimensions:
        per_link = d.egress_bandwidth
        if d.kind == "fully_connected" and d.size > 1:
            per_link /= d.size - 1
        hops = 2 if d.kind == "switch" else 1
        kinds.append(_TOPOLOGY_OF_KIND[d.kind])
        sizes.append(d.size)
        bandwidths.append(per_link / GIB)
        latencies.append(_number(d.latency * 1e9 / hops))
        if d.spine:
            notes.append(f"{d.name}: leaf/spine oversubscription (ASTRA-sim's switch is flat)")
        if d.incast_fan_in is not None:
            notes.append(f"{d.name}: incast above {d.incast_fan_in} writers (not in ASTRA-sim)")
    cfg = system.collective
    doc: dict[str, Any] = {
        "scheduling-policy": cfg.scheduling.upper(),
        "endpoint-delay": _number(cfg.endpoint_delay * 1e9),
        "active-chunks-per-dimension": cfg.active_chunks_per_dimension,
        "preferred-dataset-splits": cfg.chunks,
    }
    for op in _OPS:
        names = []
        for index in range(len(topology.dimensions)):
            algo = algorithm_for(cfg, topology, op, index)
            name = _NAME_OF_ALGORITHM.get(algo)
            if name is None:
                raise ConfigError(
                    f"collective.algorithms.{op}",
                    f"ASTRA-sim has no {algo!r} algorithm (it runs "
                    f"{', '.join(ASTRA_ALGORITHMS.values())})",
                    algo,
                )
            names.append(name)
        doc[f"{op}-implementation"] = names
    doc["collective-optimization"] = (
        "localBWAware" if cfg.composition == "hierarchical" else "baseline"
    )
    doc["local-mem-bw"] = _number(system.npu.hbm_bandwidth / 1e9)
    doc["boost-mode"] = 0
    doc["roofline-enabled"] = 0
    if cfg.choices:
        notes.append(
            "collective.choices: ASTRA-sim has no tuner; its files run collective.algorithms "
            "(acesim chooses per collective among the choices)"
        )
    if system.endpoint.kind != "ideal":
        notes.append(
            f"endpoint {system.endpoint.kind}: ASTRA-sim charges collectives no SMs and each "
            "reduction 3 m / local-mem-bw of time; acesim's ideal endpoint is its nearest"
        )
    network = {
        "topology": kinds,
        "npus_count": sizes,
        "bandwidth": bandwidths,
        "latency": latencies,
    }
    return AstraFiles(network, doc, {"memory-type": "NO_MEMORY_EXPANSION"}, notes)
