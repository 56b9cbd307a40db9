"""A figure from a results database: one metric against one swept field, a line per group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError, SweepError

__all__ = ["plot_results", "default_plot_path"]


def default_plot_path(x: str, y: str) -> Path:
    text = f"{y}_vs_{x}"
    return Path("".join(c if c.isalnum() or c in "-_." else "_" for c in text) + ".png")


def _where(df: Any, clauses: list[str]) -> Any:
    for clause in clauses:
        if "=" not in clause:
            raise ConfigError("--where", "expected FIELD=VALUE", clause)
        name, text = (s.strip() for s in clause.split("=", 1))
        if name not in df.columns:
            raise ConfigError("--where", "no such column", name)
        column = df[name]
        try:
            value: Any = float(text)
            mask = column.astype(float) == value
        except (TypeError, ValueError):
            mask = column.astype(str) == text
        df = df[mask]
    return df


_NOT_FINITE = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def _as_numbers(column: Any) -> Any | None:
    """``column`` as floats when every value is a number, NULL or a non-finite number stored as
    text by earlier acesim versions (``'nan'``, ``'inf'``); None when it holds other text."""
    import pandas as pd

    numbers = pd.to_numeric(column, errors="coerce")
    text = column.map(lambda v: isinstance(v, str) and v.strip().lower() in _NOT_FINITE)
    if (column.notna() & numbers.isna() & ~text).any():
        return None
    return numbers.astype(float)


def _plottable(df: Any, names: list[str]) -> tuple[Any, int]:
    """Rows whose ``names`` columns hold finite numbers (or, for text columns, any value), the
    numeric columns as floats; and how many rows were dropped."""
    import numpy as np

    keep = np.ones(len(df), dtype=bool)
    converted: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        numbers = _as_numbers(df[name])
        if numbers is None:
            keep &= df[name].notna().to_numpy()
        else:
            keep &= np.isfinite(numbers.to_numpy())
            converted[name] = numbers
    df = df.assign(**converted)[keep]
    return df, int((~keep).sum())


def plot_results(
    db: str | Path,
    x: str,
    y: str,
    *,
    hue: str | None = None,
    output: str | Path | None = None,
    where: list[str] | None = None,
    logx: bool = False,
    logy: bool = False,
    notes: list[str] | None = None,
) -> tuple[Path, int]:
    """Draw ``y`` against ``x`` (successful points only) and save it; returns (path, lines).

    Points are grouped by ``hue`` and by every other swept column that varies, so each line has
    one value of everything but ``x``. ``where`` filters rows (``"endpoint.kind=ace"``). Rows
    whose ``x`` or ``y`` is NULL, NaN or infinite are left out; ``notes``, when given, gets a
    line saying how many.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import load_results
    from .store import read_table, read_units

    _, _, roles = read_table(db)
    df = load_results(db)
    df = df[df["status"] == "ok"]
    for flag, name in (("--x", x), ("--y", y), ("--hue", hue)):
        if name is not None and name not in df.columns:
            known = ", ".join(c for c in roles)
            raise ConfigError(
                flag, "no such column in the database", name, hint=f"columns: {known}"
            )
    df = _where(df, where or [])
    if df.empty:
        raise SweepError(f"{db}: no successful points to plot (after --where)")
    df, dropped = _plottable(df, [x, y])
    if dropped and notes is not None:
        notes.append(
            f"left out {dropped} point{'s' if dropped != 1 else ''} whose {x} or {y} is "
            "missing, NaN or infinite"
        )
    if df.empty:
        raise SweepError(
            f"{db}: no point to plot: {x} or {y} is missing, NaN or infinite in every "
            "successful point (after --where)"
        )
    axes = [c for c, r in roles.items() if r == "axis" and c in df.columns and c not in (x, hue)]
    group_by = ([hue] if hue else []) + [c for c in axes if df[c].nunique(dropna=False) > 1]
    fig = _draw(df, x, y, group_by, units=read_units(db), logx=logx, logy=logy)
    lines = len(fig.axes[0].get_lines())
    path = Path(output) if output is not None else default_plot_path(x, y)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path, lines


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")


def _draw(
    df: Any,
    x: str,
    y: str,
    group_by: list[str],
    *,
    units: dict[str, str],
    logx: bool,
    logy: bool,
) -> Any:
    """The figure: one line per group, each with its own marker and dash so that lines that
    lie on top of each other stay visible; axes labelled with their units; the legend below."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    # Columns that move in lockstep with an earlier one (zip axes) add nothing to a label.
    named: list[str] = []
    for column in group_by:
        if not any(df.groupby(kept, dropna=False)[column].nunique(dropna=False).max() <= 1
                   for kept in ([c] for c in named)):  # fmt: skip
            named.append(column)
    groups = df.groupby(group_by, dropna=False, sort=True) if group_by else [((), df)]
    labels = []
    for key, _part in groups:
        values = dict(zip(group_by, key if isinstance(key, tuple) else (key,), strict=False))
        labels.append(", ".join(f"{n}={values[n]}" for n in named) or None)
    long_labels = max((len(t or "") for t in labels), default=0) > 38
    fig, ax = plt.subplots(figsize=(6.4, 4.6 + (0.18 * len(labels) if long_labels else 0)))
    for i, ((_key, part), label) in enumerate(zip(groups, labels, strict=True)):
        part = part.sort_values(x)
        ax.plot(
            part[x],
            part[y],
            marker=_MARKERS[i % len(_MARKERS)],
            ls=_STYLES[(i // len(_MARKERS)) % len(_STYLES)],
            markerfacecolor="none",
            label=label,
        )
    for axis, name in ((ax.xaxis, x), (ax.yaxis, y)):
        unit = units.get(name, "")
        if unit and unit not in ("1", "x", "units"):
            axis.set_major_formatter(EngFormatter(unit=unit))
        if axis is ax.xaxis:
            axis.set_major_locator(MaxNLocator(nbins=5))
        shown = {"1": "fraction", "x": "ratio"}.get(unit, unit)
        axis.set_label_text(f"{name} ({shown})" if shown else name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    sweeps = sorted(str(s) for s in df["sweep"].dropna().unique())
    ax.set_title(f"{y} vs {x}" + (f" ({', '.join(sweeps)})" if sweeps else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    if len(ax.get_lines()) > 1 or (len(ax.get_lines()) == 1 and group_by):
        ax.legend(
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=1 if long_labels else 2,
            frameon=False,
        )
    fig.tight_layout()
    return fig
