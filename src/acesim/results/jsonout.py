"""Strict JSON (RFC 8259) for every result acesim writes: no ``NaN``/``Infinity`` tokens.

A non-finite number in a result is a model failure; :func:`dumps` refuses it with a
:class:`~acesim.errors.SimulationError` naming where it is (``endpoints.ace.best.
iteration_time``) instead of writing a token that strict parsers reject.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import SimulationError

__all__ = ["dumps", "first_non_finite"]


def first_non_finite(value: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite float in ``value`` (None if none)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "value")
    if isinstance(value, dict):
        for key, item in value.items():
            found = first_non_finite(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = first_non_finite(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def dumps(payload: Any, **options: Any) -> str:
    """``json.dumps`` with ``allow_nan=False``; a non-finite number is a SimulationError."""
    where = first_non_finite(payload)
    if where is not None:
        raise SimulationError(f"the result has a non-finite number at {where}; nothing written")
    return json.dumps(payload, allow_nan=False, **options)
