"""Figures of the paper reproduction (matplotlib, Agg backend), each as PNG and SVG.

:func:`figures` builds them (tests inspect the axes), :func:`write_figures` saves them. Every
axis is labelled with its unit; colours mean one thing per figure (network size in the speedup
figure, endpoint in the utilisation and breakdown figures, workload in the SRAM and split
figures); legends sit outside the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..results.figure_file import save_figure  # noqa: E402
from .membw import MembwRow, membw_figure  # noqa: E402
from .plotting import color_of, finish, plain_numbers  # noqa: E402

__all__ = ["figures", "write_figures", "sensitivity_figure", "FIGURES"]

#: Names of the figures, in the order they are written.
FIGURES = ("speedup", "net_util", "membw", "breakdown", "sram", "splits")
#: Written besides them when the summary has the sensitivity study.
SENSITIVITY_FIGURE = "sensitivity"
ENDPOINT_COLORS = {"best baseline": "tab:red", "ACE": "tab:blue", "ideal": "tab:gray"}


def _speedup(cases: list[Any], summary: dict[str, Any]) -> Any:
    workloads = sorted({c.workload for c in cases})
    sizes = sorted({c.npus for c in cases})
    width = 0.8 / max(len(sizes), 1)
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for j, n in enumerate(sizes):
        xs, ys = [], []
        for i, w in enumerate(workloads):
            match = [c for c in cases if c.workload == w and c.npus == n]
            if match:
                xs.append(i + j * width)
                ys.append(match[0].speedup)
        ax.bar(xs, ys, width, color=cmap(j / max(len(sizes) - 1, 1)), label=f"{n} NPUs")
    for i, w in enumerate(workloads):
        paper = summary["paper"]["speedup_avg"].get(w)
        if paper:
            ax.hlines(paper, i - width / 2, i + 0.8 - width / 2, colors="k", linestyles="--")
    ax.plot([], [], "k--", label="paper's average")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))], workloads)
    ax.set_xlabel("workload (bars: network size)")
    ax.set_ylabel("ACE speedup over the best baseline (x)")
    ax.axhline(1.0, color="grey", lw=0.8)
    finish(fig, ax, "Iteration-time speedup of ACE")
    return fig


def _net_util(cases: list[Any]) -> Any:
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    labels = [f"{c.workload}\n{c.npus}" for c in cases]
    kinds = (("best baseline", "best"), ("ACE", "ace"), ("ideal", "ideal"))
    for k, (name, attr) in enumerate(kinds):
        ax.bar(
            [i + k * 0.27 for i in range(len(cases))],
            [100 * getattr(c, attr).net_util_effective for c in cases],
            0.27,
            color=ENDPOINT_COLORS[name],
            label=name,
        )
    ax.set_xticks([i + 0.27 for i in range(len(cases))], labels, fontsize=7)
    ax.set_xlabel("workload and NPUs")
    ax.set_ylabel("effective network utilisation (%)")
    finish(fig, ax, "Network utilisation while communication is in flight")
    return fig


def _breakdown(cases: list[Any], mid: int) -> Any:
    # Absolute times, normalised per workload to its best baseline: a bar shorter than 1 is
    # a faster iteration.
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    names: list[str] = []
    x = 0
    for c in [c for c in cases if c.npus == mid]:
        ref = c.best.iteration_time
        for name, r in (
            ("best baseline", c.best),
            ("ACE", c.ace),
            ("ideal", c.ideal),
            ("no overlap", c.no_overlap),
        ):
            busy = (r.iteration_time - r.exposed_comm) / ref
            exposed = r.exposed_comm / ref
            color = ENDPOINT_COLORS.get(name, "tab:olive")
            ax.bar(x, busy, color=color, label=name if len(names) < 4 else None)
            ax.bar(x, exposed, bottom=busy, color=color, alpha=0.35, hatch="//")
            names.append(f"{c.workload}\n{name}")
            x += 1
    from matplotlib.patches import Patch

    handles, labels = ax.get_legend_handles_labels()
    handles.append(Patch(facecolor="white", edgecolor="k", hatch="//"))
    labels.append("exposed communication (hatched)")
    ax.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.42),
              ncol=3, frameon=False)  # fmt: skip
    ax.set_xticks(range(len(names)), names, fontsize=6, rotation=30, ha="right")
    ax.set_xlabel("workload and endpoint")
    ax.set_ylabel("iteration time / best baseline's (x)")
    ax.axhline(1.0, color="grey", lw=0.8)
    finish(fig, ax, f"Iteration time: compute busy and exposed communication, {mid} NPUs",
           legend=False)  # fmt: skip
    return fig


def _sram(cases: list[Any], summary: dict[str, Any], mid: int) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    rows = summary.get("sram_sensitivity", [])
    workloads = sorted({c.workload for c in cases})
    for i, w in enumerate(workloads):
        pts = [(r["sram"], r["iteration_time"]) for r in rows if r["workload"] == w]
        match = [c for c in cases if c.workload == w and c.npus == mid]
        if pts and match:
            base = match[0].best.iteration_time
            ax.plot(
                [p[0] / 2**20 for p in pts],
                [base / p[1] for p in pts],
                marker="o",
                color=color_of(w, i),
                label=w,
            )
    if rows:
        ax.set_xscale("log", base=2)
        plain_numbers(ax.xaxis)
    else:
        ax.text(0.5, 0.5, "no SRAM sensitivity runs", ha="center", transform=ax.transAxes)
    ax.set_xlabel("ACE SRAM (MiB)")
    ax.set_ylabel("speedup over the best baseline (x)")
    ax.axhline(1.0, color="grey", lw=0.8)
    finish(fig, ax, f"ACE SRAM-size sensitivity, {mid} NPUs")
    return fig


def _splits(cases: list[Any], mid: int) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    workloads = sorted({c.workload for c in cases})
    for i, w in enumerate(workloads):
        match = [c for c in cases if c.workload == w and c.npus == mid]
        if not match:
            continue
        c = match[0]
        units = [b.info.settings.get("comm_units") for b in c.baselines]
        color = color_of(w, i)
        ax.plot(
            units,
            [b.iteration_time / c.ideal.iteration_time for b in c.baselines],
            marker="o",
            color=color,
            label=f"{w}: iteration / ideal",
        )
        ax.plot(
            units,
            [b.compute_slowdown for b in c.baselines],
            ls="--",
            marker=".",
            color=color,
            label=f"{w}: compute slowdown",
        )
    ax.set_xlabel("compute units given to collectives (units; HBM priority grows with them)")
    ax.set_ylabel("ratio (x)")
    finish(fig, ax, f"Baseline splits: the compute/communication trade-off, {mid} NPUs")
    return fig


def sensitivity_figure(ranges: Mapping[str, Any], title: str = "") -> Any:
    """Per headline figure (one row each): its range over the sensitivity variants (a bar),
    the shipped value (a dot) and the paper's (a cross), each as a ratio to the paper's value
    on a log axis, so figures of different scales share it; the shipped value is written
    beside its dot."""
    rows = [(label, r) for label, r in ranges.items() if r]
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rows) + 1.6))
    for i, (_label, r) in enumerate(rows):
        y = len(rows) - 1 - i
        paper = r["paper"]
        ax.plot(
            [r["low"] / paper, r["high"] / paper],
            [y, y],
            color="tab:blue",
            lw=5,
            alpha=0.45,
            solid_capstyle="butt",
            label="range over the assumptions" if i == 0 else None,
        )
        if r["shipped"] is not None:
            ax.plot(
                r["shipped"] / paper,
                y,
                "o",
                color="tab:blue",
                label="as shipped" if i == 0 else None,
            )
            # the values in a column right of the axes: beside the bar they ran over the
            # paper's cross when the range was near it
            ax.annotate(
                f"{r['shipped']:.2f} ({r['low']:.2f}-{r['high']:.2f}), paper {paper:.2f}",
                (1.0, y),
                xycoords=("axes fraction", "data"),
                xytext=(6, -3),
                textcoords="offset points",
                fontsize=7,
            )
        ax.plot(1.0, y, "kx", label="paper" if i == 0 else None)
    ax.set_xscale("log")
    plain_numbers(ax.xaxis, minor=True)
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)], fontsize=8)
    ax.set_xlabel("acesim / paper (ratio, log scale; 1 = the paper's value)")
    ax.set_ylabel("headline figure (x)")
    ax.axvline(1.0, color="grey", lw=0.8)
    finish(fig, ax, title or "Headline figures: shipped, range over the assumptions, paper")
    return fig


def figures(cases: list[Any], membw: list[MembwRow], summary: dict[str, Any]) -> dict[str, Any]:
    """Every figure of the reproduction, by name (matplotlib Figures; the caller closes them);
    ``sensitivity`` only when the summary has the study."""
    sizes = sorted({c.npus for c in cases})
    mid = sizes[len(sizes) // 2]
    extra = {}
    study = summary.get("sensitivity")
    if study:
        extra["sensitivity"] = sensitivity_figure(study["ranges"])
    return {
        "speedup": _speedup(cases, summary),
        "net_util": _net_util(cases),
        "membw": membw_figure(
            membw, title="HBM bandwidth needed to drive the network (all-reduce)"
        ),
        "breakdown": _breakdown(cases, mid),
        "sram": _sram(cases, summary, mid),
        "splits": _splits(cases, mid),
        **extra,
    }


def write_figures(
    out_dir: Path,
    cases: list[Any],
    membw: list[MembwRow],
    summary: dict[str, Any],
    results: Mapping[tuple[Any, ...], Any] | None = None,
) -> None:
    """speedup, net_util, membw, breakdown, sram, splits (PNG + SVG) into ``out_dir``."""
    for name, fig in figures(cases, membw, summary).items():
        for suffix in ("png", "svg"):
            save_figure(fig, out_dir / f"{name}.{suffix}", dpi=150)
        plt.close(fig)
