"""The unit of a sweep column: a swept path's from the configuration schema (the quantity kind
of the field: ``npu.hbm_bandwidth`` is in B/s), a metric's from :mod:`acesim.results.units`."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from ..config.experiment import RunOptions, WorkloadConfig
from ..config.system import SystemConfig
from ..results.units import metric_unit
from ..units import UNIT_OF_KIND
from .paths import parse_path

__all__ = ["axis_unit", "column_unit"]

#: Collective point parameters that are quantities.
_PARAM_UNITS = {"size": "B"}


def _kind(model: type[BaseModel], name: str) -> str | None:
    info = model.model_fields.get(name)
    if info is None:
        return None
    for meta in info.metadata:
        kind = getattr(getattr(meta, "func", None), "acesim_kind", None)
        if kind is not None:
            return str(kind)
    return None


def _models(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    if origin in (list, tuple, dict):
        args = typing.get_args(annotation)
        return _models(args[-1]) if args else []
    return [annotation]


def _schema_unit(model: type[BaseModel], parts: list[str | int]) -> str:
    current: list[Any] = [model]
    for i, part in enumerate(parts):
        if isinstance(part, int):
            continue
        last = i == len(parts) - 1 or all(isinstance(p, int) for p in parts[i + 1 :])
        nxt: list[Any] = []
        for m in current:
            if not (isinstance(m, type) and issubclass(m, BaseModel)):
                continue
            if last:
                kind = _kind(m, part)
                if kind is not None:
                    return UNIT_OF_KIND.get(kind, "")
            if part in m.model_fields:
                nxt += _models(m.model_fields[part].annotation)
            else:
                section = getattr(m, "section_model", None)
                found = section(part) if callable(section) else None
                if found is not None:
                    nxt.append(found)
        current = nxt
    return ""


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
