"""``zb-h1``: the memory-efficient zero-bubble schedule (Qi, Wan, Huang and Lin, "Zero Bubble
Pipeline Parallelism", ICLR 2024, section 2.1 and figure 3; the ``ZB-H1`` / ``zb1p`` schedule
of sail-sg/zero-bubble-pipeline-parallelism).

1F1B with each backward split into B (input gradient, sent upstream at once) and W (weight
gradient, deferred): stage ``s`` of ``p`` runs 1F1B's ``min(p - s - 1, m)`` warm-up forwards,
then pairs (F, B), following a B with the oldest pending W only once ``p`` micro-batches are
in flight (forward done, weight gradient not), so stage ``s`` starts its Ws ``s``
micro-batches late; the cool-down runs each B with a W, and the Ws left close the iteration.
Every stage holds at most ``p`` micro-batches in flight, 1F1B's peak on the first stage.

Closed form (the paper's, with B and W apart): the bubble per stage is
``(p - 1)(T_F + T_B - T_W)``, against 1F1B's ``(p - 1)(T_F + T_B + T_W)``: a third of it when
``T_F = T_B = T_W``. Activation memory: stage ``s`` peaks at ``(p - s) M_B + s M_W`` at most
(``M_B`` a micro-batch's activations, ``M_W`` what its W keeps), no more than 1F1B's ``p M_B``
while ``M_W <= M_B``.
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import Op, PipelineSchedule

__all__ = ["SCHEDULE", "zb_h1"]


def zb_h1(stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """The stage's ops (module docstring)."""
    if chunks != 1:
        raise ConfigError("parallel.vpp", "zb-h1 runs one model chunk per rank: give vpp=1", chunks)
    warmup = min(stages - stage - 1, micro)
    ops = [Op("F", 0, i) for i in range(warmup)]
    weights = 0  # Ws done
    for k in range(micro - warmup):
        ops += [Op("F", 0, warmup + k), Op("B", 0, k)]
        if warmup + k + 1 - weights >= stages:  # p micro-batches in flight
            ops.append(Op("W", 0, weights))
            weights += 1
    for k in range(micro - warmup, micro):
        ops.append(Op("B", 0, k))
        ops.append(Op("W", 0, weights))
        weights += 1
    ops += [Op("W", 0, j) for j in range(weights, micro)]
    return ops


SCHEDULE = PipelineSchedule(
    "zb-h1",
    "zero bubble, 1F1B's memory: B sent at once, W deferred to fill the bubbles (Qi et al.)",
    zb_h1,
    source="Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024, section 2.1 (ZB-H1)",
    vpp=1,
)
