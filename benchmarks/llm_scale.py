"""How fast acesim simulates one LLM training iteration (issues 14 and 27).

The default cases are issue 27's table, in mode composed (as ``acesim run`` runs them: each
distinct pipeline pass simulated once, one simulated rank per pipeline stage; the 8B FSDP case
each pass in its context), each against the target of 1 CPU s per case,
measured in this process with start-up (imports) excluded; ``--full``: class mode, the full
simulation (``acesim run --full``):

* ``8b``: Llama 3 8B on 8 H100, FSDP (Megatron-Bridge's H100 FP8 row: ``zero=3``, 5 recomputed
  layers), GBS 128, seq 8192, FP8;
* ``70b``: Llama 3 70B on 64 H100, TP4 PP8 VPP5, TP overlap, GBS 128, seq 8192, FP8 (the
  Megatron-Bridge row);
* ``175b``: GPT-3 175B on 512 H100, TP4 PP8 VPP4, TP overlap, MBS 2, GBS 2,304, seq 2048, FP8;
* ``405b``: Megatron-Bridge's Llama 3.1 405B recipe on 1,024 H100 (TP8 PP8 CP2 VPP8, TP overlap,
  the embedding and the loss counted as pipeline layers: uneven stages of 15 and 16 layers),
  GBS 512, seq 8192, FP8 (the validation row ``mbridge-dgxh100-llama31-405b-fp8``: measured
  292 tokens/s/GPU, acesim +30%: docs/validation.md);
* ``1t``: GPT 1T (Narayanan et al., SC21, table 1: 128 layers, hidden 25,600, 160 heads, seq
  2048, vocabulary 51,200) on 512 A100, TP8 PP64, GBS 512, full recomputation, BF16.

``--only`` picks cases by name; the issue 14 scale cases (Llama3 405B ``tp=8,pp=9`` at 1,008,
16,128 and 100,800 GPUs, targets 10/60/600 s) are ``s1008``, ``s16128``, ``s100800`` and
``--exact`` adds the exact-mode comparison (``exact64``, class and exact mode); ``--composed``
(the default) runs the cases in mode composed (:mod:`acesim.training.compose`;
``benchmarks/compose_error.py`` prints its error against class mode). Each row is the
median of ``--repeats`` runs of case resolution, graph building and simulation, as wall time
and as this process's CPU time (on a shared machine the wall time also counts the other
processes' turns; the CPU time is what one free core would take). ``--general`` runs every
fluid reallocation through the general max-min filling (the engine before issue 27's fast path
for an activity alone on its resources, :data:`acesim.engine.kernel.SOLO_PATH`);
``--compare`` also runs each case once that way and prints its CPU time and the relative
difference of the iteration time (0: the fast path is exact).
``--no-steady`` simulates every micro-batch of a composed run (a run whose micro-batches far
outnumber its stages, ``1t``, is otherwise extrapolated from its steady state:
:mod:`acesim.training.steady`, said under its row).
``70b-fsdp`` (``--only``) is a candidate of ``acesim plan``'s space, Llama3 70B TP8 PP4 VPP5 with
SP and FSDP, MBS 2, on 64 H100, whose pass contexts never repeat.
``--repetition`` prints how alike the micro-batches of each stage are (the share of step
executions at their step's most common duration: what simulating each distinct step once would
save).

    python benchmarks/llm_scale.py --repeats 1 --only 70b
    python benchmarks/llm_scale.py              # issue 27's table, 5 repeats (about an hour today)
    python benchmarks/llm_scale.py --only s1008 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from acesim._compiled import describe
from acesim.engine import kernel as engine_kernel
from acesim.hardware.platform import PROCESS_PLANS
from acesim.runs.llm import LlmCase, make_llm_case, run_llm
from acesim.training import steady
from acesim.training.executor import Execution
from acesim.workload.llm.models import MODELS, TransformerConfig
from acesim.workload.llm.parallel import parse_parallel

#: GPT 1T as Narayanan et al. train it ("Efficient Large-Scale Language Model Training on GPU
#: Clusters Using Megatron-LM", SC21, table 1: 128 layers, hidden 25,600, 160 attention heads,
#: sequence 2,048; the GPT-2 vocabulary padded to 51,200 as Megatron-LM pads it).
GPT_1T = TransformerConfig(
    "gpt-1t",
    layers=128,
    hidden=25600,
    heads=160,
    ffn=4 * 25600,
    vocab=51200,
    seq=2048,
    gated=False,
    norm="layernorm",
    bias=True,
    source="Narayanan et al., SC21, table 1",
)


@dataclass(frozen=True)
class LlmBench:
    """One benchmark case: what it runs and its target (CPU s)."""

    label: str
    system: str
    nodes: int | None
    model: str | TransformerConfig
    parallel: str
    global_batch: int
    micro_batch: int
    seq: int
    precision: str
    target: float
    mode: str = "class"


_70B = "tp=4,pp=8,vpp=5,cp=1,ep=1,tp_overlap=1,grad_fp32=0"
_405B = "tp=8,pp=8,vpp=8,cp=2,tp_overlap=1,account_embedding=1,account_loss=1,grad_fp32=0"
_8B = "tp=1,pp=1,cp=1,ep=1,zero=3,recompute=full,recompute_layers=5,grad_fp32=0"
_S405 = "tp=8,pp=9,recompute=full"
_H100 = "h100-nvswitch-8"

#: issue 27's table (default), then issue 14's scale cases and the exact-mode comparison
CASES: dict[str, LlmBench] = {
    "8b": LlmBench("Llama3 8B FSDP, 8 H100", _H100, None, "llama3-8b", _8B, 128, 1, 8192, "fp8", 1),
    "70b": LlmBench("Llama3 70B TP4 PP8 VPP5, 64 H100", _H100, 8, "llama3-70b", _70B, 128, 1, 8192,
                    "fp8", 1),
    "175b": LlmBench("GPT-3 175B TP4 PP8 VPP4, 512 H100", _H100, 64, "gpt3-175b",
                     "tp=4,pp=8,vpp=4,tp_overlap=1", 2304, 2, 2048, "fp8", 1),
    "405b": LlmBench("Llama3.1 405B TP8 PP8 CP2 VPP8, 1,024 H100", _H100, 128, "llama3-405b",
                     _405B, 512, 1, 8192, "fp8", 1),
    "1t": LlmBench("GPT 1T TP8 PP64, 512 A100", "a100-nvswitch-8", 64, GPT_1T,
                   "tp=8,pp=64,recompute=full", 512, 1, 2048, "bf16", 1),
}  # fmt: skip
SCALE_CASES: dict[str, LlmBench] = {
    "s1008": LlmBench("Llama3 405B tp8 pp9, 1,008 GPUs", _H100, 126, "llama3-405b", _S405,
                      16 * 14, 1, 8192, "bf16", 10),
    "s16128": LlmBench("Llama3 405B tp8 pp9, 16,128 GPUs", _H100, 2016, "llama3-405b", _S405,
                       16 * 224, 1, 8192, "bf16", 60),
    "s100800": LlmBench("Llama3 405B tp8 pp9, 100,800 GPUs", _H100, 12600, "llama3-405b",
                        _S405, 16 * 1400, 1, 8192, "bf16", 600),
    # issue 27: "the 405B configuration on 100,000+ GPUs in <= 10 s": the 405b case's
    # recipe at DP 800 (12,800 nodes), its 64 micro-batches per pipeline kept
    "405b-100k": LlmBench("Llama3.1 405B TP8 PP8 CP2 VPP8, 102,400 H100", _H100, 12800,
                          "llama3-405b", _405B, 64 * 800, 1, 8192, "fp8", 10),
}  # fmt: skip
#: a candidate of ``acesim plan``'s space (``benchmarks/plan_scale.py`` draws it, seed 1): FSDP
#: with VPP, whose pass contexts never repeat (the FSDP gathers and reduce-scatters move beside
#: the passes)
PLAN_CASES: dict[str, LlmBench] = {
    "70b-fsdp": LlmBench("Llama3 70B TP8 PP4 VPP5 SP FSDP, MBS 2, 64 H100", _H100, 8,
                         "llama3-70b", "tp=8,pp=4,vpp=5,cp=1,ep=1,sp=1,zero=3,recompute=none",
                         128, 2, 8192, "fp8", 1),
}  # fmt: skip
EXACT_CASES: dict[str, LlmBench] = {
    "exact64": LlmBench("Llama3 8B tp2 pp4, 64 GPUs", _H100, 8, "llama3-8b", "tp=2,pp=4", 64, 1,
                        4096, "bf16", 0),
}  # fmt: skip


def repetition(execution: Execution) -> tuple[int, int, float]:
    """How alike a run's micro-batches are (what simulating each distinct step once would
    save, issue 27): (node executions, their groups, the share at their group's most common
    duration).
    A group is one (rank, pass, chunk, step) over every micro-batch: the compute nodes named
    ``pass.chunk.micro.step`` and the collectives ``kind.op.pass.chunk.micro.step``;
    durations are compared to 1e-12 s."""
    groups: dict[tuple[object, ...], list[float]] = defaultdict(list)
    for rank, records in enumerate(execution.records):
        for rec in records.values():
            parts = rec.node.name.split(".")
            duration = round(rec.end - rec.start, 12)
            if rec.node.kind == "compute" and len(parts) == 4:
                groups[(rank, parts[0], parts[1], parts[3])].append(duration)
            elif rec.node.kind == "collective" and len(parts) == 6:
                groups[(rank, *parts[:4], parts[5])].append(duration)
    total = sum(len(d) for d in groups.values())
    modal = sum(Counter(d).most_common(1)[0][1] for d in groups.values())
    return total, len(groups), modal / total if total else 0.0


def case_of(bench: LlmBench) -> LlmCase:
    """The resolved case of ``bench``."""
    model = MODELS.get(bench.model) if isinstance(bench.model, str) else bench.model
    par = parse_parallel(
        bench.parallel, global_batch=bench.global_batch, micro_batch=bench.micro_batch,
        seq=bench.seq,
    )  # fmt: skip
    return make_llm_case(bench.system, model, par, precision=bench.precision, nodes=bench.nodes)


def _run(
    bench: LlmBench, mode: str, general: bool, alike: bool = False
) -> tuple[float, float, float, int, str, int, str]:
    """(wall s, CPU s, iteration s, simulated ranks, mode run, events, repetition) of one run
    (``general``: without the engine's fast path; ``alike``: :func:`repetition` as text)."""
    engine_kernel.SOLO_PATH = not general
    # each repeat as a fresh `acesim run` would: no kernel plans from the repeats before
    # (acesim.hardware.platform.process_plans keeps a process's, for sweeps and studies)
    PROCESS_PLANS.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    result, ex = run_llm(case_of(bench), mode=mode)
    engine_kernel.SOLO_PATH = True
    note = (
        "{} node executions in {} groups, {:.1%} at their group's duration".format(*repetition(ex))
        if alike
        else ""
    )
    if ex.composed is not None and ex.composed.extrapolated is not None:
        small, large = ex.composed.extrapolated
        note = "; ".join(
            t
            for t in (
                note,
                f"steady state extrapolated from composed runs of {small} and {large} "
                "micro-batches (acesim.training.steady; ranks and events: the larger run's)",
            )
            if t
        )
    return (
        time.perf_counter() - wall,
        time.process_time() - cpu,
        result.iteration_time,
        len(ex.records),
        result.mode,
        ex.platform.engine.events_processed,
        note,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    every = {**CASES, **SCALE_CASES, **PLAN_CASES, **EXACT_CASES}
    parser.add_argument("--only", action="append", choices=sorted(every), help="case names")
    parser.add_argument("--exact", action="store_true", help="also the exact-mode comparison")
    parser.add_argument(
        "--general", action="store_true", help="without the engine's fast path (issue 27)"
    )
    parser.add_argument(
        "--composed",
        action="store_true",
        help="run the cases in mode composed (acesim.training.compose): the default, as "
        "acesim run runs them",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="run the cases in class mode, the full simulation (acesim run --full)",
    )
    parser.add_argument(
        "--repetition",
        action="store_true",
        help="also print how alike the micro-batches' steps are (issue 27)",
    )
    parser.add_argument(
        "--compare", action="store_true", help="also run once without the fast path, print the diff"
    )
    parser.add_argument(
        "--no-steady",
        action="store_true",
        help="simulate every micro-batch of a composed run (no steady-state extrapolation: "
        "acesim.training.steady)",
    )
    args = parser.parse_args()
    steady.ENABLED = not args.no_steady
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at start; {describe()}"
    )
    print(
        f"{'case':44s} {'mode':>8s} {'ranks':>5s} {'events':>9s} {'wall s':>8s} {'CPU s':>8s} "
        f"{'target s':>8s} {'CPU/target':>10s} {'iteration s':>14s}"
        + (" general CPU s  rel. diff" if args.compare else "")
    )
    if args.composed and args.full:
        parser.error("give at most one of --composed, --full")
    first = "class" if args.full else "composed"
    if args.only:
        rows = [(every[name], first) for name in args.only if name not in EXACT_CASES]
        picked = [every[name] for name in args.only if name in EXACT_CASES]
    else:
        rows = [(c, first) for c in CASES.values()]
        picked = []
    if args.exact:
        picked += [c for c in EXACT_CASES.values() if c not in picked]
    rows += [(c, m) for c in picked for m in ("class", "exact")]
    for bench, mode in rows:
        runs = [
            _run(bench, mode, args.general, args.repetition and k == 0) for k in range(args.repeats)
        ]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        ratio = f"{cpu / bench.target:10.2f}" if bench.target else f"{'':10s}"
        line = (
            f"{bench.label:44s} {runs[0][4]:>8s} {runs[0][3]:5d} {runs[0][5]:9d} {wall:8.2f} "
            f"{cpu:8.2f} {bench.target or float('nan'):8.0f} {ratio} {runs[0][2]:14.9f}"
        )
        if args.compare:
            full = _run(bench, mode, True)
            line += f" {full[1]:13.2f}  {abs(runs[0][2] - full[2]) / full[2]:9.2e}"
        print(line, flush=True)
        if runs[0][6]:
            print(f"  {runs[0][6]}", flush=True)


if __name__ == "__main__":
    main()
