"""``acesim run`` for LLM training: a model of the LLM registry with a Megatron parallel
configuration (``--parallel``, ``--global-batch``, ``--micro-batch``, ``--seq``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from rich.table import Table

from ..config.errors import config_error_from
from ..config.resolve import resolve_system
from ..config.variation import ComputeSpread, LinkChange, Straggler, Variation
from ..errors import ConfigError
from ..results.energy import energy_rows
from ..results.jsonout import dumps
from ..results.llm import LlmResult
from ..runs.llm import LlmCase, make_llm_case, run_llm
from ..units import format_size, format_time
from ..workload.llm.memory import TERMS
from ..workload.llm.models import MODELS
from ..workload.llm.parallel import parse_parallel
from .cases import FLAGS, parse_pairs
from .common import console, err_console, system_title

__all__ = ["is_llm", "llm_case", "run_llm_command", "PARALLEL_HELP", "PARALLEL_SIZES_HELP"]

#: What --parallel takes (every command that builds an LLM iteration).
PARALLEL_SIZES_HELP = (
    "LLM models: Megatron parallel sizes, e.g. tp=4,pp=8,vpp=5,cp=1,ep=1,dp=auto; also "
    "sp=1 (sequence parallelism), tp_overlap=1 (TP communication overlap), zero=1 (distributed "
    "optimizer), grad_fp32=0|1 (main gradients in FP32), recompute=none|selective|full, "
    "order=tp-cp-ep-dp-pp|tp-cp-ep-pp-dp (Megatron's rank order)."
)

PARALLEL_HELP = (
    PARALLEL_SIZES_HELP + " One iteration is simulated, one GPU per pipeline stage (class mode: "
    "the same figures as simulating every GPU); --exact, --straggler, --compute-spread and "
    "--link simulate every GPU"
)


_M = TypeVar("_M", bound=BaseModel)

_FLAGS = {
    "parallel.global_batch": "--global-batch",
    "parallel.micro_batch": "--micro-batch",
    "parallel.seq": "--seq",
    "parallel.recompute": "--recompute",
    "parallel": "--parallel",
}


def _flag(field: str) -> str | None:
    """The flag behind a ``parallel.*`` field (``parallel.tp`` -> ``--parallel tp``)."""
    if field in _FLAGS:
        return _FLAGS[field]
    if field.startswith("parallel."):
        return f"--parallel {field.removeprefix('parallel.')}"
    return None


def is_llm(workload: str, parallel: str | None) -> bool:
    """Whether ``acesim run`` takes the LLM path."""
    return workload in MODELS or parallel is not None


def llm_case(
    system: str,
    workload: str,
    parallel: str,
    *,
    global_batch: int | None,
    micro_batch: int,
    seq: int | None,
    recompute: str | None,
    precision: str | None,
    nodes: int | None,
    overrides: dict[str, Any],
    force: bool = False,
) -> LlmCase:
    model = MODELS.get(workload, "--workload")
    if recompute is not None and recompute not in ("none", "selective", "full"):
        raise ConfigError("--recompute", "must be none, selective or full", recompute)
    text = parallel
    if recompute is not None:
        text = f"{parallel},recompute={recompute}" if parallel else f"recompute={recompute}"
    par = parse_parallel(
        text,
        global_batch=global_batch if global_batch is not None else micro_batch,
        micro_batch=micro_batch,
        seq=seq if seq is not None else model.seq,
    )
    try:
        base = resolve_system(system, overrides=overrides, force=force)
        return make_llm_case(
            base,
            model,
            par,
            precision="bf16" if precision is None else precision,
            nodes=nodes,
        )
    except ConfigError as err:
        flag = FLAGS.get(err.field) or _flag(err.field)
        if flag is None:
            raise
        raise ConfigError(flag, err.rule, err.value, hint=err.hint) from None


def run_llm_command(
    *,
    system: str,
    workload: str,
    parallel: str | None,
    global_batch: int | None,
    micro_batch: int,
    seq: int | None,
    recompute: str | None,
    precision: str | None,
    nodes: int | None,
    endpoint: str | None,
    endpoints: list[str] | None,
    as_json: bool,
    output: Path | None,
    overrides: dict[str, Any],
    trace: Path | None = None,
    exact: bool = False,
    stragglers: list[str] | None = None,
    compute_spread: str | None = None,
    links: list[str] | None = None,
    force: bool = False,
) -> None:
    """Run an LLM case on one or several endpoint kinds and print (or write) the results
    (class mode unless ``exact`` or a variation flag asks for every GPU; ``force``: accept
    implausible bare numbers)."""
    case = llm_case(
        system,
        workload,
        parallel or "",
        global_batch=global_batch,
        micro_batch=micro_batch,
        seq=seq,
        recompute=recompute,
        precision=precision,
        nodes=nodes,
        overrides=overrides,
        force=force,
    )
    variation = _variation(stragglers or [], compute_spread, links or [])
    kinds = [endpoint] if endpoint else (endpoints or [case.system.endpoint.kind])
    runs = [
        run_llm(
            case.with_endpoint(kind),
            trace=trace is not None,
            mode="exact" if exact else "class",
            variation=variation,
        )
        for kind in kinds
    ]
    results = [r for r, _ in runs]
    if trace is not None:
        from ..results.trace import write_trace

        write_trace(runs[0][1], trace)
        err_console.print(f"trace written to {trace}")
    payload: dict[str, Any] = (
        results[0].to_dict() if len(results) == 1 else {"runs": [r.to_dict() for r in results]}
    )
    if as_json:
        console.out(dumps(payload, indent=2))
    else:
        _tables(results)
    if output is not None:
        output.write_text(dumps(payload, indent=2), encoding="utf-8")
        err_console.print(f"results written to {output}")


def _variation(stragglers: list[str], compute_spread: str | None, links: list[str]) -> Variation:
    """The ``--straggler``, ``--compute-spread`` and ``--link`` texts as a Variation
    (ConfigError naming the flag)."""

    def one(model: type[_M], text: str, flag: str) -> _M:
        try:
            return model.model_validate(parse_pairs(text, flag))
        except ValidationError as exc:
            raise config_error_from(exc, model, flag) from None

    return Variation(
        tuple(one(Straggler, t, "--straggler") for t in stragglers),
        one(ComputeSpread, compute_spread, "--compute-spread") if compute_spread else None,
        tuple(one(LinkChange, t, "--link") for t in links),
    )


def _rows(r: LlmResult) -> list[tuple[str, str]]:
    rows = [
        ("iteration time", format_time(r.iteration_time)),
        ("tokens/s/GPU", f"{r.tokens_per_s_per_gpu:,.0f}"),
        (f"MFU ({r.mfu_dtype} peak)", f"{100 * r.mfu:.1f}%"),
        ("compute (mean per GPU)", format_time(r.compute_time)),
        ("pipeline bubble", f"{format_time(r.bubble_time)} ({100 * r.bubble_fraction:.1f}%)"),
    ]
    for kind, seconds in r.exposed.items():
        rows.append((f"exposed {kind.upper()} comm", format_time(seconds)))
    return rows + energy_rows(r.energy)


def _tables(results: list[LlmResult]) -> None:
    first = results[0]
    console.print(
        f"{first.model} on {system_title(first)}: {first.npus} GPUs, {first.parallel}, "
        f"{first.schedule} schedule, {first.precision}, global batch {first.global_batch} x "
        f"{first.seq} tokens, micro-batch {first.micro_batch} ({first.micro_batches} per "
        f"pipeline), {first.mode} mode",
        highlight=False,
        soft_wrap=True,
    )
    table = Table(title="one training iteration")
    table.add_column("metric")
    for r in results:
        table.add_column(r.endpoint, justify="right")
    rows = [_rows(r) for r in results]
    for i, (name, _) in enumerate(rows[0]):
        kind = name.removeprefix("exposed ").removesuffix(" comm").lower()
        if kind in ("cp", "ep") and all(r.exposed[kind] == 0 for r in results):
            continue  # no such parallelism in this configuration
        table.add_row(name, *(row[i][1] for row in rows))
    if len(results) > 1:
        table.add_row(
            f"speedup vs {first.endpoint}",
            *(f"{first.iteration_time / r.iteration_time:.3f}x" for r in results),
        )
    console.print(table)
    if first.mode_note:
        err_console.print(f"[dim]{first.mode_note}[/dim]", highlight=False)
    memory = Table(title=f"memory per GPU (largest: pipeline stage {first.memory_stage})")
    memory.add_column("term")
    memory.add_column("bytes", justify="right")
    for term in (*TERMS, "total"):
        memory.add_row(term, format_size(first.memory[term]))
    memory.add_row("HBM capacity", format_size(first.hbm_capacity))
    console.print(memory)
    for note in first.notes:
        err_console.print(f"[dim]model: {note}[/dim]", highlight=False)
    if first.assumptions:
        err_console.print(
            f"[dim]{len(first.assumptions)} parameters of {first.system} are assumptions "
            f"(see `acesim assumptions {first.system}`).[/dim]"
        )
