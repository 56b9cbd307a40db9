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
``net_hop_latency`` (:func:`hop_latency`); ``double_binary_tree`` is offered on network
dimensions only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.system import PROTOCOLS, CollectiveConfig, ProtocolConfig
from ..errors import ConfigError, TopologyError
from .algorithms import ALGORITHMS, Step, check_algorithm, phase_steps
from .group import Axis
from .ops import COLLECTIVE_OPS
from .topology import Dimension, Topology


@dataclass(frozen=True)
class Lane:
    """One dimension a flat-ring phase's messages cross (:data:`FLAT_RING`): its axis and the
    fraction of every step's bytes that goes along it (to the next member on that axis)."""

    dim: int
    size: int
    stride: int
    fraction: float


@dataclass(frozen=True)
class Phase:
    """One phase of a chunk: an operation on one axis of the group.

    ``size`` is the group's members along the dimension, ``stride`` their coordinate distance.
    A flat-ring phase (``lanes`` not empty) runs over every axis of the group at once: ``size``
    is all its members, ``dim`` and ``stride`` its innermost axis's (where it queues), and each
    step's bytes are split over ``lanes`` (one message per lane).
    """

    dim: int
    op: str
    algorithm: str
    data_bytes: float
    steps: tuple[Step, ...]
    size: int = 1
    stride: int = 1
    lanes: tuple[Lane, ...] = ()

    def message_count(self, step: Step) -> int:
        """Messages one NPU sends (and receives) in ``step``."""
        return len(self.lanes) if self.lanes else step.message_count(self.size)

    @property
    def bytes_sent(self) -> float:
        """Network bytes one NPU sends in this phase."""
        if self.lanes:
            return sum(s.message_bytes for s in self.steps)
        return sum(s.message_bytes * s.message_count(self.size) for s in self.steps)


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
    steps = tuple(phase_steps(op, "ring", members, size))
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
        outer = math.prod(lane_.size for lane_ in phase.lanes[k + 1:])
        hops = (lane.size - 1) * outer if k < len(phase.lanes) - 1 else lane.size
        out.append((lane, passes * hops))
    return out


def algorithm_for(cfg: CollectiveConfig, topology: Topology, op: str, dim: int) -> str:
    """The configured algorithm of ``op`` on dimension ``dim`` (with defaults)."""
    choice = cfg.algorithms.get(op)
    d = topology.dimensions[dim]
    if choice is None:
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
        build_phases(cfg, topology, op, 1.0, axes)


def _can_run(algorithm: str, phase_op: str, d: Dimension, size: int) -> bool:
    algo = ALGORITHMS.get(algorithm)
    return phase_op in algo.phase_ops and not algo.problem(
        phase_op, d.kind, size, d.switch_reduction
    )


def build_phases(
    cfg: CollectiveConfig,
    topology: Topology,
    op: str,
    size: float,
    axes: Sequence[Axis],
    override: str | None = None,
) -> list[Phase]:
    """The phases one chunk of ``size`` bytes goes through on ``axes`` (see module).

    ``override``: an algorithm that runs ``op``'s phases wherever it can (the tuner's
    candidate); elsewhere the configured algorithm runs. ``flat_ring`` runs the whole
    collective as one phase over every axis (NCCL's ring across nodes) where the group has two
    or more; ``double_binary_tree`` runs only on network dimensions (NCCL builds its trees
    between nodes; inside a node its tree is a chain, which the ring covers).
    """
    spec = COLLECTIVE_OPS.get(op)
    if override == FLAT_RING:
        flat = _flat_ring_phase(op, size, axes)
        if flat is not None:
            return [flat]
    phases: list[Phase] = []

    def add(index: int, phase_op: str, data: float, algo_op: str) -> None:
        axis = axes[index]
        d = topology.dimensions[axis.dim]
        if (
            override is not None
            and algo_op == op
            and _can_run(override, phase_op, d, axis.size)
            and (override != "double_binary_tree" or d.network)
        ):
            algo = override
        else:
            algo = algorithm_for(cfg, topology, algo_op, axis.dim)
        if algo == "double_binary_tree" and phase_op != "all-reduce":
            algo = "ring"  # trees run only the all-reduce phase of a hierarchical all-reduce
        if algo == "nvls" and algo_op == "all-reduce" and phase_op != "all-reduce":
            algo = "ring"  # so does NVLS; chosen for another operation, it is refused below
        check_algorithm(
            algo,
            phase_op,
            d.kind,
            axis.size,
            f"collective.algorithms.{algo_op}",
            d.switch_reduction,
        )
        steps = tuple(phase_steps(phase_op, algo, axis.size, data))
        phases.append(Phase(axis.dim, phase_op, algo, data, steps, axis.size, axis.stride))

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
        None if t is None else hop_latency(t[chosen], topology.dimensions[p.dim])
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


def crossing_latency(
    cfg: CollectiveConfig,
    topology: Topology,
    phases: Sequence[Phase],
    tables: Sequence[dict[str, ProtocolConfig] | None],
    name: str | None,
) -> float:
    """What the hops of flat rings across their outer dimensions add, s.

    A flat ring's messages on every lane are delivered with its inner dimension's delay
    (link latency plus hop latency), so each step costs one inner hop; a ring's latency is
    the sum of the hop delays along its chain of data dependencies, of which
    :func:`ring_crossings` hops cross an outer dimension (a NIC): each adds its own delay
    less the inner one, once per collective, as NCCL's tuner adds ``nInterSteps`` network
    latencies to the ring's. Other phases add nothing.
    """
    total = 0.0
    for phase, table in zip(phases, tables, strict=True):
        if not phase.lanes:
            continue
        proto = table[name] if table is not None and name is not None else None

        def delay(d: Dimension, proto: ProtocolConfig | None = proto) -> float:
            return d.latency + (cfg.endpoint_delay if proto is None else hop_latency(proto, d))

        inner = delay(topology.dimensions[phase.dim])
        for lane, hops in ring_crossings(phase):
            total += hops * max(0.0, delay(topology.dimensions[lane.dim]) - inner)
    return total


def nvls_chunk(cfg: CollectiveConfig, size: float, heads: int) -> float:
    """NCCL's NVLS chunk for a buffer of ``size`` bytes over ``heads`` NPUs (module), bytes."""
    chunk = float(cfg.nvls_chunk_bytes)
    ops = cfg.nvls_channels * heads
    for below, smaller in ((64, 65536.0), (8, 32768.0), (2, 16384.0)):
        if size < below * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


#: NCCL's alignment of a channel's share of a Simple-protocol buffer, bytes
#: (``NCCL_SIMPLE_ALIGNMENT = WARP_SIZE x 8 x 16``, ``src/include/enqueue.h``; NCCL 2.20-2.21).
NCCL_SIMPLE_ALIGNMENT = 4096


def nvls_channel_loop(cfg: CollectiveConfig, size: float, heads: int) -> tuple[int, float]:
    """The busiest NVLS channel of a buffer of ``size`` bytes over ``heads`` NPUs under
    ``collective.nvls_layout`` (module): (its loops, the bytes one of its loops holds).

    A loop of one channel holds ``heads x chunk`` bytes (:func:`nvls_chunk`, one slot per
    head). ``fill_channels`` (NCCL 2.17-2.19, ``all_reduce.h``: channel ``b`` takes the
    ``b``-th ``heads x chunk`` of every loop of ``nvls_channels x heads x chunk``): channel 0
    holds ``min(heads x chunk, size)`` in each of ``ceil(size / (nvls_channels x heads x
    chunk))`` loops. ``spread`` (NCCL 2.20-2.21, ``enqueue.cc`` ``addCBDCollToPlan``): each
    channel takes a share of ``ceil(size / nvls_channels)`` rounded up to
    :data:`NCCL_SIMPLE_ALIGNMENT`, the last channel the rest, and runs its own loops over it
    (``all_reduce.h``, ``oneNode``); channel 0 holds ``share = min(size, that)`` in
    ``ceil(share / (heads x chunk))`` loops of ``min(heads x chunk, share)`` bytes. Both give
    every buffer at least one loop; with chunks of whole 4 KiB (NCCL's) they differ only below
    one full loop of all channels (``nvls_channels x heads x chunk``, 2 MiB on 8 GPUs).
    (``computeCollLastChunkInfo``, 2.20's even split of a channel's last loop over the heads,
    moves bytes between the heads of one channel, which the pipeline does not tell apart.)
    """
    chunk = nvls_chunk(cfg, size, heads)
    slot = heads * chunk
    if cfg.nvls_layout == "spread":
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
        if phase.algorithm != "nvls":
            continue
        size = phase.data_bytes * chunks
        loops, _ = nvls_channel_loop(cfg, size, phase.size)
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
        if phase.algorithm != "nvls":
            continue
        d = topology.dimensions[phase.dim]
        p = phase.size
        size = phase.data_bytes * chunks
        loops, held = nvls_channel_loop(cfg, size, p)
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
        weight = 1.0
        if phase.algorithm == "nvls":
            weight = d.efficiency / nvls_eff
        hop = cfg.endpoint_delay
        if phase.algorithm == "nvls" and cfg.nvls_delay is not None:
            hop = cfg.nvls_delay
        if table is not None and name is not None:
            proto = table[name]
            weight /= proto.bandwidth
            hop = hop_latency(proto, d)
            base = max(base, proto.base_latency)
        time += len(phase.steps) * (d.latency + hop)
        if phase.lanes:  # the busiest lane's egress sets the pace of each step
            time += chunks * max(
                phase.bytes_sent * lane.fraction * weight
                / topology.dimensions[lane.dim].egress_bandwidth
                for lane in phase.lanes
            )
        else:
            time += chunks * phase.bytes_sent * weight / d.egress_bandwidth
    crossing = crossing_latency(cfg, topology, phases, tables, name)
    return time + base + crossing + nvls_pipeline_latency(cfg, topology, phases, chunks)


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
        kinds = {step.kind for phase in phases for step in phase.steps}
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
            else:
                problems.append(f"{name} cannot run {op} on any dimension of this group")
            continue
        kinds = {step.kind for phase in phases for step in phase.steps}
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
