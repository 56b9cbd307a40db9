"""What an LLM training iteration did: throughput, MFU, the pipeline bubble, exposed
communication by kind, memory.

From an :class:`~acesim.training.executor.Execution` of a pipeline graph
(:mod:`acesim.training.pipeline`), every rank simulated or one per class (class mode: every
class has as many ranks, so means over the simulated ranks are means over all ranks):

* ``iteration_time``: the whole run over its iterations (one iteration: from the start to the
  last rank's last node, the pipeline flush and the optimizer step included) (s);
* ``tokens_per_s_per_gpu``: global batch x sequence / (iteration time x GPUs);
* ``mfu``: model FLOPs (:func:`~acesim.workload.llm.models.model_flops`, Megatron's count) per
  iteration / (iteration time x GPUs x the NPU's dense matrix peak in the recipe's math dtype);
* per rank, the time its compute stream is idle, split by what it waits for, in this order: a
  TP collective in flight (``tp``); a CP exchange (``cp``); an EP all-to-all (``ep``); a
  receive whose message is on its way (``pp``, from the moment the sender sent it); a receive
  whose sender has not sent yet (waiting for the other stage to compute: bubble); a DP
  collective in flight (``dp``); in a run that offloads, a host-side node in flight (a copy
  over the host link or the CPU's optimizer step: ``offload``, a key only such runs carry).
  The rest of the idle time is the pipeline ``bubble``
  (waiting for other stages, the flush). Figures are means over ranks per iteration, the
  bubble also as a fraction of the iteration; with no communication the bubble is all of the
  idle time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..intervals import (
    complement_arrays,
    difference_arrays,
    intersection_arrays,
    length,
    pairs_array,
    union_arrays,
    union_with,
)
from ..training.executor import Execution, NodeRecord
from ..training.pipeline import COMM_KINDS, comm_kind
from ..units import format_size, format_time
from ..version import __version__
from ..workload.llm.memory import TERMS
from .energy import EnergyResult, energy_rows
from .protocol import Table, document, system_title, without

__all__ = ["LlmResult", "POINT_INPUTS", "idle_breakdown", "rank_compute_times", "SCHEMA"]

SCHEMA = "acesim.llm/1"

#: What an LLM run was (its inputs), echoed once by a comparison.
_CASE = (
    "model", "system", "npus", "parallel", "schedule", "precision", "global_batch",
    "micro_batch", "seq", "micro_batches", "iterations", "mode", "version",
)  # fmt: skip
#: The LLM sweep point's inputs that the result echoes (the sweep point's parameters begin so)
POINT_INPUTS = ("model", "parallel", "global_batch", "micro_batch", "seq", "precision")
#: What a sweep row leaves out: the point's inputs and the document's frame
_POINT_ECHO = (*POINT_INPUTS, "schema", "provenance")

#: Attribution order of an idle instant: TP collectives, point-to-point transfers in flight,
#: waiting for a peer stage that has not sent yet (bubble), DP collectives.
_ORDER = ("tp", "cp", "ep", "pp", "peer", "dp", "offload", "host")


@dataclass
class LlmResult:
    """One LLM training run's figures (times in s, bytes, fractions 0..1; the
    :class:`~acesim.results.protocol.Result` protocol).

    ``bound_by``: rank 0's seconds by what bound them over the run
    (:func:`~acesim.training.bounds.attribute`), largest first; ``comm_bound_by``: what bound
    its communication, hidden or exposed (:func:`~acesim.training.bounds.collective_bounds`).
    """

    kind: ClassVar[str] = "llm"
    gains: ClassVar[dict[str, str]] = {}

    model: str
    system: str
    npus: int
    parallel: str
    schedule: str
    precision: str
    global_batch: int
    micro_batch: int
    seq: int
    micro_batches: int
    iterations: int
    iteration_time: float
    tokens_per_s_per_gpu: float
    mfu: float
    mfu_dtype: str
    compute_time: float
    bubble_time: float
    bubble_fraction: float
    exposed: dict[str, float]
    memory: dict[str, float]
    memory_stage: int
    hbm_capacity: float
    endpoint: str
    mode: str = "exact"
    #: the strategy's reason (:func:`acesim.training.strategy.mode_note`; "" when none)
    mode_note: str = ""
    notes: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    #: energy per iteration and per token, average power (acesim.results.energy); None: the
    #: NPU has no power model ([npu.power])
    energy: EnergyResult | None = None
    variant: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    bound_by: dict[str, float] = field(default_factory=dict)
    comm_bound_by: dict[str, float] = field(default_factory=dict)
    #: how the system was made (:meth:`acesim.config.provenance.Provenance.to_dict`)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the endpoint kind had nothing to do in this run (none of the operations it offloads):
    #: why its figures are the SM endpoint's (:meth:`~acesim.hardware.endpoints.EndpointKind.
    #: idle_note`); "" when it had work
    idle_note: str = ""
    version: str = __version__
    #: per pipeline stage: its transformer layers, whether it holds the embedding and the
    #: loss, its compute and idle time per GPU and iteration (s) and memory per GPU (bytes)
    stages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def figure(self) -> float:
        """The figure of merit: the iteration time (s)."""
        return self.iteration_time

    @property
    def bound(self) -> str:
        return next(iter(self.bound_by), "")

    @property
    def comm_bound(self) -> str:
        return next(iter(self.comm_bound_by), "")

    def to_dict(self) -> dict[str, Any]:
        return document(self, SCHEMA)

    def case(self) -> dict[str, Any]:
        """What the run was (model, system, parallel configuration, batch, mode)."""
        data = asdict(self)
        return {k: data[k] for k in _CASE}

    def metrics(self) -> dict[str, Any]:
        """The figures as a sweep row (the configuration echoed by the point is left out)."""
        data = self.to_dict()
        data["parallel_resolved"] = data["parallel"]
        return without(data, _POINT_ECHO)

    def describe(self) -> str:
        return (
            f"{self.model} on {system_title(self.system, self.provenance)}: {self.npus} GPUs, "
            f"{self.parallel}, "
            f"{self.schedule} schedule, {self.precision}, global batch {self.global_batch} x "
            f"{self.seq} tokens, micro-batch {self.micro_batch} ({self.micro_batches} per "
            f"pipeline), {self.mode} mode"
        )

    def rows(self) -> list[tuple[str, str]]:
        """The headline figures as (metric, text) rows (exposed CP and EP communication
        only where the configuration has such parallelism)."""
        rows = [
            ("iteration time", format_time(self.iteration_time)),
            ("tokens/s/GPU", f"{self.tokens_per_s_per_gpu:,.0f}"),
            (f"MFU ({self.mfu_dtype} peak)", f"{100 * self.mfu:.1f}%"),
            ("compute (mean per GPU)", format_time(self.compute_time)),
            (
                "pipeline bubble",
                f"{format_time(self.bubble_time)} ({100 * self.bubble_fraction:.1f}%)",
            ),
        ]
        for kind, seconds in self.exposed.items():
            if kind == "offload":
                rows.append(("exposed offload (host link, CPU)", format_time(seconds)))
            elif kind == "host":  # the host issuing launches (acesim.training.host)
                rows.append(("exposed host launches", format_time(seconds)))
            elif kind not in ("cp", "ep") or self.parallel_sizes.get(kind, 1) > 1:
                rows.append((f"exposed {kind.upper()} comm", format_time(seconds)))
        return rows + energy_rows(self.energy)

    @property
    def parallel_sizes(self) -> dict[str, int]:
        """The sizes in :attr:`parallel` (``tp=4,pp=2,...``) that are whole numbers."""
        out = {}
        for item in self.parallel.split(","):
            key, _, value = item.partition("=")
            if value.isdigit():
                out[key] = int(value)
        return out

    def tables(self) -> list[Table]:
        """Memory per GPU (the largest pipeline stage's)."""
        rows: list[tuple[str, ...]] = [
            (term, format_size(self.memory[term])) for term in (*TERMS, "total")
        ]
        rows.append(("HBM capacity", format_size(self.hbm_capacity)))
        title = f"memory per GPU (largest: pipeline stage {self.memory_stage})"
        tables = [Table(title, ("term", "bytes"), rows)]
        if len(self.stages) > 1:
            tables.append(self._stage_table())
        return tables

    def _stage_table(self) -> Table:
        """Each pipeline stage's layers, compute and idle time, memory (uneven stages), and
        with every GPU simulated its slowest GPU's compute time."""
        exact = any(row.get("slowest_npu") is not None for row in self.stages)
        rows: list[tuple[str, ...]] = []
        for row in self.stages:
            held = [str(row["layers"])]
            held += [
                part for part, on in (("embedding", row["embedding"]), ("loss", row["loss"])) if on
            ]
            cells = [
                str(row["stage"]),
                " + ".join(held),
                format_time(row["compute_time"]),
                format_time(row["idle_time"]),
                format_size(row["memory"]),
            ]
            if exact:
                cells.append(f"npu{row['slowest_npu']}: {format_time(row['slowest_compute'])}")
            rows.append(tuple(cells))
        columns = ("stage", "layers", "compute", "idle", "memory") + ("slowest GPU",) * exact
        return Table("pipeline stages (per GPU, one iteration)", columns, rows)

    def slowest_note(self) -> str:
        """The slowest GPU of a run with every GPU simulated and what it does to the
        pipeline ("" in class mode)."""
        timed = [r for r in self.stages if r.get("slowest_npu") is not None]
        if not timed:
            return ""
        row = max(timed, key=lambda r: r["slowest_compute"])
        mean = sum(r["compute_time"] for r in self.stages) / len(self.stages)
        return (
            f"slowest GPU: npu{row['slowest_npu']} ({row['slowest_type']}, pipeline stage "
            f"{row['stage']}) computes {format_time(row['slowest_compute'])} an iteration, "
            f"{row['slowest_compute'] / mean:.2f}x the mean GPU's {format_time(mean)}; its "
            "stage's TP/CP peers and the other stages wait for it (the stage table's idle "
            f"column; the pipeline bubble is {100 * self.bubble_fraction:.1f}% of the "
            "iteration)"
        )

    def footnotes(self) -> list[str]:
        notes = [self.mode_note] if self.mode_note else []
        slowest = self.slowest_note()
        notes += [slowest] * bool(slowest)
        notes += [self.idle_note] if self.idle_note else []
        return notes + [f"model: {note}" for note in self.notes]


Intervals = list[tuple[float, float]]


def idle_breakdown(ex: Execution) -> tuple[float, float, dict[str, float]]:
    """(compute time, bubble, exposed communication by kind), each summed over ranks (s)."""
    sends: dict[tuple[int, int, int], list[float]] = {}
    # each rank's records by what they explain, read in one pass (:func:`_rank_waits`)
    ranks = [_rank_waits(rank, records, sends) for rank, records in enumerate(ex.records)]
    for starts in sends.values():
        starts.sort()
    lo, hi = 0.0, ex.makespan
    compute = bubble = 0.0
    exposed = dict.fromkeys(COMM_KINDS, 0.0)
    for rank, (busy, waits, recvs, seen) in enumerate(ranks):
        for kind in seen:  # offload or host copies among its records
            exposed.setdefault(kind, 0.0)
        added = _added(ex, rank)
        for kind in added:
            if kind in ("offload", "host"):
                exposed.setdefault(kind, 0.0)
        if recvs:  # its receives' waits, as arrays beside the added spans
            pp, peer = _recv_waits(recvs, sends)
            added.setdefault("pp", []).append(pp)
            added.setdefault("peer", []).append(peer)
        busy_u = _union(busy, added.get("compute", []))
        compute += length(busy_u)
        idle = complement_arrays(busy_u, lo, hi)
        left = idle  # idle time no kind before this one explained
        comm = 0.0
        for kind in _ORDER:
            waited, spans = waits[kind], added.get(kind)
            if not waited and not spans:
                continue  # none of this kind: it explains nothing (adds 0 below)
            part = intersection_arrays(left, _union(waited, spans or []))
            if len(part[0]):
                left = difference_arrays(left, part)
            if kind in exposed:
                gap = length(part)
                exposed[kind] += gap
                comm += gap
        bubble += length(idle) - comm
    return compute, bubble, exposed


def _rank_waits(
    rank: int,
    records: dict[int, NodeRecord],
    sends: dict[tuple[int, int, int], list[float]],
) -> tuple[
    Intervals, dict[str, Intervals], dict[tuple[int, int, int], list[NodeRecord]], list[str]
]:
    """``rank``'s compute intervals, waits by kind, receives by (peer, rank, tag) and the
    kinds ``offload`` and ``host`` in the order its records first show them; its sends'
    starts added to ``sends`` by (rank, peer, tag)."""
    busy: Intervals = []
    waits: dict[str, Intervals] = {k: [] for k in _ORDER}
    recvs: dict[tuple[int, int, int], list[NodeRecord]] = {}
    seen: list[str] = []
    for rec in records.values():
        node = rec.node
        kind = node.kind
        if kind == "pass":
            continue
        if kind == "compute":
            if rec.end > rec.start:
                busy.append((rec.start, rec.end))
        elif kind == "send":
            if node.peer is not None:
                sends.setdefault((rank, node.peer, node.tag), []).append(rec.start)
        elif kind == "collective":
            waits.setdefault(comm_kind(node) or "other", []).append((rec.start, rec.end))
        elif kind == "recv" and node.peer is not None:
            recvs.setdefault((node.peer, rank, node.tag), []).append(rec)
        elif kind == "host_copy":
            waits["offload"].append((rec.start, rec.end))
            if "offload" not in seen:
                seen.append("offload")
        elif kind == "host":  # the host issuing launches (acesim.training.host)
            waits["host"].append((rec.start, rec.end))
            if "host" not in seen:
                seen.append("host")
    return busy, waits, recvs, seen


def _recv_waits(
    recvs: dict[tuple[int, int, int], list[NodeRecord]],
    sends: dict[tuple[int, int, int], list[float]],
) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """A rank's receives' waits as arrays of starts and ends (s): ``pp`` from the later of
    the receive's start and its message's send to its end, ``peer`` from its start to the
    earlier of that send and its end (a tag's receives by their end matched with its sends
    by their start, ``sends`` sorted; a receive with no send: sent at its start)."""
    begin: list[float] = []
    end: list[float] = []
    sent: list[float] = []
    for key, recs in recvs.items():
        starts = sends.get(key, ())
        if len(recs) == 1:  # (the one receive of its tag: the first send's)
            rec = recs[0]
            begin.append(rec.start)
            end.append(rec.end)
            sent.append(starts[0] if starts else rec.start)
            continue
        for k, rec in enumerate(sorted(recs, key=lambda r: r.end)):
            begin.append(rec.start)
            end.append(rec.end)
            sent.append(starts[k] if k < len(starts) else rec.start)
    b, e, s = np.array(begin, dtype=float), np.array(end, dtype=float), np.array(sent, dtype=float)
    return (np.maximum(b, s), e), (b, np.minimum(s, e))


def _union(intervals: Intervals, added: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The union of ``intervals`` and the ``added`` spans (arrays of starts and ends, s), as
    arrays of starts and ends (:func:`~acesim.intervals.union_arrays`)."""
    pairs = pairs_array(intervals)
    starts = np.concatenate([pairs[:, 0], *(lo for lo, _ in added)])
    ends = np.concatenate([pairs[:, 1], *(hi for _, hi in added)])
    return union_arrays(starts, ends)


def rank_compute_times(ex: Execution) -> list[float]:
    """Each simulated rank's compute time per iteration (s): the union of its compute nodes'
    intervals."""
    iterations = max(ex.graph.iterations, 1)
    out = []
    for rank, records in enumerate(ex.records):
        busy = [(r.start, r.end) for r in records.values() if r.node.kind == "compute"]
        added = [(lo, hi) for _, lo, hi in ex.spans(rank, "compute")]
        out.append(length(_union(busy, added)) / iterations)
    return out


def compute_spans(ex: Execution, rank: int, busy: Intervals) -> Intervals:
    """The union of ``busy`` (``rank``'s compute records' intervals, s) and its added compute
    spans (a composed run's timed passes: :attr:`Execution.added_spans`)."""
    return union_with(busy, [(lo, hi) for _, lo, hi in ex.spans(rank, "compute")])


def _added(ex: Execution, rank: int) -> dict[str, list[tuple[Any, Any]]]:
    """``rank``'s added spans (:attr:`Execution.added_spans`) by what :func:`idle_breakdown`
    reads them as: ``compute``, or the kind of the wait they explain."""
    out: dict[str, list[tuple[Any, Any]]] = {}
    for node, lo, hi in ex.added_spans[rank] if rank < len(ex.added_spans) else []:
        if node.kind == "compute":
            kind = "compute"
        elif node.kind == "collective":
            kind = comm_kind(node) or "other"
        elif node.kind in ("host_copy", "host"):
            kind = "offload" if node.kind == "host_copy" else "host"
        else:
            continue
        out.setdefault(kind, []).append((lo, hi))
    return out
