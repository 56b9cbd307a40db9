"""Pipeline-parallel training iterations as per-rank execution graphs.

Every rank runs its pipeline stage's model chunks over ``m`` micro-batches in the static order
of a registered schedule (:mod:`acesim.training.schedules`: ops F, B and W, and where each
chunk sits in the model). Each op kind has its emitter (:data:`EMITTERS`), which turns the op
into nodes:

``F`` (:func:`emit_forward`), ``B`` (:func:`emit_input_grad`)
    receive the input (F: the activation from the previous virtual stage; B: the gradient from
    the next one) on the network's links, run the chunk's steps (F: ``forward``; B:
    ``backward``, or ``input_grad`` where the schedule defers weight gradients to W ops), and
    send the output onward. A B with no W after it is the chunk's last gradient work.
``W`` (:func:`emit_weight_grad`)
    run the chunk's ``weight_grad`` steps; nothing is sent or received.

Sends do not hold up the sender's next op (asynchronous sends); an op waits for its own input
only. Each step's tensor-parallel collectives block the next kernel, unless the chunk's steps
mark them overlapped (TP communication overlap: issued beside the GEMM they feed or drain,
the step after the pair waiting for both). The ops of a rank run in the schedule's order:
each waits for the one before it, so the bubble is what the schedule and the dependencies
make it, not a formula.

Data parallelism: when a chunk's last gradient work is done (its last B, or its last W), its
gradients are reduce-scattered (distributed optimizer, ``zero = 1``) or all-reduced over the
DP group, without blocking the remaining ops (Megatron's gradient-reduce overlap, at chunk
granularity); the optimizer step waits for every chunk's. With ``zero = 1`` each chunk's
parameters, as the previous step updated them, are all-gathered over DP at the start of the
iteration, and the chunk's first forward waits for its own all-gather only (Megatron's
parameter all-gather overlap): one simulated iteration is the steady state, from the end of
one optimizer step to the end of the next.

FSDP (``zero = 3``, Megatron-FSDP's ``optim_grads_params``): parameters, gradients and
optimizer state are sharded over DP; every forward and every backward of a unit (the
embedding, each layer, the head) waits for the all-gather of its parameters, the next unit's
all-gather being issued behind it (prefetch, overlapping this unit's compute), and every
backward of a unit reduce-scatters its gradients (each micro-batch: assumption, gradients are
not accumulated unsharded); the optimizer step waits for all of them. FSDP runs with schedules
whose B computes the weight gradients (no W ops). With FSDP's CPU offload of parameters
(``host_params``, :class:`~acesim.training.offload.WeightOffload`) each all-gather waits for its
shard's copy in, and each reduce-scatter is followed by the gradient shard's copy out.

Expert parameters (MoE layers with expert parallelism) reduce and gather over the
expert-data-parallel group instead of DP.

Host time (``launch_time``, :mod:`.host`): in a pass whose steps synchronise the host with the
GPU (Megatron-core's all-to-all MoE dispatch with EP > 1), a ``host`` node at each sync point
stands for the host issuing the launches up to the next one; the sync point's collective waits
for the one before, the pass's end for the last.

Node names start with the communication kind (``tp.``, ``cp.``, ``ep.``, ``pp.``, ``dp.``) so
reports can attribute exposed time to it (:func:`comm_kind`); compute nodes with their op
(``F``, ``B``, ``W``, or ``BW`` for a B that computes the weight gradients too), then the
chunk, the micro-batch and the step (``F.0.3.2``), as the trace shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import Any, Protocol

from ..errors import ConfigError
from ..network.classes import RankClasses
from ..network.group import Group
from ..workload.graph import Graph, Node, PassBuilder, collective_fields
from ..workload.llm.chunk import ChunkWork, Step
from ..workload.llm.parallel import Placement
from ..workload.model import Compute
from .host import segments
from .offload import ActivationOffload, LayerOffload, WeightOffload, host_update
from .schedules import SCHEDULES, Op, OpKind, PipelineSchedule, check_ops

__all__ = [
    "pipeline_graph",
    "comm_kind",
    "COMM_KINDS",
    "EMITTERS",
    "PassSink",
    "dp_parts",
    "unit_parts",
]


class PassSink(Protocol):
    """A composed graph's sink for its passes (:mod:`.compose`). ``contexts``: a pass's key
    also holds the shape of the pass before it on its rank in the iteration (None: the
    first) and whether it is the iteration's last (FSDP without pipeline stages, whose
    backward's last reduce-scatter runs on into the next pass)."""

    contexts: bool

    def expanded(self, stage: int, episode: tuple[Any, ...]) -> bool:
        """Whether the pass ``episode`` (:attr:`~acesim.workload.graph.Node.episode`) of
        ``stage`` keeps its own nodes (simulated as in the full graph) instead of a timer."""

    def either(self, stage: int, episode: tuple[Any, ...]) -> bool:
        """Whether the timed pass ``episode`` of ``stage`` (not :meth:`expanded`) may still
        run its own nodes, as the run decides (:attr:`~acesim.workload.graph.Graph.choices`:
        where a DP collective is in flight as it becomes ready)."""

    def ops(self, key: tuple[Any, ...], make: Callable[[], list[Op]]) -> list[Op]:
        """A stage's schedule ops, ``make()`` the first time ``key`` (the schedule, its
        shape and the stage) is asked for (each graph of the run built with this sink shares
        them)."""

    def computes(self, rank: int) -> dict[int, Any]:
        """The Computes of ``rank``'s steps made so far, by the step's id (each graph of
        the run built with this sink, and its passes built alone, share them)."""

    def timer(self, node: Node, key: tuple[Any, ...]) -> bool:
        """Told each timed pass's one node (kind ``pass``: its ``size``, the pass's duration
        in s, for the sink to set) and the pass's key (the stage and its ops' names and
        chunks: passes of one key are built alike); returns whether the sink wants the key's
        builder (:meth:`builder`: the first pass of a key it was told of)."""

    def builder(self, key: tuple[Any, ...], build: PassBuilder) -> None:
        """Told a pass key's ``build()``, which returns the pass's own nodes as the full
        graph has them (depending on nothing outside the pass) and the id of its end (what
        the rank's next op waits for)."""


#: Communication kinds of node names, in reporting order.
COMM_KINDS = ("tp", "cp", "ep", "pp", "dp")

#: Compute nodes' name of each op kind (``BW``: a B that computes the weight gradients too,
#: no W following it), as node names and traces show them.
OP_NAMES: dict[OpKind, str] = {"F": "F", "B": "B", "W": "W"}

#: Compute nodes' pass label of each op name, in the training graphs' vocabulary
#: (:mod:`acesim.training.loops`: ``fwd``, ``ig`` input gradient, ``wg`` weight gradient),
#: which per-layer reports attribute time by; ``bwd``: both gradients in one op.
PASS_LABELS = {"F": "fwd", "B": "ig", "W": "wg", "BW": "bwd"}


def comm_kind(node: Node) -> str | None:
    """The communication kind of a node of a pipeline graph (None for compute)."""
    if node.kind == "compute":
        return None
    head = node.name.split(".", 1)[0]
    return head if head in COMM_KINDS else "other"


@dataclass(frozen=True)
class _Plan:
    """What every rank's graph is made from (:func:`pipeline_graph`'s arguments)."""

    stages: Sequence[Sequence[ChunkWork]]
    place: Placement
    micro: int
    schedule: PipelineSchedule
    dp_op: str
    grad_bytes: float
    param_bytes: float
    update: Sequence[Compute] | None
    gather_params: bool
    fsdp: bool
    iterations: int
    classes: bool
    offload: float = 0.0  # share of saved activations offloaded (:mod:`.offload`)
    offload_layers: int = 0  # layers of each chunk offloaded within its passes
    host_update: Sequence[tuple[float, float, float]] | None = None  # per stage (:mod:`.offload`)
    host_params: float = 0.0  # bytes per element of FSDP's shards in host memory (0: none)
    launch_time: float | None = None  # host time per kernel launch, s (:mod:`.host`; None: none)
    passes: PassSink | None = None  # a composed graph: each pass one timed node (:mod:`.compose`)

    @property
    def chunks(self) -> int:
        return len(self.stages[0])

    @property
    def chain_micro(self) -> int:
        """Micro-batches each chain (direction) runs."""
        return self.micro // self.schedule.directions

    @property
    def chain_length(self) -> int:
        """Virtual stages of each chain."""
        return self.place.pp * self.chunks // self.schedule.directions

    @cached_property
    def holders(self) -> dict[int, int]:
        """The stage holding each virtual stage."""
        p, place = self.place.pp, self.schedule.virtual_stage
        return {place(c, s, p): s for s in range(p) for c in range(self.chunks)}


def pipeline_graph(
    stages: Sequence[Sequence[ChunkWork]],
    place: Placement,
    micro: int,
    *,
    kind: str = "1f1b",
    dp_op: str = "all-reduce",
    grad_bytes: float = 4.0,
    param_bytes: float = 2.0,
    update: Sequence[Compute] | None = None,
    gather_params: bool = False,
    fsdp: bool = False,
    iterations: int = 1,
    name: str = "llm",
    classes: bool = False,
    offload_activations: float = 0.0,
    offload_layers: int = 0,
    host_update: Sequence[tuple[float, float, float]] | None = None,
    host_params: float = 0.0,
    launch_time: float | None = None,
    passes: PassSink | None = None,
) -> Graph:
    """Per-rank graphs of ``iterations`` training iterations (module docstring).

    Args:
        stages: ``stages[s][c]``: the work of chunk ``c`` of stage ``s`` per micro-batch.
        place: where the parallel groups are.
        micro: micro-batches per iteration.
        kind: the schedule (a name of :data:`~acesim.training.schedules.SCHEDULES`).
        dp_op: the DP gradient collective (``all-reduce`` or ``reduce-scatter``).
        grad_bytes, param_bytes: bytes per gradient and per parameter (B).
        update: each stage's optimizer step (None: none).
        gather_params: all-gather the updated parameters over DP (distributed optimizer).
        fsdp: FSDP (ZeRO-3): per unit (the chunks' ``unit_params``), parameters all-gathered
            before every forward and backward of it and gradients reduce-scattered after
            every backward, instead of the per-chunk reductions.
        classes: class mode: one node list per pipeline stage (the graph of the stage's first
            rank, standing for every TP/CP/DP/EP replica of it), point-to-point peers named by
            stage (:mod:`acesim.network.classes`); False: one list per rank.
        offload_activations, offload_layers, host_update: offload to host memory
            (:mod:`acesim.training.offload`): the share (0 to 1) of each micro-batch's saved
            activations between its forward and backward; the first layers of each chunk
            whose saved activations go within each pass; per stage, the optimizer's share as
            (gradient bytes out, bytes the CPU step streams, parameter bytes back) or None;
            ``host_params``: with ``fsdp``, FSDP's CPU offload of parameters, the bytes per
            element of the shards in host memory (0: none).
        launch_time: host time per kernel launch at the host's syncs (s, :mod:`.host`); None.
        passes: a composed graph (:mod:`.compose`): each pass (an op, or a pair run together)
            is one node of kind ``pass`` handed to this sink, its receives, sends, offload
            copies and DP collectives as in the full graph; None: the full graph.
    """
    _check_stages(stages, place, classes)
    plan = _Plan(
        stages, place, micro, SCHEDULES.get(kind, "parallel.schedule"), dp_op, grad_bytes,
        param_bytes, update, gather_params and not fsdp, fsdp, iterations, classes,
        offload_activations, offload_layers, host_update, host_params if fsdp else 0.0,
        launch_time, passes,
    )  # fmt: skip
    return _assemble(plan, name, kind)


def _assemble(plan: _Plan, name: str, kind: str) -> Graph:
    """Every rank's (class mode: every stage's first rank's) nodes, as a graph."""
    place = plan.place
    sink = plan.passes
    if sink is None:
        ops = [_stage_ops(plan, s) for s in range(place.pp)]
    else:  # a composed run's graphs share their schedule's ops (made and checked once)
        shape = (plan.schedule.name, place.pp, plan.micro, plan.chunks, plan.fsdp)
        ops = [sink.ops((*shape, s), partial(_stage_ops, plan, s)) for s in range(place.pp)]
    stride = place.stage_stride
    ranks = range(0, place.npus, stride) if plan.classes else range(place.npus)
    builders = [_RankGraph(plan, rank) for rank in ranks]
    graphs = [b.build(ops[place.stage(b.rank)]) for b in builders]
    choices = [b.choices for b in builders]
    graph = Graph(
        graphs,
        name=name,
        iterations=plan.iterations,
        npus=place.npus,
        classes=RankClasses(place.pp, stride) if plan.classes else None,
        choices=choices if any(choices) else None,
    )
    graph.meta.update({"loop": f"pipeline-{kind}", "workload": name})
    return graph


def _check_stages(stages: Sequence[Sequence[ChunkWork]], place: Placement, classes: bool) -> None:
    """Every stage holds the same number of chunks; class mode needs blocks of ranks."""
    p, v = place.pp, len(stages[0])
    if len(stages) != p or any(len(chunks) != v for chunks in stages):
        raise ConfigError("parallel", f"need {p} stages of {v} chunks each", len(stages))
    if classes and not place.stages_outermost:
        raise ConfigError(
            "run.mode", "class mode needs each pipeline stage to be one block of ranks", "class"
        )


def _stage_ops(plan: _Plan, stage: int) -> list[Op]:
    ops = plan.schedule.stage_ops(plan.place.pp, stage, plan.micro, plan.chunks)
    check_ops(ops, plan.chunks, plan.chain_micro, f"schedule {plan.schedule.name}, stage {stage}")
    if plan.fsdp and any(op.kind == "W" for op in ops):
        raise ConfigError(
            "parallel.zero",
            f"FSDP (zero=3) with the {plan.schedule.name} schedule's deferred weight gradients "
            "is not modelled",
            3,
        )
    return ops


class _Chain:
    """The dependencies of the next node of a pass: compute steps one after another; a
    blocking collective between two of them; an overlapped one beside its compute step."""

    def __init__(self, deps: list[int | None]):
        self.deps = deps
        self.compute_deps = deps  # what the last compute step waited for
        self.pending: int | None = None  # an overlapped collective issued with the next step

    def computed(self, node: int) -> None:
        self.compute_deps = self.deps
        self.deps = [node, self.pending]
        self.pending = None

    def collective_deps(self, step: Step) -> list[int | None]:
        return self.compute_deps if step.overlap == "prev" else self.deps

    def issued(self, node: int, step: Step) -> None:
        if step.overlap == "next":
            self.pending = node
        elif step.overlap == "prev":
            self.deps = [*self.deps, node]
        else:
            self.deps = [node]

    def end(self) -> list[int | None]:
        return [*self.deps, self.pending]


class _Units:
    """FSDP's units in one pass: where each starts, which are gathered, the one running."""

    def __init__(self, work: ChunkWork, forward: bool):
        count = len(work.unit_params)
        self.sequence = list(range(count)) if forward else list(range(count - 1, -1, -1))
        firsts = work.forward_starts if forward else work.backward_starts
        self.starts = {firsts[j]: self.sequence[j] for j in range(count)}
        self.gathered: dict[int, list[int | None]] = {}
        self.now: int | None = None


class _RankGraph:
    """One rank's nodes, built op by op by the emitters."""

    def __init__(self, plan: _Plan, rank: int):
        self.plan = plan
        self.rank = rank
        place = plan.place
        self.stage = place.stage(rank)
        self.chunks = plan.stages[self.stage]
        self.vstages = place.pp * plan.chunks
        self.nodes: list[Node] = []
        self.prev: int | None = None
        self.it = 0
        self.split: set[tuple[int, int]] = set()  # (chunk, micro) whose W is deferred
        self.gate: list[int | None] = [None] * plan.chunks  # first forward waits for it
        self.started = [False] * plan.chunks
        self.remaining: dict[int, int] = {}
        self.dp_nodes: list[int] = []
        self.offload = ActivationOffload(0.0, [], [])
        self.layer_offload = LayerOffload(plan.offload_layers)
        self.weight_offload = WeightOffload(plan.host_params)
        #: one Compute per step (frozen, so every micro-batch's node shares it): building and
        #: checking it once instead of at every node (a stage's micro-batches are alike); a
        #: composed graph's are its sink's, shared by the run's graphs and passes built alone
        self.computes: dict[int, tuple[Step, Compute]] = (
            {} if plan.passes is None else plan.passes.computes(rank)
        )
        #: the pass the nodes being added belong to (:attr:`Node.episode`; None: none)
        self.episode: tuple[Any, ...] | None = None
        #: the shape of the pass before in this iteration (None: none yet), and whether the
        #: one being emitted is the iteration's last (a composed graph's contexts)
        self.before: tuple[Any, ...] | None = None
        self.last = False
        #: each (op kind, chunk, receive)'s message (:meth:`_message`), made once
        self.messages: dict[tuple[Any, ...], tuple[str, int, int, float] | None] = {}
        #: a composed graph's passes whose form the run decides (timer id -> the pass's
        #: builder: :attr:`~acesim.workload.graph.Graph.choices`), where DP collectives could
        #: run beside them
        self.choices: dict[int, PassBuilder] = {}
        self.beside = place.dp_group is not None or place.expert_dp_group is not None

    def add(self, deps: Sequence[int | None], **fields: Any) -> int:
        if self.episode is not None:
            fields.setdefault("episode", self.episode)
        node = Node(id=len(self.nodes), deps=_ids(deps), iteration=self.it, **fields)
        self.nodes.append(node)
        return node.id

    def build(self, ops: Sequence[Op]) -> list[Node]:
        self.split = {(op.chunk, op.micro) for op in ops if op.kind == "W"}
        for it in range(self.plan.iterations):
            self.it = it
            for c, work in enumerate(self.chunks):
                self.gate[c] = self._gather_params(c, work)
            self.remaining = {c: self.plan.chain_micro for c in range(self.plan.chunks)}
            self.dp_nodes = []
            self.started = [False] * self.plan.chunks
            self.weight_offload.new_iteration()
            self._run(ops)
            self._update()
        return self.nodes

    def _run(self, ops: Sequence[Op]) -> None:
        """Every op in order, a paired op together with the op after it; activation offload's
        host copies around them (:mod:`.offload`)."""
        groups: list[list[Op]] = [[]]
        for op in ops:
            groups[-1].append(op)
            if not op.paired:
                groups.append([])
        groups.pop()
        saved = [c.saved for c in self.chunks]
        self.offload = ActivationOffload(self.plan.offload, saved, groups)
        self.before = None
        for k, group in enumerate(groups):
            self.last = k == len(groups) - 1
            self.offload.prefetch(self.add, k, self.prev)
            self.emit(group)
            self.offload.offload(self.add, group, self.prev)

    def emit(self, group: Sequence[Op]) -> None:
        """One op, or a pair run together (DualPipe's overlapped forward and backward: both
        inputs received before either computes, both outputs sent when both are done): the
        emitters of their kinds say what each receives, runs and sends."""
        deps: list[int | None] = [self.prev, *self.offload.reloads(group)]
        for op in group:
            if op.forward and not self.started[op.chunk]:
                deps.append(self.gate[op.chunk])
                self.started[op.chunk] = True
        for op in group:
            if EMITTERS[op.kind].transfers:
                deps = self.transfer(op, deps, receive=True)
        if len(group) == 1:  # one op (the hot path): the tuples below, made directly
            head = group[0]
            shape: tuple[Any, ...] = ((self.op_name(head), head.chunk),)
            self.episode = (shape, (self.it, (head.micro,)))
        else:
            shape = tuple((self.op_name(op), op.chunk) for op in group)
            self.episode = (shape, (self.it, tuple(op.micro for op in group)))
        passes = self.plan.passes
        if passes is None or passes.expanded(self.stage, self.episode):
            self.finish(group[-1], self.pass_steps(group, deps))
        else:
            self.composed(group, shape, deps)
            if self.beside and passes.either(self.stage, self.episode):
                assert self.prev is not None  # the timer
                self.choices[self.prev] = self._builder(group)
        self.episode = None
        self.before = shape
        for op in group:
            if EMITTERS[op.kind].transfers:
                self.transfer(op, [], receive=False)
        for op in group:
            if EMITTERS[op.kind].completes(self, op):
                self.gradients_done(op.chunk)

    def pass_steps(self, group: Sequence[Op], deps: list[int | None]) -> list[int | None]:
        """The steps of the ops of ``group`` after ``deps``; returns what their end waits for."""
        ends: list[int | None] = []
        for op in group:
            ends += self.run_steps(op, EMITTERS[op.kind].steps(self, op), deps)
        return ends

    def composed(self, group: Sequence[Op], shape: tuple[Any, ...], deps: list[int | None]) -> None:
        """The pass as one timed node (a composed graph, :mod:`.compose`), its sink told how
        to build the pass alone."""
        assert self.plan.passes is not None  # a composed graph's emit only
        head = group[0]
        op_name = shape[0][0]  # self.op_name(head)
        node = len(self.nodes)
        self.nodes.append(  # self.add's node, its fields given in order (the hot path)
            Node(
                node, f"{op_name}.{head.chunk}.{head.micro}.pass", "pass", _ids(deps), None,
                None, 0.0, None, None, None, 0, f"chunk{head.chunk}", self.it,
                PASS_LABELS[op_name], False, None, None, self.episode,
            )
        )  # fmt: skip
        self.prev = node
        sink = self.plan.passes
        key = (self.stage, shape, self.before, self.last) if sink.contexts else (self.stage, shape)
        if sink.timer(self.nodes[node], key):  # the key's first pass: how to build it alone
            sink.builder(key, self._builder(group))

    def _builder(self, group: Sequence[Op]) -> PassBuilder:
        """The builder of the pass ``group`` being emitted, alone (:meth:`composed`; its
        nodes are named and labelled as this pass's)."""
        episode, rank, split, computes = self.episode, self.rank, self.split, self.computes
        plan = self.alone_plan
        # (the builder holds what it needs, not this graph: the sink keeps it, and this
        # graph's nodes are freed when it is dropped, not by the cyclic collector)

        def build() -> tuple[list[Node], int]:
            alone = _RankGraph(plan, rank)
            alone.split = split
            alone.episode = episode
            alone.computes = computes  # one Compute per step, shared
            alone.finish(group[-1], alone.pass_steps(group, []))
            assert alone.prev is not None  # a pass has steps
            return alone.nodes, alone.prev

        return build

    @cached_property
    def alone_plan(self) -> _Plan:
        """The plan of a composed graph's pass built alone (no sink)."""
        return replace(self.plan, passes=None)

    # -- what the emitters share ----------------------------------------------------------
    def vstage(self, op: Op) -> int:
        return self.plan.schedule.virtual_stage(op.chunk, self.stage, self.plan.place.pp)

    def peer(self, vstage: int) -> int:
        """The rank (class mode: the stage) running virtual stage ``vstage``."""
        stage = self.plan.holders[vstage]
        return stage if self.plan.classes else self.plan.place.peer_stage(self.rank, stage)

    def tag(self, forward: bool, vstage: int, micro: int) -> int:
        return ((0 if forward else 1) * self.vstages + vstage) * self.plan.micro + micro

    def op_name(self, op: Op) -> str:
        """The op's name in node names and traces: F, B, W, or BW (a full backward)."""
        if op.kind == "B" and not self.split_op(op):
            return "BW"
        return OP_NAMES[op.kind]

    def pass_name(self, op: Op) -> str:
        """The op's pass label (:data:`PASS_LABELS`)."""
        return PASS_LABELS[self.op_name(op)]

    def split_op(self, op: Op) -> bool:
        """A W op of the same chunk and micro-batch follows this B."""
        return (op.chunk, op.micro) in self.split

    def transfer(self, op: Op, deps: list[int | None], *, receive: bool) -> list[int | None]:
        """F: the activation from the previous virtual stage (``receive``) or to the next;
        B: the gradient from the next or to the previous. Returns ``deps`` with a receive."""
        key = (op.kind, op.chunk, receive)
        message = self.messages.get(key, _UNSEEN)
        if message is _UNSEEN:
            message = self.messages[key] = self._message(op, receive)
        if message is None:
            return deps  # the chain's first or last virtual stage, or a V's turn
        name, peer, tag, size = message
        prev = self.prev
        node = len(self.nodes)
        micro = op.micro
        self.nodes.append(  # self.add's node, its fields given in order (the hot path)
            Node(
                node, f"{name}{micro}", "recv" if receive else "send",
                () if prev is None else (prev,), None, None, size, None, None, peer,
                tag + micro, f"chunk{op.chunk}", self.it, "pp", False, None, None,
                self.episode,
            )
        )  # fmt: skip
        return [*deps, node]

    def _message(self, op: Op, receive: bool) -> tuple[str, int, int, float] | None:
        """What :meth:`transfer` sends or receives for ``op`` at every micro-batch: its
        node's name but for the micro-batch, peer, tag at micro-batch 0 and size (None:
        nothing, the chain's first or last virtual stage or a V's turn)."""
        forward = op.forward
        vs = self.vstage(op)
        ahead = (vs - 1 if forward else vs + 1) if receive else (vs + 1 if forward else vs - 1)
        length = self.plan.chain_length
        if not 0 <= ahead < self.vstages or ahead // length != vs // length:
            return None  # the chain's first or last virtual stage
        if self.plan.holders[ahead] == self.stage:
            return None  # a V's turn: the next virtual stage is on this rank
        what = "act" if forward else "grad"
        return (
            f"pp.{'recv' if receive else 'send'}.{what}.{op.chunk}.",
            self.peer(ahead),
            self.tag(forward, vs if receive else ahead, 0),
            self.chunks[op.chunk].boundary_bytes,
        )

    def run_steps(self, op: Op, steps: Sequence[Step], deps: list[int | None]) -> list[int | None]:
        """The steps of a pass in order, with FSDP's gathers and reduce-scatters; returns
        what the op's end waits for."""
        work = self.chunks[op.chunk]
        c, i = op.chunk, op.micro
        pname, plabel = self.op_name(op), self.pass_name(op)
        label = f"chunk{c}"
        sharded = self.plan.place.dp_group is not None or self.plan.host_params
        fsdp = self.plan.fsdp and sharded and work.unit_params
        units = _Units(work, op.forward) if fsdp else None
        chain = _Chain(deps)
        offloads = self.layer_offload.starts(work, op.forward) if op.kind != "W" else {}
        issuing = segments(steps) if self.plan.launch_time is not None else {}
        host: int | None = None  # the host's issuing of the segment before
        for k, st in enumerate(steps):
            if units is not None and k in units.starts:
                chain.deps = self._enter_unit(units, k, chain.deps, op, work)
            if k in offloads:
                chain.deps = self.layer_offload.enter(self.add, op, work, offloads[k], chain.deps)
            if st.comm is None:
                node = self.add(
                    chain.deps,
                    name=f"{pname}.{c}.{i}.{k}",
                    kind="compute",
                    compute=self.compute_of(st),
                    layer=label,
                    pass_name=plabel,
                )
                chain.computed(node)
                continue
            comm = st.comm
            if k in issuing:
                host = self._host_sync(chain, host, issuing[k], f"{pname}.{c}.{i}.{k}", label)
            node = self.add(
                chain.collective_deps(st),
                name=f"{st.kind}.{comm.op}.{pname}.{c}.{i}.{k}",
                **collective_fields(comm),
                layer=label,
                pass_name=st.kind,
                blocking=not st.overlap,
            )
            chain.issued(node, st)
        deps = chain.end() if host is None else [*chain.end(), host]
        if offloads and op.forward:  # the forward's end: the last copies out
            deps = self.layer_offload.enter(self.add, op, work, len(work.unit_saved), deps)
        if units is not None and units.now is not None and not op.forward:
            deps = self._reduce_unit(work, (op.chunk, units.now), deps, label)
        return deps

    def _host_sync(
        self, chain: _Chain, before: int | None, count: int, name: str, label: str
    ) -> int:
        """A sync point (:mod:`.host`): what follows waits for the host's issuing of the
        segment ``before``; the host's issuing of the next ``count`` launches starts when the
        GPU work before the sync point and ``before`` are done. Returns its node."""
        gpu = list(chain.deps)
        chain.deps = [*chain.deps, before]
        assert self.plan.launch_time is not None  # segments only with a launch time
        return self.add(
            [*gpu, before],
            name=f"host.{name}",
            kind="host",
            size=count * self.plan.launch_time,
            layer=label,
            pass_name="host",
        )

    def compute_of(self, step: Step) -> Compute:
        """The compute node of ``step`` (its kernels one after another), made once."""
        held = self.computes.get(id(step))
        if held is None:
            held = self.computes[id(step)] = (step, Compute(kernels=step.kernels))
        return held[1]

    def finish(self, op: Op, deps: list[int | None], name: str | None = None) -> None:
        """The op's end: one node waiting for everything it issued (or that one thing)."""
        real = sorted({d for d in deps if d is not None})
        if len(real) > 1:
            self.prev = self.add(
                real,
                name=name or f"{self.op_name(op)}.{op.chunk}.{op.micro}.done",
                kind="compute",
                compute=Compute(),
                layer=f"chunk{op.chunk}",
                pass_name=self.pass_name(op),
            )
        elif real:
            self.prev = real[0]

    def gradients_done(self, chunk: int) -> None:
        """The chunk's gradient work on one more micro-batch is done; after its last, its
        gradients reduce over DP (not with FSDP, which reduces per unit)."""
        self.remaining[chunk] -= 1
        if self.remaining[chunk] or self.plan.fsdp:
            return
        after = self._mirror(chunk) if self.plan.schedule.directions > 1 else self.prev
        for group, params, what in dp_parts(self.plan.place, self.chunks[chunk]):
            self.dp_nodes.append(
                self._dp(
                    self.plan.dp_op,
                    params * self.plan.grad_bytes,
                    group,
                    after,
                    f"chunk{chunk}",
                    f"grad.{what}",
                )
            )

    def _mirror(self, chunk: int) -> int | None:
        """Two directions (DualPipe): the chunk's gradients exchanged with the rank holding
        the same model layers in the other direction, and summed (a send and a receive of
        the gradients; the receive is what the DP reduction waits for)."""
        length = self.plan.chain_length
        vs = self.plan.schedule.virtual_stage(chunk, self.stage, self.plan.place.pp)
        other = (vs + length) % (2 * length)
        if self.plan.holders[other] == self.stage:
            return self.prev
        size = self.chunks[chunk].params * self.plan.grad_bytes
        base = 2 * self.vstages * self.plan.micro
        common = {"size": size, "layer": f"chunk{chunk}", "pass_name": "pp"}
        self.add(
            [self.prev],
            name=f"pp.send.mirror.{chunk}",
            kind="send",
            peer=self.peer(other),
            tag=base + other,
            **common,
        )
        return self.add(
            [self.prev],
            name=f"pp.recv.mirror.{chunk}",
            kind="recv",
            peer=self.peer(other),
            tag=base + vs,
            **common,
        )

    # -- data parallelism and the optimizer -----------------------------------------------
    def _gather_params(self, c: int, work: ChunkWork) -> int | None:
        """The distributed optimizer's all-gather of the parameters the previous step
        updated, overlapping this iteration's forward: what the chunk's first forward waits
        for."""
        if not self.plan.gather_params:
            return None
        gathers = [
            self._dp(
                "all-gather",
                params * self.plan.param_bytes,
                group,
                self.prev,
                f"chunk{c}",
                f"params.{what}",
            )
            for group, params, what in dp_parts(self.plan.place, work)
        ]
        if len(gathers) == 1:
            return gathers[0]
        if not gathers:
            return None
        return self.add(
            gathers,
            name=f"gathered.{c}",
            kind="compute",
            compute=Compute(),
            layer=f"chunk{c}",
            pass_name="update",
        )

    def _update(self) -> None:
        """The optimizer step, after the last op and every DP reduction."""
        update = self.plan.update
        compute = (
            update[self.stage] if update is not None and not update[self.stage].empty else Compute()
        )
        deps = [self.prev, *self.dp_nodes]
        self.prev = self.add(
            deps,
            name="update",
            kind="compute",
            compute=compute,
            layer="optimizer",
            pass_name="update",
        )
        if self.plan.host_update is not None:  # the offloaded share, on the CPU
            back = host_update(self.add, deps, self.plan.host_update[self.stage], "optimizer")
            self.prev = self.add(
                [self.prev, back],
                name="update.done",
                kind="compute",
                compute=Compute(),
                layer="optimizer",
                pass_name="update",
            )

    def _dp(
        self, op: str, size: float, group: Group, after: int | None, label: str, what: str
    ) -> int:
        return self.add(
            [after],
            name=f"dp.{op}.{what}.{label}",
            kind="collective",
            op=op,
            size=size,
            group=group,
            layer=label,
            pass_name="dp",
            blocking=False,
        )

    def _enter_unit(
        self, units: _Units, k: int, deps: list[int | None], op: Op, work: ChunkWork
    ) -> list[int | None]:
        """FSDP at the first step of a unit: (backward) the previous unit's gradients
        reduce-scattered; this unit's parameters gathered (if not prefetched) and waited for;
        the next unit's prefetched behind them."""
        label = f"chunk{op.chunk}"
        u = units.starts[k]
        block: list[int | None] = []  # FSDP's blocking gradient copy out, issued first
        if units.now is not None and not op.forward:
            deps = self._reduce_unit(work, (op.chunk, units.now), deps, label)
            block = deps[-1:]
        if u not in units.gathered:
            units.gathered[u] = self._gather_unit(work, u, deps, label)
        after = [*units.gathered[u], *block]
        deps = [*deps, *units.gathered[u]]
        j = units.sequence.index(u)
        if j + 1 < len(units.sequence):
            nxt = units.sequence[j + 1]
            units.gathered[nxt] = self._gather_unit(work, nxt, after, label)
        units.now = u
        return deps

    def _gather_unit(
        self, work: ChunkWork, unit: int, deps: list[int | None], label: str
    ) -> list[int | None]:
        """A unit's parameter all-gathers, after their shard's copy in when FSDP offloads the
        parameters (:class:`~acesim.training.offload.WeightOffload`): what using them waits
        for."""
        deps = self.weight_offload.fetch(self.add, deps, self._shard(work, unit), label, unit)
        gathers: list[int | None] = [*self._fsdp("all-gather", work, unit, deps, label)]
        return gathers if gathers or not self.plan.host_params else deps

    def _reduce_unit(
        self, work: ChunkWork, key: tuple[int, int], deps: list[int | None], label: str
    ) -> list[int | None]:
        """A unit's gradient reduce-scatters (``key``: chunk and unit), then, when FSDP
        offloads the parameters, the gradient shard's copy out: returns ``deps`` with what
        the backward's next step must also wait for (FSDP's blocking copy when accumulating,
        else None)."""
        reduced = self._fsdp("reduce-scatter", work, key[1], deps, label)
        self.dp_nodes += reduced
        waits, block = self.weight_offload.drain(
            self.add, reduced or deps, self._shard(work, key[1]), key, label
        )
        self.dp_nodes += waits
        return [*deps, block]

    def _shard(self, work: ChunkWork, unit: int) -> float:
        """A unit's parameters on this rank under FSDP: the dense ones over DP x CP, the
        experts' over expert data parallelism."""
        experts = work.unit_experts[unit] if work.unit_experts else 0
        place = self.plan.place
        return (work.unit_params[unit] - experts) / place.grad_ranks + experts / place.expert_dp

    def _fsdp(
        self, op: str, work: ChunkWork, unit: int, deps: Sequence[int | None], label: str
    ) -> list[int]:
        """An FSDP unit's parameter all-gather or gradient reduce-scatter over the DP group,
        its experts' over the expert-data-parallel group (non-blocking; whoever needs them
        depends on them); none over a group of one rank."""
        nbytes = self.plan.param_bytes if op == "all-gather" else self.plan.grad_bytes
        return [
            self.add(
                deps,
                name=f"dp.{op}.fsdp.{label}.u{unit}{what}",
                kind="collective",
                op=op,
                size=params * nbytes,
                group=group,
                layer=label,
                pass_name="dp",
                blocking=False,
            )
            for group, params, what in unit_parts(self.plan.place, work, unit)
        ]


#: :meth:`_RankGraph.transfer`'s messages not made yet
_UNSEEN: Any = object()


def _ids(deps: Sequence[int | None]) -> tuple[int, ...]:
    """The node ids of ``deps`` (None: no node) once each, in increasing order."""
    if len(deps) == 1:
        only = deps[0]
        return () if only is None else (only,)
    if len(deps) == 2:
        a, b = deps
        if a is None or b is None or a == b:
            kept = a if b is None else b
            return () if kept is None else (kept,)
        return (a, b) if a < b else (b, a)
    return tuple(sorted({d for d in deps if d is not None}))


# -- the emitters, one per op kind ---------------------------------------------------------
@dataclass(frozen=True)
class Emitter:
    """How an op kind becomes nodes: the chunk's ``steps`` it runs, whether it receives its
    input from the neighbouring virtual stage and sends its output on (``transfers``), and
    whether it ``completes`` the chunk's gradient work on its micro-batch."""

    steps: Callable[[_RankGraph, Op], Sequence[Step]]
    transfers: bool
    completes: Callable[[_RankGraph, Op], bool]


def _forward_steps(r: _RankGraph, op: Op) -> Sequence[Step]:
    return r.chunks[op.chunk].forward


def _backward_steps(r: _RankGraph, op: Op) -> Sequence[Step]:
    work = r.chunks[op.chunk]
    return work.input_grad if r.split_op(op) else work.backward


def _weight_steps(r: _RankGraph, op: Op) -> Sequence[Step]:
    return r.chunks[op.chunk].weight_grad


#: The graph emitter of each op kind: F receives the activation, runs the forward and sends
#: its output; B receives the output gradient, runs the input gradient (with the weight
#: gradient when no W of its chunk and micro-batch follows) and sends the input gradient; W
#: runs the deferred weight gradient.
EMITTERS: dict[OpKind, Emitter] = {
    "F": Emitter(_forward_steps, True, lambda r, op: False),
    "B": Emitter(_backward_steps, True, lambda r, op: not r.split_op(op)),
    "W": Emitter(_weight_steps, False, lambda r, op: True),
}


def unit_parts(place: Placement, work: ChunkWork, unit: int) -> list[tuple[Group, int, str]]:
    """(group, parameters, label suffix) of an FSDP unit's gathers and reduce-scatters: the
    dense parameters over DP, the experts' over the expert-data-parallel group (none over a
    group of one rank)."""
    experts = work.unit_experts[unit] if work.unit_experts else 0
    parts = [(place.dp_group, work.unit_params[unit] - experts, "")]
    if experts:
        parts.append((place.expert_dp_group, experts, ".experts"))
    return [(g, params, what) for g, params, what in parts if params and g is not None]


def dp_parts(place: Placement, work: ChunkWork) -> list[tuple[Group, int, str]]:
    """(group, parameters, label) of a chunk's data-parallel reductions: the dense
    parameters over DP, the experts' over the expert-data-parallel group."""
    out = []
    if place.ep == 1:
        return [(place.dp_group, work.params, "all")] if place.dp_group and work.params else []
    dense = work.params - work.expert_params
    if place.dp_group is not None and dense:
        out.append((place.dp_group, dense, "dense"))
    if place.expert_dp_group is not None and work.expert_params:
        out.append((place.expert_dp_group, work.expert_params, "experts"))
    return out
