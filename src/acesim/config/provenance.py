"""How a resolved system was made: the document it was read from, the ``extends`` chain under
it, the NPU preset its ``[npu]`` starts from and every override applied to it, in order.

A :class:`~acesim.config.system.SystemConfig` carries its :class:`Provenance`
(``system.provenance``; :func:`acesim.config.resolve.resolve_system` records it), and every
result made from the system echoes it: ``RunInfo.provenance`` in JSON and in titles, trace
metadata, the reproduction report. An override also replaces the source of the value it
changes (:func:`override_sources`), so an assumptions table shows the value the run used, as
an ``override``, with what the document had said before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import short_repr
from .merge import touches

__all__ = ["Provenance", "override_sources", "show_value"]


def show_value(value: Any) -> str:
    """An override's value as a user writes it: text as is (``16 MiB``), ``true``/``false``,
    numbers and lists as JSON (``8``, ``[1, 2]``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        return json.dumps(value, separators=(", ", ": "), default=str)
    except (TypeError, ValueError):  # an integer too long to print, a value JSON cannot hold
        return short_repr(value)


@dataclass(frozen=True)
class Provenance:
    """Attributes:
    origin: the preset name or file the system was read from ("" for a table or object).
    extends: the documents ``origin`` extends, nearest first (``extends = "..."``).
    npu: the NPU preset ``[npu] extends`` names ("" when none).
    overrides: ``path=value`` of every override, in the order applied.
    """

    origin: str = ""
    extends: tuple[str, ...] = ()
    npu: str = ""
    overrides: tuple[str, ...] = field(default=())

    def with_overrides(self, overrides: Mapping[str, Any]) -> Provenance:
        """This provenance with ``overrides`` (dotted path -> value) appended."""
        added = tuple(f"{path}={show_value(value)}" for path, value in overrides.items())
        return replace(self, overrides=self.overrides + added) if added else self

    def describe(self) -> str:
        """What a title adds to the system's name: the extends chain and the overrides
        (``extends h100-nvswitch-8; set npu.hbm_bandwidth=3.6 TB/s``); "" when neither."""
        parts = []
        if self.extends:
            parts.append("extends " + " -> ".join(self.extends))
        if self.overrides:
            parts.append("set " + ", ".join(self.overrides))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (results' ``info.provenance``, trace metadata)."""
        return {
            "origin": self.origin,
            "extends": list(self.extends),
            "npu": self.npu,
            "overrides": list(self.overrides),
        }


def override_sources(
    sources: Mapping[str, Any], path: str, value: Any, origin: str = ""
) -> dict[str, Any]:
    """``sources`` (a document's ``[sources]`` table) after ``path`` was set to ``value``:
    every source describing the old value becomes an ``override`` naming the new value and
    what the source had said; a path without a source gets one."""
    shown = show_value(value)
    out = dict(sources)
    note = f"{path} = {shown} (an override of {origin or 'the system'})"
    replaced = False
    for key, old in sources.items():
        if not touches(key, [path]):
            continue
        before = ""
        if isinstance(old, Mapping):
            before = f"; it was {old.get('kind', '?')}: {old.get('note', '')}"
        elif hasattr(old, "kind"):
            before = f"; it was {old.kind}: {old.note}"
        out[key] = {"kind": "override", "note": note + before}
        replaced = True
    if not replaced:
        out[path] = {"kind": "override", "note": note}
    return out
