"""What mode ``composed`` (:mod:`acesim.training.compose`) costs and how far it is from class
mode (issue 27): for each case of ``benchmarks/llm_scale.py`` (issue 27's table), the composed
run and the class-mode run (the full simulation), each as this process's CPU time (start-up
excluded), the composed iteration's relative error (issue 27's bound: 0.1%) and its CPU time
against the target of 1 CPU s; and how the composition went (passes timed, expanded, rounds).

    python benchmarks/compose_error.py --only 70b          # one case (about 30 CPU s)
    python benchmarks/compose_error.py --repeats 3         # every case, median of 3 (about 20 min)
    python benchmarks/compose_error.py --composed-only     # the composed runs alone
"""

from __future__ import annotations

import argparse
import statistics
import time

from llm_scale import CASES, LlmBench, case_of

from acesim.runs.llm import run_llm


def _once(bench: LlmBench, mode: str) -> tuple[float, float, str]:
    """(CPU s, iteration s, how it went) of one run of ``bench`` in ``mode``."""
    cpu = time.process_time()
    result, execution = run_llm(case_of(bench), mode=mode)
    spent = time.process_time() - cpu
    c = execution.composed
    how = (
        f"{c.timed} timed, {c.expanded} expanded, {c.distinct} distinct, {c.rounds} runs"
        if c is not None
        else result.mode
    )
    if c is not None and c.extrapolated is not None:  # acesim.training.steady
        how += f", steady state extrapolated from {c.extrapolated[0]} and {c.extrapolated[1]}"
    return spent, result.iteration_time, how


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="case names")
    parser.add_argument("--composed-only", action="store_true", help="skip the class-mode runs")
    args = parser.parse_args()
    names = args.only or list(CASES)
    print("case | composed CPU s (median) | / 1 s | class CPU s | speed-up | error | composition")
    for name in names:
        bench = CASES[name]
        runs = [_once(bench, "composed") for _ in range(args.repeats)]
        cpu = statistics.median(r[0] for r in runs)
        iteration, how = runs[0][1], runs[0][2]
        if args.composed_only:
            print(f"{name} | {cpu:.2f} | {cpu / bench.target:.2f} | - | - | - | {how}", flush=True)
            continue
        full_cpu, full, _ = _once(bench, "class")
        error = iteration / full - 1
        print(
            f"{name} | {cpu:.2f} | {cpu / bench.target:.2f} | {full_cpu:.1f} | "
            f"{full_cpu / cpu:.1f}x | {error:+.2e} | {how}",
            flush=True,
        )


if __name__ == "__main__":
    main()
