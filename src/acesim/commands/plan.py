"""``acesim plan``: rank the ways to train a model on a cluster (docs/plan.md)."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from ..plan.report import BOUND_NOTE, MODE_NOTES, PlanResult, rows_text
from ..plan.run import plan
from ..plan.space import AXES
from ..results.jsonout import dumps
from ..results.protocol import Table
from ..runs.llm import TP_OVERLAP_NOTE
from ..sweep.runner import default_workers
from ..units import format_time
from .cases import cli_system
from .common import (
    FORCE_OPTION,
    IMAGE_SUFFIXES,
    NODES_OPTION,
    SET_HELP,
    check_output_path,
    console,
    err_console,
    progress,
)
from .show import FORMAT_OPTION, print_table

#: The default cluster: one DGX H100 node (``--nodes N`` for more).
DEFAULT_SYSTEM = "h100-nvswitch-8"

SPACE_HELP = "replace an axis's values, AXIS=v1,v2 (repeat for several axes): " + "; ".join(
    f"{a.name} ({a.help})" for a in AXES
)


FULL_OPTION = typer.Option(
    False,
    "--full",
    help="simulate each candidate in class mode (default: composed, each distinct pipeline "
    "pass once: within 0.03% of class mode on the benchmark cases)",
)


TIME_LIMIT_OPTION = typer.Option(
    None,
    "--time-limit",
    help="stop the search after this many seconds of wall time (split over the endpoints) "
    "and say how far its best row can be from the best possible",
)
MAX_SIMULATIONS_OPTION = typer.Option(
    None,
    "--max-simulations",
    help="stop each endpoint's search after this many simulations (as --time-limit, but the "
    "same result on any machine)",
)


def plan_command(
    workload: str = typer.Option("llama3-8b", "--workload", "-w", help="LLM model name"),
    system: str = typer.Option(DEFAULT_SYSTEM, "--system", "-s", help="preset or file"),
    nodes: int | None = NODES_OPTION,
    global_batch: int = typer.Option(128, "--global-batch", help="sequences per iteration"),
    seq: int | None = typer.Option(None, "--seq", help="tokens a sequence (default: model's)"),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp8, ..."),
    endpoints: str | None = typer.Option(
        None,
        "--endpoints",
        help="substrates to rank under, comma-separated (sm, copy_engine, nvls, ace, ideal); "
        "the first is the main table's; with several, each searches its variants",
    ),
    space: list[str] | None = typer.Option(None, "--space", help=SPACE_HELP),
    top: int = typer.Option(10, "--top", help="configurations to rank"),
    exhaustive: bool = typer.Option(
        False, "--exhaustive", help="simulate every configuration that fits (no pruning)"
    ),
    full: bool = FULL_OPTION,
    workers: int | None = typer.Option(
        None, "--workers", "-j", help="worker processes (default: the CPUs); 0 = this process"
    ),
    dask: str | None = typer.Option(
        None, "--dask", help="'local' or a trusted scheduler's address (as acesim sweep)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
    csv_path: Path | None = typer.Option(None, "--csv", help="write the ranked rows as CSV"),
    figure: Path | None = typer.Option(
        None, "--figure", help="draw time against memory per GPU (PNG, SVG, PDF)"
    ),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    force: bool = FORCE_OPTION,
    fmt: str = FORMAT_OPTION,
    time_limit: float | None = TIME_LIMIT_OPTION,
    max_simulations: int | None = MAX_SIMULATIONS_OPTION,
) -> None:
    """Rank every valid parallel configuration of an LLM on a cluster: enumerate, refuse
    what does not fit in HBM, prune by a lower bound, simulate the rest (docs/plan.md)."""
    workers = default_workers() if workers is None else workers
    _check_options(top, workers, figure, csv_path)
    _check_budget(time_limit, max_simulations)
    cfg = cli_system(system, sets, nodes, force)
    show = not json_out
    bar = progress() if show else None
    task: Any = None

    def tick(endpoint: str, simulated: int) -> None:
        if bar is not None:
            bar.update(task, completed=simulated, description=f"simulating ({endpoint})")

    if bar is not None:
        bar.start()
        task = bar.add_task("planning", total=None)
    try:
        result = plan(
            cfg, workload, global_batch=global_batch, seq=seq, precision=precision,
            endpoints=[e.strip() for e in endpoints.split(",")] if endpoints else None,
            top=top, space=space or [], exhaustive=exhaustive, full=full, workers=workers,
            dask=dask, command=_system_flags(system, nodes, sets, force), progress=tick,
            time_limit=time_limit, max_simulations=max_simulations,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.stop()
    if csv_path is not None:
        result.dataframe().to_csv(csv_path, index=False)
    if figure is not None:
        result.figure(figure)
    if json_out:
        console.out(dumps(result.to_dict()))
        return
    _show(result)
    for path in (csv_path, figure):
        if path is not None:
            err_console.print(f"wrote {path}")


def _check_options(top: int, workers: int, figure: Path | None, csv_path: Path | None) -> None:
    """Refuse a bad --top or --workers, and output paths of the wrong kind, before planning."""
    if top < 1:
        raise ConfigError("--top", "must be at least 1", top)
    if workers < 0:
        raise ConfigError("--workers", "must be 0 or more", workers)
    if figure is not None:
        check_output_path(figure, "--figure", IMAGE_SUFFIXES)
    if csv_path is not None:
        check_output_path(csv_path, "--csv", (".csv",))


def _show_budget(result: PlanResult, kind: str) -> None:
    """Say where the budget stopped ``kind``'s search, and what that leaves uncertain."""
    b = result.budget(kind)
    if b is None:
        return
    limit = "--time-limit" if b["stopped_by"] == "time limit" else "--max-simulations"
    text = (
        f"{kind}: the search stopped at its {b['stopped_by']} ({limit}) with "
        f"{b['unexplored']:,} candidates unexplored, none faster than "
        f"{format_time(b['least_bound'])} (their least lower bound)"
    )
    if b["gap"] is not None:
        certain = b["certain_rows"]
        text += f": the best row is within {b['gap']:.1%} of the best possible; " + (
            f"the first {certain} ranked rows are certain" if certain else "no row is certain"
        )
    console.print(text + ".")


def _check_budget(time_limit: float | None, max_simulations: int | None) -> None:
    """Refuse a budget that is no budget, by its flag's name."""
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise ConfigError("--time-limit", "must be a finite number of seconds above 0", time_limit)
    if max_simulations is not None and max_simulations < 1:
        raise ConfigError("--max-simulations", "must be at least 1", max_simulations)


def _system_flags(system: str, nodes: int | None, sets: list[str] | None, force: bool) -> str:
    """The flags that make the same system again, for each row's ``acesim run`` line."""
    words = ["-s", system] + (["--nodes", str(nodes)] if nodes is not None else [])
    for item in sets or []:
        words += ["--set", item]
    if force:
        words.append("--force")
    return shlex.join(words)


def _show(result: PlanResult) -> None:
    r = result.request
    acc = result.accounting()
    heads = (
        "#", "configuration", "mbs", "iteration", "tokens/s/GPU", "MFU", "memory/GPU",
        "bubble", "most exposed", "bound",
    )  # fmt: skip
    for kind in result.endpoints:
        table = Table(
            f"{r.model.name} on {r.system.name} ({r.system.network.total_npus} GPUs), global "
            f"batch {r.global_batch} x {r.seq}, {r.precision}: best {r.top} under {kind}",
            heads,
            [tuple(cells) for cells in rows_text(result.records(kind))],
        )
        print_table(table)
    subs = result.substrates()
    if subs:
        cols = ["configuration", "mbs"] + [f"{k} (rank)" for k in result.endpoints]
        rows = []
        for rec in subs:
            cells = [rec["parallel"], str(rec["micro_batch"])]
            for kind in result.endpoints:
                t, rank = rec[f"{kind}.iteration_time"], rec[f"{kind}.rank"]
                cells.append("pruned" if t is None else f"{format_time(t)} ({rank})")
            rows.append(tuple(cells))
        print_table(Table("the substrates side by side", tuple(cols), rows))
    removed: list[tuple[str, ...]] = [(str(n), rule) for rule, n in acc["removed_by_rule"].items()]
    removed += [
        (str(n), f"does not fit in HBM: {term} dominate")
        for term, n in acc["memory_refused_by_term"].items()
    ]
    removed += [(str(n), rule) for rule, n in acc["refused_building"].items()]
    print_table(
        Table(
            f"search: {acc['space']:,} candidates, {acc['valid']:,} valid, {acc['fit']:,} of "
            f"{acc['built']:,} built fit ({acc['memory_refused_unbuilt']:,} refused before "
            "building: their layers' weights, gradients and optimizer state alone exceed HBM)",
            ("removed", "rule"),
            removed,
        )
    )
    for kind in result.endpoints:
        console.print(
            f"{kind}: simulated {acc['simulated'][kind]}, pruned by the bounds "
            f"{acc['pruned_by_kernel_bound'][kind]} built (the network bound "
            f"{acc['pruned_by_network_bound'][kind]} of them) and "
            f"{acc['pruned_unbuilt'][kind]} unbuilt (their memory not checked)"
        )
    for kind in result.endpoints:
        _show_budget(result, kind)
    for failure in acc["failed"]:
        err_console.print(
            f"failed: {failure['parallel']} ({failure['endpoint']}): {failure['error']}"
        )
    console.print(f"Pruning: {BOUND_NOTE}.")
    console.print(f"Simulation: {MODE_NOTES[r.mode]}.")
    best = result.top()
    if best:
        console.print(f"Reproduce the best: {result.command(best[0])}")
    overlapped = sum(1 for row in best if row.candidate.parallel.tp_overlap)
    if overlapped:  # a known bias of the model, where the ranking leans on it
        console.print(f"Caution: {overlapped} of the top {len(best)} rows: {TP_OVERLAP_NOTE}.")
