"""The layer model of a training workload.

A workload is a list of layers. Each layer has three passes — forward, input-gradient and
weight-gradient — and each pass has compute (FLOPs and HBM bytes for the roofline, or a fixed
time in seconds measured on the whole NPU) and any number of collectives (type, bytes per NPU
in nccl-tests' convention, and the communicator: network dimensions it spans, ``None`` = all,
or a :class:`~acesim.network.group.Group` such as a tensor-parallel slice of a node). The
collectives of a pass are issued together once its compute is done. The optimizer step of the
layer runs after its gradients are reduced: ``update`` (its kernels, as the zoo builds them) or
``update_time`` (a measured time in s, as ASTRA-sim 1.0 inputs give it).

``precision`` names the training recipe (:data:`acesim.precision.PRECISIONS`) the workload's
kernels and sizes were built for, ``optimizer`` its optimizer (:data:`.optimizer.OPTIMIZERS`);
both are None for workloads read from files, which fix their own times and sizes.

``parallelism`` names the training loop that runs it (``data``, ``hybrid_dlrm``, ``micro``);
``bottom_layers`` is, for ``hybrid_dlrm``, the index of the last bottom-MLP layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import WorkloadError
from ..hardware.kernels import Attention, Choice, Fixed, Gemm, Kernel, Roofline, Stream
from ..network.group import Group
from ..network.ops import COLLECTIVE_OPS
from ..precision import PRECISIONS
from .optimizer import OPTIMIZERS

KERNEL_TYPES = (Gemm, Attention, Stream, Roofline, Fixed, Choice)

Parallelism = Literal["data", "hybrid_dlrm", "micro"]


def _check_amount(value: float, field: str) -> None:
    """A workload amount (FLOPs, bytes, seconds) is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadError(f"must be a number, got {value!r}", field=field)
    if not math.isfinite(value):
        raise WorkloadError(f"must be a finite number, got {value}", field=field)
    if value < 0:
        raise WorkloadError(f"must not be negative, got {value}", field=field)


@dataclass(frozen=True)
class Compute:
    """Compute of one pass: a sequence of kernels run one after another.

    Give the kernels (:mod:`acesim.hardware.kernels`), or only totals, which become one kernel:
    a fixed ``duration`` (a :class:`~acesim.hardware.kernels.Fixed` kernel measured on the
    whole NPU), or ``flops`` and ``hbm_bytes`` (a :class:`~acesim.hardware.kernels.Roofline`
    kernel with math in ``dtype`` and ``blocks`` thread-blocks, when known). With kernels,
    ``flops`` and ``hbm_bytes`` are their totals.

    Attributes:
        flops: floating-point operations (FLOP).
        hbm_bytes: bytes read and written in HBM.
        duration: fixed time on the whole NPU (s) of a measured kernel.
        blocks: thread-blocks of a roofline kernel, if known.
        kernels: the kernels, in order.
        dtype: math dtype of a roofline kernel (None: the NPU's fastest listed dtype).
    """

    flops: float = 0.0
    hbm_bytes: float = 0.0
    duration: float | None = None
    blocks: int | None = None
    kernels: tuple[Kernel, ...] = ()
    dtype: str | None = None

    def __post_init__(self) -> None:
        for name in ("flops", "hbm_bytes"):
            _check_amount(getattr(self, name), name)
        if self.duration is not None:
            _check_amount(self.duration, "duration")
        kernels: object = self.kernels
        if isinstance(kernels, list):
            kernels = tuple(kernels)
        if not isinstance(kernels, tuple) or not all(isinstance(k, KERNEL_TYPES) for k in kernels):
            raise WorkloadError(f"must be kernels, got {kernels!r}", field="kernels")
        if kernels:
            if self.flops or self.hbm_bytes or self.duration is not None:
                raise WorkloadError(
                    "give kernels or totals (flops, hbm_bytes, duration), not both", field="kernels"
                )
            object.__setattr__(self, "flops", float(sum(k.flops for k in kernels)))
            object.__setattr__(
                self, "hbm_bytes", float(sum(k.read_bytes + k.write_bytes for k in kernels))
            )
        elif self.duration is not None:
            kernels = (Fixed(self.duration, self.hbm_bytes),)
        elif self.flops or self.hbm_bytes:
            kernels = (Roofline(self.flops, self.hbm_bytes, self.dtype, self.blocks),)
        object.__setattr__(self, "kernels", kernels)

    @property
    def empty(self) -> bool:
        return not self.kernels or all(
            k.flops == 0 and k.read_bytes + k.write_bytes == 0 and not getattr(k, "duration", 0)
            for k in self.kernels
        )


@dataclass(frozen=True)
class Comm:
    """One collective of a pass: ``op`` of ``size`` bytes per NPU on a communicator: ``dims``
    (whole dimensions; None = all) or ``group`` (any :class:`~acesim.network.group.Group`).
    ``units``: the compute units its kernels hold where the endpoint runs collectives as
    kernels (a library of its own on an SM budget: DeepEP's expert-parallel dispatch and
    combine); None: the endpoint's own setting."""

    op: str
    size: float
    dims: tuple[int, ...] | None = None
    group: Group | None = None
    units: int | None = None

    def __post_init__(self) -> None:
        if self.op not in COLLECTIVE_OPS:
            raise WorkloadError(
                f"unknown collective {self.op!r}; expected one of {COLLECTIVE_OPS.choices()}",
                field="comm",
            )
        if self.dims is not None and self.group is not None:
            raise WorkloadError("give either dims or group, not both", field="comm")
        _check_amount(self.size, "comm size")
        if self.units is not None and (
            isinstance(self.units, bool) or not isinstance(self.units, int) or self.units < 1
        ):
            raise WorkloadError(f"must be a whole number >= 1, got {self.units!r}", field="units")


@dataclass(frozen=True)
class Pass:
    """Compute, then the pass's collectives (issued together when the compute is done).

    ``comms`` may be given as one :class:`Comm` or None (no collective) for short.
    """

    compute: Compute = field(default_factory=Compute)
    comms: tuple[Comm, ...] = ()

    def __post_init__(self) -> None:
        comms: object = self.comms
        if comms is None:
            comms = ()
        elif isinstance(comms, Comm):
            comms = (comms,)
        elif isinstance(comms, list):
            comms = tuple(comms)
        if not isinstance(comms, tuple) or not all(isinstance(c, Comm) for c in comms):
            raise WorkloadError(f"must be Comm objects, got {comms!r}", field="comms")
        object.__setattr__(self, "comms", comms)

    @property
    def comm(self) -> Comm | None:
        """The pass's only collective (None without one; an error with several)."""
        if len(self.comms) > 1:
            raise WorkloadError(
                f"this pass has {len(self.comms)} collectives, not one", field="comms"
            )
        return self.comms[0] if self.comms else None


@dataclass(frozen=True)
class Layer:
    """One layer: forward, input-gradient and weight-gradient passes, and its optimizer step.

    Attributes:
        name: unique within the workload.
        forward, input_grad, weight_grad: the passes.
        update_time: a measured optimizer step on the whole NPU (s); or
        update: the optimizer step's kernels (give one of the two).
        params: parameters of the layer (the whole model's count for a model-parallel layer).
        activation_bytes: bytes of activations this layer keeps from its forward to its
            backward, per NPU per iteration (what training holds in HBM besides weights,
            gradients and optimizer state).
        gradient_bytes: bytes of the layer's gradients per NPU when they are not a dense copy
            of its parameters (a sparse embedding gradient); None: ``params`` gradients in the
            workload precision's ``param_bytes``.
    """

    name: str
    forward: Pass = field(default_factory=Pass)
    input_grad: Pass = field(default_factory=Pass)
    weight_grad: Pass = field(default_factory=Pass)
    update_time: float = 0.0
    params: int = 0
    update: Compute = field(default_factory=Compute)
    activation_bytes: float = 0.0
    gradient_bytes: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise WorkloadError("every layer needs a name", field="name")
        _check_amount(self.update_time, "update_time")
        _check_amount(self.activation_bytes, "activation_bytes")
        if self.gradient_bytes is not None:
            _check_amount(self.gradient_bytes, "gradient_bytes")
        if not isinstance(self.update, Compute):
            raise WorkloadError(f"must be a Compute, got {self.update!r}", field="update")
        if self.update_time and not self.update.empty:
            raise WorkloadError("give update kernels or update_time, not both", field="update")

    @property
    def update_compute(self) -> Compute:
        """The optimizer step as compute: ``update``, else a fixed ``update_time`` (empty when
        neither is given)."""
        if not self.update.empty:
            return self.update
        if self.update_time > 0:
            return Compute(duration=self.update_time)
        return Compute()


@dataclass(frozen=True)
class Workload:
    """A training workload: layers plus how they are parallelised."""

    name: str
    layers: tuple[Layer, ...]
    parallelism: Parallelism = "data"
    bottom_layers: int | None = None
    description: str = ""
    source: str = ""
    batch_per_npu: int | None = None
    precision: str | None = "fp32"
    optimizer: str | None = None

    def __post_init__(self) -> None:
        if self.precision is not None:
            PRECISIONS.get(self.precision, "workload.precision")
        if self.optimizer is not None:
            OPTIMIZERS.get(self.optimizer, "workload.optimizer")
        if not self.layers:
            raise WorkloadError("a workload needs at least one layer", location=self.name)
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise WorkloadError(f"layer names must be unique, {dup!r} repeats", location=self.name)

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    def total_comm_bytes(self, op: str | None = None) -> float:
        """Bytes of all collectives (optionally of one op) in one iteration."""
        total = 0.0
        for layer in self.layers:
            for p in (layer.forward, layer.input_grad, layer.weight_grad):
                for comm in p.comms:
                    if op is None or comm.op == op:
                        total += comm.size
        return total

    def forward_flops(self) -> float:
        return sum(layer.forward.compute.flops for layer in self.layers)

    def computes(self) -> list[Compute]:
        """Every pass's compute and every optimizer step, in layer order."""
        out = []
        for layer in self.layers:
            out += [layer.forward.compute, layer.input_grad.compute, layer.weight_grad.compute]
            out.append(layer.update_compute)
        return out

    def iteration_flops(self) -> float:
        """FLOPs of one iteration per NPU: all passes and optimizer steps."""
        return sum(c.flops for c in self.computes())

    def iteration_hbm_bytes(self) -> float:
        """HBM bytes of one iteration's kernels per NPU (collectives not included)."""
        return sum(c.hbm_bytes for c in self.computes())

    def matrix_dtypes(self) -> list[str]:
        """The math dtypes of the workload's matrix kernels (:func:`matrix_dtypes`)."""
        return matrix_dtypes(self.computes())


def matrix_dtypes(computes: Iterable[Compute]) -> list[str]:
    """The math dtypes of the matrix kernels (GEMM, attention, and roofline kernels that name
    one) of ``computes``, in first-use order."""
    seen: dict[str, None] = {}
    for c in computes:
        for k in c.kernels:
            for kernel in [x for o in k.options for x in o] if isinstance(k, Choice) else [k]:
                if isinstance(kernel, (Gemm, Attention, Roofline)) and kernel.dtype is not None:
                    seen.setdefault(kernel.dtype, None)
    return list(seen)
