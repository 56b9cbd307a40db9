"""How fast acesim simulates one 64 MiB all-reduce as the platform grows.

For 8 ... 1,048,576 NPUs on 3-D tori built from the ``ace-isca21`` preset (its dimensions,
bandwidths, latencies and endpoint, with the sizes changed), prints the median wall time of
several runs and the peak Python memory (tracemalloc, measured in a separate run so that it
does not slow the timed ones), in symmetric mode and, up to 1,024 NPUs, in exact mode.

    python benchmarks/collective_scale.py                 # the table of docs/performance.md
    python benchmarks/collective_scale.py --repeats 3 --max-exact 512 --markdown

Then, in symmetric mode, one ring dimension of 1,024 ... 1,048,576 NPUs (2**20, the most one
dimension may have; issue 27: one dimension's 2 (N - 1) ring steps per chunk; target <= 1 CPU
s at any count), CPU seconds (median) and the ratio to the target; ``--no-fold`` runs them with
the ring's identical steps on the event path (:mod:`acesim.network.fold` off) to show what
folding buys. The 2**20 ring sends 8.4 million messages, beyond the default work bound
(``collective.max_messages``, 5 million): it is raised for that case, knowingly. Last,
``acesim membw --no-simulate`` at 1,000,000 NPUs (the byte accounting: three simulated
collectives on a 4x500x500 torus, ample HBM), CPU s against the same 1 s target.

    python benchmarks/collective_scale.py --rings-only --repeats 3     # issue 27's cases
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
import tracemalloc

from acesim import SystemConfig, load_system, simulate_collective
from acesim._compiled import describe
from acesim.network import collective as collective_module

SIZE = 64 * 2**20
SHAPES: list[tuple[int, int, int]] = [
    (2, 2, 2),
    (4, 4, 4),
    (8, 8, 8),
    (8, 8, 16),
    (16, 16, 16),
    (16, 64, 64),
    (64, 128, 128),
]
TARGETS = {("symmetric", 1024): 0.5, ("symmetric", 1_048_576): 10.0}
#: one ring dimension of these many NPUs (issue 27's flat-in-NPUs target, CPU s)
RINGS = (1024, 16_384, 100_000, 2**20)
RING_TARGET = 1.0
#: ``acesim membw --no-simulate --npus`` of this many NPUs (issue 27), target CPU s
MEMBW_NPUS = 1_000_000
MEMBW_TARGET = 1.0


def torus(shape: tuple[int, int, int]) -> SystemConfig:
    """The ace-isca21 preset with its three dimensions resized to ``shape``."""
    system = load_system("ace-isca21").model_copy(deep=True)
    assert len(system.network.dimensions) == len(shape)
    for dim, size in zip(system.network.dimensions, shape, strict=True):
        dim.size = size
    system.network.npus = None
    return system


def ring(npus: int) -> SystemConfig:
    """The ace-isca21 preset cut down to its first dimension, a ring of ``npus`` NPUs."""
    system = load_system("ace-isca21").model_copy(deep=True)
    system.network.dimensions = system.network.dimensions[:1]
    system.network.dimensions[0].size = npus
    system.network.npus = None
    # 8 (N - 1) messages: the default work bound (5 million) refuses 2**20, raised knowingly
    system.collective.max_messages = max(system.collective.max_messages, 8 * npus)
    return system


def cpu_once(system: SystemConfig) -> tuple[float, float]:
    """CPU seconds of one symmetric 64 MiB all-reduce, and its simulated time (s)."""
    gc.collect()
    start = time.process_time()
    result = simulate_collective(system, "all-reduce", SIZE)
    return time.process_time() - start, result.time


def rings(repeats: int) -> None:
    print(f"\none ring dimension, symmetric, 64 MiB all-reduce, target <= {RING_TARGET:g} CPU s")
    for npus in RINGS:
        runs = [cpu_once(ring(npus)) for _ in range(repeats)]
        cpu = statistics.median(c for c, _t in runs)
        print(
            f"  {npus:>9,d} NPUs  median {cpu:7.3f} CPU s of {repeats}  "
            f"ratio {cpu / RING_TARGET:6.2f}  simulated {runs[0][1]:.9g} s",
            flush=True,
        )


def membw(repeats: int) -> None:
    """``acesim membw --no-simulate`` at :data:`MEMBW_NPUS` NPUs, each run in a fresh process
    (the analysis memoises its simulations in-process), CPU s of the analysis alone."""
    import subprocess
    import sys

    code = (
        "import time\n"
        "from acesim.config.resolve import resolve_system\n"
        "from acesim.studies.membw import membw_analysis\n"
        "cfg = resolve_system('ace-isca21')\n"
        "start = time.process_time()\n"
        f"membw_analysis(cfg, npus=[{MEMBW_NPUS}], simulate_need=False, equal_bandwidth=False)\n"
        "print(time.process_time() - start)\n"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(repeats)
    ]
    cpu = statistics.median(runs)
    print(
        f"\nacesim membw --no-simulate --npus {MEMBW_NPUS:,}: median {cpu:7.3f} CPU s of "
        f"{repeats}  ratio {cpu / MEMBW_TARGET:6.2f} (target <= {MEMBW_TARGET:g} CPU s)",
        flush=True,
    )


def once(system: SystemConfig, exact: bool) -> float:
    gc.collect()
    start = time.perf_counter()
    simulate_collective(system, "all-reduce", SIZE, exact=exact)
    return time.perf_counter() - start


def peak_memory(system: SystemConfig, exact: bool) -> int:
    gc.collect()
    tracemalloc.start()
    simulate_collective(system, "all-reduce", SIZE, exact=exact)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (median)")
    parser.add_argument("--max-exact", type=int, default=1024, help="largest exact-mode case")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--no-fold", action="store_true", help="ring steps on the event path")
    parser.add_argument("--rings-only", action="store_true", help="only the one-ring cases")
    args = parser.parse_args()
    if args.no_fold:
        collective_module.FOLD = False
    if args.rings_only:
        rings(args.repeats)
        membw(args.repeats)
        return

    rows = []
    for mode in ("symmetric", "exact"):
        for shape in SHAPES:
            npus = shape[0] * shape[1] * shape[2]
            if mode == "exact" and npus > args.max_exact:
                continue
            system = torus(shape)
            exact = mode == "exact"
            repeats = args.repeats if not exact or npus < 512 else max(1, min(args.repeats, 3))
            times = [once(system, exact) for _ in range(repeats)]
            median = statistics.median(times)
            peak = peak_memory(system, exact)
            target = TARGETS.get((mode, npus))
            verdict = "" if target is None else ("ok" if median <= target else "MISSED")
            rows.append((mode, npus, shape, median, repeats, peak, target, verdict))
            if not args.markdown:
                shown = f" target <= {target:g} s: {verdict}" if target else ""
                print(
                    f"{mode:9s} {npus:>9,d} NPUs {'x'.join(map(str, shape)):>10s}  "
                    f"median {median:8.4f} s of {repeats}  peak {peak / 2**20:8.2f} MiB{shown}",
                    flush=True,
                )
    if args.markdown:
        print("| mode | NPUs | shape | median wall time (s) | runs | peak memory (MiB) | target |")
        print("|---|---:|---|---:|---:|---:|---|")
        for mode, npus, shape, median, repeats, peak, target, verdict in rows:
            goal = f"<= {target:g} s: {verdict}" if target else ""
            print(
                f"| {mode} | {npus:,} | {'x'.join(map(str, shape))} | {median:.4f} | {repeats} "
                f"| {peak / 2**20:.2f} | {goal} |"
            )
        print()
        print(
            f"Python {platform.python_version()} on {platform.machine()}, {platform.system()}; "
            f"{describe()}"
        )
    rings(args.repeats)
    membw(args.repeats)


if __name__ == "__main__":
    main()
