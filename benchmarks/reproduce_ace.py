"""Benchmark: the full `acesim reproduce ace-isca21` against issue 27's target of 60 CPU s.

With the sensitivity variants it also says how many of their runs were the main runs'
simulations (taken, not run: :mod:`acesim.studies.dedup`) and what running them would cost.

The CPU of the whole tree (this process's planning, assembly and figures, and every simulation
in whichever worker ran it: ``benchmarks/_tree_cpu.py``), its ratio to 60 s, and the wall time;
the import-time objects frozen out of the garbage collector first, as ``acesim`` does (and its
pool workers);
with the sensitivity variants (the command's default) unless ``--no-sensitivity``. The
costliest groups of runs are listed first (workload, NPUs, endpoint kind; a sensitivity
variant's runs under its name).

Usage: python benchmarks/reproduce_ace.py [--repeats N] [--workers N] [--no-sensitivity]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from _tree_cpu import timed_tasks, unwrap

import acesim.studies.reproduce as reproduce_module
from acesim._compiled import describe
from acesim.config import load_system
from acesim.studies.reproduce import reproduce
from acesim.studies.tasks import Task, run_tasks

TARGET_CPU_S = 60.0
#: CPU seconds of every task of the last run, by key
TASK_CPU: dict[Hashable, float] = {}
#: the sensitivity runs of the last run that were the main runs' simulations (not run), -> the
#: main run whose result they took (acesim.studies.dedup)
REUSED: dict[Hashable, Hashable] = {}
_reuse_plan = reproduce_module.reuse_plan


def _counted_reuse_plan(*args: Any) -> dict[Hashable, Hashable]:
    copies = _reuse_plan(*args)
    REUSED.update(copies)
    return copies


def _timed_run_tasks(tasks: Sequence[Task], **options: Any) -> dict[Hashable, Any]:
    values, cpu = unwrap(run_tasks(timed_tasks(tasks), **options))
    TASK_CPU.update(cpu)
    return values


def _group(key: Hashable) -> str:
    parts = list(key) if isinstance(key, tuple) else [key]
    if parts[0] == "sensitivity":
        return f"sensitivity {parts[1]}"
    if parts[0] == "run":
        return " ".join(str(p) for p in parts[1:4])
    return str(parts[0])


def main() -> None:
    gc.freeze()  # as the command line does after its imports (acesim.cli.main)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--no-sensitivity", action="store_true")
    parser.add_argument("--top", type=int, default=10, help="costliest single runs listed")
    args = parser.parse_args()
    reproduce_module.run_tasks = _timed_run_tasks  # type: ignore[assignment]
    reproduce_module.reuse_plan = _counted_reuse_plan
    walls, cpus = [], []
    for _ in range(args.repeats):
        TASK_CPU.clear()
        REUSED.clear()
        with tempfile.TemporaryDirectory() as tmp:
            start, own = time.perf_counter(), time.process_time()
            reproduce(
                load_system("ace-isca21"),
                Path(tmp),
                workers=args.workers,
                sensitivity=not args.no_sensitivity,
            )
            walls.append(time.perf_counter() - start)
            own = time.process_time() - own
        # with one worker the tasks ran in this process: their CPU is in ``own`` already
        in_process = args.workers == 1
        cpus.append(own if in_process else own + sum(TASK_CPU.values()))
    groups: dict[str, float] = {}
    for key, seconds in TASK_CPU.items():
        groups[_group(key)] = groups.get(_group(key), 0.0) + seconds
    for name, seconds in sorted(groups.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {name:40s} {seconds:8.1f} CPU s")
    for key, seconds in sorted(TASK_CPU.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {seconds:8.1f} CPU s  {key}")
    cpu = statistics.median(cpus)
    runs_cpu = sum(TASK_CPU.values())
    print(
        f"  the runs {runs_cpu:.1f} CPU s; outside them (planning, reuse, assembly, figures) "
        f"{cpus[-1] - runs_cpu:.1f} CPU s (the last repeat)"
    )
    if REUSED:
        saved = sum(TASK_CPU[source] for source in REUSED.values())
        print(
            f"  {len(REUSED)} sensitivity runs were main runs' simulations, not run again "
            f"(acesim.studies.dedup); running them would have added about {saved:.1f} CPU s "
            "(their main runs' CPU)"
        )
    print(
        f"reproduce ace-isca21 ({'no ' if args.no_sensitivity else 'with '}sensitivity): "
        f"{len(TASK_CPU)} runs, median whole-tree CPU {cpu:.1f} s, wall "
        f"{statistics.median(walls):.1f} s over {len(cpus)} runs; target {TARGET_CPU_S:.0f} "
        f"CPU s; ratio to target {cpu / TARGET_CPU_S:.2f}; {describe()}"
    )


if __name__ == "__main__":
    main()
