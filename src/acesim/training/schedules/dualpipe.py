"""``dualpipe``: DeepSeek's bidirectional pipeline (DeepSeek-AI, "DeepSeek-V3 Technical
Report", arXiv 2412.19437, section 3.2.1 and table 2; deepseek-ai/DualPipe,
``dualpipe/dualpipe.py``).

Two pipelines run in opposite directions over the same ``p`` ranks (``p`` even): each rank
holds a chunk of each (chunk 0: virtual stage ``s`` of the chain fed at rank 0; chunk 1:
position ``p - 1 - s`` of the chain fed at rank ``p - 1``), each chain holds the whole model
(two copies of the parameters, their gradients summed between the two ranks holding the same
layers) and takes half the ``m`` micro-batches. A rank and its mirror ``p - 1 - s`` run the
same program (:func:`dual_program`) with the two chains swapped; in it ``P`` is the ranks of a
half (``p / 2``), ``r = min(s, p - 1 - s)`` and ``M = m / 2`` the micro-batches of a chain;
phase 0 is the chain in which the rank sits ``r`` stages from the start:

1. ``2 (P - r - 1)`` forwards of phase 0; ``r + 1`` times a forward of phase 0 and one of
   phase 1; ``P - r - 1`` times a B of phase 1 with its W right after, then a forward of phase 1;
2. main step, ``M - 2 P + r + 1`` times: the forward of phase 0 overlapped with the full
   backward of phase 1 (not overlapped the first time on the middle ranks), then the forward
   of phase 1 overlapped with the full backward of phase 0; then ``P - r - 1`` times a full
   backward of phase 1 and the forward of phase 1 overlapped with the backward of phase 0;
3. ``r + 1`` times a backward of phase 1 and one of phase 0, their Ws deferred from the
   middle one on; ``P - r - 1`` times the oldest pending W and a B of phase 0 (W deferred);
   the pending Ws, oldest first.

An overlapped pair (``Op.paired``) runs both ops at once: on the rank's one compute stream
each one's kernels run while the other waits for its communication (the all-to-all of
expert parallelism), which is DualPipe's point. Needs ``p`` even and ``m / 2 >= p``.

Closed form (the report's table 2, chunk times): bubble ``(p/2 - 1)(T_F&B + T_B - 3 T_W)``
per rank, with ``T_B`` the full backward and ``T_F&B`` an overlapped pair; parameters 2x;
activations ``p + 1`` chunks' micro-batches.
"""

from __future__ import annotations

from collections import deque

from ...errors import ConfigError
from .base import Op, PipelineSchedule

__all__ = ["SCHEDULE", "dual_program", "dualpipe"]


class _Program:
    """Ops of one DualPipe program, by phase, with a FIFO of deferred weight gradients."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.forwards = [0, 0]
        self.backwards = [0, 0]
        self.deferred: deque[tuple[int, int]] = deque()

    def f(self, phase: int, paired: bool = False) -> None:
        self.ops.append(Op("F", phase, self.forwards[phase], paired))
        self.forwards[phase] += 1

    def b(self, phase: int, defer: bool = False) -> None:
        i = self.backwards[phase]
        self.ops.append(Op("B", phase, i))
        if defer:
            self.deferred.append((phase, i))
        self.backwards[phase] += 1

    def w(self) -> None:
        if self.deferred:
            phase, i = self.deferred.popleft()
            self.ops.append(Op("W", phase, i))

    def fb(self, forward: int, backward: int) -> None:
        """A forward overlapped with a full backward."""
        self.f(forward, paired=True)
        self.b(backward)


def dual_program(half: int, r: int, micro: int) -> list[Op]:
    """DualPipe's program for a rank ``r`` stages from its phase-0 chain's start, with
    ``half`` ranks a half and ``micro`` micro-batches a phase (module docstring); chunk ``k``
    of the ops is phase ``k``."""
    g = _Program()
    for _ in range(2 * (half - r - 1)):
        g.f(0)
    for _ in range(r + 1):
        g.f(0)
        g.f(1)
    for _ in range(half - r - 1):
        g.b(1, defer=True)
        g.w()
        g.f(1)
    for i in range(micro - 2 * half + r + 1):
        if i == 0 and r == half - 1:
            g.f(0)
            g.b(1)
        else:
            g.fb(0, 1)
        g.fb(1, 0)
    for _ in range(half - r - 1):
        g.b(1)
        g.fb(1, 0)
    defer = False
    for i in range(r + 1):
        defer = defer or (i == (r + 1) // 2 and r % 2 == 1)
        g.b(1, defer)
        defer = defer or (i == (r + 1) // 2 and r % 2 == 0)
        g.b(0, defer)
    for _ in range(half - r - 1):
        g.w()
        g.b(0, defer=True)
    for _ in range(r + 1):
        g.w()
    return g.ops


def _dual_stage(chunk: int, stage: int, stages: int) -> int:
    """Chain 0 (chunk 0) runs down the ranks, chain 1 (chunk 1) up them."""
    return stage if chunk == 0 else stages + (stages - 1 - stage)


def dualpipe(stages: int, stage: int, micro: int, chunks: int = 2) -> list[Op]:
    """The stage's ops for ``micro`` micro-batches per direction (module docstring)."""
    p = stages
    if chunks != 2:
        raise ConfigError(
            "parallel.vpp", "dualpipe runs one chunk per direction: give vpp=1", chunks
        )
    if p % 2:
        raise ConfigError("parallel.pp", "dualpipe needs an even number of pipeline stages", p)
    if micro < p:
        raise ConfigError(
            "parallel.schedule",
            f"dualpipe needs at least 2 pp = {2 * p} micro-batches per pipeline, got {2 * micro}",
            "dualpipe",
        )
    second = stage >= p // 2
    ops = dual_program(p // 2, min(stage, p - 1 - stage), micro)
    if not second:
        return ops
    return [Op(op.kind, 1 - op.chunk, op.micro, op.paired) for op in ops]


SCHEDULE = PipelineSchedule(
    "dualpipe",
    "DeepSeek's bidirectional pipeline: two directions, forward and backward overlapped",
    dualpipe,
    source="DeepSeek-V3 Technical Report, section 3.2.1; deepseek-ai/DualPipe dualpipe.py",
    virtual_stage=_dual_stage,
    vpp=1,
    directions=2,
)
