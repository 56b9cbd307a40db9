"""Timelines of a run as Chrome trace-event JSON (opens in Perfetto and chrome://tracing).

Layout
------
One *process* per simulated NPU (``pid = rank + 1``; pid 0 is avoided because some viewers
treat it specially). In symmetric mode the one simulated NPU stands for every NPU of the
system; its process name and the file's ``metadata.processes`` say so.

Threads (tracks) of a process, in this order:

* ``iterations``: one complete event per training iteration (from the moment it becomes ready
  to the moment the next one does, as in :mod:`acesim.results.run`); the measured ones (after
  the warm-up) have ``args.measured = true``.
* ``compute``: one complete event per compute node (the compute stream runs one at a time).
* ``comm``, ``comm #2``, ...: one complete event per collective node, from issue to the
  moment this NPU's part finished. Collectives overlap, so they are spread over as few lanes
  as needed (greedy interval partitioning; lanes never hold overlapping events).
* ``p2p``, ``p2p #2``, ...: sends and receives, likewise.
* ``chunks <dim>``, ``chunks <dim> #2``, ...: one complete event per chunk phase on that
  network dimension, from the moment the phase got its slot to the moment its last step
  completed (from the collective runtime's ``phase_log``).

Counters (process-scoped ``C`` events, step functions: a value holds until the next sample):

* ``HBM GB/s`` with series ``compute`` and ``comm``: HBM bandwidth allocated to the compute
  kernel and to everything else (collective kernels, network DMA, ACE DMA). Samples come from
  engine observers on the NPU's HBM resource(s); at each sample the compute part is read from
  the resource's users (the NPU's running kernel's rate times its HBM bytes per unit of work),
  the communication part is the rest of the allocation. With a static HBM split the two
  resources are summed.
* ``link <dim>`` with series ``utilisation``: allocated / capacity of the NPU's egress
  resource on the dimension (0..1); its integral times the capacity is the bytes sent.

Times (``ts``, ``dur``) are microseconds, as the format requires. Every time is first rounded
once to the nearest integer nanosecond (:func:`_ns`); a slice is written as ``ts = start_ns /
1000`` and ``dur = (end_ns - start_ns) / 1000`` (at most three decimals), so a viewer that reads
them back to integer ns (Perfetto rounds ``x * 1000``) gets exactly ``start_ns`` and ``end_ns``:
a child never ends past its parent and sequential slices on a track never overlap by a
rounding hair (Perfetto drops such slices). Lanes are assigned on the same integer-ns
intervals. Counter values are not rounded, only their times are snapped to the same ns grid.
Output is deterministic: events are sorted by (pid, tid, ts, longest first, name, creation
order).

Tracing needs :func:`enable_tracing` on the platform *before* the run (the phase log and the
resource samples are recorded while time runs); without it the trace still has the node tracks
but no chunk tracks and no counters (``metadata.counters`` is false).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

from ..engine import INF, Resource
from ..hardware.npu import NPU
from ..hardware.platform import Platform
from ..network.collective import Collective
from ..training.executor import Execution, NodeRecord
from .run import measured_iterations

__all__ = ["SCHEMA", "enable_tracing", "measured_iteration", "trace_events", "write_trace"]

SCHEMA = "acesim.trace/1"
_US = 1e6  # s -> us
_GB = 1e9


class _Samples(list[tuple[float, float]]):
    """Allocation samples ``(time s, allocated units/s)`` of one resource (an engine
    observer), plus, for an HBM resource, the compute kernel's share at each sample.

    The engine calls the observer whenever the allocation changes; at that instant the
    resource's users carry their new rates, so the compute part is read from them.
    """

    def __init__(self, npu: NPU | None, resource: Resource):
        super().__init__()
        self.npu = npu
        self.resource = resource
        self.compute: list[float] = []

    def __call__(self, time: float, allocated: float) -> None:
        self.append((time, allocated))
        rate = 0.0
        kernel = self.npu.kernel if self.npu is not None else None
        if kernel is not None and kernel.finished is None and kernel in self.resource.users:
            if kernel.rate < INF:
                rate = kernel.rate * kernel.demand.get(self.resource, 0.0)
        self.compute.append(rate)


_SAMPLES = "trace.samples"


def enable_tracing(platform: Platform) -> None:
    """Record what a trace needs during the coming run: chunk phases, HBM and egress samples."""
    platform.collectives.phase_log = []
    engine = platform.engine
    samples: dict[Resource, _Samples] = platform.recording.setdefault(_SAMPLES, {})
    for npu in platform.npus:
        for res in npu.hbm_resources:
            if res not in samples:
                samples[res] = _Samples(npu, res)
                engine.observe(res, samples[res])
    for row in platform.collectives.egress:
        for res in row:
            if res not in samples:
                samples[res] = _Samples(None, res)
                engine.observe(res, samples[res])


def _ns(t: float) -> int:
    """Simulator seconds -> the nearest integer nanosecond (the trace's time grid)."""
    return round(t * 1e9)


def _span_ns(start: float, end: float) -> tuple[int, int]:
    """A slice's (start, end) on the ns grid; never negative in length."""
    start_ns = _ns(start)
    return start_ns, max(_ns(end), start_ns)


def _us(t_ns: int) -> float:
    """Integer ns -> the microseconds written to the file (``round(_us(n) * 1000) == n``)."""
    return t_ns / 1000


def _lanes(intervals: list[tuple[int, int, int]]) -> list[int]:
    """Lane index of each (start_ns, end_ns, key) interval so that no lane holds an overlap
    (touching, end == start, is allowed)."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i])
    ends: list[int] = []
    lane = [0] * len(intervals)
    for i in order:
        start, end, _ = intervals[i]
        for j, last in enumerate(ends):
            if last <= start:
                ends[j] = end
                lane[i] = j
                break
        else:
            lane[i] = len(ends)
            ends.append(end)
    return lane


def _rank_span(ranks: Iterable[int]) -> str:
    ranks = sorted(ranks)
    return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])


def _steps(samples: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Last value at each instant (ns), consecutive repeats dropped (a step function)."""
    last_at: list[tuple[int, float]] = []
    for t, v in samples:
        if last_at and last_at[-1][0] == t:
            last_at[-1] = (t, v)
        else:
            last_at.append((t, v))
    out: list[tuple[int, float]] = []
    for t, v in last_at:
        if not out or out[-1][1] != v:
            out.append((t, v))
    return out


class _Builder:
    def __init__(self) -> None:
        self.events: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.meta: list[dict[str, Any]] = []
        self._seq = 0

    def add(self, event: dict[str, Any]) -> None:
        self._seq += 1
        key = (
            event["pid"],
            event.get("tid", 0),
            event["ts"],
            -event.get("dur", 0.0),
            event["name"],
            self._seq,
        )
        self.events.append((key, event))

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.meta.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )
        self.meta.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": tid},
            }
        )

    def sorted_events(self) -> list[dict[str, Any]]:
        return self.meta + [e for _, e in sorted(self.events, key=lambda ke: ke[0])]


def _complete(
    b: _Builder,
    pid: int,
    tid: int,
    name: str,
    cat: str,
    span: tuple[float, float],
    args: dict[str, Any],
) -> None:
    start_ns, end_ns = _span_ns(*span)
    b.add(
        {
            "name": name,
            "cat": cat,
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "ts": _us(start_ns),
            "dur": _us(end_ns - start_ns),
            "args": args,
        }
    )


def _counter(b: _Builder, pid: int, name: str, t_ns: int, args: dict[str, float]) -> None:
    b.add(
        {
            "name": name,
            "cat": "counter",
            "ph": "C",
            "pid": pid,
            "tid": 0,
            "ts": _us(t_ns),
            "args": args,
        }
    )


def measured_iteration(execution: Execution) -> list[int]:
    """The iterations :func:`acesim.results.run.summarize` measures."""
    return measured_iterations(execution.graph.iterations, execution.warmup)


class _Process:
    """Track (thread) allocation inside one process."""

    def __init__(self, b: _Builder, pid: int):
        self.b = b
        self.pid = pid
        self.next_tid = 1

    def lanes(self, name: str, spans: list[tuple[float, float, int]]) -> list[int]:
        """Tids for ``spans`` spread over as few non-overlapping lanes named ``name``, ``name
        #2``, ...; one (empty) lane when there are no spans. Spans are in seconds; lanes are
        assigned on their integer-ns snapping, as :func:`_complete` writes them."""
        lane = _lanes([(*_span_ns(start, end), key) for start, end, key in spans])
        count = max(lane, default=0) + 1
        for j in range(count):
            self.b.thread(self.pid, self.next_tid + j, name if j == 0 else f"{name} #{j + 1}")
        tids = [self.next_tid + j for j in lane]
        self.next_tid += count
        return tids


def trace_events(execution: Execution) -> dict[str, Any]:
    """The trace as a JSON-ready dict (see module docstring)."""
    platform = execution.platform
    runtime = platform.collectives
    colls = sorted(execution.collectives or runtime.collectives, key=lambda c: c.id)
    b = _Builder()
    processes: dict[str, Any] = {}
    bounds = sorted(execution.iteration_start.items())
    iterations: list[tuple[int, float, float]] = []
    for i, (k, start) in enumerate(bounds):
        end = (
            bounds[i + 1][1]
            if i + 1 < len(bounds)
            else execution.iteration_end.get(k, execution.makespan)
        )
        iterations.append((k, start, end))
    for rank in range(len(execution.records)):
        processes[str(rank + 1)] = _process(
            b, execution, rank, iterations, {c.id: c for c in colls}
        )
    watch: dict[Resource, _Samples] = platform.recording.get(_SAMPLES, {})
    counters = runtime.phase_log is not None and bool(watch)
    if counters:
        _link_counters(b, platform, len(execution.records), watch)
    metadata = _metadata(execution, processes, counters)
    return {"traceEvents": b.sorted_events(), "displayTimeUnit": "ns", "metadata": metadata}


def _process(
    b: _Builder,
    execution: Execution,
    rank: int,
    iterations: list[tuple[int, float, float]],
    coll_by_id: dict[int, Any],
) -> dict[str, Any]:
    """Simulated rank ``rank``'s process: its name, iterations, compute, collectives,
    point-to-point nodes and chunk phases; what it stands for (the metadata's entry)."""
    platform = execution.platform
    npus, exact, classes = platform.topology.npus, platform.exact, platform.classes
    pid = rank + 1
    proc = _Process(b, pid)
    if classes is not None:
        first = classes.representative(rank)
        stands_for = list(range(first, first + classes.block))
    else:
        stands_for = [rank] if exact else list(range(npus))
    span = _rank_span(stands_for)
    if classes is not None:
        label = f"NPU {stands_for[0]} (class {rank}: represents NPUs {span})"
    else:
        label = f"NPU {rank}" if exact else f"NPU 0 (represents all {npus} NPUs: {span})"
    b.meta.append(
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}}
    )
    b.meta.append(
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
    )
    measured = measured_iteration(execution)
    (tid,) = proc.lanes("iterations", [(0.0, 0.0, 0)])
    for k, start, end in iterations:
        args: dict[str, Any] = {"iteration": k, "measured": k in measured}
        _complete(b, pid, tid, f"iteration {k}", "iteration", (start, end), args)
    recs = sorted(
        (r for r in execution.records[rank].values() if r.end >= 0),
        key=lambda r: (r.start, r.node.id),
    )
    (tid,) = proc.lanes("compute", [(0.0, 0.0, 0)])
    for rec in recs:
        if rec.node.kind == "compute":
            _complete(
                b, pid, tid, rec.node.name, "compute", (rec.start, rec.end), _compute_args(rec)
            )
    dim_names = [d.name for d in platform.topology.dimensions]
    comm = [r for r in recs if r.node.kind == "collective"]
    tids = proc.lanes("comm", [(r.start, r.end, r.node.id) for r in comm])
    for rec, tid in zip(comm, tids, strict=True):
        args = _collective_args(rec, coll_by_id, dim_names)
        _complete(b, pid, tid, rec.node.name, "comm", (rec.start, rec.end), args)
    p2p = [r for r in recs if r.node.kind in ("send", "recv")]
    if p2p:
        tids = proc.lanes("p2p", [(r.start, r.end, r.node.id) for r in p2p])
        for rec, tid in zip(p2p, tids, strict=True):
            node = rec.node
            args = {"node": node.id, "kind": node.kind, "peer": node.peer, "tag": node.tag}
            args.update(size_bytes=node.size, iteration=node.iteration)
            _complete(b, pid, tid, node.name, "p2p", (rec.start, rec.end), args)
    copies = [r for r in recs if r.node.kind == "host_copy"]
    if copies:
        tids = proc.lanes("host copies", [(r.start, r.end, r.node.id) for r in copies])
        for rec, tid in zip(copies, tids, strict=True):
            node = rec.node
            args = {"node": node.id, "direction": node.op, "size_bytes": node.size}
            args.update(iteration=node.iteration)
            _complete(b, pid, tid, node.name, "host_copy", (rec.start, rec.end), args)
    issuing = [r for r in recs if r.node.kind == "host"]
    if issuing:  # the host thread issuing launches after a sync point (acesim.training.host)
        (tid,) = proc.lanes("host", [(0.0, 0.0, 0)])
        for rec in issuing:
            args = {"node": rec.node.id, "host_s": rec.node.size, "iteration": rec.node.iteration}
            _complete(b, pid, tid, rec.node.name, "host", (rec.start, rec.end), args)
    if platform.collectives.phase_log is not None:
        _chunk_lanes(b, proc, platform.collectives.phase_log, rank, dim_names, coll_by_id)
    return {"simulated_rank": rank, "represents": span, "represents_count": len(stands_for)}


def _chunk_lanes(
    b: _Builder,
    proc: _Process,
    phase_log: list[Any],
    rank: int,
    dim_names: list[str],
    coll_by_id: dict[int, Any],
) -> None:
    """Rank ``rank``'s chunk phases, one lane group per dimension."""
    mine = sorted(e for e in phase_log if e[1] == rank)
    for d, dname in enumerate(dim_names):
        on_dim = [e for e in mine if e[4] == d]
        if not on_dim:
            continue
        tids = proc.lanes(f"chunks {dname}", [(e[5], e[6], i) for i, e in enumerate(on_dim)])
        for (cid, _r, chunk, phase, _d, start, end), tid in zip(on_dim, tids, strict=True):
            c = coll_by_id.get(cid)
            name = c.label if c is not None and c.label else f"coll {cid}"
            args = {"collective": cid, "chunk": chunk, "phase": phase, "dim": dname}
            if c is not None:
                ph = c.phases[phase]
                args.update(
                    op=c.op,
                    phase_op=ph.op,
                    algorithm=ph.algorithm,
                    data_bytes=ph.data_bytes,
                    bytes_sent=ph.bytes_sent,
                )
            _complete(b, proc.pid, tid, f"{name} c{chunk} p{phase}", "chunk", (start, end), args)


def _link_counters(
    b: _Builder, platform: Any, sim_ranks: int, watch: dict[Resource, _Samples]
) -> None:
    """Every simulated rank's HBM and link-utilisation counters."""
    topo = platform.topology
    for rank in range(sim_ranks):
        pid = rank + 1
        npu = platform.npus[rank]
        _hbm_counters(b, pid, [watch[r] for r in npu.hbm_resources if r in watch])
        for d, res in enumerate(platform.collectives.egress[rank]):
            dim = topo.dimensions[d]
            if dim.size <= 1 or not math.isfinite(res.capacity) or res not in watch:
                continue
            for t, v in _steps([(0, 0.0), *((_ns(t), v) for t, v in watch[res])]):
                util = min(max(v / res.capacity, 0.0), 1.0)
                _counter(b, pid, f"link {dim.name}", t, {"utilisation": util})


def _metadata(execution: Execution, processes: dict[str, Any], counters: bool) -> dict[str, Any]:
    """The trace's metadata: what was run, and what each process stands for."""
    platform = execution.platform
    system, topo, npus = platform.system, platform.topology, platform.topology.npus
    metadata: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": "acesim",
        "system": system.name,
        "provenance": system.provenance.to_dict(),
        "workload": execution.graph.name,
        "endpoint": system.endpoint.kind,
        "mode": "exact" if platform.exact else "symmetric",
        "npus": npus,
        "simulated_npus": len(execution.records),
        "iterations": execution.graph.iterations,
        "measured_iterations": measured_iteration(execution),
        "warmup": execution.warmup,
        "makespan_us": execution.makespan * _US,
        "time_unit": "us",
        "counters": counters,
        "hbm_bandwidth_GBps": system.npu.hbm_bandwidth / _GB,
        "dimensions": [
            {
                "name": d.name,
                "kind": d.kind,
                "size": d.size,
                "egress_GBps": d.egress_bandwidth / _GB,
            }
            for d in topo.dimensions
        ],
        "processes": processes,
    }
    if platform.classes is not None:
        metadata["note"] = (
            f"class mode: each simulated NPU stands for the {platform.classes.block} NPUs of "
            "its class (pipeline stage), which run the same timeline"
        )
    elif not platform.exact:
        metadata["note"] = (
            f"symmetric mode: simulated NPU 0 (pid 1) stands for all {npus} NPUs "
            f"({_rank_span(range(npus))}); every NPU runs the same timeline"
        )
    return metadata


def _compute_args(rec: NodeRecord) -> dict[str, Any]:
    node = rec.node
    dur = rec.end - rec.start
    return {
        "node": node.id,
        "layer": node.layer or "",
        "pass": node.pass_name,
        "iteration": node.iteration,
        "time_alone_us": rec.alone * _US,
        "slowdown": dur / rec.alone if rec.alone > 0 else 1.0,
        "hbm_bytes": rec.hbm_bytes,
    }


def _collective_args(
    rec: NodeRecord, coll_by_id: dict[int, Collective], dim_names: list[str]
) -> dict[str, Any]:
    """Args of a collective node, with the collective instance it ran as."""
    node = rec.node
    op = node.op or "all-reduce"
    c = coll_by_id.get(rec.collective) if rec.collective is not None else None
    dims = c.dims if c is not None else (node.dims or tuple(range(len(dim_names))))
    args: dict[str, Any] = {
        "node": node.id,
        "op": op,
        "size_bytes": node.size,
        "dims": [dim_names[d] for d in dims],
        "layer": node.layer or "",
        "iteration": node.iteration,
        "blocking": node.blocking,
    }
    if node.group is not None and node.group.name:
        args["group"] = node.group.name
    if c is not None:
        args["collective"] = c.id
        args["chunks"] = c.chunks
        args["group_size"] = c.group_size
        args["priority"] = c.priority
    return args


def _hbm_counters(b: _Builder, pid: int, samples: list[list[tuple[float, float]]]) -> None:
    """Merge the NPU's HBM resources' samples into one (compute, comm) step function."""
    merged: list[tuple[float, int, float, float]] = []
    for i, s in enumerate(samples):
        compute = s.compute if isinstance(s, _Samples) else [0.0] * len(s)
        for (t, total), c in zip(s, compute, strict=True):
            merged.append((t, i, total, c))
    merged.sort(key=lambda m: m[0])  # stable: each resource keeps its order at equal times
    state = [(0.0, 0.0)] * len(samples)
    points: list[tuple[int, tuple[float, float]]] = [(0, (0.0, 0.0))]
    for t, i, total, c in merged:
        state[i] = (total, c)
        value = (sum(s[1] for s in state), sum(max(s[0] - s[1], 0.0) for s in state))
        t_ns = _ns(t)  # samples within one ns collapse to the last one (the value after them)
        if points[-1][0] == t_ns:
            points[-1] = (t_ns, value)
        else:
            points.append((t_ns, value))
    last: tuple[float, float] | None = None
    for t, value in points:
        if value != last:
            last = value
            _counter(b, pid, "HBM GB/s", t, {"compute": value[0] / _GB, "comm": value[1] / _GB})


def write_trace(execution: Execution, path: str | os.PathLike[str]) -> None:
    """Write the Chrome trace-event JSON of ``execution`` to ``path`` (one event per line)."""
    data = trace_events(execution)
    lines = [json.dumps(e, allow_nan=False, separators=(",", ":")) for e in data["traceEvents"]]
    text = (
        '{"traceEvents":[\n'
        + ",\n".join(lines)
        + '\n],\n"displayTimeUnit":'
        + json.dumps(data["displayTimeUnit"])
        + ',\n"metadata":'
        + json.dumps(data["metadata"], allow_nan=False, indent=1)
        + "}\n"
    )
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
