"""``dualpipev``: DualPipe folded into a V ("cut-in-half" DualPipe: deepseek-ai/DualPipe's
``DualPipeV``; PyTorch's ``ScheduleDualPipeV`` in ``torch/distributed/pipelining/
schedules.py``).

One model copy: each rank holds two chunks in a V (chunk 0 at virtual stage ``s``, chunk 1 at
``2 p - 1 - s``, as ZB-V), and every rank runs DualPipe's program
(:func:`~.dualpipe.dual_program`) with ``p`` ranks a half, ``r = s`` and all ``m``
micro-batches, phase ``k`` being chunk ``k``: warm-up forwards, then forwards of one chunk
overlapped with full backwards of the other (``Op.paired``), then backwards with their weight
gradients deferred to fill the drain. Needs ``m >= 2 p``.

Closed form: DualPipe's over ``2 p`` virtual ranks, ``(p - 1)(T_F&B + T_B - 3 T_W)`` of
bubble per rank in chunk times (half a stage each), one copy of the parameters, activations
``2 p + 1`` chunks' micro-batches (chunks of half a stage: about 1F1B's ``p M_B``).
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import Op, PipelineSchedule, v_stage
from .dualpipe import dual_program

__all__ = ["SCHEDULE", "dualpipev"]


def dualpipev(stages: int, stage: int, micro: int, chunks: int = 2) -> list[Op]:
    """The stage's ops (module docstring)."""
    if chunks != 2:
        raise ConfigError(
            "parallel.vpp", "dualpipev runs two model chunks per rank: give vpp=2", chunks
        )
    if micro < 2 * stages:
        raise ConfigError(
            "parallel.schedule",
            f"dualpipev needs at least 2 pp = {2 * stages} micro-batches per pipeline, got {micro}",
            "dualpipev",
        )
    return dual_program(stages, stage, micro)


SCHEDULE = PipelineSchedule(
    "dualpipev",
    "DualPipe cut in half: a V of two chunks, forward and backward overlapped, one copy",
    dualpipev,
    source="deepseek-ai/DualPipe DualPipeV; torch.distributed.pipelining ScheduleDualPipeV",
    virtual_stage=v_stage,
    vpp=2,
)
