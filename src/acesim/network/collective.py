"""Running collectives on the engine: chunks, phases, steps, messages.

A collective of ``S`` bytes is split into ``collective.chunks`` chunks of ``S/P``. Every chunk
goes through the same phases (:mod:`acesim.network.plan`); a phase on dimension ``d`` may start
at an NPU only while fewer than ``active_chunks_per_dimension`` chunks are in a phase on ``d``
there. Waiting chunks are ordered FIFO (oldest collective first) or LIFO (newest first), then,
within a collective, in order of arrival at the dimension (arrival order keeps the pipeline
fed: a chunk's later phase does not overtake a waiting chunk's first phase, which would open
a bubble in the pipeline and make a faster dimension finish later).

A step at an NPU sends its messages; each message is a fluid activity demanding the NPU's
egress capacity on the dimension, the receiver's ingress capacity on it (the same links in the
other direction: many senders to one receiver share that receiver's ingress, incast) plus
whatever the collective endpoint charges per network byte (HBM bytes, comm-unit throughput,
engine ALU/DMA). An endpoint whose messages carry no collective protocol (a copy engine's
writes) may give its own payload fraction of the links (``link_efficiency``): its bytes weigh
``efficiency / link_efficiency`` on the capacities, the dimension's efficiency over its own.
When a message is on the wire it is delivered after the link latency plus the fixed
per-message endpoint delay. A step completes at an NPU when its own messages are out
and its peers' messages for that step have arrived.

A collective runs on a communicator group (:mod:`acesim.network.group`): whole dimensions, a
slice of a dimension (TP=4 inside an 8-GPU switch) or strided members; groups that run at the
same time share the egress capacity of the dimensions they use. Waiting chunks are ordered by
priority first (``collective.priorities = "blocking_first"``: collectives the training loop
blocks on go before the others), then as above.

Steps of in-switch (NVLS) collectives (:data:`~acesim.network.algorithms.NVLS_KINDS`) run at
``collective.nvls_efficiency`` of the link bandwidth (each of their bytes weighs
``efficiency / nvls_efficiency`` on the egress capacity, the dimension's payload efficiency
over NVLS's) and their messages are
delivered ``link_latency + nvls_delay`` after they are out (both default to the SM protocol's
``protocol_efficiency`` and ``endpoint_delay``).

Before a chunk enters a phase, and once it has left its last, the endpoint may hold it
(``phase_begin``: ACE's SRAM partitions, one per phase, bound the chunks in each phase).

Before a step sends, the endpoint may delay it (``step_begin``: a setup latency, compute units to
acquire); it is told when the step completes (``step_end``). The endpoint also says how it
issues a collective's planned steps (``shape_phases``): a copy engine issues a direct step as
one batch or in waves of a few copies (``span`` steps, each a barrier). A direct (``all``)
step may also copy the NPU's own piece within its memory beside its messages (the endpoint's
``local_copy_demand``: a copy-engine batch holds that copy too); the step then ends when the
copy is done as well.

Incast at a switch: a step in which every NPU writes to more than its dimension's
``incast_fan_in`` peers at once (so every receiver takes as many writers at once: a direct
step's ``p-1``, a wave's ``count``) runs at the dimension's ``incast_efficiency`` of the links'
bandwidth: its bytes weigh ``1 / incast_efficiency`` on the egress and ingress capacities. The
fluid model alone would share each receiver's ingress evenly among its writers and lose
nothing; a real switch's output port congests under many-to-one traffic and backs up the
writers' links (head-of-line blocking). ``incast_fan_in = None`` (the default): no loss.

Where ``collective.choices`` lists algorithms for an operation, each collective runs the one
:func:`~acesim.network.plan.choose_algorithm` predicts fastest (or ``collective.algorithm``).
Where ``collective.protocols`` configures NCCL protocols (LL, LL128, Simple) for an algorithm,
each collective runs the one :func:`~acesim.network.plan.choose_protocol` predicts fastest (or
``collective.protocol``): its phases' bytes weigh ``1 / bandwidth`` more on the egress
capacity, their messages are delivered ``link_latency + hop_latency`` after they are out, and
each rank starts ``base_latency`` after it joins; so it does the NVLS loops' synchronisation
(:func:`~acesim.network.plan.nvls_pipeline_latency`; the same total as paying it loop by loop
when nothing else contends).

A flat-ring phase (``Phase.lanes``, NCCL's ring across nodes) sends one message per lane in
each step, its share of the step's bytes on that lane's dimension (NVLink, the GPU's NIC),
every one delivered after the inner dimension's delay (the crossings' extra is paid at join:
:func:`~acesim.network.plan.crossing_latency`). On a leaf/spine dimension (``leaf_size``,
``oversubscription``; exact mode only) a message between leaves also takes its source leaf's
uplinks and its destination leaf's downlinks, shared by the leaf's NPUs.

CollNet (``collnet``, SHARP on the network's switches) messages take neither incast loss nor
the leaves' uplinks: the switches' aggregation tree sends one reduced stream per leaf to the
spine, ``1/leaf_size`` of the leaf's traffic, which binds only where ``oversubscription``
exceeds ``leaf_size`` (not modelled).

In exact mode with ranks made to differ (stragglers, link changes: :meth:`CollectiveRuntime.agree`)
chunk phases are admitted in agreed orders (:mod:`acesim.network.agreement`), so NPUs that run
at different speeds cannot deadlock.

Symmetric mode simulates one representative NPU: every peer is mapped onto it, so it receives
exactly the messages its peers would have sent (valid when every NPU runs the same traffic on a
vertex-transitive topology, which every dimension kind here is). Exact mode simulates every NPU
with its own resources; both run this same code. In symmetric mode a step of one message is
its own receipt (the mirror is the representative): its delivery completes the step directly
(:data:`MIRROR_PATH`, the same events and sums as the general arrival counting).

Rooted operations (broadcast, reduce: ``CollectiveOp.symmetric`` False) run chain steps whose
sends and receives differ by position (:data:`~acesim.network.algorithms.ROOTED_PATTERNS`):
symmetric mode refuses them by name, exact mode runs them (``issue(..., root=)`` names the
root, a member of the group, default 0). A chain position with nothing to send in a step
completes it when its expected arrivals (:meth:`~acesim.network.step.Step.arrivals`,
possibly none) are in. Operations marked ``single_axis`` are refused on groups of several
dimensions. A ``routed_shift`` operation (sendrecv) on a group of several dimensions has no
phases: in exact mode each member sends its buffer to its successor as one point-to-point
message routed dimension by dimension (:mod:`acesim.network.p2p`) and is done when that
message and its predecessor's have arrived; symmetric mode refuses it.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..config.system import CollectiveConfig
from ..engine import Activity, Engine, Resource
from ..errors import ConfigError, TopologyError
from .agreement import Line, LineOrders
from .algorithms import NVLS_KINDS, ROOTED_PATTERNS
from .endpoint import Endpoint
from .fold import MIN_STEPS, StepFold
from .group import Axis, Group, resolve
from .ops import COLLECTIVE_OPS
from .p2p import PointToPoint, shift_destination
from .plan import (
    COLLNET,
    AlgorithmChoice,
    Lane,
    Phase,
    ProtocolChoice,
    choose_algorithm,
    lanes_delay,
    nvls_pipeline_latency,
    protocol_table,
    validate_algorithms,
)
from .repeats import Repeats
from .shares import MessageShares
from .step import Step
from .topology import Topology

__all__ = ["Collective", "CollectiveRuntime", "Endpoint", "FOLD", "MAX_CHUNKS", "MIRROR_PATH"]


def step_at(steps: Sequence[Step], index: int) -> Step:
    """``steps[index]`` (0 <= index < len): a phase's steps kept as runs (:class:`Repeats`)
    read here, in the compiled module, not through the sequence's Python ``__getitem__`` (a
    step is looked up on every message's path)."""
    if type(steps) is Repeats:
        runs: Repeats[Step] = steps
        items = runs.items
        if len(items) == 1:
            return items[0]
        return items[bisect_right(runs.ends, index)]
    return steps[index]


#: What a message's demand per byte depends on: (rank, dimension, step kind, SM budget, weight,
#: the endpoint's demand epoch); a one-message step's whole demand is kept by its step
#: demand's id (they live as long as the runtime) and its receiver.
DemandKey = tuple[int, int, str, "int | None", float, int]

#: Symmetric mode runs identical consecutive steps in closed form while they are alone
#: (:mod:`acesim.network.fold`); tests turn it off to compare with the event path.
FOLD = True
#: Symmetric mode sends a step of one message (``next``, ``xor``, no lanes) to the
#: representative's mirror, and completes the step at its delivery, without the general
#: path's destinations, arrival counts and checks (:meth:`CollectiveRuntime._send_to_mirror`,
#: :meth:`CollectiveRuntime._deliver_single`): the same activities, events and sums in the same
#: order. False runs every step through the general path (tests compare the two).
MIRROR_PATH = True
#: step patterns of one message (in symmetric mode: to the representative's mirror)
_SINGLE = frozenset({"next", "xor"})

#: The most chunks one collective may be split into by an endpoint's piece size (ACE's SRAM):
#: beyond it the run would take hours and the piece size is almost surely a mistake.
MAX_CHUNKS = 1 << 20


@dataclass
class Collective:
    """One issued collective and its bookkeeping (times in s, sizes in bytes)."""

    id: int
    op: str
    size: float
    dims: tuple[int, ...]
    group_size: int
    phases: list[Phase]
    chunks: int
    issued: float
    label: str = ""
    axes: tuple[Axis, ...] = ()
    priority: int = 0
    expected: int | None = None
    #: the ranks that take part (None: every simulated rank); exact mode's agreed orders skip
    #: the phases of collectives a rank is not in (:mod:`acesim.network.agreement`)
    members: frozenset[int] | None = None
    finished: float | None = None
    rank_finished: dict[int, float] = field(default_factory=dict)
    chunks_left: dict[int, int] = field(default_factory=dict)
    bytes_sent: float = 0.0
    bytes_received: float = 0.0
    bytes_sent_per_dim: dict[int, float] = field(default_factory=dict)
    on_rank_done: Callable[[Collective, int], Any] | None = None
    on_done: Callable[[Collective], Any] | None = None
    #: the NCCL protocol it runs (None: no protocols configured) and its per-phase terms
    protocol: ProtocolChoice | None = None
    #: the algorithm the tuner chose among ``collective.choices`` (None: no choice configured)
    algorithm: str | None = None
    #: NVLS loops' synchronisation, paid when a rank joins (plan.nvls_pipeline_latency), s
    sync_latency: float = 0.0
    #: a routed shift (sendrecv over several dimensions): one point-to-point message per rank
    shift: bool = False
    #: compute units its kernels hold (None: the endpoint's setting)
    units: int | None = None

    @property
    def duration(self) -> float:
        if self.finished is None:
            raise TopologyError(f"collective {self.label or self.id} has not finished")
        return self.finished - self.issued

    @property
    def algorithms(self) -> frozenset[str]:
        """The algorithms of its phases (endpoints hold kernels' units by algorithm)."""
        return frozenset(p.algorithm for p in self.phases)


def _messages(chunks: int, phases: list[Phase]) -> int:
    return chunks * sum(phase.messages for phase in phases)


class _ChunkRun:
    __slots__ = (
        "coll",
        "rank",
        "chunk",
        "phase",
        "step",
        "sends_out",
        "in_step",
        "arrived",
        "phase_start",
        "agreed_phase",
        "agreed_lines",
    )

    def __repr__(self) -> str:
        coll = self.coll
        return (
            f"{coll.label or coll.op} (collective {coll.id}) chunk {self.chunk} at rank {self.rank}"
        )

    def __init__(self, coll: Collective, rank: int, chunk: int):
        self.coll = coll
        self.rank = rank
        self.chunk = chunk
        self.phase = 0
        self.step = 0
        self.sends_out = 0
        self.in_step = False
        self.arrived: dict[tuple[int, int], int] = {}
        self.phase_start = 0.0
        #: exact mode's agreed orders: the lines of phase ``agreed_phase`` (agreement.py)
        self.agreed_phase = -1
        self.agreed_lines: tuple[Line, ...] = ()


class _DimQueue:
    __slots__ = ("active", "waiting")

    def __init__(self) -> None:
        self.active = 0
        self.waiting: list[tuple[tuple[int, int], int, _ChunkRun]] = []


class CollectiveRuntime:
    """Issues and runs collectives on an engine.

    Args:
        engine: the event kernel.
        topology: the network.
        config: collective settings (chunks, scheduling, priorities, per-message delay).
        endpoint: the collective endpoint model.
        exact: simulate every NPU (True) or one representative (False).
        classes: symmetric mode: representatives simulated (class mode, one per class of
            identical ranks; each one's peers in a collective are mapped onto itself, so a
            collective's group must lie within one class).
    """

    def __init__(
        self,
        engine: Engine,
        topology: Topology,
        config: CollectiveConfig,
        endpoint: Endpoint | None = None,
        *,
        exact: bool = False,
        classes: int = 1,
    ):
        self.engine = engine
        self.topology = topology
        self.config = config
        self.endpoint = endpoint or Endpoint()
        self.exact = exact
        #: what the engine's bound listener is told of each NPU's messages (rank -> track
        #: kind; NPU 0 only unless a run kind tracks more: jobs sharing a cluster)
        self.tracks: dict[int, str] = {0: "message"}
        validate_algorithms(config, topology)
        self.ranks: Sequence[int] = range(topology.npus) if exact else range(classes)
        #: starts message activities with the HBM shares of the endpoint
        self.shares = MessageShares(engine, self.endpoint, len(self.ranks))
        #: what each simulated NPU can send to a dimension, and (the same links, the other
        #: direction) receive from it
        self.egress = self._make_links("egress")
        self.ingress = self._make_links("ingress")
        #: per NPU and dimension, what its messages take beyond the links on the path to and
        #: from the NIC, sending and receiving (:meth:`_make_paths`, :meth:`add_path`);
        #: ``paths[d]``: dimension ``d`` has any
        self.send_path, self.recv_path, self.paths = self._make_paths()
        #: leaf/spine dimensions (Dimension.spine; exact mode only): each leaf's uplinks and
        #: downlinks, shared by its NPUs, taken by messages between leaves
        self._leaves = self._make_leaves()
        self._queues = [[_DimQueue() for _ in topology.dimensions] for _ in self.ranks]
        self._runs: dict[tuple[int, int, int], _ChunkRun] = {}
        self._next_id = 0
        self._arrivals = 0  # tie-breaker of waiting chunks: order of arrival
        self._set_delays()
        #: exact mode with per-link latencies (:meth:`set_link`): each rank's link latency, s
        self.rank_latencies: list[list[float]] | None = None
        # Hot-path shortcuts (same behaviour): endpoints that keep the base class's no-op step
        # hooks are not called per step, and point-to-point destinations are computed once per
        # (rank, dimension, group axis, pattern).
        kind = type(self.endpoint)
        self._step_hooks = (
            kind.step_begin is not Endpoint.step_begin or kind.step_end is not Endpoint.step_end
        )
        # likewise the chunk and phase hooks, which proceed at once unless overridden
        self._chunk_begin_hook = kind.chunk_begin is not Endpoint.chunk_begin
        self._chunk_end_hook = kind.chunk_end is not Endpoint.chunk_end
        self._phase_hook = kind.phase_begin is not Endpoint.phase_begin
        #: the endpoint's payload fraction of the links by step kind (asked once a kind)
        self._link_efficiency: dict[str, float | None] = {}
        self._dests: dict[tuple[int, int, int, int, str, int, int], list[int]] = {}
        #: demands made once (:meth:`_step_demand`, :meth:`_message_demand`)
        self._demands: dict[DemandKey, dict[Resource, float]] = {}
        self._messages: dict[tuple[int, int], dict[Resource, float]] = {}
        self._fold_lengths: dict[tuple[int, int, int], int] = {}
        self._choices: dict[Any, tuple[tuple[Axis, ...], int, AlgorithmChoice]] = {}
        self._counts: dict[int, int] = {}
        #: collectives issued without the work bound's check, what it needs, by id (:meth:`issue`)
        self._unchecked: dict[int, tuple[str, float, int, list[Phase], int | None]] = {}
        #: exact mode with ranks made to differ: agreed orders of chunk phases (:meth:`agree`)
        self._lines: LineOrders | None = None
        #: routed shifts (sendrecv over several dimensions): their messages, and per
        #: (collective, rank) the arrivals it still waits for (its own message, its
        #: predecessor's)
        self._p2p: PointToPoint | None = None
        self._shift_left: dict[tuple[int, int], int] = {}
        self.collectives: list[Collective] = []
        #: when not None, every finished phase is appended as
        #: (collective id, rank, chunk, phase index, dimension, start s, end s)
        self.phase_log: list[tuple[int, int, int, int, int, float, float]] | None = None

    def _make_links(self, direction: str) -> list[list[Resource]]:
        """Per simulated NPU and dimension, its links' capacity one way (``direction``:
        "egress" or "ingress"; B/s of payload, protocol efficiency included)."""
        return [
            [
                self.engine.add_resource(f"npu{r}.{d.name}.{direction}", d.egress_bandwidth)
                for d in self.topology.dimensions
            ]
            for r in self.ranks
        ]

    def _make_leaves(self) -> dict[tuple[int, str, int], Resource]:
        """Oversubscribed leaf/spine dimensions: each leaf's uplinks and downlinks (B/s, the
        leaf's NPUs' egress over the oversubscription), keyed by (dimension, "up"/"down",
        the leaf's first rank); refused in symmetric mode."""
        leaves: dict[tuple[int, str, int], Resource] = {}
        topology = self.topology
        for d in topology.dimensions:
            if not d.spine or d.leaf_size is None:
                continue
            if not self.exact:
                raise TopologyError(
                    f"network.dimensions[{d.index}] ({d.name}): an oversubscribed leaf/spine "
                    f"fabric (leaf_size {d.leaf_size}, oversubscription {d.oversubscription:g}) "
                    "loads the spine unevenly across NPUs, which symmetric mode cannot "
                    "represent: run exact mode (--exact)"
                )
            share = d.egress_bandwidth / d.oversubscription
            for r in range(topology.npus):
                if topology.coordinate(r, d.index) % d.leaf_size == 0:
                    for way in ("up", "down"):
                        leaves[(d.index, way, r)] = self.engine.add_resource(
                            f"leaf{r}.{d.name}.spine_{way}", d.leaf_size * share
                        )
        return leaves

    def _set_delays(self) -> None:
        """Per dimension, the delivery delay of a message after it leaves (link latency plus
        the per-message delay, s) and, for NVLS messages, their delay and the egress capacity
        one byte takes (see module)."""
        config, dims = self.config, self.topology.dimensions
        #: per dimension, the delivery delay of ordinary messages (s)
        self.delays = [d.latency + config.endpoint_delay for d in dims]
        nvls_delay = config.endpoint_delay if config.nvls_delay is None else config.nvls_delay
        #: per dimension, the delivery delay of NVLS messages (s)
        self.nvls_delays = [d.latency + nvls_delay for d in dims]
        nvls_eff = (
            config.protocol_efficiency if config.nvls_efficiency is None else config.nvls_efficiency
        )
        #: per dimension, the egress capacity one byte of an NVLS message takes (see module)
        self.nvls_weights = [d.efficiency / nvls_eff for d in dims]
        #: the per-message delay of NVLS steps after the link latency (s)
        self.nvls_delay = nvls_delay

    def set_link(
        self, rank: int, dim: int, *, bandwidth: float | None = None, latency: float | None = None
    ) -> None:
        """Exact mode, before the run: ``rank``'s egress capacity on ``dim`` (B/s, payload:
        protocol efficiency included) and its messages' link latency there (s)."""
        if not self.exact:
            raise TopologyError("per-rank links need exact mode (every NPU simulated)")
        if bandwidth is not None:
            self.engine.set_capacity(self.egress[rank][dim], bandwidth)
        if latency is not None:
            if self.rank_latencies is None:
                self.rank_latencies = [
                    [d.latency for d in self.topology.dimensions] for _ in self.ranks
                ]
            self.rank_latencies[rank][dim] = latency

    @property
    def agreed(self) -> bool:
        """Whether chunk phases are admitted in agreed orders (:meth:`agree`)."""
        return self._lines is not None

    def agree(self) -> None:
        """Exact mode, before the run: admit chunk phases in agreed orders
        (:mod:`acesim.network.agreement`), so ranks made to run at different speeds (stragglers,
        link changes) cannot pick different phases and wait on each other forever."""
        if not self.exact:
            raise TopologyError("agreed orders are for exact mode (every NPU simulated)")
        if self.collectives:
            raise TopologyError("agree() must come before the first collective is issued")
        self._lines = LineOrders(self)

    # -- issuing -----------------------------------------------------------------------------
    def issue(
        self,
        op: str,
        size: float,
        *,
        dims: Sequence[int] | None = None,
        group: Group | None = None,
        label: str = "",
        priority: int = 0,
        on_rank_done: Callable[[Collective, int], Any] | None = None,
        on_done: Callable[[Collective], Any] | None = None,
        ranks: Sequence[int] | None = None,
        joining: frozenset[int] | None = None,
        root: object = None,
        units: int | None = None,
        checked: bool = True,
    ) -> Collective:
        """Issue ``op`` of ``size`` bytes (nccl-tests convention) on a group.

        ``group`` (a :class:`~acesim.network.group.Group`) or ``dims`` (whole dimensions)
        names the communicator; neither means every dimension. ``priority``: waiting chunks of
        higher-priority collectives go first. ``ranks``: the simulated ranks taking part now
        (exact mode: a rank issues when its own program reaches the collective; the others
        join later via :meth:`join`). Default: all simulated ranks at once, and the collective
        finishes (``on_done``) when they all have; with ``ranks`` given, only ``on_rank_done``
        reports progress and ``finished`` is the latest finish so far. ``joining``: the ranks
        that will ever join (None: every simulated rank). ``root``: a rooted operation's root,
        its position in the group (default 0; anything else, a whole number out of the group
        or an operation without a root, is a ConfigError naming it). ``units``: the
        compute units its kernels hold (None: the endpoint's setting; a kernel library on an
        SM budget, :class:`~acesim.workload.model.Comm`). ``checked``: its messages are held to
        the work bound (``collective.max_messages``) now; False: where they run on the event
        path, which the caller says (:meth:`check_work`; exact mode's lockstep backend
        computes a collective without simulating its messages).
        """
        axes, chunks, choice = self.choose(op, size, dims=dims, group=group)
        phases = choice.phases
        expected_ranks = len(self.ranks) if ranks is None else None
        if checked:
            self._check_work(op, size, chunks, phases, expected_ranks)
        if root is not None or COLLECTIVE_OPS.get(op).rooted:
            phases = _rooted(op, phases, root, math.prod(a.size for a in axes))
        coll = self.record(
            op,
            size,
            axes,
            chunks,
            phases,
            choice,
            expected=expected_ranks,
            label=label,
            priority=priority,
            on_rank_done=on_rank_done,
            on_done=on_done,
            members=joining,
            sync_latency=nvls_pipeline_latency(self.config, self.topology, phases, chunks),
            shift=_routed_shift(op, axes),
            units=units,
        )
        if not checked:
            self._unchecked[coll.id] = (op, size, chunks, phases, expected_ranks)
        for rank in self.ranks if ranks is None else ranks:
            self.join(coll, rank)
        return coll

    def check_work(self, coll: Collective) -> None:
        """Hold ``coll``, issued unchecked (:meth:`issue`), to the work bound: its messages run
        on the event path."""
        unchecked = self._unchecked.pop(coll.id, None)
        if unchecked is not None:
            self._check_work(*unchecked)

    def record(
        self,
        op: str,
        size: float,
        axes: tuple[Axis, ...],
        chunks: int,
        phases: list[Phase],
        choice: AlgorithmChoice,
        *,
        expected: int | None,
        **extra: Any,
    ) -> Collective:
        """A new collective (the next id, issued now), kept in :attr:`collectives`; ``extra``:
        further :class:`Collective` fields. Nothing starts (:meth:`issue` joins its ranks)."""
        self._next_id += 1
        coll = Collective(
            id=self._next_id,
            op=op,
            size=size,
            dims=tuple(a.dim for a in axes),
            group_size=math.prod(a.size for a in axes),
            phases=phases,
            chunks=chunks,
            issued=self.engine.now,
            axes=axes,
            expected=expected,
            protocol=choice.protocol,
            algorithm=choice.algorithm,
            **extra,
        )
        self.collectives.append(coll)
        return coll

    def choose(
        self,
        op: str,
        size: float,
        *,
        dims: Sequence[int] | None = None,
        group: Group | None = None,
    ) -> tuple[tuple[Axis, ...], int, AlgorithmChoice]:
        """The group's axes, the chunk count and the tuner's choice (algorithm, one chunk's
        phases, protocol) for ``op`` of ``size`` bytes, without issuing anything (computed
        once per distinct collective: the choice depends on nothing else)."""
        key = (op, size, None if dims is None else tuple(dims), group)
        known = self._choices.get(key)
        if known is not None:
            return known
        made = self._choose(op, size, dims, group)
        self._choices[key] = made
        return made

    def _choose(
        self, op: str, size: float, dims: Sequence[int] | None, group: Group | None
    ) -> tuple[tuple[Axis, ...], int, AlgorithmChoice]:
        COLLECTIVE_OPS.get(op)
        if not size >= 0 or size == math.inf:
            raise TopologyError(f"collective size must be finite and >= 0, got {size}")
        if group is not None and dims is not None:
            raise TopologyError("give a collective either a group or dims, not both")
        axes = resolve(self.topology, group if group is not None else dims)
        chunks = self.config.chunks
        limit = self.endpoint.max_chunk_bytes()
        if limit is not None and size / chunks > limit:
            pieces = size / chunks / limit
            if chunks * pieces > MAX_CHUNKS:
                raise ConfigError(
                    f"endpoint.{self.endpoint.name}",
                    f"splitting a {size:.4g}-byte {op} into pieces of at most {limit:.4g} bytes "
                    f"makes {chunks * pieces:.3g} chunks, more than {MAX_CHUNKS}; give the "
                    "endpoint more buffer or let it stage chunks another way",
                )
            chunks *= math.ceil(pieces)
        choice = choose_algorithm(
            self.config,
            self.topology,
            op,
            size / chunks,
            axes,
            chunks,
            self.endpoint.step_kinds,
            self.endpoint.preferred_algorithms.get(op),
        )
        shaped = self.endpoint.shape_phases(choice.phases)
        if shaped != choice.phases:
            choice = replace(choice, phases=shaped)
        self._check_mode(op, axes, choice.phases)
        if _routed_shift(op, axes):  # one routed message per rank, no phases
            choice = replace(choice, phases=[])
        elif size == 0:
            # nothing to move: NCCL returns at once from a collective of no elements (its
            # enqueue drops a count of 0), so it has no phases and finishes when issued
            choice = replace(choice, phases=[])
        return axes, chunks, choice

    def _check_mode(self, op: str, axes: Sequence[Axis], phases: Sequence[Phase]) -> None:
        """Refuse what this runtime cannot represent: an operation on one dimension only over
        several, steps that differ by position (rooted chains) in symmetric mode."""
        spec = COLLECTIVE_OPS.get(op)
        real = [a for a in axes if a.size > 1]
        if spec.routed_shift and len(real) > 1 and not self.exact:
            raise TopologyError(
                f"{op} over several dimensions sends across the outer ones only from the end "
                "of each inner line, which symmetric mode (one representative NPU) cannot "
                "represent: run exact mode (--exact, exact=True)"
            )
        if spec.single_axis and len(real) > 1:
            shape = "x".join(str(a.size) for a in real)
            raise TopologyError(
                f"{op} runs on a group along one dimension; this group spans {len(real)} "
                f"({shape}): across dimensions its members' traffic differs (not modelled), "
                "use a group on one dimension (without --nodes)"
            )
        if self.exact:
            return
        if not spec.symmetric or any(
            s.pattern in ROOTED_PATTERNS for p in phases for s, _count in p.steps.runs
        ):
            raise TopologyError(
                f"{op} is rooted (every member of its chain does different work), which "
                "symmetric mode (one representative NPU) cannot represent: run exact mode "
                "(--exact, exact=True)"
            )

    def messages_per_rank(
        self,
        op: str,
        size: float,
        *,
        dims: Sequence[int] | None = None,
        group: Group | None = None,
    ) -> int:
        """Messages one rank sends for ``op`` of ``size`` bytes (a cost estimate)."""
        _axes, chunks, choice = self.choose(op, size, dims=dims, group=group)
        return _messages(chunks, choice.phases)

    def _check_work(
        self, op: str, size: float, chunks: int, phases: list[Phase], ranks: int | None
    ) -> None:
        """Refuse a collective whose messages alone would exceed the work bound."""
        per_rank = self._counts.get(id(phases))  # phases lists live on in self._choices
        if per_rank is None:
            per_rank = self._counts[id(phases)] = _messages(chunks, phases)
        total = per_rank * (ranks if ranks is not None else len(self.ranks))
        if total > self.config.max_messages:
            mode = "every NPU" if self.exact else "one NPU"
            raise ConfigError(
                "collective.max_messages",
                f"a {size:.4g}-byte {op} in {chunks} chunks sends {total:.3g} messages "
                f"(simulating {mode}), more than the bound {self.config.max_messages}; use "
                "fewer chunks, symmetric mode or fewer NPUs, or raise the bound knowingly",
            )

    def join(self, coll: Collective, rank: int) -> None:
        """``rank`` starts its part of ``coll`` now."""
        coll.chunks_left[rank] = coll.chunks
        self.endpoint.collective_started(rank, coll.algorithms, coll.units)
        if coll.shift:
            self._join_shift(coll, rank)
            return
        if not coll.phases:
            self.engine.call(0.0, self._chunk_stored, coll, rank)
            return
        base = self.endpoint.start_delay(rank)  # its kernel's wait for compute units
        if coll.protocol is not None:
            base += coll.protocol.base_latency + coll.protocol.crossing_latency
        base += coll.sync_latency
        if base > 0:
            self.engine.call(base, self._start_chunks, coll, rank)
        else:
            self._start_chunks(coll, rank)

    def _join_shift(self, coll: Collective, rank: int) -> None:
        """``rank`` sends its buffer to its successor in the group (a routed shift)."""
        if self._p2p is None:
            self._p2p = PointToPoint(self)
        dest = shift_destination(self.topology, coll.axes, rank)

        def hop(dim: int, nbytes: float) -> None:
            coll.bytes_sent += nbytes
            coll.bytes_sent_per_dim[dim] = coll.bytes_sent_per_dim.get(dim, 0.0) + nbytes

        def delivered() -> None:
            coll.bytes_received += coll.size
            self._shift_arrival(coll, rank)
            self._shift_arrival(coll, dest)

        self._p2p.send(rank, dest, coll.size, delivered, hop)

    def _shift_arrival(self, coll: Collective, rank: int) -> None:
        key = (coll.id, rank)
        left = self._shift_left.get(key, 2) - 1
        if left > 0:
            self._shift_left[key] = left
            return
        self._shift_left.pop(key, None)
        self._chunk_stored(coll, rank)

    def _start_chunks(self, coll: Collective, rank: int) -> None:
        in_bytes, _out, footprint = self._chunk_bytes(coll)
        for c in range(coll.chunks):
            run = self._run_for(coll, rank, c)
            if self._chunk_begin_hook:
                self.endpoint.chunk_begin(rank, in_bytes, footprint, partial(self._enqueue, run))
            else:
                self._enqueue(run)

    @staticmethod
    def _chunk_bytes(coll: Collective) -> tuple[float, float, float]:
        """(input, output, footprint) bytes of one chunk at an NPU."""
        return COLLECTIVE_OPS.get(coll.op).chunk_io(coll.size / coll.chunks, coll.group_size)

    def _run_for(self, coll: Collective, rank: int, chunk: int) -> _ChunkRun:
        # Created on first use: a peer's message may arrive before this rank has joined.
        key = (coll.id, rank, chunk)
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _ChunkRun(coll, rank, chunk)
        return run

    # -- scheduling --------------------------------------------------------------------------
    def _key(self, run: _ChunkRun) -> tuple[int, int]:
        # Higher priority first (when priorities are on); then between collectives, oldest
        # (fifo) or newest (lifo) first; within a collective, in order of arrival at this
        # dimension's queue (the arrival counter breaks ties).
        coll = run.coll
        rank = -coll.priority if self.config.priorities == "blocking_first" else 0
        return (rank, coll.id if self.config.scheduling == "fifo" else -coll.id)

    def _enqueue(self, run: _ChunkRun) -> None:
        # the endpoint may hold the chunk before its next phase (ACE's phase partitions)
        if not self._phase_hook:
            self._queue(run)
            return
        coll = run.coll
        io = self._chunk_bytes(coll)
        self.endpoint.phase_begin(
            run.rank, run, run.phase, coll.phases, io, partial(self._queue, run)
        )

    def _queue(self, run: _ChunkRun) -> None:
        dim = run.coll.phases[run.phase].dim
        queue = self._queues[run.rank][dim]
        if self._lines is not None:
            self._arrivals += 1
            heapq.heappush(queue.waiting, (self._key(run), self._arrivals, run))
            self._lines.fill(run.rank, dim)
            return
        if queue.active < self.config.active_chunks_per_dimension:
            queue.active += 1
            run.step = 0
            self._phase_started(run)
            self._start_step(run)
        else:
            self._arrivals += 1
            heapq.heappush(queue.waiting, (self._key(run), self._arrivals, run))

    def _release(self, rank: int, dim: int) -> None:
        queue = self._queues[rank][dim]
        queue.active -= 1
        if self._lines is not None:
            self._lines.fill(rank, dim)
            return
        if queue.waiting:
            _, _, run = heapq.heappop(queue.waiting)
            queue.active += 1
            run.step = 0
            self._phase_started(run)
            self._start_step(run)

    def _phase_started(self, run: _ChunkRun) -> None:
        run.phase_start = self.engine.now

    # -- steps and messages ------------------------------------------------------------------
    def _start_step(self, run: _ChunkRun) -> None:
        if not self._step_hooks:
            if self.exact or FOLD is False or not self._fold(run):
                self._send_step(run)
            return
        phase = run.coll.phases[run.phase]
        step = step_at(phase.steps, run.step)
        self.endpoint.step_begin(
            run.rank, step.kind, partial(self._send_step, run), step.message_count(phase.size)
        )

    def _fold_length(self, coll: Collective, phase_index: int, first: int) -> int:
        """Consecutive steps from ``first`` to the end of the phase alike in symmetric mode
        (one message to the mirror, the same bytes and kind): what :class:`StepFold` may
        run in closed form."""
        key = (coll.id, phase_index, first)
        length = self._fold_lengths.get(key)
        if length is None:
            phase = coll.phases[phase_index]
            runs = phase.steps.runs
            run, left = phase.steps.run_from(first)  # the steps' runs of repeats, from first on
            head = runs[run][0]
            length = 0
            if not phase.lanes and not phase.pipelined:
                for step, count in runs[run:]:
                    if (
                        step.pattern not in _SINGLE
                        or step.message_bytes != head.message_bytes
                        or step.kind != head.kind
                    ):
                        break
                    length += left
                    left = count  # every step of the following runs
            self._fold_lengths[key] = length
        return length

    def _fold(self, run: _ChunkRun) -> bool:
        """Run ``run``'s identical steps from its current one in closed form
        (:mod:`acesim.network.fold`) when they would run alone; False when they may not."""
        if self.rank_latencies is not None:
            return False
        coll = run.coll
        if len(coll.phases[run.phase].steps) - run.step < MIN_STEPS:
            return False  # fewer steps left in the phase: no run to fold
        count = self._fold_length(coll, run.phase, run.step)
        if count < MIN_STEPS:
            return False
        phase = coll.phases[run.phase]
        step = step_at(phase.steps, run.step)
        demand, weight, _innet = self._step_demand(run, phase, step)
        message = dict(demand)
        message[self.ingress[run.rank][phase.dim]] = weight
        if self.paths[phase.dim]:
            self.add_path_demand(message, run.rank, run.rank, phase.dim, weight)
        clean = {res: float(amount) for res, amount in message.items() if amount > 1e-300}
        engine = self.engine
        for res in clean:
            if not res.metered and not engine.idle(res):  # a meter is held, not claimed
                return False
        delay = self._step_delay(coll, run.phase, run.step)
        return StepFold(self, run, count, clean, step.message_bytes, delay).begin()

    def _destinations(self, rank: int, phase: Phase, step: Step) -> list[int]:
        """The simulated ranks ``rank`` sends a message of ``step`` to (in symmetric mode the
        representative itself, for each of its peers)."""
        topo = self.topology
        global_rank = rank if self.exact else 0
        dim = phase.dim
        own = topo.coordinate(global_rank, dim)
        axis = Axis(dim, phase.size, phase.stride)
        positions = step.destinations(axis.position(own), phase.size)
        if not self.exact:
            return [rank] * len(positions)
        return [topo.peer(global_rank, dim, axis.coordinate(own, p)) for p in positions]

    def _spine(self, src: int, dest: int, dim: int) -> tuple[Resource, ...]:
        """What a message from rank ``src`` to rank ``dest`` takes across the spine of
        ``dim`` (exact mode only: symmetric mode refuses a spine): nothing inside a leaf;
        between leaves the source leaf's uplinks and the destination leaf's downlinks, each
        ``leaf_size x`` an NPU's links over ``oversubscription``, shared by the leaf's NPUs."""
        topo = self.topology
        d = topo.dimensions[dim]
        if d.leaf_size is None:
            return ()
        a, b = topo.coordinate(src, dim), topo.coordinate(dest, dim)
        if d.leaf(a) == d.leaf(b):
            return ()
        up = topo.peer(src, dim, d.leaf(a) * d.leaf_size)
        down = topo.peer(dest, dim, d.leaf(b) * d.leaf_size)
        return (self._leaves[(dim, "up", up)], self._leaves[(dim, "down", down)])

    def _make_paths(
        self,
    ) -> tuple[list[list[dict[Resource, float]]], list[list[dict[Resource, float]]], list[bool]]:
        """Each simulated NPU's path resources per dimension, sending and receiving: on network
        dimensions that state them, the NIC's proxy (sends) and the PCIe link to the NIC
        (each way); the platform adds the GPU's own PCIe link (:meth:`add_path`)."""
        dims = self.topology.dimensions
        send: list[list[dict[Resource, float]]] = [[{} for _ in dims] for _ in self.ranks]
        receive: list[list[dict[Resource, float]]] = [[{} for _ in dims] for _ in self.ranks]
        for d in dims:
            for r in self.ranks:
                if d.nic_efficiency < 1.0:
                    name = f"npu{r}.{d.name}.nic_proxy"
                    send[r][d.index][self.engine.add_resource(name, d.proxy_bandwidth)] = 1.0
                if d.pcie_bandwidth is not None:
                    out = self.engine.add_resource(f"npu{r}.{d.name}.pcie_send", d.pcie_bandwidth)
                    back = self.engine.add_resource(
                        f"npu{r}.{d.name}.pcie_receive", d.pcie_bandwidth
                    )
                    send[r][d.index][out] = 1.0
                    receive[r][d.index][back] = 1.0
        has = [d.nic_efficiency < 1.0 or d.pcie_bandwidth is not None for d in dims]
        return send, receive, has

    def add_path(
        self, rank: int, dim: int, send: Resource | None = None, receive: Resource | None = None
    ) -> None:
        """Before the run: every message ``rank`` sends on ``dim`` also takes ``send``, every
        one it receives there ``receive`` (a resource on the path to the NIC, B/s of payload:
        the platform adds the GPU's PCIe link, which host copies share)."""
        if send is not None:
            self.send_path[rank][dim][send] = 1.0
        if receive is not None:
            self.recv_path[rank][dim][receive] = 1.0
        self.paths[dim] = self.paths[dim] or send is not None or receive is not None

    def paths_may_bind(self) -> bool:
        """Whether a path resource (:meth:`add_path`) has less capacity than its dimension's
        links at some NPU, so that it could bind a message; where none has, messages run as on
        the links alone (what :mod:`acesim.network.vectorized` computes)."""
        for dim, has in enumerate(self.paths):
            if not has:
                continue
            for i in range(len(self.ranks)):
                links = min(self.egress[i][dim].capacity, self.ingress[i][dim].capacity)
                for path in (self.send_path[i][dim], self.recv_path[i][dim]):
                    if any(r.capacity < links for r in path):
                        return True
        return False

    def add_path_demand(
        self, message: dict[Resource, float], rank: int, dest: int, dim: int, weight: float
    ) -> None:
        """Add the sender's and the receiver's path resources on ``dim`` to ``message``."""
        for resource, w in self.send_path[rank][dim].items():
            message[resource] = w * weight
        for resource, w in self.recv_path[dest][dim].items():
            message[resource] = w * weight

    def _lane_delay(self, coll: Collective, phase: Phase) -> float:
        """The delivery delay of a pipelined phase's messages, s: its slowest lane's (every
        lane's message is delivered then, so the step ends a lane delay after its busiest
        lane's bytes are out, whichever lane that is; the rest of the path's latency is paid
        at join, :func:`~acesim.network.plan.crossing_latency`)."""
        proto = None
        if coll.protocol is not None and coll.protocol.name is not None:
            table = protocol_table(self.config, phase.algorithm)
            proto = None if table is None else table.get(coll.protocol.name)
        return lanes_delay(self.config, self.topology, phase, proto)

    def _lane_destination(self, rank: int, lane: Lane) -> int:
        """The next member along ``lane``'s axis (in symmetric and class mode the simulated
        rank itself, its mirror: the group lies within its class)."""
        if not self.exact:
            return rank
        topo = self.topology
        own = topo.coordinate(rank, lane.dim)
        axis = Axis(lane.dim, lane.size, lane.stride)
        nxt = (axis.position(own) + 1) % lane.size
        return topo.peer(rank, lane.dim, axis.coordinate(own, nxt))

    def _send_lanes(self, run: _ChunkRun, phase: Phase, step: Step) -> None:
        """A flat-ring or pipelined step: one message per lane, each its share of the step's
        bytes (a pipelined lane's charged as its own kind, NVLS lanes at NVLS's
        efficiency)."""
        coll = run.coll
        rank = run.rank
        factor = 1.0
        if coll.protocol is not None and coll.protocol.factors:
            factor = coll.protocol.factors[run.phase]
        track = self.tracks.get(rank)
        run.sends_out = len(phase.lanes)
        for lane in phase.lanes:
            kind = phase.lane_kind(lane, step)
            weight = (self.nvls_weights[lane.dim] if kind in NVLS_KINDS else 1.0) / factor
            dest = self._lane_destination(rank, lane)
            message = {self.egress[rank][lane.dim]: weight}
            message.update(self.endpoint.collective_message_demand(rank, kind, coll.units))
            message[self.ingress[dest][lane.dim]] = weight
            self.add_path_demand(message, rank, dest, lane.dim, weight)
            if self.topology.dimensions[lane.dim].spine:
                for resource in self._spine(rank, dest, lane.dim):
                    message[resource] = weight
            self.shares.start(
                rank,
                step.message_bytes * lane.fraction,
                message,
                self._sent,
                tag=(run, dest, run.phase, run.step, lane.dim),
                track=track,
            )

    def _step_weight(self, run: _ChunkRun, phase: Phase, step: Step) -> tuple[float, bool]:
        """The weight per byte of each message of ``run``'s ``step`` on its links (NVLS,
        protocol, endpoint payload fraction, incast) and whether the switches reduce."""
        coll = run.coll
        dim = phase.dim
        nvls = step.kind in NVLS_KINDS
        weight = self.nvls_weights[dim] if nvls else 1.0
        if coll.protocol is not None and coll.protocol.factors:
            weight /= coll.protocol.factors[run.phase]
        d = self.topology.dimensions[dim]
        kind = step.kind
        if kind in self._link_efficiency:
            own = self._link_efficiency[kind]
        else:
            own = self._link_efficiency[kind] = self.endpoint.link_efficiency(kind)
        if own is not None:
            weight *= d.efficiency / own  # the endpoint's payload fraction, not the protocol's
        innet = phase.algorithm == COLLNET  # the switches reduce: no incast, no spine streams
        if (
            d.incast_fan_in is not None
            and step.message_count(phase.size) > d.incast_fan_in
            and not innet
        ):
            weight /= d.incast_efficiency  # more senders per receiver than the switch takes
        return weight, innet

    def _step_demand(
        self, run: _ChunkRun, phase: Phase, step: Step
    ) -> tuple[dict[Resource, float], float, bool]:
        """What each message of ``run``'s ``step`` takes per byte before its receiver's side:
        the sender's egress at the step's weight and the endpoint's resources (one dict per
        rank, dimension, kind, budget, weight and endpoint demand epoch: not to be changed);
        the weight and whether the switches reduce (:meth:`_step_weight`)."""
        weight, innet = self._step_weight(run, phase, step)
        units = run.coll.units
        key = (run.rank, phase.dim, step.kind, units, weight, self.endpoint.demand_epoch())
        demand = self._demands.get(key)
        if demand is None:
            demand = {self.egress[run.rank][phase.dim]: weight}
            demand.update(self.endpoint.collective_message_demand(run.rank, step.kind, units))
            self._demands[key] = demand
        return demand, weight, innet

    def _send_step(self, run: _ChunkRun) -> None:
        coll = run.coll
        phase = coll.phases[run.phase]
        step = step_at(phase.steps, run.step)
        # In the step from now on, not from step_begin: a peer's message that arrives while the
        # endpoint still delays this step (setup, units to acquire) must not complete it unsent.
        run.in_step = True
        if phase.lanes:
            self._send_lanes(run, phase, step)
            return
        if MIRROR_PATH and not self.exact and step.pattern in _SINGLE:
            self._send_to_mirror(run, phase, step)
            return
        rank = run.rank
        dim = phase.dim
        dests: Sequence[int]
        if step.pattern == "all" or step.pattern in ROOTED_PATTERNS:
            # p-1 messages: the cost is theirs, and a cache O(p) per rank; a chain's
            # destinations depend on the step
            dests = self._destinations(rank, phase, step)
        else:
            key = (rank, dim, phase.size, phase.stride, step.pattern, step.distance, step.count)
            cached = self._dests.get(key)
            if cached is None:
                cached = self._dests[key] = self._destinations(rank, phase, step)
            dests = cached
        run.sends_out = len(dests)
        if not dests:  # a chain position with nothing to send: done when its arrivals are in
            self.engine.schedule(0.0, self._check_step, run)
            return
        if step.pattern == "all":
            self._copy_locally(run, step)
        demand, weight, innet = self._step_demand(run, phase, step)
        shares = self.shares
        track = self.tracks.get(rank)
        spines: list[tuple[Resource, ...]] | None = None
        if self.topology.dimensions[dim].spine and not innet:
            spines = [self._spine(rank, dest, dim) for dest in dests]
        single = len(dests) == 1  # a ring's step: its message's demand kept
        for i, dest in enumerate(dests):
            spine = spines[i] if spines is not None else ()
            message = self._message_demand(demand, weight, rank, dest, dim, spine, single)
            shares.start(
                run.rank,
                step.message_bytes,
                message,
                self._sent,
                tag=(run, dest, run.phase, run.step, dim),
                track=track,
                shared=single,
            )

    def _send_to_mirror(self, run: _ChunkRun, phase: Phase, step: Step) -> None:
        """:meth:`_send_step` of a symmetric-mode step of one message (``next``, ``xor``) on
        a phase without lanes: the representative sends it to its mirror, itself (the same
        demand, in the same order, as the general path; symmetric mode has no spine)."""
        rank = run.rank
        dim = phase.dim
        run.sends_out = 1
        demand, weight, _innet = self._step_demand(run, phase, step)
        message = self._message_demand(demand, weight, rank, rank, dim, (), True)
        self.shares.start(
            rank,
            step.message_bytes,
            message,
            self._sent,
            tag=(run, rank, run.phase, run.step, dim),
            track=self.tracks.get(rank),
            shared=True,  # kept in _messages, unchanged
        )

    def _message_demand(
        self,
        demand: dict[Resource, float],
        weight: float,
        rank: int,
        dest: int,
        dim: int,
        spine: tuple[Resource, ...],
        keep: bool,
    ) -> dict[Resource, float]:
        """A message's whole demand per byte: its step's ``demand`` (:meth:`_step_demand`)
        and the receiver's side at ``weight``: its ingress (symmetric mode: its mirror, the
        simulated NPU), its path, the ``spine`` it crosses. ``keep``: made once per step
        demand and receiver, not to be changed (the step demands live as long as the
        runtime: their ids are not reused)."""
        key = (id(demand), dest)
        message = self._messages.get(key) if keep else None
        if message is None:
            message = dict(demand)
            message[self.ingress[dest][dim]] = weight
            if self.paths[dim]:
                self.add_path_demand(message, rank, dest, dim, weight)
            for resource in spine:
                message[resource] = weight
            if keep:
                self._messages[key] = message
        return message

    def _copy_locally(self, run: _ChunkRun, step: Step) -> None:
        """The local copy the endpoint makes beside a direct step's messages (its
        ``local_copy_demand``: the NPU's own piece, ``message_bytes``), if any: one more
        activity the step waits for, sending nothing."""
        local = self.endpoint.local_copy_demand(run.rank, step.kind)
        if local is None:
            return
        run.sends_out += 1
        self.shares.start(
            run.rank, step.message_bytes, dict(local), self._copied, tag=run, track=None
        )

    def _copied(self, act: Activity) -> None:
        run: _ChunkRun = act.tag
        run.sends_out -= 1
        if run.sends_out == 0:
            self._check_step(run)

    def _sent(self, act: Activity) -> None:
        tag: tuple[_ChunkRun, int, int, int, int] = act.tag  # typed: read natively below
        run, dest, phase_index, step_index, dim = tag
        coll = run.coll
        nbytes = act.work
        coll.bytes_sent += nbytes
        coll.bytes_sent_per_dim[dim] = coll.bytes_sent_per_dim.get(dim, 0.0) + nbytes
        # a flat ring's messages on every lane take its inner dimension's delay (the outer
        # hops' extra is paid once: plan.crossing_latency)
        phase = coll.phases[phase_index]
        at = phase.dim
        if phase.pipelined:  # each lane's messages take their own dimension's delay
            delay = self._lane_delay(coll, phase)
            if self.rank_latencies is not None:
                d = self.topology.dimensions[dim]
                delay += self.rank_latencies[run.rank][dim] - d.latency
            self.engine.call(
                delay, self._deliver, coll, dest, run.chunk, phase_index, step_index, nbytes
            )
            run.sends_out -= 1
            if run.sends_out == 0:
                self._check_step(run)
            return
        step = step_at(phase.steps, step_index)
        if self.rank_latencies is None:
            delay = self._delay_of(coll, phase_index, at, step)
        else:  # per-rank link latencies (set_link)
            nvls = step.kind in NVLS_KINDS
            hop = coll.protocol.hop_latencies[phase_index] if coll.protocol is not None else None
            extra = (
                hop
                if hop is not None
                else (self.nvls_delay if nvls else self.config.endpoint_delay)
            )
            delay = self.rank_latencies[run.rank][at] + extra
            if dim != at:  # a flat ring's outer lane: its own link's change, step by step
                delay += self.rank_latencies[run.rank][dim] - self.topology.dimensions[dim].latency
        single = MIRROR_PATH and not phase.lanes and step.pattern in _SINGLE
        if single and dest == run.rank:  # symmetric mode: to its mirror, the run itself
            self.engine.call(
                delay, self._deliver_single, run, phase_index, step_index, nbytes, phase, step
            )
        else:
            self.engine.call(
                delay, self._deliver, coll, dest, run.chunk, phase_index, step_index, nbytes
            )
        run.sends_out -= 1
        if run.sends_out == 0:
            if single and (phase_index, step_index) not in run.arrived:
                return  # its one message not yet in: _check_step would wait (the hot path)
            self._check_step(run)

    def _step_delay(self, coll: Collective, phase_index: int, step_index: int) -> float:
        """A message's delay from its last byte out to its delivery, s, on a non-pipelined
        phase without per-rank latencies: its dimension's latency plus the endpoint's (or
        NVLS's) delay, or plus the protocol's hop latency."""
        phase = coll.phases[phase_index]
        return self._delay_of(coll, phase_index, phase.dim, step_at(phase.steps, step_index))

    def _delay_of(self, coll: Collective, phase_index: int, at: int, step: Step) -> float:
        """:meth:`_step_delay` of ``step`` of phase ``phase_index`` on dimension ``at``."""
        hop = coll.protocol.hop_latencies[phase_index] if coll.protocol is not None else None
        if hop is not None:
            return self.topology.dimensions[at].latency + hop
        nvls = step.kind in NVLS_KINDS
        return (self.nvls_delays if nvls else self.delays)[at]

    def _deliver(
        self, coll: Collective, dest: int, chunk: int, phase: int, step: int, nbytes: float
    ) -> None:
        coll.bytes_received += nbytes
        run = self._run_for(coll, dest, chunk)
        key = (phase, step)
        run.arrived[key] = run.arrived.get(key, 0) + 1
        if run.phase == phase and run.step == step:
            self._check_step(run)

    def _deliver_single(
        self,
        run: _ChunkRun,
        phase: int,
        step: int,
        nbytes: float,
        current: Phase,
        sent: Step,
    ) -> None:
        """:meth:`_deliver` of the one message of a step (``next``, ``xor``, no lanes) that a
        run sent to itself (symmetric mode's mirror; the run is the one :meth:`_run_for`
        finds: it waits for this message, so it is live). When the run is in that step, its
        sends out and nothing else arrived for it, the message completes the step, as
        :meth:`_check_step` would find (one expected, one arrived, the count dropped).
        ``current``, ``sent``: the phase and step (objects) the indices name."""
        run.coll.bytes_received += nbytes
        if (
            run.phase == phase
            and run.step == step
            and run.in_step
            and run.sends_out == 0
            and (not run.arrived or (phase, step) not in run.arrived)
        ):
            self._step_done(run, current, sent)
            return
        key = (phase, step)
        run.arrived[key] = run.arrived.get(key, 0) + 1
        if run.phase == phase and run.step == step:
            self._check_step(run)

    def _check_step(self, run: _ChunkRun) -> None:
        if not run.in_step or run.sends_out > 0:
            return
        phase = run.coll.phases[run.phase]
        step = step_at(phase.steps, run.step)
        key = (run.phase, run.step)
        if step.pattern in ROOTED_PATTERNS:
            axis = Axis(phase.dim, phase.size, phase.stride)
            own = axis.position(self.topology.coordinate(run.rank, phase.dim))
            expected = step.arrivals(own, phase.size)
        else:
            expected = phase.message_count(step)
        if run.arrived.get(key, 0) < expected:
            return
        run.arrived.pop(key, None)
        self._step_done(run, phase, step)

    def _step_done(self, run: _ChunkRun, phase: Phase, step: Step) -> None:
        """``run``'s current step (``step`` of ``phase``) has sent and received everything:
        the next step, or the next phase, or the chunk leaves its last phase."""
        run.in_step = False
        if self._step_hooks:
            self.endpoint.step_end(run.rank, step.kind)
        run.step += 1
        if run.step < len(phase.steps):
            self._start_step(run)
            return
        run.phase += 1
        if self.phase_log is not None:
            self.phase_log.append(
                (
                    run.coll.id,
                    run.rank,
                    run.chunk,
                    run.phase - 1,
                    phase.dim,
                    run.phase_start,
                    self.engine.now,
                )
            )
        self._release(run.rank, phase.dim)
        if run.phase < len(run.coll.phases):
            self._enqueue(run)
        else:
            coll = run.coll
            del self._runs[(coll.id, run.rank, run.chunk)]
            if not self._phase_hook:
                self._chunk_left(run)
                return
            io = self._chunk_bytes(coll)
            self.endpoint.phase_begin(
                run.rank, run, len(coll.phases), coll.phases, io, partial(self._chunk_left, run)
            )

    def _chunk_left(self, run: _ChunkRun) -> None:
        coll = run.coll
        if not self._chunk_end_hook:
            self._chunk_stored(coll, run.rank)
            return
        _in, out_bytes, footprint = self._chunk_bytes(coll)
        self.endpoint.chunk_end(
            run.rank, out_bytes, footprint, partial(self._chunk_stored, coll, run.rank)
        )

    def _chunk_stored(self, coll: Collective, rank: int) -> None:
        left = coll.chunks_left[rank] - 1 if coll.phases else 0
        coll.chunks_left[rank] = left
        if left > 0:
            return
        coll.rank_finished[rank] = self.engine.now
        self.endpoint.collective_finished(rank, coll.algorithms, coll.units)
        if coll.on_rank_done is not None:
            coll.on_rank_done(coll, rank)
        if coll.expected is None:
            # Ranks join as their programs reach the collective; which will is not known here,
            # so ``finished`` is the latest finish so far and there is no whole-collective event.
            coll.finished = max(coll.rank_finished.values())
        elif len(coll.rank_finished) == coll.expected:
            coll.finished = max(coll.rank_finished.values())
            if coll.on_done is not None:
                coll.on_done(coll)


def _rooted(op: str, phases: list[Phase], root: object, members: int) -> list[Phase]:
    """``phases`` with their chains rooted at group position ``root`` (default 0); ConfigError
    naming ``root`` for a root given to an operation that takes none, or outside the group."""
    if not COLLECTIVE_OPS.get(op).rooted:
        raise ConfigError("root", f"{op} takes no root (only rooted operations do)", root)
    if root is None or root == 0:
        return phases
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < members:
        raise ConfigError(
            "root", f"must be a whole number from 0 to {members - 1} (the group's members)", root
        )
    out = []
    for phase in phases:
        steps = Repeats((_rerooted(s, root, phase.size), n) for s, n in phase.steps.runs)
        out.append(replace(phase, steps=steps))
    return out


def _rerooted(step: Step, root: int, size: int) -> Step:
    """``step`` with its chain rooted ``root`` positions on (of ``size``); other steps as
    they are."""
    if step.pattern in ROOTED_PATTERNS:
        return replace(step, root=(step.root + root) % size)
    return step


def _routed_shift(op: str, axes: Sequence[Axis]) -> bool:
    """Whether ``op`` on ``axes`` runs as a routed shift (see the module docstring)."""
    return COLLECTIVE_OPS.get(op).routed_shift and sum(1 for a in axes if a.size > 1) > 1
