"""`acesim presets`: list the shipped system presets; `acesim presets show NAME`: one resolved
document (``extends`` and ``--set`` applied) with the source of every sourced value."""

from __future__ import annotations

import typer
import yaml
from rich.syntax import Syntax
from rich.table import Table

from ..config.presets import DEFAULT_PRESET, load_system, preset_document, preset_names
from .common import SET_HELP, console, parse_sets

presets_app = typer.Typer(
    help="List the shipped system presets, or show one (`acesim presets show NAME`).",
    invoke_without_command=True,
    no_args_is_help=False,
)


@presets_app.callback()
def presets_command(ctx: typer.Context) -> None:
    """List the shipped system presets (`acesim presets show NAME` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    table = Table(title="acesim presets")
    table.add_column("name")
    table.add_column("NPUs", justify="right")
    table.add_column("extends")
    table.add_column("description")
    for name in preset_names():
        doc = preset_document(name)
        system = load_system(name)
        mark = " (default)" if name == DEFAULT_PRESET else ""
        table.add_row(
            name + mark,
            str(system.network.total_npus),
            str(doc.get("extends", "")),
            doc.get("description", ""),
        )
    console.print(table)


@presets_app.command("show")
def show_command(
    name: str = typer.Argument(..., help="preset name or system file"),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Print a system document as acesim reads it: ``extends`` merged, ``--set`` applied,
    values as written (units kept), then where each sourced value comes from."""
    from ..config.paths import set_path
    from ..config.presets import system_document
    from ..config.resolve import resolve_system

    overrides = parse_sets(sets)
    resolve_system(name, overrides=overrides)  # validates: errors name the field
    doc = system_document(name)
    for path, value in overrides.items():
        doc = set_path(doc, path, value)
    sources = doc.pop("sources", {})
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    console.print(Syntax(text, "yaml", theme="ansi_dark", word_wrap=True))
    if sources:
        table = Table(title="sources")
        for col in ("field", "source", "note"):
            table.add_column(col, overflow="fold")
        for field, source in sources.items():
            table.add_row(field, str(source.get("kind", "")), str(source.get("note", "")))
        console.print(table)
