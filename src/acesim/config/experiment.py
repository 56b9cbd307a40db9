"""The experiment document: a system, a workload and how to run it (what `acesim run` and each
sweep point execute).

``system`` is a preset name, a file path, or an inline system table; ``overrides`` (dotted paths
into the system document) are applied on top. Sweeps set values by dotted path: paths starting
with ``workload.`` or ``run.`` address those tables, every other path addresses the system
(``npu.hbm_bandwidth``, ``endpoint.kind``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from .system import Strict, defaults


class WorkloadConfig(Strict):
    """Which workload: a zoo name or a workload file, and its parameters."""

    name: str = Field("resnet50", description="zoo name or path to a workload file")
    batch_per_npu: int | None = Field(None, description="samples per NPU per iteration")
    dtype_bytes: int | None = Field(None, description="bytes per element (4 = FP32, 2 = BF16)")

    @field_validator("batch_per_npu", "dtype_bytes")
    @classmethod
    def _pos(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v


class RunOptions(Strict):
    """How to run: iterations, symmetric/exact, loop variant, network shape override."""

    iterations: int = Field(3, description="iterations simulated; the last is the steady state")
    mode: Literal["symmetric", "exact"] = "symmetric"
    loop: Literal["layerwise", "bucketed", "no_overlap"] = "layerwise"
    bucket_size: float = Field(25 * 2**20, description="bucketed loop: bytes per bucket")
    shape: list[int] | None = Field(None, description="override the network dimension sizes")

    @field_validator("iterations")
    @classmethod
    def _iters(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("bucket_size")
    @classmethod
    def _bucket(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g}")
        return v


class ExperimentConfig(Strict):
    """system + workload + run options."""

    system: str | dict[str, Any] = "ace-isca21"
    overrides: dict[str, Any] = Field(default_factory=dict)
    workload: WorkloadConfig = Field(default_factory=defaults(WorkloadConfig))
    run: RunOptions = Field(default_factory=defaults(RunOptions))
