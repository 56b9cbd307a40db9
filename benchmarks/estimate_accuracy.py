"""How good a run's cost estimate is (issue 30): estimate over the measured CPU time, per run
kind and mode.

Every run is estimated before it runs (:mod:`acesim.runs.estimate`: its messages and compute
kernels times its kind's constants). For a few small and medium cases of each kind (a
collective, training graphs from the zoo and a Chakra trace, LLM iterations in class and exact
mode, jobs sharing a system; a few more held out of the fit, to check it) this runs the case
through the one run path (:func:`acesim.runs.single.execute`), takes the estimate it is told,
and measures the process CPU time from that moment to the result (the simulation; the graph is
already built), the median of ``--repeats`` runs after one untimed run (imports, caches). It
prints each case's estimate over that time (the target: between 0.5 and 2) and, with
``--fit``, the least-squares constants (relative error, non-negative) of each kind and mode
from the fitted cases: the values written in :data:`acesim.runs.estimate.RUN_COSTS`.

    python benchmarks/estimate_accuracy.py               # ratios (about 6 minutes)
    python benchmarks/estimate_accuracy.py --fit         # also the fitted constants
    python benchmarks/estimate_accuracy.py --only "llm|jobs"   # cases whose name matches
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from acesim._compiled import describe
from acesim.config import load_system
from acesim.runs.collective import make_collective_case
from acesim.runs.estimate import RUN_COSTS, Estimate
from acesim.runs.jobs import make_jobs
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute, variant_case

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: Marks a case the fit leaves out (a check of the constants on cases they were not fitted to).
HELD_OUT = " (held out)"
#: issue 27's straggler: rank 3's kernels 1.5x as long
STRAGGLER = {"rank": 3, "slowdown": 1.5}


def _chakra(folder: Path) -> str:
    """A Chakra trace of resnet50's 2 iterations on 8 NPUs written to ``folder`` (by
    ``acesim export-chakra``); its prefix."""
    prefix = folder / "resnet50"
    export = ["export-chakra", str(prefix), "-w", "resnet50", "--npus", "8", "-n", "2"]
    code = "from acesim.cli import app; import sys; app(sys.argv[1:])"
    subprocess.run([sys.executable, "-c", code, *export], check=True, capture_output=True)
    return str(prefix)


def _cases(folder: Path) -> list[tuple[str, Callable[[], Any]]]:
    """(name, case builder) of every measured case: small and medium sizes, each at most a
    few CPU seconds."""
    coll, run, jobs = _coll, _run, _jobs
    llm = partial(_llm, mode="class")
    composed = partial(_llm, mode="symmetric")  # acesim run's default: composed
    exact = "exact"
    return [
        ("collective symmetric all-reduce 64MiB 64", partial(coll, "all-reduce", "64MiB", 64)),
        ("collective symmetric all-reduce 1GiB 512", partial(coll, "all-reduce", "1GiB", 512)),
        ("collective symmetric all-to-all 64MiB 64", partial(coll, "all-to-all", "64MiB", 64)),
        ("collective exact all-reduce 64MiB 64", partial(coll, "all-reduce", "64MiB", 64, exact)),
        ("collective exact all-reduce 64MiB 256", partial(coll, "all-reduce", "64MiB", 256, exact)),
        ("collective exact all-gather 16MiB 128", partial(coll, "all-gather", "16MiB", 128, exact)),
        ("training symmetric resnet50 64", partial(run, "resnet50", npus=64)),
        ("training symmetric gnmt 16", partial(run, "gnmt", npus=16)),
        ("training symmetric gpt 16", partial(run, "gpt", npus=16, precision="fp16")),
        ("training symmetric chakra resnet50 8", lambda: run(_chakra(folder), npus=8)),
        # the ideal endpoint's messages hold links only: a cost of their own (stop 62)
        ("training symmetric gnmt 16 ideal", partial(run, "gnmt", "ideal", npus=16)),
        (
            "training symmetric gpt 16 ideal",
            partial(run, "gpt", "ideal", npus=16, precision="fp16"),
        ),
        ("training symmetric resnet50 16 ideal", partial(run, "resnet50", "ideal", npus=16)),
        ("training exact resnet50 8", partial(run, "resnet50", npus=8, mode=exact)),
        ("training exact resnet50 16", partial(run, "resnet50", npus=16, mode=exact)),
        ("training exact gnmt 8", partial(run, "gnmt", npus=8, mode=exact)),
        ("llm class llama3-8b tp2pp4", partial(llm, "tp=2,pp=4")),
        ("llm class llama3-8b tp1pp8 gb64", partial(llm, "tp=1,pp=8", global_batch=64)),
        ("llm class llama3-8b tp2pp4 gb64", partial(llm, "tp=2,pp=4", global_batch=64)),
        ("llm class llama3-8b tp8pp2 2 nodes", partial(llm, "tp=8,pp=2", nodes=2)),
        ("llm class llama3-70b tp8pp8 8 nodes", partial(llm, "tp=8,pp=8", "llama3-70b", nodes=8)),
        ("llm composed llama3-8b tp2pp4", partial(composed, "tp=2,pp=4")),
        ("llm composed llama3-8b tp1pp8 gb64", partial(composed, "tp=1,pp=8", global_batch=64)),
        ("llm composed llama3-8b tp2pp4 gb64", partial(composed, "tp=2,pp=4", global_batch=64)),
        ("llm composed llama3-8b tp8pp2 2 nodes", partial(composed, "tp=8,pp=2", nodes=2)),
        (
            "llm composed llama3-70b tp8pp8 8 nodes",
            partial(composed, "tp=8,pp=8", "llama3-70b", nodes=8),
        ),
        ("llm exact llama3-8b tp2pp4", partial(_llm, "tp=2,pp=4", mode=exact)),
        (
            "llm exact llama3-8b tp2pp4 gb48",
            partial(_llm, "tp=2,pp=4", mode=exact, global_batch=48),
        ),
        ("llm exact llama3-8b tp8pp1 gb4", partial(_llm, "tp=8,pp=1", mode=exact, global_batch=4)),
        ("llm exact llama3-8b tp4pp2 2 nodes", partial(_llm, "tp=4,pp=2", mode=exact, nodes=2)),
        # collectives computed in agreed orders as the run goes (a straggler, mixed NPUs:
        # "training exact agreed", stop 59)
        ("training exact resnet50 16 ideal straggler", partial(_varied, 16, "straggler")),
        ("training exact resnet50 32 ideal mixed", partial(_varied, 32, "mixed")),
        ("training exact resnet50 128 ideal mixed", partial(_varied, 128, "mixed")),
        ("training exact resnet50 512 ideal straggler", partial(_varied, 512, "straggler")),
        (
            "training exact resnet50 1024 ideal straggler 1 iteration",
            partial(_varied, 1024, "straggler", iterations=1),
        ),
        # a lone collective with a variation on the baseline endpoint: every rank at once
        # (network/rank_fluid.py, "collective per-rank", stop 65)
        ("collective per-rank all-reduce 64MiB 64 slow link", partial(_coll_varied, 64)),
        ("collective per-rank all-reduce 64MiB 256 slow link", partial(_coll_varied, 256)),
        ("collective per-rank all-reduce 64MiB 1024 slow link", partial(_coll_varied, 1024)),
        ("jobs dp-spine", partial(jobs, "dp-spine")),
        ("jobs nvl72-split", partial(jobs, "nvl72-split")),
        ("jobs latency-beside-training", partial(jobs, "latency-beside-training")),
        # held out of the fit: other endpoints, a larger LLM case in each mode
        ("training symmetric resnet50 64 ace" + HELD_OUT, partial(run, "resnet50", "ace", npus=64)),
        (
            "training symmetric resnet50 64 ideal" + HELD_OUT,
            partial(run, "resnet50", "ideal", npus=64),
        ),
        ("llm class llama3-70b tp4pp8vpp5 fp8" + HELD_OUT, partial(_llm_70b, "class")),
        ("llm composed llama3-70b tp4pp8vpp5 fp8" + HELD_OUT, partial(_llm_70b, "symmetric")),
        ("llm exact llama3-8b tp2pp4 64 GPUs" + HELD_OUT, _llm_64),
        # a straggler on the ideal endpoint: collectives computed in agreed orders (stop 58)
        (
            "training exact resnet50 64 ideal straggler" + HELD_OUT,
            partial(_varied, 64, "straggler"),
        ),
        (
            "training exact resnet50 256 ideal straggler" + HELD_OUT,
            partial(_varied, 256, "straggler"),
        ),
        ("training exact resnet50 256 ideal mixed" + HELD_OUT, partial(_varied, 256, "mixed")),
        (
            "collective per-rank all-reduce 16MiB 512 mixed" + HELD_OUT,
            partial(_coll_varied, 512, "mixed", "16MiB"),
        ),
        (
            "collective per-rank reduce-scatter 64MiB 128 slow link" + HELD_OUT,
            partial(_coll_varied, 128, op="reduce-scatter"),
        ),
        # beside a compute kernel on every NPU: the collective and the kernels every rank at
        # once (network/rank_streams.py, stop 66), then the collective alone
        (
            "collective per-rank all-reduce 64MiB 256 slow link beside a kernel" + HELD_OUT,
            partial(_coll_varied, 256, compute=BESIDE),
        ),
        (
            "collective per-rank all-reduce 64MiB 1024 slow link beside a kernel" + HELD_OUT,
            partial(_coll_varied, 1024, compute=BESIDE),
        ),
        # the baseline endpoint with a variation: every message on the event path (its
        # messages charge the NPUs' HBM and units; stop 64), as each run of `acesim run`'s
        # comparison is told its estimate
        (
            "training exact resnet50 64 baseline straggler" + HELD_OUT,
            partial(_varied, 64, "straggler", endpoint="baseline"),
        ),
        (
            "training exact resnet50 64 baseline mixed" + HELD_OUT,
            partial(_varied, 64, "mixed", endpoint="baseline"),
        ),
    ]


def _varied(npus: int, kind: str, iterations: int = 2, endpoint: str = "ideal") -> Any:
    """ResNet-50 on ``npus`` NPUs of ``ace-isca21`` with ``endpoint`` in exact mode with issue
    27's straggler or half the NPUs at half the HBM bandwidth."""
    if kind == "straggler":
        varied: dict[str, Any] = {"stragglers": [STRAGGLER]}
    else:
        half = load_system("ace-isca21").npu.hbm_bandwidth / 2
        varied = {"npu_types": [{"ranks": f"0-{npus // 2 - 1}", "hbm_bandwidth": half}]}
    case = make_run_case(
        "ace-isca21", "resnet50", None, iterations=iterations, warmup=0, npus=npus,
        mode="exact", **varied,
    )  # fmt: skip
    return variant_case(case, endpoint, None)


def _coll(op: str, size: str, npus: int, mode: str = "symmetric") -> Any:
    options = {"mode": mode, "npus": npus}
    return make_collective_case("ace-isca21", op, size, options, endpoint="baseline")


#: the compute kernel beside the collective (FLOPs, HBM bytes): ``acesim collective
#: --with-compute 2e13,2e10``, about 0.16 s alone on ``ace-isca21``'s NPU
BESIDE = (2e13, 2e10)


def _coll_varied(
    npus: int,
    kind: str = "slow link",
    size: str = "64MiB",
    op: str = "all-reduce",
    compute: tuple[float, float] | None = None,
) -> Any:
    """A collective on ``ace-isca21``'s baseline endpoint in exact mode with rank 3's
    first-dimension link at half bandwidth, or half the NPUs at half the HBM bandwidth;
    alone, or beside a ``compute`` kernel (FLOPs, HBM bytes) on every NPU."""
    system = load_system("ace-isca21")
    if kind == "slow link":
        half = system.network.dimensions[0].link_bandwidth / 2
        varied: dict[str, Any] = {"links": [{"dim": 0, "rank": 3, "bandwidth": half}]}
    else:
        hbm = system.npu.hbm_bandwidth / 2
        varied = {"npu_types": [{"ranks": f"0-{npus // 2 - 1}", "hbm_bandwidth": hbm}]}
    options = {"mode": "exact", "npus": npus, **varied}
    return make_collective_case(
        "ace-isca21", op, size, options, endpoint="baseline", compute=compute
    )


def _run(workload: str, endpoint: str = "baseline", **options: Any) -> Any:
    case = make_run_case("ace-isca21", workload, None, iterations=2, warmup=0, **options)
    return variant_case(case, endpoint, None)


def _llm(parallel: str, model: str = "llama3-8b", **inputs: Any) -> Any:
    """An LLM case on DGX H100 nodes (default: one node, 16 sequences of 2,048 tokens), SM
    collectives."""
    inputs = {"nodes": 1, "global_batch": 16, "seq": 2048, **inputs}
    case = make_run_case("h100-nvswitch-8", model, None, parallel=parallel, **inputs)
    return variant_case(case, "sm", None)


def _llm_70b(mode: str) -> Any:
    """Megatron-Bridge's Llama3 70B shape on 8 nodes, FP8, 32 sequences of 8,192 tokens."""
    return _llm(
        "tp=4,pp=8,vpp=5", "llama3-70b", nodes=8, global_batch=32, seq=8192, precision="fp8",
        mode=mode,
    )  # fmt: skip


def _llm_64() -> Any:
    """Llama3 8B on 64 GPUs in exact mode (benchmarks/llm_scale.py's exact case)."""
    return _llm("tp=2,pp=4", mode="exact", nodes=8, global_batch=64, seq=4096)


def _jobs(name: str) -> Any:
    return make_jobs(EXAMPLES / "jobs" / f"{name}.toml", endpoint="sm")


def measure(case: Any) -> tuple[Estimate, float]:
    """The estimate of one run of ``case`` and its CPU time from the estimate on, s."""
    told: list[tuple[Estimate, float]] = []
    execute(case, on_estimate=lambda e: told.append((e, time.process_time())))
    end = time.process_time()
    assert told, "the run told no estimate"
    estimate, start = told[0]
    return estimate, end - start


def fit(rows: list[tuple[Estimate, float]]) -> tuple[float, float, float]:
    """Non-negative (per_run, per_message, per_kernel) minimising the squared relative error
    of ``rows``' estimates: least squares on every subset of the three, the best whose
    constants are all non-negative (an exact non-negative least squares for three unknowns)."""
    a = np.array([[1.0 / t, e.messages / t, e.kernels / t] for e, t in rows])
    b = np.ones(len(rows))
    best: tuple[float, tuple[float, float, float]] | None = None
    for cols in itertools.chain.from_iterable(
        itertools.combinations(range(3), k) for k in (1, 2, 3)
    ):
        sub = a[:, cols]
        if not sub.any():
            continue
        x, *_ = np.linalg.lstsq(sub, b, rcond=None)
        if (x < 0).any():
            continue
        full = [0.0, 0.0, 0.0]
        for c, v in zip(cols, x, strict=True):
            full[c] = float(v)
        err = float(np.sum((a @ np.array(full) - b) ** 2))
        if best is None or err < best[0]:
            best = (err, (full[0], full[1], full[2]))
    assert best is not None
    return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="run the cases whose name this regular expression finds")
    parser.add_argument("--fit", action="store_true", help="print fitted constants per kind")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at start; {describe()}"
    )
    header = (
        f"{'case':<52} {'cost':<20} {'messages':>9} {'kernels':>9} {'est s':>7} {'CPU s':>7} "
        f"{'ratio':>6}"
    )
    print(header)
    by_cost: dict[str, list[tuple[Estimate, float]]] = {}
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in _cases(Path(tmp)):
            if args.only and not re.search(args.only, name):
                continue
            case = build()
            measure(case)  # untimed: imports and caches
            runs = [measure(case) for _ in range(args.repeats)]
            estimate = runs[0][0]
            cpu = statistics.median(t for _, t in runs)
            if not name.endswith(HELD_OUT):
                by_cost.setdefault(estimate.cost, []).append((estimate, cpu))
            ratio = estimate.seconds / cpu if cpu > 0 else float("inf")
            ratios.append((name.endswith(HELD_OUT), ratio))
            print(
                f"{name:<52} {estimate.cost:<20} {estimate.messages:>9,} "
                f"{estimate.kernels:>9,} {estimate.seconds:>7.3f} {cpu:>7.3f} {ratio:>6.2f}"
            )
    for held, what in ((False, "fitted"), (True, "held-out")):
        some = [r for h, r in ratios if h == held]
        inside = sum(0.5 <= r <= 2.0 for r in some)
        print(f"{inside} of {len(some)} {what} cases within 2x (estimate / CPU time in 0.5-2)")
    if args.fit:
        print("fitted constants (s per run, per message, per kernel) vs RUN_COSTS:")
        for cost, rows in sorted(by_cost.items()):
            fitted = ", ".join(f"{v:.2g}" for v in fit(rows))
            c = RUN_COSTS[cost]
            now = f"{c.per_run:.2g}, {c.per_message:.2g}, {c.per_kernel:.2g}"
            print(f"  {cost:<20} fit {fitted}   now {now}   ({len(rows)} cases)")


if __name__ == "__main__":
    main()
