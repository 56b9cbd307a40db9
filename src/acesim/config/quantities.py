"""Pydantic field types for physical quantities (parsed by :mod:`acesim.units`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo

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
