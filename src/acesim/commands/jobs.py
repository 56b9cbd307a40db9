"""`acesim jobs SPEC`: several jobs sharing one system, in one simulation, reported per job."""

from __future__ import annotations

from pathlib import Path

import typer

from ..results.jsonout import dumps
from .common import check_output_path, console, err_console
from .show import show_result


def jobs_command(
    spec: Path = typer.Argument(..., help="the jobs spec (TOML, YAML or JSON; docs/jobs.md)"),
    endpoint: str | None = typer.Option(
        None, "--endpoint", help="endpoint kind for every job (default: the system's)"
    ),
    trace: Path | None = typer.Option(
        None, "--trace", help="write the shared run's Perfetto trace (one process per job)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON", metavar=""),
) -> None:
    """Run jobs together on one system (shared links, switches, NICs, co-located NPUs) and
    each alone: iteration times, slowdown, what bound each and whose traffic shared it."""
    from ..runs.jobs import run_jobs

    if trace is not None:
        check_output_path(trace, "--trace", (".json",))
    result = run_jobs(spec, endpoint=endpoint, trace=trace)
    if as_json:
        print(dumps(result.to_dict(), indent=1))
        return
    show_result(result)
    for line in result.footnotes():
        err_console.print(line, highlight=False, soft_wrap=True)
    if trace is not None:
        console.print(f"trace: {trace}", highlight=False)
