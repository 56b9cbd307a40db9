"""`acesim assumptions`: every sourced parameter of a system, its value and where it comes from."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    parse_sets,
)
from .show import FORMAT_OPTION, print_table

#: Longest value shown in a cell (a whole table of dimensions is summarised).
MAX_VALUE_TEXT = 60


def _value_at(doc: Any, path: str) -> Any:
    from ..config.paths import parse_path

    node = doc
    for part in parse_path(path):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _show(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
    return text if len(text) <= MAX_VALUE_TEXT else text[: MAX_VALUE_TEXT - 1] + "…"


def assumptions_command(
    system: str = typer.Argument("ace-isca21", help="preset name or config file"),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    nodes: int | None = NODES_OPTION,
    fmt: str = FORMAT_OPTION,
) -> None:
    """List every sourced parameter of a system: its value and its source (paper, datasheet,
    ASTRA-sim, measurement or assumption)."""
    from ..config.paths import set_path
    from ..config.presets import assumptions as list_assumptions
    from ..config.presets import system_document
    from ..config.scaleout import scale_out
    from .cases import cli_system

    cfg = cli_system(system, sets, nodes, force)
    written = system_document(system)  # values as written (units kept) ...
    for path, value in parse_sets(sets).items():
        written = set_path(written, path, value)
    if nodes is not None:
        written = scale_out(written, nodes)
    resolved = cfg.model_dump(mode="json")  # ... or resolved, for defaults
    table = Table(title=f"Parameters of {cfg.name}: values and sources")
    for col in ("field", "value", "source", "note"):
        table.add_column(col, overflow="fold")
    for field, kind, note in list_assumptions(cfg):
        value = _value_at(written, field)
        if value is None:
            value = _value_at(resolved, field)
        table.add_row(field, _show(value), kind, note)
    print_table(table)
