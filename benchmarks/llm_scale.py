"""How fast acesim simulates one LLM training iteration (issue 14).

Class mode (the default of LLM runs: one simulated rank per pipeline stage, an exact reduction
of simulating every GPU) on Llama3 405B at about 1,000, 16,000 and 100,000 H100 GPUs
(``h100-nvswitch-8`` with ``--nodes``), against the issue's targets (<= 10 s, <= 60 s,
<= 600 s on the 2-core machine): the median over a few runs of case resolution (placement,
memory), graph building and simulation, as wall time and as this process's CPU time (on a
shared machine the wall time also counts the other processes' turns; the CPU time is what one
free core would take).

Llama3 405B has 126 layers, so its pipeline sizes divide 126 (Megatron needs equal stages):
``tp=8,pp=9`` (14 layers a stage) with full recomputation, the configuration of that shape
that fits 80 GB (44 GB per GPU; without recomputation the activations of the first stage's
nine in-flight micro-batches need 100 GB). The GPU counts are therefore multiples of 72:
1,008, 16,128 and 100,800 GPUs (DP 14, 224, 1,400), with 16 micro-batches per pipeline at
every scale (global batch 16 x DP, as Llama3 405B's 16k-GPU run: 2,048 sequences over DP 128),
so the work per GPU is the same and the cost of scale shows alone. ``--exact`` adds the
exact-mode cases (every GPU; minutes).

    python benchmarks/llm_scale.py                      # class mode, 3 repeats (minutes)
    python benchmarks/llm_scale.py --repeats 1 --only 1008
    python benchmarks/llm_scale.py --exact --repeats 1  # also exact mode on 64 GPUs
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from acesim.runs.llm import make_llm_case, run_llm
from acesim.workload.llm.models import MODELS
from acesim.workload.llm.parallel import parse_parallel

#: (GPUs, model, nodes, parallel, global batch, micro batch, seq, precision, target s)
CLASS_CASES = [
    (1008, "llama3-405b", 126, "tp=8,pp=9,recompute=full", 16 * 14, 1, 8192, "bf16", 10.0),
    (16128, "llama3-405b", 2016, "tp=8,pp=9,recompute=full", 16 * 224, 1, 8192, "bf16", 60.0),
    (100800, "llama3-405b", 12600, "tp=8,pp=9,recompute=full", 16 * 1400, 1, 8192, "bf16", 600.0),
]
#: exact mode against class mode (the agreement, and what class mode saves)
EXACT_CASES = [
    (64, "llama3-8b", 8, "tp=2,pp=4", 64, 1, 4096, "bf16", 0.0),
]


def _run(case_args: tuple, mode: str) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, iteration s, simulated ranks, mode run) of one run."""
    _gpus, model, nodes, par, gbs, mbs, seq, prec, _target = case_args
    wall, cpu = time.perf_counter(), time.process_time()
    case = make_llm_case(
        "h100-nvswitch-8",
        MODELS.get(model),
        parse_parallel(par, global_batch=gbs, micro_batch=mbs, seq=seq),
        precision=prec,
        nodes=nodes,
    )
    result, ex = run_llm(case, mode="exact" if mode == "exact" else "class")
    return (
        time.perf_counter() - wall,
        time.process_time() - cpu,
        result.iteration_time,
        len(ex.records),
        result.mode,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", type=int, action="append", help="GPU counts to run")
    parser.add_argument("--exact", action="store_true", help="also the exact-mode comparison")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at start"
    )
    print(
        f"{'case':44s} {'mode':>5s} {'ranks':>5s} {'wall s':>8s} {'CPU s':>8s} "
        f"{'target s':>8s} {'CPU/target':>10s} {'iteration s':>11s}"
    )
    rows = [(c, "class") for c in CLASS_CASES if not args.only or c[0] in args.only]
    if args.exact:
        rows += [(c, m) for c in EXACT_CASES for m in ("class", "exact")]
    for case_args, mode in rows:
        runs = [_run(case_args, mode) for _ in range(args.repeats)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        gpus, model, _n, par, gbs = case_args[:5]
        target = case_args[-1]
        label = f"{model} {par} on {gpus:,} GPUs, GBS {gbs}"
        ratio = f"{cpu / target:10.2f}" if target else f"{'':10s}"
        print(
            f"{label:44s} {runs[0][4]:>5s} {runs[0][3]:5d} {wall:8.1f} {cpu:8.1f} "
            f"{target or float('nan'):8.0f} {ratio} {runs[0][2]:11.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
