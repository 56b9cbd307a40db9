"""Running experiments: one training run, and the three-way endpoint comparison.

``compare`` answers the paper's question for one case: the best baseline (the resource split,
from ``endpoint.baseline.splits``, with the shortest iteration), ACE and the ideal endpoint,
side by side with speedups over the best baseline. ``no_overlap`` is the baseline endpoint
with its largest split and every collective blocking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config.errors import config_error_from
from .config.experiment import ExperimentConfig
from .config.paths import set_path
from .config.presets import system_document, system_from_dict
from .config.system import BaselineSplit, SystemConfig
from .errors import ConfigError
from .hardware.platform import Platform
from .results.run import RunResult, summarize
from .results.trace import enable_tracing
from .training.executor import GraphExecutor
from .training.graph import Graph
from .training.loops import build_graph
from .workload.model import Workload


def experiment_from_dict(doc: dict[str, Any]) -> ExperimentConfig:
    """Validate an experiment document (ConfigError naming the field)."""
    try:
        return ExperimentConfig.model_validate(doc)
    except ValidationError as exc:
        raise config_error_from(exc, ExperimentConfig) from None


def shape_for(system_doc: dict[str, Any], npus: int) -> list[int]:
    """Dimension sizes for ``npus`` NPUs: the first (local) size is kept, the rest split evenly.

    Raises ConfigError when ``npus`` is not a multiple of the local size.
    """
    dims = system_doc.get("network", {}).get("dimensions", [])
    if not dims:
        raise ConfigError("network.dimensions", "must list at least one dimension")
    if npus < 1:
        raise ConfigError("--npus", "must be at least 1", npus)
    if len(dims) == 1:
        return [npus]
    local = int(dims[0].get("size", 1))
    if npus % local:
        raise ConfigError("--npus", f"must be a multiple of the local dimension size {local}", npus)
    rest = npus // local
    sizes = [1] * (len(dims) - 1)
    # Distribute prime factors, largest first, onto the currently smallest dimension.
    factors = []
    n, p = rest, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    for f in sorted(factors, reverse=True):
        i = sizes.index(min(sizes))
        sizes[i] *= f
    return [local] + sorted(sizes)


def resolve_system_doc(exp: ExperimentConfig) -> dict[str, Any]:
    """The system document of ``exp`` with overrides and the shape applied."""
    doc = dict(exp.system) if isinstance(exp.system, dict) else system_document(exp.system)
    for path, value in exp.overrides.items():
        doc = set_path(doc, path, value)
    if exp.run.shape is not None:
        dims = doc.get("network", {}).get("dimensions", [])
        if len(exp.run.shape) != len(dims):
            raise ConfigError(
                "run.shape",
                f"must give one size per network dimension ({len(dims)})",
                exp.run.shape,
            )
        for i, size in enumerate(exp.run.shape):
            doc = set_path(doc, f"network.dimensions[{i}].size", size)
        doc.get("network", {}).pop("npus", None)
    return doc


def resolve_system(exp: ExperimentConfig) -> SystemConfig:
    origin = exp.system if isinstance(exp.system, str) else ""
    return system_from_dict(resolve_system_doc(exp), origin=origin)


def chakra_source(name: str) -> str | None:
    """``name`` as a Chakra trace source (a ``.et`` file or a ``<prefix>`` of ``.<rank>.et``)."""
    if name.endswith(".et") or Path(f"{name}.0.et").exists():
        return name
    return None


def load_experiment_workload(
    exp: ExperimentConfig, system: SystemConfig | None = None
) -> Workload | Graph:
    """The workload (zoo/file) or, for Chakra traces, the execution graph."""
    from .workload.loader import load_workload

    batch, dtype = exp.workload.batch_per_npu, exp.workload.dtype_bytes
    repro = system.reproduction if system is not None else None
    if repro is not None and exp.workload.name in repro.workloads:
        # The system's own per-NPU settings for this workload, unless the user gave them.
        preset = repro.workloads[exp.workload.name]
        batch = batch if batch is not None else preset.batch_per_npu
        dtype = dtype if dtype is not None else preset.dtype_bytes
    source = chakra_source(exp.workload.name)
    if source is not None:
        from .workload.chakra import read_chakra

        for option in ("batch_per_npu", "dtype_bytes"):
            if getattr(exp.workload, option) is not None:
                raise ConfigError(f"workload.{option}", "does not apply to Chakra traces")
        sizes = list(system.network.shape) if system is not None else None
        return read_chakra(source, dim_sizes=sizes)

    return load_workload(exp.workload.name, batch_per_npu=batch, dtype_bytes=dtype)


def run_system(
    system: SystemConfig,
    workload: Workload | Graph,
    *,
    iterations: int = 3,
    loop: str = "layerwise",
    bucket_size: float = 25 * 2**20,
    exact: bool = False,
    trace: bool = False,
) -> tuple[RunResult, Any]:
    """Run ``workload`` on ``system``; returns the result and the execution (for traces).

    ``trace``: record what :func:`acesim.results.trace.write_trace` needs (chunk phases, HBM
    and link samples) during the run.
    """
    if isinstance(workload, Graph):
        graph = workload
        name = workload.name
    else:
        graph = build_graph(workload, iterations, loop, bucket_size)  # type: ignore[arg-type]
        name = workload.name
    platform = Platform(system, exact=exact)
    if trace:
        enable_tracing(platform)
    execution = GraphExecutor(platform, graph).run()
    result = summarize(execution, system=system.name, workload=name, loop=loop)
    result.assumptions = sorted(f for f, s in system.sources.items() if s.kind == "assumption")
    if system.endpoint.kind == "baseline":
        b = system.endpoint.baseline
        result.split = {
            "comm_units": b.comm_units,
            "hbm_sharing": b.hbm_sharing,
            "hbm_share": b.hbm_share if b.hbm_sharing == "static" else None,
            "hbm_weight": b.hbm_weight if b.hbm_sharing == "fair" else None,
        }
    return result, execution


def run_experiment(exp: ExperimentConfig) -> RunResult:
    """One run as the experiment document says."""
    system = resolve_system(exp)
    workload = load_experiment_workload(exp, system)
    result, _ = run_system(
        system,
        workload,
        iterations=exp.run.iterations,
        loop=exp.run.loop,
        bucket_size=exp.run.bucket_size,
        exact=exp.run.mode == "exact",
    )
    return result


def run_point(doc: dict[str, Any]) -> dict[str, Any]:
    """Sweep entry point: an experiment document in, flat metrics out."""
    result = run_experiment(experiment_from_dict(doc))
    out: dict[str, Any] = dict(result.metrics())
    out["endpoint"] = result.endpoint
    out["npus"] = result.npus
    return out


def with_split(system: SystemConfig, kind: str, split: Any = None) -> SystemConfig:
    """A copy of ``system`` with endpoint ``kind`` (and a baseline split)."""
    copy = system.model_copy(deep=True)
    copy.endpoint.kind = kind  # type: ignore[assignment]
    if split is not None:
        copy.endpoint.baseline.comm_units = split.comm_units
        if split.hbm_share is not None:
            copy.endpoint.baseline.hbm_share = split.hbm_share
        if split.hbm_weight is not None:
            copy.endpoint.baseline.hbm_weight = split.hbm_weight
    return copy


@dataclass
class Comparison:
    """Best baseline, ACE, ideal (and no-overlap) for one case."""

    baselines: list[RunResult]
    best_baseline: RunResult
    ace: RunResult
    ideal: RunResult
    no_overlap: RunResult | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup_ace(self) -> float:
        return self.best_baseline.iteration_time / self.ace.iteration_time

    @property
    def speedup_ideal(self) -> float:
        return self.best_baseline.iteration_time / self.ideal.iteration_time

    @property
    def net_util_gain(self) -> float:
        base = self.best_baseline.net_util_mean
        return self.ace.net_util_mean / base if base > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "acesim.comparison/1",
            "best_baseline": self.best_baseline.to_dict(),
            "baselines": [b.to_dict() for b in self.baselines],
            "ace": self.ace.to_dict(),
            "ideal": self.ideal.to_dict(),
            "no_overlap": self.no_overlap.to_dict() if self.no_overlap else None,
            "speedup_ace": self.speedup_ace,
            "speedup_ideal": self.speedup_ideal,
            "net_util_gain": self.net_util_gain,
        }


def compare(
    system: SystemConfig,
    workload: Workload | Graph,
    *,
    no_overlap: bool = False,
    progress: Any = None,
    **run_options: Any,
) -> Comparison:
    """Baseline splits, ACE and ideal on one case (see module docstring).

    ``run_options`` are :func:`run_system`'s (iterations, loop, bucket_size, exact).
    """
    splits: list[BaselineSplit | None] = list(system.endpoint.baseline.splits) or [None]
    kw = dict(run_options)

    def one(cfg: SystemConfig, **over: Any) -> RunResult:
        args = {**kw, **over}
        result, _ = run_system(cfg, workload, **args)
        if progress is not None:
            progress()
        return result

    baselines = [one(with_split(system, "baseline", s)) for s in splits]
    best = min(baselines, key=lambda r: r.iteration_time)
    ace = one(with_split(system, "ace"))
    ideal = one(with_split(system, "ideal"))
    serial = None
    if no_overlap:
        real = [s for s in splits if s is not None]
        biggest = max(real, key=lambda s: s.comm_units) if real else None
        serial = one(with_split(system, "baseline", biggest), loop="no_overlap")
    return Comparison(baselines, best, ace, ideal, serial)


def comparison_runs(system: SystemConfig, no_overlap: bool = False) -> int:
    """How many runs :func:`compare` makes (for progress bars)."""
    return max(1, len(system.endpoint.baseline.splits)) + 2 + (1 if no_overlap else 0)

