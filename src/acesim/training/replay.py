"""Pass replay: class mode simulates each distinct pipeline pass of a rank once (issue 27).

A class-mode LLM iteration runs, on every simulated rank (one per pipeline stage), the same
passes again and again: the forward and backward of each chunk for every micro-batch, each a
chain of kernels with the TP (CP, EP) collectives beside them. Whether two runs of one pass
take the same time depends only on what else shares the rank's resources while it runs: the
pipeline messages in and out, the DP collectives, the previous pass's tail. This module
memoises a pass (an *episode*: the nodes :attr:`~acesim.workload.graph.Node.episode` puts in
it) the first time it runs in a given *context* and replays the next like pass in a like
context instead of simulating its kernels and messages.

The model and its assumption, stated:

* **Context.** A pass's context is every other activity on its rank's resources at its start
  and while it runs: the rank's own nodes in flight (pipeline sends, DP collectives, a previous
  pass's tail), messages of other ranks arriving at or relayed through it, each by what it
  loads (the rank's resources it touches; a label without the micro-batch or the chunk it
  carries) and its offsets from the pass's start, and the phase of the ranks whose messages
  load the pass's resources and of those whose activity loads, away from the rank, what its
  sends load there (the receivers of its sends and their other senders: in a pipeline the
  stages one and two away; :meth:`PassReplay._rivals`). Activities that share no resource
  with the pass or with the rank's own nodes beside it are not its context. A memo is
  recorded when a pass is simulated with every node outside it that a member waits for
  already finished; it holds the members' start, ready and end offsets, the order they
  finished in, the context and what the pass changed the rank's counters by.
* **Replay.** A pass starting in a context whose in-flight part equals a memo's (labels equal,
  offsets within :data:`TOLERANCE`) is replayed: its members' records are the memo's shifted to
  the pass's start, the members that release a node outside the pass finish at their times
  (one event each), the rest when the pass ends, and the compute stream is free again when the
  memo's last member (a compute node) ends. Nothing of the pass is put on the rank's resources,
  but its collectives' messages stay counted, as stand-ins, in the rank's weight split (where
  the endpoint splits one weight over a rank's messages: memory-level-parallelism HBM sharing,
  :mod:`acesim.network.shares`) at the memo's offsets: a message of the rank beside the pass
  (a pipeline send, a DP collective, a relayed hop) carries the weight it had beside them, on
  every resource it loads, other ranks' links among them. (Without them, a send beside a
  replayed pass took a larger share of the receiving rank's NIC link from that rank's CP
  all-gather, which ended 15 us late, while the send still ended at the memo's time: the link
  stayed saturated, and the last to finish on it ends when all its bytes are through,
  however they were split. No check on the replaying rank sees that; tested.)
* **Checked, not assumed.** While the replayed pass runs, every activity that starts on its
  rank, and every one that was in flight at its start, must start and end at the memo's offsets
  (within :data:`TOLERANCE`), every activity the memo saw start must start, and no compute node
  outside the pass may become ready that the stream would have run between its members. Where
  one does not (a message the pass's own traffic would have slowed, a pipeline message
  arriving at another time), the run goes on and is redone at its end with what it learnt
  (:class:`Memory`: the memos, the contexts not to replay, the activities a pass slows), so a
  result never rests on a replay whose context differed. A message that runs slower than it
  would alone on its resources (something shared one with it: perhaps a pass, which a replay
  takes off the resources) is learnt as it ends, before any replay beside a like message can
  differ: no pass of a rank it loads is replayed beside a message like it (the first such
  message, ending after a like replay began, still costs a redo). The counters a result reads (the
  rank's resources the pass may load; the NPU's busy time, FLOPs, HBM bytes and unit-seconds;
  the communication units' hold) take, over the replayed pass, the change the memo's pass made
  in its context: what they changed by in the replay (the other activities only) is topped up
  to what they changed by then.
* **Where it applies.** Class mode without a trace (a trace records every kernel), turned on
  (:data:`ENABLED`), on every simulated rank but rank 0 and the ranks its messages reach (rank
  0's kernels and messages feed the bound breakdown segment by segment, and what bound them
  there), without gates or per-job tracks (multi-job runs). Exact mode never replays. A
  pass a member of which started before its first compute node (an FSDP parameter gather
  issued ahead of it) is neither recorded nor replayed.
* **What it may cost.** A shape of a rank whose passes went unreplayed too long in a row
  (:data:`RETIRE_PER_RANK`) is no more recorded nor checked, and a rank whose every shape is
  retired is followed no more: the rest of the run is simulated as without replay. A try whose
  replays differ stops at the first difference and the run is simulated without replay
  (:data:`MAX_REDOS`): at worst, the full simulation plus the stopped try.

What the check cannot see: an activity of the rank that loads another rank's resources (a
send, a relayed hop) is compared by its start and end only, and an end can agree while the
share it took of another rank's saturated link over time did not. The weight split is now
reproduced (above); a difference in its rate through the rank's own resources (the pass
slowing it on the rank's HBM, which a replay takes off) is found where it changes its end,
and otherwise only by the slowed messages learnt as they end (:meth:`PassReplay.slowed`: a
message slowed anywhere is not replayed beside), which is thus part of the exactness, not
only a saving of redos.

Exactness: a replayed pass equals its simulation to rounding (shifted times: the additions
differ in their last bits) when equal contexts make equal passes, which is what the check
tests of every replay. The result says how many passes were replayed
(:attr:`~acesim.training.executor.Execution.replayed`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.fluid import Resource
from ..errors import SimulationError
from ..network.group import resolve
from ..workload.graph import Node

if TYPE_CHECKING:
    from .executor import GraphExecutor, _RankState

__all__ = ["ENABLED", "TOLERANCE", "PassReplay", "Violated"]

#: Whether class mode replays passes (``benchmarks/llm_scale.py --replay``). Off by default:
#: exact, its cost bounded (:data:`RETIRE_PER_RANK`, :data:`MAX_REDOS`), a gain on the 70B,
#: 175B and 1T cases, the plan's FSDP candidate at the full simulation's cost, but the 405B
#: case (which replays 173 of its 5,120 passes) measured 11-13% dearer at load 2-4
#: (docs/performance.md, "Its cost bounded").
ENABLED = False

#: How far (s) a context's offsets may differ from a memo's and still be the same context:
#: rounding of shifted times (a steady pipeline's like passes agree to about 1e-13 s).
TOLERANCE = 1e-12

#: The coarse grid (s) that context offsets are looked up on before the exact check.
_GRID = 1e-9

#: Tries of a run whose replayed contexts differed before it runs without replay: 0, a try
#: stops at its first difference and the run is simulated whole without replay, so that a run
#: costs at most the stopped try plus the full simulation. Measured (docs/performance.md,
#: stop 41): the 405B case of ``benchmarks/llm_scale.py`` 150 -> 91 CPU s and 175B 84 -> 48
#: against letting the try run on and redoing with what it learnt (its redo replays fewer
#: passes, beside the cost of a whole try). A larger value lets tests redo with replay.
MAX_REDOS = 0

#: A pass shape of a rank stops being recorded and checked (it is simulated as without replay
#: from then on) after more than this many passes per simulated rank (one per pipeline stage)
#: in a row were simulated, not replayed: where no memo is reused, recording costs and buys
#: nothing. Like contexts recur once a pipeline's warm-up is over, which grows with its stages
#: and chunks. Measured (docs/performance.md, "Its cost bounded"): the longest run of a shape's
#: passes not replayed before a replay was 12 passes on ``benchmarks/llm_scale.py``'s 70B case
#: (8 stages: 1.5 a stage), 16 on 175B (2), 5 on 1T (64 stages: 0.08), 10 on the 50 drawn
#: cases of ``tests/test_pass_replay.py`` (4 stages: 2.5), 59 on 405B (7.4; it replays 186 of
#: 5,120 passes). 3 a stage loses none of those replays but 405B's 13 latest.
RETIRE_PER_RANK = 3

#: Memos kept per context key (alike contexts whose exact offsets differ).
_PER_KEY = 4


#: a rank a message reaches or relays, the dimensions it arrives and leaves on there
_Passing = tuple[int, frozenset[int], frozenset[int]]


class Violated(SimulationError):
    """A replayed pass's context differed from its memo's: the run stops and is redone with
    that context not replayed (:class:`Memory`), nor, where an activity beside the pass ended
    at another time (the pass's own load slows it: a DP collective sharing its HBM), any
    context with that activity (``label``) beside a pass of the rank."""

    def __init__(self, key: Any, label: str | None = None):
        super().__init__("a replayed pass's context differed from its memo's")
        self.key = key
        self.label = label


@dataclass
class Memory:
    """What a run's tries share: the memos recorded so far (simulated passes: facts of the
    model, valid in every try) and the context keys not to replay (their contexts differed)."""

    memos: dict[Any, list[Memo]] = field(default_factory=dict)
    banned: set[Any] = field(default_factory=set)
    #: (rank, label) of activities a replay cannot have beside it
    unsafe: set[tuple[int, str]] = field(default_factory=set)
    enabled: bool = True

    def learn(self, violated: Violated) -> None:
        """Remember what a differing context says not to replay."""
        self.banned.add(violated.key)
        if violated.label is not None:
            self.unsafe.add((violated.key[0], violated.label))


@dataclass(frozen=True)
class _Other:
    """An activity beside a pass: its label and when it started and ended, relative to the
    pass's start (s)."""

    label: str
    start: float
    end: float


@dataclass(frozen=True)
class Memo:
    """A simulated pass: its members' offsets from its start (s), the order they finished in
    (member indices), which release a node outside the pass, the member whose end frees the
    compute stream, its context and what it changed the rank's counters by."""

    labels: tuple[str, ...]
    starts: tuple[float, ...]
    readies: tuple[float, ...]
    ends: tuple[float, ...]
    alone: tuple[float, ...]
    hbm: tuple[float, ...]
    order: tuple[int, ...]
    outside: tuple[bool, ...]
    release: int
    others: tuple[_Other, ...]
    counters: tuple[float, ...]
    flops: dict[str, float]
    #: the rank's resources the pass and what ran beside it shared (what else ran on the
    #: others is not its context)
    footprint: frozenset[int] = frozenset()
    #: how many of the pass's messages were in the rank's weight split (offset s, count): a
    #: replay counts as many stand-ins (:meth:`~acesim.network.shares.MessageShares.
    #: set_stand_ins`)
    split: tuple[tuple[float, int], ...] = ()

    @property
    def length(self) -> float:
        return self.ends[self.release]


@dataclass
class _Window:
    """A pass being recorded or replayed on a rank."""

    key: Any
    start: float
    footprint: frozenset[int]
    members: list[int]
    memo: Memo | None  # replayed from; None: recorded
    left: int
    member_set: frozenset[int]
    #: other activities: token -> [label, start offset, end offset or None] (recording), or
    #: token -> index in the memo's ``others`` (replay)
    seen: dict[Any, Any] = field(default_factory=dict)
    pending: set[Any] = field(default_factory=set)
    finished: list[int] = field(default_factory=list)
    counters: tuple[float, ...] = ()
    flops: dict[str, float] = field(default_factory=dict)
    delta: tuple[tuple[float, ...], dict[str, float]] | None = None
    used: set[int] = field(default_factory=set)  # memo ``others`` matched (replay)
    #: recording: a compute node outside the pass ran inside it (not replayable)
    interleaved: bool = False
    #: recording: the names of the pass's collectives, how many of their messages are in the
    #: rank's weight split now, and each change of that count (offset s, count)
    names: frozenset[str] = frozenset()
    count: int = 0
    split: list[tuple[float, int]] = field(default_factory=list)


class _Rank:
    """One simulated rank's passes, what runs on it and its counters."""

    def __init__(self, replay: PassReplay, st: _RankState, eligible: bool):
        self.st = st
        self.eligible = eligible
        self.episodes: dict[Any, list[int]] = {}
        for node in st.nodes.values():
            if node.episode is not None:
                self.episodes.setdefault(node.episode, []).append(node.id)
        for ids in self.episodes.values():
            ids.sort()
        #: each pass's first compute node (where :meth:`PassReplay.begin` acts) and the rank's
        #: pass shapes
        self.first = {
            episode: next(i for i in ids if st.nodes[i].kind == "compute")
            for episode, ids in self.episodes.items()
            if any(st.nodes[i].kind == "compute" for i in ids)
        }
        self.shapes = {episode[0] for episode in self.episodes}
        #: whether the rank still records or replays (eligible, a shape not retired): what
        #: runs on a rank that does not is not followed
        self.active = eligible
        #: what runs on the rank besides replayed members: token -> (label, start s, the
        #: dimensions whose links it loads here: None for the rank's own nodes, which load
        #: its HBM and may load any link; an arriving message's last hops)
        self.inflight: dict[Any, tuple[str, float, frozenset[int]]] = {}
        #: the pass that started last on the rank: its shape and start (s)
        self.current: tuple[Any, float] = (None, 0.0)
        #: the ranks whose messages reach or cross this one -> the resources they load here
        #: (filled by :class:`PassReplay`)
        self.senders: dict[int, frozenset[int]] = {}
        #: the other ranks whose messages (or own nodes) load a resource of another rank that
        #: this rank's messages load there: the receivers of its sends and their other senders
        #: (filled by :class:`PassReplay`)
        self.rivals: tuple[int, ...] = ()
        #: each pass shape's footprint (:meth:`PassReplay._footprint`)
        self.footprints: dict[Any, frozenset[int]] = {}
        #: each pass shape's passes simulated in a row since its last replay, and the shapes
        #: no more recorded (:data:`RETIRE_PER_RANK`)
        self.misses: dict[Any, int] = {}
        self.retired: set[Any] = set()
        self.windows: list[_Window] = []
        self.virtual: set[int] = set()
        self.labels: dict[int, str] = {}
        npu = replay.platform.npus[st.rank]
        self.npu = npu
        prefix = f"npu{npu.rank}."
        self.resources: list[Resource] = [
            r for r in replay.platform.engine.resources if r.name.startswith(prefix)
        ]
        #: the network dimensions whose traffic loads each resource of the rank (its links,
        #: the NIC's proxy, the PCIe path and the GPU's own PCIe link; none: HBM, units, engines)
        rt = replay.platform.collectives
        self.st_runtime = rt
        rank = st.rank
        self.serves: dict[Resource, set[int]] = {}
        for d in range(len(rt.egress[rank])):
            path = (rt.egress[rank][d], rt.ingress[rank][d], *rt.send_path[rank][d],
                    *rt.recv_path[rank][d])  # fmt: skip
            for res in path:
                self.serves.setdefault(res, set()).add(d)
        self._arrivals: dict[tuple[frozenset[int], frozenset[int]], frozenset[int]] = {}
        self._own: dict[Any, frozenset[int]] = {}
        #: each pass (by its first member) -> the nodes outside it its members wait for
        self.inputs: dict[int, tuple[int, ...]] = {}
        self.route = replay.ex.p2p.route
        #: resources are named in memos by their place in :attr:`resources` (memos outlive
        #: a try's platform; every try builds the rank's resources in one order)
        self.index = {res: i for i, res in enumerate(self.resources)}

    def label(self, node: Node) -> str:
        """The node's label without its micro-batch (a pass member: its pass's shape and its
        place in the pass; another node: what it loads)."""
        out = self.labels.get(node.id)
        if out is None:
            if node.episode is not None:
                ids = self.episodes[node.episode]
                out = f"{node.episode[0]}#{ids.index(node.id)}"
            else:
                # what it loads, not what it carries (a pipeline message of another chunk of
                # one size and route is the same load)
                out = "|".join(
                    str(v)
                    for v in (node.kind, node.op, node.size, node.peer, node.dims, node.group)
                )
            self.labels[node.id] = out
        return out

    def passing(self, dims_in: frozenset[int], dims_out: frozenset[int]) -> frozenset[int]:
        """The rank's resources a message of another rank loads, arriving on the links of
        ``dims_in`` and, relayed, leaving on those of ``dims_out`` (a relayed hop is sent
        from here: the rank's HBM and units, as the endpoint charges a sender)."""
        key = (dims_in, dims_out)
        out = self._arrivals.get(key)
        if out is None:
            rt = self.st_runtime
            rank = self.st.rank
            found: set[Resource] = set()
            for d in dims_in:
                found.add(rt.ingress[rank][d])
                found.update(rt.recv_path[rank][d])
            for d in dims_out:
                found.add(rt.egress[rank][d])
                found.update(rt.send_path[rank][d])
            if dims_out:
                found.update(res for res in self.resources if not self.serves.get(res))
            out = self._arrivals[key] = frozenset(self.index[res] for res in found)
        return out

    def own(self, node: Node) -> frozenset[int]:
        """The rank's resources one of its own nodes may load: a compute or host copy the
        NPU's own (and the GPU's PCIe link); a collective or a send the NPU's own and those of
        the dimensions it spans or leaves on; a receive none (the message is its sender's)."""
        if node.kind == "recv":
            return frozenset()
        key = (node.kind, node.dims, node.group, node.peer)
        out = self._own.get(key)
        if out is None:
            rank = self.st.rank
            dims: set[int] = set()
            rt = self.st_runtime
            sending: set[Resource] = set()
            if node.kind == "collective":
                group = node.group if node.group is not None else node.dims
                dims = {a.dim for a in resolve(rt.topology, group)}
            elif node.kind == "send" and node.peer is not None:
                for d, _nxt in self.route(rank, node.peer)[:1]:  # a send leaves, not arrives
                    sending.add(rt.egress[rank][d])
                    sending.update(rt.send_path[rank][d])
            host = set(self.npu.host_links.values()) if node.kind == "host_copy" else set()
            none: set[int] = set()
            out = self._own[key] = frozenset(
                i for i, res in enumerate(self.resources)
                if not self.serves.get(res, none) or self.serves[res] & dims or res in host
                or res in sending
            )  # fmt: skip
        return out

    def read(self, now: float) -> tuple[tuple[float, ...], dict[str, float]]:
        """The rank's cumulative counters now (its compute stream idle): every resource's
        integral, the units' hold, the NPU's compute counters."""
        resources = self.resources
        for res in resources:
            res.advance(now)
        npu = self.npu
        npu.units.sync()
        values = (
            *(r.used for r in resources),
            npu.units.held_time,
            npu.compute_busy,
            npu.compute_hbm_bytes,
            npu.compute_hbm_demand,
            npu.compute_unit_seconds,
        )
        return values, dict(npu.flops_by_math)

    def top_up(
        self, footprint: frozenset[int], delta: tuple[float, ...], flops: dict[str, float]
    ) -> None:
        """Add ``delta`` (the order of :meth:`read`) to the counters, of the resources only those
        in ``footprint`` (what else ran on the others ran in the replay too)."""
        resources = self.resources
        n = len(resources)
        for i, (res, d) in enumerate(zip(resources, delta[:n], strict=True)):
            if i in footprint:
                res.used += d
        npu = self.npu
        npu.units.held_time += delta[n]
        npu.compute_busy += delta[n + 1]
        npu.compute_hbm_bytes += delta[n + 2]
        npu.compute_hbm_demand += delta[n + 3]
        npu.compute_unit_seconds += delta[n + 4]
        for math, value in flops.items():
            npu.flops_by_math[math] = npu.flops_by_math.get(math, 0.0) + value


def _shares(on: frozenset[int], footprint: frozenset[int]) -> bool:
    """Whether an activity loading ``on`` of a rank's resources can share one with a pass of
    ``footprint``."""
    return not on.isdisjoint(footprint)


def _delta(
    before: tuple[tuple[float, ...], dict[str, float]],
    after: tuple[tuple[float, ...], dict[str, float]],
) -> tuple[tuple[float, ...], dict[str, float]]:
    values = tuple(b - a for a, b in zip(before[0], after[0], strict=True))
    flops = {k: v - before[1].get(k, 0.0) for k, v in after[1].items()}
    return values, {k: v for k, v in flops.items() if v != 0.0}


class PassReplay:
    """Records and replays one executor's passes (module docstring), with the memos and the
    banned contexts of the run's earlier tries (``memory``)."""

    def __init__(self, executor: GraphExecutor, memory: Memory):
        self.ex = executor
        self.platform = executor.platform
        self.engine = executor.platform.engine
        self.memory = memory
        #: contexts that differed in this try (the run is redone if any did)
        self.violations = 0
        self.banned = memory.banned
        self.unsafe = memory.unsafe
        self.memos = memory.memos
        #: rank 0's kernels and messages feed the bound breakdown (what bound each, segment by
        #: segment, not only when it ended) and the iteration snapshots: rank 0 is always
        #: simulated, and so is every rank its messages reach (what bound them there)
        self.ranks = [_Rank(self, st, st.rank != 0) for st in executor.states]
        self._routes: dict[tuple[int, int | None], list[_Passing]] = {}
        for st in executor.states:
            peers = {n.peer for n in st.nodes.values() if n.kind == "send" and n.peer is not None}
            for peer in sorted(peers):
                for rank, dims_in, dims_out in self.passes_of(st.rank, peer):
                    r = self.ranks[rank]
                    on = r.passing(dims_in, dims_out)
                    r.senders[st.rank] = r.senders.get(st.rank, frozenset()) | on
        for st in executor.states:
            self.ranks[st.rank].rivals = self._rivals(st)
        for r in self.ranks:
            r.eligible = r.active = r.eligible and 0 not in r.senders
        #: passes replayed and passes run
        self.replayed = 0
        self.passes = 0
        self.shares = executor.platform.collectives.shares
        #: whether a rank may replay (the executor runs without replay where none may: a run
        #: of rank 0 and the ranks it reaches only pays nothing for it)
        self.useful = any(r.eligible for r in self.ranks)
        if self.useful:
            self.shares.observer = self._message_counted

    def _rivals(self, st: _RankState) -> tuple[int, ...]:
        """The ranks other than ``st``'s whose activity can change how fast one of its sends
        runs away from it: each rank its sends reach or relay through (its own traffic there)
        and every other sender whose messages load one of the resources there that the send
        loads (:attr:`_Rank.senders`). A send beside a pass is checked by its end, which
        these ranks' phases decide as much as the pass's own (175B: rank 2's gradient send to
        rank 1 beside a replay ended 287 us late, rank 0's activation send to rank 1 sharing
        rank 1's NIC link with it). In a pipeline they are also the senders' other neighbours,
        whose phase decides when a sender's pass ends and its next message leaves (405B, with
        only the ranks of the sends in flight at a pass's start: a memo's message from rank 3
        came late with rank 3's phase equal). Every send's, not only those in flight: a send
        the pass's start sees in flight and one that starts inside it are alike."""
        out: set[int] = set()
        peers = {n.peer for n in st.nodes.values() if n.kind == "send" and n.peer is not None}
        for peer in peers:
            for rank, dims_in, dims_out in self.passes_of(st.rank, peer):
                x = self.ranks[rank]
                on = x.passing(dims_in, dims_out)
                out.add(rank)
                out.update(q for q, q_on in x.senders.items() if _shares(q_on, on))
        out.discard(st.rank)
        return tuple(sorted(out))

    # -- what runs on a rank ---------------------------------------------------------------
    def node_started(self, rank: int, node: Node) -> None:
        """A node of ``rank`` (not a replayed member) started."""
        r = self.ranks[rank]
        if r.active:
            self.started(rank, node.id, r.label(node), r.own(node))

    def compute_ready(self, rank: int, node: Node) -> None:
        """A compute node of ``rank`` outside any replayed pass became ready: if a replayed
        pass holds the stream and would have run a member after it (the stream takes the
        ready node of smallest id), the replay's context differed."""
        r = self.ranks[rank]
        if not r.windows:
            return
        off_now = self.engine.now
        st = r.st
        for w in r.windows:
            memo = w.memo
            if memo is None or w.left == 0 or node.id in w.member_set:
                continue
            off = off_now - w.start
            later = [
                i for j, i in enumerate(w.members)
                if st.nodes[i].kind == "compute" and memo.starts[j] >= off - TOLERANCE
            ]  # fmt: skip
            if any(i > node.id for i in later):
                self._violated(Violated(w.key))

    def _message_counted(self, rank: int, act: Any, change: int) -> None:
        """A message of ``rank``'s weight split started (``change`` 1) or ended (-1): if it is
        one of a recorded pass's collectives', the pass's count changes."""
        r = self.ranks[rank]
        if not r.windows:
            return
        tag = act.tag
        coll = getattr(tag[0] if isinstance(tag, tuple) else tag, "coll", None)
        if coll is None:
            return  # a point-to-point message: never a pass's (sends are outside passes)
        for w in r.windows:
            if w.memo is None and coll.label in w.names:
                w.count += change
                w.split.append((self.engine.now - w.start, w.count))
                return

    def message(self, src: int, node: Node) -> None:
        """``src``'s send ``node`` started: every other rank its route reaches or crosses
        sees it start (:meth:`passes`)."""
        label = "in|" + self.ranks[src].label(node)
        for rank, dims_in, dims_out in self.passes_of(src, node.peer):
            r = self.ranks[rank]
            if r.active:
                self.started(rank, ("in", src, node.id), label, r.passing(dims_in, dims_out))

    def slowed(self, src: int, node: Node) -> None:
        """A hop of ``src``'s send ``node`` ran slower than alone: something beside it shared
        a resource (perhaps a pass, which a replay would take off): no pass of a rank it loads
        is replayed beside a message like it."""
        unsafe = self.unsafe
        unsafe.add((src, self.ranks[src].label(node)))
        label = "in|" + self.ranks[src].label(node)
        for rank, _in, _out in self.passes_of(src, node.peer):
            unsafe.add((rank, label))

    def delivered(self, src: int, node: Node) -> None:
        """``src``'s send ``node`` was delivered."""
        for rank, _in, _out in self.passes_of(src, node.peer):
            self.ended(rank, ("in", src, node.id))

    def passes_of(self, src: int, dst: int | None) -> list[_Passing]:
        """The ranks other than ``src`` a message from ``src`` to ``dst`` reaches or relays,
        with the dimensions it arrives on and leaves on there."""
        key = (src, dst)
        out = self._routes.get(key)
        if out is None:
            touched: dict[int, tuple[set[int], set[int]]] = {}
            here = src
            for d, nxt in self.ex.p2p.route(src, dst) if dst is not None else ():
                if here != src:
                    touched.setdefault(here, (set(), set()))[1].add(d)
                touched.setdefault(nxt, (set(), set()))[0].add(d)
                here = nxt
            out = self._routes[key] = [
                (rank, frozenset(i), frozenset(o))
                for rank, (i, o) in sorted(touched.items())
                if rank != src
            ]
        return out

    def started(self, rank: int, token: Any, label: str, on: frozenset[int]) -> None:
        """Something other than a replayed member started on ``rank``, loading ``on`` of its
        resources (``token`` names it)."""
        r = self.ranks[rank]
        now = self.engine.now
        for w in r.windows:
            if w.left == 0 or token in w.member_set:
                continue
            off = now - w.start
            if w.memo is None:
                w.seen[token] = [label, off, None, on]
                w.pending.add(token)
                if isinstance(token, int) and r.st.nodes[token].kind == "compute":
                    w.interleaved = True  # a replay holds the stream: it cannot run this
            elif off < w.memo.length - TOLERANCE and _shares(on, w.footprint):
                j = self._match(w, label, off)
                if j is None:
                    self._violated(Violated(w.key))
                    continue
                w.seen[token] = j
                w.pending.add(token)
        r.inflight[token] = (label, now, on)

    def ended(self, rank: int, token: Any) -> None:
        """What ``token`` names on ``rank`` ended (a node finished, a message arrived)."""
        r = self.ranks[rank]
        if r.inflight.pop(token, None) is None and not r.windows:
            return
        now = self.engine.now
        for w in list(r.windows):
            if w.memo is None and token in w.member_set:
                w.left -= 1
                w.finished.append(w.members.index(token))
                if w.left == 0:
                    w.delta = _delta((w.counters, w.flops), r.read(now))
            if token in w.pending:
                w.pending.discard(token)
                off = now - w.start
                if w.memo is None:
                    w.seen[token][2] = off
                else:
                    other = w.memo.others[w.seen[token]]
                    if abs(other.end - off) > TOLERANCE:
                        self._violated(Violated(w.key, other.label))
            if w.left == 0 and not w.pending:
                self._close(r, w)

    def _violated(self, violated: Violated) -> None:
        """A replay's context differed. Where the redo runs without replay (:data:`MAX_REDOS`
        tries spent: at once by default), the try stops here: nothing more it learns is used,
        and the run costs the try so far plus the full simulation. Otherwise the run goes on
        (what it simulates from here is still recorded: a memo is a pass simulated in its
        context, whatever led to it) and is redone at its end with what it learnt
        (:class:`Memory`)."""
        self.memory.learn(violated)
        self.violations += 1
        if self.ex.redone >= MAX_REDOS:
            raise violated

    def _match(self, w: _Window, label: str, off: float) -> int | None:
        assert w.memo is not None
        for j, other in enumerate(w.memo.others):
            if j not in w.used and other.label == label and abs(other.start - off) <= TOLERANCE:
                w.used.add(j)
                return j
        return None

    # -- a pass starts ---------------------------------------------------------------------
    def begin(self, st: _RankState, node: Node) -> bool:
        """The compute node ``node`` is about to start: if it opens a pass, replay the pass
        (True) or record it (False)."""
        r = self.ranks[st.rank]
        if node.episode is None:
            return False
        if r.first.get(node.episode) != node.id:
            return False
        now = self.engine.now
        shape = node.episode[0]
        r.current = (shape, now)
        ids = r.episodes[node.episode]
        if not r.eligible or not self._inputs_ready(r, ids):
            return False  # a member waits on a node outside the pass: its start is an input
        self.passes += 1
        if not r.active or shape in r.retired:
            return False
        if self._begun(r, ids):
            self._missed(r, shape)
            return False
        footprint, key = self._key(st, r, shape, ids, now)
        labels = tuple(r.label(st.nodes[i]) for i in ids)
        if key not in self.banned:
            for memo in self.memos.get(key, ()):
                if (
                    memo.labels == labels
                    and not any((st.rank, o.label) in self.unsafe for o in memo.others)
                    and self._replay(st, r, ids, memo, key, now)
                ):
                    r.misses[shape] = 0
                    return True
        self._missed(r, shape)
        if len(self.memos.get(key, ())) < _PER_KEY:
            counters, flops = r.read(now)
            names = frozenset(st.nodes[i].name for i in ids if st.nodes[i].kind == "collective")
            w = _Window(key, now, footprint, ids, None, len(ids), frozenset(ids), counters=counters,
                        flops=flops, names=names)  # fmt: skip
            for token, (label, start, on) in r.inflight.items():
                w.seen[token] = [label, start - now, None, on]
                w.pending.add(token)
            r.windows.append(w)
        return False

    def _key(
        self, st: _RankState, r: _Rank, shape: Any, ids: list[int], now: float
    ) -> tuple[frozenset[int], Any]:
        """The footprint and context key of a pass of ``shape`` starting now on ``r``."""
        footprint = r.footprints.get(shape)
        if footprint is None:
            footprint = r.footprints[shape] = self._footprint(r, ids)
        # the rank's own nodes beside the pass share its HBM; what arrives on their links
        # changes them, and through them the pass
        footprint = footprint.union(
            *(on for token, (_l, _s, on) in r.inflight.items() if isinstance(token, int))
        )
        context = tuple(
            sorted(
                (label, round((start - now) / _GRID))
                for label, start, on in r.inflight.values()
                if _shares(on, footprint)
            )
        )
        # which pass the ranks whose messages share the pass's links are running, and since
        # when: what their next message's arrival depends on; and the same of the ranks whose
        # activity shares what the rank's sends load away from it (:meth:`_rivals`)
        near = [q for q, on in r.senders.items() if _shares(on, footprint)]
        near.extend(q for q in r.rivals if q not in near)
        phases = tuple(
            (q, q_shape, round((now - q_start) / _GRID))
            for q in near
            for q_shape, q_start in (self.ranks[q].current,)
        )
        return footprint, (st.rank, shape, context, phases)

    def _begun(self, r: _Rank, ids: list[int]) -> bool:
        """Whether a member of the pass started before its first compute node (an FSDP
        parameter gather issued ahead of the pass): the pass's start is not its members' first
        start, so it is neither recorded (its window would wait for that member's end, which
        came before it) nor replayed."""
        records = self.ex.records[r.st.rank]
        return any(records[i].start >= 0 for i in ids)

    def _missed(self, r: _Rank, shape: Any) -> None:
        """A pass of ``shape`` on ``r`` was simulated, not replayed: after more than
        :data:`RETIRE_PER_RANK` per simulated rank in a row, the rank records and checks that
        shape no more (it is simulated as without replay)."""
        misses = r.misses.get(shape, 0) + 1
        r.misses[shape] = misses
        if misses > RETIRE_PER_RANK * len(self.ranks):
            r.retired.add(shape)
            if r.retired == r.shapes:
                # nothing of the rank is recorded or replayed any more: what runs on it is not
                # followed from now on (a replay's window still open, its stream released,
                # still checks the ends it waits for); its recordings would never be used
                r.active = False
                r.inflight.clear()
                r.windows = [w for w in r.windows if w.memo is not None]

    def _close(self, r: _Rank, w: _Window) -> None:
        r.windows.remove(w)
        if w.memo is not None:
            missing = [
                j for j, o in enumerate(w.memo.others)
                if j not in w.used and o.start < w.memo.length - TOLERANCE
            ]  # fmt: skip
            if missing:
                self._violated(Violated(w.key))
            return
        self._store(r, w)

    def _store(self, r: _Rank, w: _Window) -> None:
        """Keep a recorded pass as a memo, if it can be replayed: it ended with a compute member
        (the stream is free when it is done)."""
        st = r.st
        recs = self.ex.records[st.rank]
        ids = w.members
        release = w.finished[-1]
        ends = tuple(recs[i].end - w.start for i in ids)
        if st.nodes[ids[release]].kind != "compute" or ends[release] < max(ends):
            return
        if w.interleaved or w.count:
            return  # (a message of the pass outlived it: not counted in a replay)
        watched = self.ex.watched
        inside = w.member_set
        outside = tuple(
            any(u not in inside for u in st.users.get(i, ())) or (st.rank, i) in watched
            for i in ids
        )
        assert w.delta is not None
        # what shares the pass's resources, or those of the rank's own nodes beside it
        footprint = w.footprint
        footprint = footprint.union(
            *(entry[3] for token, entry in w.seen.items() if isinstance(token, int))
        )
        others = tuple(
            sorted((_Other(label, s, e) for label, s, e, on in w.seen.values()
                    if _shares(on, footprint)),
                   key=lambda o: (o.start, o.label))
        )  # fmt: skip
        memo = Memo(
            labels=tuple(r.label(st.nodes[i]) for i in ids),
            starts=tuple(recs[i].start - w.start for i in ids),
            readies=tuple(recs[i].ready - w.start for i in ids),
            ends=ends,
            alone=tuple(recs[i].alone for i in ids),
            hbm=tuple(recs[i].hbm_bytes for i in ids),
            order=tuple(w.finished),
            outside=outside,
            release=release,
            others=others,
            counters=w.delta[0],
            flops=w.delta[1],
            footprint=footprint,
            split=tuple(w.split),
        )
        self.memos.setdefault(w.key, []).append(memo)

    def _inputs_ready(self, r: _Rank, ids: list[int]) -> bool:
        """Whether every node outside the pass that a member waits for has finished."""
        outside = r.inputs.get(ids[0])
        if outside is None:
            inside = set(ids)
            deps = {d for i in ids for d in r.st.nodes[i].deps if d not in inside}
            outside = r.inputs[ids[0]] = tuple(sorted(deps))
        records = self.ex.records[r.st.rank]
        return all(records[d].end >= 0 for d in outside)

    def _footprint(self, r: _Rank, ids: list[int]) -> frozenset[int]:
        """The rank's resources a pass's members may load: the NPU's own (HBM, units,
        engines), and those of the network dimensions its collectives span (links, NIC path,
        the GPU's PCIe link), which host copies load too."""
        topology = self.platform.topology
        st = r.st
        dims: set[int] = set()
        copies = False
        for i in ids:
            node = st.nodes[i]
            if node.kind == "collective":
                group = node.group if node.group is not None else node.dims
                dims.update(axis.dim for axis in resolve(topology, group))
            copies = copies or node.kind == "host_copy"
        host = set(r.npu.host_links.values()) if copies else set()
        none: set[int] = set()
        return frozenset(
            i for i, res in enumerate(r.resources)
            if not r.serves.get(res, none) or r.serves[res] & dims or res in host
        )  # fmt: skip

    # -- replaying -------------------------------------------------------------------------
    def _replay(
        self, st: _RankState, r: _Rank, ids: list[int], memo: Memo, key: Any, now: float
    ) -> bool:
        w = _Window(key, now, memo.footprint, ids, memo, len(ids), frozenset(ids))
        for token, (label, start, on) in r.inflight.items():
            if not _shares(on, w.footprint):
                continue
            j = self._match(w, label, start - now)
            if j is None:
                return False
            w.seen[token] = j
            w.pending.add(token)
        if any(o.start < -TOLERANCE and j not in w.used for j, o in enumerate(memo.others)):
            return False
        self.replayed += 1
        counters, flops = r.read(now)
        w.counters, w.flops = counters, flops
        recs = self.ex.records[st.rank]
        for j, i in enumerate(ids):
            rec = recs[i]
            rec.start = now + memo.starts[j]
            rec.ready = now + memo.readies[j]
            rec.alone = memo.alone[j]
            rec.hbm_bytes = memo.hbm[j]
            if st.nodes[i].kind == "collective":
                self.ex.count_issue(st, st.nodes[i])
        r.virtual.update(ids)
        if st.ready_compute:  # members already waiting for the stream are the memo's now
            inside = w.member_set
            kept = [i for i in st.ready_compute if i not in inside]
            if len(kept) != len(st.ready_compute):
                heapq.heapify(kept)
                st.ready_compute[:] = kept
        r.windows.append(w)
        st.busy = True
        engine = self.engine
        for off, count in memo.split:  # the pass's messages, counted in the rank's split
            engine.call_at(now + off, self.shares.set_stand_ins, st.rank, count)
        for j in memo.order:
            if memo.outside[j] and j != memo.release:
                engine.call_at(now + memo.ends[j], self._member_end, r, w, j)
        engine.call_at(now + memo.length, self._release, r, w)
        return True

    def _member_end(self, r: _Rank, w: _Window, j: int) -> None:
        i = w.members[j]
        if i in r.virtual:
            r.virtual.discard(i)
            w.left -= 1
            self.ex.finish(r.st, r.st.nodes[i])

    def _release(self, r: _Rank, w: _Window) -> None:
        """The replayed pass is done: its remaining members finish at their times, in the
        memo's order; the counters take the memo's change; the stream runs on."""
        memo = w.memo
        assert memo is not None
        st = r.st
        for j in memo.order:
            i = w.members[j]
            if i in r.virtual:
                r.virtual.discard(i)
                w.left -= 1
                self.ex.finish(st, st.nodes[i], w.start + memo.ends[j])
        now = self.engine.now
        delta, flops = _delta((w.counters, w.flops), r.read(now))
        r.top_up(
            memo.footprint,
            tuple(m - d for m, d in zip(memo.counters, delta, strict=True)),
            {k: v - flops.get(k, 0.0) for k, v in memo.flops.items()},
        )
        if w in r.windows and not w.pending:
            self._close(r, w)
        st.busy = False
        self.ex.next_kernel(st)
