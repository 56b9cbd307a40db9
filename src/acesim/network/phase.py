"""A phase of a collective chunk, and the lanes of phases that cross several dimensions at once.

A phase is an operation on one axis of a communicator group, run as steps
(:mod:`acesim.network.algorithms`). Two kinds of phase run over several axes at once, each
step's bytes split over *lanes* (one message per lane, on the lane's dimension):

* NCCL's flat ring across nodes (``flat_ring``): every step's bytes go partly over NVLink,
  partly over the GPU's NIC (:func:`acesim.network.plan.flat_ring_lanes`); its messages are
  delivered with the inner dimension's delay, its node crossings' extra paid once.
* a *pipelined* phase (``pipelined = True``; :mod:`acesim.network.pipelined`): NCCL's TREE,
  NVLS_TREE, CollNet and NVLS with SHARP, whose in-node and between-node parts run at once on
  successive pieces of the buffer. Each lane carries its own step kind (what the endpoints
  charge: an NVLS load-reduce on NVLink, a tree's reduce on the NIC), its messages are
  delivered with its own dimension's delay, and the path's latency (NCCL's formula) is paid
  once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .repeats import Repeats
from .step import Step
from .sums import add_repeatedly

__all__ = ["Lane", "Phase"]


@dataclass(frozen=True)
class Lane:
    """One dimension a multi-dimension phase's messages cross: its axis, the fraction of every
    step's bytes that goes along it (to the next member on that axis) and, for pipelined
    phases, the step kind its bytes are charged as (None: the step's own)."""

    dim: int
    size: int
    stride: int
    fraction: float
    kind: str | None = None


@dataclass(frozen=True)
class Phase:
    """One phase of a chunk: an operation on one axis of the group.

    ``size`` is the group's members along the dimension, ``stride`` their coordinate distance.
    A flat-ring phase (``lanes`` not empty, not ``pipelined``) runs over every axis of the
    group at once: ``size`` is all its members, ``dim`` and ``stride`` its innermost axis's
    (where it queues), and each step's bytes are split over ``lanes`` (one message per lane).
    A pipelined phase (``pipelined``) likewise sends on every lane at once, each lane's
    share of the step's bytes charged as the lane's kind; ``dim``, ``size`` and ``stride`` are
    its node axis's (where it queues and whose NVLS loops it runs).

    ``steps`` are kept as runs of repeats (:class:`~acesim.network.repeats.Repeats`; any
    sequence given is converted), so what is computed from them costs one operation per run.
    """

    dim: int
    op: str
    algorithm: str
    data_bytes: float
    steps: Repeats[Step]
    size: int = 1
    stride: int = 1
    lanes: tuple[Lane, ...] = ()
    pipelined: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.steps, Repeats):
            steps: Sequence[Step] = self.steps
            object.__setattr__(self, "steps", Repeats.of(steps))

    def message_count(self, step: Step) -> int:
        """Messages one NPU sends (and receives) in ``step``."""
        return len(self.lanes) if self.lanes else step.message_count(self.size)

    @property
    def messages(self) -> int:
        """Messages one NPU sends in this phase (every step's)."""
        return sum(self.message_count(step) * count for step, count in self.steps.runs)

    @property
    def bytes_sent(self) -> float:
        """Network bytes one NPU sends in this phase (the steps' bytes added one step after
        another, as a sum over the steps would: :func:`~acesim.network.sums.add_repeatedly`
        per run)."""
        total = 0.0
        if self.lanes:
            share = sum(lane.fraction for lane in self.lanes) if self.pipelined else 1.0
            for s, count in self.steps.runs:
                total = add_repeatedly(total, s.message_bytes, count)
            return total * share
        for s, count in self.steps.runs:
            total = add_repeatedly(total, s.message_bytes * s.message_count(self.size), count)
        return total

    def lane_kind(self, lane: Lane, step: Step) -> str:
        """The step kind ``lane``'s bytes of ``step`` are charged as."""
        return step.kind if lane.kind is None else lane.kind

    @property
    def kinds(self) -> frozenset[str]:
        """The step kinds this phase's bytes are charged as (its lanes' for pipelined
        phases)."""
        kinds = {s.kind for s, _count in self.steps.runs}
        if self.pipelined:
            kinds = {self.lane_kind(lane, s) for lane in self.lanes for s, _n in self.steps.runs}
        return frozenset(kinds)
