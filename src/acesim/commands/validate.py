"""`acesim validate`: the model against public measurements of real hardware, per family."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from ..results.jsonout import dumps
from .common import IMAGE_SUFFIXES, check_output_path, console, err_console, progress
from .show import FORMAT_OPTION, print_table

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from ..validation import CaseResult, Corpus, FamilyReport, Report, TransferReport


def _families(items: list[str]) -> list[str] | None:
    """``--family a --family b,c`` -> ``[a, b, c]`` (None: all); ``--row`` the same."""
    names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    return list(dict.fromkeys(names)) or None


def _number(value: float) -> str:
    """Four significant digits below 10,000, whole numbers (with thousands commas) above."""
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def _row(r: CaseResult) -> list[str]:
    c = r.case
    measured = escape(f"{c.measured:g} {c.unit}")
    role = "fit" if c.fit else "test"
    if r.status == "ok" and r.simulated is not None and r.error is not None:
        simulated = _number(r.simulated)
        error = f"{r.error * 100:+.1f}%"
        note = escape(r.note)
    else:
        style = {"error": "red", "unsupported": "yellow", "skipped": "dim"}[r.status]
        simulated = f"[{style}]{r.status}[/{style}]"
        error = "-"
        note = f"[{style}]{escape(r.note)}[/{style}]" if r.status == "error" else escape(r.note)
    return [escape(c.id), escape(c.system), measured, simulated, error, role, note]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _verdict(f: FamilyReport) -> str:
    """The error of the test rows against the budget (or, held out, the transfer target)."""
    b = f.budget
    what = "target" if f.held_out else "budget"
    limits = f"{what}: {b.statistic} |error| <= {b.limit * 100:g}%" if b else "no target"
    counts = f.counts
    if f.test_errors == []:
        return f"{escape(f.name)}: no simulated test rows, nothing to judge ({limits})"
    if f.within_budget is None:
        state = "reported (no target)"
    elif f.held_out:
        state = "meets its target" if f.within_budget else "[red]misses its target[/red]"
    else:
        state = "within budget" if f.within_budget else "[red]OVER BUDGET[/red]"
        if f.within_budget is False and not f.family.gating:
            state += f" (not gating: {escape(f.family.gating_note)})"
    bands = "".join(
        f"; {escape(band.label)}: {band.statistic} {_percent(f.band_judged(band))} "
        f"(limit {band.limit * 100:g}%)"
        for band in f.bands
    )
    return (
        f"{escape(f.name)}: {counts['test']} test rows, mean |error| {_percent(f.mean_error)}, "
        f"max {_percent(f.max_error)} ({limits}{bands}): {state}"
    )


def summary_line(f: FamilyReport) -> str:
    """One line: the test rows' error against the budget, and the rows not judged."""
    counts = f.counts
    verdict = _verdict(f)
    rest = [f"{counts['fit']} fit", f"{counts['unsupported']} unsupported"]
    if counts["error"]:
        rest.append(f"[red]{counts['error']} errors[/red]")
    if counts["skipped"]:
        rest.append(f"{counts['skipped']} skipped (--quick)")
    return f"{verdict}; rows: {', '.join(rest)}"


def validate_command(
    family: list[str] = typer.Option(
        [], "--family", "-f", help="only these families (repeatable, or a comma list)"
    ),
    quick: bool = typer.Option(
        False, "--quick", help="only the rows that are cheap to simulate", metavar=""
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables", metavar=""),
    plot: Path | None = typer.Option(
        None, "--plot", help="write simulated / measured per family (.png, .svg or .pdf)"
    ),
    corpus: Path | None = typer.Option(
        None, "--corpus", hidden=True, help="a folder of family .toml files (tests)"
    ),
    fmt: str = FORMAT_OPTION,
    row: list[str] = typer.Option(
        [],
        "--row",
        "-r",
        help="only these rows, by id (repeatable, or a comma list); the exit status then "
        "ignores the budgets, which judge a family's every test row",
    ),
    transfer: bool = typer.Option(
        False,
        "--transfer",
        help="also simulate every row with its own system held out (its fits withheld, its "
        "parameters from the transfer rules and the other systems' fits)",
        metavar="",
    ),
) -> None:
    """Compare simulated figures with public measurements; exit 1 when a gating family's
    test rows are over its error budget (a family that does not gate is reported over budget
    with its reason). With --transfer, each row is also simulated leaving its system out and
    reported against the family's transfer target, which never fails the command."""
    from ..errors import ConfigError
    from ..validation import load_corpus, validate
    from ..validation.evaluate import chosen_families

    if plot is not None:
        check_output_path(plot, "--plot", IMAGE_SUFFIXES)

    loaded = load_corpus(corpus)
    rows = loaded.rows(_families(row) or []) if row else None
    chosen = chosen_families(loaded, _families(family), rows)
    if rows is not None and not chosen:
        raise ConfigError(
            "--row", "none of these rows is in the families --family names", ",".join(sorted(rows))
        )
    total = sum(1 for f in chosen for c in f.cases if rows is None or c.id in rows)
    total *= 2 if transfer else 1
    names = [f.name for f in chosen]
    both = report = None
    with progress() as bar:
        task = bar.add_task("validate", total=total)
        if transfer:
            both = _transfer_with_progress(bar, task, names, quick, loaded, rows)
            report, shown = both.in_sample, both.held_out
        else:
            advance = lambda _r: bar.advance(task)  # noqa: E731
            report = shown = validate(names, quick=quick, corpus=loaded, on_case=advance, rows=rows)
    if as_json or fmt == "json":
        console.out(dumps((both or report).to_dict(), indent=2))
    elif both is not None:
        _print_transfer(both)
    else:
        _print_report(report)
    if plot is not None:
        from ..validation.plot import plot_report

        if plot_report(shown, plot):
            err_console.print(f"figure written to {escape(str(plot))}")
        else:
            err_console.print("no simulated rows: no figure written")
    if not report.within_budget and rows is None:  # a budget judges a family's every row
        raise typer.Exit(1)


def _transfer_with_progress(
    bar: Progress,
    task: TaskID,
    names: list[str],
    quick: bool,
    corpus: Corpus,
    rows: frozenset[str] | None,
) -> TransferReport:
    """:func:`~acesim.validation.validate_transfer` with ``bar`` advanced a row at a time and
    naming each refit of a held-out world as it starts (tens of CPU seconds before that
    system's first row)."""
    from ..validation import validate_transfer

    def refitting(unit: str, preset: str) -> None:
        bar.update(task, description=f"holding out {unit}: refitting {preset}")

    def advance(_row: object) -> None:
        bar.update(task, description="validate", advance=1)

    return validate_transfer(
        names, quick=quick, corpus=corpus, on_case=advance, rows=rows, on_refit=refitting
    )


def _print_report(report: Report) -> None:
    for f in report.families:
        title = escape(f"{f.family.title} [{f.name}]")
        table = Table(title=title, title_justify="left")
        table.add_column("case", no_wrap=True)
        table.add_column("system", overflow="fold")
        for name in ("measured", "simulated", "error", "row", "before fit"):
            table.add_column(name, justify="right")
        table.add_column("bound or note", min_width=16, ratio=1, overflow="fold")
        for r in f.results:
            row = _row(r)
            table.add_row(*row[:6], _signed(r.case.error_before_fit), row[6])
        print_table(table)
        console.print(summary_line(f), highlight=False)
        console.print()


def _print_transfer(both: TransferReport) -> None:
    for inside, out in zip(both.in_sample.families, both.held_out.families, strict=True):
        title = escape(f"{inside.family.title} [{inside.name}]: in sample and held out")
        table = Table(title=title, title_justify="left")
        table.add_column("case", no_wrap=True)
        table.add_column("system", overflow="fold")
        for name in ("measured", "in sample", "error", "row", "held out", "error", "before fit"):
            table.add_column(name, justify="right")
        for a, b in zip(inside.results, out.results, strict=True):
            first, second = _row(a), _row(b)
            table.add_row(*first[:6], second[3], second[4], _signed(a.case.error_before_fit))
        print_table(table)
        console.print("in sample: " + summary_line(inside), highlight=False)
        console.print("held out:  " + summary_line(out), highlight=False)
        console.print()
    table = Table(title="The held-out systems' parameters", title_justify="left")
    for name in ("system", "preset", "parameter", "value", "from"):
        table.add_column(name, overflow="fold")
    for v in both.values:
        value = "unset" if v.value is None else f"{v.value:.4g}"
        table.add_row(*(escape(x) for x in (v.system, v.preset, v.parameter, value, v.how)))
    print_table(table)
