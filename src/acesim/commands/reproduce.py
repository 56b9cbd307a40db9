"""`acesim reproduce NAME`: regenerate a paper's evaluation from the model, or run a study
(the registered names: :data:`acesim.studies.studies.STUDIES`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..errors import ConfigError
from .common import FORCE_HELP, SET_HELP, err_console, parse_sets, progress
from .show import FORMAT_OPTION, print_table

# The options of `acesim reproduce`: those named "ace-isca21: ..." or "ace-2026: ..." belong to
# one study; the others to both.
PAPER_ARGUMENT = typer.Argument(
    "ace-isca21", help="which study: ace-isca21 (the ACE paper), ace-2026 (LLMs on H100/B200)"
)
OUT_OPTION = typer.Option(None, "--out", "-o", help="output folder (default out/NAME)")
WORKERS_OPTION = typer.Option(None, "--workers", help="local processes (default: the usable cores)")
DASK_OPTION = typer.Option(
    None,
    "--dask",
    help="run on Dask: 'local' (a LocalCluster of --workers processes) or a scheduler "
    "address of a trusted scheduler, tls://HOST:PORT (or tcp:// on a network you control: "
    "Dask exchanges pickles); results are identical to a local run",
)
NO_FIGURES_OPTION = typer.Option(False, "--no-figures", help="skip the figures", metavar="")
SYSTEM_OPTION = typer.Option(None, "--system", "-s", help="ace-isca21: system preset or file")
WORKLOADS_OPTION = typer.Option(None, "--workloads", help="ace-isca21: subset, e.g. resnet50,gnmt")
NPUS_OPTION = typer.Option(None, "--npus", help="ace-isca21: subset of network sizes, e.g. 16,64")
ASSUMPTIONS_OPTION = typer.Option(
    False, "--assumptions", help="ace-isca21: print every parameter's source and exit", metavar=""
)
SENSITIVITY_OPTION = typer.Option(
    None,
    "--sensitivity",
    help="ace-isca21: the variants of the sensitivity study to run ('all', the default, or "
    "a comma list of shipped, ideal_kernels, drf, static_hbm, fp32, store_and_forward, "
    "batch_x4, dma_half); each a whole re-run of the reproduction, all in one pool",
)
NO_SENSITIVITY_OPTION = typer.Option(
    False,
    "--no-sensitivity",
    help="ace-isca21: skip the sensitivity study (no ranges in the report)",
    metavar="",
)
SETS_OPTION = typer.Option([], "--set", help="ace-isca21: " + SET_HELP)
FORCE_OPTION = typer.Option(False, "--force", help="ace-isca21: " + FORCE_HELP, metavar="")
SYSTEMS_OPTION = typer.Option(
    None,
    "--systems",
    help="ace-2026: node presets, comma-separated (default h100-nvswitch-8,b200-nvswitch-8)",
)
CASES_OPTION = typer.Option(
    None, "--cases", help="ace-2026: subset of the study's cases (names in its report)"
)
ENDPOINTS_OPTION = typer.Option(
    None,
    "--endpoints",
    help="ace-2026: substrates (default baseline,copy_engine,nvls,ace,ideal; the best SM "
    "configuration is always run)",
)


def reproduce_command(
    paper: str = PAPER_ARGUMENT,
    out: Path | None = OUT_OPTION,
    workers: int | None = WORKERS_OPTION,
    dask: str | None = DASK_OPTION,
    no_figures: bool = NO_FIGURES_OPTION,
    system: str | None = SYSTEM_OPTION,
    workloads: str | None = WORKLOADS_OPTION,
    npus: str | None = NPUS_OPTION,
    assumptions: bool = ASSUMPTIONS_OPTION,
    sensitivity: str | None = SENSITIVITY_OPTION,
    no_sensitivity: bool = NO_SENSITIVITY_OPTION,
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    systems: str | None = SYSTEMS_OPTION,
    cases: str | None = CASES_OPTION,
    endpoints: str | None = ENDPOINTS_OPTION,
    fmt: str = FORMAT_OPTION,
) -> None:
    """Reproduce the ACE paper (ace-isca21) or run the 2026 study (ace-2026): summary.json,
    report.md and figures in --out."""
    given = {
        "--system": system is not None,
        "--workloads": workloads is not None,
        "--npus": npus is not None,
        "--assumptions": assumptions,
        "--sensitivity": sensitivity is not None,
        "--no-sensitivity": no_sensitivity,
        "--set": bool(sets),
        "--force": force,
        "--systems": systems is not None,
        "--cases": cases is not None,
        "--endpoints": endpoints is not None,
    }
    _check_options(paper, [flag for flag, used in given.items() if used], workers, dask)
    folder = out if out is not None else Path("out") / paper
    if paper == "ace-2026":
        _study_2026(folder, systems, cases, endpoints, workers, dask, not no_figures)
        return
    _ace_isca21(
        paper,
        folder,
        system=system,
        workloads=workloads,
        npus=npus,
        workers=workers,
        dask=dask,
        figures=not no_figures,
        assumptions=assumptions,
        sensitivity=sensitivity,
        no_sensitivity=no_sensitivity,
        sets=sets,
        force=force,
    )


def _check_options(paper: str, flags: list[str], workers: int | None, dask: str | None) -> None:
    """Refuse an unknown study, a study-specific flag given to the other study, and a bad
    worker count or Dask address."""
    from ..studies.studies import STUDIES

    study = STUDIES.get(paper, "paper")
    for flag in flags:
        if flag not in study.options:
            raise ConfigError(flag, f"is not an option of the study {paper}", paper)
    if workers is not None and workers < 1:
        raise ConfigError("--workers", "must be at least 1", workers)
    if dask is not None:
        from ..sweep.runner import check_dask

        check_dask(dask)


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def _bar(label: str) -> tuple[Any, Callable[[int], Callable[[], Any]]]:
    bar = progress()
    task = bar.add_task(label, total=None)

    def start(total: int) -> Callable[[], Any]:
        bar.update(task, total=total)
        return lambda: bar.advance(task)

    return bar, start


def _study_2026(
    out: Path,
    systems: str | None,
    cases: str | None,
    endpoints: str | None,
    workers: int | None,
    dask: str | None,
    figures: bool,
) -> None:
    from ..runs.compare import check_endpoints
    from ..studies.ace2026 import study_2026

    kinds = _split(endpoints)
    if kinds is not None:
        kinds = check_endpoints(kinds, "--endpoints")
    bar, start = _bar("ace-2026")
    with bar:
        summary = study_2026(
            out,
            systems=_split(systems),
            cases=_split(cases),
            endpoints=kinds,
            workers=workers,
            dask=dask,
            figures=figures,
            progress=start,
        )
    table = Table(title="ace-2026: speedup over the best SM configuration")
    others = summary["endpoints"][1:]
    for col in ("system", "case", *others):
        table.add_column(col, justify="right")
    for row in summary["results"]:
        if not row["applicable"]:
            table.add_row(row["system"], row["case"], *(["n/a"] * len(others)))
            continue
        cells = []
        for kind in others:
            e = row["endpoints"][kind]
            cells.append(f"{e['speedup']:.3f}x" if e["applicable"] else "n/a")
        table.add_row(row["system"], row["case"], *cells)
    print_table(table)
    err_console.print(f"summary.json, report.md and figures written to {out}")


def _ace_isca21(
    paper: str,
    out: Path,
    *,
    system: str | None,
    workloads: str | None,
    npus: str | None,
    workers: int | None,
    dask: str | None,
    figures: bool,
    assumptions: bool,
    sensitivity: str | None,
    no_sensitivity: bool,
    sets: list[str],
    force: bool = False,
) -> None:
    from ..config.resolve import resolve_system
    from ..studies.reproduce import reproduce

    if sensitivity is not None and no_sensitivity:
        raise ConfigError("--no-sensitivity", "give either --sensitivity or --no-sensitivity")
    cfg = resolve_system(system or paper, overrides=parse_sets(sets), force=force)
    if assumptions:
        from .assumptions import assumptions_command

        assumptions_command(system or paper, sets, force=force, nodes=None)
        return
    names = _split(workloads)
    try:
        sizes = [int(x) for x in npus.split(",")] if npus else None
    except ValueError:
        raise ConfigError("--npus", "expected comma-separated integers", npus) from None
    variants: bool | list[str] = False if no_sensitivity else _variants(sensitivity)
    bar, start = _bar(f"reproducing {paper}")
    with bar:
        summary = reproduce(
            cfg,
            out,
            workloads=names,
            npus=sizes,
            workers=workers,
            dask=dask,
            figures=figures,
            progress=start,
            sensitivity=variants,
        )
    from ..studies.reproduce import ranges_by_id

    ranges = ranges_by_id(summary)
    table = Table(title=f"{paper}: acesim vs the paper")
    for col in ("figure", "acesim", "range", "paper", "deviation", "within tolerance"):
        table.add_column(col, justify="right")
    for row in summary["deviations"]:
        r = ranges.get(row["id"])
        table.add_row(
            row["figure"],
            f"{row['acesim']:.3f}",
            f"{r['low']:.3f}-{r['high']:.3f}" if r else "-",
            f"{row['paper']:.2f}",
            f"{100 * row['deviation']:+.1f}%",
            "yes" if row["within"] else "no",
        )
    print_table(table)
    err_console.print(f"summary.json, report.md and figures written to {out}")


def _variants(text: str | None) -> bool | list[str]:
    """``--sensitivity``: True (not given, or 'all') or the named variants (checked)."""
    from ..studies.sensitivity import VARIANTS

    if text is None or text.strip() == "all":
        return True
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--sensitivity", "name 'all' or at least one variant", text)
    return [VARIANTS.check(n, "--sensitivity") for n in names]
