"""The endpoint comparison: several endpoint kinds on one case, each in its best variant.

For every kind asked for (default: the registered kinds marked ``default_compare``: the
baseline, ACE, the ideal endpoint), every variant the kind declares is run (the baseline's
compute-unit/HBM splits; one run for kinds without variants) and the fastest is kept, since
the paper compares against the best baseline. Speedups are iteration-time ratios against the
best variant of the *reference* kind (``baseline``); ``net_util_gain`` is the ratio of
effective network utilisation (bytes sent / (time with communication in flight x egress
capacity)) against the reference. ``no_overlap`` adds the reference kind in its last variant
(variants are listed from least to most resources for communication) with every collective
blocking.

A comparison is a plan of jobs (:func:`plan`), run anywhere (:func:`run_jobs`: this process or
local worker processes), then assembled (:func:`assemble`); the paper reproduction plans many
cases into one pool and assembles each with the same code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.experiment import RunOptions
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS, reference_kind
from ..processes import process_pool
from ..results.run import RunResult
from .case import Case, SystemLike, WorkloadLike, make_case
from .single import execute, variant_case

__all__ = [
    "EndpointOutcome",
    "Comparison",
    "Job",
    "plan",
    "run_jobs",
    "assemble",
    "compare",
    "default_endpoints",
    "check_endpoints",
    "count_runs",
]

SCHEMA = "acesim.comparison/2"
NO_OVERLAP = "no_overlap"


def default_endpoints() -> list[str]:
    """The kinds :func:`compare` runs by default, in registration order."""
    return [name for name, kind in ENDPOINT_KINDS.items() if kind.default_compare]


def check_endpoints(endpoints: Sequence[str] | None, field: str = "endpoints") -> list[str]:
    """The endpoint list to compare (default list when None), the reference kind first;
    ConfigError naming ``field`` for an unknown or repeated kind."""
    names = list(endpoints) if endpoints is not None else default_endpoints()
    if not names:
        raise ConfigError(field, "must name at least one endpoint kind")
    # an alias (sm) stands for its kind (baseline)
    given = names
    names = [ENDPOINT_KINDS.canonical(name, field) for name in given]
    if len(set(names)) != len(names):
        aliases = [f"{g} is {n}" for g, n in zip(given, names, strict=True) if g != n]
        why = f" ({', '.join(aliases)})" if aliases else ""
        raise ConfigError(field, f"names an endpoint kind twice{why}", ",".join(given))
    reference = reference_kind()
    if reference not in names:
        names.insert(0, reference)
    return [reference] + [n for n in names if n != reference]


@dataclass
class EndpointOutcome:
    """One endpoint kind in a comparison: its fastest variant and every variant tried."""

    kind: str
    label: str
    best: RunResult
    tried: list[RunResult]


@dataclass
class Comparison:
    """Endpoint kinds side by side on one case (see module docstring)."""

    endpoints: dict[str, EndpointOutcome]
    reference: str
    no_overlap: RunResult | None = None

    def speedup(self, kind: str) -> float:
        """Iteration-time speedup of ``kind``'s best variant over the reference's."""
        return self.best_baseline.iteration_time / self.endpoints[kind].best.iteration_time

    def net_util_gain(self, kind: str) -> float:
        """Effective network utilisation of ``kind`` over the reference's."""
        base = self.best_baseline.net_util_effective
        value = self.endpoints[kind].best.net_util_effective
        return value / base if base > 0 else float("inf")

    @property
    def best_baseline(self) -> RunResult:
        """The reference kind's fastest variant."""
        return self.endpoints[self.reference].best

    @property
    def baselines(self) -> list[RunResult]:
        """Every variant of the reference kind."""
        return self.endpoints[self.reference].tried

    def best(self, kind: str) -> RunResult:
        return self.endpoints[kind].best

    @property
    def ace(self) -> RunResult:
        return self.best("ace")

    @property
    def ideal(self) -> RunResult:
        return self.best("ideal")

    @property
    def speedup_ace(self) -> float:
        return self.speedup("ace")

    @property
    def speedup_ideal(self) -> float:
        return self.speedup("ideal")

    def to_pandas(self) -> Any:
        """One row per run: every variant of every kind, with ``kind``, ``best`` (the variant
        kept) and ``speedup`` over the best reference variant, then the run's metrics."""
        import pandas as pd

        reference = self.best_baseline.iteration_time
        rows = []
        for kind, out in self.endpoints.items():
            for r in out.tried:
                row: dict[str, Any] = {
                    "kind": kind,
                    "best": r is out.best,
                    "speedup": reference / r.iteration_time,
                }
                row.update(r.metrics())
                rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        info = self.best_baseline.info
        return {
            "schema": SCHEMA,
            "case": {
                "system": info.system,
                "shape": info.shape,
                "npus": info.npus,
                "workload": info.workload,
                "batch_per_npu": info.batch_per_npu,
                "precision": info.precision,
                "loop": info.loop,
                "mode": info.mode,
                "iterations": info.iterations,
                "warmup": info.warmup,
                "measured": info.measured,
                "version": info.version,
            },
            "reference": self.reference,
            "endpoints": {
                kind: {
                    "label": out.label,
                    "speedup": self.speedup(kind),
                    "net_util_gain": self.net_util_gain(kind),
                    "best": out.best.to_dict(),
                    "tried": [r.to_dict() for r in out.tried],
                }
                for kind, out in self.endpoints.items()
            },
            "no_overlap": self.no_overlap.to_dict() if self.no_overlap else None,
        }


@dataclass(frozen=True)
class Job:
    """One run of a comparison: its key ``(kind, variant index)`` and its case."""

    key: tuple[Any, ...]
    case: Case
    variant: str


def plan(
    case: Case, endpoints: Sequence[str] | None = None, *, no_overlap: bool = False
) -> list[Job]:
    """Every run of the comparison of ``case`` (see module docstring)."""
    names = check_endpoints(endpoints)
    jobs: list[Job] = []
    for name in names:
        kind = ENDPOINT_KINDS.get(name)
        for i, v in enumerate(kind.variants_of(case.system)):
            jobs.append(Job((name, i), variant_case(case, name, v), v.label))
    if no_overlap:
        reference = names[0]
        last = ENDPOINT_KINDS.get(reference).variants_of(case.system)[-1]
        serial = variant_case(case, reference, last).with_options(loop="no_overlap")
        jobs.append(Job((NO_OVERLAP, 0), serial, last.label))
    return jobs


def _run_job(job: Job) -> tuple[tuple[Any, ...], RunResult]:
    result, _execution = execute(job.case, variant=job.variant)
    return job.key, result


def run_jobs(
    jobs: Sequence[Job],
    workers: int | None = 1,
    progress: Callable[[], Any] | None = None,
) -> dict[tuple[Any, ...], RunResult]:
    """Run ``jobs`` in this process (``workers=1``) or on local worker processes (None: one
    per CPU); results by job key, independent of the number of workers."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ConfigError("workers", "must be at least 1", workers)
    results: dict[tuple[Any, ...], RunResult] = {}
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            key, result = _run_job(job)
            results[key] = result
            if progress is not None:
                progress()
        return results
    # Workers exit when this process dies (a SIGKILLed `acesim reproduce` leaves none behind).
    with process_pool(min(workers, len(jobs)), preload=["acesim.runs.compare"]) as pool:
        for key, result in pool.map(_run_job, jobs, chunksize=1):
            results[key] = result
            if progress is not None:
                progress()
    return results


def assemble(
    results: Mapping[tuple[Any, ...], RunResult],
    endpoints: Sequence[str] | None = None,
) -> Comparison:
    """The comparison from the results of its jobs (keys as :func:`plan` makes them)."""
    names = check_endpoints(endpoints)
    outcomes: dict[str, EndpointOutcome] = {}
    for name in names:
        tried = [r for (kind, _i), r in sorted(_keyed(results, name))]
        best = tried[0]
        for r in tried[1:]:
            if r.iteration_time < best.iteration_time:
                best = r
        outcomes[name] = EndpointOutcome(name, ENDPOINT_KINDS.get(name).label, best, tried)
    serial = results.get((NO_OVERLAP, 0))
    return Comparison(outcomes, names[0], serial)


def _keyed(
    results: Mapping[tuple[Any, ...], RunResult], kind: str
) -> list[tuple[tuple[str, int], RunResult]]:
    found = [((k[0], int(k[1])), r) for k, r in results.items() if k[0] == kind]
    if not found:
        raise ConfigError("endpoints", f"no results for endpoint kind {kind!r}")
    return found


def compare(
    system: SystemLike = "ace-isca21",
    workload: WorkloadLike = "resnet50",
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    endpoints: Sequence[str] | None = None,
    no_overlap: bool = False,
    batch_per_npu: int | None = None,
    precision: str | None = None,
    workers: int | None = 1,
    progress: Callable[[], Any] | None = None,
    **option_changes: Any,
) -> Comparison:
    """Endpoint kinds side by side on one case, each in its best variant (see module).

    Takes the same arguments as :func:`acesim.run` (a workload given by name is loaded with the
    system's own settings for it, as ``acesim run`` does), plus ``endpoints`` (kinds to compare;
    default :func:`default_endpoints`), ``no_overlap`` and ``workers``. ``progress()`` is called
    once per finished run (:func:`count_runs` gives the total).
    """
    case = make_case(
        system,
        workload,
        options,
        batch_per_npu=batch_per_npu,
        precision=precision,
        **option_changes,
    )
    jobs = plan(case, endpoints, no_overlap=no_overlap)
    return assemble(run_jobs(jobs, workers, progress), endpoints)


def count_runs(case: Case, endpoints: Sequence[str] | None = None, no_overlap: bool = False) -> int:
    """How many runs the comparison of ``case`` makes (for progress bars)."""
    return len(plan(case, endpoints, no_overlap=no_overlap))
