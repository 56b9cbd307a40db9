"""Benchmark: `acesim reproduce ace-2026` (target: under 10 minutes on 2 cores).

Prints the wall time, and the CPU seconds of every run (what the study costs on a machine of
any load: the sum over two cores is the wall time on an idle two-core machine, give or take
the pool's start and the assembly), the costliest runs first.

Usage: python benchmarks/reproduce_2026.py [--workers N] [--cases a,b]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from acesim.studies.ace2026 import assemble_study, find_cases, plan_study
from acesim.studies.tasks import run_tasks

TARGET_S = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the study here")
    args = parser.parse_args()
    cases = find_cases(args.cases.split(",") if args.cases else None)
    start = time.perf_counter()
    plan = plan_study(cases=cases)
    results = run_tasks(plan.tasks, workers=args.workers, preload=("acesim.studies.ace2026",))
    summary = assemble_study(plan, results, cases=cases)
    wall = time.perf_counter() - start
    if args.out is not None:
        from acesim.results.jsonout import dumps
        from acesim.studies.figures2026 import write_figures
        from acesim.studies.report2026 import report_markdown

        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(dumps(summary, indent=2), encoding="utf-8")
        (args.out / "report.md").write_text(report_markdown(summary), encoding="utf-8")
        write_figures(args.out, summary)
    cpu = {key: run.cpu_s for key, run in results.items()}
    per_case: dict[tuple[str, str], float] = {}
    for (system, case, _kind, _i), seconds in cpu.items():
        per_case[(system, case)] = per_case.get((system, case), 0.0) + seconds
    for (system, case), seconds in sorted(per_case.items(), key=lambda kv: -kv[1]):
        print(f"{system:18s} {case:22s} {seconds:7.1f} CPU s")
    total = sum(cpu.values())
    print(
        f"reproduce ace-2026: {len(plan.tasks)} runs, {wall:.1f} s wall with {args.workers} "
        f"workers, {total:.1f} CPU s (on 2 idle cores about {total / 2:.0f} s); target "
        f"{TARGET_S:.0f} s; ratio to target {total / 2 / TARGET_S:.2f}"
    )


if __name__ == "__main__":
    main()
