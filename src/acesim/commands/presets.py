"""`acesim presets`: list the shipped system presets and NPU presets; `acesim presets show NAME`:
one resolved system document (``extends`` and ``--set`` applied, ``--nodes`` scaled out) or one
NPU preset, with the source of every sourced value."""

from __future__ import annotations

import sys
from typing import Any

import typer
import yaml
from rich.table import Table

from ..config.npus import load_npu_preset, npu_preset_document, npu_preset_names
from ..config.presets import DEFAULT_PRESET, load_system, preset_document, preset_names
from ..errors import ConfigError
from ..units import format_rate
from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    parse_sets,
)
from .show import FORMAT_OPTION, print_table

presets_app = typer.Typer(
    help="List the shipped system and NPU presets, or show one (`acesim presets show NAME`).",
    invoke_without_command=True,
    no_args_is_help=False,
)

#: Dtypes shown in the NPU table, one column each.
_PEAK_COLUMNS = ("fp32", "tf32", "bf16", "fp8")


@presets_app.callback()
def presets_command(ctx: typer.Context, fmt: str = FORMAT_OPTION) -> None:
    """List the shipped system presets and NPU presets (`acesim presets show NAME` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    table = Table(title="acesim presets (systems)")
    table.add_column("name")
    table.add_column("NPUs", justify="right")
    table.add_column("--nodes")
    table.add_column("extends")
    table.add_column("description")
    for name in preset_names():
        doc = preset_document(name)
        system = load_system(name)
        mark = " (default)" if name == DEFAULT_PRESET else ""
        table.add_row(
            name + mark,
            str(system.network.total_npus),
            "yes" if system.scale_out is not None else "-",
            str(doc.get("extends", "")),
            doc.get("description", ""),
        )
    print_table(table)
    npus = Table(
        title="NPU presets (\\[npu] extends = NAME in a system; NAME-single runs one alone)",
        caption="dense matrix peaks (no sparsity), FLOP/s of the whole NPU",
    )
    for col in ("name", "NPU", "units", *_PEAK_COLUMNS, "HBM"):
        npus.add_column(col, justify="left" if col in ("name", "NPU") else "right")
    for name in npu_preset_names():
        preset = load_npu_preset(name)
        peaks = [_flops(preset.npu.matrix_flops.get(d)) for d in _PEAK_COLUMNS]
        hbm = format_rate(preset.npu.hbm_bandwidth)
        units = str(preset.npu.compute_units)
        npus.add_row(name, preset.npu.name, units, *peaks, hbm)
    print_table(npus)


def _flops(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e12:g} T"


@presets_app.command("show")
def show_command(
    name: str = typer.Argument(..., help="system preset, system file or NPU preset"),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    nodes: int | None = NODES_OPTION,
) -> None:
    """Print a system document as acesim reads it, as YAML a file can hold (``presets show
    NAME > mine.yaml``, then ``--system mine.yaml``): ``extends`` merged, ``--set`` applied,
    ``--nodes`` scaled out, values as written (units kept), and where each sourced value comes
    from in its ``sources`` table. An NPU preset's name prints that preset."""
    from ..config.paths import set_path
    from ..config.presets import system_document
    from ..config.provenance import override_sources
    from ..config.scaleout import scale_out
    from .cases import cli_system

    if name in npu_preset_names() and name not in preset_names():
        if sets or nodes is not None:
            flag = "--set" if sets else "--nodes"
            raise ConfigError(flag, "applies to systems, not to an NPU preset", name)
        load_npu_preset(name)  # validates
        _print_document(
            npu_preset_document(name),
            f"NPU preset {name}, as acesim reads it; a system starts from it with "
            f'[npu] extends = "{name}"',
        )
        return
    cli_system(name, sets, nodes, force)  # validates: errors name the field
    doc = system_document(name)
    for path, value in parse_sets(sets).items():
        doc = set_path(doc, path, value)
        doc["sources"] = override_sources(doc.get("sources", {}), path, value, name)
    if nodes is not None:
        doc = scale_out(doc, nodes)
    changes = " ".join([*(f"--set {s}" for s in sets), *([f"--nodes {nodes}"] if nodes else [])])
    what = f"system {name}{' ' + changes if changes else ''}"
    _print_document(doc, f"{what}, as acesim reads it; usable as a system file (--system FILE)")


def _print_document(doc: dict[str, Any], what: str) -> None:
    """``doc`` as YAML on stdout, whole lines (never wrapped to the terminal), its sources
    last: a file ``acesim`` reads back as it is."""
    doc = dict(doc)
    sources = doc.pop("sources", None)
    if sources:
        doc["sources"] = sources
    header = f"# {what} (acesim presets show)\n"
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=float("inf"))
    sys.stdout.write(header + text)
    sys.stdout.flush()
