"""`acesim kinds`: what can be chosen, read from the registries (endpoint kinds and their
settings, collective operations, per-dimension algorithms, training loops, run kinds, the
workloads: the zoo's training graphs and the LLM models)."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ..hardware.endpoints import ENDPOINT_KINDS
from ..network.algorithms import ALGORITHMS
from ..network.ops import COLLECTIVE_OPS
from ..registry import Registry
from ..training.loops import LOOPS
from .show import FORMAT_OPTION, print_table


def kinds_command(
    what: str | None = typer.Argument(
        None, help="endpoints, ops, algorithms, loops, runs or models (default: all)"
    ),
    fmt: str = FORMAT_OPTION,
) -> None:
    """List the registered endpoint kinds, collective operations, algorithms, loops, run kinds
    and workload models (--workload: the zoo and the LLM models)."""
    from ..errors import ConfigError
    from ..runs.kinds import RUN_KINDS

    sections = ("endpoints", "ops", "algorithms", "loops", "runs", "models")
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
        print_table(table)
    if what in (None, "ops"):
        print_table(
            _summaries("collective operations (--op, collective.algorithms keys)", COLLECTIVE_OPS)
        )
    if what in (None, "algorithms"):
        table = Table(title="per-dimension algorithms (collective.algorithms values)")
        for col in ("name", "phases", "lockstep", "steps"):
            table.add_column(col)
        for name, algo in ALGORITHMS.items():
            lockstep = "yes" if algo.lockstep else "no"
            table.add_row(name, ", ".join(algo.phase_ops), lockstep, algo.summary)
        print_table(table)
    if what in (None, "loops"):
        print_table(_summaries("training loops (run.loop, --loop)", LOOPS))
    if what in (None, "runs"):
        title = "run kinds (sweep kind; acesim run, acesim collective)"
        print_table(_summaries(title, RUN_KINDS, "what it runs"))
    if what in (None, "models"):
        print_table(_models())


def _summaries(title: str, registry: Registry[Any], what: str = "what it does") -> Table:
    """A registry's entries, each with its one-line summary."""
    table = Table(title=title)
    table.add_column("name")
    table.add_column(what)
    for name, entry in registry.items():
        table.add_row(name, entry.summary)
    return table


def _models() -> Table:
    """The workloads --workload names: the zoo's training graphs and the LLM registry."""
    from ..workload.llm.models import MODELS
    from ..workload.zoo import zoo_names

    table = Table(title="models (--workload; LLM models take --parallel, acesim run -w NAME)")
    for col in ("name", "kind", "parameters", "layers", "hidden", "seq", "experts", "source"):
        table.add_column(col, justify="right" if col in ("parameters", "layers") else "left")
    for name in zoo_names():
        table.add_row(name, "training graph (zoo)", "-", "-", "-", "-", "-", "acesim's zoo")
    for name, model in MODELS.items():
        experts = f"{model.experts} (top {model.top_k})" if model.experts else "-"
        table.add_row(
            name,
            "LLM",
            f"{model.params / 1e9:.3g} B",
            str(model.layers),
            str(model.hidden),
            str(model.seq),
            experts,
            _cite(model.source),
        )
    return table


def _cite(source: str) -> str:
    """A source's citation: its text up to the first closing parenthesis (the paper and
    year), the whole text when it has none."""
    end = source.find(")")
    return source[: end + 1] if end > 0 else (source or "-")
