"""Does a case fit in HBM? The workload's per-NPU footprint against ``npu.hbm_capacity``.

The footprint (:func:`acesim.workload.footprint.footprint`: weights, gradients, optimizer state
with master weights, activations kept for the backward pass) is known for workloads that
describe their tensors (the zoo); an ASTRA-sim text file or a Chakra trace gives none, and is
not checked. A case that does not fit is refused before it runs, with every term named.
"""

from __future__ import annotations

from ..config.system import SystemConfig
from ..errors import ConfigError
from ..units import format_size
from ..workload.footprint import footprint
from ..workload.graph import Graph
from ..workload.model import Workload

__all__ = ["check_footprint"]

#: Terms of the footprint, in the order the message names them.
TERMS = ("weights", "gradients", "optimizer", "activations")


def check_footprint(workload: Workload | Graph, system: SystemConfig) -> dict[str, float] | None:
    """The per-NPU footprint (bytes) of ``workload`` on ``system``, or None when the workload
    does not describe its tensors; ConfigError naming the sizes when it exceeds HBM."""
    if isinstance(workload, Graph) or workload.precision is None:
        return None
    sizes = footprint(workload, npus=system.network.total_npus)
    capacity = system.npu.hbm_capacity
    if sizes["total"] > capacity:
        parts = ", ".join(f"{t} {format_size(sizes[t])}" for t in TERMS)
        batch = f" at {workload.batch_per_npu} per NPU" if workload.batch_per_npu else ""
        raise ConfigError(
            "npu.hbm_capacity",
            f"{workload.name}{batch} ({workload.precision}) needs {format_size(sizes['total'])} "
            f"per NPU ({parts}), more than the {format_size(capacity)} of HBM; use a smaller "
            "batch or an NPU with more memory",
        )
    return sizes
