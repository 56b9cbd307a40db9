"""Small data-parallel workloads for tests: layers of one compute kernel forward and one weight
gradient, each gradient all-reduced."""

from __future__ import annotations

from acesim.workload.model import Comm, Compute, Layer, Pass, Workload


def graded_layers(grads: list[float], duration: float) -> Workload:
    """One layer per gradient size (bytes), every compute ``duration`` s long."""
    return comm_layers([Comm("all-reduce", grad) for grad in grads], duration)


def comm_layers(comms: list[Comm], duration: float, name: str = "dp") -> Workload:
    """One layer per weight-gradient collective of ``comms``, every compute ``duration`` s
    long."""
    return compute_layers(comms, Compute(duration=duration), name)


def compute_layers(comms: list[Comm], compute: Compute, name: str = "dp") -> Workload:
    """One layer per weight-gradient collective of ``comms``, every pass ``compute``."""
    return Workload(
        name,
        tuple(
            Layer(
                f"l{i}",
                forward=Pass(compute),
                weight_grad=Pass(compute, comm),
            )
            for i, comm in enumerate(comms)
        ),
    )
