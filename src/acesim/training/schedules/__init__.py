"""Pipeline schedules: a registry of op sequences (:data:`SCHEDULES`).

A schedule is one module defining ``SCHEDULE``, a :class:`~.base.PipelineSchedule` (its name,
a summary, the ops of each stage, and where a rank's chunks sit in the model), registered
here. The graph builder (:mod:`acesim.training.pipeline`), the memory walk
(:mod:`acesim.workload.llm.memory`), ``--parallel schedule=`` and the docs read the registry;
nothing branches on a schedule's name.

Registered: ``1f1b`` (:mod:`.one_f_one_b`), ``interleaved`` (:mod:`.interleaved`), ``zb-h1``
(:mod:`.zb_h1`), ``zb-v`` (:mod:`.zb_v`), ``dualpipe`` (:mod:`.dualpipe`), ``dualpipev``
(:mod:`.dualpipev`).
"""

from __future__ import annotations

from ...registry import Registry
from . import dualpipe, dualpipev, interleaved, one_f_one_b, zb_h1, zb_v
from .base import OP_KINDS, Op, OpKind, PipelineSchedule, check_ops

__all__ = [
    "SCHEDULES",
    "Op",
    "OpKind",
    "OP_KINDS",
    "PipelineSchedule",
    "check_ops",
    "schedule",
    "default_schedule",
]

#: Pipeline schedules by name.
SCHEDULES: Registry[PipelineSchedule] = Registry(
    "pipeline schedule", "parallel.schedule", listed=True
)

for _schedule in (
    one_f_one_b.SCHEDULE,
    interleaved.SCHEDULE,
    zb_h1.SCHEDULE,
    zb_v.SCHEDULE,
    dualpipe.SCHEDULE,
    dualpipev.SCHEDULE,
):
    SCHEDULES.register(_schedule.name, _schedule)


def default_schedule(chunks: int) -> str:
    """The schedule Megatron runs with ``chunks`` model chunks per rank: interleaved with
    more than one, else 1F1B."""
    return "interleaved" if chunks > 1 else "1f1b"


def schedule(name: str, stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """The ops of ``stage`` under the registered schedule ``name``."""
    return SCHEDULES.get(name).ops(stages, stage, micro, chunks)
