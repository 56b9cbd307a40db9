"""The one table layout of every command, and printing results of any run kind.

Every table a command prints goes through :func:`print_table`, in the format its
``--format`` option chose (:data:`FORMATS`, :data:`FORMAT_OPTION`):

* ``table`` (the default): a rich table with a rule under the header and no vertical borders;
  a cell is never cut: columns of short cells (numbers, names) never wrap, and the table is
  printed at its own width when the terminal is narrower (the terminal wraps the line, the
  number stays whole); only long prose cells (over 40 characters) fold;
* ``plain``: one line per row, columns aligned with spaces, the title and the header as
  ``#`` comment lines (as nccl-tests prints: ``grep -v '^#'`` leaves the rows);
* ``csv``: a header row and the rows (one blank line between tables; titles left out);
* ``markdown``: a pipe table under its title in bold;
* ``json``: one JSON object a table, one a line (JSON Lines): ``title``, ``columns``,
  ``rows`` (the cells as printed, units included). Commands with a result document (``run``,
  ``collective``) print that document instead, as ``--json`` does.

In ``csv`` and ``json`` the lines around a table (a run's description) go to stderr, so
standard output is the data alone. Results of any run kind are printed from the result
protocol (:mod:`acesim.results.protocol`); footnotes (the strategy's note, the model's, the
system's assumptions) go to stderr.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table as RichTable
from rich.text import Text

from ..errors import ConfigError
from ..results.protocol import Table
from ..runs.compare import Comparison
from ..units import format_size, format_time
from .common import console, err_console

__all__ = [
    "FORMATS",
    "FORMAT_OPTION",
    "use_format",
    "current_format",
    "print_table",
    "print_text",
    "show_result",
    "show_comparison",
    "show_footnotes",
    "assumptions_note",
    "layer_table",
]

#: The output formats of every command that prints a table (module docstring).
FORMATS = ("table", "plain", "csv", "markdown", "json")

#: A cell longer than this (characters) is prose: its column may fold; shorter ones never wrap.
PROSE = 40


class _State:
    """The running command's format and how many tables it has printed."""

    format = "table"
    tables = 0


_state = _State()


def use_format(value: str) -> str:
    """Print this command's tables as ``value`` (one of :data:`FORMATS`; ConfigError naming
    ``--format`` otherwise). The ``--format`` option's callback: every command that has the
    option sets it, the default included."""
    if value not in FORMATS:
        raise ConfigError("--format", f"must be one of {', '.join(FORMATS)}", value)
    _state.format = value
    _state.tables = 0
    return value


def current_format() -> str:
    """The format the running command prints its tables in."""
    return _state.format


FORMAT_OPTION = typer.Option(
    "table",
    "--format",
    help="how tables are printed: table (aligned, numbers never cut), plain (one line a row, "
    "nccl-tests style), csv, markdown or json (one object a table, one a line)",
    callback=use_format,
)


def _plain(cell: Any) -> str:
    """A rich cell's text, markup removed."""
    if isinstance(cell, Text):
        return cell.plain
    text = str(cell)
    try:
        return Text.from_markup(text).plain
    except MarkupError:
        return text


def _grid(table: RichTable) -> tuple[list[str], list[str], list[list[str]]]:
    """A rich table's headers, justifications and rows, as text."""
    heads = [_plain(c.header) for c in table.columns]
    justify = [str(c.justify) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    rows = [list(row) for row in zip(*columns, strict=True)] if columns else []
    return heads, justify, rows


def _laid_out(title: str, heads: list[str], justify: list[str], rows: list[list[str]]) -> RichTable:
    """The ``table`` format's layout (module docstring)."""
    out = RichTable(title=title or None, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for i, head in enumerate(heads):
        prose = any(len(row[i]) > PROSE for row in rows)
        out.add_column(
            head,
            justify=justify[i],  # type: ignore[arg-type]
            no_wrap=not prose,
            overflow="fold",
        )
    for row in rows:
        out.add_row(*(Text(cell) for cell in row))
    return out


def _plain_lines(title: str, heads: list[str], justify: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if j == "right" else c.ljust(w)
            for c, w, j in zip(cells, widths, justify, strict=True)
        ).rstrip()

    lines = [f"# {title}"] if title else []
    lines.append("# " + line(heads))
    lines += ["  " + line(row) for row in rows]
    return "\n".join(lines)


def _markdown(title: str, heads: list[str], justify: list[str], rows: list[list[str]]) -> str:
    def cells(items: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in items) + " |"

    rule = "|" + "|".join("---:" if j == "right" else ":---" for j in justify) + "|"
    lines = [f"**{title}**", ""] if title else []
    return "\n".join([*lines, cells(heads), rule, *(cells(r) for r in rows), ""])


def _uncut_width(out: Console, laid: RichTable, heads: list[str], rows: list[list[str]]) -> int:
    """The width at which no cell of ``laid`` is cut: every column at its widest cell, a
    prose column at :data:`PROSE` (it folds), plus the borders and padding."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]
    overhead = Measurement.get(out, out.options.update(width=10**6), laid).maximum - sum(natural)
    return sum(
        min(w, PROSE) if w > PROSE and any(len(r[i]) > PROSE for r in rows) else w
        for i, w in enumerate(natural)
    ) + max(overhead, 0)


def print_table(table: RichTable | Table, *, to: Console | None = None) -> None:
    """Print ``table`` (a rich table, or a protocol :class:`~acesim.results.protocol.Table`
    whose first column is left-aligned and the others right-aligned) in the command's format
    (module docstring); ``to``: another console (stderr)."""
    caption = ""
    if isinstance(table, Table):
        title, heads = table.title, list(table.columns)
        justify = ["left" if i == 0 else "right" for i in range(len(heads))]
        rows = [list(r) for r in table.rows]
    else:
        title = _plain(table.title) if table.title else ""
        caption = _plain(table.caption) if table.caption else ""
        heads, justify, rows = _grid(table)
    out = to or console
    fmt = _state.format
    first = _state.tables == 0
    _state.tables += 1
    if fmt == "table":
        laid = _laid_out(title, heads, justify, rows)
        need = _uncut_width(out, laid, heads, rows)
        if need <= out.width:
            out.print(laid)
        else:  # wider than the terminal: printed whole (rich's print caps width at the console's)
            detected = out._width  # noqa: SLF001 (rich has no public way to widen one print)
            out.width = need
            try:
                out.print(laid)
            finally:
                out._width = detected  # noqa: SLF001
    elif fmt == "plain":
        out.out(
            ("" if first else "\n") + _plain_lines(title, heads, justify, rows), highlight=False
        )
    elif fmt == "markdown":
        out.out(("" if first else "\n") + _markdown(title, heads, justify, rows), highlight=False)
    elif fmt == "csv":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([heads, *rows])
        out.out(("" if first else "\n") + buffer.getvalue(), end="", highlight=False)
    else:
        doc = {"title": title, "columns": heads, "rows": rows}
        out.out(json.dumps(doc, ensure_ascii=False), highlight=False)
    if caption:
        print_text(caption)


def print_text(text: str) -> None:
    """A line that goes with the tables (a run's description): printed as the format allows
    (a ``#`` comment in ``plain``, a paragraph in ``markdown``, stderr in ``csv`` and
    ``json``)."""
    fmt = _state.format
    if fmt == "table":
        console.print(text, highlight=False, soft_wrap=True, markup=False)
    elif fmt == "plain":
        console.out(f"# {text}", highlight=False)
    elif fmt == "markdown":
        console.out(text + "\n", highlight=False)
    else:
        err_console.print(text, highlight=False, soft_wrap=True, markup=False)


def show_result(result: Any) -> None:
    """One run: its case, its headline figures, its further tables."""
    print_text(result.describe())
    title = f"{result.endpoint} endpoint ({result.variant})"
    print_table(Table(title, ("metric", "value"), result.rows()))
    for table in result.tables():
        print_table(table)


def show_comparison(comp: Comparison) -> None:
    """Endpoint kinds side by side (the best variant of each), the speedups and gains, and
    every searched kind's variants."""
    best = comp.best_baseline
    outs = list(comp.endpoints.values())
    heads = [
        f"best {o.label} ({o.best.variant})" if o.kind == comp.reference else o.label for o in outs
    ]
    rows = [o.best.rows() for o in outs]
    table = Table(best.describe(), ("metric", *heads))
    table.rows.extend((name, *(r[i][1] for r in rows)) for i, (name, _v) in enumerate(rows[0]))
    label = comp.endpoints[comp.reference].label
    table.rows.append((f"speedup vs best {label}", *(f"{comp.speedup(o.kind):.3f}x" for o in outs)))
    for gain in best.gains:
        text = gain.replace("_", " ")
        table.rows.append((text, *(f"{comp.gain(o.kind, gain):.2f}x" for o in outs)))
    print_table(table)
    for out in outs:
        if len(out.tried) > 1:
            print_table(_variants(out.label, out.tried, out.best.figure))
    for kind, why in comp.refused.items():
        err_console.print(f"[dim]{kind}: not run: {escape(why)}[/dim]", highlight=False)


def _variants(label: str, tried: Sequence[Any], best: float) -> Table:
    """A kind's variants: the settings that vary, the figure, the ratio to the best."""
    keys = [k for k in tried[0].settings if len({repr(r.settings.get(k)) for r in tried}) > 1]
    name = tried[0].rows()[0][0]
    table = Table(f"{label} variants tried", ("variant", "settings that vary", name, "vs best"))
    for r in tried:
        settings = ", ".join(f"{k}={r.settings.get(k)}" for k in keys)
        table.rows.append((r.variant, settings, format_time(r.figure), f"{r.figure / best:.3f}x"))
    return table


def assumptions_note(count: int, system: str, see: str | None = None) -> str:
    """The one line saying how many of a system's parameters are assumptions."""
    where = see or f"`acesim assumptions {system}`"
    return f"{count} parameters of {system} are assumptions (see {where})."


def show_footnotes(
    results: Sequence[Any],
    system: str,
    *,
    assumptions: bool = True,
    labels: Sequence[str] | None = None,
) -> None:
    """The results' footnotes (each once: why the mode, the model's notes) and the system's
    assumption count (``assumptions``), on stderr. With ``labels`` (one per result: a
    comparison's endpoints), a note some results have and others not names whose it is."""
    for note in labelled_notes([r.footnotes() for r in results], labels):
        err_console.print(f"[dim]{escape(note)}[/dim]", highlight=False)
    count = len(getattr(results[0], "assumptions", [])) if results else 0
    if count and assumptions:
        err_console.print(f"[dim]{assumptions_note(count, system)}[/dim]", highlight=False)


def labelled_notes(notes: Sequence[Sequence[str]], labels: Sequence[str] | None) -> list[str]:
    """Each result's notes once, in order; with ``labels`` (one per result), a note not every
    result has is prefixed by its result's label (``"ace: composed: ..."``)."""
    seen: list[str] = []
    for i, own in enumerate(notes):
        for note in own:
            shared = all(note in other for other in notes)
            text = note if labels is None or shared else f"{labels[i]}: {note}"
            if text not in seen:
                seen.append(text)
    return seen


def layer_table(result: Any) -> Table:
    """A training run's per-layer times, mean per measured iteration."""
    table = Table(
        "per-layer times, mean per measured iteration",
        ("layer", "fwd", "in grad", "wt grad", "collective", "bytes"),
    )
    for row in result.layers:
        times = (row.fwd, row.ig, row.wg, row.comm)
        table.rows.append((row.name, *map(format_time, times), format_size(row.comm_bytes)))
    return table
