"""Benchmark: `acesim reproduce ace-2026` against issue 27's target of 60 CPU s.

Prints the CPU seconds of every case's runs, the costliest first, and the whole tree's CPU
(this process's planning and assembly, and every run in whichever worker ran it:
``benchmarks/_tree_cpu.py``) with its ratio to 60 s, and the wall time.

Usage: python benchmarks/reproduce_2026.py [--workers N] [--cases a,b]
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

from _tree_cpu import timed_tasks, unwrap

from acesim._compiled import describe
from acesim.studies.ace2026 import assemble_study, find_cases, plan_study
from acesim.studies.tasks import run_tasks

TARGET_CPU_S = 60.0


def main() -> None:
    gc.freeze()  # as the command line does after its imports (acesim.cli.main)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the study here")
    args = parser.parse_args()
    cases = find_cases(args.cases.split(",") if args.cases else None)
    start, own = time.perf_counter(), time.process_time()
    plan = plan_study(cases=cases)
    timed = run_tasks(
        timed_tasks(plan.tasks), workers=args.workers, preload=("acesim.studies.ace2026",)
    )
    results, task_cpu = unwrap(timed)
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
    own = time.process_time() - own
    per_case: dict[tuple[str, str], float] = {}
    for (system, case, *_), seconds in task_cpu.items():
        per_case[(system, case)] = per_case.get((system, case), 0.0) + seconds
    for (system, case), seconds in sorted(per_case.items(), key=lambda kv: -kv[1]):
        print(f"{system:18s} {case:22s} {seconds:7.1f} CPU s")
    # with one worker the runs ran in this process: their CPU is in ``own`` already
    tree = own if args.workers == 1 else own + sum(task_cpu.values())
    print(
        f"reproduce ace-2026: {len(plan.tasks)} runs, {wall:.1f} s wall with {args.workers} "
        f"workers, whole-tree CPU {tree:.1f} s (the runs {sum(task_cpu.values()):.1f}); "
        f"target {TARGET_CPU_S:.0f} CPU s; ratio to target {tree / TARGET_CPU_S:.2f}; "
        f"{describe()}"
    )


if __name__ == "__main__":
    main()
