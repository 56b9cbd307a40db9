"""``interleaved``: Megatron's interleaved 1F1B over ``v`` model chunks per rank
(Narayanan et al., SC 2021; Megatron-core's ``forward_backward_pipelining_with_interleaving``
in ``megatron/core/pipeline_parallel/schedules.py``).

``m v`` forward and ``m v`` backward steps per rank; the ``k``-th forward runs chunk
``(k mod p v) div p`` on micro-batch ``(k div p v) p + k mod p`` (backwards take the chunks
in reverse); ``(p - s - 1) 2 + (v - 1) p`` warm-up forwards (all of them when ``m = p``),
then one-forward-one-backward, then the remaining backwards. Needs ``m`` a multiple of ``p``,
as Megatron does. Chunk ``c`` of stage ``s`` is virtual stage ``c p + s``. Bubble
``(p - 1) (t_F + t_B) / v``. With one chunk it is 1F1B.
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import Op, PipelineSchedule
from .one_f_one_b import one_f_one_b

__all__ = ["SCHEDULE", "interleaved"]


def interleaved(stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """The stage's ops (module docstring)."""
    p, s, m, v = stages, stage, micro, chunks
    if v == 1:
        return one_f_one_b(p, s, m)
    if m % p:
        raise ConfigError(
            "parallel.vpp",
            f"the interleaved schedule needs the micro-batches ({m}) to be a multiple of the "
            f"pipeline stages ({p})",
            v,
        )
    total = m * v

    def step(k: int, forward: bool) -> Op:
        chunk = (k % (p * v)) // p
        if not forward:
            chunk = v - 1 - chunk
        return Op("F" if forward else "B", chunk, (k // (p * v)) * p + k % p)

    warmup = total if m == p else min((p - s - 1) * 2 + (v - 1) * p, total)
    ops = [step(k, True) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [step(warmup + k, True), step(k, False)]
    ops += [step(k, False) for k in range(total - warmup, total)]
    return ops


SCHEDULE = PipelineSchedule(
    "interleaved",
    "Megatron's interleaved 1F1B over vpp model chunks per rank",
    interleaved,
    source="megatron/core/pipeline_parallel/schedules.py: "
    "forward_backward_pipelining_with_interleaving",
)
