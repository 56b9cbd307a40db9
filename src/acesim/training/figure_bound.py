"""A time per iteration a training run cannot beat, from its graph, before it runs.

The figure of merit of a training run is its iteration time (:mod:`acesim.results.run`):
without a warm-up, the run's end over its iterations; with one, the time from the first
measured iteration's start (the earliest instant a node of it becomes ready at any rank) to
the start of the iteration after the last measured one, over the measured count. Searching an
endpoint kind's variants (:func:`acesim.runs.single.run_case`) keeps the fastest, so a variant
whose bound already exceeds the fastest time so far need not run: this is that bound.

Each node ends no sooner than its ready time plus a lower bound on its duration:

* a compute node: its kernels one after another alone on the rank's whole NPU
  (:meth:`~acesim.hardware.npu.NPU.kernels_time_alone`): anything beside them (a collective's
  HBM traffic or units, another stream) only slows them;
* a collective: no sooner than its earliest join among the ranks plus the time its chunks'
  steps take from there (:func:`~acesim.network.vectorized.step_bounds`, the latency bound),
  and at each rank no sooner than that rank's own join plus its own steps' bytes at the
  largest capacity;
* a timer (``host`` time, a composed ``pass``): its seconds, unless the run may replace the
  pass by its own nodes (a graph with ``choices``: 0);
* point-to-point messages and host copies: 0.

A node is ready when the last of its dependencies ends. The bound is the longest such path
(a max-plus recurrence over the graph in dependency order), from the run's start, or, with a
warm-up, from the first measured iteration's start (a node of that iteration is ready no
sooner; nodes of earlier iterations give nothing), to the end of the run or to the earliest
ready time of a node of the iteration after the measured ones.

It applies where every rank runs one node list (one graph for every rank): ranks of one NPU
configuration and slowdown then have one bound per node, and a collective's earliest join is
the least over them. Elsewhere (per-rank graphs, class mode's lists per class) it is 0: no
variant is skipped. The simulation adds its times in another order, so a caller skips only
where the bound exceeds a time by a relative margin far above that rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from graphlib import TopologicalSorter
from typing import Any

from ..hardware.platform import Platform
from ..network.vectorized import step_bounds
from ..workload.graph import Graph, Node

__all__ = ["figure_bound"]

_UNKNOWN = -math.inf


def figure_bound(platform: Platform, graph: Graph, warmup: int) -> float:
    """A time (s) the run's iteration time cannot be below (module docstring; 0 where no
    bound is known). ``warmup``: the iterations the measurement drops."""
    nodes = _one_list(graph.ranks)
    if nodes is None or not nodes:
        return 0.0
    order = _in_dependency_order(nodes)
    if order is None:
        return 0.0
    # one NPU of each configuration and slowdown (a straggler's plans are its own; a rank
    # made faster has kernels shorter than the others')
    npus = list({(id(npu.config), npu.slowdown): npu for npu in platform.npus}.values())
    iterations = graph.iterations
    if warmup == 0:
        first, last = None, None
        count = iterations
    else:
        first, last = warmup, iterations - 1
        count = last - first
    if count <= 0:
        return 0.0
    durations = [_durations(npu, order, graph) for npu in npus]
    collectives = _collective_bounds(platform, order)
    ready = [dict[int, float]() for _ in npus]
    ends = [dict[int, float]() for _ in npus]
    for node in order:
        for g in range(len(npus)):
            base = 0.0 if first is None or node.iteration == first else _UNKNOWN
            ready[g][node.id] = max([base, *(ends[g][d] for d in node.deps)])
        bounds = collectives.get(node.id)
        if bounds is None:
            for g in range(len(npus)):
                ends[g][node.id] = ready[g][node.id] + durations[g][node.id]
            continue
        whole, own = bounds
        earliest = min(ready[g][node.id] for g in range(len(npus)))
        for g in range(len(npus)):
            ends[g][node.id] = max(ready[g][node.id] + own, earliest + whole)
    if last is None:
        span = max(end for per_npu in ends for end in per_npu.values())
    else:
        later = [n.id for n in order if n.iteration == last]
        if not later:
            return 0.0
        span = min(per_npu[i] for per_npu in ready for i in later)
    if not math.isfinite(span) or span <= 0:
        return 0.0
    return span / count


def _one_list(ranks: Sequence[list[Node]]) -> list[Node] | None:
    """The node list every rank runs (one list object: a builder's graph, or one given for
    every rank), or None (lists of their own, equal or not: comparing them would cost as much
    as a trace's nodes times its ranks)."""
    first = ranks[0]
    if all(r is first for r in ranks[1:]):
        return first
    return None


def _in_dependency_order(nodes: list[Node]) -> list[Node] | None:
    """``nodes`` with every node after its dependencies (None: a dependency is missing)."""
    by_id = {n.id: n for n in nodes}
    if not all(d in by_id for n in nodes for d in n.deps):
        return None
    placed: set[int] = set()
    for node in nodes:
        if not all(d in placed for d in node.deps):
            break
        placed.add(node.id)
    else:
        return nodes  # already in order (the builders' usual graph)
    sorter = TopologicalSorter({n.id: n.deps for n in nodes})  # acyclic: validated before
    return [by_id[i] for i in sorter.static_order()]


def _durations(npu: Any, order: list[Node], graph: Graph) -> dict[int, float]:
    """Each node's least duration (s) on ``npu`` (collectives: see :func:`_collective_bounds`)."""
    out: dict[int, float] = {}
    for node in order:
        if node.kind == "compute" and node.compute is not None:
            out[node.id] = npu.kernels_time_alone(node.compute.kernels)
        elif node.kind == "host" or (node.kind == "pass" and graph.choices is None):
            out[node.id] = max(node.size, 0.0)
        else:
            out[node.id] = 0.0
    return out


def _collective_bounds(platform: Platform, order: list[Node]) -> dict[int, tuple[float, float]]:
    """Per collective node: (from the earliest join, from the rank's own join), s."""
    runtime = platform.collectives
    known: dict[tuple[Any, ...], tuple[float, float]] = {}
    out: dict[int, tuple[float, float]] = {}
    for node in order:
        if node.kind != "collective":
            continue
        op = node.op or "all-reduce"
        key = (op, node.size, node.dims, node.group)
        bounds = known.get(key)
        if bounds is None:
            _axes, chunks, choice = runtime.choose(op, node.size, dims=node.dims, group=node.group)
            bounds = known[key] = step_bounds(runtime, choice.phases, chunks, choice.protocol)
        out[node.id] = bounds
    return out
