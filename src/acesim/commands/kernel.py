"""`acesim kernel`: one kernel's time on an NPU, and why it takes that long."""

from __future__ import annotations

import math

import typer
from rich.table import Table

from ..config.reader import strict_int
from ..config.validators import MAX_COUNT
from ..errors import ConfigError
from ..hardware.kernel_model import KernelPlan, plan_kernel
from ..hardware.kernels import Kernel, Stream
from ..precision import DTYPES
from ..results.jsonout import dumps
from ..units import format_rate, format_time, parse_quantity
from .common import (
    FORCE_OPTION,
    SETS_OPTION,
    SYSTEM_OPTION,
    parse_gemm,
    parse_sets,
)
from .show import FORMAT_OPTION, print_table

#: Element-wise kernels of the STREAM benchmark: (arrays read, arrays written) per element.
STREAM_KERNELS = {"copy": (1, 1), "scale": (1, 1), "add": (2, 1), "triad": (2, 1), "dot": (2, 0)}


def _kernels(gemm: list[str], stream: list[str], dtype: str, elements: float) -> list[Kernel]:
    DTYPES.get(dtype, "--dtype")
    out: list[Kernel] = []
    for text in gemm:
        out.append(parse_gemm(text, "--gemm", dtype))
    width = DTYPES.get(dtype).bytes
    for name in stream:
        if name not in STREAM_KERNELS:
            raise ConfigError("--stream", f"must be one of {', '.join(STREAM_KERNELS)}", name)
        reads, writes = STREAM_KERNELS[name]
        flops = {"copy": 0, "scale": 1, "add": 1, "triad": 2, "dot": 2}[name] * elements
        out.append(
            Stream(
                reads * elements * width, writes * elements * width, flops, name=f"stream {name}"
            )
        )
    if not out:
        raise ConfigError("--gemm/--stream", "give at least one kernel", None)
    return out


def _row(plan: KernelPlan) -> dict[str, object]:
    t = plan.time_alone
    return {
        "kernel": plan.name,
        "time": t,
        "flop_rate": plan.flops / t if t > 0 else 0.0,
        "hbm_rate": plan.hbm_bytes / t if t > 0 else 0.0,
        "bound": plan.bound,
        "blocks": plan.blocks,
        "waves": plan.waves(plan.units),
        "detail": plan.detail,
    }


def kernel_command(
    system: str = SYSTEM_OPTION,
    gemm: list[str] = typer.Option(
        [], "--gemm", help="a GEMM MxNxK[:dtype] (or N for N^3); repeatable"
    ),
    stream: list[str] = typer.Option(
        [], "--stream", help=f"a STREAM kernel ({', '.join(STREAM_KERNELS)}); repeatable"
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help=f"math dtype: {DTYPES.choices()} (default: the NPU's fastest)"
    ),
    elements: str = typer.Option("2**29", "--elements", help="STREAM array length (elements)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON", metavar=""),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    fmt: str = FORMAT_OPTION,
) -> None:
    """Time kernels alone on a system's NPU: time, rates, and what bounds them (waves)."""
    from ..config.resolve import resolve_system

    count = _elements(elements)
    cfg = resolve_system(system, overrides=parse_sets(sets), force=force)
    if dtype is None:
        dtype = max(cfg.npu.matrix_flops, key=cfg.npu.matrix_flops.__getitem__)
    plans = [plan_kernel(cfg.npu, k) for k in _kernels(gemm, stream, dtype, count)]
    rows = [_row(p) for p in plans]
    if as_json or fmt == "json":
        print(
            dumps(
                {
                    "schema": "acesim.kernel/1",
                    "system": cfg.name,
                    "npu": cfg.npu.name,
                    "kernels": rows,
                }
            )
        )
        return
    table = Table(title=f"{cfg.npu.name} ({cfg.name})")
    for col in ("kernel", "time", "FLOP/s", "HBM B/s", "bound", "waves", "how"):
        table.add_column(col, justify="left" if col in ("kernel", "how", "bound") else "right")
    for row, plan in zip(rows, plans, strict=True):
        table.add_row(
            plan.name,
            format_time(plan.time_alone),
            f"{plan.achieved_flops / 1e12:.1f} T",
            format_rate(plan.hbm_bytes / plan.time_alone) if plan.time_alone > 0 else "-",
            plan.bound,
            str(row["waves"]),
            plan.detail or "spread over all units",
        )
    print_table(table)


def _elements(text: str) -> float:
    """A STREAM array length: a whole count or ``2**N``, 1 to ``MAX_COUNT`` (2**53)."""
    if text.startswith("2**"):
        try:
            exponent = strict_int(text[3:])
        except ValueError:
            raise ConfigError("--elements", "expected a count or 2**N", text) from None
        if not 0 <= exponent <= 53:
            raise ConfigError("--elements", f"must be at most 2**53 = {MAX_COUNT}", text)
        value = float(2**exponent)
    else:
        value = parse_quantity(text, "flops", "--elements")
    if not value > 0:
        raise ConfigError("--elements", "must be positive", text)
    if value != math.floor(value):
        raise ConfigError("--elements", "must be a whole number of elements", text)
    if value > MAX_COUNT:
        raise ConfigError("--elements", f"must be at most 2**53 = {MAX_COUNT}", text)
    return value
