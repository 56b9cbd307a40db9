"""`acesim kinds`: what can be chosen, read from the registries (endpoint kinds and their
settings, collective operations, per-dimension algorithms, training loops, run kinds)."""

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
        None, help="endpoints, ops, algorithms, loops or runs (default: all)"
    ),
) -> None:
    """List the registered endpoint kinds, collective operations, algorithms, loops and run
    kinds."""
    from ..errors import ConfigError
    from ..runs.kinds import RUN_KINDS

    sections = ("endpoints", "ops", "algorithms", "loops", "runs")
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
        for col in ("name", "phases", "lockstep", "steps"):
            table.add_column(col)
        for name, algo in ALGORITHMS.items():
            lockstep = "yes" if algo.lockstep else "no"
            table.add_row(name, ", ".join(algo.phase_ops), lockstep, algo.summary)
        console.print(table)
    if what in (None, "loops"):
        table = Table(title="training loops (run.loop, --loop)")
        table.add_column("name")
        table.add_column("what it does")
        for name, loop in LOOPS.items():
            table.add_row(name, loop.summary)
        console.print(table)
    if what in (None, "runs"):
        table = Table(title="run kinds (sweep kind; acesim run, acesim collective)")
        table.add_column("name")
        table.add_column("what it runs")
        for name, run_kind in RUN_KINDS.items():
            table.add_row(name, run_kind.summary)
        console.print(table)
