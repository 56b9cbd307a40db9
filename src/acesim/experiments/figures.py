"""Figures of the paper reproduction (matplotlib, Agg backend), each as PNG and SVG."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .membw import MembwRow, plot_membw  # noqa: E402


def _save(fig: Any, out_dir: Path, name: str) -> None:
    fig.tight_layout()
    for suffix in ("png", "svg"):
        fig.savefig(out_dir / f"{name}.{suffix}", dpi=120)
    plt.close(fig)


def write_figures(
    out_dir: Path,
    cases: list[Any],
    membw: list[MembwRow],
    summary: dict[str, Any],
    results: Mapping[tuple[Any, ...], Any],
) -> None:
    """speedup, net_util, membw, breakdown, sram, splits (PNG + SVG) into ``out_dir``."""
    workloads = sorted({c.workload for c in cases})
    sizes = sorted({c.npus for c in cases})
    width = 0.8 / max(len(sizes), 1)

    # 1. speedup per workload and size
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, n in enumerate(sizes):
        xs, ys = [], []
        for i, w in enumerate(workloads):
            match = [c for c in cases if c.workload == w and c.npus == n]
            if match:
                xs.append(i + j * width)
                ys.append(match[0].speedup)
        ax.bar(xs, ys, width, label=f"{n} NPUs")
    for i, w in enumerate(workloads):
        paper = summary["paper"]["speedup_avg"].get(w)
        if paper:
            ax.hlines(paper, i - width / 2, i + 0.8 - width / 2, colors="k", linestyles="--")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))], workloads)
    ax.set_ylabel("ACE speedup over the best baseline")
    ax.set_title("Iteration-time speedup (dashed: paper's average)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.legend(fontsize=8)
    _save(fig, out_dir, "speedup")

    # 2. effective network utilisation per endpoint
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{c.workload}\n{c.npus}" for c in cases]
    kinds: list[tuple[str, Callable[[Any], Any]]] = [
        ("best baseline", lambda c: c.best),
        ("ACE", lambda c: c.ace),
        ("ideal", lambda c: c.ideal),
    ]
    for k, (name, pick) in enumerate(kinds):
        ax.bar(
            [i + k * 0.27 for i in range(len(cases))],
            [100 * pick(c).net_util_effective for c in cases],
            0.27,
            label=name,
        )
    ax.set_xticks([i + 0.27 for i in range(len(cases))], labels, fontsize=7)
    ax.set_ylabel("effective network utilisation (%)")
    ax.set_title("Network utilisation while communication is in flight")
    ax.legend(fontsize=8)
    _save(fig, out_dir, "net_util")

    # 3. HBM bandwidth needed against network bandwidth
    for suffix in ("png", "svg"):
        plot_membw(
            membw,
            str(out_dir / f"membw.{suffix}"),
            title="HBM bandwidth needed to drive the network (all-reduce)",
        )

    # 4. iteration-time breakdown at the middle size
    mid = sizes[len(sizes) // 2]
    fig, ax = plt.subplots(figsize=(8, 4))
    bars, names = [], []
    for c in [c for c in cases if c.npus == mid]:
        for name, r in (
            ("base", c.best),
            ("ACE", c.ace),
            ("ideal", c.ideal),
            ("serial", c.no_overlap),
        ):
            bars.append(r)
            names.append(f"{c.workload}\n{name}")
    comp = [1e3 * (r.iteration_time - r.exposed_comm) for r in bars]
    exposed = [1e3 * r.exposed_comm for r in bars]
    norm = [b.iteration_time for b in bars]
    ax.bar(
        range(len(bars)),
        [c / (1e3 * n) for c, n in zip(comp, norm, strict=True)],
        label="compute busy",
    )
    ax.bar(
        range(len(bars)),
        [e / (1e3 * n) for e, n in zip(exposed, norm, strict=True)],
        bottom=[c / (1e3 * n) for c, n in zip(comp, norm, strict=True)],
        label="exposed communication",
    )
    ax.set_xticks(range(len(bars)), names, fontsize=7)
    ax.set_ylabel("fraction of the iteration")
    ax.set_title(f"Iteration-time breakdown, {mid} NPUs")
    ax.legend(fontsize=8)
    _save(fig, out_dir, "breakdown")

    # 5. SRAM sensitivity
    fig, ax = plt.subplots(figsize=(6, 4))
    rows = summary.get("sram_sensitivity", [])
    for w in workloads:
        pts = [(r["sram"], r["iteration_time"]) for r in rows if r["workload"] == w]
        match = [c for c in cases if c.workload == w and c.npus == mid]
        if pts and match:
            base = match[0].best.iteration_time
            ax.plot([p[0] / 2**20 for p in pts], [base / p[1] for p in pts], marker="o", label=w)
    if not rows:
        ax.text(0.5, 0.5, "no SRAM sensitivity runs", ha="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=8)
    ax.set_xlabel("ACE SRAM (MiB)")
    ax.set_ylabel("speedup over the best baseline")
    ax.set_title(f"ACE SRAM-size sensitivity, {mid} NPUs")
    ax.axhline(1.0, color="grey", lw=0.8)
    _save(fig, out_dir, "sram")

    # 6. baseline split sweep: the compute/communication trade-off
    fig, ax = plt.subplots(figsize=(7, 4))
    for w in workloads:
        match = [c for c in cases if c.workload == w and c.npus == mid]
        if not match:
            continue
        c = match[0]
        units = [b.info.settings.get("comm_units") for b in c.baselines]
        ax.plot(
            units,
            [b.iteration_time / c.ideal.iteration_time for b in c.baselines],
            marker="o",
            label=f"{w}: iteration / ideal",
        )
        ax.plot(
            units,
            [b.compute_slowdown for b in c.baselines],
            ls="--",
            marker=".",
            label=f"{w}: compute slowdown",
        )
    ax.set_xlabel("compute units (and HBM share) given to collectives")
    ax.set_ylabel("ratio")
    ax.set_title(f"Baseline splits, {mid} NPUs")
    ax.legend(fontsize=7)
    _save(fig, out_dir, "splits")
