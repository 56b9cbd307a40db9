"""The phases one chunk of a collective goes through on its group's axes.

The operation (:mod:`acesim.network.ops`) says which phase runs on which axis with how much
data; the configured algorithm of each (operation, dimension) (:mod:`acesim.network.algorithms`)
turns a phase into steps. ``double_binary_tree`` runs only the all-reduce phase of a
hierarchical all-reduce; its reduce-scatter and all-gather phases use ``ring``. So does
``nvls`` (in-switch reduction, all-reduce on a switch dimension only).

Where ``collective.protocols`` configures NCCL protocols for an algorithm,
:func:`choose_protocol` picks the one a collective runs (see it); where ``collective.choices``
lists algorithms for an operation, :func:`choose_algorithm` picks one per collective, as
NCCL's tuner does.

NVLS loops (:func:`nvls_sync_latency`): NCCL's NVLS kernel moves a buffer in loops of
``channels x p x chunk`` bytes (``p`` heads, one per NPU; 16 channels), the chunk shrinking for
smaller buffers by NCCL's rule (NCCL 2.18 ``enqueue.cc``: 128 KiB, halved to 64 KiB below
``64 x channels x p x 128 KiB``, to 32 KiB below ``8 x ... x 64 KiB``, to 16 KiB below
``2 x ... x 32 KiB``). Each loop pays ``collective.nvls_loop_latency`` of synchronisation
between its scatter, reduce-multicast and gather warps, in series with its transfer: the
collective's NVLS phases take ``loops x nvls_loop_latency`` more, which is why NVLS bandwidth
keeps rising with size long after latency stops mattering (smaller chunks, more loops per byte).
With ``collective.nvls_stages`` the loops flow through the kernel's pipeline instead
(:func:`nvls_pipeline_latency`), whose stage is set by the busiest channel's loop: which bytes
a channel holds is NCCL's buffer layout, which changed in NCCL 2.20
(``collective.nvls_layout``, :func:`nvls_channel_loop`): ``fill_channels`` (2.17-2.19, a
small buffer fills channel 0's head slots first) or ``spread`` (2.20-2.21, every channel an
equal share; 2.22's scheduler, with a minimum of traffic per channel, is not modelled).

Across nodes: ``flat_ring`` (NCCL's ring through every member of a multi-dimension group) is
one phase whose steps' bytes are split over lanes, one per dimension (:func:`flat_ring_lanes`),
its node crossings' extra latency paid once (:func:`crossing_latency`); steps on network
dimensions (``Dimension.network``, the scale-out of ``--nodes``) pay a protocol's
``net_hop_latency`` (:func:`hop_latency`); per dimension, ``double_binary_tree`` runs on network
dimensions only. On an oversubscribed leaf/spine dimension the prediction stretches each step's
bytes by its leaves' up- and downlinks (:func:`acesim.network.spine.spine_factor`).

Across nodes NCCL pipelines its other algorithms (:mod:`acesim.network.pipelined`): on a group
of one node axis and one network axis ``double_binary_tree`` (NCCL's TREE), ``nvls_tree``
(NVLS_TREE), ``collnet`` (CollNet Direct, on a network whose switches reduce) and ``nvls``
(with SHARP) are one pipelined phase each, their NVLink and NIC lanes at once, their path's
latency NCCL 2.19.3's formula (:func:`crossing_latency`). ``nvls`` runs only off network
dimensions per dimension, ``collnet`` only on them; on a group without a node axis
``collnet`` is the network dimension's all-reduce phase and ``double_binary_tree`` its
per-dimension levels. A network dimension's path to the NIC (its PCIe link, the NIC's proxy)
caps what the tuner predicts a step sends (``Dimension.send_bandwidth``), and a multi-node
ring's steps pay at least NCCL's network overhead (:func:`ring_floor`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.system import PROTOCOLS, CollectiveConfig, ProtocolConfig
from ..errors import ConfigError, TopologyError
from .algorithms import (
    ALGORITHMS,
    NVLS_KINDS,
    ROOTED_PATTERNS,
    check_algorithm,
    check_phase_steps,
    phase_steps,
)
from .group import Axis
from .ops import COLLECTIVE_OPS
from .phase import Lane as Lane
from .phase import Phase as Phase
from .pipelined import COLLNET as COLLNET
from .pipelined import NVLS_TREE as NVLS_TREE
from .pipelined import TREE, node_and_network, path_latency, pipelined_phase
from .repeats import Repeats
from .spine import spine_factor
from .step import Step
from .sums import add_repeatedly
from .topology import Dimension, Topology

#: NCCL's flat ring: one ring through every member of a group that spans several dimensions
#: (NVLink inside a node, NICs between nodes), offered to the tuner in ``collective.choices``.
FLAT_RING = "flat_ring"
#: The operations the flat ring runs.
FLAT_RING_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def flat_ring_lanes(axes: Sequence[Axis]) -> tuple[Lane, ...]:
    """The lanes of a flat ring over ``axes`` (innermost first, sizes > 1): the ring visits
    the members in mixed-radix order, and NCCL's channels are rotated so that, summed over
    channels, every member sends the same share along each axis. Of the ``n`` hops of the
    ring, the share along axis ``k`` (not the last) is ``(s_k - 1) / (s_0 ... s_k)``, along
    the last ``1 / (s_0 ... s_{K-1})``: on ``G`` GPUs per node times ``N`` nodes, ``(G-1)/G``
    of every step's bytes on NVLink and ``1/G`` on the GPU's own NIC (rail-aligned: to the
    GPU of the same local index in the next node, so each channel crosses each node boundary
    once)."""
    lanes = []
    inner = 1
    for i, axis in enumerate(axes):
        if i < len(axes) - 1:
            fraction = (axis.size - 1) / (inner * axis.size)
        else:
            fraction = 1.0 / inner
        lanes.append(Lane(axis.dim, axis.size, axis.stride, fraction))
        inner *= axis.size
    return tuple(lanes)


def _flat_ring_phase(op: str, size: float, axes: Sequence[Axis]) -> Phase | None:
    """The one phase of ``op`` as NCCL's flat ring over ``axes``; None where it does not
    apply (fewer than two axes with members, or an operation it does not run)."""
    real = [a for a in axes if a.size > 1]
    if op not in FLAT_RING_OPS or len(real) < 2:
        return None
    members = math.prod(a.size for a in real)
    steps = phase_steps(op, "ring", members, size)
    return Phase(
        real[0].dim, op, FLAT_RING, size, steps, members, real[0].stride, flat_ring_lanes(real)
    )


def ring_crossings(phase: Phase) -> list[tuple[Lane, int]]:
    """Per outer lane of a flat-ring phase, the hops along it on one pass's chain of data
    dependencies, times the passes (all-reduce 2, others 1): on a pass of ``n - 1`` steps the
    slowest piece of data crosses every boundary of the ring, ``(s_k - 1) s_{k+1} ... s_K``
    hops along axis ``k`` (``N`` node boundaries on ``N`` nodes; NCCL 2.18's tuner counts
    ``2N`` for an all-reduce)."""
    passes = 2 if phase.op == "all-reduce" else 1
    out = []
    for k, lane in enumerate(phase.lanes[1:], start=1):
        outer = math.prod(lane_.size for lane_ in phase.lanes[k + 1 :])
        hops = (lane.size - 1) * outer if k < len(phase.lanes) - 1 else lane.size
        out.append((lane, passes * hops))
    return out


def in_switch(phase: Phase) -> bool:
    """Whether ``phase`` runs NVLS steps (in-switch reduction on NVSwitch: ``nvls``, and
    ``nvls``'s over nodes with SHARP), which run at ``nvls_efficiency``. A pipelined phase's
    NVLS lanes are weighed lane by lane (:func:`lane_weight`), not here."""
    return (
        not phase.pipelined
        and bool(phase.steps)
        and all(s.kind in NVLS_KINDS for s, _count in phase.steps.runs)
    )


def _fits_fabric(algorithm: str, d: Dimension) -> bool:
    """``nvls`` reduces in a node's switch (NVLink SHARP), ``collnet`` in the network's
    (SHARP on InfiniBand): each runs only on its own kind of fabric."""
    if algorithm == "nvls":
        return not d.network
    if algorithm == COLLNET:
        return d.network
    return True


def nvls_tree_problem(topology: Topology, op: str, axes: Sequence[Axis]) -> str | None:
    """Why ``nvls_tree`` cannot run ``op`` on ``axes``, or None: it runs an all-reduce over
    one node axis whose switch reduces (NVLink SHARP) and one network axis (the nodes)."""
    if op != "all-reduce":
        return f"runs all-reduce only, not {op}"
    real = [a for a in axes if a.size > 1]
    inner = [a for a in real if not topology.dimensions[a.dim].network]
    outer = [a for a in real if topology.dimensions[a.dim].network]
    if len(outer) != 1:
        return (
            "needs a group over nodes (one network dimension: --nodes 2 or more), got "
            f"{len(outer)} network dimensions"
        )
    if len(inner) != 1:
        return f"needs one dimension inside the node (its switch), got {len(inner)}"
    d = topology.dimensions[inner[0].dim]
    if d.kind != "switch" or not d.switch_reduction:
        what = f"is a {d.kind}" if d.kind != "switch" else "does not reduce"
        return (
            "needs a node switch that reduces (switch_reduction = true: NVSwitch with NVLink "
            f"SHARP, H100 on), and {d.name} {what}"
        )
    return None


def nvls_tree_phases(topology: Topology, size: float, axes: Sequence[Axis]) -> list[Phase]:
    """NCCL's NVLS_TREE all-reduce of ``size`` bytes per NPU on ``axes`` (one node axis of
    ``G`` NPUs on a reducing switch, one network axis of ``N`` nodes; check
    :func:`nvls_tree_problem` first): one pipelined phase (:mod:`acesim.network.pipelined`).

    NCCL 2.19.3 (``all_reduce.h``, ``RunWorkElement<NVLS_TREE>``): every GPU is the head of
    ``1/G`` of each loop; its reduce warps load-reduce that slice through the switch and send
    it up the inter-node double binary tree over the GPU's own NIC, its broadcast warps take
    the tree's result back and multicast-store it to the node, all at once on successive
    loops. So the node's links carry ``S (G+1)/G`` (NVLS's load-reduce and multicast) while
    each NIC carries its slice's tree, ``S/G`` on two nodes and ``2 S/G`` from four
    (:func:`acesim.network.trees.tree_sends`), and the collective takes as long as the busier
    of the two. The NVLS loops are paid once, with NCCL's NVLS_TREE chunk
    (:func:`nvls_tree_chunk`)."""
    node, net = _node_and_network(topology, axes)
    return [pipelined_phase(NVLS_TREE, size, node, net)]


def nvls_sharp_problem(topology: Topology, op: str, axes: Sequence[Axis]) -> str | None:
    """Why ``nvls`` cannot run ``op`` across the nodes of ``axes`` (NCCL's NVLS over several
    nodes: NVLS in the node, SHARP between nodes), or None: :func:`nvls_tree_problem`'s group,
    on a network whose switches reduce."""
    problem = nvls_tree_problem(topology, op, axes)
    if problem is not None:
        return problem
    _node, net = _node_and_network(topology, axes)
    d = topology.dimensions[net.dim]
    if d.kind != "switch" or not d.switch_reduction:
        return (
            "runs across nodes only where the scale-out switches reduce (NCCL 2.18 runs NVLS "
            "over nodes with CollNet/SHARP only: switch_reduction = true on [scale_out]); "
            "nvls_tree runs the tree between nodes instead"
        )
    return None


def nvls_sharp_phases(topology: Topology, size: float, axes: Sequence[Axis]) -> list[Phase]:
    """NCCL's NVLS all-reduce over several nodes (with CollNet/SHARP; ``all_reduce.h``,
    ``RunWorkElement<NVLS>`` with a network ``out``): as :func:`nvls_tree_phases`, every GPU
    the head of ``1/G`` of each loop, with its reduced slice all-reduced between nodes by the
    network's switches (``S/G`` into SHARP and back through each NIC) in place of the tree:
    one pipelined phase labelled ``nvls`` (its protocols and loops, NCCL's NVLS chunk)."""
    node, net = _node_and_network(topology, axes)
    return [pipelined_phase("nvls", size, node, net)]


def _node_and_network(topology: Topology, axes: Sequence[Axis]) -> tuple[Axis, Axis]:
    found = node_and_network(axes, [topology.dimensions[a.dim].network for a in axes])
    if found is None:
        raise TopologyError("a pipelined phase needs one node axis and one network axis")
    return found


def over_nodes(topology: Topology, axes: Sequence[Axis]) -> tuple[Axis, Axis] | None:
    """The node axis and the network axis of a group of exactly one of each (two or more
    members on both), or None: the groups NCCL's pipelined algorithms run on."""
    return node_and_network(axes, [topology.dimensions[a.dim].network for a in axes])


def pipelined_tree_phases(
    topology: Topology, op: str, size: float, axes: Sequence[Axis]
) -> list[Phase] | None:
    """NCCL's TREE all-reduce over a node axis and a network axis as one pipelined phase
    (:mod:`acesim.network.pipelined`: the node's chain and the nodes' double binary tree at
    once), or None where the group is not one node axis and one network axis (the tree then
    runs per dimension, on network dimensions only)."""
    found = over_nodes(topology, axes)
    if op != "all-reduce" or found is None:
        return None
    node, net = found
    return [pipelined_phase(TREE, size, node, net)]


def pipelined_collnet_phases(
    topology: Topology, op: str, size: float, axes: Sequence[Axis]
) -> list[Phase] | None:
    """NCCL's CollNet Direct over a node axis and a network axis whose switches reduce as one
    pipelined phase (direct scatter and gather in the node, each GPU's ``1/G`` slice into
    SHARP and back over its NIC, at once), or None where that group is not given."""
    found = over_nodes(topology, axes)
    if op != "all-reduce" or found is None:
        return None
    node, net = found
    d = topology.dimensions[net.dim]
    if d.kind != "switch" or not d.switch_reduction:
        return None
    return [pipelined_phase(COLLNET, size, node, net)]


def collnet_problem(topology: Topology, op: str, axes: Sequence[Axis]) -> str:
    """Why ``collnet`` runs on no dimension of ``axes`` (one line)."""
    if op != "all-reduce":
        return f"runs all-reduce only, not {op}"
    if not any(topology.dimensions[a.dim].network for a in axes if a.size > 1):
        return "needs a group over nodes (a network dimension: --nodes 2 or more)"
    return (
        "needs a scale-out network whose switches reduce (switch_reduction = true on "
        "[scale_out]: InfiniBand SHARP, e.g. Quantum-2 SHARPv3); every preset keeps it off "
        "(whether a cluster enables it is a deployment choice)"
    )


def algorithm_for(cfg: CollectiveConfig, topology: Topology, op: str, dim: int) -> str:
    """The configured algorithm of ``op`` on dimension ``dim`` (with defaults)."""
    choice = cfg.algorithms.get(op)
    d = topology.dimensions[dim]
    if choice is None:
        default = COLLECTIVE_OPS.get(op).default_algorithm
        if default is not None:
            return default
        if op == "all-to-all" and d.kind != "ring":
            return "direct"
        return "ring"
    if isinstance(choice, list):
        if len(choice) != len(topology.dimensions):
            raise TopologyError(
                f"collective.algorithms.{op}: must name one algorithm per dimension "
                f"({len(topology.dimensions)}), got {len(choice)}"
            )
        return str(choice[dim])
    return str(choice)


def validate_algorithms(cfg: CollectiveConfig, topology: Topology) -> None:
    """Elaboration check: the configured operations exist, and every operation can be planned
    on every dimension as configured."""
    for op in cfg.algorithms:
        COLLECTIVE_OPS.get(op, f"collective.algorithms.{op}")
    axes = tuple(Axis(d.index, d.size) for d in topology.dimensions if d.size > 1)
    for op in COLLECTIVE_OPS:
        build_phases(cfg, topology, op, 1.0, axes, steps=False)


def _can_run(algorithm: str, phase_op: str, d: Dimension, size: int) -> bool:
    algo = ALGORITHMS.get(algorithm)
    return phase_op in algo.phase_ops and not algo.problem(
        phase_op, d.kind, size, d.switch_reduction
    )


def _across_axes(
    topology: Topology, op: str, size: float, axes: Sequence[Axis], override: str | None
) -> list[Phase] | None:
    """The phases of an ``override`` that runs across the group's axes as NCCL does (the
    flat ring, NVLS-tree, NVLS with SHARP, the pipelined tree and CollNet), where it can
    (None: per-axis phases)."""
    if override == FLAT_RING:
        flat = _flat_ring_phase(op, size, axes)
        return None if flat is None else [flat]
    if override == NVLS_TREE and nvls_tree_problem(topology, op, axes) is None:
        return nvls_tree_phases(topology, size, axes)
    if override == "nvls" and nvls_sharp_problem(topology, op, axes) is None:
        return nvls_sharp_phases(topology, size, axes)
    if override == TREE:
        return pipelined_tree_phases(topology, op, size, axes)
    if override == COLLNET:
        return pipelined_collnet_phases(topology, op, size, axes)
    return None


def build_phases(
    cfg: CollectiveConfig,
    topology: Topology,
    op: str,
    size: float,
    axes: Sequence[Axis],
    override: str | None = None,
    *,
    steps: bool = True,
) -> list[Phase]:
    """The phases one chunk of ``size`` bytes goes through on ``axes`` (see module).

    ``override``: an algorithm that runs ``op``'s phases wherever it can (the tuner's
    candidate); elsewhere the configured algorithm runs. ``flat_ring`` runs the whole
    collective as one phase over every axis (NCCL's ring across nodes) where the group has two
    or more; on a group of one node axis and one network axis ``double_binary_tree``,
    ``nvls_tree``, ``collnet`` and ``nvls`` (with SHARP) run as NCCL pipelines them, one
    pipelined phase (:mod:`acesim.network.pipelined`); elsewhere ``double_binary_tree`` runs
    only on network dimensions (NCCL builds its trees between nodes; inside a node its tree is
    a chain, which the ring covers).

    ``steps`` False (an elaboration check): the phases without their steps, every check
    made all the same (:func:`~acesim.network.algorithms.check_phase_steps`).
    """
    spec = COLLECTIVE_OPS.get(op)
    whole = _across_axes(topology, op, size, axes, override)
    if whole is not None:
        return whole
    phases: list[Phase] = []

    def add(index: int, phase_op: str, data: float, algo_op: str) -> None:
        axis = axes[index]
        d = topology.dimensions[axis.dim]
        if (
            override is not None
            and algo_op == op
            and _can_run(override, phase_op, d, axis.size)
            and (override != "double_binary_tree" or d.network)
            and _fits_fabric(override, d)
        ):
            algo = override
        else:
            algo = algorithm_for(cfg, topology, algo_op, axis.dim)
        if algo == "double_binary_tree" and phase_op != "all-reduce":
            algo = "ring"  # trees run only the all-reduce phase of a hierarchical all-reduce
        if algo == "nvls" and algo_op == "all-reduce" and phase_op != "all-reduce":
            algo = "ring"  # so does NVLS; chosen for another operation, it is refused below
        if algo in (COLLNET, NVLS_TREE) and algo_op == "all-reduce" and phase_op != "all-reduce":
            algo = "ring"  # and CollNet; NVLS_TREE is refused below (not per dimension)
        check_algorithm(
            algo,
            phase_op,
            d.kind,
            axis.size,
            f"collective.algorithms.{algo_op}",
            d.switch_reduction,
        )
        if not _fits_fabric(algo, d):
            raise TopologyError(
                f"collective.algorithms.{algo_op}: algorithm {algo!r} "
                + (
                    f"runs on a scale-out network dimension (its switches reduce), not on {d.name}"
                    if algo == COLLNET
                    else f"runs in a node's switch (NVLink SHARP), not on the network {d.name}"
                )
            )
        if not steps:
            check_phase_steps(phase_op, algo, axis.size, data, cfg.chain_piece_bytes)
        planned: Repeats[Step] = Repeats()
        if steps:
            planned = phase_steps(phase_op, algo, axis.size, data, cfg.chain_piece_bytes)
        phases.append(Phase(axis.dim, phase_op, algo, data, planned, axis.size, axis.stride))

    if axes:
        spec.compose(add, [a.size for a in axes], size, cfg.composition)
    return phases


@dataclass(frozen=True)
class ProtocolChoice:
    """The protocol a collective runs (NCCL's tuner: the fastest predicted) and what it does
    to each phase: ``factors`` (bandwidth, a fraction of the algorithm's efficiency) and
    ``hop_latencies`` (per-message delay in place of the default; None: the default)."""

    name: str | None
    base_latency: float = 0.0
    factors: tuple[float, ...] = ()
    hop_latencies: tuple[float | None, ...] = ()
    #: the predicted time of each candidate protocol, s
    predicted: tuple[tuple[str, float], ...] = ()
    #: the predicted time of the chosen protocol (the tuner's cost), s
    time: float = 0.0
    #: flat rings: what their hops across outer dimensions (NICs) add to the chain of
    #: data dependencies over the inner hops' delay (:func:`crossing_latency`), s
    crossing_latency: float = 0.0


def choose_protocol(
    cfg: CollectiveConfig,
    topology: Topology,
    phases: Sequence[Phase],
    chunks: int,
    forced: str | None = None,
) -> ProtocolChoice:
    """Pick the protocol of a collective whose chunks go through ``phases``.

    The candidates are the protocols every phase's algorithm lists in ``cfg.protocols``
    (phases of algorithms it does not list run as without protocols). Each is predicted, as
    NCCL's tuner does, as latency plus bytes over bandwidth: the largest ``base_latency`` of
    the phases' algorithms, each step's ``link_latency + hop_latency``, and each phase's bytes
    (all chunks) over its dimension's egress bandwidth times the protocol's ``bandwidth``
    factor (times ``nvls_efficiency / efficiency`` of the dimension on NVLS phases). The
    fastest wins (``forced``, NCCL_PROTO, overrides). No phase with protocols: ``name`` None,
    nothing changes.
    """
    tables = [protocol_table(cfg, p.algorithm) for p in phases]
    if not any(tables):
        if forced is not None:
            raise ConfigError(
                "collective.protocol",
                f"{forced} is forced, but no algorithm of this collective "
                f"({', '.join(sorted({p.algorithm for p in phases})) or 'none'}) has "
                "collective.protocols configured",
            )
        nones: list[dict[str, ProtocolConfig] | None] = [None] * len(phases)
        return ProtocolChoice(
            None,
            factors=(1.0,) * len(phases),
            hop_latencies=(None,) * len(phases),
            time=_predict(cfg, topology, phases, nones, chunks, None),
            crossing_latency=crossing_latency(cfg, topology, phases, nones, None),
        )
    candidates = [name for name in PROTOCOLS if all(t is None or name in t for t in tables)]
    if forced is not None:
        if forced not in candidates:
            raise ConfigError(
                "collective.protocol",
                f"{forced} is not configured for every algorithm of this collective "
                f"(they share: {', '.join(candidates) or 'none'})",
            )
        candidates = [forced]
    if not candidates:
        raise ConfigError(
            "collective.protocols",
            "the algorithms of this collective share no protocol: "
            + ", ".join(
                f"{p.algorithm}: {', '.join(t)}" for p, t in zip(phases, tables, strict=True) if t
            ),
        )
    best: tuple[float, str] | None = None
    predicted: list[tuple[str, float]] = []
    for name in candidates:
        time = _predict(cfg, topology, phases, tables, chunks, name)
        predicted.append((name, time))
        if best is None or time < best[0]:
            best = (time, name)
    assert best is not None
    chosen = best[1]
    factors = tuple(1.0 if t is None else t[chosen].bandwidth for t in tables)
    hops = tuple(
        None
        if t is None
        else max(
            hop_latency(t[chosen], topology.dimensions[p.dim]), ring_floor(topology, p, chosen)
        )
        for p, t in zip(phases, tables, strict=True)
    )
    base = max((t[chosen].base_latency for t in tables if t is not None), default=0.0)
    crossing = crossing_latency(cfg, topology, phases, tables, chosen)
    return ProtocolChoice(chosen, base, factors, hops, tuple(predicted), best[0], crossing)


def protocol_table(cfg: CollectiveConfig, algorithm: str) -> dict[str, ProtocolConfig] | None:
    """The protocols ``algorithm`` runs with: its own ``collective.protocols`` table; the
    flat ring, NCCL's ring, the ring's where it has none of its own."""
    table = cfg.protocols.get(algorithm)
    if table is None and algorithm == FLAT_RING:
        return cfg.protocols.get("ring")
    return table


def hop_latency(proto: ProtocolConfig, d: Dimension) -> float:
    """A protocol's per-step latency on dimension ``d`` (after its link latency), s: NCCL's
    network one (``net_hop_latency``) on a network dimension where given, else
    ``hop_latency``."""
    if d.network and proto.net_hop_latency is not None:
        return proto.net_hop_latency
    return proto.hop_latency


def ring_floor(topology: Topology, phase: Phase, name: str | None) -> float:
    """NCCL's least per-step latency of a ring through several nodes under protocol ``name``,
    s: its network overhead (``net_overhead`` of the network dimensions a flat ring crosses;
    NCCL 2.19.3 ``tuning.cc``: ``intraLat = max(intraLat, netOverhead)``, the overhead three
    times over for Simple). Other phases: 0."""
    if not phase.lanes or phase.pipelined:
        return 0.0
    overhead = max(topology.dimensions[lane.dim].net_overhead for lane in phase.lanes)
    return overhead * (3.0 if name == "Simple" else 1.0)


def crossing_latency(
    cfg: CollectiveConfig,
    topology: Topology,
    phases: Sequence[Phase],
    tables: Sequence[dict[str, ProtocolConfig] | None],
    name: str | None,
) -> float:
    """What multi-dimension phases' paths add to what their steps' deliveries pay, s, once
    per collective (paid when a rank joins).

    A flat ring's messages on every lane are delivered with its inner dimension's delay
    (link latency plus hop latency), so each step costs one inner hop; a ring's latency is
    the sum of the hop delays along its chain of data dependencies, of which
    :func:`ring_crossings` hops cross an outer dimension (a NIC): each adds its own delay
    less the inner one, as NCCL's tuner adds ``nInterSteps`` network latencies to the ring's.
    A pipelined phase's one step is delivered after its slowest lane's delay; its path
    (:func:`acesim.network.pipelined.path_latency`, NCCL's formula) adds the rest. Other
    phases add nothing.
    """
    total = 0.0
    for phase, table in zip(phases, tables, strict=True):
        if not phase.lanes:
            continue
        proto = table[name] if table is not None and name is not None else None
        if phase.pipelined:
            total += max(
                0.0,
                pipeline_path(cfg, topology, phase, proto)
                - lanes_delay(cfg, topology, phase, proto),
            )
            continue

        def delay(d: Dimension, proto: ProtocolConfig | None = proto) -> float:
            return d.latency + (cfg.endpoint_delay if proto is None else hop_latency(proto, d))

        inner = delay(topology.dimensions[phase.dim])
        if proto is not None:
            floor = ring_floor(topology, phase, name)
            inner = max(inner, topology.dimensions[phase.dim].latency + floor)
        for lane, hops in ring_crossings(phase):
            total += hops * max(0.0, delay(topology.dimensions[lane.dim]) - inner)
    return total


def lane_delay(
    cfg: CollectiveConfig, topology: Topology, kind: str, dim: int, proto: ProtocolConfig | None
) -> float:
    """The delivery delay of a pipelined lane's message of step kind ``kind`` on ``dim``
    under protocol ``proto`` (None: the defaults), s: the link latency plus the protocol's
    hop latency there (``endpoint_delay``, or ``nvls_delay`` for NVLS lanes, without one)."""
    d = topology.dimensions[dim]
    if proto is not None:
        return d.latency + hop_latency(proto, d)
    if kind in NVLS_KINDS and cfg.nvls_delay is not None:
        return d.latency + cfg.nvls_delay
    return d.latency + cfg.endpoint_delay


def lanes_delay(
    cfg: CollectiveConfig, topology: Topology, phase: Phase, proto: ProtocolConfig | None
) -> float:
    """A pipelined phase's step's delivery, s: its slowest lane's delay (every lane's
    messages are delivered that long after they are out)."""
    step = phase.steps[0]
    return max(
        lane_delay(cfg, topology, phase.lane_kind(lane, step), lane.dim, proto)
        for lane in phase.lanes
    )


def pipeline_path(
    cfg: CollectiveConfig, topology: Topology, phase: Phase, proto: ProtocolConfig | None
) -> float:
    """A pipelined phase's path latency (NCCL's formula with acesim's link latencies:
    :func:`acesim.network.pipelined.path_latency`), s."""
    step = phase.steps[0]
    node = phase.lanes[0]
    net = phase.lanes[-1]
    intra = lane_delay(cfg, topology, phase.lane_kind(node, step), node.dim, proto)
    inter = lane_delay(cfg, topology, phase.lane_kind(net, step), net.dim, proto)
    return path_latency(phase.algorithm, node.size, net.size, intra, inter)


def lane_weight(cfg: CollectiveConfig, topology: Topology, kind: str, dim: int) -> float:
    """What one byte of a pipelined lane of step kind ``kind`` on ``dim`` weighs on its
    egress: NVLS bytes run at ``nvls_efficiency`` (the dimension's payload efficiency over
    NVLS's), the others at the dimension's."""
    if kind not in NVLS_KINDS:
        return 1.0
    nvls_eff = cfg.protocol_efficiency if cfg.nvls_efficiency is None else cfg.nvls_efficiency
    return topology.dimensions[dim].efficiency / nvls_eff


def _pipelined_bytes_time(
    cfg: CollectiveConfig, topology: Topology, phase: Phase, factor: float
) -> float:
    """One chunk of a pipelined phase: its busiest dimension's bytes (every lane on it, each
    weighed by its kind, over the protocol's bandwidth ``factor``, stretched by its leaves'
    spine) over that dimension's send rate, s."""
    step = phase.steps[0]
    load: dict[int, float] = {}
    for lane in phase.lanes:
        weight = lane_weight(cfg, topology, phase.lane_kind(lane, step), lane.dim) / factor
        weight *= _lane_spine(topology, phase, lane)
        load[lane.dim] = load.get(lane.dim, 0.0) + step.message_bytes * lane.fraction * weight
    return max(b / topology.dimensions[d].send_bandwidth for d, b in load.items())


def nvls_chunk(cfg: CollectiveConfig, size: float, heads: int) -> float:
    """NCCL's NVLS chunk for a buffer of ``size`` bytes over ``heads`` NPUs (module), bytes."""
    chunk = float(cfg.nvls_chunk_bytes)
    ops = cfg.nvls_channels * heads
    for below, smaller in ((64, 65536.0), (8, 32768.0), (2, 16384.0)):
        if size < below * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


#: NCCL 2.18.5's NVLS_TREE chunk (``enqueue.cc``): it starts at the Simple protocol's step,
#: ``NCCL_BUFFSIZE`` (4 MiB) over ``NCCL_STEPS`` (8), and halves for smaller buffers:
#: (a buffer below this many loops of the current chunk, the chunk it then takes).
NVLS_TREE_CHUNK = 524288.0
NVLS_TREE_CHUNK_RULE = ((32, 262144.0), (16, 131072.0), (4, 65536.0), (1, 32768.0))


def nvls_tree_chunk(cfg: CollectiveConfig, size: float, heads: int) -> float:
    """NCCL's NVLS_TREE chunk for a buffer of ``size`` bytes over ``heads`` NPUs of a node
    (:data:`NVLS_TREE_CHUNK_RULE`), bytes."""
    chunk = NVLS_TREE_CHUNK
    ops = cfg.nvls_channels * heads
    for below, smaller in NVLS_TREE_CHUNK_RULE:
        if size < below * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def _runs_nvls_loops(phase: Phase) -> bool:
    """The phases that pay NCCL's NVLS loops: ``nvls``'s on one node, and over nodes the
    pipelined phase of ``nvls_tree`` or ``nvls`` with SHARP, for the whole kernel (its loops
    carry the node's NVLS and the hand-offs to the network; the network's hops pay their own
    latency)."""
    if phase.pipelined:
        return phase.algorithm in ("nvls", NVLS_TREE)
    return phase.algorithm == "nvls" and phase.op == "all-reduce"  # one node's NVLS


def _loop_chunk(cfg: CollectiveConfig, phase: Phase, size: float) -> float:
    if phase.algorithm == NVLS_TREE:
        return nvls_tree_chunk(cfg, size, phase.size)
    return nvls_chunk(cfg, size, phase.size)


#: NCCL's alignment of a channel's share of a Simple-protocol buffer, bytes
#: (``NCCL_SIMPLE_ALIGNMENT = WARP_SIZE x 8 x 16``, ``src/include/enqueue.h``; NCCL 2.20-2.21).
NCCL_SIMPLE_ALIGNMENT = 4096


def nvls_channel_loop(cfg: CollectiveConfig, phase: Phase, size: float) -> tuple[int, float]:
    """The busiest NVLS channel of a phase (``phase.size`` heads, one per NPU) that moves a
    buffer of ``size`` bytes through NCCL's NVLS loops (module): (its loops, the bytes one of
    its loops holds), by ``collective.nvls_layout`` for one node's NVLS.

    A loop of one channel holds ``heads x chunk`` bytes (one slot per head; the chunk by
    NCCL's rule, :func:`nvls_chunk` or :func:`nvls_tree_chunk`). ``fill_channels`` (NCCL
    2.17-2.19, ``all_reduce.h``: channel ``b`` takes the ``b``-th ``heads x chunk`` of every
    loop of ``nvls_channels x heads x chunk``): channel 0 holds ``min(heads x chunk, size)`` in
    each of ``ceil(size / (nvls_channels x heads x chunk))`` loops. ``spread`` (NCCL 2.20-2.21,
    ``enqueue.cc`` ``addCBDCollToPlan``): each channel takes a share of
    ``ceil(size / nvls_channels)`` rounded up to :data:`NCCL_SIMPLE_ALIGNMENT`, the last
    channel the rest, and runs its own loops over it (``all_reduce.h``, ``oneNode``); channel 0
    holds ``share = min(size, that)`` in ``ceil(share / (heads x chunk))`` loops of
    ``min(heads x chunk, share)`` bytes. Both give every buffer at least one loop; with chunks
    of whole 4 KiB (NCCL's) they differ only below one full loop of all channels
    (``nvls_channels x heads x chunk``, 2 MiB on 8 GPUs). (``computeCollLastChunkInfo``, 2.20's
    even split of a channel's last loop over the heads, moves bytes between the heads of one
    channel, which the pipeline does not tell apart.) ``spread`` is 2.20's one-node schedule:
    over nodes (``nvls_tree``, NVLS with SHARP) 2.20 queues the collective apart
    (``addCollnetCollToPlan``) and its kernel addresses channels as 2.18's, so those phases
    keep ``fill_channels``.
    """
    chunk = _loop_chunk(cfg, phase, size)
    slot = phase.size * chunk
    one_node = phase.algorithm == "nvls" and phase.op == "all-reduce" and not phase.pipelined
    if one_node and cfg.nvls_layout == "spread":
        align = NCCL_SIMPLE_ALIGNMENT
        share = min(size, math.ceil(size / cfg.nvls_channels / align) * align)
        return max(1, math.ceil(share / slot)), min(slot, share)
    return max(1, math.ceil(size / (cfg.nvls_channels * slot))), min(slot, size)


def nvls_sync_latency(cfg: CollectiveConfig, phases: Sequence[Phase], chunks: int) -> float:
    """The NVLS loops' synchronisation of a collective whose ``chunks`` chunks go through
    ``phases`` (module), s: ``loops x collective.nvls_loop_latency`` over its NVLS phases."""
    if cfg.nvls_loop_latency <= 0:
        return 0.0
    total = 0.0
    for phase in phases:
        if not _runs_nvls_loops(phase):
            continue
        size = phase.data_bytes * chunks
        loops, _ = nvls_channel_loop(cfg, phase, size)
        total += loops * cfg.nvls_loop_latency
    return total


def nvls_pipeline_latency(
    cfg: CollectiveConfig, topology: Topology, phases: Sequence[Phase], chunks: int
) -> float:
    """What NCCL's NVLS kernel adds to the NVLS phases' transfer (module), s.

    Without ``collective.nvls_stages``: :func:`nvls_sync_latency`. With it, NCCL 2.18's kernel
    (``all_reduce.h``) as a pipeline: per channel, ``stages`` warp groups (scatter,
    reduce-multicast, gather) hand each loop on through flags, so a buffer of ``L`` loops takes
    ``(L + stages - 1)`` stage times, ``L`` and a stage being the busiest channel's loops and
    ``nvls_loop_latency`` plus the bytes one of its loops holds (:func:`nvls_channel_loop`,
    by ``collective.nvls_layout``) at ``1 / nvls_channels`` of the NVLS bandwidth (each
    channel is one SM; assumption: a channel moves at most its share of the links, also when
    others idle). So under ``fill_channels`` (NCCL 2.17-2.19) a buffer too small to fill the
    channels is as slow as one channel's share of it allows: every size from ``p x chunk``
    (128 KiB on 8 GPUs) to a full loop (2 MiB) costs the same (the measured plateau of 64
    KiB-2 MiB on NCCL 2.18.5); under ``spread`` (NCCL 2.20-2.21) a buffer of one loop or less
    costs ``stages x nvls_loop_latency`` plus ``stages x nvls_channels x share`` bytes' time,
    ``share`` its 4 KiB-aligned sixteenth. The transfer itself is simulated (the NVLS steps'
    bytes on the links); this returns the rest, ``(L + stages - 1) x stage`` less the buffer's
    time at the NVLS bandwidth, paid when a rank joins.
    """
    if cfg.nvls_stages is None:
        return nvls_sync_latency(cfg, phases, chunks)
    nvls_eff = cfg.protocol_efficiency if cfg.nvls_efficiency is None else cfg.nvls_efficiency
    total = 0.0
    for phase in phases:
        if not _runs_nvls_loops(phase):
            continue
        d = topology.dimensions[phase.dim]
        p = phase.size
        size = phase.data_bytes * chunks
        loops, held = nvls_channel_loop(cfg, phase, size)
        per_byte = (p + 1) / p / (d.egress_bandwidth / d.efficiency * nvls_eff)  # s per byte
        stage = cfg.nvls_loop_latency + held * cfg.nvls_channels * per_byte
        total += max(0.0, (loops + cfg.nvls_stages - 1) * stage - size * per_byte)
    return total


def _predict(
    cfg: CollectiveConfig,
    topology: Topology,
    phases: Sequence[Phase],
    tables: Sequence[dict[str, ProtocolConfig] | None],
    chunks: int,
    name: str | None,
) -> float:
    """The tuner's time of ``phases`` (all chunks) under protocol ``name`` (see
    :func:`choose_protocol`), s."""
    nvls_eff = cfg.protocol_efficiency if cfg.nvls_efficiency is None else cfg.nvls_efficiency
    time = 0.0
    base = 0.0
    for phase, table in zip(phases, tables, strict=True):
        d = topology.dimensions[phase.dim]
        if phase.pipelined:  # the path's latency is the crossing latency's
            proto = table[name] if table is not None and name is not None else None
            if proto is not None:
                base = max(base, proto.base_latency)
            factor = 1.0 if proto is None else proto.bandwidth
            time += lanes_delay(cfg, topology, phase, proto)
            time += chunks * _pipelined_bytes_time(cfg, topology, phase, factor)
            continue
        weight = 1.0
        nvls = in_switch(phase)
        if nvls:
            weight = d.efficiency / nvls_eff
        hop = cfg.endpoint_delay
        if nvls and cfg.nvls_delay is not None:
            hop = cfg.nvls_delay
        if table is not None and name is not None:
            proto = table[name]
            weight /= proto.bandwidth
            hop = max(hop_latency(proto, d), ring_floor(topology, phase, name))
            base = max(base, proto.base_latency)
        time += _latency_steps(phase) * (d.latency + hop)
        if phase.lanes:  # the busiest lane's egress (or its leaves' spine) sets the pace
            time += chunks * max(
                phase.bytes_sent
                * lane.fraction
                * weight
                * _lane_spine(topology, phase, lane)
                / topology.dimensions[lane.dim].send_bandwidth
                for lane in phase.lanes
            )
        else:
            time += chunks * _spine_bytes(d, phase) * weight / d.send_bandwidth
    crossing = crossing_latency(cfg, topology, phases, tables, name)
    return time + base + crossing + nvls_pipeline_latency(cfg, topology, phases, chunks)


def _latency_steps(phase: Phase) -> int:
    """The message delays on a phase's critical path: one per step, but one per hop of a
    pipelined chain (``p - 1``: its positions wait only for the pieces they forward)."""
    if any(s.pattern in ROOTED_PATTERNS for s, _count in phase.steps.runs):
        return phase.size - 1
    return len(phase.steps)


def _spine_bytes(d: Dimension, phase: Phase) -> float:
    """A phase's bytes sent, each step's stretched by its leaves' spine (:mod:`.spine`)."""
    if not d.spine:
        return phase.bytes_sent
    total = 0.0  # added step after step, as a sum over the steps would (per run at once)
    for step, count in phase.steps.runs:
        stretched = (
            step.message_bytes
            * phase.message_count(step)
            * spine_factor(d, phase.size, phase.stride, step)
        )
        total = add_repeatedly(total, stretched, count)
    return total


def _lane_spine(topology: Topology, phase: Phase, lane: Lane) -> float:
    """How much a flat ring's or a pipelined phase's lane is stretched by its dimension's
    spine: its steps send to the next member along the lane's axis (:mod:`.spine`)."""
    d = topology.dimensions[lane.dim]
    if not d.spine or not phase.steps:
        return 1.0
    step = phase.steps[0]
    return spine_factor(d, lane.size, lane.stride, Step(step.message_bytes, "next", 0, step.kind))


@dataclass(frozen=True)
class AlgorithmChoice:
    """What the tuner picked for one collective: the candidate algorithm (None: no
    ``collective.choices`` for the operation), the phases it gives, their protocol, and the
    predicted time of every candidate (s)."""

    algorithm: str | None
    phases: list[Phase]
    protocol: ProtocolChoice
    predicted: tuple[tuple[str, float], ...] = ()


def choose_algorithm(
    cfg: CollectiveConfig,
    topology: Topology,
    op: str,
    chunk_bytes: float,
    axes: Sequence[Axis],
    chunks: int,
    step_kinds: frozenset[str] | None = None,
    preferred: str | None = None,
) -> AlgorithmChoice:
    """NCCL's tuner: among ``collective.choices[op]`` (or the forced ``collective.algorithm``)
    the algorithm whose phases, under their best protocol, are predicted fastest (latency plus
    bytes over bandwidth, :func:`choose_protocol`). A candidate runs the phases it can run
    (``nvls`` the all-reduce phase on a switch that reduces); the others keep
    ``collective.algorithms``. Ties go to the earlier candidate. A candidate with steps the
    endpoint cannot run (``step_kinds``; None: any) is not offered. Without choices or a
    forced algorithm, the configured algorithms with their best protocol. ``preferred`` (the
    endpoint's, e.g. the ``nvls`` kind's NVLS for all-reduce) runs whenever it can run on the
    group and no algorithm is forced; elsewhere the tuner chooses as above."""
    if preferred is not None and cfg.algorithm is None:
        phases = build_phases(cfg, topology, op, chunk_bytes, axes, override=preferred)
        kinds = {kind for phase in phases for kind in phase.kinds}
        if (
            phases
            and preferred in {p.algorithm for p in phases}
            and (step_kinds is None or kinds <= step_kinds)
        ):
            protocol = choose_protocol(cfg, topology, phases, chunks, cfg.protocol)
            return AlgorithmChoice(preferred, phases, protocol, ((preferred, protocol.time),))
    names = cfg.choices.get(op)
    if cfg.algorithm is not None:
        names = [cfg.algorithm]
    if not names:
        phases = build_phases(cfg, topology, op, chunk_bytes, axes)
        return AlgorithmChoice(
            None, phases, choose_protocol(cfg, topology, phases, chunks, cfg.protocol)
        )
    best: AlgorithmChoice | None = None
    predicted: list[tuple[str, float]] = []
    problems: list[str] = []
    protocol_errors: list[ConfigError] = []
    for name in names:
        phases = build_phases(cfg, topology, op, chunk_bytes, axes, override=name)
        if phases and name not in {p.algorithm for p in phases}:
            if name == FLAT_RING:
                problems.append(
                    f"{name} runs {', '.join(FLAT_RING_OPS)} on a group over two or more "
                    "dimensions (several nodes), not {op} on this one".replace("{op}", op)
                )
            elif name == NVLS_TREE:
                problems.append(f"{name} {nvls_tree_problem(topology, op, axes)}")
            elif name == "nvls" and any(topology.dimensions[a.dim].network for a in axes):
                problems.append(f"{name} {nvls_sharp_problem(topology, op, axes)}")
            elif name == COLLNET:
                problems.append(f"{name} {collnet_problem(topology, op, axes)}")
            else:
                problems.append(f"{name} cannot run {op} on any dimension of this group")
            continue
        kinds = {kind for phase in phases for kind in phase.kinds}
        if step_kinds is not None and not kinds <= step_kinds:
            problems.append(f"{name} needs steps the endpoint cannot run")
            continue
        try:
            protocol = choose_protocol(cfg, topology, phases, chunks, cfg.protocol)
        except ConfigError as exc:
            problems.append(f"{name}: {exc.rule}")
            protocol_errors.append(exc)
            continue
        predicted.append((name, protocol.time))
        if best is None or protocol.time < best.protocol.time:
            best = AlgorithmChoice(name, phases, protocol)
    if best is None:
        if protocol_errors:  # every candidate that can run refuses the protocol: say so
            raise protocol_errors[0]
        field = "collective.algorithm" if cfg.algorithm is not None else f"collective.choices.{op}"
        raise ConfigError(field, "; ".join(problems))
    return AlgorithmChoice(best.algorithm, best.phases, best.protocol, tuple(predicted))
