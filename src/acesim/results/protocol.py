"""One protocol for every run kind's result (collective, training graph, LLM).

What tables, JSON, sweep rows and comparisons read, whatever the kind
(:mod:`acesim.runs.kinds`):

* ``figure``: the figure of merit, seconds (an iteration, or one collective); smaller is
  better, and comparisons report speedups as its ratios;
* ``mode`` and ``mode_note``: the strategy the run executed with and why
  (:func:`acesim.training.strategy.mode_note`);
* ``endpoint``, ``variant`` and ``settings``: the endpoint kind, its variant's label and its
  scalar settings;
* :meth:`~Result.to_dict`: the JSON document (``schema`` ``acesim.<kind>/N``, ``kind``);
  :meth:`~Result.metrics`: flat scalars for sweep rows and databases;
* :meth:`~Result.describe`, :meth:`~Result.rows`, :meth:`~Result.tables`,
  :meth:`~Result.footnotes`: a one-line description of the case, the headline figures as
  ``(metric, text)`` rows (the columns of a comparison), a single run's further tables, and
  lines for stderr;
* ``gains``: ratios a comparison reports against the reference besides the speedup (name
  -> the figure, bigger is better);
* :meth:`~Result.case`: what the run was (its inputs), echoed once by a comparison.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from ..config.system import SystemConfig

__all__ = [
    "Result",
    "Table",
    "document",
    "without",
    "scalar_settings",
    "assumptions",
    "made_from",
    "system_title",
]


@dataclass(frozen=True)
class Table:
    """A table of text cells: a title, column headings, rows."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)


class Result(Protocol):
    """A run's result, whatever its kind (module docstring)."""

    kind: ClassVar[str]
    gains: ClassVar[dict[str, str]]

    @property
    def figure(self) -> float: ...

    @property
    def mode(self) -> str: ...

    @property
    def mode_note(self) -> str: ...

    @property
    def endpoint(self) -> str: ...

    @property
    def variant(self) -> str: ...

    @property
    def settings(self) -> dict[str, Any]: ...

    def to_dict(self) -> dict[str, Any]: ...

    def case(self) -> dict[str, Any]: ...

    def metrics(self) -> dict[str, Any]: ...

    def describe(self) -> str: ...

    def rows(self) -> list[tuple[str, str]]: ...

    def tables(self) -> list[Table]: ...

    def footnotes(self) -> list[str]: ...


def document(result: Any, schema: str) -> dict[str, Any]:
    """A dataclass result's JSON document: its fields, ``schema`` and ``kind``."""
    data: dict[str, Any] = asdict(result)
    data["schema"] = schema
    data["kind"] = result.kind
    return data


def without(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``data`` but ``keys`` (a sweep row without what the point itself gives)."""
    return {k: v for k, v in data.items() if k not in keys}


def scalar_settings(settings: Any) -> dict[str, Any]:
    """The endpoint settings worth echoing in a result: the scalar ones, and tables of names as
    ``key:value`` text (the ideal endpoint's ``algorithms``); lists of variants to search and
    tables of numbers are left out."""
    dumped: dict[str, Any] = settings.model_dump(mode="json")
    out: dict[str, Any] = {}
    for k, v in dumped.items():
        if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
            out[k] = ",".join(f"{a}:{b}" for a, b in v.items()) or "-"
        elif not isinstance(v, list | dict):
            out[k] = v
    return out


def assumptions(system: SystemConfig) -> list[str]:
    """The fields of ``system`` whose values are assumptions (its ``[sources]``: stated outright,
    or carried from another system's fit by a transfer rule, ``Source.assumed``), sorted."""
    return sorted(f for f, s in system.sources.items() if s.assumed)


def made_from(provenance: dict[str, Any]) -> str:
    """A title's words for a result's ``provenance``: its extends chain and overrides
    (``extends h100-nvswitch-8; set npu.hbm_bandwidth=3.6 TB/s``), "" when neither."""
    parts = []
    if provenance.get("extends"):
        parts.append("extends " + " -> ".join(provenance["extends"]))
    if provenance.get("overrides"):
        parts.append("set " + ", ".join(provenance["overrides"]))
    return "; ".join(parts)


def system_title(name: str, provenance: dict[str, Any]) -> str:
    """A system's name in a title, with its extends chain and overrides when it has any
    (``ace-isca21 (set endpoint.ace.sram=16 MiB)``)."""
    words = made_from(provenance)
    return f"{name} ({words})" if words else name
