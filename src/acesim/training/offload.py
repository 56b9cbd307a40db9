"""Offload in a pipeline rank's graph: saved activations copied to host memory after their
forward and back before their backward (:class:`LayerOffload` within a pass,
:class:`ActivationOffload` between schedule ops), FSDP's parameter shards kept in host memory
(:class:`WeightOffload`), and the optimizer's offloaded share stepped on the CPU
(:func:`host_update`).

Weights (:class:`WeightOffload`, ``offload=weights`` with FSDP, ``zero=3``), as PyTorch FSDP2
runs ``fully_shard(..., offload_policy=CPUOffloadPolicy())`` (``torch/distributed/fsdp/
_fully_shard/_fsdp_param.py``, ``_fsdp_collectives.py``; FSDP1's ``CPUOffload(offload_params=
True)`` alike): each rank's shard of every unit's parameters lives in pinned host memory, in
the original (master) dtype (``Precision.state_bytes``: FP32 under mixed precision). Every
all-gather of a unit (every forward and every backward: the parameters are resharded after
use) takes as input the shard copied to the GPU (host to device, in the all-gather's copy-in
stream: the copy waits for what the all-gather would have waited for, and the all-gather
waits for the copy); its cast to the parameter dtype is not modelled (an elementwise kernel
over ``1/dp`` of the unit). Prefetch as acesim's FSDP issues all-gathers: the next unit's
(forward and backward) behind this unit's, so its copy in overlaps this unit's compute (FSDP2's
default: implicit forward prefetch, backward prefetch of one unit). After each backward
reduce-scatter the gradient shard, cast to the original dtype, is copied to the host (device
to host). The first backward of a unit in an iteration copies asynchronously (pinned memory,
nothing but the optimizer waits for it); a later micro-batch's gradient accumulates into the
host gradient: FSDP2 copies it blocking (``non_blocking=False`` when accumulating, into
pageable memory: taken at the host link's rate all the same, an assumption) and adds it
on the CPU (reading both shards, writing one: three times the shard's bytes through host
memory), and the thread issuing the GPU's work waits for both, so the next step of the
backward does too. The optimizer step runs on the CPU over the whole host shard
(:func:`host_update` without its copies: the gradients are already there and the updated
parameters stay there until their next copy in).

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

__all__ = ["ActivationOffload", "LayerOffload", "WeightOffload", "host_update"]

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
        if not self.out or k + 1 >= len(self.groups):
            return
        for op in self.groups[k + 1]:
            key = (op.chunk, op.micro)
            if op.kind == "B" and key in self.out:
                self.back[key] = self._copy(add, [prev, self.out.pop(key)], "h2d", op)

    def reloads(self, group: Sequence[Op]) -> list[int | None]:
        """What the B ops of ``group`` wait for: their activations' reloads."""
        if not self.back:
            return []
        return [self.back.pop((op.chunk, op.micro), None) for op in group if op.kind == "B"]

    def offload(self, add: Add, group: Sequence[Op], end: int | None) -> None:
        """After ``group`` (ending at node ``end``): offload its forwards' activations."""
        if not self.chosen:
            return
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


class WeightOffload:
    """One rank's host copies of FSDP's parameter and gradient shards (module docstring):
    ``host_bytes`` per element of a shard in host memory (0: no weight offload)."""

    def __init__(self, host_bytes: float):
        self.host_bytes = host_bytes
        self.accumulating: set[tuple[int, int]] = set()  # (chunk, unit) with a host gradient

    def new_iteration(self) -> None:
        """The optimizer step has consumed the host gradients: the next backwards set them."""
        self.accumulating = set()

    def fetch(self, add: Add, deps: list[int | None], shard: float, label: str, unit: int
              ) -> list[int | None]:  # fmt: skip
        """Before a unit's all-gather (``shard``: its parameters on this rank): their copy in;
        returns what the all-gather waits for."""
        if not self.host_bytes:
            return deps
        node = add(
            deps,
            name=f"offload.h2d.params.{label}.u{unit}",
            kind="host_copy",
            op="h2d",
            size=shard * self.host_bytes,
            layer=label,
            pass_name="offload",
        )
        return [node]

    def drain(
        self, add: Add, deps: Sequence[int | None], shard: float, key: tuple[int, int],
        label: str,
    ) -> tuple[list[int], int | None]:  # fmt: skip
        """After a unit's gradient reduce-scatter (``deps``; ``key``: chunk and unit): the
        gradient shard's copy out and, accumulating, the CPU add. Returns (what the optimizer
        step waits for, what the backward's next step waits for or None)."""
        if not self.host_bytes:
            return [], None
        size = shard * self.host_bytes
        common = {"kind": "host_copy", "layer": label, "pass_name": "offload"}
        out = int(add(deps, name=f"offload.d2h.grads.{label}.u{key[1]}", op="d2h", size=size,
                      **common))  # fmt: skip
        if key not in self.accumulating:
            self.accumulating.add(key)
            return [out], None
        total = int(add([out], name=f"offload.cpu.grads.{label}.u{key[1]}", op="cpu",
                        size=3 * size, **common))  # fmt: skip
        return [total], total


def host_update(
    add: Add, deps: list[int | None], sizes: tuple[float, float, float], label: str
) -> int:
    """The optimizer's offloaded share (Megatron-core's ``HybridDeviceOptimizer``): its main
    gradients copied to host memory (``sizes[0]`` bytes, device to host), the CPU optimizer
    step streaming ``sizes[1]`` bytes through host memory, the updated FP32 parameters copied
    back (``sizes[2]`` bytes, host to device), one after another (without Megatron's
    ``--overlap-cpu-optimizer-d2h-h2d``); a copy of no bytes is left out (FSDP's offloaded
    shards: the gradients are on the host already, the parameters stay there); returns the
    last node."""
    d2h, step, h2d = sizes
    common = {"kind": "host_copy", "layer": label, "pass_name": "update"}
    if d2h:
        deps = [add(deps, name="update.offload.d2h", op="d2h", size=d2h, **common)]
    node = int(add(deps, name="update.offload.cpu", op="cpu", size=step, **common))
    if h2d:
        node = int(add([node], name="update.offload.h2d", op="h2d", size=h2d, **common))
    return node
