"""How long a plan of Llama 3 70B on 8 DGX H100 nodes takes (issue 28).

The target: ``acesim plan`` of Llama 3 70B on 64 H100 (GBS 128, seq 8192, FP8; the default
space: 7,152 valid configurations, 1,632 that fit) completes, its top 10 proven, in <= 10
minutes on the 2-core machine, as the command runs it (both cores: a worker process each).

``--full`` runs that plan (``acesim plan``'s search, its branch and bound pruning by the
bounds: ``--top`` rows, default 10; ``--workers``, default the CPUs as ``acesim plan``;
``--dask local`` on a LocalCluster instead) and prints what it built, simulated and pruned,
its wall time and the ratio to 600 s, and the CPU of the whole process tree (workers
included). Without ``--full`` it projects instead, from the plan's parts in this process (CPU
time): the enumeration, building a candidate (its work, memory and kernel bound, median over
``--builds``), simulating one (mode composed, as the plan simulates its candidates;
``--class-mode``: class mode; median over ``--sims`` drawn with a fixed seed), and prints
1,000 builds and simulations against 600 s: what a plan without pruning would cost.

    python benchmarks/plan_scale.py --full          # the plan itself (about 8 minutes)
    python benchmarks/plan_scale.py --full --dask local
    python benchmarks/plan_scale.py                 # the projection (a few minutes)
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import statistics
import time

import psutil

from acesim.plan import plan
from acesim.plan.bound import kernel_bound
from acesim.plan.space import Cluster, enumerate_space
from acesim.runs.case import resolve_system
from acesim.runs.llm import make_llm_case, run_llm
from acesim.sweep.runner import default_workers
from acesim.workload.llm.models import MODELS

TARGET_S = 600.0
CONFIGS = 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", type=int, default=30, help="candidates built for the median")
    ap.add_argument("--sims", type=int, default=5, help="candidates simulated for the median")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--full", action="store_true", help="run the plan itself (module docstring)")
    ap.add_argument("--top", type=int, default=10, help="with --full: rows ranked")
    ap.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="with --full: simulate in this many local worker processes (0: in this one; "
        "default: the CPUs, as acesim plan)",
    )
    ap.add_argument(
        "--class-mode", action="store_true", help="simulate in class mode (the plan's --full)"
    )
    ap.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="with --full: stop the plan after this many wall seconds (acesim plan "
        "--time-limit) and print how far its best row can be from the best",
    )
    ap.add_argument(
        "--dask",
        default=None,
        help="with --full: simulate on this Dask cluster ('local': a LocalCluster of --workers)",
    )
    args = ap.parse_args()
    mode = "class" if args.class_mode else "composed"
    if args.full:
        full_plan(args.top, args.class_mode, args.workers, args.time_limit, args.dask)
        return
    model = MODELS.get("llama3-70b")
    system = resolve_system("h100-nvswitch-8", nodes=8)
    shape = list(system.network.shape)
    cpu = time.process_time()
    space = enumerate_space(model, Cluster(math.prod(shape), shape[0]), global_batch=128, seq=8192)
    enum_s = time.process_time() - cpu
    print(
        f"space: {space.size:,} candidates, {len(space.candidates):,} valid "
        f"(enumerated in {enum_s:.2f} CPU s)"
    )
    rng = random.Random(args.seed)
    drawn = rng.sample(space.candidates, min(len(space.candidates), args.builds))
    builds, fitting = [], []
    for c in drawn:
        cpu = time.process_time()
        case = make_llm_case(system, model, c.parallel, precision="fp8", check_memory=False)
        bound = kernel_bound(case)
        builds.append(time.process_time() - cpu)
        if case.memory["total"] <= system.npu.hbm_capacity:
            fitting.append((case, bound))
    build_s = statistics.median(builds)
    print(f"build + bound: median {build_s:.3f} CPU s over {len(builds)}")
    sims, tightness = [], []
    for case, bound in fitting[: args.sims]:
        cpu = time.process_time()
        result, _ = run_llm(case, mode=mode)
        sims.append(time.process_time() - cpu)
        tightness.append(bound / result.iteration_time)
        print(
            f"  simulated {case.parallel.describe()}: {result.iteration_time:.3f} s "
            f"iteration in {sims[-1]:.1f} CPU s (kernel bound {bound:.3f} s, "
            f"{tightness[-1]:.0%} of it)"
        )
    if not sims:
        print("no drawn candidate fits in HBM: raise --builds")
        return
    sim_s = statistics.median(sims)
    total = enum_s + CONFIGS * (build_s + sim_s)
    print(f"simulate ({mode}): median {sim_s:.1f} CPU s over {len(sims)}")
    print(
        f"kernel bound / simulated: median {statistics.median(tightness):.0%} (the search "
        "simulates only candidates whose bound is below the K-th best time: the tighter, "
        "the fewer)"
    )
    print(
        f"{CONFIGS:,}-configuration plan: {total:,.0f} CPU s projected "
        f"(target {TARGET_S:.0f} s): ratio {total / TARGET_S:.1f}"
    )


def _cpu() -> float:
    """CPU s of this process and of the worker processes it waited for (a worker still
    running is not counted: with ``--workers``, read the wall time)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _tree_cpu() -> float:
    """CPU s of this process and every live process below it (its worker pool, a local Dask
    cluster's workers), as the kernel counts them."""
    total = 0.0
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += t.user + t.system
    return total


def full_plan(
    top: int,
    class_mode: bool,
    workers: int = 0,
    time_limit: float | None = None,
    dask: str | None = None,
) -> None:
    """The plan of the module docstring run whole, with its counts (``class_mode``: its
    candidates simulated in class mode, ``acesim plan --full``; ``workers``: simulated in
    that many local processes, ``acesim plan --workers``; ``time_limit``: stopped there,
    ``acesim plan --time-limit``, with how far its best row can be from the best; ``dask``:
    on that Dask cluster, ``local`` for a LocalCluster of ``workers`` processes)."""
    simulated = [0]
    tree = [0.0]  # the whole tree's CPU at the last simulation taken (workers still alive)

    def tick(_endpoint: str, count: int) -> None:
        simulated[0] = count
        tree[0] = _tree_cpu() - tree_start
        print(
            f"  {count} simulated, {_cpu() - cpu:.0f} CPU s, {time.perf_counter() - wall:.0f} s",
            flush=True,
        )

    cpu, wall, tree_start = _cpu(), time.perf_counter(), _tree_cpu()
    result = plan(
        "h100-nvswitch-8", "llama3-70b", nodes=8, global_batch=128, seq=8192,
        precision="fp8", top=top, progress=tick, full=class_mode, workers=workers,
        time_limit=time_limit, dask=dask,
    )  # fmt: skip
    total = _cpu() - cpu
    elapsed = time.perf_counter() - wall
    o = result.outcome
    kind = next(iter(o.rows))
    print(
        f"space {o.space.size:,}, valid {len(o.space.candidates):,}; built {o.built:,} "
        f"({o.fits:,} fit, {sum(o.memory_refused.values()):,} refused for memory); simulated "
        f"{len(o.rows[kind]):,}; pruned {o.pruned_unbuilt[kind]:,} unbuilt and "
        f"{o.pruned_kernel[kind]:,} built ({o.pruned_network[kind]:,} by the network bound); "
        f"failed {len(o.failed)}"
    )
    best = o.rows[kind][0]
    print(f"best: {best.candidate.text} at {best.iteration_time:.3f} s an iteration")
    budget = result.budget(kind)
    if budget is not None:
        print(
            f"stopped by the {budget['stopped_by']}: {budget['unexplored']:,} unexplored, "
            f"none faster than {budget['least_bound']:.3f} s; the best within "
            f"{budget['gap']:.1%} of the best possible, {budget['certain_rows']} rows certain"
        )
    where = f"dask {dask}" if dask else f"{workers or 1} process(es)"
    print(
        f"plan: {elapsed:,.0f} s wall with {where} simulating (target {TARGET_S:.0f} s on the "
        f"2-core machine): ratio {elapsed / TARGET_S:.2f}; CPU {tree[0]:,.0f} s, the plan's "
        f"process and its workers together at the last simulation taken (this process with the "
        f"workers that ended, as the kernel counts them at the end: {total:,.0f} s)"
    )


if __name__ == "__main__":
    main()
