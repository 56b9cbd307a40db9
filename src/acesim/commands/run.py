"""`acesim run`: the main job — simulate training iterations and compare endpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..config.experiment import ExperimentConfig
from ..config.presets import DEFAULT_PRESET
from ..errors import ConfigError
from ..units import format_rate, format_time, parse_quantity
from .common import check_output_path, console, err_console, progress

DEFAULT_WORKLOAD = "resnet50"


def _shape(text: str) -> list[int]:
    try:
        sizes = [int(p) for p in text.lower().replace("*", "x").split("x")]
    except ValueError:
        raise ConfigError("--shape", "expected sizes like 4x4x8", text) from None
    if any(s < 1 for s in sizes):
        raise ConfigError("--shape", "sizes must be at least 1", text)
    return sizes


def build_experiment(
    system: str,
    workload: str,
    npus: int | None,
    shape: str | None,
    iterations: int,
    loop: str,
    bucket: str,
    exact: bool,
    batch: int | None,
) -> ExperimentConfig:
    from ..experiment import experiment_from_dict, resolve_system_doc, shape_for

    if npus is not None and shape is not None:
        raise ConfigError("--npus", "give either --npus or --shape, not both", npus)
    if loop not in ("layerwise", "bucketed", "no_overlap"):
        raise ConfigError("--loop", "must be layerwise, bucketed or no_overlap", loop)
    if iterations < 1:
        raise ConfigError("--iterations", "must be at least 1", iterations)
    exp = experiment_from_dict(
        {
            "system": system,
            "workload": {"name": workload, "batch_per_npu": batch},
            "run": {
                "iterations": iterations,
                "mode": "exact" if exact else "symmetric",
                "loop": loop,
                "bucket_size": parse_quantity(bucket, "size", "--bucket-size"),
            },
        }
    )
    if shape is not None:
        exp.run.shape = _shape(shape)
    elif npus is not None:
        exp.run.shape = shape_for(resolve_system_doc(exp), npus)
    return exp


def run_command(
    system: str = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file"),
    workload: str = typer.Option(
        DEFAULT_WORKLOAD, "--workload", "-w", help="zoo name, ASTRA-sim .txt file or Chakra prefix"
    ),
    endpoint: str | None = typer.Option(
        None, "--endpoint", help="run one endpoint (baseline, ace, ideal) instead of comparing"
    ),
    npus: int | None = typer.Option(None, "--npus", help="NPU count (keeps the local dimension)"),
    shape: str | None = typer.Option(None, "--shape", help="dimension sizes, e.g. 4x4x8"),
    iterations: int = typer.Option(3, "--iterations", "-n", help="iterations to simulate"),
    loop: str = typer.Option("layerwise", "--loop", help="layerwise, bucketed or no_overlap"),
    bucket: str = typer.Option("25 MiB", "--bucket-size", help="bucket size for --loop bucketed"),
    batch: int | None = typer.Option(None, "--batch", help="per-NPU batch size (zoo workloads)"),
    exact: bool = typer.Option(False, "--exact", help="simulate every NPU"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write JSON results here"),
    trace: Path | None = typer.Option(None, "--trace", help="write a Perfetto/Chrome trace here"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
    layers: bool = typer.Option(False, "--layers", help="also print per-layer rows"),
) -> None:
    """Simulate training iterations; by default compare best baseline, ACE and ideal."""
    if output is not None:
        check_output_path(output, "--output", (".json",))
    if trace is not None:
        check_output_path(trace, "--trace", (".json",))
    from ..experiment import (
        compare,
        comparison_runs,
        load_experiment_workload,
        resolve_system,
        run_system,
        with_split,
    )

    exp = build_experiment(system, workload, npus, shape, iterations, loop, bucket, exact, batch)
    cfg = resolve_system(exp)
    work = load_experiment_workload(exp, cfg)
    opts = dict(
        iterations=exp.run.iterations,
        loop=exp.run.loop,
        bucket_size=exp.run.bucket_size,
        exact=exact,
    )
    payload: dict[str, Any]
    if endpoint is not None:
        if endpoint not in ("baseline", "ace", "ideal"):
            raise ConfigError("--endpoint", "must be one of baseline, ace, ideal", endpoint)
        result, execution = run_system(
            with_split(cfg, endpoint),
            work,
            trace=trace is not None,
            **opts,  # type: ignore[arg-type]
        )
        payload = result.to_dict()
        if trace is not None:
            _write_trace(execution, trace)
        if as_json:
            console.out(json.dumps(payload, indent=2))
        else:
            _single_table(console, result)
            if layers:
                _layer_table(console, result)
    else:
        if trace is not None:
            raise ConfigError("--trace", "needs one --endpoint (a trace shows one run)", str(trace))
        if layers:
            raise ConfigError("--layers", "needs one --endpoint (rows of one run)")
        with progress() as bar:
            task = bar.add_task(f"{exp.workload.name} on {cfg.name}", total=comparison_runs(cfg))
            comp = compare(cfg, work, progress=lambda: bar.advance(task), **opts)  # type: ignore[arg-type]
        payload = comp.to_dict()
        if as_json:
            console.out(json.dumps(payload, indent=2))
        else:
            _comparison_table(console, comp)
    if output is not None:
        output.write_text(json.dumps(payload, indent=2), encoding="utf-8")
        err_console.print(f"results written to {output}")
    count = sum(1 for s in cfg.sources.values() if s.kind == "assumption")
    if count and not as_json:
        err_console.print(
            f"[dim]{count} parameters of {cfg.name} are assumptions "
            f"(see `acesim assumptions {system}`).[/dim]"
        )


def _write_trace(execution: Any, path: Path) -> None:
    from ..results.trace import write_trace

    write_trace(execution, path)


def _rows(result: Any) -> list[tuple[str, str]]:
    rows = [
        ("iteration time", format_time(result.iteration_time)),
        ("compute (as run)", format_time(result.compute_time)),
        ("compute (alone)", format_time(result.compute_time_alone)),
        ("compute slowdown", f"{result.compute_slowdown:.3f}x"),
        ("exposed communication", format_time(result.exposed_comm)),
        ("communication time", format_time(result.comm_time)),
    ]
    for dim, util in result.net_util.items():
        rows.append((f"net util {dim}", f"{100 * util:.1f}%"))
    rows.append(("HBM bw compute", format_rate(result.hbm_bw_compute)))
    rows.append(("HBM bw comm", format_rate(result.hbm_bw_comm)))
    return rows


def _single_table(console: Any, result: Any) -> None:
    table = Table(
        title=f"{result.workload} on {result.system}: {result.npus} NPUs, "
        f"{result.endpoint} endpoint, {result.loop} loop ({result.mode})"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in _rows(result):
        table.add_row(name, value)
    console.print(table)


def _layer_table(console: Any, result: Any) -> None:
    table = Table(title="per-layer times in the measured iteration")
    for col in ("layer", "forward", "input grad", "weight grad", "collective", "bytes"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for row in result.layers:
        table.add_row(
            row.name,
            format_time(row.fwd),
            format_time(row.ig),
            format_time(row.wg),
            format_time(row.comm),
            f"{row.comm_bytes:.4g}",
        )
    console.print(table)


def _comparison_table(console: Any, comp: Any) -> None:
    best = comp.best_baseline
    split = best.split
    label = f"best baseline ({split.get('comm_units')} units)"
    table = Table(
        title=f"{best.workload} on {best.system}: {best.npus} NPUs, {best.loop} loop ({best.mode})"
    )
    table.add_column("metric")
    for name in (label, "ACE", "ideal"):
        table.add_column(name, justify="right")
    rows = [_rows(r) for r in (best, comp.ace, comp.ideal)]
    for i, (name, _) in enumerate(rows[0]):
        table.add_row(name, *(r[i][1] for r in rows))
    table.add_row(
        "speedup vs best baseline",
        "1.000x",
        f"{comp.speedup_ace:.3f}x",
        f"{comp.speedup_ideal:.3f}x",
    )
    console.print(table)
    if len(comp.baselines) > 1:
        splits = Table(title="baseline splits tried")
        splits.add_column("comm units", justify="right")
        splits.add_column("HBM share / weight", justify="right")
        splits.add_column("iteration time", justify="right")
        splits.add_column("compute slowdown", justify="right")
        splits.add_column("exposed comm", justify="right")
        for r in comp.baselines:
            share, weight = r.split.get("hbm_share"), r.split.get("hbm_weight")
            splits.add_row(
                str(r.split.get("comm_units")),
                f"static {share:.2f}" if share is not None else f"fair, weight {weight:g}",
                format_time(r.iteration_time),
                f"{r.compute_slowdown:.3f}x",
                format_time(r.exposed_comm),
            )
        console.print(splits)
