"""`acesim reproduce ace-isca21`: the ACE paper's evaluation regenerated from the model.

Cases: every workload of the preset's ``[reproduction]`` table x every network size (3D tori:
the local dimension kept, the rest split evenly). Per case: every baseline split, ACE, the
ideal endpoint and no overlap (the largest baseline split, every collective blocking). The best
baseline is the fastest split of that case, as the paper compares against the best baseline.

Headline figures (``summary.json``):

* ``hbm_saving_avg``: mean over network sizes of (baseline HBM bytes per network byte) / (ACE
  HBM bytes per network byte) for an all-reduce of ``membw_size`` (the endpoints' accounting);
* ``net_util_gain_avg`` / ``_max``: ACE's effective network utilisation (bytes sent / (time with
  communication in flight x egress capacity)) over the best baseline's, mean and max over cases;
* ``speedup_avg`` / ``speedup_max`` per workload: best-baseline iteration time / ACE's.

Runs go to local processes (one per core) with a progress bar; results are deterministic and
independent of the number of workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.paths import set_path
from ..config.presets import system_from_dict
from ..config.system import SystemConfig
from ..errors import ConfigError

#: The paper's headline figures (paper.md section 1).
PAPER: dict[str, Any] = {
    "hbm_saving_avg": 3.5,
    "net_util_gain_avg": 1.44,
    "net_util_gain_max": 2.67,
    "speedup_avg": {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13},
    "speedup_max": {"resnet50": 1.51, "gnmt": 1.17, "dlrm": 1.19},
}
#: Tolerances the reproduction is held to: averages and "up to" values.
TOLERANCE_AVG = 0.10
TOLERANCE_MAX = 0.15


@dataclass(frozen=True)
class Task:
    """One simulation: a label, the system document, the workload and the loop."""

    key: tuple[Any, ...]
    system: dict[str, Any]
    workload: str
    batch: int | None
    dtype: int | None
    iterations: int
    loop: str


def _run_task(task: Task) -> tuple[tuple[Any, ...], dict[str, Any]]:
    from ..experiment import run_system
    from ..workload.zoo import load_zoo

    system = system_from_dict(task.system)
    workload = load_zoo(task.workload, batch_per_npu=task.batch, dtype_bytes=task.dtype)
    result, _ = run_system(system, workload, iterations=task.iterations, loop=task.loop)
    data = result.to_dict()
    data.pop("layers", None)
    return task.key, data


def case_system(doc: dict[str, Any], npus: int) -> dict[str, Any]:
    """The system document resized to ``npus`` NPUs (paper-style torus)."""
    from ..experiment import shape_for

    out = doc
    for i, size in enumerate(shape_for(doc, npus)):
        out = set_path(out, f"network.dimensions[{i}].size", size)
    out["network"]["npus"] = None
    return out


def _variant(doc: dict[str, Any], kind: str, split: dict[str, Any] | None = None) -> dict[str, Any]:
    out = set_path(doc, "endpoint.kind", kind)
    if split:
        out = set_path(out, "endpoint.baseline.comm_units", split["comm_units"])
        for key in ("hbm_share", "hbm_weight"):
            if split.get(key) is not None:
                out = set_path(out, f"endpoint.baseline.{key}", split[key])
    return out


def plan(
    system: SystemConfig,
    *,
    workloads: list[str] | None = None,
    npus: list[int] | None = None,
    sram: bool = True,
) -> list[Task]:
    """Every simulation of the reproduction (see module docstring)."""
    repro = system.reproduction
    if repro is None or not repro.workloads:
        raise ConfigError(
            "reproduction", "the system has no [reproduction] table with workloads", system.name
        )
    doc = system.model_dump(mode="python")
    names = workloads or list(repro.workloads)
    for name in names:
        if name not in repro.workloads:
            raise ConfigError("--workloads", "not in the preset's reproduction table", name)
    sizes = npus or list(repro.npus)
    splits: list[dict[str, Any] | None] = [
        s.model_dump() for s in system.endpoint.baseline.splits
    ] or [None]
    tasks: list[Task] = []
    for name in names:
        w = repro.workloads[name]
        for n in sizes:
            base = case_system(doc, n)

            def add(
                key: tuple[Any, ...],
                d: dict[str, Any],
                loop: str = "layerwise",
                name: str = name,
                w: Any = w,
            ) -> None:
                tasks.append(
                    Task(key, d, name, w.batch_per_npu, w.dtype_bytes, repro.iterations, loop)
                )

            for i, split in enumerate(splits):
                add((name, n, "baseline", i), _variant(base, "baseline", split))
            add((name, n, "ace", 0), _variant(base, "ace"))
            add((name, n, "ideal", 0), _variant(base, "ideal"))
            real = [s for s in splits if s is not None]
            largest = max(real, key=lambda s: s["comm_units"]) if real else None
            add((name, n, "no_overlap", 0), _variant(base, "baseline", largest), "no_overlap")
        if sram and repro.sram_sizes:
            mid = sizes[len(sizes) // 2]
            base = case_system(doc, mid)
            for size in repro.sram_sizes:
                d = set_path(_variant(base, "ace"), "endpoint.ace.sram", size)
                add((name, mid, "ace_sram", size), d)
    return tasks


def run_tasks(
    tasks: list[Task], workers: int | None = None, progress: Callable[[], Any] | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Run tasks on local processes; results keyed by task key (order independent)."""
    workers = workers or os.cpu_count() or 1
    results: dict[tuple[Any, ...], dict[str, Any]] = {}
    if workers == 1:
        for task in tasks:
            key, data = _run_task(task)
            results[key] = data
            if progress:
                progress()
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for key, data in pool.map(_run_task, tasks, chunksize=1):
            results[key] = data
            if progress:
                progress()
    return results


@dataclass
class CaseResult:
    """The endpoints of one (workload, NPUs) case."""

    workload: str
    npus: int
    baselines: list[dict[str, Any]]
    ace: dict[str, Any]
    ideal: dict[str, Any]
    no_overlap: dict[str, Any]

    @property
    def best(self) -> dict[str, Any]:
        return min(self.baselines, key=lambda r: r["iteration_time"])

    @property
    def worst(self) -> dict[str, Any]:
        return max(self.baselines, key=lambda r: r["iteration_time"])

    @property
    def speedup(self) -> float:
        return float(self.best["iteration_time"] / self.ace["iteration_time"])

    @property
    def util_gain(self) -> float:
        base = self.best["net_util_effective"]
        return self.ace["net_util_effective"] / base if base > 0 else float("inf")


def collect(results: dict[tuple[Any, ...], dict[str, Any]]) -> list[CaseResult]:
    cases: dict[tuple[str, int], dict[str, Any]] = {}
    for (name, n, kind, idx), data in results.items():
        entry = cases.setdefault((name, n), {"baselines": {}})
        if kind == "baseline":
            entry["baselines"][idx] = data
        elif kind != "ace_sram":
            entry[kind] = data
    out = []
    for (name, n), entry in cases.items():
        baselines = [entry["baselines"][i] for i in sorted(entry["baselines"])]
        out.append(
            CaseResult(name, n, baselines, entry["ace"], entry["ideal"], entry["no_overlap"])
        )
    out.sort(key=lambda c: (c.workload, c.npus))
    return out


def headline(cases: list[CaseResult], hbm_saving: list[float]) -> dict[str, Any]:
    """The five headline figures under fixed keys."""
    speedup_avg: dict[str, float] = {}
    speedup_max: dict[str, float] = {}
    for name in sorted({c.workload for c in cases}):
        sp = [c.speedup for c in cases if c.workload == name]
        speedup_avg[name] = sum(sp) / len(sp)
        speedup_max[name] = max(sp)
    gains = [c.util_gain for c in cases]
    return {
        "hbm_saving_avg": sum(hbm_saving) / len(hbm_saving) if hbm_saving else None,
        "net_util_gain_avg": sum(gains) / len(gains),
        "net_util_gain_max": max(gains),
        "speedup_avg": speedup_avg,
        "speedup_max": speedup_max,
    }


def deviations(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (figure, ours, paper, deviation, tolerance, within) comparing to the paper."""
    rows = []

    def row(label: str, ours: float | None, paper: float, tol: float) -> None:
        if ours is None:
            return
        dev = ours / paper - 1
        rows.append(
            {
                "figure": label,
                "acesim": ours,
                "paper": paper,
                "deviation": dev,
                "tolerance": tol,
                "within": abs(dev) <= tol,
            }
        )

    row(
        "HBM bandwidth saving (avg)",
        summary["hbm_saving_avg"],
        PAPER["hbm_saving_avg"],
        TOLERANCE_AVG,
    )
    row(
        "network utilisation gain (avg)",
        summary["net_util_gain_avg"],
        PAPER["net_util_gain_avg"],
        TOLERANCE_AVG,
    )
    row(
        "network utilisation gain (max)",
        summary["net_util_gain_max"],
        PAPER["net_util_gain_max"],
        TOLERANCE_MAX,
    )
    for name, paper in PAPER["speedup_avg"].items():
        if name in summary["speedup_avg"]:
            row(f"speedup {name} (avg)", summary["speedup_avg"][name], paper, TOLERANCE_AVG)
    for name, paper in PAPER["speedup_max"].items():
        if name in summary["speedup_max"]:
            row(f"speedup {name} (max)", summary["speedup_max"][name], paper, TOLERANCE_MAX)
    return rows


def reproduce(
    system: SystemConfig,
    out_dir: Path,
    *,
    workloads: list[str] | None = None,
    npus: list[int] | None = None,
    workers: int | None = None,
    figures: bool = True,
    sram: bool = True,
    progress: Callable[[int], Callable[[], Any]] | None = None,
) -> dict[str, Any]:
    """Run the reproduction, write ``summary.json``, ``report.md`` and figures into ``out_dir``.

    ``progress(total)`` returns a callable advanced once per finished simulation.
    """
    from .membw import membw_analysis

    tasks = plan(system, workloads=workloads, npus=npus, sram=sram)
    repro = system.reproduction
    assert repro is not None
    sizes = npus or list(repro.npus)
    advance = progress(len(tasks) + len(sizes)) if progress else None
    results = run_tasks(tasks, workers, advance)
    cases = collect(results)
    membw = membw_analysis(
        system, npus=sizes, size=repro.membw_size, simulate_need=False, progress=advance
    )
    summary = headline(cases, [row.saving for row in membw])
    summary["schema"] = "acesim.reproduction/1"
    summary["system"] = system.name
    summary["paper"] = PAPER
    summary["deviations"] = deviations(summary)
    summary["cases"] = [
        {
            "workload": c.workload,
            "npus": c.npus,
            "speedup_ace": c.speedup,
            "speedup_ideal": c.best["iteration_time"] / c.ideal["iteration_time"],
            "speedup_ace_vs_worst": c.worst["iteration_time"] / c.ace["iteration_time"],
            "net_util_gain": c.util_gain,
            "best_split": c.best["split"],
            "iteration_time": {
                "best_baseline": c.best["iteration_time"],
                "worst_baseline": c.worst["iteration_time"],
                "ace": c.ace["iteration_time"],
                "ideal": c.ideal["iteration_time"],
                "no_overlap": c.no_overlap["iteration_time"],
            },
        }
        for c in cases
    ]
    summary["membw"] = [row.to_dict() for row in membw]
    sram_rows = sorted(
        (k[0], k[3], v["iteration_time"]) for k, v in results.items() if k[2] == "ace_sram"
    )
    summary["sram_sensitivity"] = [
        {"workload": w, "sram": s, "iteration_time": t} for w, s, t in sram_rows
    ]
    summary["assumptions"] = [
        {"field": f, "kind": s.kind, "note": s.note} for f, s in system.sources.items()
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if figures:
        from .figures import write_figures

        write_figures(out_dir, cases, membw, summary, results)
    (out_dir / "report.md").write_text(report_markdown(summary, cases), encoding="utf-8")
    return summary


def report_markdown(summary: dict[str, Any], cases: list[CaseResult]) -> str:
    """The report: headline figures next to the paper's, per-case table, assumptions."""
    lines = [
        f"# ACE (ISCA 2021) reproduced by acesim on `{summary['system']}`",
        "",
        "Every number below comes from the model; no parameter is set per case. The paper's",
        "figures are from its abstract (paper.md section 1).",
        "",
        "## Headline figures",
        "",
        "| figure | acesim | paper | deviation | tolerance | within |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for row in summary["deviations"]:
        lines.append(
            f"| {row['figure']} | {row['acesim']:.3f} | {row['paper']:.2f} | "
            f"{100 * row['deviation']:+.1f}% | ±{100 * row['tolerance']:.0f}% | "
            f"{'yes' if row['within'] else 'no'} |"
        )
    lines += [
        "",
        "## Cases",
        "",
        "| workload | NPUs | best split (units) | best baseline | ACE | ideal | no overlap | "
        "speedup | util gain |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        lines.append(
            f"| {c.workload} | {c.npus} | {c.best['split'].get('comm_units')} | "
            f"{1e3 * c.best['iteration_time']:.3f} ms | {1e3 * c.ace['iteration_time']:.3f} ms | "
            f"{1e3 * c.ideal['iteration_time']:.3f} ms | "
            f"{1e3 * c.no_overlap['iteration_time']:.3f} ms | {c.speedup:.3f}x | "
            f"{c.util_gain:.2f}x |"
        )
    lines += [
        "",
        "## HBM bytes per network byte (all-reduce)",
        "",
        "| NPUs | baseline | ACE | saving |",
        "|---:|---:|---:|---:|",
    ]
    for row in summary["membw"]:
        lines.append(
            f"| {row['npus']} | {row['baseline_ratio']:.3f} | {row['ace_ratio']:.3f} | "
            f"{row['saving']:.2f}x |"
        )
    lines += [
        "",
        "## Figures",
        "",
        "speedup.png, net_util.png, membw.png, breakdown.png, sram.png, splits.png (and .svg).",
        "",
        "## Assumptions",
        "",
        "| field | source | note |",
        "|---|---|---|",
    ]
    for a in summary["assumptions"]:
        lines.append(f"| `{a['field']}` | {a['kind']} | {a['note']} |")
    return "\n".join(lines) + "\n"
