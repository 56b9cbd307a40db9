"""HBM footprint of training a workload: what one NPU holds during an iteration.

:func:`footprint` gives, in bytes per NPU:

* ``weights``: the parameters in the precision's ``param_bytes``;
* ``gradients``: a dense gradient of every parameter in ``param_bytes``, or a layer's
  ``gradient_bytes`` where it says otherwise (a sparse embedding gradient);
* ``optimizer``: the optimizer's state tensors and, when the recipe keeps them, the FP32 master
  weights, in ``state_bytes`` (:func:`.optimizer.state_bytes_per_param`);
* ``activations``: the layers' ``activation_bytes``, all held at once at the start of the
  backward pass (no activation recomputation);
* ``total``: their sum.

Model-parallel layers: the tables of a ``hybrid_dlrm`` workload's embedding (layer 0) are spread
evenly over ``npus`` NPUs, so its weights and optimizer state count ``1 / npus``; every other
layer is replicated. Not counted: workspace and temporary buffers (cuBLAS/cuDNN workspaces,
the gradient all-reduce's buffers, the transient tensors of one kernel), the framework's and
the communication library's own memory, and allocator fragmentation.
"""

from __future__ import annotations

from ..errors import WorkloadError
from ..precision import PRECISIONS
from .model import Workload
from .optimizer import state_bytes_per_param

__all__ = ["footprint"]


def footprint(workload: Workload, *, npus: int = 1) -> dict[str, float]:
    """Bytes per NPU of weights, gradients, optimizer state, activations and their total (see
    the module docstring); ``npus`` spreads a hybrid_dlrm embedding's tables."""
    if isinstance(npus, bool) or not isinstance(npus, int) or npus < 1:
        raise WorkloadError(f"must be a positive integer, got {npus!r}", field="npus")
    if workload.precision is None:
        if workload.params:
            raise WorkloadError(
                "has parameters but no precision, so their bytes are unknown",
                location=workload.name,
                field="precision",
            )
        param_bytes, state = 0.0, 0.0
    else:
        p = PRECISIONS.get(workload.precision, "workload.precision")
        param_bytes = float(p.param_bytes)
        state = state_bytes_per_param(workload.optimizer, p)
    weights = gradients = optimizer = activations = 0.0
    for index, layer in enumerate(workload.layers):
        share = 1.0 / npus if workload.parallelism == "hybrid_dlrm" and index == 0 else 1.0
        weights += layer.params * share * param_bytes
        if layer.gradient_bytes is not None:
            gradients += layer.gradient_bytes
        else:
            gradients += layer.params * share * param_bytes
        if layer.gradient_bytes is None:  # sparse rows are updated in place, without state
            optimizer += layer.params * share * state
        activations += layer.activation_bytes
    return {
        "weights": weights,
        "gradients": gradients,
        "optimizer": optimizer,
        "activations": activations,
        "total": weights + gradients + optimizer + activations,
    }
