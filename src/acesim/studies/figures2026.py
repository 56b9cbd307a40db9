"""Figures of the 2026 study (:mod:`.ace2026`), each as PNG and SVG, from its summary.

* ``speedup``: one panel per system; per case, one bar per substrate: its speedup over the
  best SM configuration (a substrate that cannot run there has no bar, and an ``n/a`` mark);
* ``exposed``: one panel per system; per case and substrate, a stacked bar of the iteration:
  compute, the pipeline bubble and the exposed communication by kind (TP, DP, PP, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ..results.figure_file import save_figure  # noqa: E402
from .plotting import finish, time_axis  # noqa: E402

__all__ = ["figures", "write_figures", "FIGURES"]

FIGURES = ("speedup", "exposed")
KIND_COLORS = {
    "baseline": "tab:red",
    "copy_engine": "tab:orange",
    "nvls": "tab:green",
    "ace": "tab:blue",
    "ideal": "tab:gray",
}
PART_COLORS = {
    "compute": "tab:blue",
    "bubble": "lightgray",
    "tp": "tab:red",
    "cp": "tab:brown",
    "ep": "tab:pink",
    "pp": "tab:olive",
    "dp": "tab:orange",
}


def _color(kind: str) -> str:
    """A substrate's colour (:data:`KIND_COLORS`; purple for one it does not list)."""
    return KIND_COLORS.get(kind, "tab:purple")


def _rows(summary: dict[str, Any], system: str) -> list[dict[str, Any]]:
    return [r for r in summary["results"] if r["system"] == system]


def _panels(count: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``count`` panels one above the other, ``width`` by ``height`` inches each
    (and 0.8 inch for the title)."""
    fig, axes = plt.subplots(count, 1, figsize=(width, height * count + 0.8))
    return fig, list(axes) if count > 1 else [axes]


def _speedup(summary: dict[str, Any]) -> Any:
    systems = summary["systems"]
    kinds = summary["endpoints"]
    fig, axes = _panels(len(systems), 7.5, 3.0)
    width = 0.8 / len(kinds)
    for ax, system in zip(axes, systems, strict=True):
        rows = _rows(summary, system)
        for j, kind in enumerate(kinds):
            xs, ys = [], []
            for i, r in enumerate(rows):
                out = r.get("endpoints", {}).get(kind)
                x = i + j * width
                if out and out["applicable"]:
                    xs.append(x)
                    ys.append(out["speedup"])
                else:
                    ax.text(x, 1.0, "n/a", rotation=90, fontsize=6, ha="center", va="bottom")
            ax.bar(xs, ys, width, color=_color(kind))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(rows))], [r["case"] for r in rows], fontsize=7
        )
        ax.set_ylabel("speedup over best SM (x)")
        ax.set_xlabel(f"case on {system}")
        ax.set_title(system, fontsize=9)
        ax.grid(alpha=0.3)
    # the legend names every substrate in its colour, whichever panel draws its bars (a
    # substrate a system cannot run has none on that panel)
    handles = [Patch(facecolor=_color(kind), label=kind) for kind in kinds]
    finish(fig, axes[-1], "", handles=handles)
    axes[-1].set_title(systems[-1], fontsize=9)
    fig.suptitle("Substrates against the best SM configuration", fontsize=10)
    fig.tight_layout()
    return fig


def _exposed(summary: dict[str, Any]) -> Any:
    systems = summary["systems"]
    kinds = summary["endpoints"]
    fig, axes = _panels(len(systems), 9.0, 3.2)
    width = 0.8 / len(kinds)
    seen: dict[str, None] = {}  # the parts drawn, in order
    for ax, system in zip(axes, systems, strict=True):
        rows = _rows(summary, system)
        for i, r in enumerate(rows):
            for j, kind in enumerate(kinds):
                out = r.get("endpoints", {}).get(kind)
                if not out or not out["applicable"]:
                    continue
                x = i + j * width
                parts = {"compute": out["compute_time"], "bubble": out["bubble_time"]}
                parts.update(out["exposed"])
                bottom = 0.0
                for part, value in parts.items():
                    seen[part] = None
                    ax.bar(
                        x,
                        value,
                        width,
                        bottom=bottom,
                        color=PART_COLORS.get(part, "tab:purple"),
                        edgecolor=_color(kind),
                        linewidth=0.8,
                    )
                    bottom += value
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(rows))], [r["case"] for r in rows], fontsize=7
        )
        time_axis(ax.yaxis, "per GPU")
        ax.set_xlabel(f"case on {system} (bars: " + ", ".join(kinds) + ")")
        ax.set_title(system, fontsize=9)
        ax.grid(alpha=0.3)
    # the parts by fill, every panel's (a part first drawn on another panel included), then
    # the substrates by outline
    handles = [Patch(facecolor=PART_COLORS.get(p, "tab:purple"), label=p) for p in seen]
    handles += [
        Patch(facecolor="white", edgecolor=_color(kind), label=f"{kind} (outline)")
        for kind in kinds
    ]
    finish(fig, axes[-1], systems[-1], handles=handles)
    fig.suptitle("The iteration per substrate: compute, bubble, exposed communication", fontsize=10)
    fig.tight_layout()
    return fig


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """Every figure of the study, by name (matplotlib Figures; the caller closes them)."""
    return {"speedup": _speedup(summary), "exposed": _exposed(summary)}


def write_figures(out_dir: Path, summary: dict[str, Any]) -> None:
    """speedup, exposed (PNG + SVG) into ``out_dir``."""
    for name, fig in figures(summary).items():
        for suffix in ("png", "svg"):
            save_figure(fig, out_dir / f"{name}.{suffix}", dpi=150)
        plt.close(fig)
