"""The unit of a sweep column: a swept path's from the configuration schema (the quantity kind
of the field: ``npu.hbm_bandwidth`` is in B/s), a metric's from :mod:`acesim.results.units`."""

from __future__ import annotations

from pydantic import BaseModel

from ..config.experiment import RunOptions, WorkloadConfig
from ..config.quantities import quantity_kind_at
from ..config.system import SystemConfig
from ..results.units import metric_unit
from ..units import UNIT_OF_KIND
from .paths import parse_path

__all__ = ["axis_unit", "column_unit"]

#: Collective point parameters that are quantities.
_PARAM_UNITS = {"size": "B"}


def _schema_unit(model: type[BaseModel], parts: list[str | int]) -> str:
    kind = quantity_kind_at(model, parts)
    return UNIT_OF_KIND.get(kind, "") if kind is not None else ""


def axis_unit(path: str) -> str:
    """The unit of the values at a swept ``path`` (``""`` when not a quantity)."""
    try:
        parts = parse_path(path)
    except Exception:  # a path the spec checker already refused
        return ""
    head = parts[0]
    if head in _PARAM_UNITS and len(parts) == 1:
        return _PARAM_UNITS[str(head)]
    if head == "run":
        return _schema_unit(RunOptions, parts[1:])
    if head == "workload":
        return _schema_unit(WorkloadConfig, parts[1:])
    return _schema_unit(SystemConfig, parts)


def column_unit(name: str, role: str) -> str:
    """The unit of a database column of ``role`` (``axis`` or ``metric``)."""
    return axis_unit(name) if role == "axis" else metric_unit(name)
