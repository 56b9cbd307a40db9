"""Offload in a pipeline rank's graph: saved activations copied to host memory after their
forward and back before their backward (:class:`LayerOffload` within a pass,
:class:`ActivationOffload` between schedule ops), and the optimizer's offloaded share stepped on
the CPU (:func:`host_update`).

Layer-granular (:class:`LayerOffload`, ``offload=activations,offload_layers=N``), as
Megatron-core's ``--cpu-offloading-num-layers N`` with Transformer Engine's CPU offload context
runs it: the first ``N`` transformer layers of each chunk's forward are offloaded. When layer
``u`` ends, the copy of its saved activations to host memory starts (device to host, on the
copy engines over the host link, waiting for that layer only), and the next layer's end
waits for it (one layer's copy overlaps the next layer's compute; the GPU bytes are freed
then). In the backward, the start of layer ``u + 1``'s backward issues the reload of layer
``u`` (host to device, after the copy out; a prefetch one layer ahead), and layer ``u``'s
backward waits for it. The memory walk follows the same rule
(:func:`acesim.workload.llm.memory.layer_offload_profile`).

Op-granular (:class:`ActivationOffload`, ``offload_fraction``):

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

from ..workload.llm.chunk import ChunkWork
from ..workload.llm.memory import offloaded, offloaded_units
from .schedules import Op

__all__ = ["ActivationOffload", "LayerOffload", "host_update"]

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


class LayerOffload:
    """One rank's layer-granular offload copies (module docstring): the first ``layers``
    transformer layers of each chunk's passes."""

    def __init__(self, layers: int):
        self.layers = layers
        self.out: dict[tuple[int, int, int], int] = {}  # (chunk, micro, unit): its d2h copy
        self.back: dict[tuple[int, int, int], int] = {}  # its h2d copy

    def starts(self, work: ChunkWork, forward: bool) -> dict[int, int]:
        """Step index -> the unit starting there, in the pass's order (empty: no offload)."""
        if self.layers <= 0 or not work.forward_starts:
            return {}
        count = len(work.unit_saved)
        if forward:
            return dict(zip(work.forward_starts, range(count), strict=True))
        return dict(zip(work.backward_starts, range(count - 1, -1, -1), strict=True))

    def _copy(self, add: Add, deps: list[int | None], direction: str, key: tuple[int, ...],
              size: float) -> int:  # fmt: skip
        chunk, micro, unit = key
        return add(
            deps,
            name=f"offload.{direction}.{chunk}.{micro}.u{unit}",
            kind="host_copy",
            op=direction,
            size=size,
            layer=f"chunk{chunk}",
            pass_name="offload",
        )

    def enter(
        self, add: Add, op: Op, work: ChunkWork, unit: int, deps: list[int | None]
    ) -> list[int | None]:
        """At the start of ``unit`` in ``op``'s pass (``unit`` = the unit count: the forward's
        end), after ``deps``: forward, copy out unit ``unit - 1`` if offloaded and wait for
        unit ``unit - 2``'s copy; backward, reload unit ``unit - 1`` if offloaded and wait for
        this unit's reload. Returns what the unit's first step waits for."""
        chosen = offloaded_units(work, self.layers)
        before = (op.chunk, op.micro, unit - 1)
        if op.forward:
            if unit - 1 in chosen:
                self.out[before] = self._copy(add, deps, "d2h", before, work.unit_saved[unit - 1])
            return [*deps, self.out.get((op.chunk, op.micro, unit - 2))]
        if unit - 1 in chosen:
            waits = [*deps, self.out.pop(before)]
            self.back[before] = self._copy(add, waits, "h2d", before, work.unit_saved[unit - 1])
        return [*deps, self.back.pop((op.chunk, op.micro, unit), None)]


def host_update(
    add: Add, deps: list[int | None], sizes: tuple[float, float, float], label: str
) -> int:
    """The optimizer's offloaded share (Megatron-core's ``HybridDeviceOptimizer``): its main
    gradients copied to host memory (``sizes[0]`` bytes, device to host), the CPU optimizer
    step streaming ``sizes[1]`` bytes through host memory, the updated FP32 parameters copied
    back (``sizes[2]`` bytes, host to device), one after another (without Megatron's
    ``--overlap-cpu-optimizer-d2h-h2d``); returns the last copy's node."""
    d2h, step, h2d = sizes
    common = {"kind": "host_copy", "layer": label, "pass_name": "update"}
    node = add(deps, name="update.offload.d2h", op="d2h", size=d2h, **common)
    node = add([node], name="update.offload.cpu", op="cpu", size=step, **common)
    return int(add([node], name="update.offload.h2d", op="h2d", size=h2d, **common))
