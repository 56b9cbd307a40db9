"""A figure from a results database: one metric against one swept field, a line per group.

Numbers show with their units everywhere (axis labels, ticks, legend entries: ``npu.
hbm_bandwidth=900 GB/s``, never ``900000000000.0``); a text axis (``parallel``) is categorical,
one tick at each point, in the order the sweep listed them; the best point (least for times
and bytes, most for everything else) is marked and labelled. ``--where`` takes a quantity with
its unit for a column that has one (``npu.hbm_bandwidth=900 GB/s``), compared to 1e-9.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError, SweepError
from ..results.figure_file import save_figure
from ..units import UNIT_OF_KIND, format_eng, parse_quantity

__all__ = ["plot_results", "default_plot_path"]


def default_plot_path(x: str, y: str) -> Path:
    text = f"{y}_vs_{x}"
    return Path("".join(c if c.isalnum() or c in "-_." else "_" for c in text) + ".png")


_KIND_OF_UNIT = {unit: kind for kind, unit in UNIT_OF_KIND.items()}


def _where(df: Any, clauses: list[str], units: dict[str, str] | None = None) -> Any:
    """Rows whose column equals the value of every ``FIELD=VALUE`` clause: a number, a
    quantity with a unit where the column has one (``900 GB/s``), else text."""
    import numpy as np

    for clause in clauses:
        if "=" not in clause:
            raise ConfigError("--where", "expected FIELD=VALUE", clause)
        name, text = (s.strip() for s in clause.split("=", 1))
        if name not in df.columns:
            raise ConfigError("--where", "no such column", name)
        column = df[name]
        value = _where_number(text, (units or {}).get(name, ""), clause)
        numbers = _as_numbers(column) if value is not None else None
        if value is not None and numbers is not None:
            mask = np.isclose(numbers.to_numpy(), value, rtol=1e-9, atol=0.0)
        else:
            mask = (column.astype(str) == text).to_numpy()
        df = df[mask]
    return df


def _where_number(text: str, unit: str, clause: str) -> float | None:
    """The number a ``--where`` value stands for in the column's unit (None: text)."""
    try:
        return float(text)
    except ValueError:
        pass
    kind = _KIND_OF_UNIT.get(unit)
    if kind is None:
        return None
    try:
        return parse_quantity(text, kind, "--where")  # type: ignore[arg-type]
    except ConfigError:
        if any(c.isdigit() for c in text):
            raise ConfigError(
                "--where", f"expected a quantity in {unit} (e.g. '900 GB/s')", clause
            ) from None
        return None


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
    units = read_units(db)
    df = _where(df, where or [], units)
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
    fig = _draw(df, x, y, group_by, units=units, logx=logx, logy=logy)
    lines = len(fig.axes[0].get_lines())
    path = Path(output) if output is not None else default_plot_path(x, y)
    save_figure(fig, path, dpi=150)
    plt.close(fig)
    return path, lines


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")


def _show(value: Any, unit: str) -> str:
    """A value as a legend or label shows it: numbers with their unit (``900 GB/s``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if unit in ("", "units"):
        return f"{value:g}"
    return format_eng(float(value), unit)


def _lower_is_better(name: str, unit: str) -> bool:
    """Times and bytes are best small; rates, fractions of a peak and speedups large."""
    return unit in ("s", "B")


def _categories(df: Any, x: str) -> list[Any] | None:
    """The values of a text ``x`` column in the order the sweep listed them (None when the
    column is numeric)."""
    if _as_numbers(df[x]) is not None:
        return None
    order = df.sort_values("point")[x] if "point" in df.columns else df[x]
    return list(dict.fromkeys(order))


def _labels(df: Any, group_by: list[str], units: dict[str, str]) -> tuple[Any, list[str | None]]:
    """The groups and their legend labels (columns moving in lockstep with an earlier one,
    zip axes, add nothing to a label; numbers carry their units)."""
    named: list[str] = []
    for column in group_by:
        if not any(df.groupby(kept, dropna=False)[column].nunique(dropna=False).max() <= 1
                   for kept in ([c] for c in named)):  # fmt: skip
            named.append(column)
    groups = df.groupby(group_by, dropna=False, sort=True) if group_by else [((), df)]
    labels: list[str | None] = []
    for key, _part in groups:
        values = dict(zip(group_by, key if isinstance(key, tuple) else (key,), strict=False))
        shown = [f"{n}={_show(values[n], units.get(n, ''))}" for n in named]
        labels.append(", ".join(shown) or None)
    return groups, labels


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
    lie on top of each other stay visible; axes labelled with their units; the best point
    marked; the legend below."""
    import matplotlib.pyplot as plt

    groups, labels = _labels(df, group_by, units)
    categories = _categories(df, x)
    long_labels = max((len(t or "") for t in labels), default=0) > 38
    fig, ax = plt.subplots(figsize=(6.4, 4.6 + (0.18 * len(labels) if long_labels else 0)))
    for i, ((_key, part), label) in enumerate(zip(groups, labels, strict=True)):
        if categories is None:
            part = part.sort_values(x)
            xs = part[x]
        else:  # categorical: each value at its own position, in the sweep's order
            position = {c: k for k, c in enumerate(categories)}
            part = part.assign(_pos=part[x].map(position)).sort_values("_pos")
            xs = part["_pos"]
        ax.plot(
            xs,
            part[y],
            marker=_MARKERS[i % len(_MARKERS)],
            ls=_STYLES[(i // len(_MARKERS)) % len(_STYLES)],
            markerfacecolor="none",
            label=label,
        )
    _axes(ax, x, y, units, categories)
    _best(ax, df, x, y, units, categories)
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
            bbox_to_anchor=(0.5, -0.2 if categories else -0.16),
            ncol=1 if long_labels else 2,
            frameon=False,
        )
    fig.tight_layout()
    return fig


def _axes(ax: Any, x: str, y: str, units: dict[str, str], categories: list[Any] | None) -> None:
    """Tick formats and labels with units; a categorical x gets one tick at each point."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    for axis, name in ((ax.xaxis, x), (ax.yaxis, y)):
        unit = units.get(name, "")
        if axis is ax.xaxis and categories is not None:
            ax.set_xticks(range(len(categories)))
            ax.set_xticklabels([str(c) for c in categories], rotation=20, ha="right")
        else:
            if unit and unit not in ("1", "x", "units"):
                axis.set_major_formatter(EngFormatter(unit=unit))
            if axis is ax.xaxis:
                axis.set_major_locator(MaxNLocator(nbins=5))
        shown = {"1": "fraction", "x": "ratio"}.get(unit, unit)
        axis.set_label_text(f"{name} ({shown})" if shown else name)


def _best(
    ax: Any, df: Any, x: str, y: str, units: dict[str, str], categories: list[Any] | None
) -> None:
    """Mark and label the best point of the figure (least time or bytes, most otherwise)."""
    unit = units.get(y, "")
    low = _lower_is_better(y, unit)
    row = df.loc[df[y].idxmin() if low else df[y].idxmax()]
    xv = categories.index(row[x]) if categories is not None else row[x]
    ax.margins(x=0.08, y=0.14)  # room for the label inside the axes
    xs = range(len(categories)) if categories is not None else df[x]
    right = xv > (min(xs) + max(xs)) / 2  # label towards the middle, away from the edge
    ax.scatter([xv], [row[y]], marker="*", s=160, color="gold", edgecolors="black", zorder=5)
    text = f"best: {_show(row[y], unit)} at {x}={_show(row[x], units.get(x, ''))}"
    ax.annotate(
        text,
        (xv, row[y]),
        textcoords="offset points",
        xytext=(-9 if right else 9, 10 if low else -16),
        ha="right" if right else "left",
        fontsize=7,
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.6", "alpha": 0.9},
        zorder=6,
    )
