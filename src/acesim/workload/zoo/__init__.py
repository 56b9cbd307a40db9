"""The model zoo: training workloads built from published architectures.

Every figure (FLOPs, HBM bytes, parameters, collective sizes) is computed from layer shapes by
the formulas in :mod:`.costs`; the modules state their variant, sources and assumptions:

* ``resnet50`` — ResNet-50 v1.5, ImageNet 224x224, data parallel (:mod:`.resnet50`);
* ``gnmt`` — GNMT v2, 8+8 LSTM layers x 1024, shared 32,320-token vocabulary (:mod:`.gnmt`);
* ``dlrm`` — MLPerf DLRM on Criteo Terabyte, hybrid parallel (:mod:`.dlrm`);
* ``gpt`` — a GPT-2-medium-shaped decoder transformer, data parallel (:mod:`.gpt`).

Every pass is the sequence of kernels the model's framework launches (GEMMs with their shapes,
fused attention, memory-bound element-wise kernels), every layer with parameters has its
optimizer step as a kernel (``Layer.update``, :mod:`..optimizer`), and every layer says the
activation bytes it keeps for its backward (:func:`..footprint.footprint` adds them up).

``load_zoo(name, batch_per_npu=..., precision=..., optimizer=..., **options)`` builds one;
``None`` takes the model's documented default. Options are model-specific (``layers=4`` for
GNMT, ``max_rows`` for DLRM, ...); ``zoo_options(name)`` lists them with their defaults.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

from ...errors import WorkloadError
from ...precision import PRECISIONS
from ..model import Workload
from ..optimizer import OPTIMIZERS
from . import checks, dlrm, gnmt, gpt, resnet50

__all__ = ["zoo_names", "load_zoo", "zoo_options"]


@dataclass(frozen=True)
class _Entry:
    build: Callable[..., Workload]
    default_batch: int
    default_precision: str
    default_optimizer: str
    options: MappingProxyType[str, object]


def _entry(module: ModuleType) -> _Entry:
    """A model's entry; its options are its ``build``'s keyword-only parameters and defaults."""
    params = inspect.signature(module.build).parameters.values()
    options = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    return _Entry(
        module.build,
        module.DEFAULT_BATCH,
        module.DEFAULT_PRECISION,
        module.DEFAULT_OPTIMIZER,
        MappingProxyType(options),
    )


_ZOO: dict[str, _Entry] = {m.NAME: _entry(m) for m in (resnet50, gnmt, dlrm, gpt)}


def zoo_names() -> list[str]:
    """Names ``load_zoo`` accepts, sorted."""
    return sorted(_ZOO)


def _lookup(name: str) -> _Entry:
    if name not in _ZOO:
        hint = checks.did_you_mean(str(name).lower(), _ZOO)
        raise WorkloadError(
            f"unknown zoo workload {name!r}{hint}; the zoo has {', '.join(zoo_names())}",
            field="name",
        )
    return _ZOO[name]


def zoo_options(name: str) -> dict[str, object]:
    """The model-specific options of ``name`` and their defaults."""
    return dict(_lookup(name).options)


def _check_option(where: str, key: str, value: Any, default: object) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise WorkloadError(f"must be true or false, got {value!r}", location=where, field=key)
        return value
    if isinstance(default, int):
        return checks.positive_int(where, key, value)
    if isinstance(default, tuple):
        return checks.positive_ints(where, key, value)
    if value is not None:  # optional ints (DLRM's max_rows)
        return checks.positive_int(where, key, value)
    return value


def load_zoo(
    name: str,
    *,
    batch_per_npu: int | None = None,
    precision: str | None = None,
    optimizer: str | None = None,
    **options: Any,
) -> Workload:
    """Build the zoo workload ``name``.

    Args:
        name: one of :func:`zoo_names`.
        batch_per_npu: samples (images, sentence pairs, sequences) per NPU per iteration;
            ``None`` = the model's default.
        precision: the training recipe, a :data:`acesim.precision.PRECISIONS` name (``fp32``,
            ``amp_fp16``, ``bf16``, ...): GEMM math and activation dtypes, parameter and
            gradient dtype (gradient all-reduces are ``params * param_bytes``), master weights;
            ``None`` = the model's default.
        optimizer: a :data:`acesim.workload.optimizer.OPTIMIZERS` name (``sgd``,
            ``sgd_momentum``, ``adam``); ``None`` = the model's recipe's.
        options: model-specific shape options (see :func:`zoo_options`).

    Raises:
        WorkloadError: unknown name (with a did-you-mean hint), or a bad parameter (named).
        ConfigError: an unknown precision or optimizer (``workload.precision``,
            ``workload.optimizer``, with the known names).
    """
    entry = _lookup(name)
    where = f"zoo:{name}"
    batch = entry.default_batch if batch_per_npu is None else batch_per_npu
    batch = checks.positive_int(where, "batch_per_npu", batch)
    recipe = PRECISIONS.get(
        entry.default_precision if precision is None else precision, "workload.precision"
    )
    opt = OPTIMIZERS.check(
        entry.default_optimizer if optimizer is None else optimizer, "workload.optimizer"
    )
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key not in entry.options:
            hint = checks.did_you_mean(key, entry.options)
            valid = ", ".join(sorted(entry.options)) or "none"
            raise WorkloadError(
                f"unknown option{hint}; {name} takes {valid}", location=where, field=key
            )
        kwargs[key] = _check_option(where, key, value, entry.options[key])
    return entry.build(batch, recipe, opt, **kwargs)
