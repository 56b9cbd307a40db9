"""Pipeline-parallel training iterations as per-rank execution graphs (Megatron-LM's schedules).

Every rank runs its pipeline stage's model chunks (``v`` of them with interleaving) over ``m``
micro-batches in the static order of Megatron-core's schedules
(``megatron/core/pipeline_parallel/schedules.py``):

``1f1b`` (``forward_backward_pipelining_without_interleaving``)
    Stage ``s`` of ``p`` runs ``w = min(p - s - 1, m)`` warm-up forwards, then ``m - w``
    pairs (forward of micro-batch ``w + i``, backward of ``i``), then the ``w`` remaining
    backwards.
``interleaved`` (``forward_backward_pipelining_with_interleaving``)
    ``m v`` forward and ``m v`` backward steps per rank; the ``k``-th forward runs chunk
    ``(k mod p v) div p`` on micro-batch ``(k div p v) p + k mod p`` (backwards take the chunks
    in reverse); ``(p - s - 1) 2 + (v - 1) p`` warm-up forwards (all of them when ``m = p``),
    then one-forward-one-backward, then the remaining backwards. Needs ``m`` a multiple of
    ``p``, as Megatron does.

Chunk ``c`` of stage ``s`` is virtual stage ``c p + s``; a forward receives its input from the
previous virtual stage and sends its output to the next one (point-to-point, on the network's
links), a backward the other way. Sends do not hold up the sender's next step (asynchronous
sends); a step waits for its own input only. Each step's tensor-parallel collectives block the
next kernel, unless the chunk's steps mark them overlapped (TP communication overlap: issued
beside the GEMM they feed or drain, the step after the pair waiting for both). The steps of a
rank run in the schedule's order: each waits for the one before it, so the bubble is what the
schedule and the dependencies make it, not a formula.

Data parallelism: when a chunk's last backward is done, its gradients are reduce-scattered
(distributed optimizer, ``zero = 1``) or all-reduced over the DP group, without blocking the
remaining backwards (Megatron's gradient-reduce overlap, at chunk granularity); the optimizer
step waits for every chunk's. With ``zero = 1`` each chunk's parameters, as the previous step
updated them, are all-gathered over DP at the start of the iteration, and the chunk's first
forward waits for its own all-gather only (Megatron's parameter all-gather overlap): one
simulated iteration is the steady state, from the end of one optimizer step to the end of the
next.

FSDP (``zero = 3``, Megatron-FSDP's ``optim_grads_params``): parameters, gradients and
optimizer state are sharded over DP; every forward and every backward of a unit (the
embedding, each layer, the head) waits for the all-gather of its parameters, the next unit's
all-gather being issued behind it (prefetch, overlapping this unit's compute), and every
backward of a unit reduce-scatters its gradients (each micro-batch: assumption, gradients are
not accumulated unsharded); the optimizer step waits for all of them.

Expert parameters (MoE layers with expert parallelism) reduce and gather over the
expert-data-parallel group instead of DP.

Node names start with the communication kind (``tp.``, ``cp.``, ``ep.``, ``pp.``, ``dp.``) so
reports can attribute exposed time to it (:func:`comm_kind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from ..hardware.kernels import Kernel
from ..network.classes import RankClasses
from ..network.group import Group
from ..workload.graph import Graph, Node
from ..workload.llm.block import ChunkWork
from ..workload.llm.parallel import Placement
from ..workload.model import Compute

__all__ = ["Op", "schedule", "pipeline_graph", "comm_kind", "COMM_KINDS", "Schedule"]

Schedule = Literal["1f1b", "interleaved"]

#: Communication kinds of node names, in reporting order.
COMM_KINDS = ("tp", "cp", "ep", "pp", "dp")


@dataclass(frozen=True)
class Op:
    """One step of a rank's schedule: ``forward`` or backward of ``chunk`` on ``micro``."""

    forward: bool
    chunk: int
    micro: int


def schedule(kind: Schedule, stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """The static order of forward and backward steps of ``stage`` (module docstring)."""
    p, s, m, v = stages, stage, micro, chunks
    if kind == "1f1b" or v == 1:
        w = min(p - s - 1, m)
        ops = [Op(True, 0, i) for i in range(w)]
        for i in range(m - w):
            ops += [Op(True, 0, w + i), Op(False, 0, i)]
        ops += [Op(False, 0, i) for i in range(m - w, m)]
        return ops
    if m % p:
        raise ConfigError(
            "parallel.vpp",
            f"the interleaved schedule needs the micro-batches ({m}) to be a multiple of the "
            f"pipeline stages ({p})",
            v,
        )
    total = m * v

    def step(k: int, forward: bool) -> Op:
        chunk = (k % (p * v)) // p
        if not forward:
            chunk = v - 1 - chunk
        return Op(forward, chunk, (k // (p * v)) * p + k % p)

    warmup = total if m == p else min((p - s - 1) * 2 + (v - 1) * p, total)
    ops = [step(k, True) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [step(warmup + k, True), step(k, False)]
    ops += [step(k, False) for k in range(total - warmup, total)]
    return ops


def comm_kind(node: Node) -> str | None:
    """The communication kind of a node of a pipeline graph (None for compute)."""
    if node.kind == "compute":
        return None
    head = node.name.split(".", 1)[0]
    return head if head in COMM_KINDS else "other"


class _Rank:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add(self, deps: Sequence[int | None], **fields: Any) -> int:
        node = Node(
            id=len(self.nodes), deps=tuple(sorted({d for d in deps if d is not None})), **fields
        )
        self.nodes.append(node)
        return node.id


def pipeline_graph(
    stages: Sequence[Sequence[ChunkWork]],
    place: Placement,
    micro: int,
    *,
    kind: Schedule = "1f1b",
    dp_op: str = "all-reduce",
    grad_bytes: float = 4.0,
    param_bytes: float = 2.0,
    update: Sequence[Compute] | None = None,
    gather_params: bool = False,
    fsdp: bool = False,
    iterations: int = 1,
    name: str = "llm",
    classes: bool = False,
) -> Graph:
    """Per-rank graphs of ``iterations`` training iterations (module docstring).

    Args:
        stages: ``stages[s][c]``: the work of chunk ``c`` of stage ``s`` per micro-batch.
        place: where the parallel groups are.
        micro: micro-batches per iteration.
        kind: the schedule.
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
    """
    p = place.pp
    v = len(stages[0])
    if len(stages) != p or any(len(chunks) != v for chunks in stages):
        raise ConfigError("parallel", f"need {p} stages of {v} chunks each", len(stages))
    graphs: list[list[Node]] = []
    stride = place.stage_stride
    if classes and not place.stages_outermost:
        raise ConfigError(
            "run.mode", "class mode needs each pipeline stage to be one block of ranks", "class"
        )
    ranks = range(0, place.npus, stride) if classes else range(place.npus)
    for rank in ranks:
        graphs.append(
            _rank_graph(
                rank,
                stages,
                place,
                micro,
                kind,
                dp_op,
                grad_bytes,
                param_bytes,
                update,
                gather_params and not fsdp,
                fsdp,
                iterations,
                classes,
            )
        )
    graph = Graph(
        graphs,
        name=name,
        iterations=iterations,
        npus=place.npus,
        classes=RankClasses(p, stride) if classes else None,
    )
    graph.meta.update({"loop": f"pipeline-{kind}", "workload": name})
    return graph


def _rank_graph(
    rank: int,
    stages: Sequence[Sequence[ChunkWork]],
    place: Placement,
    micro: int,
    kind: Schedule,
    dp_op: str,
    grad_bytes: float,
    param_bytes: float,
    update: Sequence[Compute] | None,
    gather_params: bool,
    fsdp: bool,
    iterations: int,
    classes: bool = False,
) -> list[Node]:
    p = place.pp
    s = place.stage(rank)
    chunks = stages[s]
    v = len(chunks)
    vstages = p * v
    ops = schedule(kind, p, s, micro, v)
    g = _Rank()
    prev: int | None = None
    gate: list[int | None] = [None] * v  # what the next iteration's first forward waits for

    def vrank(vs: int) -> int:
        return vs % p if classes else place.peer_stage(rank, vs % p)

    def tag(forward: bool, vs: int, i: int) -> int:
        return ((0 if forward else 1) * vstages + vs) * micro + i

    for it in range(iterations):
        for c, work in enumerate(chunks):
            # The distributed optimizer's all-gather of the parameters the previous step
            # updated, overlapping this iteration's forward: each chunk's first forward waits
            # for its own.
            gathers = [
                _dp(
                    g,
                    "all-gather",
                    params * param_bytes,
                    group,
                    prev,
                    f"chunk{c}",
                    it,
                    f"params.{what}",
                )
                for group, params, what in (_dp_parts(place, work) if gather_params else [])
            ]
            gate[c] = (
                gathers[0]
                if len(gathers) == 1
                else (
                    g.add(
                        gathers,
                        name=f"gathered.{c}",
                        kind="compute",
                        compute=Compute(),
                        layer=f"chunk{c}",
                        iteration=it,
                        pass_name="update",
                    )
                    if gathers
                    else None
                )
            )
        remaining = {c: micro for c in range(v)}
        dp_nodes: list[int] = []
        started = [False] * v
        for op in ops:
            c, i = op.chunk, op.micro
            work = chunks[c]
            vs = c * p + s
            label = f"chunk{c}"
            deps: list[int | None] = [prev]
            if op.forward and not started[c]:
                deps.append(gate[c])
                started[c] = True
            src = vs - 1 if op.forward else vs + 1
            if 0 <= src < vstages:
                recv = g.add(
                    [prev],
                    name=f"pp.recv.{'act' if op.forward else 'grad'}.{c}.{i}",
                    kind="recv",
                    peer=vrank(src),
                    tag=tag(op.forward, vs, i),
                    size=work.boundary_bytes,
                    layer=label,
                    iteration=it,
                    pass_name="pp",
                )
                deps.append(recv)
            steps = work.forward if op.forward else work.backward
            pname = "fwd" if op.forward else "bwd"
            pending: int | None = None  # an overlapped collective issued with the next compute
            compute_deps: list[int | None] = deps
            # FSDP: each unit's parameters all-gathered before its first step (the next
            # unit's prefetched behind it), its gradients reduce-scattered after its backward
            starts: dict[int, int] = {}
            sequence: list[int] = []
            if fsdp and place.dp_group is not None and work.unit_params:
                count = len(work.unit_params)
                sequence = list(range(count)) if op.forward else list(range(count - 1, -1, -1))
                firsts = work.forward_starts if op.forward else work.backward_starts
                starts = {firsts[j]: sequence[j] for j in range(count)}
            gathered: dict[int, int] = {}
            unit_now: int | None = None
            for k, st in enumerate(steps):
                if k in starts:
                    u = starts[k]
                    if unit_now is not None and not op.forward:
                        dp_nodes.append(
                            _fsdp(
                                g,
                                "reduce-scatter",
                                work,
                                unit_now,
                                grad_bytes,
                                place,
                                deps,
                                label,
                                it,
                            )
                        )
                    if u not in gathered:
                        gathered[u] = _fsdp(
                            g, "all-gather", work, u, param_bytes, place, deps, label, it
                        )
                    deps = [*deps, gathered[u]]
                    j = sequence.index(u)
                    if j + 1 < len(sequence):
                        nxt = sequence[j + 1]
                        gathered[nxt] = _fsdp(
                            g, "all-gather", work, nxt, param_bytes, place, [gathered[u]], label, it
                        )
                    unit_now = u
                if st.comm is None:
                    node = g.add(
                        deps,
                        name=f"{pname}.{c}.{i}.{k}",
                        kind="compute",
                        compute=Compute(kernels=st.kernels),
                        layer=label,
                        iteration=it,
                        pass_name=pname,
                    )
                    compute_deps = deps
                    deps = [node, pending]
                    pending = None
                    continue
                comm = st.comm
                node = g.add(
                    compute_deps if st.overlap == "prev" else deps,
                    name=f"{st.kind}.{comm.op}.{pname}.{c}.{i}.{k}",
                    kind="collective",
                    op=comm.op,
                    size=comm.size,
                    group=comm.group,
                    dims=comm.dims,
                    layer=label,
                    iteration=it,
                    pass_name=st.kind,
                    blocking=not st.overlap,
                )
                if st.overlap == "next":
                    pending = node
                elif st.overlap == "prev":
                    deps = [*deps, node]
                else:
                    deps = [node]
            deps = [*deps, pending]
            if unit_now is not None and not op.forward:
                dp_nodes.append(
                    _fsdp(g, "reduce-scatter", work, unit_now, grad_bytes, place, deps, label, it)
                )
            real = sorted({d for d in deps if d is not None})
            if len(real) > 1:
                prev = g.add(
                    real,
                    name=f"{pname}.{c}.{i}.done",
                    kind="compute",
                    compute=Compute(),
                    layer=label,
                    iteration=it,
                    pass_name=pname,
                )
            else:
                prev = real[0] if real else prev
            dst = vs + 1 if op.forward else vs - 1
            if 0 <= dst < vstages:
                g.add(
                    [prev],
                    name=f"pp.send.{'act' if op.forward else 'grad'}.{c}.{i}",
                    kind="send",
                    peer=vrank(dst),
                    tag=tag(op.forward, dst, i),
                    size=work.boundary_bytes,
                    layer=label,
                    iteration=it,
                    pass_name="pp",
                )
            if not op.forward:
                remaining[c] -= 1
                if remaining[c] == 0 and not fsdp:
                    for group, params, what in _dp_parts(place, work):
                        dp_nodes.append(
                            _dp(
                                g,
                                dp_op,
                                params * grad_bytes,
                                group,
                                prev,
                                label,
                                it,
                                f"grad.{what}",
                            )
                        )
        deps = [prev, *dp_nodes]
        if update is not None and not update[s].empty:
            prev = g.add(
                deps,
                name="update",
                kind="compute",
                compute=update[s],
                layer="optimizer",
                iteration=it,
                pass_name="update",
            )
        else:
            prev = g.add(
                deps,
                name="update",
                kind="compute",
                compute=Compute(),
                layer="optimizer",
                iteration=it,
                pass_name="update",
            )
    return g.nodes


def _dp_parts(place: Placement, work: ChunkWork) -> list[tuple[Group, int, str]]:
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


def _fsdp(
    g: _Rank,
    op: str,
    work: ChunkWork,
    unit: int,
    nbytes: float,
    place: Placement,
    deps: Sequence[int | None],
    label: str,
    it: int,
) -> int:
    """An FSDP unit's parameter all-gather or gradient reduce-scatter over the DP group
    (non-blocking; whoever needs it depends on it)."""
    assert place.dp_group is not None
    return g.add(
        deps,
        name=f"dp.{op}.fsdp.{label}.u{unit}",
        kind="collective",
        op=op,
        size=work.unit_params[unit] * nbytes,
        group=place.dp_group,
        layer=label,
        iteration=it,
        pass_name="dp",
        blocking=False,
    )


def _dp(
    g: _Rank,
    op: str,
    size: float,
    group: Group,
    after: int | None,
    label: str,
    it: int,
    what: str,
) -> int:
    return g.add(
        [after],
        name=f"dp.{op}.{what}.{label}",
        kind="collective",
        op=op,
        size=size,
        group=group,
        layer=label,
        iteration=it,
        pass_name="dp",
        blocking=False,
    )


def kernels_of(steps: Sequence[Any]) -> list[Kernel]:
    """Every kernel of a pass's steps (for totals)."""
    return [k for st in steps for k in st.kernels]
