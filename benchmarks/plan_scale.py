"""How long a 1,000-configuration plan of Llama 3 70B on 8 DGX H100 nodes takes (issue 28).

The target: ``acesim plan`` over 1,000 configurations in <= 10 minutes of CPU on the 2-core
machine. This script measures the plan's parts in this process (CPU time):

* the enumeration of the default space (every rule applied) and the number of valid candidates;
* building a candidate (its work, memory and kernel bound), median over ``--builds`` of them;
* simulating one (mode composed, as the plan simulates its candidates; ``--class-mode``: class
  mode, the full simulation), median over ``--sims`` drawn with a fixed seed;

and prints the plan's CPU for 1,000 simulated configurations (1,000 builds and simulations; the
enumeration once) and its ratio to 600 s. ``--full`` runs the plan itself instead (``acesim
plan``'s search, its branch and bound pruning by the bounds, in this process: ``--top`` rows,
default 10) and prints its CPU, what it built, simulated and pruned, and the ratio to 600 s:
the measurement the projection stands in for (an hour or more today).

    python benchmarks/plan_scale.py                 # the projection (a few minutes)
    python benchmarks/plan_scale.py --sims 3 --builds 20
    python benchmarks/plan_scale.py --full --top 10 # the plan itself
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import statistics
import time

from acesim.plan import plan
from acesim.plan.bound import kernel_bound
from acesim.plan.space import Cluster, enumerate_space
from acesim.runs.case import resolve_system
from acesim.runs.llm import make_llm_case, run_llm
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
        default=0,
        help="with --full: simulate in this many local worker processes (0: in this one)",
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
    args = ap.parse_args()
    mode = "class" if args.class_mode else "composed"
    if args.full:
        full_plan(args.top, args.class_mode, args.workers, args.time_limit)
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


def full_plan(
    top: int, class_mode: bool, workers: int = 0, time_limit: float | None = None
) -> None:
    """The plan of the module docstring run whole, with its counts (``class_mode``: its
    candidates simulated in class mode, ``acesim plan --full``; ``workers``: simulated in
    that many local processes, ``acesim plan --workers``; ``time_limit``: stopped there,
    ``acesim plan --time-limit``, with how far its best row can be from the best)."""
    simulated = [0]

    def tick(_endpoint: str, count: int) -> None:
        simulated[0] = count
        print(
            f"  {count} simulated, {_cpu() - cpu:.0f} CPU s, {time.perf_counter() - wall:.0f} s",
            flush=True,
        )

    cpu, wall = _cpu(), time.perf_counter()
    result = plan(
        "h100-nvswitch-8", "llama3-70b", nodes=8, global_batch=128, seq=8192,
        precision="fp8", top=top, progress=tick, full=class_mode, workers=workers,
        time_limit=time_limit,
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
    print(
        f"plan: {total:,.0f} CPU s, {elapsed:,.0f} s wall with {workers or 1} process(es) "
        f"simulating (target {TARGET_S:.0f} s): ratio {elapsed / TARGET_S:.1f} (wall), "
        f"{total / TARGET_S:.1f} (CPU)"
    )


if __name__ == "__main__":
    main()
