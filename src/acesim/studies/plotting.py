"""House style for acesim's figures: labelled axes with units, engineering tick labels, the
legend outside the data, readable at a paper's column width."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.ticker import EngFormatter, FuncFormatter

__all__ = ["gbps_axis", "time_axis", "plain_numbers", "finish", "WORKLOAD_COLORS", "color_of"]

#: One colour per workload, the same in every figure.
WORKLOAD_COLORS = {
    "resnet50": "tab:blue",
    "gnmt": "tab:orange",
    "dlrm": "tab:green",
    "gpt": "tab:purple",
}
_CYCLE = ("tab:brown", "tab:pink", "tab:gray", "tab:olive", "tab:cyan")


def color_of(name: str, index: int = 0) -> str:
    """The colour of a workload (a fixed one for the zoo, else from a cycle)."""
    return WORKLOAD_COLORS.get(name, _CYCLE[index % len(_CYCLE)])


def gbps_axis(axis: Any, label: str) -> None:
    """An axis of bandwidths in B/s, ticks in engineering notation (``400 GB/s``)."""
    axis.set_major_formatter(EngFormatter(unit="B/s"))
    axis.set_label_text(f"{label} (B/s)")


def time_axis(axis: Any, label: str) -> None:
    """An axis of times in s, ticks in engineering notation (``1.5 ms``)."""
    axis.set_major_formatter(EngFormatter(unit="s"))
    axis.set_label_text(f"{label} (s)")


def plain_numbers(axis: Any, *, minor: bool = False) -> None:
    """A log axis's ticks as plain numbers (0.5, 2; it writes 6 x 10^-1, 2^-1); ``minor``:
    its minor ticks too where their mantissa is 2, 3 or 5 (enough labels between decades,
    never crowded)."""
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    if minor:
        axis.set_minor_formatter(FuncFormatter(_minor_label))


def _minor_label(x: float, _pos: int) -> str:
    mantissa = x / 10 ** math.floor(math.log10(x)) if x > 0 else 0.0
    return f"{x:g}" if any(math.isclose(mantissa, m) for m in (2, 3, 5)) else ""


def finish(
    fig: Any, ax: Any, title: str, *, legend: bool = True, handles: list[Any] | None = None
) -> None:
    """Title, grid and a legend below the axes (never over the data); tight layout.
    ``handles``: the legend's entries (a figure of several panels, whose entries are not all
    drawn on ``ax``); None: what ``ax`` has labelled."""
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    entries = handles if handles is not None else ax.get_legend_handles_labels()[0]
    if legend and entries:
        ax.legend(
            handles=entries,
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.18),
            ncol=2,
            frameon=False,
        )
    fig.tight_layout()
