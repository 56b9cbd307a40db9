"""``1f1b``: one forward, one backward (PipeDream-Flush; Megatron-core's
``forward_backward_pipelining_without_interleaving`` in
``megatron/core/pipeline_parallel/schedules.py``).

Stage ``s`` of ``p`` runs ``w = min(p - s - 1, m)`` warm-up forwards, then ``m - w`` pairs
(forward of micro-batch ``w + i``, backward of ``i``), then the ``w`` remaining backwards.
One model chunk per rank; the backward computes input and weight gradients together. Bubble
``(p - 1) (t_F + t_B)`` per iteration; stage ``s`` holds at most ``p - s`` micro-batches'
activations.
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import Op, PipelineSchedule

__all__ = ["SCHEDULE", "one_f_one_b"]


def one_f_one_b(stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """The stage's ops (module docstring)."""
    if chunks != 1:
        raise ConfigError(
            "parallel.schedule",
            "1f1b runs one model chunk per rank; with vpp > 1 use interleaved",
            "1f1b",
        )
    w = min(stages - stage - 1, micro)
    ops = [Op("F", 0, i) for i in range(w)]
    for i in range(micro - w):
        ops += [Op("F", 0, w + i), Op("B", 0, i)]
    ops += [Op("B", 0, i) for i in range(micro - w, micro)]
    return ops


SCHEDULE = PipelineSchedule(
    "1f1b",
    "one forward, one backward (PipeDream-Flush, Megatron's default)",
    one_f_one_b,
    source="megatron/core/pipeline_parallel/schedules.py: "
    "forward_backward_pipelining_without_interleaving",
)
