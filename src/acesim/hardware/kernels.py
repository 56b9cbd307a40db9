"""What a compute kernel does, independent of the NPU it runs on.

A pass of a workload is a sequence of kernels, run one after another on the NPU's compute
stream. Each kind carries what its time depends on (shapes and dtypes, or bytes), never a time:
:mod:`acesim.hardware.kernel_model` turns a kernel into a time on a given NPU.

* :class:`Gemm` — ``batch`` products ``[M,K] x [K,N]`` (convolutions as implicit GEMMs), math
  in ``dtype``; inputs in ``dtype`` (FP8 GEMMs read FP8 copies), output in ``out_dtype``. An
  implicit GEMM's operand that is never stored (a convolution gathers the ``[M,K]`` im2col
  matrix from its input tensor's windows) gives the elements that do cross HBM
  (``a_elems``, ``b_elems``, ``c_elems`` per product).
* :class:`Attention` — fused (FlashAttention-style) attention over ``heads`` (batch x heads)
  independent sequences: forward ``4 q kv d`` FLOPs per head (half when causal), backward
  2.5x that (five matrix products instead of two); Q, K, V, O (and dO, dQ, dK, dV backward)
  cross HBM once.
* :class:`Stream` — a memory-bound kernel (element-wise, normalisation, reductions, optimizer
  steps): bytes read, bytes written, and FP32 FLOPs on the non-matrix units.
* :class:`Roofline` — only totals are known (ASTRA-sim or Chakra inputs): FLOPs in ``dtype``
  (None: the NPU's fastest listed dtype, the best it offers) and HBM bytes, optionally the
  thread-blocks.
* :class:`Fixed` — a time measured on the whole NPU (s); on fewer units it runs slower in
  proportion; its HBM bytes if known.
* :class:`Choice` — algorithms that compute the same thing (a convolution as an implicit GEMM
  or by Winograd's minimal filtering); the NPU runs the one fastest alone on it, as cuDNN's
  autotuner (``cudnn.benchmark``) and cuBLAS's heuristics pick. Its FLOPs and bytes, for
  reports, are the first option's (the canonical algorithm's).

All sizes are elements (GEMM and attention dimensions) or bytes (``*_bytes``); FLOPs count a
multiply-add as two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from ..errors import WorkloadError
from ..precision import DTYPES, dtype_bytes

__all__ = ["Attention", "Choice", "Fixed", "Gemm", "Kernel", "Roofline", "Stream", "nameless"]


def _amount(value: float, field: str, *, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadError(f"must be a number, got {value!r}", field=field)
    if not math.isfinite(value):
        raise WorkloadError(f"must be a finite number, got {value}", field=field)
    if value < 0 or (positive and value == 0):
        bound = "positive" if positive else "not be negative"
        raise WorkloadError(f"must be {bound}, got {value}", field=field)


def _dtype(name: str | None, field: str) -> None:
    if name is not None and name not in DTYPES:
        raise WorkloadError(
            f"unknown dtype {name!r}; expected one of {DTYPES.choices()}", field=field
        )


@dataclass(frozen=True)
class Gemm:
    """``batch`` matrix products ``[m,k] x [k,n]`` in ``dtype`` (see the module docstring)."""

    m: float
    n: float
    k: float
    dtype: str = "fp32"
    out_dtype: str | None = None
    batch: float = 1
    name: str = "gemm"
    a_elems: float | None = None
    b_elems: float | None = None
    c_elems: float | None = None

    def __post_init__(self) -> None:
        for field in ("m", "n", "k", "batch"):
            _amount(getattr(self, field), f"gemm.{field}", positive=True)
        for field in ("a_elems", "b_elems", "c_elems"):
            if getattr(self, field) is not None:
                _amount(getattr(self, field), f"gemm.{field}")
        _dtype(self.dtype, "gemm.dtype")
        _dtype(self.out_dtype, "gemm.out_dtype")

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def output_bytes_per_element(self) -> int:
        if self.out_dtype is not None:
            return dtype_bytes(self.out_dtype)
        return 2 if self.dtype == "fp8" else dtype_bytes(self.dtype)

    @property
    def read_bytes(self) -> float:
        """Both operands once: ``m*k`` and ``k*n`` elements, or ``a_elems`` / ``b_elems``."""
        a = self.m * self.k if self.a_elems is None else self.a_elems
        b = self.k * self.n if self.b_elems is None else self.b_elems
        return self.batch * (a + b) * dtype_bytes(self.dtype)

    @property
    def write_bytes(self) -> float:
        """The output once: ``m*n`` elements per product, or ``c_elems``."""
        c = self.m * self.n if self.c_elems is None else self.c_elems
        return self.batch * c * self.output_bytes_per_element


@dataclass(frozen=True)
class Attention:
    """Fused attention over ``heads`` sequences of ``q_len`` queries and ``kv_len`` keys of
    width ``head_dim``, forward or ``backward``."""

    heads: float
    q_len: float
    kv_len: float
    head_dim: float
    dtype: str = "bf16"
    causal: bool = True
    backward: bool = False
    name: str = "attention"

    def __post_init__(self) -> None:
        for field in ("heads", "q_len", "kv_len", "head_dim"):
            _amount(getattr(self, field), f"attention.{field}", positive=True)
        _dtype(self.dtype, "attention.dtype")

    @property
    def flops(self) -> float:
        fwd = 4.0 * self.heads * self.q_len * self.kv_len * self.head_dim
        if self.causal:
            fwd *= 0.5
        return 2.5 * fwd if self.backward else fwd

    @property
    def _bytes(self) -> int:
        return 2 if self.dtype == "fp8" else dtype_bytes(self.dtype)

    @property
    def read_bytes(self) -> float:
        q = self.heads * self.q_len * self.head_dim
        kv = 2 * self.heads * self.kv_len * self.head_dim
        tensors = (q + kv + 2 * q) if self.backward else (q + kv)  # backward: + O and dO
        return tensors * self._bytes

    @property
    def write_bytes(self) -> float:
        q = self.heads * self.q_len * self.head_dim
        kv = 2 * self.heads * self.kv_len * self.head_dim
        return (q + kv if self.backward else q) * self._bytes


@dataclass(frozen=True)
class Stream:
    """A memory-bound kernel: bytes read and written, FP32 FLOPs on the non-matrix units."""

    read_bytes: float
    write_bytes: float = 0.0
    flops: float = 0.0
    name: str = "stream"

    def __post_init__(self) -> None:
        for field in ("read_bytes", "write_bytes", "flops"):
            _amount(getattr(self, field), f"stream.{field}")


def _totals_read(kernel: Roofline | Fixed) -> float:
    """A kernel known by its totals counts all its HBM bytes as read (not told apart)."""
    return kernel.hbm_bytes


def _totals_write(kernel: Roofline | Fixed) -> float:
    return 0.0


@dataclass(frozen=True)
class Roofline:
    """Totals only: FLOPs in ``dtype`` and HBM bytes (read and written, not told apart)."""

    flops: float
    hbm_bytes: float = 0.0
    dtype: str | None = None
    blocks: int | None = None
    name: str = "kernel"

    def __post_init__(self) -> None:
        _amount(self.flops, "flops")
        _amount(self.hbm_bytes, "hbm_bytes")
        _dtype(self.dtype, "dtype")
        if self.blocks is not None:
            if isinstance(self.blocks, bool) or not isinstance(self.blocks, int) or self.blocks < 1:
                raise WorkloadError(
                    f"must be a positive integer, got {self.blocks!r}", field="blocks"
                )

    read_bytes = property(_totals_read)
    write_bytes = property(_totals_write)


@dataclass(frozen=True)
class Fixed:
    """A measured time on the whole NPU (s) and, if known, its HBM bytes."""

    duration: float
    hbm_bytes: float = 0.0
    name: str = "kernel"

    def __post_init__(self) -> None:
        _amount(self.duration, "duration")
        _amount(self.hbm_bytes, "hbm_bytes")

    @property
    def flops(self) -> float:
        return 0.0

    read_bytes = property(_totals_read)
    write_bytes = property(_totals_write)


@dataclass(frozen=True)
class Choice:
    """Alternative kernel sequences for one operation (see the module docstring)."""

    options: tuple[tuple[Gemm | Attention | Stream | Roofline | Fixed, ...], ...]
    name: str = "choice"

    def __post_init__(self) -> None:
        options = tuple(tuple(o) for o in self.options)
        if not options or not all(options):
            raise WorkloadError("needs at least one non-empty option", field="choice.options")
        kinds = (Gemm, Attention, Stream, Roofline, Fixed)
        if not all(isinstance(k, kinds) for o in options for k in o):
            raise WorkloadError("options must be sequences of kernels", field="choice.options")
        object.__setattr__(self, "options", options)

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.options[0])

    @property
    def read_bytes(self) -> float:
        return sum(k.read_bytes for k in self.options[0])

    @property
    def write_bytes(self) -> float:
        return sum(k.write_bytes for k in self.options[0])


Kernel = Gemm | Attention | Stream | Roofline | Fixed | Choice
"""Any kernel kind."""


def nameless(kernel: Kernel) -> tuple[Any, ...]:
    """``kernel`` as a comparable value without its name (the layer it is of): its type and
    its other fields, in order (kernels alike but for their names are planned alike)."""
    get = _FIELDS_BUT_NAME.get(type(kernel))
    if get is None:
        names = [f.name for f in fields(kernel) if f.name != "name"]
        get = _FIELDS_BUT_NAME[type(kernel)] = attrgetter(*names, "name")
    return (type(kernel), *get(kernel)[:-1])


#: each kernel type's getter of its fields but its name, then its name (:func:`nameless`)
_FIELDS_BUT_NAME: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
