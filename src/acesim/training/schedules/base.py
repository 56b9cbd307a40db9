"""What a pipeline schedule is: per rank, a static order of ops of three kinds.

An :class:`Op` is one step of a rank's schedule on one model chunk and one micro-batch:

``F``
    the forward;
``B``
    the backward's input gradient, which the previous virtual stage waits for; in a schedule
    with no ``W`` ops it computes the weight gradients too (the framework's one backward);
``W``
    the weight gradient, deferred from its ``B`` (zero-bubble schedules): it waits for that
    ``B`` only and nothing downstream waits for it but the chunk's gradient reduction.

A :class:`PipelineSchedule` gives each stage's ops (``ops(stages, stage, micro, chunks)``)
and where each of a rank's chunks sits in the model (``virtual_stage``): by default chunk
``c`` of stage ``s`` is virtual stage ``c p + s`` (Megatron's interleaving); a V-shaped
schedule places a rank's second chunk on the way back (``2 p - 1 - s``). Every virtual stage
sends its forward's output to the next virtual stage and its input gradient to the previous.
The graph builder (:mod:`acesim.training.pipeline`) turns ops into nodes, one emitter per op
kind; the memory walk (:mod:`acesim.workload.llm.memory`) follows the op kinds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ...errors import ConfigError

__all__ = ["Op", "OpKind", "OP_KINDS", "PipelineSchedule", "check_ops", "interleaved_stage"]

OpKind = Literal["F", "B", "W"]

#: The op kinds, with what each computes.
OP_KINDS: dict[OpKind, str] = {
    "F": "forward",
    "B": "input gradient (and the weight gradient where no W op follows)",
    "W": "weight gradient (deferred)",
}


@dataclass(frozen=True)
class Op:
    """One step of a rank's schedule: ``kind`` of ``chunk`` on micro-batch ``micro``."""

    kind: OpKind
    chunk: int
    micro: int

    @property
    def forward(self) -> bool:
        return self.kind == "F"

    def __str__(self) -> str:
        return f"{self.kind}{self.micro}" + (f"/{self.chunk}" if self.chunk else "")


def interleaved_stage(chunk: int, stage: int, stages: int) -> int:
    """Megatron's placement: chunk ``c`` of stage ``s`` is virtual stage ``c p + s``."""
    return chunk * stages + stage


@dataclass(frozen=True)
class PipelineSchedule:
    """A registered schedule (see the module docstring).

    Attributes:
        name: the value of ``schedule=`` (``--parallel``), as the frameworks name it.
        summary: one line for help texts.
        ops: ``ops(stages, stage, micro, chunks)`` -> the stage's ops in order; a ConfigError
            naming the field when the schedule cannot run that case.
        source: where the order comes from (a framework's file, a paper).
        virtual_stage: ``(chunk, stage, stages)`` -> the chunk's virtual stage.
    """

    name: str
    summary: str
    ops: Callable[[int, int, int, int], list[Op]]
    source: str = ""
    virtual_stage: Callable[[int, int, int], int] = interleaved_stage


def check_ops(ops: Sequence[Op], chunks: int, micro: int, where: str) -> None:
    """Every (chunk, micro-batch) has one F, one B after it, and one W after the B or none
    (in every pair or in none); ConfigError naming ``where`` otherwise."""
    count = Counter((op.kind, op.chunk, op.micro) for op in ops)
    position = {(op.kind, op.chunk, op.micro): n for n, op in enumerate(ops)}
    split = any(op.kind == "W" for op in ops)
    kinds: tuple[OpKind, ...] = ("F", "B", "W") if split else ("F", "B")
    for c in range(chunks):
        for i in range(micro):
            for kind in kinds:
                if count[(kind, c, i)] != 1:
                    raise ConfigError(
                        "parallel.schedule",
                        f"{where}: {count[(kind, c, i)]} {kind} ops of chunk {c} on micro-batch "
                        f"{i} (one expected)",
                    )
            order = [position[(k, c, i)] for k in kinds]
            if order != sorted(order):
                raise ConfigError(
                    "parallel.schedule",
                    f"{where}: chunk {c} on micro-batch {i} runs its ops out of order",
                )
    if len(ops) != sum(
        count[(k, c, i)] for k in kinds for c in range(chunks) for i in range(micro)
    ):
        raise ConfigError("parallel.schedule", f"{where}: ops outside {chunks} chunks x {micro}")
