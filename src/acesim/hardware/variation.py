"""Applying stragglers, NPU types and link changes (:mod:`acesim.config.variation`) to an exact
platform.

NPU types (:func:`npu_configs`): each rank's NPU configuration, the system's unless a
``run.npu_types`` entry names the rank. Each type is checked as the system's NPU would be: the
endpoint kind's settings against it (held units fewer than its units, ...), and its
``hbm_arbitration`` must be the system's (the endpoint arbitrates HBM one way for every NPU).

Links. A rank's egress on a dimension (:mod:`acesim.network.topology`) aggregates its
``links_per_npu`` links; messages are split evenly over them (as NCCL splits a collective over
its channels), so the slowest link paces the rank: the egress capacity becomes
``links * min(link bandwidth) * efficiency`` (the dimension's payload efficiency) and the
message latency the largest link latency. On a bidirectional ring (``links_per_npu >= 2``,
more than two NPUs) half the links go each way (``direction`` ``"+"``: towards rank+1,
``"-"``: towards rank-1).

Failures and rerouting:

* a bidirectional ring whose links fail in one direction somewhere reroutes: the whole ring
  (every NPU sharing the other coordinates) runs its collectives the other way, on that
  direction's links only (half the capacity, that direction's latencies); if both directions
  fail in one ring there is no path and the error names the links;
* a unidirectional ring (one link per NPU, or two NPUs) has no other path;
* a switch dimension has one port per NPU: a failed port cuts the NPU off;
* a fully connected dimension would need relayed (two-hop) traffic, which the direct
  algorithms do not model: an error, naming the link.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.system import NPUConfig, SystemConfig
from ..config.variation import LinkChange, Straggler, Variation
from ..errors import ConfigError, TopologyError
from ..network.collective import CollectiveRuntime
from ..network.topology import Topology
from .endpoints import ENDPOINT_KINDS
from .npu import NPU

__all__ = ["apply_variation", "check_stragglers", "link_name", "npu_configs"]


def link_name(topology: Topology, dim: int, rank: int, direction: str | None = None) -> str:
    """``npu17 -> npu18 (dimension 0 local, ring)``: the link(s) rank ``rank`` sends on along
    ``dim`` (one ``direction`` of a ring), for errors."""
    d = topology.dimensions[dim]
    if d.kind == "ring":
        coord = topology.coordinate(rank, d.index)
        step = -1 if direction == "-" else 1
        peer = topology.peer(rank, d.index, (coord + step) % d.size)
        return f"npu{rank} -> npu{peer} (dimension {d.index} {d.name}, ring)"
    if d.kind == "switch":
        return f"npu{rank}'s port (dimension {d.index} {d.name}, switch)"
    return f"npu{rank}'s links (dimension {d.index} {d.name}, {d.kind})"


def npu_configs(variation: Variation, system: SystemConfig, count: int) -> list[NPUConfig]:
    """Each of the ``count`` ranks' NPU configuration: the system's, or its ``npu_types``
    entry's (one object per entry, so ranks of one type can share their kernel plans);
    ConfigError naming the entry for a rank beyond the platform, a rank given twice, an NPU
    the endpoint's settings do not fit, or another ``hbm_arbitration``."""
    configs = [system.npu] * count
    owner: dict[int, int] = {}
    kind = ENDPOINT_KINDS.get(system.endpoint.kind)
    for i, entry in enumerate(variation.npu_types):
        field = f"run.npu_types[{i}]"
        if any(last >= count for _first, last in entry.spans()):  # before expanding a range
            raise ConfigError(
                f"{field}.ranks", f"must be ranks below {count} (the NPUs)", entry.ranks
            )
        ranks = entry.rank_list()
        for rank in ranks:
            if rank in owner:
                raise ConfigError(
                    f"{field}.ranks",
                    f"rank {rank} is already in run.npu_types[{owner[rank]}]",
                    entry.ranks,
                )
            owner[rank] = i
        config = entry.npu_config(system.npu, field)
        if config.hbm_arbitration != system.npu.hbm_arbitration:
            raise ConfigError(
                f"{field}.hbm_arbitration",
                f"must be the system's ({system.npu.hbm_arbitration!r}): the endpoint "
                "arbitrates HBM one way on every NPU",
                config.hbm_arbitration,
            )
        if kind.check is not None:
            try:
                kind.check(system.endpoint.settings(kind.name), system.model_copy(
                    update={"npu": config}))  # fmt: skip
            except ConfigError as err:
                raise ConfigError(
                    field,
                    f"{err.field}: {err.rule} (on this NPU, {config.name})",
                    err.value,
                    hint=err.hint,
                ) from None
        for rank in ranks:
            configs[rank] = config
    return configs


def check_stragglers(stragglers: Sequence[Straggler], count: int) -> None:
    """ConfigError naming the straggler unless each is a distinct rank below ``count``."""
    seen: set[int] = set()
    for i, straggler in enumerate(stragglers):
        field = f"run.stragglers[{i}].rank"
        if straggler.rank >= count:
            raise ConfigError(field, f"must be a rank below {count} (the NPUs)", straggler.rank)
        if straggler.rank in seen:
            raise ConfigError(field, "each rank may be a straggler once", straggler.rank)
        seen.add(straggler.rank)


def apply_variation(
    variation: Variation,
    system: SystemConfig,
    topology: Topology,
    npus: Sequence[NPU],
    collectives: CollectiveRuntime,
) -> None:
    """Set each NPU's slowdown and each changed rank's egress and latency (exact mode)."""
    count = topology.npus
    slowdowns = np.ones(count)
    if variation.compute_spread is not None:
        spread = variation.compute_spread
        slowdowns += spread.spread * np.random.default_rng(spread.seed).random(count)
    check_stragglers(variation.stragglers, count)
    for straggler in variation.stragglers:
        slowdowns[straggler.rank] *= straggler.slowdown
    for npu in npus:
        if slowdowns[npu.rank] != 1.0:
            npu.set_slowdown(float(slowdowns[npu.rank]))
    if variation.links:
        _apply_links(list(variation.links), system, topology, collectives)


def _apply_links(
    changes: list[LinkChange],
    system: SystemConfig,
    topology: Topology,
    collectives: CollectiveRuntime,
) -> None:
    dims = topology.dimensions
    # (dim, rank, direction) -> [bandwidth per link B/s, latency s, failed]
    links: dict[tuple[int, int, str], list[float | bool]] = {}
    for i, change in enumerate(changes):
        prefix = f"run.links[{i}]"
        if change.dim >= len(dims):
            raise ConfigError(f"{prefix}.dim", f"must be a dimension below {len(dims)}", change.dim)
        if change.rank >= topology.npus:
            raise ConfigError(
                f"{prefix}.rank", f"must be a rank below {topology.npus} (the NPUs)", change.rank
            )
        d = dims[change.dim]
        cfg = system.network.dimensions[change.dim]
        directions = _directions(d.kind, d.size, d.links)
        if change.direction is not None and change.direction not in directions:
            raise ConfigError(
                f"{prefix}.direction",
                f"dimension {d.index} ({d.kind} of {d.size}, {d.links} link(s) per NPU) has no "
                "separate directions",
                change.direction,
            )
        if change.bandwidth is None and change.latency is None and not change.failed:
            raise ConfigError(prefix, "give a bandwidth, a latency or failed = true")
        for direction in directions if change.direction is None else (change.direction,):
            key = (change.dim, change.rank, direction)
            if key in links:
                name = link_name(topology, change.dim, change.rank, change.direction)
                raise ConfigError(prefix, f"changes {name} a second time", change.rank)
            links[key] = [
                cfg.link_bandwidth if change.bandwidth is None else change.bandwidth,
                cfg.link_latency if change.latency is None else change.latency,
                change.failed,
            ]
            if change.failed:
                _check_reroutable(d.kind, d.size, d.links, topology, change)
    touched = sorted({(dim, rank) for dim, rank, _ in links})
    # Rings with a failed direction reroute as a whole (every member).
    rerouted: dict[tuple[int, int], str] = {}  # (dim, first member) -> surviving direction
    for dim, rank, direction in sorted(links):
        if links[(dim, rank, direction)][2]:
            ring = _ring_of(topology, dim, rank)
            other = "-" if direction == "+" else "+"
            failed_other = [m for m in ring if links.get((dim, m, other), [0.0, 0.0, False])[2]]
            if failed_other:
                one = link_name(topology, dim, rank, direction)
                two = link_name(topology, dim, failed_other[0], other)
                raise TopologyError(
                    f"run.links: {one} and {two} failed: that ring has no working direction left"
                )
            rerouted[(dim, ring[0])] = other
    for dim, head in rerouted:
        for member in _ring_of(topology, dim, head):
            touched.append((dim, member))
    for dim, rank in sorted(set(touched)):
        d = dims[dim]
        cfg = system.network.dimensions[dim]
        default = [cfg.link_bandwidth, cfg.link_latency, False]
        ring_first = _ring_of(topology, dim, rank)[0] if d.kind == "ring" else None
        survivor = rerouted.get((dim, ring_first)) if ring_first is not None else None
        if survivor is not None:
            bandwidth, latency, _failed = links.get((dim, rank, survivor), default)
            capacity = float(bandwidth) * (d.links // 2) * d.efficiency
            collectives.set_link(rank, dim, bandwidth=capacity, latency=float(latency))
            continue
        entries = [links.get((dim, rank, x), default) for x in _directions(d.kind, d.size, d.links)]
        slowest = min(float(e[0]) for e in entries)
        capacity = slowest * d.links * d.efficiency
        latency = max(float(e[1]) for e in entries)
        collectives.set_link(rank, dim, bandwidth=capacity, latency=latency)


def _directions(kind: str, size: int, links: int) -> tuple[str, ...]:
    """The directions whose links a rank of the dimension sends on."""
    if kind == "ring" and size > 2 and links >= 2:
        return ("+", "-")
    return ("+",)


def _ring_of(topology: Topology, dim: int, rank: int) -> list[int]:
    """The ranks of ``rank``'s ring along ``dim`` (every other coordinate the same)."""
    d = topology.dimensions[dim]
    first = rank - topology.coordinate(rank, dim) * d.stride
    return [first + k * d.stride for k in range(d.size)]


def _check_reroutable(
    kind: str, size: int, links: int, topology: Topology, change: LinkChange
) -> None:
    name = link_name(topology, change.dim, change.rank, change.direction)
    if kind == "ring":
        if len(_directions(kind, size, links)) == 1:
            raise TopologyError(
                f"run.links: {name} failed: a ring with {links} link(s) per NPU and {size} NPUs "
                "is unidirectional, so there is no other path"
            )
        if change.direction is None:
            raise TopologyError(
                f"run.links: {name} failed in both directions: no path around it (fail one "
                "direction to reroute the ring the other way)"
            )
        return
    if kind == "switch":
        raise TopologyError(
            f"run.links: {name} failed: a switch gives each NPU one port, so npu{change.rank} "
            "has no other path into that dimension"
        )
    raise TopologyError(
        f"run.links: {name} failed: rerouting direct traffic through a relay NPU is not "
        "modelled on a fully connected dimension"
    )
