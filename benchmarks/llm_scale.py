"""How fast acesim simulates one LLM training iteration (issue 14), exact mode.

Llama3-shaped cases on H100 NVSwitch nodes (``h100-nvswitch-8`` with ``--nodes``), every GPU
simulated: the median wall time of a few runs of graph building plus simulation, with the
graph nodes and collective instances simulated. The issue's targets are for class mode (one
representative rank per class of identical ranks: 1,024 GPUs <= 10 s, 16,384 <= 60 s, 100,000
<= 10 minutes for a Llama3 405B iteration), which is not built yet; exact mode is what this
prints.

    python benchmarks/llm_scale.py                 # the default cases
    python benchmarks/llm_scale.py --repeats 1 --big   # also Llama3 70B on 64 GPUs (minutes)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from acesim.experiment.llm import make_llm_case, run_llm
from acesim.workload.llm.models import MODELS
from acesim.workload.llm.parallel import parse_parallel

#: (label, model, nodes, parallel, global batch, micro batch, seq, precision)
CASES = [
    ("8B tp=2 pp=1, 8 GPUs", "llama3-8b", 1, "tp=2,pp=1", 16, 1, 8192, "fp8"),
    ("8B tp=2 pp=4, 64 GPUs", "llama3-8b", 8, "tp=2,pp=4", 64, 1, 4096, "bf16"),
    (
        "70B tp=4 pp=8 vpp=5, 64 GPUs, GBS 32",
        "llama3-70b",
        8,
        "tp=4,pp=8,vpp=5",
        32,
        1,
        8192,
        "fp8",
    ),
]
BIG = [
    (
        "70B tp=4 pp=8 vpp=5, 64 GPUs, GBS 128",
        "llama3-70b",
        8,
        "tp=4,pp=8,vpp=5",
        128,
        1,
        8192,
        "fp8",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="also the Megatron-Bridge 70B case")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, exact mode")
    print(
        f"{'case':42s} {'wall s (median)':>16s} {'nodes':>9s} {'collectives':>11s}"
        f" {'iteration s':>12s}"
    )
    for label, model, nodes, par, gbs, mbs, seq, prec in CASES + (BIG if args.big else []):
        times = []
        result = None
        messages = nodes_count = 0
        for _ in range(args.repeats):
            start = time.perf_counter()
            case = make_llm_case(
                "h100-nvswitch-8",
                MODELS.get(model),
                parse_parallel(par, global_batch=gbs, micro_batch=mbs, seq=seq),
                precision=prec,
                nodes=nodes,
            )
            result, ex = run_llm(case)
            times.append(time.perf_counter() - start)
            nodes_count = sum(len(r) for r in ex.graph.ranks)
            messages = len(ex.collectives)
        assert result is not None
        print(
            f"{label:42s} {statistics.median(times):16.2f} {nodes_count:9d} {messages:11d}"
            f" {result.iteration_time:12.3f}"
        )


if __name__ == "__main__":
    main()
