"""The jobs document (``acesim jobs SPEC.toml``): several runs sharing one system.

::

    system = "h100-nvswitch-8"      # a preset, a file or a table (as an experiment's)
    nodes = 4                       # optional: scale out ([scale_out]) or npus = N
    iterations = 3                  # each job's, unless it says (warmup as run.warmup)

    [[jobs]]
    name = "a"
    kind = "training"               # a zoo model, a workload file or a Chakra trace
    workload = "resnet50"
    placement = { nodes = "0-1" }   # or npus = "0-7", file = "a.json", or a policy:
                                    # { policy = "packed" | "spread" | "random", count = 16,
                                    #   seed = 7 (random only) }
    [[jobs]]
    name = "b"
    kind = "collective"             # a loop of one collective: op, size, gap between them
    op = "all-reduce"
    size = "64 MiB"
    placement = { policy = "packed", count = 16 }
    after = "a"                     # or start = "2 ms"

The model validates what it can without the system (one-line errors naming the field, the
rule and the value): unique job names, a known job after ``after`` and no cycle of them,
exactly one way to place each job, node and NPU ranges such as ``0-3,6``. What needs the
system (NPUs in range, overlapping placements without ``colocate = true``, a job that does
not fit, a placement that is not a block of the network) is checked when the case is built
(:mod:`acesim.runs.jobs`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .errors import FieldRuleError
from .strict import Strict
from .validators import (
    NonNegativeInt,
    NonNegativeSeconds,
    NpuCount,
    PositiveBytes,
    PositiveInt,
    PrecisionName,
)

__all__ = ["JobPlacement", "JobSpec", "JobsSpec", "parse_ranges", "POLICIES"]

#: Placement policies (``placement.policy``).
POLICIES = ("packed", "spread", "random")

_RANGES = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_ranges(text: str) -> list[int]:
    """``"0-3,6"`` as ``[0, 1, 2, 3, 6]``; ValueError naming the rule when it is not ranges
    of non-negative integers, each ascending, none repeated."""
    compact = text.replace(" ", "")
    if not _RANGES.match(compact) or len(compact) > 200:
        raise ValueError("must be ranges of positions such as '0-3,6'")
    out: list[int] = []
    for part in compact.split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise ValueError(f"range {part!r} runs backwards")
        out.extend(range(first, last + 1))
    if len(set(out)) != len(out):
        raise ValueError("names a position twice")
    return out


class JobPlacement(Strict):
    """Where a job runs: node ranges, NPU ranges, a placement file (job rank r on NPU
    ``file[r]``), or a policy over ``count`` NPUs (``seed``: the random policy's)."""

    nodes: str | None = Field(
        None,
        description="node ranges, e.g. '0-1' (a node: a coordinate of the outermost dimension)",
    )
    npus: str | None = Field(None, description="NPU position ranges, e.g. '0-35'")
    file: str | None = Field(None, description="a JSON list of NPU positions, one per job rank")
    policy: Literal["packed", "spread", "random"] | None = Field(None, description="a policy")
    count: NpuCount | None = Field(None, description="NPUs a policy places")
    seed: NonNegativeInt | None = Field(None, description="the random policy's seed")

    @field_validator("nodes", "npus")
    @classmethod
    def _ranges(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_ranges(value)
            except ValueError as exc:
                raise FieldRuleError("", str(exc), value) from None
        return value

    @model_validator(mode="after")
    def _one_way(self) -> JobPlacement:
        given = [k for k in ("nodes", "npus", "file", "policy") if getattr(self, k) is not None]
        if len(given) != 1:
            raise FieldRuleError(
                "", "must give exactly one of nodes, npus, file, policy", given or None
            )
        if (self.policy is None) != (self.count is None):
            raise FieldRuleError("count", "goes with a policy, and a policy needs it", self.count)
        if (self.policy == "random") != (self.seed is not None):
            raise FieldRuleError("seed", "goes with the random policy, which needs it", self.seed)
        return self


class _Job(Strict):
    name: str = Field(description="the job's name (letters, digits, _ . -)")
    placement: JobPlacement
    start: NonNegativeSeconds = Field(0.0, description="when the job starts, s")
    after: str | None = Field(None, description="a job this one starts after (when it ends)")
    iterations: PositiveInt | None = Field(None, description="iterations (default: the spec's)")
    warmup: NonNegativeInt | None = Field(None, description="warm-up (default: the spec's)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value) or len(value) > 64:
            raise FieldRuleError("", "must be 1-64 letters, digits, _ . or -", value)
        return value


class TrainingJob(_Job):
    """A training graph: a zoo model, a workload file or a Chakra trace prefix."""

    kind: Literal["training"]
    workload: str
    batch_per_npu: PositiveInt | None = None
    precision: PrecisionName = None
    loop: str | None = None


class LlmJob(_Job):
    """LLM training with a Megatron parallel configuration (class of the LLM registry)."""

    kind: Literal["llm"]
    model: str
    parallel: str = ""
    global_batch: PositiveInt | None = None
    micro_batch: PositiveInt | None = None
    seq: PositiveInt | None = None
    recompute: str | None = None


class CollectiveJob(_Job):
    """A loop of one collective over the job's NPUs (an inference-like latency-bound stream
    of small collectives, or a bandwidth probe); ``gap``: idle time before each."""

    kind: Literal["collective"]
    op: str = "all-reduce"
    size: PositiveBytes
    gap: NonNegativeSeconds = Field(0.0, description="time before each collective, s")


JobSpec = Annotated[TrainingJob | LlmJob | CollectiveJob, Field(discriminator="kind")]


class JobsSpec(Strict):
    """The jobs document (module docstring)."""

    system: str | dict[str, Any] = "h100-nvswitch-8"
    overrides: dict[str, Any] = Field(default_factory=dict)
    nodes: PositiveInt | None = None
    npus: NpuCount | None = None
    iterations: PositiveInt = 3
    warmup: NonNegativeInt = 1
    colocate: bool = Field(False, description="jobs may share NPUs (their kernels take turns)")
    jobs: list[JobSpec] = Field(min_length=1, max_length=64)

    @model_validator(mode="after")
    def _dependencies(self) -> JobsSpec:
        names = [job.name for job in self.jobs]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise FieldRuleError(f"jobs[{i}].name", "must be unique", name)
        for i, job in enumerate(self.jobs):
            if job.after is not None and job.after not in names:
                raise FieldRuleError(
                    f"jobs[{i}].after", f"names no job (jobs: {', '.join(names)})", job.after
                )
            if job.after is not None and job.start > 0:
                raise FieldRuleError(f"jobs[{i}].start", "give start or after, not both", job.start)
        after = {job.name: job.after for job in self.jobs}
        for i, job in enumerate(self.jobs):
            seen = [job.name]
            nxt = job.after
            while nxt is not None:
                if nxt in seen:
                    cycle = " -> ".join([*seen, nxt])
                    raise FieldRuleError(f"jobs[{i}].after", f"makes a cycle ({cycle})", job.after)
                seen.append(nxt)
                nxt = after[nxt]
        return self
