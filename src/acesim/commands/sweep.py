"""`acesim sweep`, `acesim results`, `acesim plot` (registered on the CLI app by :func:`register`).

The command-line face of :mod:`acesim.sweep`; it lives with the other commands so that the
sweep package never imports the CLI layer.

Nothing heavy is imported here at module level: `acesim --help` stays fast, and pandas,
matplotlib and dask load only when a command needs them.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from ..errors import ConfigError
from .common import FORCE_HELP, IMAGE_SUFFIXES, check_output_path, console, err_console, progress
from .show import FORMAT_OPTION, print_table

if TYPE_CHECKING:
    from ..sweep.runner import SweepSummary

__all__ = ["register", "sweep", "results", "plot"]


def register(app: typer.Typer) -> None:
    """Add the sweep commands to the `acesim` typer app."""
    app.command("sweep")(sweep)
    app.command("results")(results)
    app.command("plot")(plot)


def sweep(
    spec: Path = typer.Argument(..., help="sweep spec (TOML/YAML/JSON), see docs/sweeps.md"),
    db: Path | None = typer.Option(
        None, "--db", help="SQLite results file (default: SPEC_NAME.sqlite)"
    ),
    workers: int | None = typer.Option(
        None, "--workers", "-j", help="worker processes (default: the CPUs); 0 = this process"
    ),
    dask: str | None = typer.Option(
        None,
        "--dask",
        help="'local' (a LocalCluster) or the address of a trusted scheduler, "
        "tls://HOST:PORT (or tcp:// on a network you control: Dask exchanges pickles)",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="reject the spec if any point has an invalid value"
    ),
    retry_errors: bool = typer.Option(
        False, "--retry-errors", help="run again points recorded with an error"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="expand and validate the points, run nothing"
    ),
    force: bool = typer.Option(
        False, "--force", help=FORCE_HELP + " (as force = true in the spec)", metavar=""
    ),
    fmt: str = FORMAT_OPTION,
) -> None:
    """Run a design-space sweep; one row per point in SQLite, resumable after a kill."""
    from ..sweep.runner import check_dask, run_sweep
    from ..sweep.spec import load_spec

    check_dask(dask)
    loaded = load_spec(spec)
    loaded.force = loaded.force or force
    if dry_run:
        invalid = _print_points(loaded)
        if invalid:  # the exit status says the sweep would not run clean
            raise typer.Exit(1)
        return
    with progress() as bar:
        summary = run_sweep(
            loaded,
            db,
            workers=workers,
            dask=dask,
            strict=strict,
            retry_errors=retry_errors,
            progress=bar,
        )
    if summary.interrupted:
        err_console.print(
            f"[yellow]interrupted[/yellow]: {summary.ran} points written to {summary.db}; "
            "run the same command again to resume."
        )
        raise typer.Exit(130)
    _print_summary(summary)
    if summary.failed:
        # The rows stay in the database; the exit status says a point failed. A refused point
        # (an invalid split, an HBM misfit) is an answer, recorded with its reason: exit 0.
        raise typer.Exit(1)


def _print_summary(summary: SweepSummary) -> None:
    """What the sweep did, in a line, then the first few refusals and failures with their
    reasons."""
    rate = f", {summary.points_per_second:.1f} points/s" if summary.ran else ""
    console.print(
        f"sweep [bold]{summary.name}[/bold]: {summary.points} points, "
        f"{summary.skipped} already in {summary.db}, ran {summary.ran} on {summary.backend} "
        f"in {summary.wall_time:.2f} s{rate}; {summary.ok} ok, {summary.refused} refused, "
        f"{summary.failed} failed",
        highlight=False,
        soft_wrap=True,
    )
    for index, reason in summary.refusals[:5]:
        err_console.print(
            f"[yellow]point {index} refused[/yellow]: {escape(reason)}",
            highlight=False,
            soft_wrap=True,
        )
    if summary.refused > 5:
        err_console.print(
            f"... and {summary.refused - 5} more refused (acesim results {summary.db})"
        )
    for index, error in summary.errors[:5]:
        err_console.print(
            f"[red]point {index} failed[/red]: {escape(error)}", highlight=False, soft_wrap=True
        )
    if summary.failed > 5:
        err_console.print(f"... and {summary.failed - 5} more failed (acesim results {summary.db})")


def _print_points(loaded: Any) -> int:
    """Print the points, each checked as far as it goes before simulating
    (:func:`acesim.sweep.preflight.preflight`); the number of invalid ones."""
    from rich.table import Table

    from ..sweep.preflight import preflight

    points = loaded.points()
    errors = [p.error if not p.ok else preflight(p.config) for p in points]
    table = Table(title=f"sweep {loaded.name}: {len(points)} points ({loaded.kind})")
    table.add_column("#", justify="right")
    for axis in loaded.axes:
        table.add_column(axis.path)
    table.add_column("valid")
    for p, error in zip(points, errors, strict=True):
        table.add_row(
            str(p.index),
            *(str(p.values[a.path]) for a in loaded.axes),
            "yes" if error is None else f"[red]{escape(error)}[/red]",
        )
    print_table(table)
    invalid = sum(1 for e in errors if e is not None)
    if invalid:
        err_console.print(f"{invalid} of {len(points)} points would fail before simulating")
    return invalid


def _fmt(value: Any, unit: str = "") -> str:
    """A cell: numbers with an engineering prefix and their unit (``225 GB/s``)."""
    from ..units import format_eng

    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if unit:
        return format_eng(float(value), unit)
    if isinstance(value, float):
        if math.isfinite(value) and value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.4g}"
        return f"{value:.6g}"
    return str(value)


#: Metrics a results table shows first: each run kind's figure of merit and its companions.
HEADLINE = (
    "time",
    "busbw",
    "algbw",
    "iteration_time",
    "tokens_per_s_per_gpu",
    "mfu",
    "exposed_comm",
    "compute_slowdown",
    "hbm_bw_comm",
    "hbm_bandwidth",
)


def headline_first(metrics: list[str]) -> list[str]:
    """``metrics`` with the :data:`HEADLINE` ones first (in that order), the rest as stored."""
    first = [m for m in HEADLINE if m in metrics]
    return first + [m for m in metrics if m not in first]


def results(
    db: Path = typer.Argument(..., help="SQLite results file written by `acesim sweep`"),
    csv_out: Path | None = typer.Option(None, "--csv", help="write every column to this CSV"),
    columns: str | None = typer.Option(
        None, "--columns", "-c", help="comma-separated columns to show (default: swept and metrics)"
    ),
    limit: int | None = typer.Option(None, "--limit", "-n", help="show at most N rows"),
    fmt: str = FORMAT_OPTION,
) -> None:
    """Print a sweep's results as a table (or export them with --csv)."""
    if limit is not None and limit < 1:
        raise ConfigError("--limit", "must be at least 1 (a number of rows)", limit)
    from rich.table import Table

    from ..sweep.store import read_table, read_units

    if csv_out is not None:
        check_output_path(csv_out, "--csv", (".csv",))
    names, rows, roles = read_table(db)
    if csv_out is not None:
        with open(csv_out, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(names)
            writer.writerows(rows)
        console.print(
            f"wrote {len(rows)} rows, {len(names)} columns to {csv_out}",
            highlight=False,
            soft_wrap=True,
        )
        return
    if columns:
        shown = [c.strip() for c in columns.split(",") if c.strip()]
        for c in shown:
            if c not in names:
                raise ConfigError(
                    "--columns", "no such column", c, hint="columns: " + ", ".join(names)
                )
    else:
        axes = [c for c in names if roles.get(c) == "axis"]
        metrics = headline_first([c for c in names if roles.get(c) == "metric"])
        has_error = any(r[names.index("error")] for r in rows)
        # A table fits the terminal: every swept column, then the headline metrics (each run
        # kind's figure of merit first) as room allows; other formats hold every metric.
        room = max(2, console.width // 16 - len(axes) - 1 - (1 if has_error else 0))
        if fmt != "table":
            room = len(metrics)
        hidden = metrics[room:]
        shown = ["status"] + axes + metrics[:room] + (["error"] if has_error else [])
        if hidden:
            err_console.print(
                f"[dim]{len(hidden)} more metric columns ({', '.join(hidden[:6])}"
                f"{', ...' if len(hidden) > 6 else ''}): choose with -c, or export with --csv"
                "[/dim]",
                soft_wrap=True,
            )
    index = [names.index(c) for c in shown]
    units = read_units(db)
    ok = sum(1 for r in rows if r[0] == "ok")
    refused = sum(1 for r in rows if r[0] == "refused")
    table = Table(
        title=f"{db}: {len(rows)} points, {ok} ok, {refused} refused, "
        f"{len(rows) - ok - refused} failed"
    )
    for c in shown:
        unit = units.get(c, "")
        heading = f"{c} ({unit})" if unit and unit not in ("1", "x") else c
        table.add_column(
            heading, justify="left" if c in ("status", "error") else "right", overflow="fold"
        )
    for r in rows[:limit] if limit is not None else rows:
        table.add_row(*(_fmt(r[i], units.get(c, "")) for i, c in zip(index, shown, strict=True)))
    print_table(table)


def plot(
    db: Path = typer.Argument(..., help="SQLite results file written by `acesim sweep`"),
    x: str = typer.Option(..., "--x", help="column on the x axis (a swept path)"),
    y: str = typer.Option(..., "--y", help="metric on the y axis"),
    hue: str | None = typer.Option(None, "--hue", help="one line per value of this column"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="image file (default: Y_vs_X.png)"
    ),
    where: list[str] = typer.Option([], "--where", help="keep rows with FIELD=VALUE (repeatable)"),
    logx: bool = typer.Option(False, "--logx", help="logarithmic x axis"),
    logy: bool = typer.Option(False, "--logy", help="logarithmic y axis"),
) -> None:
    """Plot a metric against a swept field (matplotlib), one line per --hue value."""
    from ..sweep.plot import plot_results

    if output is not None:
        check_output_path(output, "--output", IMAGE_SUFFIXES)
    notes: list[str] = []
    path, lines = plot_results(
        db, x, y, hue=hue, output=output, where=where, logx=logx, logy=logy, notes=notes
    )
    for note in notes:
        err_console.print(f"[dim]note: {note}[/dim]", highlight=False, soft_wrap=True)
    console.print(
        f"wrote {path} ({lines} line{'s' if lines != 1 else ''})", highlight=False, soft_wrap=True
    )
