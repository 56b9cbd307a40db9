"""`acesim overlap`: one GEMM and one collective, alone, back to back and overlapped, per
endpoint kind."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ..config.system import SystemConfig
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.endpoints.copy_engine import unstated_facts
from ..hardware.npu import HOST_DIRECTIONS
from ..network.ops import COLLECTIVE_OPS
from ..results.jsonout import dumps
from ..runs.overlap import overlap
from ..units import format_size, format_time, parse_quantity
from .cases import cli_system
from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    SYSTEM_OPTION,
    console,
    err_console,
    parse_gemm,
)
from .show import FORMAT_OPTION, print_table

__all__ = ["overlap_command", "overlap"]

#: The kinds ``acesim overlap`` compares when ``--endpoints`` is not given.
DEFAULT_ENDPOINTS = "baseline,copy_engine"


def parse_host_copy(text: str | None) -> tuple[float, str] | None:
    """``SIZE[:h2d|d2h]`` (default h2d) as (bytes, direction); None for None."""
    if text is None:
        return None
    size, _, direction = text.partition(":")
    direction = direction.strip() or "h2d"
    if direction not in HOST_DIRECTIONS:
        raise ConfigError(
            "--host-copy", f"direction must be one of {', '.join(HOST_DIRECTIONS)}", text
        )
    nbytes = parse_quantity(size, "size", "--host-copy")
    if not nbytes > 0:
        raise ConfigError("--host-copy", "must be a positive size", text)
    return nbytes, direction


def overlap_command(
    system: str = SYSTEM_OPTION,
    nodes: int | None = NODES_OPTION,
    gemm: str = typer.Option("8192x8192x8192:fp16", "--gemm", help="the GEMM: MxNxK[:dtype]"),
    op: str = typer.Option("all-gather", "--op", help=COLLECTIVE_OPS.choices()),
    size: str = typer.Option("64MiB", "--size", help="collective size (nccl-tests convention)"),
    endpoints: str | None = typer.Option(
        None,
        "--endpoints",
        help=f"comma-separated endpoint kinds: {ENDPOINT_KINDS.choices()} (default "
        f"{DEFAULT_ENDPOINTS}; copy_engine left out, with a note, on a system that states no "
        "copy-engine facts of another vendor's NPU)",
    ),
    host_copy: str | None = typer.Option(
        None,
        "--host-copy",
        help="also a host-device copy on the copy engines, SIZE[:h2d|d2h] (e.g. 1GiB:h2d); "
        "copy-engine collectives share the engines with it",
    ),
    collective_at: str = typer.Option(
        "0 s",
        "--collective-at",
        help="issue the collective this long after the GEMM is launched (e.g. 100us): its SM "
        "kernel then waits for units the GEMM's blocks hold (endpoint.baseline.launch)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table", metavar=""),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    fmt: str = FORMAT_OPTION,
) -> None:
    """A GEMM and a collective per endpoint: alone, serial and overlapped, and slowdowns."""
    kernel = parse_gemm(gemm)
    copy = parse_host_copy(host_copy)
    COLLECTIVE_OPS.get(op, "--op")
    nbytes = parse_quantity(size, "size", "--size")
    if not nbytes > 0:
        raise ConfigError("--size", "must be a positive size", size)
    cfg = cli_system(system, sets, nodes, force)
    kinds, left_out = _endpoint_kinds(endpoints, cfg)
    at = parse_quantity(collective_at, "time", "--collective-at")
    if not at >= 0:
        raise ConfigError("--collective-at", "must not be negative", collective_at)
    rows = [overlap(cfg, kernel, op, nbytes, kind, copy, at) for kind in kinds]
    if left_out and not (as_json or fmt == "json"):  # after the runs: an error stays one line
        for kind, why in left_out.items():
            err_console.print(
                f"note: {kind} left out of the default endpoints: {why}", markup=False
            )
    if as_json or fmt == "json":
        payload = {
            "schema": "acesim.overlap/1",
            "system": cfg.name,
            "gemm": {"m": kernel.m, "n": kernel.n, "k": kernel.k, "dtype": kernel.dtype},
            "op": op,
            "size": nbytes,
            "host_copy": None if copy is None else {"bytes": copy[0], "direction": copy[1]},
            "collective_at": at,
            "left_out": left_out,
            "results": rows,
        }
        console.out(dumps(payload, indent=2))
        return
    title = f"{kernel.name} with {op} of {format_size(nbytes)} on {cfg.name}"
    if copy is not None:
        title += f" and a {format_size(copy[0])} {copy[1]} copy"
    print_table(_overlap_table(rows, title, host_copy=copy is not None))


def _endpoint_kinds(endpoints: str | None, cfg: SystemConfig) -> tuple[list[str], dict[str, str]]:
    """The endpoint kinds of ``--endpoints`` (comma-separated, at least one, each known), and
    the default kinds left out on ``cfg`` with why: with no ``--endpoints``,
    :data:`DEFAULT_ENDPOINTS` less ``copy_engine`` where the system may not run it on the
    kind's defaults (:func:`~acesim.hardware.endpoints.copy_engine.unstated_facts`); a kind
    the user names is never left out (it runs, or its error is reported)."""
    left_out: dict[str, str] = {}
    if endpoints is None:
        refusal = unstated_facts(cfg)
        if refusal is not None:
            left_out["copy_engine"] = refusal
        endpoints = ",".join(k for k in DEFAULT_ENDPOINTS.split(",") if k not in left_out)
    kinds = [e.strip() for e in endpoints.split(",") if e.strip()]
    if not kinds:
        raise ConfigError("--endpoints", "give at least one endpoint kind", endpoints)
    for kind in kinds:
        ENDPOINT_KINDS.check(kind, "--endpoints")
    return kinds, left_out


def _overlap_table(rows: list[dict[str, Any]], title: str, *, host_copy: bool) -> Table:
    """One row per endpoint kind: each part alone, serial, overlapped and the slowdowns
    (with the host copy's columns when there is one)."""
    table = Table(title=title)
    columns = ["endpoint", "GEMM alone", "collective alone"]
    columns += ["host copy alone"] if host_copy else []
    columns += ["serial", "overlapped", "GEMM slowdown", "coll. slowdown"]
    columns += ["copy slowdown"] if host_copy else []
    for col in columns:
        table.add_column(col, justify="left" if col == "endpoint" else "right")
    for row in rows:
        cells = [
            row["endpoint"],
            format_time(row["gemm_time_alone"]),
            format_time(row["collective_time_alone"]),
        ]
        if host_copy:
            cells.append(format_time(row["host_copy_time_alone"]))
        cells += [
            format_time(row["serial_time"]),
            format_time(row["overlapped_time"]),
            f"{row['gemm_slowdown']:.3f}x",
            f"{row['collective_slowdown']:.3f}x",
        ]
        if host_copy:
            cells.append(f"{row['host_copy_slowdown']:.3f}x")
        table.add_row(*cells)
    return table
