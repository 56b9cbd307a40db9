"""`acesim kinds`: what can be chosen, read from the registries (endpoint kinds and their
settings, collective operations, per-dimension algorithms, training loops)."""

from __future__ import annotations

import typer
from rich.table import Table

from ..hardware.endpoints import ENDPOINT_KINDS
from ..network.algorithms import ALGORITHMS
from ..network.ops import COLLECTIVE_OPS
from ..training.loops import LOOPS
from .common import console


def kinds_command(
    what: str | None = typer.Argument(
        None, help="endpoints, ops, algorithms or loops (default: all)"
    ),
) -> None:
    """List the registered endpoint kinds, collective operations, algorithms and loops."""
    from ..errors import ConfigError

    sections = ("endpoints", "ops", "algorithms", "loops")
    if what is not None and what not in sections:
        raise ConfigError("what", "must be one of " + ", ".join(sections), what)
    if what in (None, "endpoints"):
        table = Table(title="endpoint kinds (endpoint.kind, --endpoint)")
        for col in ("name", "role", "settings [endpoint.<name>]", "what it models"):
            table.add_column(col)
        for name, kind in ENDPOINT_KINDS.items():
            fields = ", ".join(kind.settings.model_fields) or "-"
            label = f"{name} (alias {', '.join(kind.aliases)})" if kind.aliases else name
            table.add_row(label, kind.role, fields, kind.summary)
        console.print(table)
    if what in (None, "ops"):
        table = Table(title="collective operations (--op, collective.algorithms keys)")
        table.add_column("name")
        table.add_column("what it does")
        for name, op in COLLECTIVE_OPS.items():
            table.add_row(name, op.summary)
        console.print(table)
    if what in (None, "algorithms"):
        table = Table(title="per-dimension algorithms (collective.algorithms values)")
        for col in ("name", "phases", "steps"):
            table.add_column(col)
        for name, algo in ALGORITHMS.items():
            table.add_row(name, ", ".join(algo.phase_ops), algo.summary)
        console.print(table)
    if what in (None, "loops"):
        table = Table(title="training loops (run.loop, --loop)")
        table.add_column("name")
        table.add_column("what it does")
        for name, loop in LOOPS.items():
            table.add_row(name, loop.summary)
        console.print(table)
