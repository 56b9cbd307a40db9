"""Pydantic field types for physical quantities (parsed by :mod:`acesim.units`), and the
quantity kind of a field at a dotted path of a document (:func:`quantity_kind_at`)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, PlainSerializer, ValidationInfo

from ..units import Kind, parse_quantity


def _parser(kind: Kind) -> Callable[[Any, ValidationInfo], float]:
    def parse(value: Any, info: ValidationInfo) -> float:
        return parse_quantity(value, kind, info.field_name or "value")

    parse.acesim_kind = kind  # type: ignore[attr-defined]  # read by config.reference
    return parse


_as_float = PlainSerializer(lambda v: float(v), return_type=float)

#: bytes
Bytes = Annotated[float, BeforeValidator(_parser("size")), _as_float]
#: bytes per second (decimal prefixes: 1 GB/s = 1e9 B/s)
BytesPerSecond = Annotated[float, BeforeValidator(_parser("rate")), _as_float]
#: seconds
Seconds = Annotated[float, BeforeValidator(_parser("time")), _as_float]
#: floating-point operations per second
FlopsPerSecond = Annotated[float, BeforeValidator(_parser("flop_rate")), _as_float]
#: watts
Watts = Annotated[float, BeforeValidator(_parser("power")), _as_float]
#: joules per byte (``pJ/bit`` x 8)
JoulesPerByte = Annotated[float, BeforeValidator(_parser("energy_per_byte")), _as_float]
#: joules per floating-point operation
JoulesPerFlop = Annotated[float, BeforeValidator(_parser("energy_per_flop")), _as_float]


def _meta_kind(metadata: Sequence[Any]) -> Kind | None:
    for meta in metadata:
        kind = getattr(getattr(meta, "func", None), "acesim_kind", None)
        if kind is not None:
            return typing.cast(Kind, kind)
    return None


def field_kind(model: type[BaseModel], name: str) -> Kind | None:
    """The quantity kind of ``model``'s field ``name`` itself (None: not a physical
    quantity; a list or table of quantities is not one)."""
    info = model.model_fields.get(name)
    if info is None:
        return None
    return _meta_kind(info.metadata) or _kind_of(info.annotation, ())


def quantity_kind_at(model: type[BaseModel], parts: Sequence[str | int]) -> Kind | None:
    """The quantity kind of the value at ``parts`` (a parsed dotted path: ``["npu",
    "hbm_bandwidth"]``, ``["network", "dimensions", 0, "link_latency"]``, ``["npu",
    "matrix_flops", "fp16"]``, ``["reproduction", "sram_sizes", 1]``) in a document of
    ``model``; None when it is not a physical quantity or not a field. Tables a model holds by
    name (``endpoint.<kind>``) are found through the model's ``section_model(name)``."""
    return _kind_of(model, tuple(parts))


def _kind_of(annotation: Any, parts: tuple[str | int, ...]) -> Kind | None:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        kind = _meta_kind(annotation.__metadata__)
        if kind is not None and not parts:
            return kind
        return _kind_of(args[0], parts)
    if origin is typing.Union or origin is types.UnionType:
        for option in args:
            kind = _kind_of(option, parts)
            if kind is not None:
                return kind
        return None
    if not parts:
        return None
    head, rest = parts[0], parts[1:]
    if origin in (list, tuple):
        return _kind_of(args[0], rest) if args and isinstance(head, int) else None
    if origin is dict:
        return _kind_of(args[1], rest) if len(args) == 2 and isinstance(head, str) else None
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    if not isinstance(head, str):
        return None
    info = annotation.model_fields.get(head)
    if info is not None:
        kind = _meta_kind(info.metadata)
        if kind is not None and not rest:
            return kind
        return _kind_of(info.annotation, rest)
    section = getattr(annotation, "section_model", None)
    found = section(head) if callable(section) else None
    return _kind_of(found, rest) if found is not None else None
