"""Decomposition of a collective over dimensions into phases (hierarchical or per-dimension).

Hierarchical (ASTRA-sim's "localBWAware"): all-reduce = reduce-scatter along dimensions
1..N-1 (the data shrinks by each size), all-reduce on dimension N, all-gather back along
N-1..1. Reduce-scatter: reduce-scatter on 1..N. All-gather: all-gather on N..1 (the output
grows from the outermost dimension inwards, so the local dimension carries the largest data).
All-to-all: all-to-all along each dimension in turn with the whole buffer (data is routed one
dimension at a time).

Per-dimension ("flat") all-reduce: a full-size all-reduce on every dimension in turn. For the
other operations the per-dimension composition is the hierarchical one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.system import CollectiveConfig
from ..errors import TopologyError
from .algorithms import Step, check_algorithm, phase_steps
from .topology import Topology


@dataclass(frozen=True)
class Phase:
    """One phase of a chunk: an operation on one dimension."""

    dim: int
    op: str
    algorithm: str
    data_bytes: float
    steps: tuple[Step, ...]
    size: int = 1

    @property
    def bytes_sent(self) -> float:
        """Network bytes one NPU sends in this phase."""
        return sum(s.message_bytes * s.message_count(self.size) for s in self.steps)


def algorithm_for(cfg: CollectiveConfig, topology: Topology, op: str, dim: int) -> str:
    """The configured algorithm of ``op`` on dimension ``dim`` (with defaults)."""
    choice = cfg.algorithms.get(op)  # type: ignore[call-overload]
    d = topology.dimensions[dim]
    if choice is None:
        if op == "all-to-all" and d.kind != "ring":
            return "direct"
        return "ring"
    if isinstance(choice, list):
        if len(choice) != len(topology.dimensions):
            raise TopologyError(
                f"collective.algorithms.{op}: must name one algorithm per dimension "
                f"({len(topology.dimensions)}), got {len(choice)}"
            )
        return str(choice[dim])
    return str(choice)


def validate_algorithms(cfg: CollectiveConfig, topology: Topology) -> None:
    """Elaboration check: every operation can be planned on every dimension as configured."""
    dims = tuple(range(len(topology.dimensions)))
    for op in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all"):
        build_phases(cfg, topology, op, 1.0, dims)


def build_phases(
    cfg: CollectiveConfig, topology: Topology, op: str, size: float, dims: tuple[int, ...]
) -> list[Phase]:
    """The phases one chunk of ``size`` bytes goes through (see module docstring)."""
    active = [d for d in dims if topology.dimensions[d].size > 1]
    phases: list[Phase] = []

    def add(dim: int, phase_op: str, data: float, algo_op: str | None = None) -> None:
        algo = algorithm_for(cfg, topology, algo_op or phase_op, dim)
        if algo == "double_binary_tree" and phase_op != "all-reduce":
            algo = "ring"  # trees run only the all-reduce phase of a hierarchical all-reduce
        d = topology.dimensions[dim]
        check_algorithm(algo, phase_op, d.kind, d.size, f"collective.algorithms.{algo_op or op}")
        steps = tuple(phase_steps(phase_op, algo, d.size, data))
        phases.append(Phase(dim, phase_op, algo, data, steps, d.size))

    if not active:
        return phases
    if op == "all-reduce":
        if cfg.composition == "per_dimension":
            for d in active:
                add(d, "all-reduce", size)
            return phases
        data = size
        for d in active[:-1]:
            add(d, "reduce-scatter", data, "all-reduce")
            data /= topology.dimensions[d].size
        add(active[-1], "all-reduce", data)
        for d in reversed(active[:-1]):
            data *= topology.dimensions[d].size
            add(d, "all-gather", data, "all-reduce")
        return phases
    if op == "reduce-scatter":
        data = size
        for d in active:
            add(d, "reduce-scatter", data)
            data /= topology.dimensions[d].size
        return phases
    if op == "all-gather":
        total = 1
        for d in active:
            total *= topology.dimensions[d].size
        data = size / total
        for d in reversed(active):
            data *= topology.dimensions[d].size
            add(d, "all-gather", data)
        return phases
    if op == "all-to-all":
        for d in active:
            add(d, "all-to-all", size)
        return phases
    raise TopologyError(f"unknown collective {op!r}")  # pragma: no cover
