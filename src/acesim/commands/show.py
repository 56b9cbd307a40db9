"""Printing results of any run kind: one run, or a comparison, from the result protocol
(:mod:`acesim.results.protocol`); footnotes (the strategy's note, the model's, the system's
assumptions) on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table as RichTable

from ..results.protocol import Table
from ..runs.compare import Comparison
from ..units import format_size, format_time
from .common import console, err_console

__all__ = ["show_result", "show_comparison", "show_footnotes", "assumptions_note", "layer_table"]


def _table(table: Table) -> RichTable:
    out = RichTable(title=table.title)
    for i, column in enumerate(table.columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    for row in table.rows:
        out.add_row(*row)
    return out


def show_result(result: Any) -> None:
    """One run: its case, its headline figures, its further tables."""
    console.print(result.describe(), highlight=False, soft_wrap=True)
    title = f"{result.endpoint} endpoint ({result.variant})"
    console.print(_table(Table(title, ("metric", "value"), result.rows())))
    for table in result.tables():
        console.print(_table(table))


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
    console.print(_table(table))
    for out in outs:
        if len(out.tried) > 1:
            console.print(_table(_variants(out.label, out.tried, out.best.figure)))
    for kind, why in comp.refused.items():
        err_console.print(f"[dim]{kind}: not run: {why}[/dim]", highlight=False)


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


def show_footnotes(results: Sequence[Any], system: str, *, assumptions: bool = True) -> None:
    """The results' footnotes (each once: why the mode, the model's notes) and the system's
    assumption count (``assumptions``), on stderr."""
    seen: list[str] = []
    for r in results:
        seen += [note for note in r.footnotes() if note not in seen]
    for note in seen:
        err_console.print(f"[dim]{note}[/dim]", highlight=False)
    count = len(getattr(results[0], "assumptions", [])) if results else 0
    if count and assumptions:
        err_console.print(f"[dim]{assumptions_note(count, system)}[/dim]", highlight=False)


def layer_table(result: Any) -> RichTable:
    """A training run's per-layer times, mean per measured iteration."""
    table = RichTable(title="per-layer times, mean per measured iteration")
    table.add_column("layer", justify="left", overflow="fold", ratio=1)  # names wrap
    for col in ("fwd", "in grad", "wt grad", "collective", "bytes"):
        table.add_column(col, justify="right", no_wrap=True)  # numbers never wrap
    for row in result.layers:
        times = (row.fwd, row.ig, row.wg, row.comm)
        table.add_row(row.name, *map(format_time, times), format_size(row.comm_bytes))
    return table
