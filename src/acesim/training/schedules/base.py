"""What a pipeline schedule is: per rank, a static order of ops of three kinds.

An :class:`Op` is one step of a rank's schedule on one model chunk and one micro-batch:

``F``
    the forward;
``B``
    the backward's input gradient, which the previous virtual stage waits for; where no ``W``
    op of the same chunk and micro-batch follows, it computes the weight gradients too (the
    framework's one backward: a "full" backward);
``W``
    the weight gradient, deferred from its ``B`` (zero-bubble schedules): it waits for that
    ``B`` only and nothing downstream waits for it but the chunk's gradient reduction.

An op marked ``paired`` runs beside the op after it (DualPipe's overlapped forward and
backward of two micro-batches): both start when the op before them is done, the op after
them waits for both, and on the rank's one compute stream each one's kernels run while the
other waits for its communication.

A :class:`PipelineSchedule` gives each stage's ops (``ops(stages, stage, micro, chunks)``)
and where each of a rank's chunks sits in the model (``virtual_stage``): by default chunk
``c`` of stage ``s`` is virtual stage ``c p + s`` (Megatron's interleaving); a V-shaped
schedule places a rank's second chunk on the way back (``2 p - 1 - s``). The virtual stages
form ``directions`` chains (pipelines) of equal length: one for every schedule but
DualPipe's, whose two chains run in opposite directions over the same ranks, each holding the
whole model (two copies of the parameters) and half the micro-batches. Along a chain a
virtual stage sends its forward's output to the next one and its input gradient to the
previous one (nothing is sent where the next one is on the same rank: a V's turn). The graph
builder (:mod:`acesim.training.pipeline`) turns ops into nodes, one emitter per op kind; the
memory walk (:mod:`acesim.workload.llm.memory`) follows the op kinds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ...errors import ConfigError

__all__ = [
    "Op",
    "OpKind",
    "OP_KINDS",
    "PipelineSchedule",
    "check_ops",
    "interleaved_stage",
    "v_stage",
]

OpKind = Literal["F", "B", "W"]

#: The op kinds, with what each computes.
OP_KINDS: dict[OpKind, str] = {
    "F": "forward",
    "B": "input gradient (and the weight gradient where no W op follows)",
    "W": "weight gradient (deferred)",
}


@dataclass(frozen=True)
class Op:
    """One step of a rank's schedule: ``kind`` of ``chunk`` on micro-batch ``micro``;
    ``paired``: runs beside the next op (module docstring)."""

    kind: OpKind
    chunk: int
    micro: int
    paired: bool = False

    @property
    def forward(self) -> bool:
        return self.kind == "F"

    def __str__(self) -> str:
        text = f"{self.kind}{self.micro}" + (f"/{self.chunk}" if self.chunk else "")
        return text + ("&" if self.paired else "")


def interleaved_stage(chunk: int, stage: int, stages: int) -> int:
    """Megatron's placement: chunk ``c`` of stage ``s`` is virtual stage ``c p + s``."""
    return chunk * stages + stage


def v_stage(chunk: int, stage: int, stages: int) -> int:
    """A V: chunk 0 of stage ``s`` is virtual stage ``s``, chunk 1 is ``2 p - 1 - s`` (the
    last stage holds the turn, the first stage both ends)."""
    return stage if chunk == 0 else 2 * stages - 1 - stage


@dataclass(frozen=True)
class PipelineSchedule:
    """A registered schedule (see the module docstring).

    Attributes:
        name: the value of ``schedule=`` (``--parallel``), as the frameworks name it.
        summary: one line for help texts.
        ops: ``ops(stages, stage, micro, chunks)`` -> the stage's ops in order, for ``micro``
            micro-batches per chain (chunk ``c`` runs micro-batches ``0 .. micro - 1``); a
            ConfigError naming the field when the schedule cannot run that case.
        source: where the order comes from (a framework's file, a paper).
        virtual_stage: ``(chunk, stage, stages)`` -> the chunk's virtual stage; chain ``d``
            holds the virtual stages ``d L .. (d + 1) L - 1`` (``L`` = stages x chunks /
            directions), in model order.
        vpp: the model chunks per rank and chain the schedule needs (``vpp=``), or None for
            any.
        directions: chains of virtual stages (2: DualPipe's two directions, each rank holding
            one chunk of each).
    """

    name: str
    summary: str
    ops: Callable[[int, int, int, int], list[Op]]
    source: str = ""
    virtual_stage: Callable[[int, int, int], int] = interleaved_stage
    vpp: int | None = None
    directions: int = 1

    def stage_ops(self, stages: int, stage: int, micro: int, chunks: int) -> list[Op]:
        """The ops of ``stage`` for ``micro`` micro-batches per pipeline (split over the
        directions) and ``chunks`` model chunks per rank (vpp x directions)."""
        return self.ops(stages, stage, micro // self.directions, chunks)

    def check(self, stages: int, vpp: int, micro: int) -> None:
        """ConfigError naming the field when the schedule cannot run ``stages`` stages of
        ``vpp`` chunks on ``micro`` micro-batches per pipeline."""
        if self.vpp is not None and vpp != self.vpp:
            raise ConfigError(
                "parallel.vpp",
                f"the {self.name} schedule runs {self.vpp} model chunk"
                f"{'s' if self.vpp > 1 else ''} per rank{' and direction' * (self.directions > 1)}"
                f": give vpp={self.vpp}",
                vpp,
            )
        if micro % self.directions:
            raise ConfigError(
                "parallel.schedule",
                f"{self.name} splits the micro-batches over {self.directions} directions: "
                f"their number ({micro}) must be a multiple of {self.directions}",
                self.name,
            )


def check_ops(ops: Sequence[Op], chunks: int, micro: int, where: str) -> None:
    """Every (chunk, micro-batch) has one F, one B after it, and at most one W after the B;
    a paired op has an op after it; ConfigError naming ``where`` otherwise."""
    count: Counter[tuple[str, int, int]] = Counter((op.kind, op.chunk, op.micro) for op in ops)
    position: dict[tuple[str, int, int], int] = {
        (op.kind, op.chunk, op.micro): n for n, op in enumerate(ops)
    }
    for c in range(chunks):
        for i in range(micro):
            for kind in ("F", "B"):
                if count[(kind, c, i)] != 1:
                    raise ConfigError(
                        "parallel.schedule",
                        f"{where}: {count[(kind, c, i)]} {kind} ops of chunk {c} on micro-batch "
                        f"{i} (one expected)",
                    )
            order = [position[(k, c, i)] for k in ("F", "B", "W") if count[(k, c, i)]]
            if order != sorted(order) or count[("W", c, i)] > 1:
                raise ConfigError(
                    "parallel.schedule",
                    f"{where}: chunk {c} on micro-batch {i} runs its ops out of order",
                )
    expected = sum(count[(k, c, i)] for k in "FBW" for c in range(chunks) for i in range(micro))
    if len(ops) != expected:
        raise ConfigError("parallel.schedule", f"{where}: ops outside {chunks} chunks x {micro}")
    if ops and ops[-1].paired:
        raise ConfigError("parallel.schedule", f"{where}: the last op is paired with nothing")
