"""Running execution graphs on a platform.

Semantics:
* a node starts when all its dependencies have finished;
* compute nodes of a rank run one at a time on its compute stream; among ready kernels the one
  with the smallest id goes first (deterministic; loop builders number nodes in program order);
* a collective node joins the collective instance matched across ranks by (op, size,
  communicator) and order of issue, and finishes at a rank when that rank's part is done; its
  chunks wait with priority ``node.priority``, or, when unset, 1 for a blocking node and 0
  otherwise (the runtime honours it under ``collective.priorities = "blocking_first"``);
* a node held by a :class:`Gate` (a job that starts at a time or after another job,
  :mod:`acesim.runs.jobs`) becomes ready only when the gate opens;
* a send finishes when its message is delivered; a receive finishes when the message with its
  (source, tag) has arrived (class mode: sources and peers are classes, simulated by their
  representatives, :mod:`acesim.network.classes`).

Everything a report needs is recorded on the way: per-node start/end, per-kernel time alone,
iteration boundaries and resource snapshots at those boundaries.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SimulationError, WorkloadError
from ..hardware.platform import Platform
from ..hardware.power import Meters, read_meters
from ..network import vectorized
from ..network.agreed_lockstep import AgreedLockstep
from ..network.collective import Collective
from ..network.group import members, resolve
from ..network.p2p import PointToPoint
from ..workload.graph import Graph, Node, PassBuilder, beside_passes, placed
from .bounds import BoundRecorder
from .composition import Composition

#: Exact mode: how many times a run may be redone to move overlapping collectives to the event
#: path (see :meth:`GraphExecutor.run`) before every collective runs there.
MAX_REDOS = 4
#: Exact mode on an agreed runtime (a platform with a variation): every collective computed
#: in agreed orders as the run goes (:class:`~acesim.network.agreed_lockstep.AgreedLockstep`);
#: False: one at a time when its last rank joins (:class:`~acesim.network.vectorized.
#: Deferred`, as before). Tests switch it to compare the two.
AGREED_LOCKSTEP = True


class _Stalled(SimulationError):
    """Nodes never ran: the run ended with ranks waiting on each other (see
    :meth:`GraphExecutor._agreed`)."""


@dataclass
class NodeRecord:
    """What happened to one node at one simulated rank (times in s)."""

    node: Node
    start: float = -1.0
    end: float = -1.0
    ready: float = -1.0  # when its dependencies (and its gate) let it start, s
    alone: float = 0.0  # compute: roofline time on the whole NPU, s
    hbm_bytes: float = 0.0
    collective: int | None = None  # collective nodes: the runtime's instance id


@dataclass(frozen=True)
class Gate:
    """Nodes (``held``: (rank, node id) of nodes without dependencies) that become ready only
    at time ``at`` (s) and after every node of ``after`` ((rank, node id)) has finished."""

    held: tuple[tuple[int, int], ...]
    at: float = 0.0
    after: tuple[tuple[int, int], ...] = ()


@dataclass
class Snapshot:
    """Cumulative counters at one instant (bytes; s)."""

    time: float
    egress_bytes: list[float]
    hbm_bytes: float
    #: HBM capacity compute kernels consumed: their bytes, writes with their turnaround
    #: penalty (the kernels cause it; results attribute it to compute, not communication)
    compute_hbm_bytes: float
    compute_busy: float
    units_held_time: float = 0.0  # unit-s held by communication (NPU 0)
    meters: Meters | None = None  # NPU 0's counters for the energy model


#: a node and the sorted disjoint intervals (starts, ends: arrays, s) of nodes like it
AddedSpans = tuple[Node, Any, Any]


@dataclass
class Execution:
    """The outcome of running a graph."""

    platform: Platform
    graph: Graph
    records: list[dict[int, NodeRecord]]
    iteration_end: dict[int, float] = field(default_factory=dict)
    iteration_start: dict[int, float] = field(default_factory=dict)
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    collectives: list[Collective] = field(default_factory=list)
    makespan: float = 0.0
    final: Snapshot | None = None
    bounds: BoundRecorder | None = None  # what bound NPU 0's kernels and messages
    warmup: int = 0  # iterations the measurement drops (set by whoever runs it)
    #: exact mode: times the run was redone to move overlapping collectives to the event
    #: path, and the collectives that ran there (the others ran without message events)
    redone: int = 0
    event_collectives: int = 0
    #: exact mode: collectives computed without events together with overlapping ones
    #: (:meth:`acesim.network.vectorized.Lockstep.run_joint`)
    joint_collectives: int = 0
    #: exact mode: every rank was identical to rank 0 (same graph and NPU, nothing making
    #: ranks differ, collectives finishing at one time everywhere), so rank 0 was simulated
    #: and its records stand for every rank's (each rank's map holds rank 0's record
    #: objects; see :class:`GraphExecutor`)
    replicated: bool = False
    #: exact mode: why collectives ran on the event path (reason -> collectives), the
    #: lockstep backend's own words (:mod:`acesim.network.vectorized`)
    event_reasons: dict[str, int] = field(default_factory=dict)
    #: a composed run (:mod:`.compose`): how it went, and per simulated NPU what its timed
    #: passes counted (simulated alone, not on this platform: the energy adds them)
    composed: Composition | None = None
    added_meters: dict[int, Meters] = field(default_factory=dict)
    #: a composed run: per simulated NPU, its timed passes' records as the result reads them
    #: (:meth:`.compose.PassTimes.complete`): per group of like nodes (kind, communication
    #: kind, operation) one of them and the union of the group's intervals over every timer,
    #: as sorted disjoint starts and ends (arrays, s; empty where the group took no time)
    added_spans: list[list[AddedSpans]] = field(default_factory=list)
    #: a composed graph's passes whose form the run decided (:attr:`Graph.choices`): how
    #: many ran their own nodes (a DP collective in flight as they became ready)
    chosen_full: int = 0
    #: the run stopped once its measurement was complete (``GraphExecutor(stop_at=...)``):
    #: :attr:`makespan` and :attr:`final` are that instant's, the last iteration is not run
    #: to its end
    stopped: bool = False
    #: asked to stop there but run to its end: why (:meth:`GraphExecutor._stop_problem`)
    unstopped: str = ""

    def spans(self, rank: int, kind: str) -> list[AddedSpans]:
        """The added spans (:attr:`added_spans`) of ``rank``'s nodes of ``kind``."""
        if rank >= len(self.added_spans):
            return []
        return [a for a in self.added_spans[rank] if a[0].kind == kind]


class _RankState:
    __slots__ = (
        "rank",
        "nodes",
        "waiting",
        "users",
        "ready_compute",
        "busy",
        "left_per_iter",
        "running",
        "pass_done",
    )

    def __init__(self, rank: int, nodes: list[Node], like: _RankState | None = None):
        self.rank = rank
        self.ready_compute: list[int] = []
        self.busy = False
        #: the compute node whose pass runs on the rank's NPU, and what the NPU calls at its
        #: end (:class:`_PassDone`, made at the rank's first pass)
        self.running: Node | None = None
        self.pass_done: _PassDone | None = None
        self.nodes: dict[int, Node]
        self.waiting: dict[int, int]
        #: each node's users, and nodes per iteration (iterations in order of their first)
        self.users: dict[int, list[int]]
        self.left_per_iter: dict[int, int]
        if like is not None:
            # a rank of the same node list whose graph the run never changes: its nodes,
            # users and counts per iteration shared (read only), its waiting counts its own
            self.nodes = like.nodes
            self.users = like.users
            self.left_per_iter = like.left_per_iter
            self.waiting = like.waiting.copy()
            return
        self.nodes = {n.id: n for n in nodes}
        self.left_per_iter = Counter(n.iteration for n in nodes)
        waiting: dict[int, int] = {}
        users: dict[int, list[int]] = defaultdict(list)
        self.waiting, self.users = waiting, users
        for n in nodes:
            deps = n.deps
            node_id = n.id
            if len(deps) == 1:
                users[deps[0]].append(node_id)
                waiting[node_id] = 1
                continue
            unique = set(deps) if deps else ()  # each dependency counted once
            for d in unique:
                users[d].append(node_id)
            waiting[node_id] = len(unique)


class _Choices:
    """A composed graph's passes whose form the run decides (:attr:`Graph.choices`): each
    rank's builders by timer id, its collectives beside passes in flight (what decides), the
    timers waiting for their pass's own nodes to end ((rank, id)), and each rank's first id
    of those nodes and next free id (they are numbered after its graph's)."""

    __slots__ = ("builders", "beside", "expanding", "added_from", "free_id")

    def __init__(self, builders: list[dict[int, PassBuilder]]):
        self.builders = builders
        self.beside = [0] * len(builders)
        self.expanding: set[tuple[int, int]] = set()
        self.added_from: dict[int, int] = {}
        self.free_id: dict[int, int] = {}


def _rank_states(graph_ranks: list[list[Node]], shared: bool) -> list[_RankState]:
    """Each simulated rank's state; where ``shared`` (the run adds no node to a rank's graph:
    no choices), ranks of one node list share its nodes and users (thousands of ranks of one
    graph: one copy, not one each)."""
    states: list[_RankState] = []
    first: dict[int, _RankState] = {}
    for rank, nodes in enumerate(graph_ranks):
        like = first.get(id(nodes)) if shared else None
        state = _RankState(rank, nodes, like)
        if shared and like is None:
            first[id(nodes)] = state
        states.append(state)
    return states


def _graph_ranks(platform: Platform, graph: Graph) -> list[list[Node]]:
    """The node list of every simulated rank (or class) of ``graph`` on ``platform``;
    WorkloadError where the graph does not fit the platform or its mode (a strategy from
    :func:`acesim.training.strategy.decide` never asks for that)."""
    where = graph.name or "graph"
    sim_ranks, npus = len(platform.npus), platform.topology.npus
    if graph.npus is not None and graph.npus != npus:
        raise WorkloadError(
            f"the graph is for {graph.npus} ranks but the system has {npus} NPUs "
            f"(shape {'x'.join(map(str, platform.topology.shape))}); run it on "
            f"{graph.npus} NPUs (--npus {graph.npus} or --shape)",
            location=where,
        )
    classes = platform.classes
    if classes is not None or graph.classes is not None:
        if graph.classes is None or classes != graph.classes:
            raise WorkloadError(
                f"the graph's rank classes ({graph.classes}) are not the platform's "
                f"({classes}): build the platform with the graph's classes",
                location=where,
            )
        if len(graph.ranks) != classes.count:
            raise WorkloadError(
                f"the graph has {len(graph.ranks)} node lists for {classes.count} classes",
                location=where,
            )
        return graph.ranks
    if platform.exact:
        if len(graph.ranks) == 1:
            return [graph.ranks[0]] * sim_ranks
        if len(graph.ranks) == sim_ranks:
            return graph.ranks
        raise WorkloadError(
            f"the trace has {len(graph.ranks)} ranks but the system has {sim_ranks} NPUs",
            location=where,
        )
    if not graph.symmetric:
        raise WorkloadError(
            "ranks have different graphs: symmetric mode needs identical ranks; "
            "use exact mode (--exact / run.mode = 'exact')",
            location=where,
        )
    if any(n.kind in ("send", "recv") for n in graph.ranks[0]):
        # Identical graphs name identical (absolute) peers: that is not symmetric
        # traffic, so one representative cannot stand for every rank.
        raise WorkloadError(
            "point-to-point sends and receives need exact mode (--exact / run.mode = 'exact')",
            location=where,
        )
    return [graph.ranks[0]]


class _CollectiveRelay:
    """What the run's collectives call when a rank finishes one: the executor's
    ``_collective_done``, until the run ends (:meth:`GraphExecutor.run` lets the executor go).
    The collectives outlive the run in its execution, and held to the end the executor, its
    execution and graph would be freed by the cyclic collector only (a tenth of a composed LLM
    run's CPU time). A plain object, not a weak reference: the executor's class is compiled
    where the event path is, and a compiled class cannot be referenced weakly."""

    def __init__(self, executor: GraphExecutor) -> None:
        self.executor: GraphExecutor | None = executor

    def __call__(self, coll: Collective, rank: int) -> None:
        executor = self.executor
        assert executor is not None  # a collective of a run ends during the run
        executor._collective_done(coll, rank)


class _PassDone:
    """What a rank's NPU calls when the pass of its running compute node ends: the executor's
    ``_pass_done`` for the rank, through the run's :class:`_CollectiveRelay` (let go when the
    run ends: the rank's state holds this, and held to the end the executor would be freed
    by the cyclic collector only). One per rank, not a closure per pass."""

    def __init__(self, relay: _CollectiveRelay, st: _RankState) -> None:
        self.relay = relay
        self.st = st

    def __call__(self) -> None:
        executor = self.relay.executor
        assert executor is not None  # a pass of a run ends during the run
        executor._pass_done(self.st)


def _stop_at(stop_at: int | None, graph: Graph) -> int | None:
    """``stop_at`` checked: the iteration whose start ends a measurement of ``graph`` (the
    run stops once it has started and every earlier one has ended, when every figure of the
    measured window is final), None for a run to its end."""
    if stop_at is not None and not 0 < stop_at < graph.iterations:
        raise SimulationError(
            f"stop_at: iteration {stop_at} does not end a measurement of a graph of "
            f"{graph.iterations} iterations"
        )
    return stop_at


def _left_per_iteration(states: list[_RankState]) -> dict[int, int]:
    """Nodes of every rank left to finish, per iteration."""
    left: dict[int, int] = defaultdict(int)
    for st in states:
        for it, count in st.left_per_iter.items():
            left[it] += count
    return left


class GraphExecutor:
    """Runs a :class:`Graph` on a :class:`Platform`, as the platform's strategy says
    (:mod:`acesim.hardware.strategy`; symmetric: rank 0's graph stands for all; class mode:
    class i's graph for every rank of class i, peers named by class; exact: every rank, its
    collectives on the lockstep backend where ``strategy.lockstep`` and the backend allow).

    Exact mode, replicated ranks (``strategy.replicate``, which
    :func:`acesim.training.strategy.decide` sets where it applies): when every
    rank runs one graph on one NPU configuration, nothing makes ranks differ (no variation,
    no point-to-point) and collectives charge the NPUs nothing (the vectorized endpoint), a
    rank's compute kernels share no resource with anything but its own stream, so every
    rank's timeline is rank 0's as long as every collective finishes at one time at every
    rank. Rank 0 alone then runs its kernels; each collective is joined by every rank when
    rank 0 joins it, and checked to finish at one time everywhere (vectorized ones when they
    are computed, event-path ones at the end of the run); rank 0's records and NPU counters
    are copied to the other ranks at the end. Where a check fails the run is redone with
    every rank simulated (:class:`acesim.network.vectorized.Diverged`).
    """

    def __init__(
        self,
        platform: Platform,
        graph: Graph,
        on_iteration: Callable[[int], Any] | None = None,
        *,
        event_path: frozenset[Any] | None = frozenset(),
        gates: tuple[Gate, ...] = (),
        kernel_tracks: dict[int, str] | None = None,
        recorder: Callable[[], BoundRecorder] = BoundRecorder,
        node_progress: Callable[[int], Callable[[int, Node], Any]] | None = None,
        stop_at: int | None = None,
        measure_from: int | None = None,
    ):
        self.platform = platform
        #: the iteration whose start ends the measurement (:meth:`_measured_end`; None: none)
        self.stop_at = _stop_at(stop_at, graph)
        #: the iteration whose start begins the measurement: there the bound recorder drops
        #: what ended before (:meth:`BoundRecorder.forget_before`; None: it keeps everything)
        self.measure_from = measure_from
        #: told the nodes a pass simulates (:attr:`node_total`) as it starts, it returns the
        #: callable told ``(rank, node)`` as each node finishes (progress bars; a redo of the
        #: run is a new pass and calls it again)
        self.node_progress = node_progress
        self._on_node: Callable[[int, Node], Any] | None = None
        #: nodes held until their gate opens, what the bound listener is told of each rank's
        #: kernels (None: rank 0's, as ``kernel``), and the listener's type
        self.gates = gates
        self.kernel_tracks = kernel_tracks
        self.recorder = recorder
        self.graph = graph
        self.on_iteration = on_iteration
        #: collective instances (signature, index) that run on the event path; None: all
        #: (see :meth:`run`)
        self.event_path = event_path
        self._deferred: vectorized.Deferred | AgreedLockstep | None = None
        #: times the run was redone before this executor's (see :meth:`run`)
        self.redone = 0
        #: what the run's collectives call (:class:`_CollectiveRelay`)
        self._relay = _CollectiveRelay(self)
        graph.validate(graph.name or "graph")
        graph_ranks = _graph_ranks(platform, graph)
        classes = platform.classes
        #: ranks the run stands for (exact mode: every NPU; symmetric: one; class mode: one
        #: per class)
        self.ranks = len(graph_ranks)
        strategy = platform.strategy
        self.replicated = strategy.replicate and event_path is not None and len(graph_ranks) > 1
        if self.replicated:
            if len(graph.ranks) != 1:
                raise WorkloadError(
                    "replicated ranks need one graph for every rank (the strategy says "
                    "replicate; acesim.training.strategy.decide does not for this graph)",
                    location=graph.name or "graph",
                )
            graph_ranks = graph_ranks[:1]
        self.states = _rank_states(graph_ranks, shared=graph.choices is None)
        self.records: list[dict[int, NodeRecord]] = [
            {n.id: NodeRecord(n) for n in nodes} for nodes in graph_ranks
        ]
        self.p2p = PointToPoint(platform.collectives, classes)
        self._instances: dict[tuple[Any, int], Collective] = {}
        #: per-rank (or per-class) graphs: instances are matched within each physical group
        #: (keyed by its first member), not across groups that merely look alike
        self._split = len(graph_ranks) > 1
        self._roots: dict[tuple[int, Any, Any], int] = {}
        #: per-rank graphs: which ranks issue each collective instance (its members)
        self._members: dict[tuple[Any, int], frozenset[int]] = {}
        if (platform.exact or classes is not None) and len(graph.ranks) > 1:
            self._members = self._instance_members()
        self._message_tables()
        self._iter_left: dict[int, int] = _left_per_iteration(self.states)
        self.execution = Execution(platform, graph, self.records)
        self.execution.bounds = recorder()
        platform.engine.add_bound_listener(self.execution.bounds)
        self._gate_tables()
        #: passes whose form this run decides (:attr:`Graph.choices`; None: none)
        self._choices = _Choices(graph.choices) if graph.choices is not None else None
        #: :meth:`_lockstep_problem`, once found (None: not yet)
        self._lockstep_why: tuple[str | None] | None = None

    def _gate_tables(self) -> None:
        """The ranks being unblocked, each gate's nodes left and the nodes watching one (all
        empty)."""
        self._unblock: list[tuple[_RankState, Iterator[int]]] = []
        self._unblocking = False
        self._gate_left: dict[int, int] = {}
        self._watch: dict[tuple[int, int], list[int]] = {}

    def _message_tables(self) -> None:
        """Each rank's collectives issued so far by signature, its collective nodes by
        instance, the point-to-point messages arrived and the receives waiting (all empty)."""
        self._issue_count: list[dict[Any, int]] = [defaultdict(int) for _ in self.states]
        self._coll_node: dict[tuple[int, int], int] = {}
        self._arrived: list[dict[tuple[int, int], int]] = [defaultdict(int) for _ in self.states]
        self._recv_wait: list[dict[tuple[int, int], list[int]]] = [
            defaultdict(list) for _ in self.states
        ]

    def _instance_members(self) -> dict[tuple[Any, int], frozenset[int]]:
        """Per-rank graphs: the ranks that issue each collective instance."""
        counts: dict[Any, list[int]] = defaultdict(list)
        for st in self.states:
            seen: dict[Any, int] = defaultdict(int)
            for n in st.nodes.values():
                if n.kind == "collective":
                    sig = (n.op, n.size, n.dims, n.group, self._root(st.rank, n))
                    counts[(sig, seen[sig])].append(st.rank)
                    seen[sig] += 1
        return {key: frozenset(ranks) for key, ranks in counts.items()}

    def _root(self, rank: int, node: Node) -> int:
        """The global rank of the first member of ``rank``'s group for ``node`` (per-rank
        graphs; 0 otherwise): collective instances are matched within one group."""
        if not self._split:
            return 0
        key = (rank, node.dims, node.group)
        root = self._roots.get(key)
        if root is None:
            topo = self.platform.topology
            classes = self.platform.classes
            own = classes.representative(rank) if classes is not None else rank
            root = last = own
            for axis in resolve(topo, node.group if node.group is not None else node.dims):
                coordinate = topo.coordinate(own, axis.dim)
                stride = topo.dimensions[axis.dim].stride
                root += (axis.coordinate(coordinate, 0) - coordinate) * stride
                last += (axis.coordinate(coordinate, axis.size - 1) - coordinate) * stride
            if classes is not None and not classes.of(root) == classes.of(last) == rank:
                raise WorkloadError(
                    f"class {rank}: collective {node.name!r} spans ranks {root}-{last}, beyond "
                    f"its class (ranks {classes.representative(rank)}-"
                    f"{classes.representative(rank) + classes.block - 1}); class mode needs "
                    "every group within one class",
                    location=self.graph.name or "graph",
                )
            self._roots[key] = root
        return root

    @property
    def node_total(self) -> int:
        """Graph nodes the run simulates (every simulated rank's; replicated ranks: rank
        0's)."""
        return sum(len(st.nodes) for st in self.states)

    def estimate_messages(self) -> int:
        """Messages the run will send (every simulated rank): its cost, before running it.
        Each distinct collective is planned once. Where the lockstep backend computes the
        collectives (:meth:`_lockstep_problem` None: each step one pass of numpy over every
        rank, not a message per rank), one rank's messages: its steps."""
        rt = self.platform.collectives
        plans: dict[Any, int] = {}
        total = 0
        for st in self.states:
            for node in st.nodes.values():
                if node.kind in ("send", "recv"):
                    total += 1
                elif node.kind == "collective":
                    key = (node.op, node.size, node.dims, node.group)
                    if key not in plans:
                        plans[key] = rt.messages_per_rank(
                            node.op or "all-reduce", node.size, dims=node.dims, group=node.group
                        )
                    total += plans[key]
        if self._lockstep_problem() is None:
            return total // len(self.states)
        return total * (self.ranks if self.replicated else 1)

    @property
    def agreed_lockstep(self) -> bool:
        """Whether the run computes its collectives in agreed orders as it goes
        (:class:`~acesim.network.agreed_lockstep.AgreedLockstep`: an agreed runtime, every
        rank simulated, the lockstep backend applying), unless a collective then needs the
        event path."""
        return (
            AGREED_LOCKSTEP
            and self.platform.collectives.agreed
            and not self.replicated
            and self.event_path is not None
            and self._lockstep_problem() is None
        )

    def estimate_kernels(self) -> int:
        """Compute kernels the run will launch (every simulated rank's; replicated ranks:
        rank 0's): the other part of its cost, before running it."""
        return sum(
            len(node.compute.kernels)
            for st in self.states
            for node in st.nodes.values()
            if node.compute is not None
        )

    # -- running -----------------------------------------------------------------------------
    def run(self) -> Execution:
        """Run the graph. In exact mode, collectives that run alone on the network are computed
        without per-message events (:class:`acesim.network.vectorized.Deferred`, overlapping
        ones together); when one would have overlapped another in a way they cannot express,
        the run goes on to find the other such collectives, then is redone from the start
        with them on the event path (at most :data:`MAX_REDOS` times, once on a platform with
        variation; then with every collective there; :attr:`Execution.redone` counts every
        redo, nested ones included)."""
        try:
            return self._run_any()
        finally:
            self._relay.executor = None  # the run has ended (_CollectiveRelay)

    def _run_any(self) -> Execution:
        """The body of :meth:`run`."""
        if not any(st.nodes for st in self.states):
            raise WorkloadError("the graph has no node to run", location=self.graph.name or "graph")
        rt = self.platform.collectives
        problem = self._lockstep_problem()
        if problem is None and self.event_path is not None:
            if self.agreed_lockstep:
                self._deferred = AgreedLockstep(rt, self.event_path)
            else:
                self._deferred = vectorized.Deferred(
                    rt, self.event_path, replicated=self.replicated
                )
        elif self.replicated:
            return self._every_rank()
        try:
            return self._run()
        except _Stalled as stalled:
            if self.platform.strategy.classes is not None:  # acesim's graph: acesim's stall
                raise _Stalled(
                    f"{stalled}; in class mode this is acesim's, not the workload's: exact "
                    "mode (--exact) may run it; please report it"
                ) from None
            if not self.platform.exact or self.platform.collectives.agreed:
                raise
            return self._agreed()
        except vectorized.Diverged:
            return self._every_rank()
        except vectorized.Conflict as conflict:
            assert self.event_path is not None
            redo = self.event_path | conflict.keys
            platform = Platform(self.platform.system, self.platform.strategy)
            # with variation the conflicts grow redo by redo (the ranks drift apart): every
            # collective on the event path at once, not one more redo per conflicting set
            narrow = self.redone < MAX_REDOS and not self.platform.variation
            again = self._again(platform, redo if narrow else None)
            again.redone = self.redone + 1
            return again.run()  # its execution counts every redo before it (see _run)

    def _again(self, platform: Platform, event_path: frozenset[Any] | None) -> GraphExecutor:
        """An executor of the same graph, gates and tracks on a fresh ``platform``."""
        platform.collectives.tracks = self.platform.collectives.tracks
        return GraphExecutor(
            platform,
            self.graph,
            self.on_iteration,
            event_path=event_path,
            gates=self.gates,
            kernel_tracks=self.kernel_tracks,
            recorder=self.recorder,
            node_progress=self.node_progress,
            stop_at=self.stop_at,
            measure_from=self.measure_from,
        )

    def _lockstep_problem(self) -> str | None:
        """Why no collective of this run may run on the lockstep backend (None: each the
        backend supports does), noted in :attr:`Execution.event_reasons`; found once (what
        it reads does not change in a run)."""
        if self._lockstep_why is None:
            self._lockstep_why = (self._find_lockstep_problem(),)
        return self._lockstep_why[0]

    def _find_lockstep_problem(self) -> str | None:
        if not self.platform.exact:
            return "not exact mode"
        if not self.platform.strategy.lockstep:
            return self.platform.strategy.events or "the strategy simulates every message"
        if self.event_path is None:
            return vectorized.TIMING
        if any(n.kind in ("send", "recv") for st in self.states for n in st.nodes.values()):
            return "point-to-point messages share the links"
        return vectorized.backend_problem(self.platform.collectives)

    def _agreed(self) -> Execution:
        """The run redone with chunk phases admitted in agreed orders
        (:meth:`~acesim.network.collective.CollectiveRuntime.agree`): per-rank graphs that
        run at different speeds (a slow NPU written into a trace's durations) stalled with each
        NPU picking its own order, as only platforms with a variation agree by default."""
        platform = Platform(self.platform.system, self.platform.strategy)
        platform.collectives.agree()
        again = self._again(platform, self.event_path)
        again.redone = self.redone + 1
        return again.run()

    def _every_rank(self) -> Execution:
        """The run redone with every rank simulated (replicated ranks would have differed)."""
        strategy = replace(self.platform.strategy, replicate=False)
        again = self._again(Platform(self.platform.system, strategy), self.event_path)
        again.redone = self.redone
        execution = again.run()
        return execution

    def _run(self) -> Execution:
        engine = self.platform.engine
        if self.node_progress is not None:
            self._on_node = self.node_progress(self.node_total)
        held = self._hold()
        for st in self.states:
            for node_id, count in list(st.waiting.items()):
                if count == 0 and (st.rank, node_id) not in held:
                    self._ready(st, st.nodes[node_id])
        deferred = self._deferred
        try:
            engine.run()
        except Exception:
            if deferred is not None and deferred.conflicts:
                # the run went on after a conflict only to find more: redo it
                raise vectorized.Conflict(deferred.conflicts) from None
            raise
        if deferred is not None and deferred.conflicts:
            raise vectorized.Conflict(deferred.conflicts)
        stopped = self.execution.stopped
        if self.replicated:
            self._check_replicas()
        for st in self.states if any(self._iter_left.values()) and not stopped else ():
            # (every node counted finished: none can be unfinished)
            unfinished = [i for i, rec in self.records[st.rank].items() if rec.end < 0]
            if unfinished:
                raise _Stalled(
                    f"rank {st.rank}: {len(unfinished)} nodes never ran (first: "
                    f"{st.nodes[unfinished[0]].name!r}); a receive without a matching send, "
                    "or a collective some ranks never issue"
                )
        self.execution.makespan = engine.now
        self.execution.final = self._snapshot()
        if stopped:  # what bound the activities left, up to the stop
            engine.close_segments()
        elif self.stop_at is not None:
            self.execution.unstopped = self._stop_problem() or ""
        self.execution.collectives = list(self.platform.collectives.collectives)
        vector = len(self._deferred.vector_ids) if self._deferred is not None else 0
        self.execution.event_collectives = len(self.execution.collectives) - vector
        self.execution.joint_collectives = self._deferred.joint if self._deferred else 0
        if self._deferred is not None:
            self.execution.event_reasons = dict(self._deferred.reasons)
        elif self.platform.exact and self.execution.collectives:
            problem = self._lockstep_problem() or vectorized.TIMING
            self.execution.event_reasons = {problem: len(self.execution.collectives)}
        self.execution.redone = self.redone
        if self.replicated:
            self._copy_replicas()
        return self.execution

    def _hold(self) -> set[tuple[int, int]]:
        """Arm the gates: the nodes they hold, each gate's count of what it waits for (its
        time, the nodes it runs after), the callbacks that count them down."""
        held: set[tuple[int, int]] = set()
        engine = self.platform.engine
        for index, gate in enumerate(self.gates):
            held.update(gate.held)
            self._gate_left[index] = len(gate.after) + 1
            for key in gate.after:
                self._watch.setdefault(key, []).append(index)
            engine.call_at(gate.at, self._gate_count, index)
        return held

    def _gate_count(self, index: int) -> None:
        self._gate_left[index] -= 1
        if self._gate_left[index] == 0:
            for rank, node_id in self.gates[index].held:
                st = self.states[rank]
                self._ready(st, st.nodes[node_id])

    def _check_replicas(self) -> None:
        """Replicated ranks: every event-path collective finished at one time at every rank
        (vectorized ones were checked when computed); else :class:`vectorized.Diverged`."""
        assert self._deferred is not None
        collectives = self.platform.collectives.collectives
        vectorized.check_replicas(collectives, self._deferred.vector_ids, self.ranks)

    def _copy_replicas(self) -> None:
        """Replicated ranks: rank 0's records and NPU counters for every other rank (each
        rank's record map holds rank 0's records, one object per node: a finished run's
        records are read, never written)."""
        self.platform.engine.sync()
        base = self.records[0]
        npus = self.platform.npus
        for rank in range(1, self.ranks):
            self.records.append(dict(base))
            npus[rank].mirror(npus[0])
        self.execution.replicated = True

    def _ready(self, st: _RankState, node: Node) -> None:
        engine = self.platform.engine
        now = engine.now
        starts = self.execution.iteration_start
        if node.iteration not in starts:
            starts[node.iteration] = now
            self.execution.snapshots[node.iteration] = self._snapshot()
            if node.iteration == self.measure_from and self.execution.bounds is not None:
                self.execution.bounds.forget_before(now)
            if node.iteration == self.stop_at:
                self._measured_end()
        rec = self.records[st.rank][node.id]
        rec.ready = now
        kind = node.kind
        if kind == "compute":
            heapq.heappush(st.ready_compute, node.id)
            self._next_kernel(st)
            return
        rec.start = now
        if kind == "pass" or kind == "host":  # a composed pass, or host time: timers
            if self._choices is not None and node.id in self._choices.builders[st.rank]:
                if self._choose(st, node):
                    return
            engine.call(node.size, self._finish, st, node)
        elif kind == "send":
            self._send(st, node)
        elif kind == "collective":
            self._collective(st, node)
        elif kind == "host_copy":
            self._host_copy(st, node)
        elif kind == "recv":
            key = (node.peer if node.peer is not None else -1, node.tag)
            if self._arrived[st.rank][key] > 0:
                self._arrived[st.rank][key] -= 1
                self._finish(st, node)
            else:
                self._recv_wait[st.rank][key].append(node.id)
        else:  # pragma: no cover - Node.kind is a Literal
            raise SimulationError(f"unknown node kind {node.kind!r}")

    def _choose(self, st: _RankState, node: Node) -> bool:
        """The form of the pass whose timer ``node`` became ready (:attr:`Graph.choices`):
        with a collective beside passes in flight at the rank, its own nodes, built and
        started now, the timer finishing with their end and leaving no record (returns
        True); else the timer (False)."""
        choices = self._choices
        assert choices is not None
        rank = st.rank
        if (rank, node.id) in choices.expanding:  # its pass's own nodes have ended
            choices.expanding.discard((rank, node.id))
            self._finish(st, node)
            del self.records[rank][node.id]
            return True
        if not choices.beside[rank]:
            return False
        passed, end = choices.builders[rank][node.id]()
        base = choices.free_id.get(rank)
        if base is None:
            base = choices.added_from[rank] = max(st.nodes) + 1
        choices.free_id[rank] = base + len(passed)
        it = node.iteration
        nodes, waiting, users, records = st.nodes, st.waiting, st.users, self.records[rank]
        entries = []
        for each in passed:
            deps = tuple(base + d for d in each.deps)
            moved = nodes[base + each.id] = placed(each, base + each.id, deps, it)
            records[moved.id] = NodeRecord(moved)
            unique = set(deps)
            waiting[moved.id] = len(unique)
            for d in unique:
                users[d].append(moved.id)
            if not deps:
                entries.append(moved)
        self._iter_left[it] += len(passed)
        users[base + end].append(node.id)  # the timer ends with the pass's end
        waiting[node.id] = 1
        choices.expanding.add((rank, node.id))
        self.execution.chosen_full += 1
        for entry in entries:
            self._ready(st, entry)
        return True

    def _host_copy(self, st: _RankState, node: Node) -> None:
        """A host-device copy on the rank's copy engines and host link, or (``op`` ``cpu``) a
        CPU step through host memory (offload)."""

        def done(_activity: Any) -> None:
            self._finish(st, node)

        npu = self.platform.npus[st.rank]
        if node.op == "cpu":  # a CPU step through host memory (optimizer offload)
            npu.host_step(node.size, done, tag=node.name)
        else:
            npu.host_copy(node.size, node.op or "", done, tag=node.name)

    def _next_kernel(self, st: _RankState) -> None:
        if st.busy or not st.ready_compute:
            return
        node = st.nodes[heapq.heappop(st.ready_compute)]
        npu = self.platform.npus[st.rank]
        comp = node.compute
        assert comp is not None  # loop builders and readers always set it
        rec = self.records[st.rank][node.id]
        rec.start = self.platform.engine.now
        rec.alone = npu.kernels_time_alone(comp.kernels)
        rec.hbm_bytes = comp.hbm_bytes
        st.busy = True
        st.running = node
        done = st.pass_done
        if done is None:
            done = st.pass_done = _PassDone(self._relay, st)
        tracks = self.kernel_tracks
        track = st.rank == 0 if tracks is None else tracks.get(st.rank, False)
        npu.run_kernels(comp.kernels, done, tag=node.name, track=track)

    def _pass_done(self, st: _RankState) -> None:
        """The pass of ``st``'s running compute node ended: finish the node, run the next."""
        node = st.running
        assert node is not None  # set as its pass starts
        st.busy = False
        st.running = None
        self._finish(st, node)
        self._next_kernel(st)

    def _collective(self, st: _RankState, node: Node) -> None:
        rt = self.platform.collectives
        key = self._count_issue(st, node)
        coll = self._instances.get(key)
        if coll is None:
            priority = node.priority if node.priority is not None else int(node.blocking)
            coll = rt.issue(
                node.op or "all-reduce",
                node.size,
                dims=node.dims,
                group=node.group,
                label=node.name,
                priority=priority,
                ranks=[],
                on_rank_done=self._relay,
                joining=self._joining(st.rank, node, key),
                units=node.units,
                checked=self._deferred is None,
            )
            self._instances[key] = coll
            if self._deferred is not None:
                # who joins: the instance's members (per-rank graphs), one group (instances
                # matched within each group), or every rank
                joining = self._members.get(key)
                ranks = (
                    len(joining)
                    if joining is not None
                    else coll.group_size
                    if self._split
                    else self.ranks
                )
                if not self._deferred.start(coll, key, ranks):
                    rt.check_work(coll)  # its messages run on the event path
        self._coll_node[(coll.id, st.rank)] = node.id
        self.records[st.rank][node.id].collective = coll.id
        if self._choices is not None and beside_passes(node):
            self._choices.beside[st.rank] += 1
        deferred = self._deferred
        if deferred is not None and coll.id in deferred.vector_ids:
            deferred.join(coll, st.rank)
        elif self.replicated:
            for rank in range(self.ranks):  # every rank joins as rank 0 does
                rt.join(coll, rank)
        else:
            rt.join(coll, st.rank)

    def _joining(self, rank: int, node: Node, key: tuple[Any, int]) -> frozenset[int] | None:
        """The ranks that will join instance ``key`` of collective ``node``, issued first at
        ``rank`` (None: every simulated rank): per-rank graphs, those whose programs issue it;
        exact mode's one graph for every rank, the group of ``rank`` where the collective's
        group is smaller than the platform (instances are matched within each group). The
        agreed orders (:mod:`acesim.network.agreement`) keep one order per group line for
        these: one order across every line would hold a rank to another group's instance."""
        if self._members:
            return self._members.get(key)
        if not (self._split and self.platform.exact):
            return None
        group = members(
            self.platform.topology, node.group if node.group is not None else node.dims, rank
        )
        return frozenset(group) if len(group) < self.ranks else None

    def _count_issue(self, st: _RankState, node: Node) -> tuple[Any, int]:
        """The instance key of collective ``node`` issued at ``st``'s rank now: its signature
        and how many like it the rank issued before (counted)."""
        signature = (node.op, node.size, node.dims, node.group, self._root(st.rank, node))
        index = self._issue_count[st.rank][signature]
        self._issue_count[st.rank][signature] += 1
        return (signature, index)

    def _collective_done(self, coll: Collective, rank: int) -> None:
        deferred = self._deferred
        if deferred is not None and coll.id not in deferred.vector_ids:
            deferred.event_rank_done(coll)
        if rank >= len(self.states):
            return  # a replicated rank (checked at the end of the run)
        st = self.states[rank]
        node = st.nodes[self._coll_node.pop((coll.id, rank))]
        if self._choices is not None and beside_passes(node):
            self._choices.beside[rank] -= 1
        self._finish(st, node)

    def _send(self, st: _RankState, node: Node) -> None:
        src = st.rank  # point-to-point runs in exact or class mode only (see __init__)
        dst = node.peer if node.peer is not None else -1
        if not 0 <= dst < len(self.states):
            raise WorkloadError(
                f"rank {st.rank}: send node {node.id} targets rank {dst}, which does not exist",
                location=self.graph.name or "graph",
            )

        def delivered() -> None:
            target = dst
            key = (src, node.tag)
            waiting = self._recv_wait[target][key]
            if waiting:
                recv_id = waiting.pop(0)
                self._finish(self.states[target], self.states[target].nodes[recv_id])
            else:
                self._arrived[target][key] += 1
            self._finish(st, node)

        self.p2p.send(src, dst, node.size, delivered)

    def _finish(self, st: _RankState, node: Node) -> None:
        # Depth-first over the nodes that become ready, as a recursion would visit them, but
        # with an explicit stack: a chain of already-satisfied receives is as long as the
        # trace makes it, and must not exhaust Python's recursion limit.
        now = self.platform.engine.now
        rec = self.records[st.rank][node.id]
        if rec.start < 0:
            rec.start = now
        rec.end = now
        if self._on_node is not None and (
            self._choices is None or node.id < self._choices.added_from.get(st.rank, node.id + 1)
        ):  # (a pass's own nodes built by the run count as its timer: the total holds)
            self._on_node(st.rank, node)
        iter_left = self._iter_left
        left = iter_left[node.iteration] - 1
        iter_left[node.iteration] = left
        if left == 0:
            self.execution.iteration_end[node.iteration] = now
            if self.on_iteration is not None:
                self.on_iteration(node.iteration)
            if self.stop_at is not None and node.iteration < self.stop_at:
                self._measured_end()
        if self._watch:
            for index in self._watch.get((st.rank, node.id), ()):
                # counted after this node's users are readied (a zero-time event)
                self.platform.engine.schedule(0.0, self._gate_count, index)
        users = st.users.get(node.id)
        if not users:  # (a node no one waits for readies nothing)
            return
        if self._unblocking:
            self._unblock.append((st, iter(users)))
            return
        self._unblocking = True
        try:
            stack = self._unblock  # empty: this finish is not within another's
            if len(users) == 1:  # readied here, as the stack would (the hot path)
                only = users[0]
                waiting = st.waiting
                count = waiting[only] - 1
                waiting[only] = count
                if count == 0:
                    self._ready(st, st.nodes[only])
            else:
                stack.append((st, iter(users)))
            while stack:
                owner, pending = stack[-1]
                user = next(pending, None)
                if user is None:
                    stack.pop()
                    continue
                waiting = owner.waiting
                count = waiting[user] - 1
                waiting[user] = count
                if count == 0:
                    self._ready(owner, owner.nodes[user])
        finally:
            self._unblocking = False

    def _measured_end(self) -> None:
        """Stop the run (:meth:`Engine.stop`) if its measurement is complete: the iteration
        :attr:`stop_at` has started (the window's end and its snapshot are known) and every
        earlier iteration has ended on every rank (each measured node's record, and every
        collective that overlaps the window, complete). Nothing after that instant changes a
        figure of the window: events are processed in time order, so everything before it
        happened as it would in a run to the end."""
        stop_at = self.stop_at
        assert stop_at is not None
        if stop_at not in self.execution.iteration_start or self.execution.stopped:
            return
        if self._stop_problem() is not None:
            return
        left = self._iter_left
        if all(left.get(k, 0) == 0 for k in range(stop_at)):
            self.execution.stopped = True
            self.platform.engine.stop()

    def _stop_problem(self) -> str | None:
        """Why this run may not stop at its measurement's end (None: it may): where
        something found later in the run redoes it, the window's figures are the redone
        run's, which a stop before the finding would not see."""
        if self._deferred is not None or self.replicated:
            return (
                "exact mode computes collectives without message events, and a rank that "
                "joins one later can redo the run"
            )
        if self.platform.exact and not self.platform.collectives.agreed:
            return "exact mode without agreed orders redoes a run that stalls at its end"
        return None

    def _snapshot(self) -> Snapshot:
        platform = self.platform
        now = platform.engine.now
        platform.engine.sync()
        npu = platform.npus[0]
        return Snapshot(
            time=now,
            egress_bytes=[r.used for r in platform.collectives.egress[0]],
            hbm_bytes=sum(r.used for r in npu.hbm_resources),
            compute_hbm_bytes=npu.compute_hbm_demand_now(),
            compute_busy=npu.busy_time(),
            units_held_time=npu.units.held_time,
            meters=read_meters(platform, 0),
        )
