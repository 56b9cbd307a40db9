"""Composed pipeline iterations: each distinct pass simulated once, alone, the schedule run on
those durations, and the passes that share the NPU with a DP collective simulated in full
(issue 27: class mode's answer at a fraction of its cost, within a measured error).

A pipeline pass (an op of the schedule, or a pair run together: :mod:`.pipeline`) is, on one
stage, the same work at every micro-batch. A *composed graph* (``pipeline_graph(...,
passes=sink)``) keeps the full graph's receives, sends, activation-offload copies, DP
collectives and optimizer step, and puts one timer node (kind ``pass``) where each pass's
steps and collectives would be. :class:`PassTimes` collects those timers by their key (the
stage and the ops' names and chunks), simulates each distinct pass once on the run's system in
class mode, alone (its nodes as the full graph has them, after nothing: a stage's distinct
passes one after another on its class), and sets every timer to its pass's duration. Running
the composed graph simulates the pipeline messages and DP collectives on the network as the
full graph does, the passes as timers.

A DP collective (the gradient reduce-scatter or all-reduce after a chunk's last backward, the
distributed optimizer's parameter all-gather before its first forward) runs beside passes on
the same NPU and shares its HBM and compute units with them: the passes it overlaps run slower
than alone, and it slower than alone. So a pass beside a DP collective is *expanded*: its own
nodes, simulated in full beside the collective. Which passes those are is decided as the run
goes (:attr:`~acesim.workload.graph.Graph.choices`): a pass that becomes ready while a DP
collective is in flight on its stage runs its own nodes, built then, any other its timer. A DP
collective is issued at the iteration's start or when a pass ends, so a timer runs beside none,
except one issued while it runs (DualPipe: a chunk's gradients mirrored from the other
direction's rank). The composition checks (:meth:`PassTimes.beside`): every timer whose span
overlaps a DP collective on its stage is expanded in the graph, and the graph run again,
until none does (each round expands more; at most :data:`MAX_ROUNDS`). Before stop 52 every
pass that overlapped one in a round stayed expanded in the rounds after it, and a first round
ran every pass as a timer: passes that the rounds' expansions moved away from the DP
collectives were simulated in full all the same (Llama 3.1 405B: 397 passes in two rounds,
against 58 in one).

What the run reports is then made whole (:meth:`PassTimes.complete`): each timer's pass's
records (the memo's, shifted to the timer's start; kept as the unions the result reads,
:attr:`~acesim.training.executor.Execution.added_spans`), NPU 0's bound segments and every
NPU's counters (FLOPs, unit-seconds, HBM and network bytes:
:class:`~acesim.hardware.power.Meters`) are added, so the result's compute, bubble and exposed
communication, what bound the kernels and the energy are computed as for the full simulation.

Simulated alone, each stage's class runs its passes on its own NPU, each after every node of
the one before: a pass whose nodes are an earlier pass's but for their labels and their
kernels' names (a model's layers alike on every stage and every chunk) runs as that pass does,
so it is not simulated again (:func:`_alike_passes`): its memo is that pass's times on its own
nodes. Those times are the other pass's from its start, which rounds with the instant the
pass starts at: the same figures to the last bits (measured: 1.6e-14 relative on an
iteration), at a fraction of the cost (GPT-3 175B with 4 virtual stages: 6 passes simulated
alone instead of 24).

A pass whose own work outlives its end (FSDP's last gradient reduce-scatter of a backward,
non-blocking, still running when the next op starts) overlaps the next pass in the full graph:
no timer stands for it, so every pass of its key is expanded. Where that is the rule (FSDP
over DP without pipeline stages: a backward's reduce-scatter runs on into the next forward),
the passes are keyed by their *context* instead (:attr:`PassTimes.contexts`): the shape of
the pass before on the rank and whether it is the iteration's last. Measured alone, each
pass then runs right after its context, from that pass's end as the full graph has it, and
its time is the window from that end to its own (the last: to its last node's end), so the
work running on from the pass before is inside it; a rank's passes follow one another with
no gap (no pipeline receives to wait for), so the windows tile its iteration as in the full
run. Measured on 23 drawn FSDP configurations and two Llama 3 70B candidates: every figure
equal to class mode's to 1e-12. FSDP with pipeline stages is not composed: its passes wait
for receives, so the pass before may or may not still run when one starts (a context a
timer cannot stand for; a tail-timer variant was up to 4% off, docs/performance.md).

Assumptions (the approximation; what the full simulation has and this does not):

* a timed pass takes as long as it does alone: nothing beside it (a pipeline message sharing
  its HBM or NIC) slows it, and it slows nothing beside it;
* every pass of one key is alike (micro-batch-dependent work, such as the activation offload's
  copies, stays outside the pass, as real nodes).

Its error against class mode is measured (``benchmarks/compose_error.py``, the tests' drawn
configurations), not bounded analytically.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Any

import numpy as np

from ..hardware.kernels import nameless
from ..hardware.platform import Platform
from ..hardware.power import Meters, read_meters
from ..intervals import difference, union, union_arrays
from ..workload.graph import Graph, Node, beside_passes, placed
from ..workload.model import Compute
from .bounds import Segment
from .composition import MAX_ROUNDS, Composition
from .executor import AddedSpans, Execution, GraphExecutor, NodeRecord

__all__ = ["PassTimes", "PassMemo", "MAX_ROUNDS", "run_composed"]

PassKey = tuple[Any, ...]
#: builds a pass alone: its nodes and its end's id (:class:`~acesim.training.pipeline.PassSink`)
Builder = Callable[[], tuple[list[Node], int]]


@dataclass
class PassMemo:
    """One distinct pass simulated alone: its duration (s), its records with times from the
    pass's start (s) as the result reads them (:func:`_merged`), NPU 0's kernel and message
    bound segments likewise (its stage's class is NPU 0's, else empty), and what its NPU's
    counters counted."""

    duration: float
    records: list[NodeRecord]
    kernels: list[Segment]
    messages: list[Segment]
    meters: Meters


@dataclass
class PassTimes:
    """A composed graph's pass sink (:class:`~acesim.training.pipeline.PassSink`): the timer
    nodes of each pass key, each key's builder and memo, and the passes expanded
    (``(stage, episode)``)."""

    timers: dict[PassKey, list[Node]] = field(default_factory=dict)
    builders: dict[PassKey, Builder] = field(default_factory=dict)
    memos: dict[PassKey, PassMemo] = field(default_factory=dict)
    expand: set[tuple[int, tuple[Any, ...]]] = field(default_factory=set)
    #: keys whose passes leave work running after their end (:meth:`_keep`): always expanded
    tailed: set[PassKey] = field(default_factory=set)
    #: each pass's key holds its context (:class:`~acesim.training.pipeline.PassSink`): the
    #: pass before it and whether it is the iteration's last. A pass is then measured right
    #: after the pass before it (from that pass's end, whose work may run on into it), over
    #: the window from that end to its own (the iteration's last: to its last node's end)
    contexts: bool = False

    #: each rank's steps' Computes (:meth:`computes`), each stage's schedule ops (:meth:`ops`)
    steps: dict[int, dict[int, Any]] = field(default_factory=dict)
    schedule: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)

    #: passes of the last composed graph (timers and expanded)
    passes: int = 0
    #: the messages and compute kernels of the passes simulated alone so far (the run's
    #: estimate counts them beside the composed graph's)
    alone_messages: int = 0
    alone_kernels: int = 0

    def expanded(self, stage: int, episode: tuple[Any, ...]) -> bool:
        self.passes += 1
        if self.contexts:  # a context that did not hold expands every pass (_in_context)
            return bool(self.tailed) or (stage, episode) in self.expand
        return (stage, episode) in self.expand or (stage, episode[0]) in self.tailed

    def either(self, stage: int, episode: tuple[Any, ...]) -> bool:
        return not self.contexts  # (in context every pass is keyed by the one before it)

    def ops(self, key: tuple[Any, ...], make: Callable[[], list[Any]]) -> list[Any]:
        """A stage's schedule ops (``key``: the schedule, its shape and the stage), made once
        for the run (its composed graphs and rebuilds)."""
        held = self.schedule.get(key)
        if held is None:
            held = self.schedule[key] = make()
        return held

    def computes(self, rank: int) -> dict[int, Any]:
        """The Computes of ``rank``'s steps, by the step's id: made once for the run (its
        composed graphs and the passes built alone), not again at each rebuild."""
        return self.steps.setdefault(rank, {})

    def timer(self, node: Node, key: PassKey) -> bool:
        held = self.timers.get(key)  # (one look-up of the key for most timers)
        if held is not None:  # the key's first timer holds its duration (or 0 for now)
            node.size = held[0].size
            held.append(node)
            return False
        self.timers[key] = [node]
        memo = self.memos.get(key)
        if memo is not None:
            node.size = memo.duration
        return key not in self.builders

    def builder(self, key: PassKey, build: Builder) -> None:
        self.builders[key] = build

    def seeded(self) -> PassTimes:
        """A sink for another composed graph of the same case at another micro-batch count
        (:mod:`.steady`): the passes measured so far kept (a pass's memo does not depend on
        how many micro-batches there are), with its steps' Computes, nothing else."""
        return PassTimes(
            memos=dict(self.memos),
            tailed=set(self.tailed),
            contexts=self.contexts,
            steps=self.steps,
            alone_messages=self.alone_messages,
            alone_kernels=self.alone_kernels,
        )

    def new_graph(self) -> None:
        """Forget the timers of the last composed graph (a new one is being built)."""
        self.timers = {}
        self.passes = 0

    @property
    def timed(self) -> int:
        """Passes of the last composed graph that are timers."""
        return sum(len(t) for t in self.timers.values())

    def alone_graph(
        self, composed: Graph, keys: list[PassKey], built: dict[PassKey, tuple[list[Node], int]]
    ) -> tuple[Graph, dict[PassKey, tuple[int, int, int, int]]]:
        """The graph of the passes ``keys`` (their nodes and end's id ``built``) alone: on each
        stage's class, its passes one after another, each after every node of the one before.
        Returns it and, per key, (class, first node id, last node id + 1, the pass's end node
        id)."""
        lists: list[list[Node]] = [[] for _ in composed.ranks]
        spans: dict[PassKey, tuple[int, int, int, int]] = {}
        last: dict[int, int] = {}  # each class's previous pass's first node id
        ended: dict[int, int] = {}  # each class's previous pass's end node id
        for key in keys:
            stage = key[0]
            nodes = lists[stage]
            first = len(nodes)
            before = tuple(range(last.get(stage, first), first))  # the previous pass, whole
            if self.contexts and stage in ended:  # after its end, as the full graph has it
                before = (ended[stage],)
            last[stage] = first
            passed, end = built[key]
            ended[stage] = first + end
            for node in passed:
                deps = tuple(first + d for d in node.deps) or before
                nodes.append(placed(node, first + node.id, deps))
            spans[key] = (stage, first, len(nodes), first + end)
        graph = Graph(lists, name=f"{composed.name}.passes", npus=composed.npus,
                      classes=composed.classes)  # fmt: skip
        return graph, spans

    def measure(self, new_platform: Callable[[], Platform], composed: Graph) -> None:
        """Simulate each distinct pass not yet measured alone on ``new_platform()`` (a fresh
        one of the run's system and strategy), keep its memo and set every timer to its
        duration."""
        keys = [k for k in self.builders if k not in self.memos]
        if not keys:
            return
        built = {key: self.builders[key]() for key in keys}
        # (in context a pass runs after the pass before it, on the one stage: each its own)
        alike = {} if self.contexts else _alike_passes(keys, built)
        platform = new_platform()
        graph, spans = self.alone_graph(composed, [k for k in keys if k not in alike], built)
        left = {key: end - first for key, (_, first, end, _) in spans.items()}
        owner = {(stage, i): key for key, (stage, first, end, _) in spans.items()
                 for i in range(first, end)}  # fmt: skip
        counted: dict[int, Meters] = {}
        meters: dict[PassKey, Meters] = {}

        def progress(_total: int) -> Callable[[int, Node], None]:
            def finished(rank: int, node: Node) -> None:
                key = owner[(rank, node.id)]
                left[key] -= 1
                if left[key] == 0:  # the pass's last node: its NPU's counters since the last
                    now = read_meters(platform, rank)
                    before = counted.get(rank)
                    meters[key] = now if before is None else now.since(before)
                    counted[rank] = now

            return finished

        executor = GraphExecutor(platform, graph, node_progress=progress)
        self.alone_messages += executor.estimate_messages()
        self.alone_kernels += executor.estimate_kernels()
        execution = executor.run()
        copies: dict[PassKey, list[tuple[PassKey, list[Node]]]] = {}
        for key, same in alike.items():
            copies.setdefault(same, []).append((key, built[key][0]))
        self._keep(execution, spans, meters, copies)

    def _keep(
        self,
        execution: Execution,
        spans: dict[PassKey, tuple[int, int, int, int]],
        meters: dict[PassKey, Meters],
        copies: dict[PassKey, list[tuple[PassKey, list[Node]]]],
    ) -> None:
        """Each pass's memo from the run of the passes alone, and each of its ``copies``'
        (a pass alike, :func:`_alike_passes`: its own nodes, the times of the one run). A pass
        whose work outlives its end (a non-blocking collective still running when the next op
        may start: FSDP's last gradient reduce-scatter of a backward) overlaps the next pass in
        the full graph, which a timer cannot stand for: its key is *tailed*, every pass of it
        expanded."""
        bounds = execution.bounds
        kernels: Sequence[Segment] = bounds.kernels if bounds is not None else []
        messages: Sequence[Segment] = bounds.message_segments() if bounds is not None else []
        ends: dict[int, float] = {}
        before: dict[int, tuple[PassKey, float]] = {}  # contexts: the previous pass, its finish
        for key, (stage, first, end, last) in spans.items():
            start = ends.get(stage, 0.0)
            recs = [execution.records[stage][i] for i in range(first, end)]
            finish = max(r.end for r in recs)
            tailed = finish > execution.records[stage][last].end
            if self.contexts:
                finish, tailed = self._in_context(key, before.get(stage), recs, last, execution)
                before[stage] = (key, max(r.end for r in recs))
            ends[stage] = finish
            # in context, windows tile the run: a segment is its window's where it starts
            # (the pass before's work running on into this one is this one's)
            upto = (math.inf if key[3] else finish) if self.contexts else None
            memo = PassMemo(
                finish - start,
                _merged(recs, start),
                _window(kernels, start, finish, upto) if stage == 0 else [],
                _window(messages, start, finish, upto) if stage == 0 else [],
                meters[key],
            )
            self._memo(key, memo, tailed)
            for other, nodes in copies.get(key, []):
                alike = [_renamed(r, node) for r, node in zip(recs, nodes, strict=True)]
                copied = replace(memo, records=_merged(alike, start))
                if other[0] != 0:  # only NPU 0's bound segments are read
                    copied = replace(copied, kernels=[], messages=[])
                self._memo(other, copied, tailed)

    def _in_context(
        self,
        key: PassKey,
        previous: tuple[PassKey, float] | None,
        recs: list[NodeRecord],
        last: int,
        execution: Execution,
    ) -> tuple[float, bool]:
        """A pass measured in its context (:attr:`contexts`): its window's end (its end node's,
        or, the iteration's last, its last node's) and whether it cannot be timed (tailed):
        the pass before it is not its context, or that pass's work runs on past this one's
        end, or (not the last) its own work outlives its end (the next pass's window holds
        that, if the next pass follows it as in the alone run: checked when it is measured)."""
        stage, _, context, final = key
        end = execution.records[stage][last].end
        finish = max(r.end for r in recs) if final else end
        wrong = previous is None if context is not None else previous is not None
        if previous is not None:
            (_, shape, _, _), previous_finish = previous
            wrong = wrong or shape != context or previous_finish > finish
        if wrong:  # every pass of the run expanded: nothing here can be timed alone
            self.tailed.update(self.builders)
        return finish, wrong

    def _memo(self, key: PassKey, memo: PassMemo, tailed: bool) -> None:
        """Keep ``key``'s memo and set its timers to its duration."""
        if tailed:
            self.tailed.add(key)
        self.memos[key] = memo
        for timer in self.timers.get(key, []):
            timer.size = memo.duration

    def beside(self, execution: Execution) -> set[tuple[int, tuple[Any, ...]]]:
        """The timed passes of ``execution`` (a composed graph's run) that overlap a DP
        collective on their stage (a collective outside any pass, or an expanded pass's FSDP
        gather or reduce-scatter), as ``(stage, episode)``: the ones to expand."""
        found: set[tuple[int, tuple[Any, ...]]] = set()
        for stage, records in enumerate(execution.records):
            spans: list[tuple[float, float]] = []
            starts: list[float] = []  # the timers' starts, ends and episodes
            ends: list[float] = []
            episodes: list[tuple[Any, ...]] = []
            for r in records.values():  # (one pass over the records)
                node = r.node
                kind = node.kind
                if kind == "pass":
                    if node.episode is not None:
                        starts.append(r.start)
                        ends.append(r.end)
                        episodes.append(node.episode)
                elif beside_passes(node) and r.end > r.start:
                    spans.append((r.start, r.end))
            if not spans:
                continue
            begin, finish = np.array(starts), np.array(ends)
            beside = np.zeros(len(starts), dtype=bool)
            for s, e in spans:  # each timer overlapping a span: s < its end, its start < e
                beside |= (s < finish) & (begin < e)
            found.update((stage, episodes[i]) for i in np.flatnonzero(beside))
        return found

    def complete(self, execution: Execution) -> None:
        """Make the composed run's execution whole: every timer's pass's records, NPU 0's
        bound segments (its kernels' as one batch of arrays,
        :attr:`~.bounds.BoundRecorder.kernel_runs`) and each NPU's counters
        (:attr:`~acesim.training.executor.Execution.added_meters`), shifted to the timer's
        start. The records are added as the result reads them (:func:`_merged`), beside the
        run's own (:attr:`~acesim.training.executor.Execution.added_spans`): per rank and
        (kind, communication kind, operation), the group's first node and the union of its
        intervals over every timer (a rank's timers follow one another, each pass's records
        within its timer)."""
        key_of = {id(node): key for key, nodes in self.timers.items() for node in nodes}
        spans = {key: _spans(memo) for key, memo in self.memos.items()}
        added: dict[int, Meters] = {}
        moved: list[tuple[PassKey, float]] = []  # NPU 0's timers' keys and starts
        for stage, records in enumerate(execution.records):
            starts: dict[PassKey, list[float]] = {}  # each key's timers' starts (s)
            for rec in [r for r in records.values() if r.node.kind == "pass"]:
                key = key_of[id(rec.node)]
                memo = self.memos[key]
                starts.setdefault(key, []).append(rec.start)
                if stage == 0 and execution.bounds is not None:
                    moved.append((key, rec.start))
                    execution.bounds.messages += _moved(memo.messages, rec.start)
                held = added.get(stage)
                if held is None:
                    added[stage] = memo.meters.copy()
                else:
                    held.add(memo.meters)  # held.plus(memo.meters), in place
            groups: dict[tuple[Any, ...], tuple[Node, list[Any], list[Any]]] = {}
            for key, at in starts.items():
                by = np.array(at)[:, None]
                for group, node, lo, hi in spans[key]:
                    held_spans = groups.setdefault(group, (node, [], []))
                    held_spans[1].append((lo + by).ravel())
                    held_spans[2].append((hi + by).ravel())
            spans_here: list[AddedSpans] = []
            for node, los, his in groups.values():
                spans_here.append((node, *union_arrays(np.concatenate(los), np.concatenate(his))))
            execution.added_spans.append(spans_here)
        execution.added_meters = added
        if moved and execution.bounds is not None:
            execution.bounds.kernel_runs.append(self._kernel_run(moved))

    def _kernel_run(self, moved: list[tuple[PassKey, float]]) -> tuple[list[str], Any, Any, Any]:
        """NPU 0's timers' memos' kernel segments, each timer's moved to its start (``moved``:
        its key and start, s), as a batch of :attr:`~.bounds.BoundRecorder.kernel_runs`."""
        labels: dict[str, int] = {}
        memos: dict[PassKey, tuple[Any, Any, Any]] = {}
        codes, starts, ends = [], [], []
        for key, at in moved:
            held = memos.get(key)
            if held is None:
                segments = self.memos[key].kernels
                names = [labels.setdefault(name, len(labels)) for name, _, _ in segments]
                held = memos[key] = (
                    np.array(names, dtype=np.int64),
                    np.array([s for _, s, _ in segments], dtype=float),
                    np.array([e for _, _, e in segments], dtype=float),
                )
            codes.append(held[0])
            starts.append(held[1] + at)  # (s + at, e + at): _moved's floats
            ends.append(held[2] + at)
        return list(labels), np.concatenate(codes), np.concatenate(starts), np.concatenate(ends)


def _spans(memo: PassMemo) -> list[tuple[tuple[Any, ...], Node, Any, Any]]:
    """A memo's records by :func:`_group`: each group's first node and its records' starts
    and ends (s from the pass's start, arrays)."""
    groups: dict[tuple[Any, ...], tuple[Node, list[float], list[float]]] = {}
    for r in memo.records:
        group = groups.setdefault(_group(r.node), (r.node, [], []))
        group[1].append(r.start)
        group[2].append(r.end)
    return [(g, node, np.array(lo), np.array(hi)) for g, (node, lo, hi) in groups.items()]


def _group(node: Node) -> tuple[Any, ...]:
    """What the result reads of a pass's record's node (:func:`_merged`)."""
    head = node.name.split(".", 1)[0] if node.kind != "compute" else ""
    return (node.kind, head, node.op, node.peer, node.tag)


def _alike_passes(
    keys: list[PassKey], built: dict[PassKey, tuple[list[Node], int]]
) -> dict[PassKey, PassKey]:
    """Each pass of ``keys`` (their nodes ``built``) that is not simulated alone, with the
    pass whose times it takes: an earlier pass whose nodes are its own but for their names,
    layers and episodes and their kernels' names (a model's layers alike on every stage and
    every chunk). Simulated alone, a pass runs on an idle NPU after every node of the pass
    before it, so an alike pass runs as that one does wherever and whenever it runs: its memo
    is that pass's times from its start (which differ with the instant it starts at in the
    last bits only) on its own nodes. A pass of NPU 0's stage takes only the times of one of
    that stage (its bound segments are read)."""
    works: dict[int, tuple[Compute, tuple[Any, ...]]] = {}  # by the Compute's id
    first: dict[Any, PassKey] = {}  # each shape's first pass, and its first on NPU 0's stage
    first_zero: dict[Any, PassKey] = {}
    alike: dict[PassKey, PassKey] = {}
    for key in keys:
        nodes, end = built[key]
        shape = (end, tuple(_anonymous(n, works) for n in nodes))
        held = first_zero if key[0] == 0 else first
        same = held.get(shape)
        if same is not None:
            alike[key] = same
            continue
        held[shape] = key
        first.setdefault(shape, key)
    return alike


def _anonymous(node: Node, works: dict[int, tuple[Compute, tuple[Any, ...]]]) -> tuple[Any, ...]:
    """``node`` as a comparable value, without its kernels' names (the layers they are of);
    ``works``: each Compute's so far, by its id (a step's Compute is shared by its nodes)."""
    comp = node.compute
    if comp is None:
        return (_BUT_COMPUTE(node), None)
    held = works.get(id(comp))
    if held is None or held[0] is not comp:
        kernels = tuple(nameless(k) for k in comp.kernels)
        work = (comp.flops, comp.hbm_bytes, comp.duration, comp.blocks, comp.dtype, kernels)
        held = works[id(comp)] = (comp, work)
    return (_BUT_COMPUTE(node), held[1])


#: a node's fields but its compute and its labels (name, layer, episode: no model reads them),
#: as a tuple
_BUT_COMPUTE = attrgetter(
    *(f.name for f in fields(Node) if f.name not in ("compute", "name", "layer", "episode"))
)


def _renamed(rec: NodeRecord, node: Node) -> NodeRecord:
    """``rec`` for ``node`` (a pass alike's, :func:`_alike_passes`): its id, dependencies and
    iteration as ``rec``'s node has them in the graph of the passes alone."""
    moved = placed(node, rec.node.id, rec.node.deps)
    return NodeRecord(
        moved, rec.start, rec.end, rec.ready, rec.alone, rec.hbm_bytes, rec.collective
    )


def _merged(records: list[NodeRecord], start: float) -> list[NodeRecord]:
    """The records of a pass as the result reads them, with times from ``start`` (s). The
    result reads a rank's records as unions of intervals by node kind and communication kind
    (:func:`~acesim.results.llm.idle_breakdown`; the compute kernels' union for what bound
    them), and communication only where no compute runs (idle time is what it explains; no
    other compute node runs on the rank during one of its passes): so the compute records'
    intervals are merged into their union, and each (kind, communication kind, operation)'s
    others into their union outside it, one record per interval on the group's first node
    (far fewer records to shift into place at every timer, the same figures); a group left
    with nothing keeps one record of no length (the operations the result lists)."""
    groups: dict[tuple[Any, ...], tuple[Node, list[tuple[float, float]]]] = {}
    for rec in records:
        group = groups.setdefault(_group(rec.node), (rec.node, []))
        group[1].append((rec.start - start, rec.end - start))
    busy = union([i for (node, spans) in groups.values() if node.kind == "compute"
                  for i in spans])  # fmt: skip
    out = []
    for node, spans in groups.values():
        merged = union(spans) if node.kind == "compute" else difference(union(spans), busy)
        if not merged:
            merged = [(spans[0][0], spans[0][0])]
        out += [NodeRecord(node, s, e, s) for s, e in merged]
    return out


def _window(
    segments: Sequence[Segment], start: float, end: float, starting: float | None = None
) -> list[Segment]:
    """The segments within [start, end] (s), or (``starting`` given) those that start in
    [start, starting), moved to start at 0."""
    if starting is not None:
        return [(name, s - start, e - start) for name, s, e in segments if start <= s < starting]
    return [(name, s - start, e - start) for name, s, e in segments if s >= start and e <= end]


def _moved(segments: list[Segment], by: float) -> list[Segment]:
    return [(name, s + by, e + by) for name, s, e in segments]


def run_composed(
    sink: PassTimes,
    graph: Graph,
    *,
    platform: Callable[[], Platform],
    rebuild: Callable[[], Graph],
    run: Callable[[Graph], Execution],
) -> Execution:
    """A composed run (module docstring): the distinct passes of ``graph`` (built with
    ``sink``) measured alone on ``platform()``, the composed graph run with ``run`` and
    rebuilt with ``rebuild()`` (with ``sink``) after each round of expansion, and the last
    run's execution made whole. Its ``composed`` says how it went."""
    sink.measure(platform, graph)
    if sink.tailed:  # passes no timer stands for: expanded
        sink.new_graph()
        graph = rebuild()
    rounds = 0
    while True:
        execution = run(graph)
        rounds += 1
        more = sink.beside(execution) - sink.expand
        if not more or rounds == MAX_ROUNDS:
            break
        sink.expand |= more
        sink.new_graph()
        graph = rebuild()
        sink.measure(platform, graph)  # a pass whose every instance was expanded before
    timed = sink.timed - execution.chosen_full  # (a timer that gave way ran its own nodes)
    execution.composed = Composition(
        distinct=len(sink.memos),
        timed=timed,
        expanded=sink.passes - timed,
        rounds=rounds,
        converged=not more,
    )
    sink.complete(execution)
    return execution
