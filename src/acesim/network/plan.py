"""The phases one chunk of a collective goes through on its group's axes.

The operation (:mod:`acesim.network.ops`) says which phase runs on which axis with how much
data; the configured algorithm of each (operation, dimension) (:mod:`acesim.network.algorithms`)
turns a phase into steps. ``double_binary_tree`` runs only the all-reduce phase of a
hierarchical all-reduce; its reduce-scatter and all-gather phases use ``ring``. So does
``nvls`` (in-switch reduction, all-reduce on a switch dimension only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config.system import CollectiveConfig
from ..errors import TopologyError
from .algorithms import Step, check_algorithm, phase_steps
from .group import Axis
from .ops import COLLECTIVE_OPS
from .topology import Topology


@dataclass(frozen=True)
class Phase:
    """One phase of a chunk: an operation on one axis of the group.

    ``size`` is the group's members along the dimension, ``stride`` their coordinate distance.
    """

    dim: int
    op: str
    algorithm: str
    data_bytes: float
    steps: tuple[Step, ...]
    size: int = 1
    stride: int = 1

    @property
    def bytes_sent(self) -> float:
        """Network bytes one NPU sends in this phase."""
        return sum(s.message_bytes * s.message_count(self.size) for s in self.steps)


def algorithm_for(cfg: CollectiveConfig, topology: Topology, op: str, dim: int) -> str:
    """The configured algorithm of ``op`` on dimension ``dim`` (with defaults)."""
    choice = cfg.algorithms.get(op)
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
    """Elaboration check: the configured operations exist, and every operation can be planned
    on every dimension as configured."""
    for op in cfg.algorithms:
        COLLECTIVE_OPS.get(op, f"collective.algorithms.{op}")
    axes = tuple(Axis(d.index, d.size) for d in topology.dimensions if d.size > 1)
    for op in COLLECTIVE_OPS:
        build_phases(cfg, topology, op, 1.0, axes)


def build_phases(
    cfg: CollectiveConfig, topology: Topology, op: str, size: float, axes: Sequence[Axis]
) -> list[Phase]:
    """The phases one chunk of ``size`` bytes goes through on ``axes`` (see module)."""
    spec = COLLECTIVE_OPS.get(op)
    phases: list[Phase] = []

    def add(index: int, phase_op: str, data: float, algo_op: str) -> None:
        axis = axes[index]
        algo = algorithm_for(cfg, topology, algo_op, axis.dim)
        if algo == "double_binary_tree" and phase_op != "all-reduce":
            algo = "ring"  # trees run only the all-reduce phase of a hierarchical all-reduce
        if algo == "nvls" and algo_op == "all-reduce" and phase_op != "all-reduce":
            algo = "ring"  # so does NVLS; chosen for another operation, it is refused below
        d = topology.dimensions[axis.dim]
        check_algorithm(algo, phase_op, d.kind, axis.size, f"collective.algorithms.{algo_op}")
        steps = tuple(phase_steps(phase_op, algo, axis.size, data))
        phases.append(Phase(axis.dim, phase_op, algo, data, steps, axis.size, axis.stride))

    if axes:
        spec.compose(add, [a.size for a in axes], size, cfg.composition)
    return phases
