"""The bound listener of a jobs run (:mod:`acesim.runs.jobs`): each job's kernels and
messages to that job's :class:`~acesim.training.bounds.BoundRecorder`, every message to the
job's intervals per bounding resource (read by :mod:`acesim.results.jobs`). Compiled where
the event path is (a subclass of a compiled class is compiled with it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engine import Resource
from ..intervals import Times
from ..sums import Ladder
from .bounds import BoundRecorder

__all__ = ["JobsRecorder"]


class JobsRecorder(BoundRecorder):
    """The bound listener of a jobs run: track kinds ``kernel:<job>`` and ``message:<job>``
    (a job's representative NPU) go to that job's :class:`BoundRecorder`; every message
    (``flow:<job>`` from its other NPUs too) to the job's intervals per bounding resource."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, BoundRecorder] = {}
        #: job -> resource name -> (start, end) of its messages that resource bound
        self.flows: dict[str, dict[str, list[tuple[float, float]]]] = {}

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None:
        what, _, job = kind.partition(":")
        if not job:  # untagged (an endpoint's own NPU-0 activities)
            super().segment(kind, bound, start, end)
            return
        if what in ("kernel", "message"):
            self.jobs.setdefault(job, BoundRecorder()).segment(what, bound, start, end)
        if what != "kernel" and isinstance(bound, Resource):
            flows = self.flows.setdefault(job, {})
            flows.setdefault(bound.name, []).append((start, end))

    def repeated(self, kind: str, bound: Any, start: float, end: float, count: int) -> None:
        for _ in range(count):
            self.segment(kind, bound, start, end)

    def ladders(self, kind: str, bound: Any, ladders: Sequence[Ladder]) -> None:
        for ladder in ladders:
            self.spans(kind, bound, ladder.starts(), ladder.ends())

    def spans(self, kind: str, bound: Any, starts: Times, ends: Times) -> None:
        for start, end in zip(starts, ends, strict=True):
            start, end = float(start), float(end)
            if end > start:
                self.segment(kind, bound, start, end)
