"""Steady-state metrics of a training run, and what the run was made with.

The measured iterations are ``warmup .. iterations-2``: iteration ``k`` runs from the moment it
becomes ready to the moment iteration ``k+1`` does, so the window is ``[start(warmup),
start(iterations-1))`` and every figure is a mean per measured iteration. Without warm-up the
whole run is measured (``[0, makespan]``, its communication tail included, every iteration
counted): the cold first iteration's window would otherwise end while its own updates still
run, shorter than its compute. In the window:

* ``iteration_time``: window length / measured iterations (s);
* ``compute_time`` / ``compute_time_alone``: kernels of the measured iterations, as run and at
  their roofline alone (s per iteration); ``compute_slowdown`` their ratio;
* ``exposed_comm``: time the compute stream was idle (s per iteration);
* ``comm_time``: time at least one collective of the iteration was in flight, from the
  iteration's start (s per iteration);
* ``net_util[dim]``: bytes sent on the dimension in the window / (window x egress capacity);
* ``net_util_effective``: bytes sent on all dimensions in the window / (time any collective was
  in flight in the window x total egress capacity): how well the network is driven while there
  is communication to do (the paper's "effective network bandwidth utilisation"; comparisons
  report their ``net_util_gain`` as the ratio of this figure);
* ``hbm_bw_compute`` / ``hbm_bw_comm``: HBM bytes in the window / window (B/s), each byte
  attributed to its cause: a compute kernel's bytes include its writes' turnaround penalty
  (``npu.kernels.write_penalty``: HBM capacity the kernel consumes); communication's are
  everything else (collective kernels, network and offload DMA), so an NPU with nothing to
  communicate reports 0;
* ``comm_units_held``: compute units held by communication, mean over the window;
* ``bound`` / ``bound_by``: what bound the iteration, second by second
  (:mod:`acesim.training.bounds`): ``compute: compute units``, ``compute: HBM``, ``exposed:
  link <dim>``, ``exposed: latency and waiting``... (s per iteration; they sum to
  ``iteration_time``), and the largest of them;
* ``comm_bound`` / ``comm_bound_by``: what bound communication, hidden or exposed
  (:func:`acesim.training.bounds.collective_bounds`): per label (``link <dim>``, ``HBM``,
  ``comm-unit HBM issue``, ``copy engines``, ``copy-engine setup``, ``ACE DMA``, ``ACE SRAM
  (...)``), the time at least one of NPU 0's messages, DMA transfers or waits had it as its
  bound (s per iteration; labels overlap), and the largest.

A :class:`RunResult` also states what it was run with (:class:`RunInfo`): system, network
shape, NPUs, workload, per-NPU batch and datatype, loop, iterations simulated, warm-up
dropped, iterations measured, the endpoint kind, its variant and settings, how the system was
made (its document, extends chain, NPU preset and overrides), acesim's version.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ..errors import SimulationError, WorkloadError
from ..intervals import union
from ..training.bounds import attribute, collective_bounds
from ..training.executor import Execution, NodeRecord, Snapshot
from ..units import format_rate, format_time
from ..version import __version__
from .energy import EnergyResult, energy_result, energy_rows
from .protocol import Table, document, system_title

SCHEMA = "acesim.run/2"


__all__ = [
    "SCHEMA",
    "LayerRow",
    "RunInfo",
    "RunResult",
    "summarize",
    "measured_iterations",
]


@dataclass
class LayerRow:
    """One layer, mean per measured iteration (times in s, bytes)."""

    name: str
    fwd: float = 0.0
    ig: float = 0.0
    wg: float = 0.0
    comm: float = 0.0
    comm_bytes: float = 0.0


#: the note of a run stopped once its measurement was complete (``run.stop = "measured"``)
STOPPED_NOTE = (
    "stopped once the measurement was complete (run.stop = measured): the last iteration was "
    "not run to its end, and makespan is the instant the run stopped"
)


@dataclass
class RunInfo:
    """What a run was made with (echoed in every result, table and database row)."""

    system: str
    shape: list[int]
    npus: int
    workload: str
    batch_per_npu: int | None
    precision: str | None
    loop: str
    mode: str
    iterations: int
    warmup: int
    measured: int
    endpoint: str
    variant: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    #: how the system was made: its document, extends chain, NPU preset, overrides
    #: (:meth:`acesim.config.provenance.Provenance.to_dict`)
    provenance: dict[str, Any] = field(default_factory=dict)
    version: str = __version__
    #: the strategy's reason (:func:`acesim.training.strategy.mode_note`; "" when none)
    mode_note: str = ""
    #: ``end``: run to its end; ``measured``: stopped once the measurement was complete
    #: (``run.stop``), the result's ``makespan`` that instant
    stop: str = "end"

    def describe(self) -> str:
        """One line: workload, batch, precision, system (with its extends chain and
        overrides), shape, loop, measurement."""
        batch = f", batch {self.batch_per_npu}/NPU" if self.batch_per_npu else ""
        dtype = f", {self.precision}" if self.precision else ""
        shape = "x".join(map(str, self.shape))
        system = system_title(self.system, self.provenance)
        return (
            f"{self.workload}{batch}{dtype} on {system}: {self.npus} NPUs ({shape}), "
            f"{self.loop} loop, {self.mode}; {self.measured} iteration"
            f"{'s' if self.measured != 1 else ''} measured after {self.warmup} warm-up"
        )


@dataclass
class RunResult:
    """Metrics of one training-graph run (the :class:`~acesim.results.protocol.Result`
    protocol). Times in s, bandwidths in B/s, utilisations in 0..1."""

    kind: ClassVar[str] = "training"
    gains: ClassVar[dict[str, str]] = {"net_util_gain": "net_util_effective"}

    info: RunInfo
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
    comm_units_held: float
    makespan: float
    bound: str = ""
    bound_by: dict[str, float] = field(default_factory=dict)
    comm_bound: str = ""
    comm_bound_by: dict[str, float] = field(default_factory=dict)
    layers: list[LayerRow] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    #: energy per iteration, per sample, average power (acesim.results.energy); None: the
    #: NPU has no power model ([npu.power])
    energy: EnergyResult | None = None

    # The run's identity, for tables and comparisons.
    @property
    def system(self) -> str:
        return self.info.system

    @property
    def workload(self) -> str:
        return self.info.workload

    @property
    def endpoint(self) -> str:
        return self.info.endpoint

    @property
    def npus(self) -> int:
        return self.info.npus

    @property
    def mode(self) -> str:
        return self.info.mode

    @property
    def loop(self) -> str:
        return self.info.loop

    @property
    def figure(self) -> float:
        """The figure of merit: the iteration time (s)."""
        return self.iteration_time

    @property
    def mode_note(self) -> str:
        return self.info.mode_note

    @property
    def variant(self) -> str:
        return self.info.variant

    @property
    def settings(self) -> dict[str, Any]:
        return self.info.settings

    def describe(self) -> str:
        return self.info.describe()

    def to_dict(self) -> dict[str, Any]:
        return document(self, SCHEMA)

    def case(self) -> dict[str, Any]:
        """What the run was: its :class:`RunInfo` but the endpoint's."""
        info = asdict(self.info)
        for key in ("endpoint", "variant", "settings", "mode_note"):
            info.pop(key)
        return info

    def rows(self) -> list[tuple[str, str]]:
        """The headline figures as (metric, text) rows."""
        rows = [
            ("iteration time", format_time(self.iteration_time)),
            ("compute (as run)", format_time(self.compute_time)),
            ("compute (alone)", format_time(self.compute_time_alone)),
            ("compute slowdown", f"{self.compute_slowdown:.3f}x"),
            ("exposed communication", format_time(self.exposed_comm)),
            ("communication time", format_time(self.comm_time)),
        ]
        rows += [(f"net util {dim}", f"{100 * u:.1f}%") for dim, u in self.net_util.items()]
        rows += [
            ("net util effective", f"{100 * self.net_util_effective:.1f}%"),
            ("HBM bw compute", format_rate(self.hbm_bw_compute)),
            ("HBM bw comm", format_rate(self.hbm_bw_comm)),
            ("compute units held by comm", f"{self.comm_units_held:.2f}"),
        ]
        if self.bound:
            share = self.bound_by[self.bound] / self.iteration_time
            rows.append(("bound by", f"{self.bound} ({100 * share:.0f}%)"))
        if self.comm_bound and self.comm_time > 0:
            share = min(self.comm_bound_by[self.comm_bound] / self.comm_time, 1.0)
            rows.append(("comm bound by", f"{self.comm_bound} ({100 * share:.0f}% of comm)"))
        return rows + energy_rows(self.energy)

    def tables(self) -> list[Table]:
        """What bound the iteration (time per iteration, shares of 0.1% or more)."""
        t = self.iteration_time
        rows: list[tuple[str, ...]] = [
            (name, format_time(s), f"{100 * s / t:.1f}%")
            for name, s in self.bound_by.items()
            if s / t >= 0.001
        ]
        title = "what bound the iteration (time per iteration)"
        return [Table(title, ("resource", "time", "share"), rows)]

    def footnotes(self) -> list[str]:
        notes = [self.mode_note] if self.mode_note else []
        if self.info.stop == "measured":
            notes.append(STOPPED_NOTE)
        return notes

    def to_pandas(self) -> Any:
        """One row: :meth:`metrics` (run facts included) as a ``pandas.DataFrame``."""
        import pandas as pd

        return pd.DataFrame([self.metrics()])

    def layers_to_pandas(self) -> Any:
        """One row per layer, mean per measured iteration; column names carry their units."""
        import pandas as pd

        names = {
            "name": "layer",
            "fwd": "forward_s",
            "ig": "input_grad_s",
            "wg": "weight_grad_s",
            "comm": "collective_s",
            "comm_bytes": "collective_bytes",
        }
        rows = [{names[k]: v for k, v in asdict(row).items()} for row in self.layers]
        return pd.DataFrame(rows, columns=list(names.values()))

    def metrics(self) -> dict[str, Any]:
        """Flat scalar metrics and run facts (for sweeps and databases)."""
        out: dict[str, Any] = {
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
            "comm_units_held": self.comm_units_held,
            "makespan": self.makespan,
            "bound": self.bound,
            "comm_bound": self.comm_bound,
        }
        for dim, value in self.net_util.items():
            out[f"net_util_{dim}"] = value
        if self.energy is not None:
            out.update(self.energy.metrics())
        info = self.info
        out.update(
            {
                "run.system": info.system,
                "run.shape": "x".join(map(str, info.shape)),
                "run.npus": info.npus,
                "run.workload": info.workload,
                "run.batch_per_npu": info.batch_per_npu,
                "run.precision": info.precision,
                "run.loop": info.loop,
                "run.mode": info.mode,
                "run.mode_note": info.mode_note,
                "run.iterations": info.iterations,
                "run.warmup": info.warmup,
                "run.measured": info.measured,
                "run.stop": info.stop,
                "run.endpoint": info.endpoint,
                "run.variant": info.variant,
                "run.version": info.version,
            }
        )
        return out


def _union_length(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds in the union of ``intervals`` within ``lo``..``hi``."""
    total = 0.0
    for start, end in union(intervals, lo, hi):
        total += end - start
    return total


def measured_iterations(iterations: int, warmup: int) -> list[int]:
    """The iterations a run of ``iterations`` with ``warmup`` dropped measures (see module)."""
    if warmup == 0:
        return list(range(iterations))
    return list(range(warmup, iterations - 1))


def summarize(ex: Execution, info: RunInfo) -> RunResult:
    """Compute :class:`RunResult` from an execution (see module docstring); ``info`` says what
    the run was made with (its ``measured`` count is filled in here)."""
    assert ex.final is not None
    measured = _measured(ex, info.warmup)
    lo, hi, snap_lo, snap_hi = _window(ex, info.warmup, measured)
    count = len(measured)
    window = max(hi - lo, 1e-30)
    records = ex.records[0]
    rows, compute_time, alone, per_iteration = _tally(records, measured)
    busy = snap_hi.compute_busy - snap_lo.compute_busy
    net_util, effective = _network_use(ex, records, snap_lo, snap_hi, lo, hi)
    hbm_compute, hbm_comm = _hbm_bytes(snap_lo, snap_hi)
    comm_time = 0.0
    for k in measured:
        start = ex.iteration_start.get(k, lo)
        comm_time += _union_length(per_iteration[k], start, float("inf"))
    info.measured = count
    bound_by, comm_bound_by = _bound_shares(ex, records, lo, hi, count)
    result = RunResult(
        info=info,
        iteration_time=window / count,
        compute_time=compute_time / count,
        compute_time_alone=alone / count,
        compute_slowdown=compute_time / alone if alone > 0 else 1.0,
        exposed_comm=max(window - busy, 0.0) / count,
        comm_time=comm_time / count,
        net_util=net_util,
        net_util_mean=sum(net_util.values()) / len(net_util) if net_util else 0.0,
        net_util_effective=effective,
        hbm_bw_compute=hbm_compute / window,
        hbm_bw_comm=hbm_comm / window,
        comm_units_held=(snap_hi.units_held_time - snap_lo.units_held_time) / window,
        makespan=ex.makespan,
        bound=max(bound_by, key=lambda k: bound_by[k]) if bound_by else "",
        bound_by=dict(sorted(bound_by.items(), key=lambda kv: -kv[1])),
        comm_bound=next(iter(comm_bound_by), ""),
        comm_bound_by=comm_bound_by,
        layers=[rows[name] for name in rows],
        energy=_energy(ex, snap_lo, snap_hi, count, info.batch_per_npu),
    )
    _check_finite(result)
    return result


def _measured(ex: Execution, warmup: int) -> list[int]:
    """The iterations the run measures; refuses a run that measures none, or whose graph
    lacks an iteration it claims."""
    iters = ex.graph.iterations
    measured = measured_iterations(iters, warmup)
    if not measured:
        raise ValueError(f"{iters} iterations with {warmup} warm-up measure nothing")
    missing = [k for k in range(iters) if k not in ex.iteration_start]
    if missing:
        raise WorkloadError(
            f"the graph says it has {iters} iterations, but no node of iteration {missing[0]} "
            "exists",
            location=ex.graph.name or "graph",
        )
    return measured


def _window(
    ex: Execution, warmup: int, measured: list[int]
) -> tuple[float, float, Snapshot, Snapshot]:
    """The measured window: its start and end (s) and the snapshots there (the whole run
    without warm-up, else from the first measured iteration's start to the next one's)."""
    if warmup == 0:
        assert ex.final is not None
        return 0.0, ex.makespan, ex.snapshots[0], ex.final
    first, last = measured[0], measured[-1] + 1
    return (
        ex.iteration_start[first],
        ex.iteration_start[last],
        ex.snapshots[first],
        ex.snapshots[last],
    )


def _tally(
    records: dict[int, NodeRecord], measured: list[int]
) -> tuple[dict[str, LayerRow], float, float, dict[int, list[tuple[float, float]]]]:
    """Over the measured iterations: per layer, its mean time per pass and its collectives'
    time and bytes per iteration; the compute time in all (s) and alone (s); per iteration,
    its collectives' intervals (s)."""
    count = len(measured)
    wanted = set(measured)
    compute_time = alone = 0.0
    per_iteration: dict[int, list[tuple[float, float]]] = {k: [] for k in measured}
    rows: dict[str, LayerRow] = {}
    for rec in records.values():
        node = rec.node
        if node.iteration not in wanted:
            continue
        row = rows.setdefault(node.layer or node.name, LayerRow(node.layer or node.name))
        if node.kind == "compute":
            compute_time += rec.end - rec.start
            alone += rec.alone
            if node.pass_name in ("fwd", "ig", "wg"):
                setattr(row, node.pass_name, getattr(row, node.pass_name) + rec.end - rec.start)
        elif node.kind == "collective":
            per_iteration[node.iteration].append((rec.start, rec.end))
            row.comm += rec.end - rec.start
            row.comm_bytes += node.size
    for row in rows.values():
        row.fwd /= count
        row.ig /= count
        row.wg /= count
        row.comm /= count
        row.comm_bytes /= count
    return rows, compute_time, alone, per_iteration


def _network_use(
    ex: Execution,
    records: dict[int, NodeRecord],
    snap_lo: Snapshot,
    snap_hi: Snapshot,
    lo: float,
    hi: float,
) -> tuple[dict[str, float], float]:
    """Per network dimension, the share of its egress capacity used over the window ``lo``
    to ``hi`` (s); and the effective utilisation: bytes sent over what the links could carry
    while any collective ran."""
    window = max(hi - lo, 1e-30)
    all_colls = [
        (r.start, r.end)
        for r in records.values()
        if r.node.kind == "collective" and r.end > r.start
    ]
    net_util = {}
    sent_total = peak_total = 0.0
    for d in ex.platform.topology.dimensions:
        if d.size <= 1:
            continue
        sent = snap_hi.egress_bytes[d.index] - snap_lo.egress_bytes[d.index]
        net_util[d.name] = sent / (window * d.egress_bandwidth)
        sent_total += sent
        peak_total += d.egress_bandwidth
    comm_busy = _union_length(all_colls, lo, hi)
    effective = sent_total / (comm_busy * peak_total) if comm_busy > 0 and peak_total > 0 else 0.0
    return net_util, effective


def _hbm_bytes(snap_lo: Snapshot, snap_hi: Snapshot) -> tuple[float, float]:
    """HBM bytes moved between the snapshots by compute and by communication."""
    hbm_total = snap_hi.hbm_bytes - snap_lo.hbm_bytes
    hbm_compute = snap_hi.compute_hbm_bytes - snap_lo.compute_hbm_bytes
    hbm_comm = hbm_total - hbm_compute
    if hbm_comm < 1e-9 * max(hbm_total, 1.0):
        hbm_comm = 0.0  # rounding of two integrals of the same traffic
    return hbm_compute, hbm_comm


def _bound_shares(
    ex: Execution, records: dict[int, NodeRecord], lo: float, hi: float, count: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Per iteration, the time (s) each limit bound the kernels and the collectives over the
    window (nothing when the run did not record bounds)."""
    if ex.bounds is None:
        return {}, {}
    kernels = [
        (r.start, r.end) for r in records.values() if r.node.kind == "compute" and r.end > r.start
    ]
    bound_by = {k: v / count for k, v in attribute(ex.bounds, kernels, lo, hi).items()}
    comm_bound_by = {
        k: v / count for k, v in collective_bounds(ex.bounds, lo, hi, waiting=False).items()
    }
    return bound_by, comm_bound_by


def _energy(
    ex: Execution, lo: Snapshot, hi: Snapshot, count: int, batch: int | None
) -> EnergyResult | None:
    """NPU 0's energy over the window, per iteration and per sample (None without
    ``[npu.power]``)."""
    power = ex.platform.npus[0].config.power
    if power is None or lo.meters is None or hi.meters is None:
        return None
    dims = ex.platform.system.network.dimensions
    energy = energy_result([hi.meters.since(lo.meters)], [power], dims, count)
    if batch:
        energy.per_sample = energy.per_iteration / batch
    return energy


def _check_finite(result: RunResult) -> None:
    """A result with a non-finite number is a model failure, never a normal-looking answer."""
    for name, value in result.metrics().items():
        if isinstance(value, float) and not math.isfinite(value):
            raise SimulationError(
                f"{result.info.workload} on {result.info.system} ({result.info.endpoint}): "
                f"{name} is {value} (a latency, size or time beyond what the model can "
                "represent; check the system's latencies and bandwidths)"
            )
