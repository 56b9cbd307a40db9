"""How far the reproduction's headline figures move under the assumptions a paper does not pin
down: the same reproduction re-run under each registered variant of the system.

Variants (:data:`VARIANTS`; each a change to the system, applied before the reproduction):

* ``shipped``: the preset as it is (fitted kernels, memory-level-parallelism HBM arbitration,
  PyTorch AMP, the streaming ACE);
* ``ideal_kernels``: kernels at 100% of the roofline (acesim before its kernel model);
* ``drf``: HBM shared by dominant-resource fairness instead of memory-level parallelism;
* ``static_hbm``: the baseline's HBM statically partitioned (the paper's baselines);
* ``fp32``: every workload in FP32 throughout instead of AMP;
* ``store_and_forward``: ACE without pipelining through its SRAM (acesim's ACE before issue
  13);
* ``batch_x4``: four times the batch per NPU (more compute per byte communicated);
* ``dma_half``: ACE's DMA at half its bandwidth.

The baseline's SM split is not a variant: every case already searches it for the best.

``sensitivity_study`` returns, per variant, the headline figures (the keys of
:func:`acesim.experiments.reproduce.headline`) and, per figure, its range over the variants.
Every variant is a whole reproduction (minutes on two cores each), so it is opt-in
(``acesim reproduce --sensitivity``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..config.system import KernelModelConfig, SystemConfig
from ..hardware.endpoints.ace import AceSettings
from ..registry import Registry

__all__ = ["VARIANTS", "SensitivityVariant", "headline_values", "sensitivity_study"]


@dataclass(frozen=True)
class SensitivityVariant:
    """One assumption moved: ``change(system)`` -> the system the reproduction runs on."""

    name: str
    label: str
    change: Callable[[SystemConfig], SystemConfig]


#: The variants, by name (register more with ``VARIANTS.register``).
VARIANTS: Registry[SensitivityVariant] = Registry("sensitivity variant", "--sensitivity")


def _npu(system: SystemConfig, **changes: Any) -> SystemConfig:
    return system.model_copy(update={"npu": system.npu.model_copy(update=changes)})


def _workloads(system: SystemConfig, **changes: Callable[[Any], Any]) -> SystemConfig:
    out = system.model_copy(deep=True)
    if out.reproduction is not None:
        for work in out.reproduction.workloads.values():
            for field, change in changes.items():
                setattr(work, field, change(getattr(work, field)))
    return out


def _ace(system: SystemConfig) -> AceSettings:
    return cast(AceSettings, system.endpoint.settings("ace"))


def _with_kind_settings(system: SystemConfig, kind: str, **changes: Any) -> SystemConfig:
    """``system`` with ``kind``'s settings changed, its endpoint kind unchanged."""
    changed = system.with_endpoint(kind, **changes)
    endpoint = changed.endpoint.model_copy(update={"kind": system.endpoint.kind})
    return changed.model_copy(update={"endpoint": endpoint})


for _variant in (
    SensitivityVariant("shipped", "as shipped", lambda s: s),
    SensitivityVariant(
        "ideal_kernels",
        "ideal roofline kernels",
        lambda s: _npu(s, kernels=KernelModelConfig.model_validate({})),
    ),
    SensitivityVariant("drf", "DRF HBM arbitration", lambda s: _npu(s, hbm_arbitration="drf")),
    SensitivityVariant(
        "static_hbm",
        "static HBM partition (baseline)",
        lambda s: _with_kind_settings(s, "baseline", hbm_sharing="static"),
    ),
    SensitivityVariant(
        "fp32", "FP32 throughout", lambda s: _workloads(s, precision=lambda _: "fp32")
    ),
    SensitivityVariant(
        "store_and_forward",
        "store-and-forward ACE",
        lambda s: _with_kind_settings(s, "ace", mode="store_and_forward"),
    ),
    SensitivityVariant(
        "batch_x4", "4x the batch per NPU", lambda s: _workloads(s, batch_per_npu=lambda b: 4 * b)
    ),
    SensitivityVariant(
        "dma_half",
        "ACE DMA at half its bandwidth",
        lambda s: _with_kind_settings(s, "ace", dma_bandwidth=_ace(s).dma_bandwidth / 2),
    ),
):
    VARIANTS.register(_variant.name, _variant)


#: The headline figures (label, summary key, workload or None), in the paper's order.
FIGURES = (
    ("HBM saving", "hbm_saving_avg", None),
    ("net util gain avg", "net_util_gain_avg", None),
    ("net util gain max", "net_util_gain_max", None),
    ("ResNet-50 avg", "speedup_avg", "resnet50"),
    ("GNMT avg", "speedup_avg", "gnmt"),
    ("DLRM avg", "speedup_avg", "dlrm"),
    ("ResNet-50 max", "speedup_max", "resnet50"),
    ("GNMT max", "speedup_max", "gnmt"),
    ("DLRM max", "speedup_max", "dlrm"),
)


def headline_values(summary: dict[str, Any]) -> dict[str, float | None]:
    """The headline figures of a reproduction summary by label (None: not in this run)."""
    out: dict[str, float | None] = {}
    for label, key, work in FIGURES:
        value = summary.get(key)
        if work is not None:
            value = value.get(work) if isinstance(value, dict) else None
        out[label] = float(value) if isinstance(value, (int, float)) else None
    return out


def sensitivity_study(
    system: SystemConfig,
    *,
    variants: list[str] | None = None,
    reproduce_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Re-run the reproduction of ``system`` under each variant (all by default); per variant
    its headline figures, per figure its ``[min, max]`` over the variants (module)."""
    from .reproduce import reproduce

    names = variants or list(VARIANTS.names())
    for name in names:
        VARIANTS.get(name, "--sensitivity")
    results: dict[str, Any] = {}
    for name in names:
        variant = VARIANTS.get(name)
        with tempfile.TemporaryDirectory() as tmp:
            summary = reproduce(
                variant.change(system),
                Path(tmp),
                figures=False,
                sensitivity=False,
                **(reproduce_kwargs or {}),
            )
        results[name] = {
            "label": variant.label,
            "figures": headline_values(summary),
            "within": sum(1 for d in summary["deviations"] if d["within"]),
        }
    ranges: dict[str, list[float] | None] = {}
    for label, _key, _work in FIGURES:
        values = [r["figures"][label] for r in results.values() if r["figures"][label] is not None]
        ranges[label] = [min(values), max(values)] if values else None
    return {"variants": results, "ranges": ranges}
