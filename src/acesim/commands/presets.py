"""`acesim presets`: list the shipped system presets."""

from __future__ import annotations

from rich.table import Table

from ..config.presets import DEFAULT_PRESET, load_system, preset_document, preset_names
from .common import console


def presets_command() -> None:
    """List the shipped system presets."""
    table = Table(title="acesim presets")
    table.add_column("name")
    table.add_column("NPUs", justify="right")
    table.add_column("description")
    for name in preset_names():
        doc = preset_document(name)
        system = load_system(name)
        mark = " (default)" if name == DEFAULT_PRESET else ""
        table.add_row(name + mark, str(system.network.total_npus), doc.get("description", ""))
    console.print(table)
