"""Sweep throughput: 1,000 points on 2 local worker processes vs the same points in a plain loop.

    python benchmarks/sweep_throughput.py                 # training-run points (DLRM, 1 iter)
    python benchmarks/sweep_throughput.py --kind collective   # 64 MiB-class collective points

The process (and so its workers) is pinned to 2 CPUs. The plain loop calls the worker function
(:func:`acesim.sweep.worker.execute_point`) on the already-resolved points in this process, one
after another: pure work, no database, no processes. The sweep is ``run_sweep(..., workers=2)``
into a fresh SQLite file: spec expansion and validation, process pool start, pickling, one
transaction per row, progress bookkeeping.

Reported: points/s of each; per-point work (median of the loop's per-point times) and the
sweep's in-worker median (from the ``wall_time`` column); the sweep's overhead per point in
core-seconds, ``(2 * T_sweep - T_loop) / N``, i.e. what each point costs on 2 cores beyond its
work; and the parallel efficiency ``T_loop / (2 * T_sweep)``. Totals are medians over
``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acesim.sweep import load_results, load_spec, run_sweep
from acesim.sweep.worker import execute_point, run_point_function

HBM = ["300 GB/s", "450 GB/s", "600 GB/s", "900 GB/s", "1.2 TB/s", "1.6 TB/s", "2 TB/s",
       "2.4 TB/s", "3.2 TB/s", "4.8 TB/s"]  # fmt: skip


def spec_for(kind: str) -> dict[str, Any]:
    """1,000 points: 2 endpoints x 10 HBM bandwidths x 5 chunk counts x 10 (sizes or units)."""
    grid: dict[str, Any] = {
        "endpoint.kind": ["baseline", "ace"],
        "npu.hbm_bandwidth": HBM,
        "collective.chunks": [1, 2, 4, 8, 16],
    }
    if kind == "collective":
        grid["size"] = [f"{2**k} MiB" for k in range(10)]
        return {
            "name": "bench-collective",
            "kind": "collective",
            "base": {"system": "ace-isca21", "op": "all-reduce"},
            "grid": grid,
        }
    grid["npu.compute_units"] = [40, 50, 60, 70, 80, 90, 100, 110, 120, 130]
    return {
        "name": "bench-run",
        "kind": "run",
        "base": {
            "system": "ace-isca21",
            "workload": {"name": "dlrm"},
            "run": {"iterations": 1},
            "overrides": {"network.dimensions[1].size": 2, "network.dimensions[2].size": 2},
        },
        "grid": grid,
    }


def pin(cores: int) -> list[int]:
    try:
        cpus = sorted(os.sched_getaffinity(0))[:cores]
        os.sched_setaffinity(0, set(cpus))
        return cpus
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(cores))


def _loop(configs: list[dict[str, Any]], out: Any = None) -> list[float]:
    """The plain loop: the worker function on each resolved point, one after another."""
    times = []
    for config in configs:
        t = time.perf_counter()
        outcome = execute_point(config)
        times.append(time.perf_counter() - t)
        if outcome["status"] != "ok":
            raise SystemExit(f"a point failed: {outcome['error']}")
    if out is not None:
        out.put(times)
    return times


def _split_loop(configs: list[dict[str, Any]], workers: int) -> float:
    """Wall time of ``workers`` plain loops over disjoint shares, in parallel processes."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    shares = [configs[i::workers] for i in range(workers)]
    start = time.perf_counter()
    procs = [ctx.Process(target=_loop, args=(share, queue)) for share in shares]
    for proc in procs:
        proc.start()
    for _ in procs:
        queue.get()
    for proc in procs:
        proc.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["run", "collective"], default=None)
    parser.add_argument("--points", type=int, default=1000, help="first N points of the spec")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=None, help="default: 1 (run), 3 (coll.)")
    args = parser.parse_args()
    kind = args.kind or ("run" if run_point_function() is not None else "collective")
    repeats = args.repeats or (1 if kind == "run" else 3)
    w = args.workers
    cpus = pin(w)

    spec = load_spec(spec_for(kind))
    t0 = time.perf_counter()
    points = spec.points()[: args.points]
    expand = time.perf_counter() - t0
    n = len(points)
    keep = {p.index for p in points}
    configs = [p.config for p in points]
    work = "training-run points (acesim.runs.run_point: DLRM, 1 iteration, 16 NPUs)"
    if kind == "collective":
        work = "collective points (acesim.simulate.simulate_collective: all-reduce 1-512 MiB)"
    print(f"sweep throughput: {n} {work}")
    print(f"CPUs {cpus}, {w} worker processes, {repeats} repeat(s), python {sys.version[:6]}")
    print(f"spec expansion + validation (in the sweep): {expand / len(spec) * 1e3:.3f} ms/point")

    loops: list[float] = []
    splits: list[float] = []
    sweeps: list[float] = []
    per_point: list[float] = []
    in_worker: list[float] = []
    for r in range(repeats):
        start = time.perf_counter()
        per_point += _loop(configs)
        loops.append(time.perf_counter() - start)
        splits.append(_split_loop(configs, w))
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.sqlite"
            if n < len(spec):
                _prefill(spec, db, keep)  # mark points beyond N done: the sweep runs N
            start = time.perf_counter()
            summary = run_sweep(spec, db, workers=w)
            sweeps.append(time.perf_counter() - start)
            if summary.ran != n or summary.failed:
                raise SystemExit(f"sweep ran {summary.ran} points, {summary.failed} failed")
            df = load_results(db)
            in_worker += list(df[df["point"].isin(keep)]["wall_time"])
        print(
            f"  repeat {r + 1}: loop {loops[-1]:.2f} s, {w} plain loops {splits[-1]:.2f} s, "
            f"sweep {sweeps[-1]:.2f} s"
        )

    t_loop = statistics.median(loops)
    t_split = statistics.median(splits)
    t_sweep = statistics.median(sweeps)
    print()
    print(f"plain loop, 1 process:        {n / t_loop:8.1f} points/s  ({t_loop:.2f} s)")
    print(f"plain loops, {w} processes:    {n / t_split:8.1f} points/s  ({t_split:.2f} s)")
    print(f"acesim sweep, {w} workers:     {n / t_sweep:8.1f} points/s  ({t_sweep:.2f} s)")
    print(
        f"median work per point:        loop {statistics.median(per_point) * 1e3:.2f} ms, "
        f"in a sweep worker {statistics.median(in_worker) * 1e3:.2f} ms"
    )
    print(
        f"overhead per point vs loop:   {(t_sweep - t_loop / w) / n * 1e3:+.2f} ms wall "
        f"(sweep - loop/{w}), {(w * t_sweep - t_loop) / n * 1e3:+.2f} ms core time"
    )
    print(
        f"overhead per point vs {w} plain loops (sweep machinery only): "
        f"{(t_sweep - t_split) / n * 1e3:+.2f} ms wall"
    )
    print(
        f"scaling of this machine:      {w} plain loops run {t_loop / t_split:.2f}x a single "
        f"loop; the sweep {t_loop / t_sweep:.2f}x"
    )


def _prefill(spec: Any, db: Path, keep: set[int]) -> None:
    from acesim.sweep.spec import canonical_json
    from acesim.sweep.store import ResultStore
    from acesim.sweep.worker import error_outcome

    with ResultStore(db) as store:
        for p in spec.points():
            if p.index not in keep:
                store.write(
                    hash=p.hash,
                    sweep=spec.name,
                    point=p.index,
                    kind=spec.kind,
                    axes=p.columns,
                    outcome=error_outcome("skipped by the benchmark"),
                    config=canonical_json(p.config),
                )


if __name__ == "__main__":
    main()
