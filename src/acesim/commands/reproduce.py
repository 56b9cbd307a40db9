"""`acesim reproduce NAME`: regenerate a paper's evaluation from the model."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import ConfigError
from .common import SET_HELP, console, err_console, parse_sets, progress

PAPERS = {"ace-isca21": "ace-isca21"}


def reproduce_command(
    paper: str = typer.Argument("ace-isca21", help="which paper: ace-isca21"),
    out: Path = typer.Option(Path("out/ace-isca21"), "--out", "-o", help="output folder"),
    system: str | None = typer.Option(None, "--system", "-s", help="system preset or file"),
    workloads: str | None = typer.Option(None, "--workloads", help="subset, e.g. resnet50,gnmt"),
    npus: str | None = typer.Option(None, "--npus", help="subset of network sizes, e.g. 16,64"),
    workers: int | None = typer.Option(None, "--workers", help="processes (default: cores)"),
    no_figures: bool = typer.Option(False, "--no-figures", help="skip the figures", metavar=""),
    assumptions: bool = typer.Option(
        False, "--assumptions", help="print every parameter's source and exit", metavar=""
    ),
    sensitivity: str | None = typer.Option(
        None,
        "--sensitivity",
        help="also re-run the reproduction under each unpinned assumption: 'all' or a comma "
        "list of variants (shipped, ideal_kernels, drf, static_hbm, fp32, store_and_forward, "
        "batch_x4, dma_half); minutes each",
    ),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Reproduce the ACE paper: summary.json, report.md and figures in --out."""
    from ..config.resolve import resolve_system
    from ..experiments.reproduce import reproduce

    if paper not in PAPERS:
        raise ConfigError("paper", "must be one of " + ", ".join(PAPERS), paper)
    if workers is not None and workers < 1:
        raise ConfigError("--workers", "must be at least 1", workers)
    cfg = resolve_system(system or PAPERS[paper], overrides=parse_sets(sets))
    if assumptions:
        from .assumptions import assumptions_command

        assumptions_command(system or PAPERS[paper], sets)
        return
    names = workloads.split(",") if workloads else None
    try:
        sizes = [int(x) for x in npus.split(",")] if npus else None
    except ValueError:
        raise ConfigError("--npus", "expected comma-separated integers", npus) from None
    with progress() as bar:
        task = bar.add_task(f"reproducing {paper}", total=None)

        def start(total: int):  # type: ignore[no-untyped-def]
            bar.update(task, total=total)
            return lambda: bar.advance(task)

        summary = reproduce(
            cfg,
            out,
            workloads=names,
            npus=sizes,
            workers=workers,
            figures=not no_figures,
            progress=start,
            sensitivity=_variants(sensitivity),
        )
    table = Table(title=f"{paper}: acesim vs the paper")
    for col in ("figure", "acesim", "paper", "deviation", "within tolerance"):
        table.add_column(col, justify="right")
    for row in summary["deviations"]:
        table.add_row(
            row["figure"],
            f"{row['acesim']:.3f}",
            f"{row['paper']:.2f}",
            f"{100 * row['deviation']:+.1f}%",
            "yes" if row["within"] else "no",
        )
    console.print(table)
    err_console.print(f"summary.json, report.md and figures written to {out}")


def _variants(text: str | None) -> bool | list[str]:
    """``--sensitivity``: False (not given), True (all) or the named variants (checked)."""
    from ..experiments.sensitivity import VARIANTS

    if text is None:
        return False
    if text.strip() == "all":
        return True
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--sensitivity", "name 'all' or at least one variant", text)
    return [VARIANTS.check(n, "--sensitivity") for n in names]
