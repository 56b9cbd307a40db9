"""Optimizers: the weight update of a layer as one memory-bound kernel, and the state it keeps.

An optimizer step reads every parameter's gradient and weight and the optimizer's state
tensors (moments) and writes the weight and the state back; it is element-wise, so it is a
:class:`~acesim.hardware.kernels.Stream` kernel. Bytes per parameter follow from the precision
(:class:`~acesim.precision.Precision`):

* the gradient is read in ``param_bytes`` (the dtype gradients are kept and reduced in);
* the weight and each state tensor are read and written in ``state_bytes``: the FP32 master
  copy and FP32 moments when the recipe keeps master weights (``precision.master``), else the
  parameters themselves in place;
* with master weights the step also writes the working copy of the weight in ``param_bytes``
  (the half-precision weights the next forward reads; Megatron-LM and Apex O2 write it in the
  same fused kernel).

So per parameter: read ``param_bytes + (1 + s) * state_bytes``, write ``(1 + s) * state_bytes``
(``+ param_bytes`` with master weights), ``s`` being the optimizer's state tensors. FP32 SGD
with momentum: 4 + 8 read, 8 written = 20 B. Adam in BF16 with FP32 master weights: 2 + 12 read,
12 + 2 written = 28 B.

Assumption: the step is fused into one kernel per layer (PyTorch's ``fused=True`` optimizers,
Apex's FusedSGD/FusedAdam), which also unscales FP16 loss-scaled gradients and checks them for
infinities in the same pass (PyTorch's fused optimizers take ``grad_scale`` and ``found_inf``),
so loss scaling adds no kernel. A framework using a multi-tensor launch over all parameters
instead has one kernel for the whole model; the bytes are the same.

FLOPs per parameter (:attr:`Optimizer.flops`; estimates counted from the update formulas of
``torch.optim``, each multiply, add, square root or divide one FLOP; they run on the vector
units and are small next to the bytes):

* ``sgd``: weight decay ``g + wd w`` (2), ``w - lr g`` (2): 4;
* ``sgd_momentum``: weight decay (2), ``buf = mu buf + g`` (2), ``w - lr buf`` (2): 6;
* ``adam`` (AdamW): ``m = b1 m + (1 - b1) g`` (3), ``v = b2 v + (1 - b2) g^2`` (4), the bias
  corrections ``m / (1 - b1^t)``, ``v / (1 - b2^t)`` (2), the step
  ``w - lr m / (sqrt(v) + eps)`` (5: square root, add, divide, multiply, subtract), decoupled
  weight decay ``w - lr wd w`` (2): 16.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware.kernels import Stream
from ..precision import PRECISIONS, Precision
from ..registry import Registry

__all__ = [
    "OPTIMIZERS",
    "Optimizer",
    "state_bytes_per_param",
    "update_bytes_per_param",
    "update_kernel",
]


@dataclass(frozen=True)
class Optimizer:
    """An optimizer: its state tensors per parameter and FLOPs per parameter of a step."""

    name: str
    state_tensors: int
    flops: float
    summary: str


#: Optimizers by name (``Workload.optimizer``).
OPTIMIZERS: Registry[Optimizer] = Registry("optimizer", "optimizer", listed=True)
for _o in (
    Optimizer("sgd", 0, 4.0, "plain SGD with weight decay"),
    Optimizer("sgd_momentum", 1, 6.0, "SGD with momentum (one momentum buffer)"),
    Optimizer("adam", 2, 16.0, "Adam/AdamW (first and second moments)"),
):
    OPTIMIZERS.register(_o.name, _o)


def _precision(precision: Precision | str) -> Precision:
    return PRECISIONS.get(precision) if isinstance(precision, str) else precision


def update_bytes_per_param(optimizer: str, precision: Precision | str) -> tuple[float, float]:
    """(read, written) HBM bytes per parameter of one step (see the module docstring)."""
    opt = OPTIMIZERS.get(optimizer)
    p = _precision(precision)
    tensors = 1 + opt.state_tensors  # the weight (or its master copy) and the state
    read = p.param_bytes + tensors * p.state_bytes
    write = tensors * p.state_bytes + (p.param_bytes if p.master else 0)
    return float(read), float(write)


def update_kernel(optimizer: str, precision: Precision | str, params: float) -> Stream:
    """The optimizer step of ``params`` parameters as one Stream kernel."""
    read, write = update_bytes_per_param(optimizer, precision)
    flops = OPTIMIZERS.get(optimizer).flops
    return Stream(params * read, params * write, params * flops, name=optimizer)


def state_bytes_per_param(optimizer: str | None, precision: Precision | str) -> float:
    """Bytes per parameter the optimizer keeps besides the weights and gradients: its state
    tensors and, with master weights, the master copy (all in ``state_bytes``)."""
    p = _precision(precision)
    tensors = OPTIMIZERS.get(optimizer).state_tensors if optimizer is not None else 0
    master = 1 if p.master else 0
    return float((tensors + master) * p.state_bytes)
