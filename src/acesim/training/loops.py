"""Training loops: a :class:`~acesim.workload.Workload` unrolled into an execution graph.

Semantics follow ASTRA-sim 1.0 (paper.md §6), for ``iterations`` iterations:

``layerwise`` data parallel
    Forward runs layers 0..L-1; the forward of layer ``l`` in iteration ``i`` waits for layer
    ``l``'s weight-gradient collective (and its update) from iteration ``i-1``. Backward runs
    from the last layer: weight-gradient compute, then its collective is issued non-blocking,
    then input-gradient compute. A collective in a forward or input-gradient pass blocks the
    next compute. ``update_time`` is an optimizer kernel on the compute stream after the layer's
    gradient collective.
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
    all-reduces are non-blocking.

Node ids follow program order, which also orders ready kernels on the compute stream.
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import WorkloadError
from ..workload.model import Comm, Compute, Layer, Workload
from .graph import Graph, Node

Loop = Literal["layerwise", "bucketed", "no_overlap"]


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

    def collective(
        self,
        name: str,
        comm: Comm,
        deps: list[int | None],
        layer: str,
        it: int,
        pname: str,
        blocking: bool,
    ) -> int:
        return self._add(
            deps,
            name=name,
            kind="collective",
            op=comm.op,
            size=comm.size,
            dims=comm.dims,
            layer=layer,
            iteration=it,
            pass_name=pname,
            blocking=blocking,
        )


def build_graph(
    workload: Workload,
    iterations: int = 2,
    loop: Loop = "layerwise",
    bucket_size: float = 25 * 2**20,
) -> Graph:
    """Unroll ``workload`` into a one-rank graph of ``iterations`` iterations (see module)."""
    if iterations < 1:
        raise WorkloadError(f"iterations must be at least 1, got {iterations}", field="iterations")
    if loop not in ("layerwise", "bucketed", "no_overlap"):
        raise WorkloadError(f"unknown training loop {loop!r}", field="loop")
    if workload.parallelism == "hybrid_dlrm":
        b = workload.bottom_layers
        if b is None or not 0 < b < len(workload.layers) - 1:
            raise WorkloadError(
                f"hybrid_dlrm needs 0 < bottom_layers < {len(workload.layers) - 1}, got {b}",
                location=workload.name,
            )
    builder = _Builder()
    layers = workload.layers
    n = len(layers)
    blocking_all = loop == "no_overlap"
    dlrm = workload.parallelism == "hybrid_dlrm" and not blocking_all
    bottom = workload.bottom_layers or 0
    buckets = _buckets(layers, bucket_size) if loop == "bucketed" else None
    # What the next iteration's forward of layer l waits for.
    gate: list[int | None] = [None] * n
    prev_tail: int | None = None
    for it in range(iterations):
        # ---- forward
        last: int | None = prev_tail
        dlrm_a2a: int | None = None
        bottom_done: int | None = None
        for li, layer in enumerate(layers):
            deps = [gate[li]]
            if dlrm and li == bottom + 1:
                deps += [dlrm_a2a, bottom_done]
                if last is not None:
                    deps.append(last)
            else:
                deps.append(last)
            fwd = builder.compute(
                f"{layer.name}.fwd", layer.forward.compute, deps, layer.name, it, "fwd"
            )
            last = fwd
            comm = layer.forward.comm
            if comm is not None:
                c = builder.collective(
                    f"{layer.name}.fwd.{comm.op}",
                    comm,
                    [fwd],
                    layer.name,
                    it,
                    "fwd",
                    blocking=not (dlrm and li == 0),
                )
                if dlrm and li == 0:
                    dlrm_a2a = c
                else:
                    last = c
            if dlrm and li == bottom:
                bottom_done = last
        # ---- backward
        pending_bucket: list[int] = []
        bucket_bytes = 0.0
        emb_a2a: int | None = None
        for li in range(n - 1, -1, -1):
            layer = layers[li]
            if dlrm and li == 0:
                # Embedding: its backward waits for the backward all-to-all.
                ig = builder.compute(
                    f"{layer.name}.ig",
                    layer.input_grad.compute,
                    [last, emb_a2a],
                    layer.name,
                    it,
                    "ig",
                )
                wg = builder.compute(
                    f"{layer.name}.wg", layer.weight_grad.compute, [ig], layer.name, it, "wg"
                )
                gate[0] = _tail(builder, layer, wg, it, blocking_all)
                last = wg
                continue
            wg = builder.compute(
                f"{layer.name}.wg", layer.weight_grad.compute, [last], layer.name, it, "wg"
            )
            wg_comm = layer.weight_grad.comm
            blocker: int | None = None
            if wg_comm is not None and buckets is not None and wg_comm.op == "all-reduce":
                pending_bucket.append(li)
                bucket_bytes += wg_comm.size
                if buckets[li]:  # this layer closes a bucket
                    c = builder.collective(
                        f"bucket.{li}.all-reduce",
                        Comm("all-reduce", bucket_bytes, wg_comm.dims),
                        [wg],
                        layer.name,
                        it,
                        "wg",
                        blocking=False,
                    )
                    for member in pending_bucket:
                        gate[member] = _update(builder, layers[member], c, it)
                    pending_bucket, bucket_bytes = [], 0.0
            elif wg_comm is not None:
                c = builder.collective(
                    f"{layer.name}.wg.{wg_comm.op}",
                    wg_comm,
                    [wg],
                    layer.name,
                    it,
                    "wg",
                    blocking=blocking_all,
                )
                gate[li] = _update(builder, layer, c, it)
                if blocking_all:
                    blocker = c
            else:
                gate[li] = _update(builder, layer, wg, it)
            ig = builder.compute(
                f"{layer.name}.ig", layer.input_grad.compute, [blocker or wg], layer.name, it, "ig"
            )
            last = ig
            ig_comm = layer.input_grad.comm
            if ig_comm is not None:
                c = builder.collective(
                    f"{layer.name}.ig.{ig_comm.op}",
                    ig_comm,
                    [ig],
                    layer.name,
                    it,
                    "ig",
                    blocking=True,
                )
                last = c
            if dlrm and li == bottom + 1:
                emb = layers[0]
                a2a = emb.input_grad.comm
                if a2a is not None:
                    emb_a2a = builder.collective(
                        f"{emb.name}.ig.{a2a.op}", a2a, [ig], emb.name, it, "ig", blocking=False
                    )
        if pending_bucket:  # the first layers' bucket closes at the end of backward
            first = layers[pending_bucket[-1]]
            ref = first.weight_grad.comm
            c = builder.collective(
                f"bucket.{pending_bucket[-1]}.all-reduce",
                Comm("all-reduce", bucket_bytes, ref.dims if ref else None),
                [last],
                first.name,
                it,
                "wg",
                blocking=False,
            )
            for member in pending_bucket:
                gate[member] = _update(builder, layers[member], c, it)
        prev_tail = last
    graph = Graph([builder.nodes], name=workload.name, iterations=iterations)
    graph.meta["loop"] = loop
    graph.meta["workload"] = workload.name
    return graph


def _update(builder: _Builder, layer: Layer, after: int, it: int) -> int:
    """The layer's optimizer kernel after ``after`` (or ``after`` itself if it has none)."""
    if layer.update_time <= 0:
        return after
    return builder.compute(
        f"{layer.name}.update",
        Compute(duration=layer.update_time),
        [after],
        layer.name,
        it,
        "update",
    )


def _tail(builder: _Builder, layer: Layer, wg: int, it: int, blocking: bool) -> int:
    comm = layer.weight_grad.comm
    if comm is None:
        return _update(builder, layer, wg, it)
    c = builder.collective(
        f"{layer.name}.wg.{comm.op}", comm, [wg], layer.name, it, "wg", blocking=blocking
    )
    return _update(builder, layer, c, it)


def _buckets(layers: tuple[Layer, ...], bucket_size: float) -> list[bool]:
    """closes[l]: layer l's gradient fills its bucket (walking layers in backward order)."""
    closes = [False] * len(layers)
    filled = 0.0
    for li in range(len(layers) - 1, -1, -1):
        comm = layers[li].weight_grad.comm
        if comm is None or comm.op != "all-reduce":
            continue
        filled += comm.size
        if filled >= bucket_size:
            closes[li] = True
            filled = 0.0
    return closes

