"""Results of jobs sharing a system (:mod:`acesim.runs.jobs`), per job.

Per job, from the shared run's records of its NPUs and its node ids:

* iteration times: iteration k from the first moment a node of it was ready on one of the
  job's NPUs to the next one's (the last to the job's last event); the figure is measured
  as a training run's (:func:`acesim.results.run.summarize`: the warm-up dropped, each
  measured iteration to the next one's start; warm-up 0: the whole job from its start,
  its tail included), so a job alone on the whole system gives its own run's number;
* slowdown: that figure over the same job's figure alone (the same placement, nothing else
  running);
* bound: what bound each second of its representative NPU's measured window
  (:func:`acesim.training.bounds.attribute`, as a training run's ``bound_by``);
* shared: per resource that bound the job's messages (on any of its NPUs), the seconds
  during which another job's messages were bound by that same resource (both at once) —
  whose traffic shared the job's bottleneck, and for how long.

Co-located jobs (one NPU, several jobs) share that NPU's kernel and message attribution: the
bound listener hears activities by NPU, and a job's representative is an NPU no other job
represents where it has one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..intervals import union
from ..training.bounds import BoundRecorder, attribute
from ..training.executor import Execution
from ..training.job_bounds import JobsRecorder
from .protocol import Table
from .run import measured_iterations
from .trace import trace_events

__all__ = ["JobsRecorder", "JobResult", "JobsResult", "job_result", "write_jobs_trace"]


@dataclass
class JobResult:
    """One job's figures (module docstring); times in s."""

    name: str
    kind: str
    workload: str
    npus: int
    iterations: list[float]
    iteration_time: float
    start: float
    end: float
    alone: float | None = None
    slowdown: float | None = None
    bound: str = ""
    bound_by: dict[str, float] = field(default_factory=dict)
    shared: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def shared_with(self) -> dict[str, float]:
        """Per other job, the most seconds an iteration its traffic shared one resource
        bounding this job's (the resource they shared longest)."""
        out: dict[str, float] = {}
        for jobs in self.shared.values():
            for job, seconds in jobs.items():
                out[job] = max(out.get(job, 0.0), seconds)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["shared_with"] = self.shared_with
        return out


def _both(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Seconds in both sorted disjoint span lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(hi - lo, 0.0)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def job_result(
    execution: Execution,
    ids: dict[str, tuple[int, int]],
    reps: dict[str, int],
    plan: Any,
    alone: JobResult | None,
) -> JobResult:
    """``plan``'s figures in ``execution`` (module docstring); ``alone``: its run alone."""
    lo_id, hi_id = ids[plan.name]
    ready: dict[int, float] = {}
    end = 0.0
    for npu in plan.npus:
        for node_id, rec in execution.records[npu].items():
            if lo_id <= node_id < hi_id:
                k = rec.node.iteration
                ready[k] = min(ready.get(k, rec.ready), rec.ready)
                end = max(end, rec.end)
    count_all = plan.graph.iterations
    starts = [ready[k] for k in range(count_all)]
    times = [b - a for a, b in zip(starts, [*starts[1:], end], strict=True)]
    measured = measured_iterations(count_all, plan.warmup)
    if plan.warmup == 0:
        lo, hi = starts[0], end
    else:
        lo, hi = starts[measured[0]], starts[measured[-1] + 1]
    count = len(measured)
    figure = max(hi - lo, 1e-30) / count
    bounds = execution.bounds
    bound_by: dict[str, float] = {}
    shared: dict[str, dict[str, float]] = {}
    if isinstance(bounds, JobsRecorder):
        rep = reps[plan.name]
        own = bounds.jobs.get(plan.name, BoundRecorder())
        busy = [
            (r.start, r.end)
            for i, r in execution.records[rep].items()
            if lo_id <= i < hi_id and r.node.kind == "compute" and r.end > r.start
        ]
        raw = attribute(own, busy, lo, hi)
        bound_by = {k: v / count for k, v in sorted(raw.items(), key=lambda kv: (-kv[1], kv[0]))}
        shared = _shared(bounds, plan.name, lo, hi, count)
    result = JobResult(
        name=plan.name,
        kind=plan.kind,
        workload=plan.workload,
        npus=len(plan.npus),
        iterations=times,
        iteration_time=figure,
        start=starts[0],
        end=end,
        bound=next(iter(bound_by), ""),
        bound_by=bound_by,
        shared=shared,
    )
    if alone is not None:
        result.alone = alone.iteration_time
        result.slowdown = figure / alone.iteration_time
    return result


def _shared(
    bounds: JobsRecorder, job: str, lo: float, hi: float, count: int
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    mine = bounds.flows.get(job, {})
    for resource, spans in mine.items():
        own = union(spans, lo, hi)
        for other, flows in bounds.flows.items():
            if other == job or resource not in flows:
                continue
            seconds = _both(own, union(flows[resource], lo, hi))
            if seconds > 0:
                out.setdefault(resource, {})[other] = seconds / count
    return dict(sorted(out.items(), key=lambda kv: -sum(kv[1].values())))


@dataclass
class JobsResult:
    """Jobs sharing a system (the :class:`~acesim.results.protocol.Result` protocol): the
    figure is the shared run's makespan, s."""

    kind: ClassVar[str] = "jobs"
    gains: ClassVar[dict[str, str]] = {}

    system: str
    npus: int
    jobs: list[JobResult]
    makespan: float
    mode: str
    mode_note: str
    endpoint: str
    variant: str
    settings: dict[str, Any]
    assumptions: list[str]
    placement: dict[str, list[int]]
    ids: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)

    @property
    def figure(self) -> float:
        return self.makespan

    def job(self, name: str) -> JobResult:
        """The result of the job named ``name``."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def case(self) -> dict[str, Any]:
        return {"system": self.system, "npus": self.npus, "placement": self.placement}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "acesim.jobs/1",
            "kind": self.kind,
            **self.case(),
            "makespan": self.makespan,
            "mode": self.mode,
            "mode_note": self.mode_note,
            "endpoint": self.endpoint,
            "variant": self.variant,
            "settings": self.settings,
            "assumptions": self.assumptions,
            "jobs": [job.to_dict() for job in self.jobs],
        }

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"makespan": self.makespan}
        for job in self.jobs:
            out[f"{job.name}.iteration_time"] = job.iteration_time
            if job.slowdown is not None:
                out[f"{job.name}.slowdown"] = job.slowdown
        return out

    def describe(self) -> str:
        names = ", ".join(f"{j.name} ({j.workload} on {j.npus})" for j in self.jobs)
        return f"{len(self.jobs)} jobs on {self.system} ({self.npus} NPUs): {names}"

    def rows(self) -> list[tuple[str, str]]:
        out = [("makespan", f"{self.makespan * 1e3:.4g} ms")]
        for job in self.jobs:
            slow = f", slowdown {job.slowdown:.3f}x" if job.slowdown is not None else ""
            out.append((job.name, f"{job.iteration_time * 1e3:.4g} ms/iter{slow}"))
        return out

    def tables(self) -> list[Table]:
        rows: list[tuple[str, ...]] = []
        for job in self.jobs:
            where = next(iter(job.shared), "")
            jobs = job.shared.get(where, {})
            top = next(iter(sorted(jobs.items(), key=lambda kv: -kv[1])), None)
            rows.append(
                (
                    job.name,
                    job.workload,
                    str(job.npus),
                    f"{job.iteration_time * 1e3:.4g}",
                    "-" if job.alone is None else f"{job.alone * 1e3:.4g}",
                    "-" if job.slowdown is None else f"{job.slowdown:.3f}x",
                    job.bound or "-",
                    "-" if top is None else f"{top[0]} on {where} ({top[1] * 1e3:.3g} ms/iter)",
                )
            )
        columns = (
            "job",
            "workload",
            "NPUs",
            "ms/iter",
            "alone",
            "slowdown",
            "bound by",
            "shared bottleneck with",
        )
        return [Table("jobs", columns, rows)]

    def footnotes(self) -> list[str]:
        return [self.mode_note] if self.mode_note else []


def write_jobs_trace(
    execution: Execution, result: JobsResult, path: str | os.PathLike[str]
) -> None:
    """The shared run's Perfetto (Chrome trace-event JSON) trace with one process per job:
    each of its NPUs' tracks as threads named ``npu<p> <track>`` (an NPU shared by
    co-located jobs under the first of them)."""
    data = trace_events(execution)
    job_of: dict[int, tuple[int, int]] = {}  # NPU pid -> (job pid, NPU's index in the job)
    for j, job in enumerate(result.jobs):
        for index, npu in enumerate(result.placement[job.name]):
            job_of.setdefault(npu + 1, (j + 1, index))
    events = []
    others = len(result.jobs) + 1
    for event in data["traceEvents"]:
        pid = event.get("pid")
        if not isinstance(pid, int):
            events.append(event)
            continue
        if pid not in job_of:
            if pid <= result.npus:
                continue  # an idle NPU
            events.append({**event, "pid": others + pid})
            continue
        new, index = job_of[pid]
        moved = {**event, "pid": new}
        if "tid" in moved:
            moved["tid"] = index * 1000 + int(moved["tid"])
        if event.get("ph") == "M" and event.get("name") == "process_name":
            moved["args"] = {"name": f"job {result.jobs[new - 1].name}"}
        elif event.get("ph") == "M" and event.get("name") == "thread_name":
            moved["args"] = {"name": f"npu{pid - 1} {event['args']['name']}"}
        events.append(moved)
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for event in events:  # one process_name per job
        key = (event.get("ph"), event.get("name"), event.get("pid"), event.get("tid"))
        if event.get("ph") == "M" and key in seen:
            continue
        seen.add(key)
        unique.append(event)
    data["traceEvents"] = unique
    data["metadata"]["jobs"] = result.placement
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, allow_nan=False, separators=(",", ":"))
