"""Activation offload in a pipeline rank's graph: saved activations copied to host memory
after their forward and back before their backward.

As Megatron-core's CPU offloading of activations does it (``--cpu-offloading``,
``megatron/core/transformer/cpu_offload.py``: a layer's saved tensors leave the GPU on a side
stream after its forward and are reloaded, one layer ahead, before its backward), at the
granularity of a schedule's ops: with fraction ``f`` (the share of a chunk's layers whose
activations are offloaded; the layers of a chunk save alike), after the F of (chunk ``c``,
micro-batch ``i``) a device-to-host copy of ``f x saved`` bytes starts (it waits for that F
only and nothing waits for it but the reload); while the op before that micro-batch's B runs,
the host-to-device copy starts (it waits for the offload and for the end of the op before the
one it overlaps: a prefetch one op ahead), and the B waits for it. A micro-batch with fewer
than two ops between its F and its B (the last stages' 1F1B turns) is not offloaded: its
activations would never leave the GPU (:func:`acesim.workload.llm.memory.offloaded`). The
copies run on the NPU's copy engines over its host link
(:meth:`acesim.hardware.npu.NPU.host_copy`), sharing both with copy-engine collectives and
HBM with everything.

Memory (:func:`acesim.workload.llm.memory.peak_activations`): an offloaded share is held
from its F until the end of the op after it (its copy overlaps that op) and again from the
start of the op before its B (the prefetch). Granularity: whole micro-batches of a chunk (a
schedule's ops), where Megatron offloads layer by layer within a pass; so a one-stage
pipeline (each B right after its F) offloads nothing here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..workload.llm.memory import offloaded
from .schedules import Op

__all__ = ["ActivationOffload"]

#: node-adding callback of the rank's graph: ``add(deps, **fields) -> node id``
Add = Callable[..., int]


class ActivationOffload:
    """One rank's offload copies for one iteration (module docstring): ``saved[c]``, chunk
    ``c``'s saved activation bytes per micro-batch; ``fraction`` of them offloaded."""

    def __init__(self, fraction: float, saved: Sequence[float], groups: Sequence[Sequence[Op]]):
        self.fraction = fraction
        self.saved = saved
        self.groups = groups
        self.chosen = offloaded(groups) if fraction > 0 else set()
        self.out: dict[tuple[int, int], int] = {}  # the d2h copy of each offloaded pair
        self.back: dict[tuple[int, int], int] = {}  # its h2d copy

    def _copy(self, add: Add, deps: list[int | None], direction: str, op: Op) -> int:
        return add(
            deps,
            name=f"offload.{direction}.{op.chunk}.{op.micro}",
            kind="host_copy",
            op=direction,
            size=self.fraction * self.saved[op.chunk],
            layer=f"chunk{op.chunk}",
            pass_name="offload",
        )

    def prefetch(self, add: Add, k: int, prev: int | None) -> None:
        """Before group ``k`` runs (``prev``: what it waits for): reload the activations of
        the B ops of group ``k + 1``."""
        if k + 1 >= len(self.groups):
            return
        for op in self.groups[k + 1]:
            key = (op.chunk, op.micro)
            if op.kind == "B" and key in self.out:
                self.back[key] = self._copy(add, [prev, self.out.pop(key)], "h2d", op)

    def reloads(self, group: Sequence[Op]) -> list[int | None]:
        """What the B ops of ``group`` wait for: their activations' reloads."""
        return [self.back.pop((op.chunk, op.micro), None) for op in group if op.kind == "B"]

    def offload(self, add: Add, group: Sequence[Op], end: int | None) -> None:
        """After ``group`` (ending at node ``end``): offload its forwards' activations."""
        for op in group:
            if op.kind == "F" and (op.chunk, op.micro) in self.chosen:
                self.out[(op.chunk, op.micro)] = self._copy(add, [end], "d2h", op)
