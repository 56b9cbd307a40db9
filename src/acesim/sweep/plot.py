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
    from .store import read_table

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
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = df.groupby(group_by, dropna=False, sort=True) if group_by else [((), df)]
    lines = 0
    for key, part in groups:
        values = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{n}={v}" for n, v in zip(group_by, values, strict=False)) or None
        part = part.sort_values(x)
        ax.plot(part[x], part[y], marker="o", label=label)
        lines += 1
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    sweeps = sorted(str(s) for s in df["sweep"].dropna().unique())
    ax.set_title(f"{y} vs {x}" + (f" ({', '.join(sweeps)})" if sweeps else ""))
    ax.grid(True, alpha=0.3)
    if lines > 1 or (lines == 1 and group_by):
        ax.legend(fontsize="small")
    path = Path(output) if output is not None else default_plot_path(x, y)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path, lines
