"""What a worker process (local or Dask) does with one resolved point.

:func:`execute_point` never raises for a failing point: the error becomes part of its outcome,
so one bad point cannot stop a sweep or kill a pool. It imports only what the point's kind
needs, so that a Dask worker with acesim installed needs nothing else.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any


def flatten_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted keys; values become float/int/str/None (lists as JSON).

    A float that is not finite (NaN, inf) becomes None: the database stores it as NULL.
    """
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten_metrics(value, name))
            continue
        if hasattr(value, "item") and not isinstance(value, str | bytes):
            value = value.item()  # numpy scalars
        if value is None or isinstance(value, bool | int | str):
            out[name] = value
        elif isinstance(value, float):
            out[name] = value if math.isfinite(value) else None
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(list(value), default=str)
        else:
            out[name] = str(value)
    return out


def run_point_function() -> Any:
    """The function that runs points (:func:`acesim.runs.point.run_point`)."""
    from ..runs.point import run_point

    return run_point


def execute_point(config: dict[str, Any]) -> dict[str, Any]:
    """Run one point; returns {status, metrics, error, wall_time, version}, never raises."""
    from ..version import __version__

    start = time.perf_counter()
    try:
        metrics = run_point_function()(config)
        outcome: dict[str, Any] = {
            "status": "ok",
            "metrics": flatten_metrics(metrics),
            "error": None,
        }
    except Exception as exc:  # a failing point is a result, not a crash
        outcome = {"status": "error", "metrics": {}, "error": f"{type(exc).__name__}: {exc}"}
    outcome["wall_time"] = time.perf_counter() - start
    outcome["version"] = __version__
    return outcome


def error_outcome(message: str, status: str = "error") -> dict[str, Any]:
    """The outcome of a point that could not be executed at all: ``error`` (a worker died)
    or ``refused`` (an invalid value, a configuration that does not divide or fit: the
    point's own answer, not a failure)."""
    from ..version import __version__

    return {
        "status": status,
        "metrics": {},
        "error": message,
        "wall_time": 0.0,
        "version": __version__,
    }
