"""`acesim import-astra NETWORK SYSTEM`: ASTRA-sim 2.0's network and system files as one acesim
system file (:mod:`acesim.config.astra`), every mapping stated."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from .common import check_output_path, console, err_console
from .show import FORMAT_OPTION, print_table


def import_astra_command(
    network: Path = typer.Argument(..., help="ASTRA-sim network file (analytical: .yml or .json)"),
    system: Path = typer.Argument(..., help="ASTRA-sim system file (.json)"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="write the acesim system file (.toml) here (default: stdout)"
    ),
    name: str | None = typer.Option(
        None, "--name", help="the system's name (default: the network file's stem)"
    ),
    fmt: str = FORMAT_OPTION,
) -> None:
    """Convert ASTRA-sim's network and system files into one acesim system file: units
    converted, each mapping stated (in the file's \\[sources] and in a table: on stdout with
    --output, else on stderr, the file taking stdout)."""
    from ..config.astra import read_astra_files, system_toml
    from ..config.presets import system_from_dict

    if output is not None:
        check_output_path(output, "--output", (".toml",))
    doc, mappings = read_astra_files(network, system)
    if name is not None:
        doc["name"] = name
    system_from_dict(doc, origin=f"{network} + {system}")  # the result is a valid system
    header = (
        f"acesim system imported from ASTRA-sim: {network.name} (network), {system.name} "
        "(system)\nby `acesim import-astra`; each value's mapping is in [sources]"
    )
    text = system_toml(doc, header)
    table = Table(title="ASTRA-sim -> acesim", title_justify="left")
    for col in ("acesim field", "value", "from", "why"):
        table.add_column(col)
    for m in mappings:
        table.add_row(*(Text(str(cell)) for cell in (m.field, m.value, m.astra, m.note)))
    if output is None:
        print_table(table, to=err_console)
        console.out(text, end="")
        return
    print_table(table)
    output.write_text(text, encoding="utf-8")
    err_console.print(f"wrote {output} (run it: acesim collective -s {output} --sizes 1MiB)")
