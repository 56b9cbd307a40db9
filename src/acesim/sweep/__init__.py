"""Design-space sweeps: a base point plus grid/zip axes, run on local processes or a Dask
cluster, one SQLite row per point (see docs/sweeps.md for the spec format).

Python API::

    from acesim.sweep import run_sweep, load_results
    summary = run_sweep("examples/sweep_collective_hbm.toml", db="hbm.sqlite", workers=4)
    df = load_results("hbm.sqlite")        # pandas DataFrame, one row per point
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .runner import SweepSummary, run_sweep
from .spec import Axis, Point, SweepSpec, config_hash, load_spec
from .store import read_table, read_units

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = [
    "run_sweep",
    "load_results",
    "load_spec",
    "SweepSpec",
    "SweepSummary",
    "Axis",
    "Point",
    "config_hash",
]


def load_results(db: str | Path, *, config: bool = False) -> pandas.DataFrame:
    """The rows of a results database as a pandas DataFrame.

    Columns: ``status``, the swept paths, the metrics, ``error``, ``wall_time``, ``version``,
    ``sweep``, ``point``, ``hash``, ``finished_at`` (and ``config``, the resolved configuration
    as JSON, when ``config=True``). Rows are in sweep/point order. Numbers are in SI base units;
    ``frame.attrs["units"]`` maps each column to its unit (``B/s``, ``s``, ``1`` for fractions,
    ``x`` for ratios, ``""`` for text).
    """
    import pandas as pd

    columns, rows, _ = read_table(db, config=config)
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame.attrs["units"] = read_units(db)  # column -> unit ("" for text and counts)
    return frame
