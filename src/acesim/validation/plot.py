"""The validation figure: simulated against measured, one panel per family with live rows.

Each panel plots every simulated row as simulated / measured (the error) against the measured
figure on a log axis, test rows filled and fit rows hollow, with the family's budget as a band
around 1: a point inside the band is within budget. Unsupported and failed rows have no point
(the table lists them).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    MaxNLocator,
    NullFormatter,
    NullLocator,
    StrMethodFormatter,
)

from ..results.figure_file import save_figure  # noqa: E402
from .report import Report  # noqa: E402

__all__ = ["plot_report", "report_figure"]


def plot_report(report: Report, path: Path) -> int:
    """Write the figure of ``report`` to ``path`` (.png, .svg, .pdf); returns the panels drawn
    (0 when no family has a simulated row: nothing is written)."""
    fig = report_figure(report)
    if fig is None:
        return 0
    save_figure(fig, path)
    panels = len(fig.axes)
    plt.close(fig)
    return panels


def report_figure(report: Report) -> Figure | None:
    """The figure of ``report`` (module docstring), a panel per family with a simulated row;
    None when there is none. A held-out report's panels say so in their titles."""
    families = [f for f in report.families if any(r.status == "ok" for r in f.results)]
    if not families:
        return None
    # three panels a row at most (the whole corpus's seven in one row was 29 inches wide)
    columns = min(3, len(families))
    lines = math.ceil(len(families) / columns)
    fig, grid = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.6 * lines), squeeze=False)
    panels = [ax for row in grid for ax in row]
    for unused in panels[len(families) :]:
        fig.delaxes(unused)
    for ax, family in zip(panels, families, strict=False):
        budget = family.budget
        if budget is not None:
            what = "target" if family.held_out else "budget"
            ax.axhspan(
                1 - budget.limit,
                1 + budget.limit,
                color="tab:green",
                alpha=0.12,
                lw=0,
                label=f"{what} ±{budget.limit:.0%} ({budget.statistic})",
            )
        ax.axhline(1.0, color="black", lw=0.8)
        systems = sorted({r.case.system for r in family.results if r.status == "ok"})
        for index, system in enumerate(systems):
            rows = [r for r in family.results if r.status == "ok" and r.case.system == system]
            color = f"C{index % 10}"  # matplotlib's default cycle, one per system
            for fit in (False, True):
                pts = [r for r in rows if r.is_fit == fit]
                if not pts:
                    continue
                ax.scatter(
                    [r.case.measured for r in pts],
                    [1 + (r.error or 0.0) for r in pts],
                    facecolors="none" if fit else color,
                    edgecolors=color,
                    label=f"{system}{' (fit)' if fit else ''}",
                    zorder=3,
                )
        ax.set_xscale("log")
        measured = [r.case.measured for r in family.results if r.status == "ok"]
        if max(measured) >= 10 * min(measured):
            ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: no crowded labels
        else:  # within a decade no decade is on the axis: a few plain ticks instead
            ax.set_xlim(min(measured) / 1.2, max(measured) * 1.2)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
        units = sorted({r.case.unit for r in family.results if r.status == "ok"})
        ax.set_xlabel(f"measured ({', '.join(units)})")
        ax.set_ylabel("simulated / measured")
        ax.set_title(f"{family.name} (held out)" if family.held_out else family.name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
