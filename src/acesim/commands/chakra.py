"""`acesim export-chakra`: write a workload as Chakra execution traces (one file per rank)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..config.system import SystemConfig
from ..precision import PRECISIONS
from ..training.loops import LOOPS
from .cases import PARALLEL_SIZES_HELP, cli_case
from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    SYSTEM_OPTION,
    err_console,
)
from .show import FORMAT_OPTION, print_table


def export_chakra_command(
    output: Path = typer.Argument(..., help="prefix: files are PREFIX.<rank>.et"),
    workload: str = typer.Option("resnet50", "--workload", "-w", help="zoo name or ASTRA file"),
    system: str = SYSTEM_OPTION,
    npus: int | None = typer.Option(None, "--npus", help="NPU count (keeps the local dimension)"),
    shape: str | None = typer.Option(None, "--shape", help="dimension sizes, e.g. 4x4x8"),
    nodes: int | None = NODES_OPTION,
    iterations: int = typer.Option(1, "--iterations", "-n", help="iterations to unroll"),
    loop: str = typer.Option("layerwise", "--loop", help=f"training loop: {LOOPS.choices()}"),
    batch: int | None = typer.Option(None, "--batch", help="per-NPU batch size (zoo workloads)"),
    precision: str | None = typer.Option(
        None, "--precision", help=f"training precision ({PRECISIONS.choices()}; zoo workloads)"
    ),
    parallel: str | None = typer.Option(
        None,
        "--parallel",
        help=PARALLEL_SIZES_HELP + " Every GPU's graph is written, with its groups.",
    ),
    global_batch: int | None = typer.Option(
        None, "--global-batch", help="LLM models: sequences per iteration"
    ),
    micro_batch: int | None = typer.Option(
        None, "--micro-batch", help="LLM models: sequences per micro-batch (default 1)"
    ),
    seq: int | None = typer.Option(None, "--seq", help="LLM models: sequence length (tokens)"),
    recompute: str | None = typer.Option(
        None, "--recompute", help="LLM models: none, selective or full"
    ),
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    astra: bool = typer.Option(
        False,
        "--astra",
        help="also write ASTRA-sim's network, system and remote-memory files for the traces "
        "(PREFIX.network.yml, PREFIX.system.json, PREFIX.memory.json)",
        metavar="",
    ),
    fmt: str = FORMAT_OPTION,
) -> None:
    """Export a workload as Chakra traces that ASTRA-sim 2.0 can run.

    Compute nodes carry num_ops/tensor_size (a pass's kernels summed, for ASTRA-sim's roofline
    mode) and duration_micros computed by acesim's kernel model on the system's NPU, so
    ASTRA-sim runs them either way. An LLM model (--parallel ...) is written for every GPU, with
    its TP/CP/EP/DP groups in PREFIX.comm_groups.json (ASTRA-sim's comm-group-configuration
    file). --astra also writes ASTRA-sim's network, system and memory files for them.
    """
    case = _export_case(
        workload,
        system,
        {"nodes": nodes, "precision": precision, "sets": sets, "force": force},
        llm={
            "parallel": parallel,
            "global_batch": global_batch,
            "micro_batch": micro_batch,
            "seq": seq,
            "recompute": recompute,
        },
        graph={"npus": npus, "shape": shape, "iterations": iterations, "loop": loop,
               "batch": batch},
    )  # fmt: skip
    summary = _export(case, output, iterations, loop)
    rows = summary.rows()
    if astra:
        rows += write_astra_files(output, case.system)
    table = Table(title=f"Chakra traces {output}", title_justify="left")
    for col in ("item", "value"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    print_table(table)


def _export_case(
    workload: str, system: str, given: dict[str, Any], *, llm: dict[str, Any],
    graph: dict[str, Any],
) -> Any:  # fmt: skip
    """The case to export: an LLM model's options, or a training graph's (export unrolls
    iterations without measuring them: no warm-up rule applies)."""
    from ..runs.kinds import RUN_KINDS

    if RUN_KINDS.get("llm").claims(workload, {"parallel": llm["parallel"]}):  # type: ignore[misc]
        given.update(llm)
    else:
        given.update(graph, warmup=0)
    return cli_case(system, workload, **given)


def _export(case: Any, output: Path, iterations: int, loop: str) -> Any:
    """Write ``case``'s graph as Chakra traces (every GPU's for an LLM model, as exact mode
    runs them); compute times from the kernel model on the system's NPU."""
    from ..engine import Engine
    from ..hardware.npu import NPU
    from ..network.topology import Topology
    from ..runs.llm import llm_graph
    from ..training.loops import build_graph
    from ..workload.chakra import export_chakra
    from ..workload.graph import Graph
    from ..workload.model import Compute

    cfg = case.system
    npu = NPU(Engine(), 0, cfg.npu)

    def compute_time(c: Compute) -> float:
        return npu.kernels_time_alone(c.kernels)

    if case.kind == "llm":
        graph = llm_graph(case)
        extra: dict[str, Any] = {"topology": Topology(cfg.network, cfg.collective)}
    else:
        work = case.workload
        graph = (
            work
            if isinstance(work, Graph)
            else build_graph(work, iterations, loop, case.options.bucket_size)
        )
        extra = {"npus": cfg.network.total_npus if len(graph.ranks) == 1 else None}
    return export_chakra(
        graph, str(output), dim_sizes=list(cfg.network.shape), compute_time=compute_time, **extra
    )


def write_astra_files(prefix: Path, cfg: SystemConfig) -> list[tuple[str, str]]:
    """ASTRA-sim's network, system and remote-memory files of ``cfg`` beside the traces
    (:mod:`acesim.network.astra`); what they cannot express on stderr. The rows the export's
    table gets: each file, and the options that run the traces with them."""
    import json

    import yaml

    from ..network.astra import astra_files

    files = astra_files(cfg)
    paths = {
        "network": Path(f"{prefix}.network.yml"),
        "system": Path(f"{prefix}.system.json"),
        "memory": Path(f"{prefix}.memory.json"),
    }
    header = f"# ASTRA-sim analytical network of acesim system {cfg.name} (acesim export-chakra)\n"
    paths["network"].write_text(
        header + yaml.safe_dump(files.network, default_flow_style=None, sort_keys=False),
        encoding="utf-8",
    )
    paths["system"].write_text(json.dumps(files.system, indent=2) + "\n", encoding="utf-8")
    paths["memory"].write_text(json.dumps(files.memory, indent=2) + "\n", encoding="utf-8")
    for note in files.notes:
        err_console.print(f"not in ASTRA-sim's files: {escape(note)}", highlight=False)
    options = (
        f"--workload-configuration={prefix} --network-configuration={paths['network']} "
        f"--system-configuration={paths['system']} "
        f"--remote-memory-configuration={paths['memory']}"
    )
    return [(f"ASTRA-sim {what} file", str(path)) for what, path in paths.items()] + [
        ("ASTRA-sim options", options)
    ]
