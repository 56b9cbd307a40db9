"""Exact mode (every NPU simulated) at scale, beside ASTRA-sim 2.0's analytical backend.

Each case runs in a child process (``--child NAME``), so that its user CPU time and peak RSS
are its own (``os.wait4``); the table gives the median of ``--repeat`` runs and the ratio of
acesim's user CPU to ASTRA-sim's figure (our runs of ASTRA-sim 2.0, docs/performance.md)
(same machine kind, single thread, median of 3; the target is a ratio of at most 0.1).
"user CPU" is the whole child process (Python start-up and ``import acesim``, about 0.7 s,
included); "run CPU" (``time.process_time`` around the simulation alone) is what the ratio
uses.

Cases use ASTRA-sim's conventions: one dimension of 50 GB/s per link per direction with
GB = 2^30 B, 500 ns latency, 10 ns endpoint delay, 4 chunks, one active chunk per dimension,
LIFO, the ``ideal`` endpoint (the reduction charge removed); the 3-D network is
Ring(4) x FullyConnected(8) x Switch(32) at 200/100/50 GB/s and 50/500/2000 ns.

Issue 27's variation cases (``resnet50-straggler-*``, ``resnet50-mixed-*``,
``allreduce-straggler-*``: the ``ace-isca21`` platform, one iteration) print their ratio to
the issue's target (1,024 NPUs: 10 CPU s; 16,384: 120 CPU s); the slow ones run with
``--timeout`` and report a lower bound.

    python benchmarks/exact_scale.py                       # every case but the largest
    python benchmarks/exact_scale.py --cases ring-512,fc-1024 --repeat 3
    python benchmarks/exact_scale.py --all --markdown      # 4,096 and 16,384 NPUs and
                                                           # ResNet-50 too (minutes)
    python benchmarks/exact_scale.py --cases dp-64 --cli-gc  # as the acesim CLI runs it
                                                             # (gc.freeze() after imports)
    python benchmarks/exact_scale.py --cases resnet50-straggler-ideal-1024 --timeout 600
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acesim import SystemConfig, simulate_collective
from acesim._compiled import describe
from acesim.config import load_system, system_from_dict
from acesim.config.resolve import resolve_system

MiB = 2**20
GiB = 2**30


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    npus: int
    run: Callable[[], float]  # returns the simulated time (s)
    astra_cpu: float | None = None  # ASTRA-sim 2.0 user CPU (s), median of 3
    astra_rss: float | None = None  # its peak RSS (MiB)
    heavy: bool = False  # only with --all
    target: float | None = None  # issue 27's target for its run CPU (s), where it sets one


def _dim(kind: str, size: int, bandwidth: str, latency: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "size": size,
        "link_bandwidth": bandwidth,
        "link_latency": latency,
        "links_per_npu": 1,
    }


def astra_system(dims: list[dict[str, Any]], algorithm: str | list[str] = "ring") -> SystemConfig:
    """A system with ASTRA-sim's conventions (see the module docstring)."""
    return system_from_dict(
        {
            "name": "astra-conventions",
            "network": {"dimensions": dims},
            "collective": {
                "chunks": 4,
                "active_chunks_per_dimension": 1,
                "scheduling": "lifo",
                "endpoint_delay": "10 ns",
                "algorithms": {"all-reduce": algorithm},
                # the event-engine cases (3-D, training) send more than the default bound
                "max_messages": 10**12,
            },
            "endpoint": {"kind": "ideal"},
        }
    )


def one_dim(kind: str, n: int, algorithm: str = "ring") -> SystemConfig:
    return astra_system([_dim(kind, n, "50 GiB/s", "500 ns")], algorithm)


def three_d() -> SystemConfig:
    return astra_system(
        [
            _dim("ring", 4, "200 GiB/s", "50 ns"),
            _dim("fully_connected", 8, "100 GiB/s", "500 ns"),
            _dim("switch", 32, "50 GiB/s", "2000 ns"),
        ],
        ["ring", "direct", "ring"],
    )


def allreduce(system: Callable[[], SystemConfig], size: float) -> Callable[[], float]:
    return lambda: simulate_collective(system(), "all-reduce", size, exact=True).time


def data_parallel_64(**variation: Any) -> float:
    """Four layers, each a fixed 1 ms forward and weight-gradient pass and an all-reduce of
    its 16 MiB gradient, two iterations on a Ring of 64 (our reconstruction: the reference
    does not give the layer sizes of ASTRA-sim's run, so only the CPU figures compare);
    ``variation``: run options that make ranks differ (``stragglers``)."""
    from acesim.runs import run_system
    from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

    layers = tuple(
        Layer(
            f"l{i}",
            forward=Pass(Compute(duration=1e-3)),
            weight_grad=Pass(Compute(duration=1e-3), Comm("all-reduce", 16 * MiB)),
        )
        for i in range(4)
    )
    result, execution = run_system(
        one_dim("ring", 64),
        Workload("dp4", layers),
        iterations=2,
        warmup=0,
        mode="exact",
        **variation,
    )
    _note(execution)
    return result.iteration_time * 2


def data_parallel_64_straggler() -> float:
    """:func:`data_parallel_64` with one slow NPU (rank 3's compute 1.5x as long; issue 27
    measured ASTRA-sim on the same workload with the slowdown written into the trace: 0.49
    user CPU s, its figure, not ours)."""
    return data_parallel_64(stragglers=[STRAGGLER])


#: what the training cases' runs did (collectives on the event path, runs redone, ranks
#: replicated from rank 0)
NOTES: dict[str, int] = {}


def _note(execution: Any) -> None:
    NOTES["event_collectives"] = execution.event_collectives
    NOTES["collectives"] = len(execution.collectives)
    NOTES["redone"] = execution.redone
    NOTES["joint"] = execution.joint_collectives
    NOTES["replicated"] = int(execution.replicated)


def resnet50_1024() -> float:
    """ResNet-50, 2 iterations, on the 3-D network with the ace-isca21 NPU (ideal endpoint)."""
    from acesim.runs import run_system
    from acesim.workload.loader import load_workload

    system = load_system("ace-isca21").model_copy(deep=True)
    net = three_d()
    system = system.model_copy(
        update={"network": net.network, "collective": net.collective, "endpoint": net.endpoint}
    )
    result, execution = run_system(
        system, load_workload("resnet50"), iterations=2, warmup=0, mode="exact"
    )
    _note(execution)
    return result.iteration_time * 2


#: issue 27's exact-mode cases: the variation studies (the ``ace-isca21`` platform, its 4x4xN
#: torus, one iteration, no warm-up); its targets, in run CPU seconds
ISSUE27_TARGETS = {1024: 10.0, 16384: 120.0}
#: the one straggler: rank 3 computes 1.5x as long (the command line of the issue's finding)
STRAGGLER = {"rank": 3, "slowdown": 1.5}


def _mixed(npus: int) -> list[dict[str, Any]]:
    """Half the NPUs (the first half) at half the platform NPU's HBM bandwidth."""
    hbm = load_system("ace-isca21").npu.hbm_bandwidth
    return [{"ranks": f"0-{npus // 2 - 1}", "hbm_bandwidth": hbm / 2}]


def resnet50_varied(npus: int, endpoint: str, kind: str) -> Callable[[], float]:
    """ResNet-50, one iteration, on ``ace-isca21`` at ``npus`` NPUs with ``endpoint`` (the
    baseline: its default SM split, not a search), with one straggler (``kind``
    ``straggler``), half the NPUs at half HBM bandwidth (``mixed``) or nothing varied
    (``exact``: symmetric, in exact mode)."""

    def run() -> float:
        import acesim

        variation: dict[str, Any] = {}
        if kind == "straggler":
            variation = {"stragglers": [STRAGGLER]}
        elif kind == "mixed":
            variation = {"npu_types": _mixed(npus)}
        # the ideal endpoint with the default work bounds, as a user runs it (since stop 60
        # the collective bound counts only messages on the event path, not those the
        # lockstep backend computes); the baseline's run on the event path, every message
        # simulated, beyond both bounds from 4,096 NPUs: raised, knowingly (--timeout)
        bounds: dict[str, Any] = {}
        overrides: dict[str, Any] = {}
        if endpoint != "ideal":
            bounds["max_messages"] = 10**12
            overrides["collective.max_messages"] = 10**12
        result, execution = acesim.runs.run_system(
            resolve_system("ace-isca21", overrides=overrides).with_endpoint(endpoint),
            "resnet50",
            npus=npus,
            iterations=1,
            warmup=0,
            mode="exact",
            **bounds,
            **variation,
        )
        _note(execution)
        return float(result.iteration_time)

    return run


#: the kernel beside the collective in the ``allreduce-beside-*`` cases (FLOPs, HBM bytes):
#: ``acesim collective --with-compute 2e13,2e10``, about 0.16 s alone on ace-isca21's NPU
BESIDE = (2e13, 2e10)


def allreduce_straggler(
    npus: int, endpoint: str, varied: str = "straggler", compute: tuple[float, float] | None = None
) -> Callable[[], float]:
    """A 64 MiB all-reduce alone on ``ace-isca21`` at ``npus`` NPUs with ``endpoint`` and one
    straggler (``varied``: a straggler's kernels 1.5x as long; the collective has none, so
    since issue 27's strategy rule it runs symmetric, the same figures as exact mode:
    :func:`acesim.training.strategy.decide`), or ``slow-link``: rank 3's links on the first
    dimension at half their bandwidth, which does make ranks differ (exact mode); beside a
    ``compute`` kernel (FLOPs, HBM bytes) on every NPU, where a straggler does slow one."""

    def run() -> float:
        from acesim.config.variation import LinkChange, Straggler, Variation

        system = load_system("ace-isca21")
        shape = [d.size for d in system.network.dimensions]
        shape[-1] = npus // (shape[0] * shape[1])
        dims = [
            d.model_copy(update={"size": size})
            for d, size in zip(system.network.dimensions, shape, strict=True)
        ]
        system = system.model_copy(
            update={
                "network": system.network.model_copy(update={"dimensions": dims}),
                "collective": system.collective.model_copy(update={"max_messages": 10**12}),
            }
        )
        if varied == "straggler":
            variation = Variation(stragglers=(Straggler(**STRAGGLER),))
        else:
            half = dims[0].link_bandwidth / 2
            variation = Variation(links=(LinkChange(dim=0, rank=3, bandwidth=half),))
        return simulate_collective(
            system, "all-reduce", 64 * MiB, endpoint=endpoint, variation=variation, compute=compute
        ).time

    return run


def _issue27_cases() -> list[Case]:
    cases = []
    for npus in (64, 256, 1024, 16384):
        for kind, what in (("straggler", "one straggler"), ("mixed", "half at half HBM BW")):
            if kind == "mixed" and npus == 256:
                continue
            for endpoint in ("ideal", "baseline"):
                cases.append(
                    Case(
                        f"resnet50-{kind}-{endpoint}-{npus}",
                        f"ResNet-50, 1 iteration, ace-isca21, {what}, {endpoint}",
                        npus,
                        resnet50_varied(npus, endpoint, kind),
                        heavy=True,  # 20 CPU s and more each today
                        target=ISSUE27_TARGETS.get(npus),
                    )
                )
    for npus in (64, 256):
        cases.append(
            Case(
                f"resnet50-exact-ideal-{npus}",
                "ResNet-50, 1 iteration, ace-isca21, nothing varied, exact mode, ideal",
                npus,
                resnet50_varied(npus, "ideal", "exact"),
            )
        )
    for endpoint in ("ideal", "baseline"):
        cases.append(
            Case(
                f"allreduce-straggler-{endpoint}-1024",
                f"all-reduce 64 MiB alone, ace-isca21, one straggler (runs symmetric: it has "
                f"no compute kernel to slow), {endpoint}",
                1024,
                allreduce_straggler(1024, endpoint),
                heavy=True,
                target=ISSUE27_TARGETS[1024],
            )
        )
        cases.append(
            Case(
                f"allreduce-slowlink-{endpoint}-1024",
                f"all-reduce 64 MiB alone, ace-isca21, one link at half bandwidth, {endpoint}",
                1024,
                allreduce_straggler(1024, endpoint, "slow-link"),
                heavy=True,
                target=ISSUE27_TARGETS[1024],
            )
        )
    # beyond the targets: every rank at once (network/rank_fluid.py) at 4,096 NPUs (stop 65:
    # 14.3 CPU s, the event path 273 s) and 16,384 (stop 66: 66 CPU s, 2.5 GB; refused before,
    # its table past the per-rank backend's bound and its messages past the event path's)
    for npus in (4096, 16384):
        cases.append(
            Case(
                f"allreduce-slowlink-baseline-{npus}",
                "all-reduce 64 MiB alone, ace-isca21, one link at half bandwidth, baseline",
                npus,
                allreduce_straggler(npus, "baseline", "slow-link"),
                heavy=True,
            )
        )
    # beside a kernel on every NPU, one straggler: the collective and the kernels every rank
    # at once (network/rank_streams.py, stop 66; the event path 17.7 CPU s at 1,024 NPUs)
    for npus in (1024, 4096):
        cases.append(
            Case(
                f"allreduce-beside-straggler-baseline-{npus}",
                "all-reduce 64 MiB beside a kernel on every NPU, ace-isca21, one straggler, "
                "baseline",
                npus,
                allreduce_straggler(npus, "baseline", "straggler", BESIDE),
                heavy=True,
            )
        )
    return cases


CASES = [
    Case("ring-512", "ring all-reduce 64 MiB, Ring", 512,
         allreduce(lambda: one_dim("ring", 512), 64 * MiB), 1.45, 102),
    Case("ring-1024", "ring all-reduce 64 MiB, Ring", 1024,
         allreduce(lambda: one_dim("ring", 1024), 64 * MiB), 6.05, 356),
    Case("switch-1024", "ring all-reduce 64 MiB, Switch", 1024,
         allreduce(lambda: one_dim("switch", 1024), 64 * MiB), 6.28, 356),
    Case("ring-1g-1024", "ring all-reduce 1 GiB, Ring", 1024,
         allreduce(lambda: one_dim("ring", 1024), GiB), 6.18, 356),
    Case("fc-512", "direct all-reduce 64 MiB, FullyConnected", 512,
         allreduce(lambda: one_dim("fully_connected", 512, "direct"), 64 * MiB), 11.97, 297),
    Case("fc-1024", "direct all-reduce 64 MiB, FullyConnected", 1024,
         allreduce(lambda: one_dim("fully_connected", 1024, "direct"), 64 * MiB), 77.85, 1139),
    Case("hd-1024", "halving-doubling 64 MiB, Switch", 1024,
         allreduce(lambda: one_dim("switch", 1024, "halving_doubling"), 64 * MiB), 0.73, 358),
    Case("3d-1024", "ring/direct/ring 64 MiB, 3-D Ring x FC x Switch", 1024,
         allreduce(three_d, 64 * MiB), 0.60, 59),
    Case("dp-64", "4-layer data-parallel training, 2 iterations, Ring", 64,
         data_parallel_64, 0.16, 16),
    Case("dp-64-straggler", "the same with one slow NPU (ASTRA-sim: issue 27's figure)", 64,
         data_parallel_64_straggler, 0.49),
    Case("ring-4096", "ring all-reduce 64 MiB, Ring", 4096,
         allreduce(lambda: one_dim("ring", 4096), 64 * MiB), heavy=True),
    Case("ring-16384", "ring all-reduce 64 MiB, Ring", 16384,
         allreduce(lambda: one_dim("ring", 16384), 64 * MiB), heavy=True),
    Case("resnet50-1024", "ResNet-50, 2 iterations, 3-D", 1024, resnet50_1024, 156.0, 609,
         heavy=True),
]  # fmt: skip
CASES += _issue27_cases()
BY_NAME = {c.name: c for c in CASES}


def child(name: str, freeze: bool = False) -> None:
    """Run one case in this process and print its simulated time as JSON (``freeze``: as
    the ``acesim`` command line does, ``gc.freeze()`` after the imports)."""
    if freeze:
        import gc

        import acesim.runs  # noqa: F401  (the training cases' imports, as the CLI's)

        gc.freeze()
    start, cpu = time.perf_counter(), time.process_time()
    simulated = BY_NAME[name].run()
    run_cpu = time.process_time() - cpu
    wall = time.perf_counter() - start
    print(json.dumps({"simulated": simulated, "wall": wall, "cpu": run_cpu, "notes": NOTES}))


def measure(name: str, timeout: float | None, freeze: bool = False) -> dict[str, Any]:
    """One child run: wall (s), user CPU (s), peak RSS (MiB), simulated time (s); a child
    still running after ``timeout`` s of wall time is killed (``timed_out``: its figures are
    then lower bounds)."""
    start = time.perf_counter()
    command = [sys.executable, __file__, "--child", name] + (["--cli-gc"] if freeze else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    timed_out = False
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - start > timeout:
                proc.kill()
                timed_out = True
                _pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        proc.kill()
        raise
    wall = time.perf_counter() - start
    out = proc.stdout.read()
    if timed_out:
        return {
            "wall": wall,
            "user": usage.ru_utime,
            "run_cpu": usage.ru_utime,
            "rss": usage.ru_maxrss / 1024,
            "simulated": math.nan,
            "notes": {},
            "timed_out": True,
        }
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: the child failed ({proc.returncode})")
    payload = json.loads(out.strip().splitlines()[-1])
    return {
        "wall": wall,
        "user": usage.ru_utime,
        "run_cpu": payload["cpu"],
        "rss": usage.ru_maxrss / 1024,  # KiB on Linux
        "simulated": payload["simulated"],
        "notes": payload.get("notes", {}),
        "timed_out": False,
    }


def _cpu(med: dict[str, Any], key: str = "run_cpu") -> str:
    """A CPU figure, as a lower bound where the run was stopped."""
    return f"> {med[key]:.1f}" if med["timed_out"] else f"{med[key]:.3f}"


def _target(case: Case, med: dict[str, Any]) -> str:
    """The ratio of the run CPU to issue 27's target (empty where it sets none)."""
    if case.target is None:
        return ""
    ratio = med["run_cpu"] / case.target
    return f"{'> ' if med['timed_out'] else ''}{ratio:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma-separated case names (default: the light ones)")
    parser.add_argument("--all", action="store_true", help="also the heavy cases")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (median)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument(
        "--cli-gc",
        action="store_true",
        help="freeze the import-time objects out of the garbage collector before each case, "
        "as the acesim command line does (the library does not)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="stop a run after this many seconds of wall time and report its CPU as a lower "
        "bound ('> N s')",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.cli_gc)
        return
    if args.cases:
        names = [n.strip() for n in args.cases.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown cases {unknown}; known: {', '.join(BY_NAME)}")
    else:
        names = [c.name for c in CASES if args.all or not c.heavy]
    rows = []
    for name in names:
        case = BY_NAME[name]
        runs = [measure(name, args.timeout, args.cli_gc) for _ in range(args.repeat)]
        med = {
            k: statistics.median(r[k] for r in runs)
            for k in runs[0]
            if k not in ("notes", "timed_out")
        }
        med["timed_out"] = any(r["timed_out"] for r in runs)
        notes = runs[-1]["notes"]
        ratio = med["run_cpu"] / case.astra_cpu if case.astra_cpu else None
        rows.append((case, med, ratio, len(runs)))
        if not args.markdown:
            vs = f"  ASTRA-sim {case.astra_cpu:g} s: ratio {ratio:.3f}" if ratio else ""
            if case.target is not None:
                vs += f"  target {case.target:g} s: ratio {_target(case, med)}"
            if notes:
                vs += (
                    f"  ({notes['event_collectives']} of {notes['collectives']} collectives on "
                    f"the event path, {notes.get('joint', 0)} computed with overlapping ones, "
                    f"{notes['redone']} redone"
                    f"{', ranks replicated' if notes.get('replicated') else ''})"
                )
            print(
                f"{name:14s} {case.npus:>6,d} NPUs  simulated {med['simulated'] * 1e3:9.3f} ms  "
                f"wall {med['wall']:8.2f} s  user {med['user']:8.2f} s  run CPU "
                f"{_cpu(med):>8s} s  "
                f"RSS {med['rss']:7.0f} MiB{vs}",
                flush=True,
            )
    if args.markdown:
        print(
            "| case | NPUs | simulated (ms) | wall (s) | user CPU (s) | run CPU (s) | "
            "peak RSS (MiB) | "
            "ASTRA-sim user CPU (s) | ASTRA-sim RSS (MiB) | ratio (target <= 0.1) | "
            "issue 27 target (s) | ratio to it | runs |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for case, med, ratio, n in rows:
            astra = f"{case.astra_cpu:g}" if case.astra_cpu else "-"
            arss = f"{case.astra_rss:g}" if case.astra_rss else "-"
            shown = f"{ratio:.3f}" if ratio is not None else "-"
            target = f"{case.target:g}" if case.target is not None else "-"
            print(
                f"| {case.label} | {case.npus:,} | {med['simulated'] * 1e3:.3f} | "
                f"{med['wall']:.2f} | {_cpu(med, 'user')} | {_cpu(med)} | "
                f"{med['rss']:.0f} | {astra} | {arss} | "
                f"{shown} | {target} | {_target(case, med) or '-'} | {n} |"
            )
        print()
        print(
            f"Python {platform.python_version()} on {platform.machine()}, {platform.system()}; "
            f"{describe()}"
        )


if __name__ == "__main__":
    main()
