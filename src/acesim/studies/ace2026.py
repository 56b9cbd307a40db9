"""`acesim reproduce ace-2026`: the ACE paper's question asked of today's systems.

Does an offload engine for collectives pay off for LLM training with hybrid parallelism on
H100/B200 clusters, against the best configuration of NCCL-like SM kernels, and against the
other substrates shipping today (copy engines, in-switch reduction)?

Cases (:data:`CASES`, the one list; grow it there): a model of the LLM registry with a
Megatron parallel configuration and a global batch, on ``gpus`` GPUs (``gpus / 8`` nodes of
the system preset, the node presets' ``[scale_out]`` InfiniBand fabric between them), in
BF16. Systems (:data:`SYSTEMS`): the node presets of the validation corpus, as shipped (their
calibrated kernel and collective models, their assumptions in ``[sources]``); nothing is tuned
here. Every case runs with the same configuration on every system, so the configuration must fit
the smallest HBM; a case that does not fit a system is reported as not applicable with the
memory check's reason.

Substrates (:data:`ENDPOINTS`): the endpoint kinds ``baseline`` (``sm``: NCCL-like kernels on
the GPU's SMs, every split of the preset's ``[endpoint.baseline] splits`` run and the fastest
kept: the *best SM configuration*; on a preset whose ``collective.choices`` offer NVLS, NCCL's
tuner already picks it per all-reduce), ``copy_engine``, ``nvls``, ``ace`` and ``ideal`` (the
bound). A kind runs on a system only where the preset calibrates it (:func:`applicability`):

* the kind's own check passes on the system (``nvls`` needs a switch that reduces);
* a kind with settings of its own has its ``[endpoint.<kind>]`` table in the preset (the
  schema's defaults are not a calibration of that system);
* every algorithm the kind prefers (``nvls`` prefers NVLS for all-reduces) is offered by the
  preset's ``collective.choices`` (its parameters are fitted there);
* the bound (``ideal``) needs no calibration and runs everywhere.

Anything else is reported as not applicable with the reason, never dropped.

Per (system, case) and substrate: the iteration time, its speedup over the best SM
configuration (``> 1`` beats it; within :data:`TIE` of 1 is reported as a tie, a reporting
convention, not a model parameter), tokens/s/GPU, MFU, the compute time, the bubble, the
exposed communication by kind (TP, DP, PP, ...: :mod:`acesim.results.llm`), and what bound it:
``bound_by`` (the seconds of rank 0's iteration by what bound them, :func:`acesim.training.
bounds.attribute`) and ``comm_bound`` (what bound rank 0's communication, hidden or exposed,
:func:`acesim.training.bounds.collective_bounds`).

Cost: LLM runs simulate one GPU per pipeline stage (class mode, the same figures as every GPU),
a second to tens of seconds each (ACE's SRAM pieces cost most); the case list is sized to finish
within minutes on two cores (small global batches: fewer micro-batches per
iteration than a production run, which makes the data-parallel collectives a larger share of
the iteration than at a production batch; the report says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..errors import AcesimError, ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS, reference_kind
from ..network.algorithms import NVLS_KINDS, phase_steps
from ..results.energy import energy_summary
from ..results.jsonout import dumps
from ..results.llm import LlmResult
from ..runs.compare import assemble, attempt, check_endpoints
from ..runs.compare import plan as compare_plan
from ..runs.llm import LlmCase, make_llm
from .tasks import Task, run_tasks

__all__ = [
    "StudyCase",
    "CASES",
    "SYSTEMS",
    "ENDPOINTS",
    "TIE",
    "applicability",
    "plan_study",
    "assemble_study",
    "study_2026",
]

SCHEMA = "acesim.study-2026/1"
PRECISION = "bf16"
#: GPUs a node of every system preset here holds (the NVSwitch domain).
NODE_GPUS = 8
#: |speedup - 1| within which a substrate ties the best SM configuration (reporting only).
TIE = 1e-3


@dataclass(frozen=True)
class StudyCase:
    """One training configuration, run on every system.

    ``parallel``: Megatron sizes as ``acesim run --parallel`` takes them; ``global_batch`` and
    ``micro_batch`` in sequences; ``seq`` tokens a sequence (None: the model's); ``source``:
    where the configuration comes from.
    """

    name: str
    model: str
    gpus: int
    parallel: str
    global_batch: int
    micro_batch: int = 1
    seq: int | None = None
    source: str = ""
    #: run by default (False: named with ``--cases`` only, e.g. too costly for the two-core
    #: machine)
    default: bool = True

    @property
    def nodes(self) -> int | None:
        return self.gpus // NODE_GPUS if self.gpus > NODE_GPUS else None


#: The cases, smallest first. Configurations: Megatron-Bridge's published ones where there is
#: one (llm.toml of the validation corpus), Megatron-LM's command-line defaults for the
#: all-reduce case; global batches cut to what two cores simulate in minutes. The study runs
#: the ``default`` ones (all of them since class mode); others by name (``--cases``).
CASES: tuple[StudyCase, ...] = (
    StudyCase(
        "8b-8-dp",
        "llama3-8b",
        8,
        "tp=1,pp=1,recompute=full",
        8,
        source="Megatron-Bridge's Llama3 8B layout (TP1 PP1, distributed optimizer); full "
        "recomputation so that it fits 80 GiB without FSDP; global batch 8 (1 micro-batch per GPU)",
    ),
    StudyCase(
        "8b-8-tp4-allreduce",
        "llama3-8b",
        8,
        "tp=4,pp=1,sp=0,zero=0",
        8,
        source="Megatron-LM's command-line defaults (no sequence parallelism, no distributed "
        "optimizer: TP and DP gradients all-reduced) at TP4 DP2; global batch 8",
    ),
    StudyCase(
        "8b-32-tp8",
        "llama3-8b",
        32,
        "tp=8,pp=1",
        16,
        source="TP8 inside each node (sequence parallelism, distributed optimizer), DP4 across "
        "4 nodes on InfiniBand; global batch 16",
    ),
    StudyCase(
        "70b-32-tp8pp4",
        "llama3-70b",
        32,
        "tp=8,pp=4",
        8,
        source="TP8 inside each node, PP4 across 4 nodes on InfiniBand (the pipeline's "
        "sends between nodes), DP1; global batch 8 (8 micro-batches per pipeline)",
    ),
    StudyCase(
        "8b-64-dp",
        "llama3-8b",
        64,
        "tp=1,pp=1,recompute=full",
        64,
        source="as 8b-8-dp on 8 nodes: DP64 across InfiniBand (hierarchical reduce-scatter and "
        "all-gather); global batch 64",
    ),
    StudyCase(
        "70b-64-tp4pp8",
        "llama3-70b",
        64,
        "tp=4,pp=8,vpp=5,tp_overlap=1",
        16,
        source="Megatron-Bridge's Llama3 70B H100 configuration (TP4 PP8 VP5, TP communication "
        "overlap), 8 nodes; global batch 16 (8 micro-batches per pipeline)",
    ),
)

#: The systems: the node presets of the validation corpus (H100 and B200 DGX nodes).
SYSTEMS: tuple[str, ...] = ("h100-nvswitch-8", "b200-nvswitch-8")
#: The substrates, the reference (best SM configuration) first.
ENDPOINTS: tuple[str, ...] = ("baseline", "copy_engine", "nvls", "ace", "ideal")


def find_cases(names: Sequence[str | StudyCase] | None) -> list[StudyCase]:
    """The cases named (the default ones when None; a :class:`StudyCase` stands for itself);
    ConfigError naming ``--cases`` for an unknown name."""
    if not names:
        return [c for c in CASES if c.default]
    known = {c.name: c for c in CASES}
    out = []
    for name in names:
        if isinstance(name, StudyCase):
            out.append(name)
        elif name not in known:
            raise ConfigError("--cases", "not a case of the study: " + ", ".join(known), name)
        else:
            out.append(known[name])
    return out


def applicability(system: SystemConfig, kind: str) -> str | None:
    """Why ``kind`` cannot run (as calibrated) on ``system``; None when it can (module)."""
    spec = ENDPOINT_KINDS.get(kind, "endpoints")
    if spec.role == "bound":
        return None
    try:
        chosen = system.with_endpoint(kind)
        if spec.check is not None:  # the rules of the kind's settings against the system
            spec.check(chosen.endpoint.settings(kind), chosen)
    except ConfigError as err:
        return f"{err.field}: {err.rule}"
    fields = spec.settings.model_fields if spec.settings is not None else {}
    if kind != reference_kind() and fields:
        given = system.endpoint.settings(kind).model_fields_set
        if not given:
            return (
                f"{system.name} has no [endpoint.{kind}] table: the kind's defaults are not a "
                "calibration of this system"
            )
    preferred: Mapping[str, str] = getattr(spec.build, "preferred_algorithms", {}) or {}
    for op, algorithm in preferred.items():
        offered = system.collective.choices.get(op, [])
        # in-switch algorithms run on parameters of their own (collective.nvls_*), calibrated
        # per system; a point-to-point one (the copy engine's direct all-gather) has none
        in_switch = any(s.kind in NVLS_KINDS for s in phase_steps(op, algorithm, 8, 1.0))
        if in_switch and algorithm not in offered:
            note = system.sources.get("collective.choices")
            why = f" ({note.note})" if note is not None else ""
            for path, source in system.sources.items():
                if note is None and algorithm.upper() in source.note:
                    why = f" ({path}: {source.note})"
                    break
            return (
                f"{system.name}'s collective.choices does not offer {algorithm} for {op}: "
                f"its parameters are not calibrated on this system{why}"
            )
    return None


def _llm_case(system: str, case: StudyCase) -> LlmCase:
    """The study case on ``system`` (as ``acesim run -w MODEL --parallel ...`` makes it)."""
    return make_llm(
        system,
        case.model,
        parallel=case.parallel,
        global_batch=case.global_batch,
        micro_batch=case.micro_batch,
        seq=case.seq,
        precision=PRECISION,
        nodes=case.nodes,
    )


@dataclass
class Planned:
    """The study's plan: its tasks (each a job of the endpoint comparison of one (system,
    case), :func:`acesim.runs.compare.plan`), and what cannot run with the reason."""

    tasks: list[Task] = field(default_factory=list)
    #: (system, case) -> reason, for a case that cannot run on a system at all
    cases_na: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (system, case, kind) -> reason
    kinds_na: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: (system, case) -> the kinds compared there (those that apply), the reference first
    compared: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def _kinds(endpoints: Sequence[str]) -> list[str]:
    """The substrates, the reference first (added when not named)."""
    return check_endpoints(list(endpoints))


def plan_study(
    systems: Sequence[str] = SYSTEMS,
    cases: Sequence[StudyCase] | None = None,
    endpoints: Sequence[str] = ENDPOINTS,
) -> Planned:
    """Every run of the study as tasks keyed ``(system, case, kind, variant index)``: the
    endpoint comparison's jobs (:func:`acesim.runs.compare.plan`) of every (system, case),
    over the kinds that apply there (:func:`applicability`)."""
    plan = Planned()
    cases = find_cases(None) if cases is None else cases
    kinds = _kinds(endpoints)
    for name in systems:
        for case in cases:
            try:
                llm = _llm_case(name, case)
            except AcesimError as err:
                plan.cases_na[(name, case.name)] = str(err)
                continue
            applies = []
            for kind in kinds:
                why = applicability(llm.system, kind)
                if why is None:
                    applies.append(kind)
                else:
                    plan.kinds_na[(name, case.name, kind)] = why
            plan.compared[(name, case.name)] = applies
            for job in compare_plan(llm, applies):
                plan.tasks.append(Task((name, case.name, *job.key), attempt, (job,)))
    return plan


def _verdict(speedup: float) -> str:
    if speedup > 1 + TIE:
        return "beats"
    if speedup < 1 - TIE:
        return "loses"
    return "ties"


def _run_summary(r: LlmResult, best_sm: float) -> dict[str, Any]:
    speedup = best_sm / r.iteration_time
    exposed = {k: v for k, v in r.exposed.items() if v > 0}
    return {
        "applicable": True,
        "variant": r.variant,
        "iteration_time": r.iteration_time,
        "speedup": speedup,
        "verdict": _verdict(speedup),
        "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
        "mfu": r.mfu,
        "compute_time": r.compute_time,
        "bubble_time": r.bubble_time,
        "exposed": exposed,
        "exposed_total": sum(exposed.values()),
        "bound": r.bound,
        "bound_by": r.bound_by,
        "comm_bound": r.comm_bound,
        "comm_bound_by": r.comm_bound_by,
        "energy": energy_summary(r.energy),
    }


def _why(kind: str, row: dict[str, Any], sm: dict[str, Any]) -> str:
    """One line from the results: where the substrate's iteration differs from the best SM
    configuration's (compute, bubble, exposed communication by kind) and what bound its
    communication."""
    parts = []
    compute = row["compute_time"] - sm["compute_time"]
    if abs(compute) > 1e-4 * sm["iteration_time"]:
        parts.append(f"compute {1e3 * compute:+.1f} ms")
    for comm in sorted(set(row["exposed"]) | set(sm["exposed"])):
        d = row["exposed"].get(comm, 0.0) - sm["exposed"].get(comm, 0.0)
        if abs(d) > 1e-4 * sm["iteration_time"]:
            parts.append(f"exposed {comm.upper()} {1e3 * d:+.1f} ms")
    bubble = row["bubble_time"] - sm["bubble_time"]
    if abs(bubble) > 1e-4 * sm["iteration_time"]:
        parts.append(f"bubble {1e3 * bubble:+.1f} ms")
    delta = ", ".join(parts) if parts else "no phase differs by more than 0.01%"
    bound = f"comm bound by {row['comm_bound'] or 'nothing'}"
    if kind != reference_kind():
        bound += f" (best SM: {sm['comm_bound'] or 'nothing'})"
    return f"{delta}; {bound}"


def _row(
    plan: Planned, name: str, case: StudyCase, results: Mapping[Any, Any], kinds: Sequence[str]
) -> dict[str, Any]:
    """One (system, case): the endpoint comparison (:func:`acesim.runs.compare.assemble`) of
    its runs, every substrate against the best SM configuration, or why it did not run."""
    row: dict[str, Any] = {"system": name, "case": case.name, "model": case.model}
    row["gpus"] = case.gpus
    if (name, case.name) in plan.cases_na:
        return {**row, "applicable": False, "reason": plan.cases_na[(name, case.name)]}
    mine = {tuple(k[2:]): r for k, r in results.items() if k[:2] == (name, case.name)}
    comp = assemble(mine, plan.compared[(name, case.name)])
    reference = comp.reference
    if reference not in comp.endpoints:
        why = comp.refused[reference]
        return {
            **row,
            "applicable": False,
            "reason": f"the simulation refused the best SM configuration: {why}",
        }
    first = comp.best_baseline
    row.update(
        applicable=True,
        parallel=first.parallel,
        schedule=first.schedule,
        global_batch=first.global_batch,
        micro_batches=first.micro_batches,
        seq=first.seq,
        memory_per_gpu=first.memory["total"],
        sm_variants={r.variant: r.iteration_time for r in comp.baselines},
    )
    sm_row = _run_summary(first, first.iteration_time)
    out: dict[str, Any] = {}
    for kind in kinds:
        if kind in comp.endpoints:
            entry = _run_summary(comp.best(kind), first.iteration_time)
            entry["why"] = _why(kind, entry, sm_row)
            if comp.endpoints[kind].refused:
                entry["failed_variants"] = dict(comp.endpoints[kind].refused)
        elif kind in comp.refused:
            reason = f"the simulation refused it: {comp.refused[kind]}"
            plan.kinds_na[(name, case.name, kind)] = reason
            entry = {"applicable": False, "reason": reason}
        else:
            reason = plan.kinds_na.get((name, case.name, kind), "not planned")
            entry = {"applicable": False, "reason": reason}
        out[kind] = entry
    row["endpoints"] = out
    return row


def _headline(rows: list[dict[str, Any]], kinds: Sequence[str]) -> dict[str, Any]:
    """Per substrate but the reference: its runs that beat, tie and lose, its extremes."""
    headline: dict[str, Any] = {}
    for kind in kinds[1:]:
        speedups: list[tuple[float, str, str]] = [
            (r["endpoints"][kind]["speedup"], r["system"], r["case"])
            for r in rows
            if r["applicable"] and r["endpoints"][kind]["applicable"]
        ]
        if not speedups:
            headline[kind] = None
            continue
        top, low = max(speedups), min(speedups)
        headline[kind] = {
            "runs": len(speedups),
            "beats": sum(1 for s, _n, _c in speedups if s > 1 + TIE),
            "ties": sum(1 for s, _n, _c in speedups if abs(s - 1) <= TIE),
            "loses": sum(1 for s, _n, _c in speedups if s < 1 - TIE),
            "max": {"speedup": top[0], "system": top[1], "case": top[2]},
            "min": {"speedup": low[0], "system": low[1], "case": low[2]},
        }
    return headline


def _beaten(rows: list[dict[str, Any]], kinds: Sequence[str]) -> list[dict[str, Any]]:
    """Where a substrate ran faster than the bound (the ideal endpoint): none, as a check."""
    orderings = []
    for res in rows:
        for bound in (k for k in kinds if ENDPOINT_KINDS.get(k).role == "bound"):
            if not res["applicable"] or not res["endpoints"][bound]["applicable"]:
                continue
            limit = res["endpoints"][bound]["iteration_time"]
            orderings += [
                {"system": res["system"], "case": res["case"], "kind": kind, "bound": bound}
                for kind, entry in res["endpoints"].items()
                if entry["applicable"] and entry["iteration_time"] < limit
            ]
    return orderings


def assemble_study(
    plan: Planned,
    results: Mapping[Any, Any],
    systems: Sequence[str] = SYSTEMS,
    cases: Sequence[StudyCase] | None = None,
    endpoints: Sequence[str] = ENDPOINTS,
) -> dict[str, Any]:
    """The summary (module): per (system, case) every substrate's figures against the best SM
    configuration, where each substrate beats it, and what could not run, with the reason."""
    cases = find_cases(None) if cases is None else cases
    kinds = _kinds(endpoints)
    rows = [_row(plan, name, case, results, kinds) for name in systems for case in cases]
    wins = {
        kind: [
            {"system": r["system"], "case": r["case"], "speedup": r["endpoints"][kind]["speedup"]}
            for r in rows
            if r["applicable"] and r["endpoints"][kind].get("verdict") == "beats"
        ]
        for kind in kinds[1:]
    }
    sources = {}
    for name in systems:
        sources[name] = {
            path: {"kind": s.kind, "note": s.note}
            for path, s in resolve_system(name).sources.items()
            if path.startswith(("endpoint.", "collective.choices"))
        }
    not_applicable = [
        {"system": s, "case": c, "kind": None, "reason": why}
        for (s, c), why in sorted(plan.cases_na.items())
    ] + [
        {"system": s, "case": c, "kind": k, "reason": why}
        for (s, c, k), why in sorted(plan.kinds_na.items())
    ]
    return {
        "schema": SCHEMA,
        "question": "for which models, scales and systems does each substrate beat the best "
        "SM configuration, by how much, and why",
        "precision": PRECISION,
        "tie": TIE,
        "systems": list(systems),
        "endpoints": kinds,
        "cases": [dataclasses.asdict(c) for c in cases],
        "results": rows,
        "headline": _headline(rows, kinds),
        "wins": wins,
        "ideal_beaten": _beaten(rows, kinds),
        "not_applicable": not_applicable,
        "sources": sources,
    }


def study_2026(
    out_dir: Path,
    *,
    systems: Sequence[str] | None = None,
    cases: Sequence[str | StudyCase] | None = None,
    endpoints: Sequence[str] | None = None,
    workers: int | None = None,
    dask: Any = None,
    figures: bool = True,
    progress: Callable[[int], Callable[[], Any]] | None = None,
) -> dict[str, Any]:
    """Run the study, write ``summary.json``, ``report.md`` and figures into ``out_dir``."""
    names = list(systems) if systems else list(SYSTEMS)
    for name in names:
        resolve_system(name)  # a clear error for an unknown preset before anything runs
    chosen = find_cases(cases)
    kinds = list(endpoints) if endpoints else list(ENDPOINTS)
    plan = plan_study(names, chosen, kinds)
    advance = progress(len(plan.tasks)) if progress else None
    results = run_tasks(
        plan.tasks,
        workers=workers,
        dask=dask,
        progress=advance,
        preload=("acesim.runs.compare",),
    )
    summary = assemble_study(plan, results, names, chosen, kinds)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(dumps(summary, indent=2), encoding="utf-8")
    if figures:
        from .figures2026 import write_figures

        write_figures(out_dir, summary)
    from .report2026 import report_markdown

    (out_dir / "report.md").write_text(report_markdown(summary), encoding="utf-8")
    return summary
