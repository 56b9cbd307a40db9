"""Attribute names and typed access to Chakra ``AttributeProto`` values.

Chakra nodes carry their parameters as a repeated ``AttributeProto`` (a name and one value of a
oneof). The names and value kinds below are the ones ASTRA-sim 2.0's Chakra feeder reads
(``is_cpu_op`` bool, ``num_ops`` int64, ``tensor_size`` uint64, ``comm_type`` int64,
``comm_size`` int64, ``comm_src``/``comm_dst``/``comm_tag`` int32, ``involved_dim`` bool list,
``pg_name`` string); the writer uses exactly those kinds, because that feeder's older versions
read one fixed oneof member and see 0 in any other. The reader is lenient: any integer kind (or
an integral float) is accepted where an integer is expected, as Chakra's own generators do not
all agree (``comm_size`` is written as uint64 by Chakra's generator, read as int64 by the feeder).

``acesim_*`` attributes are acesim's own, ignored by ASTRA-sim: they keep what the standard
fields cannot hold exactly (fractional FLOPs, bytes, sub-microsecond durations, the acesim size
convention) and the report labels, so that a Graph survives a round trip.
"""

from __future__ import annotations

import math
from typing import Any

from ...errors import TraceError
from . import schema

# Standard Chakra / ASTRA-sim attribute names.
IS_CPU_OP = "is_cpu_op"
NUM_OPS = "num_ops"
TENSOR_SIZE = "tensor_size"
COMM_TYPE = "comm_type"
COMM_SIZE = "comm_size"
COMM_SRC = "comm_src"
COMM_DST = "comm_dst"
COMM_TAG = "comm_tag"
INVOLVED_DIM = "involved_dim"
PG_NAME = "pg_name"

# acesim's own attributes.
A_FLOPS = "acesim_flops"
A_HBM_BYTES = "acesim_hbm_bytes"
A_DURATION = "acesim_duration"
A_DURATION_DERIVED = "acesim_duration_derived"
A_BLOCKS = "acesim_blocks"
A_KERNELS = "acesim_kernels"
A_SIZE = "acesim_size"
A_LAYER = "acesim_layer"
A_ITERATION = "acesim_iteration"
A_PASS = "acesim_pass"
A_BLOCKING = "acesim_blocking"
A_PRIORITY = "acesim_priority"
A_GROUP = "acesim_group"
A_GRAPH_NAME = "acesim_name"
A_GRAPH_ITERATIONS = "acesim_iterations"
A_META_PREFIX = "acesim_meta."

_INT_KINDS = frozenset(
    f"{k}_val"
    for k in ("int32", "int64", "uint32", "uint64", "sint32", "sint64")
    + ("fixed32", "fixed64", "sfixed32", "sfixed64")
)
_FLOAT_KINDS = frozenset({"double_val", "float_val"})
_INT_LISTS = frozenset(k.replace("_val", "_list") for k in _INT_KINDS)


class AttrReader:
    """Typed, lenient access to one node's attributes, with errors naming file and node."""

    def __init__(self, attrs: Any, location: str, node: str):
        self.by_name: dict[str, Any] = {}
        for attr in attrs:  # a repeated name: the last wins, as in ASTRA-sim's feeder
            self.by_name[attr.name] = attr
        self.location = location
        self.node = node

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def _fail(self, name: str, rule: str, kind: str | None) -> TraceError:
        return TraceError(
            f"attribute {name!r} {rule}, got {kind or 'no value'}",
            location=self.location,
            field=self.node,
        )

    def _value(self, name: str) -> tuple[str | None, Any]:
        attr = self.by_name[name]
        kind = attr.WhichOneof("value")
        return kind, (getattr(attr, kind) if kind else None)

    def as_int(self, name: str, default: int | None = None) -> int | None:
        if name not in self.by_name:
            return default
        kind, value = self._value(name)
        if kind is None:
            return 0
        if kind in _INT_KINDS or kind == "bool_val":
            return int(value)
        if kind in _FLOAT_KINDS and math.isfinite(value) and value == int(value):
            return int(value)
        raise self._fail(name, "must be an integer", kind)

    def as_float(self, name: str) -> float | None:
        if name not in self.by_name:
            return None
        kind, value = self._value(name)
        if kind is None:
            return 0.0
        if (kind in _INT_KINDS or kind in _FLOAT_KINDS) and math.isfinite(value):
            return float(value)
        raise self._fail(name, "must be a finite number", kind)

    def as_bool(self, name: str, default: bool = False) -> bool:
        if name not in self.by_name:
            return default
        kind, value = self._value(name)
        if kind is None:
            return False
        if kind == "bool_val" or kind in _INT_KINDS:
            return bool(value)
        raise self._fail(name, "must be a bool", kind)

    def as_str(self, name: str) -> str | None:
        if name not in self.by_name:
            return None
        kind, value = self._value(name)
        if kind is None:
            return ""
        if kind == "string_val":
            return str(value)
        if kind in _INT_KINDS:
            return str(value)
        raise self._fail(name, "must be a string", kind)

    def as_bools(self, name: str) -> list[bool] | None:
        if name not in self.by_name:
            return None
        kind, value = self._value(name)
        if kind == "bool_list" or kind in _INT_LISTS:
            return [bool(v) for v in value.values]
        raise self._fail(name, "must be a bool list", kind)


def attr(name: str, **value: Any) -> Any:
    """An AttributeProto ``name`` with one value, e.g. ``attr("comm_size", int64_val=1024)``."""
    return schema.AttributeProto(name=name, **value)
