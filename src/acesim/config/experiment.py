"""The experiment document: a system, a workload and how to run it (what `acesim run`, the
Python API, each sweep point and each reproduction case execute).

``system`` is a preset name, a file path, or an inline system table; ``overrides`` (dotted paths
into the system document) are applied on top. Sweeps set values by dotted path: paths starting
with ``workload.`` or ``run.`` address those tables, every other path addresses the system
(``npu.hbm_bandwidth``, ``endpoint.kind``).

Measurement (:class:`RunOptions`): ``iterations`` are simulated; the first ``warmup`` are
dropped (the first iteration starts cold: no collective of a previous iteration delays its
forward pass); the steady state is the mean over the iterations after them, each measured from
its start to the start of the next, so at least ``warmup + 2`` iterations are needed. Without
warm-up the whole run is measured (from time 0 to the last event, its communication tail
included, divided by the iterations): a window that ends when the next iteration starts would
cut the cold first iteration short (its updates and collectives still running, no earlier
iteration's spilling into it), so that it could measure less than its own compute.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..registry import listed
from .errors import FieldRuleError
from .system import Strict, defaults
from .validators import NonNegativeInt, NpuCount, PositiveBytes, PositiveInt, PrecisionName
from .variation import (
    ComputeSpread,
    LinkChange,
    NpuType,
    Straggler,
    Variation,
    placement_problem,
)

__all__ = ["WorkloadConfig", "RunOptions", "ExperimentConfig", "measurement_problem"]


def measurement_problem(iterations: int, warmup: int) -> str | None:
    """Why ``iterations`` with ``warmup`` dropped cannot give a steady state (None if they
    can); the rule of the module docstring."""
    if warmup == 0:
        return None
    if iterations < warmup + 2:
        return (
            f"must be at least warm-up + 2 = {warmup + 2} (each measured iteration runs from "
            f"its start to the next one's), got {iterations}; or set the warm-up to 0 (the "
            "whole run measured, its tail included)"
        )
    return None


class WorkloadConfig(Strict):
    """Which workload: a zoo name or a workload file, and its parameters."""

    name: str = Field("resnet50", description="zoo name or path to a workload file")
    batch_per_npu: PositiveInt | None = Field(
        None, description="samples per NPU per iteration (None: the system's or the model's)"
    )
    precision: PrecisionName = Field(
        None,
        description="training precision (acesim.precision.PRECISIONS: fp32, amp_fp16, bf16, "
        "...; None: the system's or the model's)",
    )


#: Most messages a run may be estimated to send before it is refused (``run.max_messages``):
#: 10**8 messages is minutes to about an hour of CPU at the 1.2e-6 to 4e-5 s a message measured
#: for the run kinds on a 2-core machine of the CI kind (acesim.runs.estimate.RUN_COSTS), so a
#: request that could never finish is refused at once with its estimate, and a long one is run
#: when asked.
MAX_MESSAGES = 10**8

#: Most micro-batches one LLM iteration may have, times the iterations
#: (``run.max_micro_batches``): each adds about 0.2 s and 1.6 MB of simulation (measured on the CI
#: machine kind: llama3-8b on one node), so 4,096 is about a quarter of an hour, and
#: ``--global-batch 10**12`` is refused at once instead of never ending.
MAX_MICRO_BATCHES = 4096


class RunOptions(Strict):
    """How to run: iterations and warm-up, symmetric/exact, loop, network size or nodes, search."""

    iterations: PositiveInt = Field(3, description="iterations simulated")
    warmup: NonNegativeInt = Field(1, description="first iterations dropped before measuring")
    mode: Literal["symmetric", "class", "exact", "composed"] = Field(
        "symmetric",
        description="exact: simulate every NPU; symmetric or class: the fewest NPUs that "
        "stand for every rank (one, or one per class of identical ranks), unless something "
        "makes ranks differ: then exact mode, and the result says why "
        "(acesim.training.strategy); composed (LLM runs): class mode with each distinct "
        "pipeline pass simulated once alone (acesim.training.compose: an approximation, its "
        "error measured). LLM runs take symmetric (the default) as composed where the "
        "iteration composes, class mode elsewhere; class asks for class mode's full "
        "simulation",
    )
    loop: str = Field("layerwise", description="training loop (acesim.training.loops.LOOPS)")
    bucket_size: PositiveBytes = Field(25 * 2**20, description="bucketed loop: bytes per bucket")
    shape: list[NpuCount] | None = Field(None, description="override the network dimension sizes")
    npus: NpuCount | None = Field(
        None, description="resize the network to this many NPUs (keeps the local dimension)"
    )
    nodes: NpuCount | None = Field(
        None,
        description="scale the system out to this many nodes (appends its [scale_out] "
        "dimension; see acesim.config.scaleout)",
    )
    search: bool = Field(
        False,
        description="run every variant of the endpoint kind (the baseline's splits) and "
        "report the fastest",
    )
    stragglers: list[Straggler] = Field(
        default_factory=list,
        description="ranks whose compute kernels run slower (exact mode; acesim.config.variation)",
    )
    compute_spread: ComputeSpread | None = Field(
        None, description="seeded per-rank compute slowdowns (exact mode; acesim.config.variation)"
    )
    links: list[LinkChange] = Field(
        default_factory=list,
        description="exact mode: degraded, re-timed or failed links (acesim.config.variation)",
    )
    npu_types: list[NpuType] = Field(
        default_factory=list,
        description="exact mode: ranks on another NPU (a preset and/or [npu] fields changed; "
        "acesim.config.variation)",
    )
    placement: list[int] | None = Field(
        None,
        description="exact mode: workload rank r runs on NPU position placement[r] (a "
        "permutation of 0..n-1; acesim.workload.placement)",
    )
    stop: Literal["end", "measured"] = Field(
        "end",
        description="end: every iteration simulated to its end; measured (training graphs): "
        "stop once every figure of the measured window is final (with a warm-up: the last "
        "iteration started and every earlier one ended), the last iteration not run to its "
        "end (about a third less work at 3 iterations, the same figures); the result's "
        "makespan is then that instant. Without a warm-up the whole run is measured and runs "
        "to its end either way",
    )
    max_messages: PositiveInt = Field(
        MAX_MESSAGES,
        description="the work bound: a run estimated to send more messages is refused before "
        "it starts, with its estimate (raise it knowingly)",
    )
    max_micro_batches: PositiveInt = Field(
        MAX_MICRO_BATCHES,
        description="LLM runs: the work bound on micro-batches an iteration (x iterations), "
        "refused with the estimate before the graphs are built (raise it knowingly)",
    )

    @field_validator("placement", mode="before")
    @classmethod
    def _placement(cls, v: Any) -> Any:
        if v is not None:
            problem = placement_problem(v)
            if problem is not None:
                raise FieldRuleError("", problem, v)
        return v

    @field_validator("loop")
    @classmethod
    def _loop(cls, v: str) -> str:
        loops = listed("training loop")
        if loops is not None and v not in loops:
            err = loops.unknown(v)
            raise FieldRuleError("", err.rule, v, hint=err.hint)
        return v

    @model_validator(mode="after")
    def _measurable(self) -> RunOptions:
        problem = measurement_problem(self.iterations, self.warmup)
        if problem:
            raise FieldRuleError("iterations", problem)
        if self.shape is not None and self.npus is not None:
            raise FieldRuleError("npus", "give either npus or shape, not both", self.npus)
        if self.nodes is not None and (self.shape is not None or self.npus is not None):
            other = "npus" if self.npus is not None else "shape"
            raise FieldRuleError("nodes", f"give either nodes or {other}, not both", self.nodes)
        return self

    @property
    def exact(self) -> bool:
        return self.mode == "exact"

    @property
    def variation(self) -> Variation:
        """The stragglers, compute spread, link changes and NPU types, for the platform."""
        return Variation(
            tuple(self.stragglers),
            self.compute_spread,
            tuple(self.links),
            tuple(self.npu_types),
        )


class ExperimentConfig(Strict):
    """system + workload + run options."""

    system: str | dict[str, Any] = "ace-isca21"
    overrides: dict[str, Any] = Field(default_factory=dict)
    workload: WorkloadConfig = Field(default_factory=defaults(WorkloadConfig))
    run: RunOptions = Field(default_factory=defaults(RunOptions))
