"""Number formats and training precision recipes.

A *dtype* is a number format of tensors and of the math on them: its width in bytes, and the
name an NPU lists its peak rate under (``npu.matrix_flops.bf16``). TF32 is stored as FP32
(4 bytes) and multiplied at the TF32 tensor-core rate.

A *precision* is a training recipe: which dtype the matrix math runs in, which dtype
activations are stored in, which dtype parameters and gradients are kept (and communicated)
in, and whether the optimizer keeps FP32 master weights. The recipes are the ones frameworks
ship:

* ``fp32``, ``tf32``: everything FP32 (TF32: FP32 tensors, TF32 tensor-core math).
* ``amp_fp16``, ``amp_bf16``: PyTorch automatic mixed precision: parameters and gradients stay
  FP32 (so gradient all-reduces are FP32), activations and GEMMs are FP16/BF16.
* ``fp16``, ``bf16``: half-precision parameters, gradients and activations with FP32 master
  weights and optimizer state (Megatron-LM, Apex O2).
* ``fp8``: FP8 GEMM inputs (Transformer Engine), BF16 activations, parameters and gradients,
  FP32 master weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Registry

__all__ = ["DTYPES", "PRECISIONS", "Dtype", "Precision", "dtype_bytes"]


@dataclass(frozen=True)
class Dtype:
    """A number format: its name and width (bytes per element)."""

    name: str
    bytes: int
    summary: str


#: Number formats, narrowest last.
DTYPES: Registry[Dtype] = Registry("dtype", "dtype", listed=True)
for _d in (
    Dtype("fp64", 8, "IEEE double"),
    Dtype("fp32", 4, "IEEE single"),
    Dtype("tf32", 4, "stored as FP32, multiplied with a 10-bit mantissa on tensor cores"),
    Dtype("bf16", 2, "bfloat16"),
    Dtype("fp16", 2, "IEEE half"),
    Dtype("fp8", 1, "E4M3/E5M2"),
):
    DTYPES.register(_d.name, _d)


def dtype_bytes(name: str) -> int:
    """Bytes per element of dtype ``name`` (ConfigError naming the known ones otherwise)."""
    return DTYPES.get(name).bytes


@dataclass(frozen=True)
class Precision:
    """A training precision recipe (see the module docstring).

    Attributes:
        name: the recipe's name (``amp_fp16``).
        math: dtype of matrix math (GEMM, convolution, attention); the NPU's peak for it applies.
        activations: dtype activations (and GEMM outputs) are stored in.
        params: dtype parameters and gradients are kept in; gradient collectives move it.
        master: dtype of the optimizer's master weights and state when they differ from
            ``params`` (None: the optimizer updates ``params`` in place).
        summary: one line for listings.
    """

    name: str
    math: str
    activations: str
    params: str
    master: str | None
    summary: str

    @property
    def activation_bytes(self) -> int:
        return dtype_bytes(self.activations)

    @property
    def param_bytes(self) -> int:
        return dtype_bytes(self.params)

    @property
    def math_input_bytes(self) -> int:
        """Bytes per GEMM input element (FP8 GEMMs read FP8 copies of their inputs)."""
        return min(dtype_bytes(self.math), self.activation_bytes)

    @property
    def state_bytes(self) -> int:
        """Bytes per element of the optimizer's state (moments) and master weights."""
        return dtype_bytes(self.master) if self.master else self.param_bytes


#: Training precision recipes.
PRECISIONS: Registry[Precision] = Registry("precision", "precision", listed=True)
for _p in (
    Precision("fp32", "fp32", "fp32", "fp32", None, "FP32 throughout"),
    Precision("tf32", "tf32", "fp32", "fp32", None, "FP32 tensors, TF32 tensor-core math"),
    Precision(
        "amp_fp16", "fp16", "fp16", "fp32", None, "PyTorch AMP: FP16 math, FP32 weights and grads"
    ),
    Precision(
        "amp_bf16", "bf16", "bf16", "fp32", None, "PyTorch AMP: BF16 math, FP32 weights and grads"
    ),
    Precision("fp16", "fp16", "fp16", "fp16", "fp32", "FP16 weights and grads, FP32 master"),
    Precision("bf16", "bf16", "bf16", "bf16", "fp32", "BF16 weights and grads, FP32 master"),
    Precision("fp8", "fp8", "bf16", "bf16", "fp32", "FP8 GEMMs, BF16 tensors, FP32 master"),
):
    PRECISIONS.register(_p.name, _p)
