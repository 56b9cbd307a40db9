"""The endpoint comparison: several endpoint kinds on one case, each in its best variant, for
every run kind (collective, training graph, LLM).

For every kind asked for (default: the registered kinds marked ``default_compare``: the
baseline, ACE, the ideal endpoint), every variant the kind declares is run (the baseline's
compute-unit/HBM splits; one run for kinds without variants) and the fastest (smallest
figure of merit) is kept, since the paper compares against the best baseline. Speedups are
figure ratios against the best variant of the *reference* kind (``baseline``); each result
type's ``gains`` (a training run's ``net_util_effective``: bytes sent / (time with
communication in flight x egress capacity)) are reported as ratios against the reference
too. ``no_overlap`` (training graphs) adds the reference kind in its last variant (variants
are listed from least to most resources for communication) with every collective blocking.

A comparison is a plan of jobs (:func:`plan`), run anywhere (:func:`run_jobs`: this process or
local worker processes; :func:`attempt` for studies that report a refused run as a result),
then assembled (:func:`assemble`); the paper reproduction and the 2026 study plan many cases
into one pool and assemble each with the same code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..config.experiment import RunOptions
from ..errors import AcesimError, ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS, reference_kind
from ..processes import process_pool
from .estimate import Estimate
from .kinds import make_run_case
from .single import execute, variant_case

__all__ = [
    "EndpointOutcome",
    "Comparison",
    "Job",
    "Refused",
    "plan",
    "run_jobs",
    "attempt",
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
    return [reference] + [n for n in names if n != reference]


@dataclass(frozen=True)
class Refused:
    """A run the simulation refused (:func:`attempt`): its variant and the reason."""

    variant: str
    reason: str


@dataclass
class EndpointOutcome:
    """One endpoint kind in a comparison: its fastest variant, every variant that ran, and
    those refused (variant -> reason)."""

    kind: str
    label: str
    best: Any
    tried: list[Any]
    refused: dict[str, str] = field(default_factory=dict)


@dataclass
class Comparison:
    """Endpoint kinds side by side on one case (see module docstring). ``refused``: kinds
    none of whose variants ran, with the reasons."""

    endpoints: dict[str, EndpointOutcome]
    reference: str
    no_overlap: Any | None = None
    refused: dict[str, str] = field(default_factory=dict)

    def speedup(self, kind: str) -> float:
        """Speedup of ``kind``'s best variant over the reference's (figure ratio)."""
        return float(self.best_baseline.figure / self.endpoints[kind].best.figure)

    def gain(self, kind: str, name: str) -> float:
        """The figure behind gain ``name`` (a key of the results' ``gains``) of ``kind``'s
        best variant over the reference's."""
        figure = self.best_baseline.gains[name]
        base = getattr(self.best_baseline, figure)
        value = getattr(self.endpoints[kind].best, figure)
        return float(value / base) if base > 0 else float("inf")

    def net_util_gain(self, kind: str) -> float:
        """Effective network utilisation of ``kind`` over the reference's (training)."""
        return self.gain(kind, "net_util_gain")

    @property
    def best_baseline(self) -> Any:
        """The reference kind's fastest variant."""
        return self.endpoints[self.reference].best

    @property
    def baselines(self) -> list[Any]:
        """Every variant of the reference kind."""
        return list(self.endpoints[self.reference].tried)

    def best(self, kind: str) -> Any:
        return self.endpoints[kind].best

    def to_pandas(self) -> Any:
        """One row per run: every variant of every kind, with ``kind``, ``best`` (the variant
        kept) and ``speedup`` over the best reference variant, then the run's metrics."""
        import pandas as pd

        reference = self.best_baseline.figure
        rows = []
        for kind, out in self.endpoints.items():
            for r in out.tried:
                row = {"kind": kind, "best": r is out.best, "speedup": reference / r.figure}
                rows.append({**row, **r.metrics()})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        best = self.best_baseline
        endpoints = {}
        for kind, out in self.endpoints.items():
            entry = {"label": out.label, "speedup": self.speedup(kind)}
            entry.update({g: self.gain(kind, g) for g in best.gains})
            entry.update(best=out.best.to_dict(), tried=[r.to_dict() for r in out.tried])
            if out.refused:
                entry["refused"] = dict(out.refused)
            endpoints[kind] = entry
        return {
            "schema": SCHEMA,
            "kind": best.kind,
            "case": best.case(),
            "reference": self.reference,
            "endpoints": endpoints,
            "refused": dict(self.refused),
            "no_overlap": self.no_overlap.to_dict() if self.no_overlap else None,
        }


@dataclass(frozen=True)
class Job:
    """One run of a comparison: its key ``(kind, variant index)`` and its case."""

    key: tuple[Any, ...]
    case: Any
    variant: str


def plan(
    case: Any, endpoints: Sequence[str] | None = None, *, no_overlap: bool = False
) -> list[Job]:
    """Every run of the comparison of ``case`` (see module docstring)."""
    names = check_endpoints(endpoints)
    jobs: list[Job] = []
    for name in names:
        kind = ENDPOINT_KINDS.get(name)
        for i, v in enumerate(kind.variants_of(case.system)):
            jobs.append(Job((name, i), variant_case(case, name, v), v.label))
    if no_overlap:
        if case.kind != "training":
            raise ConfigError("no_overlap", "applies to training graphs (a loop of layers)")
        reference = names[0]
        last = ENDPOINT_KINDS.get(reference).variants_of(case.system)[-1]
        serial = variant_case(case, reference, last).with_options(loop="no_overlap")
        jobs.append(Job((NO_OVERLAP, 0), serial, last.label))
    return jobs


#: A comparison's hooks into one of its runs in this process (:func:`run_jobs`): told the run's
#: cost before it starts, and its graph nodes finished as it runs (progress bars).
EstimateHook = Callable[["Job", Estimate], Any]
ProgressHook = Callable[["Job", int, int], Any]


def run_job(
    job: Job,
    on_estimate: EstimateHook | None = None,
    on_progress: ProgressHook | None = None,
) -> tuple[tuple[Any, ...], Any]:
    """One job's key and result; ``on_estimate(job, estimate)`` is told the run's cost before
    it starts, ``on_progress(job, done, total)`` its graph nodes finished
    (:func:`~acesim.runs.single.execute`)."""
    result, _execution = execute(
        job.case,
        variant=job.variant,
        on_estimate=None if on_estimate is None else partial(on_estimate, job),
        on_progress=None if on_progress is None else partial(on_progress, job),
    )
    return job.key, result


def attempt(job: Job) -> Any:
    """One job's result, or :class:`Refused` with the reason where the simulation refuses
    it (an :class:`~acesim.errors.AcesimError`)."""
    try:
        return run_job(job)[1]
    except AcesimError as err:
        return Refused(job.variant, str(err))


def run_jobs(
    jobs: Sequence[Job],
    workers: int | None = 1,
    progress: Callable[[], Any] | None = None,
    on_estimate: EstimateHook | None = None,
    on_progress: ProgressHook | None = None,
) -> dict[tuple[Any, ...], Any]:
    """Run ``jobs`` in this process (``workers=1``) or on local worker processes (None: one
    per CPU); results by job key, independent of the number of workers. ``progress()``: told
    as each run finishes; ``on_estimate`` and ``on_progress`` (:func:`run_job`): told of each
    run as it goes, where the runs are in this process (worker processes tell no one)."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ConfigError("workers", "must be at least 1", workers)
    results: dict[tuple[Any, ...], Any] = {}
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            key, result = run_job(job, on_estimate, on_progress)
            results[key] = result
            if progress is not None:
                progress()
        return results
    # Workers exit when this process dies (a SIGKILLed `acesim reproduce` leaves none behind).
    with process_pool(min(workers, len(jobs)), preload=["acesim.runs.compare"]) as pool:
        for key, result in pool.map(run_job, jobs, chunksize=1):
            results[key] = result
            if progress is not None:
                progress()
    return results


def _outcome(name: str, ordered: list[Any]) -> EndpointOutcome | str:
    """Kind ``name``'s outcome from its variants' results in order, or why none ran."""
    tried = [r for r in ordered if not isinstance(r, Refused)]
    refused = {r.variant: r.reason for r in ordered if isinstance(r, Refused)}
    if not tried:
        return "; ".join(f"{v}: {why}" for v, why in refused.items()) or "not run"
    best = tried[0]
    for r in tried[1:]:
        if r.figure < best.figure:
            best = r
    return EndpointOutcome(name, ENDPOINT_KINDS.get(name).label, best, tried, refused)


def assemble(
    results: Mapping[tuple[Any, ...], Any], endpoints: Sequence[str] | None = None
) -> Comparison:
    """The comparison from the results of its jobs (keys as :func:`plan` makes them; a
    :class:`Refused` run is listed with its reason, a kind none of whose runs ran in
    :attr:`Comparison.refused`)."""
    names = check_endpoints(endpoints)
    outcomes: dict[str, EndpointOutcome] = {}
    refused: dict[str, str] = {}
    for name in names:
        ordered = [r for k, r in sorted(_keyed(results, name))]
        out = _outcome(name, ordered)
        if isinstance(out, str):
            refused[name] = out
        else:
            outcomes[name] = out
    serial = results.get((NO_OVERLAP, 0))
    return Comparison(outcomes, names[0], serial, refused)


def _keyed(results: Mapping[tuple[Any, ...], Any], kind: str) -> list[tuple[tuple[str, int], Any]]:
    found = [((k[0], int(k[1])), r) for k, r in results.items() if k[0] == kind]
    if not found:
        raise ConfigError("endpoints", f"no results for endpoint kind {kind!r}")
    return found


def compare(
    system: Any = "ace-isca21",
    workload: Any = "resnet50",
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    endpoints: Sequence[str] | None = None,
    no_overlap: bool = False,
    workers: int | None = 1,
    progress: Callable[[], Any] | None = None,
    **inputs: Any,
) -> Comparison:
    """Endpoint kinds side by side on one case, each in its best variant (see module).

    Takes the same arguments as :func:`acesim.run` (a workload given by name is loaded with the
    system's own settings for it, as ``acesim run`` does; an LLM model with ``parallel=``,
    ``global_batch=``, ``seq=``...), plus ``endpoints`` (kinds to compare; default
    :func:`default_endpoints`), ``no_overlap`` and ``workers``. ``progress()`` is called once
    per finished run (:func:`count_runs` gives the total).
    """
    case = make_run_case(system, workload, options, **inputs)
    jobs = plan(case, endpoints, no_overlap=no_overlap)
    return assemble(run_jobs(jobs, workers, progress), endpoints)


def count_runs(case: Any, endpoints: Sequence[str] | None = None, no_overlap: bool = False) -> int:
    """How many runs the comparison of ``case`` makes (for progress bars)."""
    return len(plan(case, endpoints, no_overlap=no_overlap))
