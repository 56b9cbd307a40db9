"""`acesim membw`: HBM bandwidth needed to drive the network, baseline vs ACE."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ..errors import ConfigError
from ..network.ops import COLLECTIVE_OPS
from ..results.jsonout import dumps
from ..units import format_rate, parse_quantity
from .common import (
    FORCE_OPTION,
    IMAGE_SUFFIXES,
    SETS_OPTION,
    SYSTEM_OPTION,
    check_output_path,
    console,
    err_console,
    parse_sets,
    progress,
)
from .show import FORMAT_OPTION, print_table

if TYPE_CHECKING:
    from ..studies.membw import MembwRow

#: Most NPUs one count of ``acesim membw --npus`` may have: the analysis plans a platform per
#: count, at about :data:`PLANNING_SECONDS_PER_NPU` each (measured on the CI machine kind with
#: ``--no-simulate``: 4.0 s user at 16,384 NPUs, 7.0 s at 65,536), so 2**20 is about a minute
#: and 2**32 (which the network validation allows) would be three days.
MAX_MEMBW_NPUS = 2**20
PLANNING_SECONDS_PER_NPU = 63e-6


def membw_command(
    system: str = SYSTEM_OPTION,
    op: str = typer.Option("all-reduce", "--op", help="collective to analyse"),
    size: str = typer.Option("64 MiB", "--size", help="collective size"),
    npus: str = typer.Option("16,32,64,128,256,512,1024", "--npus", help="NPU counts"),
    target: float = typer.Option(
        0.95,
        "--target",
        help="the simulated need is the HBM bandwidth at which each endpoint reaches this "
        "fraction of the network bandwidth it reaches with ample HBM (its own, not the ideal)",
    ),
    no_simulate: bool = typer.Option(
        False, "--no-simulate", help="byte accounting only", metavar=""
    ),
    plot: Path | None = typer.Option(None, "--plot", help="write the figure (.png, .svg or .pdf)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON", metavar=""),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    fmt: str = FORMAT_OPTION,
) -> None:
    """Memory-bandwidth analysis: HBM bytes per network byte (the accounting) and the HBM
    bandwidth each endpoint needs, simulated: to reach its own bandwidth, and to drive the
    same network bandwidth as the other with ample resources of its own."""
    if plot is not None:
        check_output_path(plot, "--plot", IMAGE_SUFFIXES)
    from ..config.resolve import resolve_system
    from ..studies.membw import membw_analysis, plot_membw

    COLLECTIVE_OPS.get(op, "--op")
    if not 0 < target <= 1:
        raise ConfigError("--target", "must be in (0, 1]", target)
    counts = _npu_counts(npus)
    nbytes = parse_quantity(size, "size", "--size")
    if nbytes <= 0:
        raise ConfigError("--size", "must be positive", size)
    cfg = resolve_system(system, overrides=parse_sets(sets), force=force)
    with progress() as bar:
        task = bar.add_task("membw", total=len(counts))
        rows = membw_analysis(
            cfg,
            npus=counts,
            op=op,
            size=nbytes,
            target=target,
            simulate_need=not no_simulate,
            equal_bandwidth=not no_simulate,
            progress=lambda: bar.advance(task),
        )
    if plot is not None:
        plot_membw(rows, str(plot), title=f"{op} {size} on {cfg.name}")
        err_console.print(f"figure written to {plot}")
    if as_json or fmt == "json":
        console.out(
            dumps(
                {
                    "schema": "acesim.membw/1",
                    "system": cfg.name,
                    "rows": [r.to_dict() for r in rows],
                },
                indent=2,
            )
        )
        return
    print_table(_membw_table(rows, f"{op} {size} on {cfg.name}"))


def _npu_counts(npus: str) -> list[int]:
    """The NPU counts of ``--npus`` (comma-separated), each 1 to :data:`MAX_MEMBW_NPUS`."""
    try:
        counts = [int(x) for x in npus.split(",")]
    except ValueError:
        raise ConfigError("--npus", "expected comma-separated integers", npus) from None
    for count in counts:
        if not 1 <= count <= MAX_MEMBW_NPUS:
            raise ConfigError(
                "--npus",
                f"each count must be 1 to {MAX_MEMBW_NPUS:,} (2**20: planning a platform costs "
                f"about {PLANNING_SECONDS_PER_NPU * 1e6:.0f} us per NPU, about a minute at the "
                "bound)",
                count,
            )
    return counts


def _membw_table(rows: list[MembwRow], what: str) -> Table:
    """The analysis as a table, one row per NPU count (``what``: the collective and system)."""
    table = Table(title=f"HBM bytes per network byte: {what}")
    for col in (
        "NPUs",
        "shape",
        "baseline",
        "ACE",
        "saving",
        "net bw (ideal)",
        "HBM needed baseline",
        "HBM needed ACE",
        "equal net bw",
        "baseline needs",
        "ACE needs",
        "saving (simulated)",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.npus),
            "x".join(map(str, r.shape)),
            f"{r.baseline_ratio:.3f}",
            f"{r.ace_ratio:.3f}",
            f"{r.saving:.2f}x",
            format_rate(r.network_bandwidth),
            format_rate(r.baseline_needed_hbm) if r.baseline_needed_hbm else "-",
            format_rate(r.ace_needed_hbm) if r.ace_needed_hbm else "-",
            format_rate(r.equal_network_bandwidth) if r.equal_network_bandwidth else "-",
            format_rate(r.baseline_equal_hbm) if r.baseline_equal_hbm else "-",
            format_rate(r.ace_equal_hbm) if r.ace_equal_hbm else "-",
            f"{r.equal_saving:.2f}x" if r.equal_saving else "-",
        )
    return table
