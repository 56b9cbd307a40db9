"""Training loops: a :class:`~acesim.workload.Workload` unrolled into an execution graph.

Semantics follow ASTRA-sim 1.0 (paper.md §6), for ``iterations`` iterations:

``layerwise`` data parallel
    Forward runs layers 0..L-1; the forward of layer ``l`` in iteration ``i`` waits for layer
    ``l``'s weight-gradient collective (and its update) from iteration ``i-1``. Backward runs
    from the last layer: weight-gradient compute, then its collective is issued non-blocking,
    then input-gradient compute. A collective in a forward or input-gradient pass blocks the
    next compute. The layer's optimizer step (``Layer.update`` kernels, else a fixed
    ``update_time``) runs on the compute stream after the layer's gradient collective.
``bucketed`` (PyTorch-DDP-like)
    As layerwise, but weight gradients are gathered, in backward order, into buckets of
    ``bucket_size`` bytes; one all-reduce per bucket is issued when its last layer's gradient is
    computed; the forward of a layer waits for its bucket.
``no_overlap``
    Every collective blocks: the next compute waits for it (the paper's "no overlap").
``hybrid_dlrm`` workloads (any loop except no_overlap)
    Layer 0 is the embedding; layers 1..b the bottom MLP; the rest the top MLP. The forward
    all-to-all is issued after the embedding's forward and blocks only the first top-MLP layer
    (the bottom MLP runs meanwhile); the backward all-to-all is issued when input gradients
    reach the first top-MLP layer and blocks the embedding's weight update; MLP weight-gradient
    all-reduces are non-blocking. Both all-to-alls are on the critical path, so their chunks
    get the priority of blocking collectives (:data:`CRITICAL`), as ASTRA-sim issues them.

A pass may hold several collectives: they are issued together after its compute; the next
compute (forward, input gradient) waits for all of them, the weight update for all of a weight
gradient's. Bucketing gathers weight-gradient passes whose only collective is an all-reduce over
whole dimensions, one communicator (``dims``) per bucket; other weight-gradient collectives are
issued as they are.

Node ids follow program order, which also orders ready kernels on the compute stream.

Loops are registered in :data:`LOOPS` (name -> :class:`Loop`); the CLI's ``--loop``, run
options and sweeps read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import WorkloadError
from ..registry import Registry
from ..workload.graph import Graph, Node, collective_fields
from ..workload.model import Comm, Compute, Layer, Pass, Workload

__all__ = ["Loop", "LOOPS", "build_graph"]


@dataclass(frozen=True)
class Loop:
    """A training loop: how a workload's layers are unrolled into an execution graph.

    Attributes:
        name: the value of ``run.loop`` / ``--loop``.
        summary: one line for help texts.
        build: ``build(workload, iterations, bucket_size)`` -> the graph.
    """

    name: str
    summary: str
    build: Callable[[Workload, int, float], Graph]


#: Chunk priority of collectives the loop waits on without blocking the next kernel (the DLRM
#: embedding all-to-alls: the top MLP and the embedding update wait for them). ASTRA-sim issues
#: them at the highest priority; the runtime honours it like a blocking collective's.
CRITICAL = 1

#: Training loops by name.
LOOPS: Registry[Loop] = Registry("training loop", "run.loop", listed=True)


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def _add(self, deps: list[int | None], **fields: Any) -> int:
        node = Node(
            id=len(self.nodes), deps=tuple(sorted({d for d in deps if d is not None})), **fields
        )
        self.nodes.append(node)
        return node.id

    def compute(
        self, name: str, compute: Compute, deps: list[int | None], layer: str, it: int, pname: str
    ) -> int:
        return self._add(
            deps,
            name=name,
            kind="compute",
            compute=compute,
            layer=layer,
            iteration=it,
            pass_name=pname,
        )

    def collectives(
        self,
        prefix: str,
        pass_: Pass,
        deps: list[int | None],
        layer: str,
        it: int,
        pname: str,
        blocking: bool,
        priority: int | None = None,
    ) -> list[int]:
        """The pass's collectives, named ``<prefix>.<op>`` (``#k`` added when several)."""
        many = len(pass_.comms) > 1
        return [
            self._add(
                deps,
                name=f"{prefix}.{comm.op}" + (f"#{k}" if many else ""),
                **collective_fields(comm),
                layer=layer,
                iteration=it,
                pass_name=pname,
                blocking=blocking,
                priority=priority,
            )
            for k, comm in enumerate(pass_.comms)
        ]

    def join(self, nodes: list[int], name: str, layer: str, it: int, pname: str) -> int | None:
        """One node that finishes when all of ``nodes`` have (None for none, the node itself
        for one): an empty compute node, so that a single dependency stands for them all."""
        if not nodes:
            return None
        if len(nodes) == 1:
            return nodes[0]
        return self.compute(name, Compute(), list(nodes), layer, it, pname)


def build_graph(
    workload: Workload,
    iterations: int = 2,
    loop: str = "layerwise",
    bucket_size: float = 25 * 2**20,
) -> Graph:
    """Unroll ``workload`` with the registered loop ``loop`` (see module)."""
    return LOOPS.get(loop, "run.loop").build(workload, iterations, bucket_size)


def _unroll(
    workload: Workload,
    iterations: int,
    loop: str,
    bucket_size: float,
) -> Graph:
    """The data-parallel (and DLRM hybrid) unrolling behind every built-in loop."""
    if iterations < 1:
        raise WorkloadError(f"iterations must be at least 1, got {iterations}", field="iterations")
    if workload.parallelism == "hybrid_dlrm":
        b = workload.bottom_layers
        if b is None or not 0 < b < len(workload.layers) - 1:
            raise WorkloadError(
                f"hybrid_dlrm needs 0 < bottom_layers < {len(workload.layers) - 1}, got {b}",
                location=workload.name,
            )
    unroller = _Unroller(workload, loop, bucket_size)
    for it in range(iterations):
        unroller.forward(it)
        unroller.backward(it)
    graph = Graph([unroller.builder.nodes], name=workload.name, iterations=iterations)
    graph.meta["loop"] = loop
    graph.meta["workload"] = workload.name
    return graph


class _Unroller:
    """One iteration after another of a layer-wise loop (see the module docstring); node ids
    follow the order the nodes are made in (program order)."""

    def __init__(self, workload: Workload, loop: str, bucket_size: float):
        self.builder = _Builder()
        self.layers = workload.layers
        self.blocking_all = loop == "no_overlap"
        self.dlrm = workload.parallelism == "hybrid_dlrm" and not self.blocking_all
        self.bottom = workload.bottom_layers or 0
        self.buckets = _buckets(self.layers, bucket_size) if loop == "bucketed" else None
        #: what the next iteration's forward of each layer waits for
        self.gate: list[list[int]] = [[] for _ in self.layers]
        #: the last nodes of the previous pass
        self.last: list[int] = []
        self.pending_bucket: list[int] = []
        self.bucket_bytes = 0.0

    def forward(self, it: int) -> None:
        builder, dlrm, bottom = self.builder, self.dlrm, self.bottom
        last = self.last
        dlrm_a2a: list[int] = []
        bottom_done: list[int] = []
        for li, layer in enumerate(self.layers):
            deps: list[int | None] = [*self.gate[li], *last]
            if dlrm and li == bottom + 1:
                deps += [*dlrm_a2a, *bottom_done]
            fwd = builder.compute(
                f"{layer.name}.fwd", layer.forward.compute, deps, layer.name, it, "fwd"
            )
            last = [fwd]
            embedding = dlrm and li == 0
            comms = builder.collectives(
                f"{layer.name}.fwd",
                layer.forward,
                [fwd],
                layer.name,
                it,
                "fwd",
                blocking=not embedding,
                priority=CRITICAL if embedding else None,
            )
            if comms and embedding:
                dlrm_a2a = comms
            elif comms:
                last = comms
            if dlrm and li == bottom:
                bottom_done = last
        self.last = last

    def backward(self, it: int) -> None:
        builder, layers = self.builder, self.layers
        self.pending_bucket, self.bucket_bytes = [], 0.0
        emb_a2a: list[int] = []
        for li in range(len(layers) - 1, -1, -1):
            layer = layers[li]
            if self.dlrm and li == 0:
                # Embedding: its backward waits for the backward all-to-all.
                ig = builder.compute(
                    f"{layer.name}.ig", layer.input_grad.compute, [*self.last, *emb_a2a],
                    layer.name, it, "ig",
                )  # fmt: skip
                wg = builder.compute(
                    f"{layer.name}.wg", layer.weight_grad.compute, [ig], layer.name, it, "wg"
                )
                self.gate[0] = _tail(builder, layer, wg, it, self.blocking_all)
                self.last = [wg]
                continue
            wg = builder.compute(
                f"{layer.name}.wg", layer.weight_grad.compute, list(self.last), layer.name, it,
                "wg",
            )  # fmt: skip
            blocker = self._weight_grad_comm(li, wg, it)
            ig = builder.compute(
                f"{layer.name}.ig", layer.input_grad.compute, list(blocker or [wg]), layer.name,
                it, "ig",
            )  # fmt: skip
            comms = builder.collectives(
                f"{layer.name}.ig", layer.input_grad, [ig], layer.name, it, "ig", blocking=True
            )
            self.last = comms or [ig]
            if self.dlrm and li == self.bottom + 1:
                emb = layers[0]
                emb_a2a = builder.collectives(
                    f"{emb.name}.ig", emb.input_grad, [ig], emb.name, it, "ig", blocking=False,
                    priority=CRITICAL,
                )  # fmt: skip
        if self.pending_bucket:  # the first layers' bucket closes at the end of backward
            first = layers[self.pending_bucket[-1]]
            ref = _bucketable(first)
            self._close_bucket(self.pending_bucket[-1], ref.dims if ref else None, self.last, it)

    def _weight_grad_comm(self, li: int, wg: int, it: int) -> list[int]:
        """Layer ``li``'s weight-gradient communication after its ``wg`` node (into a bucket,
        on its own, or none) and the next iteration's gate; what the input gradient waits
        for besides ``wg`` (the collectives, when every collective blocks)."""
        layer = self.layers[li]
        bucketed = _bucketable(layer) if self.buckets is not None else None
        if bucketed is not None and self.buckets is not None:
            self.pending_bucket.append(li)
            self.bucket_bytes += bucketed.size
            if self.buckets[li]:  # this layer closes a bucket
                self._close_bucket(li, bucketed.dims, [wg], it)
            return []
        if not layer.weight_grad.comms:
            self.gate[li] = _update(self.builder, layer, [wg], it)
            return []
        comms = self.builder.collectives(
            f"{layer.name}.wg", layer.weight_grad, [wg], layer.name, it, "wg",
            blocking=self.blocking_all,
        )  # fmt: skip
        self.gate[li] = _update(self.builder, layer, comms, it)
        return comms if self.blocking_all else []

    def _close_bucket(self, li: int, dims: Any, deps: list[int], it: int) -> None:
        """The all-reduce of the pending bucket (closed by layer ``li``) after ``deps``; every
        member layer's update waits for it."""
        layers = self.layers
        bucket = Pass(comms=(Comm("all-reduce", self.bucket_bytes, dims),))
        [c] = self.builder.collectives(
            f"bucket.{li}", bucket, list(deps), layers[li].name, it, "wg", blocking=False
        )
        for member in self.pending_bucket:
            self.gate[member] = _update(self.builder, layers[member], [c], it)
        self.pending_bucket, self.bucket_bytes = [], 0.0


def _bucketable(layer: Layer) -> Comm | None:
    """The layer's weight-gradient all-reduce if bucketing may merge it: the pass's only
    collective, an all-reduce over whole dimensions."""
    comms = layer.weight_grad.comms
    if len(comms) == 1 and comms[0].op == "all-reduce" and comms[0].group is None:
        return comms[0]
    return None


def _update(builder: _Builder, layer: Layer, after: list[int], it: int) -> list[int]:
    """The layer's optimizer step after ``after`` (or ``after`` itself if it has none): its
    ``update`` kernels, else a fixed ``update_time``."""
    update = layer.update_compute
    if update.empty:
        return after
    node = builder.compute(
        f"{layer.name}.update",
        update,
        list(after),
        layer.name,
        it,
        "update",
    )
    return [node]


def _tail(builder: _Builder, layer: Layer, wg: int, it: int, blocking: bool) -> list[int]:
    comms = builder.collectives(
        f"{layer.name}.wg", layer.weight_grad, [wg], layer.name, it, "wg", blocking=blocking
    )
    return _update(builder, layer, comms or [wg], it)


def _buckets(layers: tuple[Layer, ...], bucket_size: float) -> list[bool]:
    """closes[l]: layer l's gradient fills its bucket, or the next bucketable layer (walking
    layers in backward order) all-reduces over other dimensions: a bucket holds the gradients
    of one communicator only."""
    closes = [False] * len(layers)
    filled = 0.0
    order = [
        (li, comm)
        for li in range(len(layers) - 1, -1, -1)
        if (comm := _bucketable(layers[li])) is not None
    ]
    for k, (li, comm) in enumerate(order):
        filled += comm.size
        other = k + 1 < len(order) and order[k + 1][1].dims != comm.dims
        if filled >= bucket_size or other:
            closes[li] = True
            filled = 0.0
    return closes


def _loop(name: str) -> Callable[[Workload, int, float], Graph]:
    def build(workload: Workload, iterations: int, bucket_size: float) -> Graph:
        return _unroll(workload, iterations, name, bucket_size)

    return build


LOOPS.register(
    "layerwise",
    Loop(
        "layerwise",
        "data parallel: each layer's gradient collective issued right after its weight "
        "gradient, overlapping the rest of backward",
        _loop("layerwise"),
    ),
)
LOOPS.register(
    "bucketed",
    Loop(
        "bucketed",
        "PyTorch-DDP-like: gradients gathered into buckets of bucket_size bytes, one all-reduce "
        "per bucket",
        _loop("bucketed"),
    ),
)
LOOPS.register(
    "no_overlap",
    Loop(
        "no_overlap", "every collective blocks the next compute (no overlap)", _loop("no_overlap")
    ),
)
