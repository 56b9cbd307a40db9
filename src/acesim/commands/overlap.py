"""`acesim overlap`: one GEMM and one collective, alone, back to back and overlapped, per
endpoint kind."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ..config.presets import DEFAULT_PRESET
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.kernels import Gemm
from ..network.ops import COLLECTIVE_OPS
from ..results.jsonout import dumps
from ..units import format_size, format_time, parse_quantity
from .cases import cli_system
from .common import NODES_HELP, SET_HELP, console, parse_gemm

__all__ = ["overlap_command", "overlap"]


def overlap(cfg: Any, gemm: Gemm, op: str, size: float, endpoint: str) -> dict[str, Any]:
    """The GEMM and the collective on ``cfg`` with ``endpoint``: each alone, serial (their
    sum) and overlapped (both started together: the makespan), and each one's slowdown."""
    from ..simulate import simulate_collective

    if gemm.dtype not in cfg.npu.matrix_flops:
        raise ConfigError(
            "--gemm",
            f"{cfg.npu.name} has no {gemm.dtype} matrix peak; it has "
            f"{', '.join(cfg.npu.matrix_flops)}",
            gemm.dtype,
        )
    result = simulate_collective(cfg, op, size, endpoint=endpoint, compute_kernels=[gemm])
    info = result.compute
    assert info is not None
    gemm_alone = info["kernel_time_alone"]
    coll_alone = info["collective_time_alone"]
    return {
        "endpoint": endpoint,
        "gemm_time_alone": gemm_alone,
        "collective_time_alone": coll_alone,
        "serial_time": gemm_alone + coll_alone,
        "overlapped_time": info["end_time"],
        "gemm_time": info["kernel_time"],
        "collective_time": result.time,
        "gemm_slowdown": info["kernel_slowdown"],
        "collective_slowdown": info["collective_slowdown"],
    }


def overlap_command(
    system: str = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file"),
    nodes: int | None = typer.Option(None, "--nodes", help=NODES_HELP),
    gemm: str = typer.Option("8192x8192x8192:fp16", "--gemm", help="the GEMM: MxNxK[:dtype]"),
    op: str = typer.Option("all-gather", "--op", help=COLLECTIVE_OPS.choices()),
    size: str = typer.Option("64MiB", "--size", help="collective size (nccl-tests convention)"),
    endpoints: str = typer.Option(
        "baseline,copy_engine",
        "--endpoints",
        help=f"comma-separated endpoint kinds: {ENDPOINT_KINDS.choices()}",
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table", metavar=""),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """A GEMM and a collective per endpoint: alone, serial and overlapped, and slowdowns."""
    kernel = parse_gemm(gemm)
    COLLECTIVE_OPS.get(op, "--op")
    nbytes = parse_quantity(size, "size", "--size")
    if not nbytes > 0:
        raise ConfigError("--size", "must be a positive size", size)
    kinds = [e.strip() for e in endpoints.split(",") if e.strip()]
    if not kinds:
        raise ConfigError("--endpoints", "give at least one endpoint kind", endpoints)
    for kind in kinds:
        ENDPOINT_KINDS.check(kind, "--endpoints")
    cfg = cli_system(system, sets, nodes)
    rows = [overlap(cfg, kernel, op, nbytes, kind) for kind in kinds]
    if as_json:
        payload = {
            "schema": "acesim.overlap/1",
            "system": cfg.name,
            "gemm": {"m": kernel.m, "n": kernel.n, "k": kernel.k, "dtype": kernel.dtype},
            "op": op,
            "size": nbytes,
            "results": rows,
        }
        console.out(dumps(payload, indent=2))
        return
    table = Table(title=f"{kernel.name} with {op} of {format_size(nbytes)} on {cfg.name}")
    for col in (
        "endpoint",
        "GEMM alone",
        "collective alone",
        "serial",
        "overlapped",
        "GEMM slowdown",
        "coll. slowdown",
    ):
        table.add_column(col, justify="left" if col == "endpoint" else "right")
    for row in rows:
        table.add_row(
            row["endpoint"],
            format_time(row["gemm_time_alone"]),
            format_time(row["collective_time_alone"]),
            format_time(row["serial_time"]),
            format_time(row["overlapped_time"]),
            f"{row['gemm_slowdown']:.3f}x",
            f"{row['collective_slowdown']:.3f}x",
        )
    console.print(table)
