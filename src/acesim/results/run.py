"""Steady-state metrics of a training run.

The steady-state window is one iteration: from the moment iteration ``k`` becomes ready to the
moment iteration ``k+1`` does, with ``k = iterations - 2`` (the last complete one after warm-up);
with a single iteration the window is the whole run. In that window:

* ``iteration_time``: window length (s);
* ``compute_time`` / ``compute_time_alone``: kernels of iteration ``k``, as run and at their
  roofline alone (s); ``compute_slowdown`` their ratio;
* ``exposed_comm``: window time the compute stream was idle (s);
* ``comm_time``: time at least one collective of iteration ``k`` was in flight (s);
* ``net_util[dim]``: bytes sent on the dimension in the window / (window x egress capacity);
* ``net_util_effective``: bytes sent on all dimensions in the window / (time any collective was
  in flight in the window x total egress capacity): how well the network is driven while there
  is communication to do (the paper's "effective network bandwidth utilisation");
* ``hbm_bw_compute`` / ``hbm_bw_comm``: HBM bytes moved in the window / window (B/s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..training.executor import Execution

SCHEMA = "acesim.run/1"


@dataclass
class LayerRow:
    """One layer in the measured iteration (times in s)."""

    name: str
    fwd: float = 0.0
    ig: float = 0.0
    wg: float = 0.0
    comm: float = 0.0
    comm_bytes: float = 0.0


@dataclass
class RunResult:
    """Metrics of one run. Times in s, bandwidths in B/s, utilisations in 0..1."""

    system: str
    workload: str
    endpoint: str
    npus: int
    mode: str
    loop: str
    iterations: int
    iteration_time: float
    compute_time: float
    compute_time_alone: float
    compute_slowdown: float
    exposed_comm: float
    comm_time: float
    net_util: dict[str, float]
    net_util_mean: float
    net_util_effective: float
    hbm_bw_compute: float
    hbm_bw_comm: float
    makespan: float
    split: dict[str, Any] = field(default_factory=dict)
    layers: list[LayerRow] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        return data

    def metrics(self) -> dict[str, float]:
        """Flat scalar metrics (for sweeps and databases)."""
        out = {
            "iteration_time": self.iteration_time,
            "compute_time": self.compute_time,
            "compute_time_alone": self.compute_time_alone,
            "compute_slowdown": self.compute_slowdown,
            "exposed_comm": self.exposed_comm,
            "comm_time": self.comm_time,
            "net_util_mean": self.net_util_mean,
            "net_util_effective": self.net_util_effective,
            "hbm_bw_compute": self.hbm_bw_compute,
            "hbm_bw_comm": self.hbm_bw_comm,
            "makespan": self.makespan,
        }
        for dim, value in self.net_util.items():
            out[f"net_util_{dim}"] = value
        return out


def _union_length(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    total = 0.0
    cur_start = cur_end = None
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if end <= start:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def summarize(ex: Execution, *, system: str, workload: str, loop: str) -> RunResult:
    """Compute :class:`RunResult` from an execution (see module docstring)."""
    platform = ex.platform
    iters = ex.graph.iterations
    assert ex.final is not None
    if iters >= 2:
        k = iters - 2
        lo, hi = ex.iteration_start[k], ex.iteration_start[k + 1]
        snap_lo, snap_hi = ex.snapshots[k], ex.snapshots[k + 1]
    else:
        k = 0
        lo, hi = 0.0, ex.makespan
        snap_lo, snap_hi = ex.snapshots[0], ex.final
    window = max(hi - lo, 1e-30)
    records = ex.records[0]
    compute_time = alone = 0.0
    coll_intervals: list[tuple[float, float]] = []
    all_colls = [
        (r.start, r.end)
        for r in records.values()
        if r.node.kind == "collective" and r.end > r.start
    ]
    rows: dict[str, LayerRow] = {}
    for rec in records.values():
        node = rec.node
        if node.iteration != k:
            continue
        row = rows.setdefault(node.layer or node.name, LayerRow(node.layer or node.name))
        if node.kind == "compute":
            compute_time += rec.end - rec.start
            alone += rec.alone
            if node.pass_name in ("fwd", "ig", "wg"):
                setattr(row, node.pass_name, getattr(row, node.pass_name) + rec.end - rec.start)
        elif node.kind == "collective":
            coll_intervals.append((rec.start, rec.end))
            row.comm += rec.end - rec.start
            row.comm_bytes += node.size
    busy = snap_hi.compute_busy - snap_lo.compute_busy
    net_util = {}
    sent_total = peak_total = 0.0
    for d in platform.topology.dimensions:
        if d.size <= 1:
            continue
        sent = snap_hi.egress_bytes[d.index] - snap_lo.egress_bytes[d.index]
        net_util[d.name] = sent / (window * d.egress_bandwidth)
        sent_total += sent
        peak_total += d.egress_bandwidth
    comm_busy = _union_length(all_colls, lo, hi)
    effective = sent_total / (comm_busy * peak_total) if comm_busy > 0 and peak_total > 0 else 0.0
    hbm_total = snap_hi.hbm_bytes - snap_lo.hbm_bytes
    hbm_compute = snap_hi.compute_hbm_bytes - snap_lo.compute_hbm_bytes
    hbm_comm = hbm_total - hbm_compute
    if hbm_comm < 1e-9 * max(hbm_total, 1.0):
        hbm_comm = 0.0  # rounding of two integrals of the same traffic
    return RunResult(
        system=system,
        workload=workload,
        endpoint=platform.system.endpoint.kind,
        npus=platform.topology.npus,
        mode="exact" if platform.exact else "symmetric",
        loop=loop,
        iterations=iters,
        iteration_time=window,
        compute_time=compute_time,
        compute_time_alone=alone,
        compute_slowdown=compute_time / alone if alone > 0 else 1.0,
        exposed_comm=max(window - busy, 0.0),
        comm_time=_union_length(coll_intervals, lo, float("inf")),
        net_util=net_util,
        net_util_mean=sum(net_util.values()) / len(net_util) if net_util else 0.0,
        net_util_effective=effective,
        hbm_bw_compute=hbm_compute / window,
        hbm_bw_comm=hbm_comm / window,
        makespan=ex.makespan,
        layers=[rows[name] for name in rows],
    )
