"""``zb-v``: the zero-bubble V schedule (Qi et al., "Zero Bubble Pipeline Parallelism",
arXiv 2401.10241 v2, section 6; PyTorch's ``ScheduleZBVZeroBubble`` in
``torch/distributed/pipelining/schedules.py``).

Each rank holds two model chunks in a V: chunk 0 of stage ``s`` is virtual stage ``s``, chunk 1
is ``2 p - 1 - s``, so the first stage holds both ends of the model and the last stage turns
the V without sending anything. Per stage ``s`` (``n = max(2 p - 1, m)`` micro-batches
planned, the ops of those past ``m`` dropped):

1. ``2 (p - s) - 1`` forwards of chunk 0; then ``s`` times a forward of chunk 1 and one of
   chunk 0; then ``p - s`` times (F, B, W) of chunk 1;
2. steady state, while chunk 0 has forwards left or chunk 1 lags it: (F of chunk 0 while any
   are left), B and W of chunk 0, then F, B and W of chunk 1;
3. cool-down: ``s`` times B of chunk 0 and B of chunk 1 (their Ws deferred), ``p - s`` times
   B of chunk 0 with the oldest pending W of chunk 0, then the pending Ws of chunk 1 and of
   chunk 0.

Closed form (the paper's, balanced case): with equal forward, input-gradient and
weight-gradient times per chunk (``T_F = T_B = T_W``) no bubble (each stage busy from its first
op to its last; the stages start ``T_F`` apart as every pipeline's do); activation memory
``2 p`` chunks' micro-batches on every stage, 1F1B's first-stage peak ``p M_B`` with chunks of
half a stage. With unequal times the fixed order leaves ``(p - 1)(T_F + T_B - T_W)`` (simulated;
the paper's automatic scheduler would reorder).
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import Op, PipelineSchedule, v_stage

__all__ = ["SCHEDULE", "zb_v"]


class _Counts:
    """Next micro-batch of each (kind, chunk), and the ops so far."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.ops: list[Op] = []

    def add(self, kind: str, chunk: int) -> None:
        i = self.next.get((kind, chunk), 0)
        self.ops.append(Op(kind, chunk, i))  # type: ignore[arg-type]
        self.next[(kind, chunk)] = i + 1

    def count(self, kind: str, chunk: int) -> int:
        return self.next.get((kind, chunk), 0)


def zb_v(stages: int, stage: int, micro: int, chunks: int = 2) -> list[Op]:
    """The stage's ops (module docstring)."""
    if chunks != 2:
        raise ConfigError("parallel.vpp", "zb-v runs two model chunks per rank: give vpp=2", chunks)
    p, s = stages, stage
    n = max(2 * p - 1, micro)
    c = _Counts()
    for _ in range(2 * (p - s) - 1):
        c.add("F", 0)
    for _ in range(s):
        c.add("F", 1)
        c.add("F", 0)
    for _ in range(p - s):
        for kind in "FBW":
            c.add(kind, 1)
    while c.count("F", 1) < c.count("F", 0) or c.count("F", 0) < n:
        if c.count("F", 0) < n:
            c.add("F", 0)
        c.add("B", 0)
        c.add("W", 0)
        for kind in "FBW":
            c.add(kind, 1)
    for _ in range(s):
        c.add("B", 0)
        c.add("B", 1)
    for _ in range(p - s):
        c.add("B", 0)
        c.add("W", 0)
    while c.count("W", 1) < c.count("B", 1):
        c.add("W", 1)
    while c.count("W", 0) < c.count("B", 0):
        c.add("W", 0)
    return [op for op in c.ops if op.micro < micro]


SCHEDULE = PipelineSchedule(
    "zb-v",
    "zero bubble in a V of two chunks per rank, 1F1B's memory (Qi et al.)",
    zb_v,
    source="Qi et al., arXiv 2401.10241 section 6 (ZB-V); torch.distributed.pipelining "
    "ScheduleZBVZeroBubble",
    virtual_stage=v_stage,
    vpp=2,
)
