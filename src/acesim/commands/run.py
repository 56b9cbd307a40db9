from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..config.presets import DEFAULT_PRESET
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..precision import PRECISIONS
from ..results.energy import energy_rows
from ..results.jsonout import dumps
from ..results.run import RunResult
from ..runs.compare import (
    Comparison,
    assemble,
    check_endpoints,
    default_endpoints,
    plan,
    run_jobs,
)
from ..runs.single import MESSAGES_PER_SECOND, run_case, variant_case
from ..training.loops import LOOPS
from ..units import format_rate, format_size, format_time
from .cases import VARIATION_HELP, cli_case
from .common import (
    NODES_HELP,
    SET_HELP,
    check_output_path,
    console,
    err_console,
    parse_sets,
    progress,
)
from .llm import PARALLEL_HELP, is_llm, run_llm_command

DEFAULT_WORKLOAD = "resnet50"
#: Why a data-parallel flag is refused for an LLM model.
LLM_UNUSED = (
    "does not apply to LLM runs (they simulate one steady-state iteration; size them with "
    "--nodes, --global-batch, --micro-batch, --seq and --parallel)"
)
#: Runs estimated to send more messages than this say how long they will take (~5 s).
LONG_RUN_MESSAGES = 350_000


def run_command(
    system: str = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file"),
    workload: str = typer.Option(
        DEFAULT_WORKLOAD, "--workload", "-w", help="zoo name, ASTRA-sim .txt file or Chakra prefix"
    ),
    endpoint: str | None = typer.Option(
        None,
        "--endpoint",
        help=f"run one endpoint kind ({ENDPOINT_KINDS.choices()}) instead of comparing",
    ),
    endpoints: str | None = typer.Option(
        None,
        "--endpoints",
        help="endpoint kinds to compare, comma-separated (default: "
        + ",".join(default_endpoints())
        + "; sm names the baseline's SM kernels); the reference kind is always included; "
        "each kind runs its searched variants (the baseline's SM splits) and keeps the best",
    ),
    search: bool = typer.Option(
        False,
        "--search",
        help="with --endpoint: run every variant (baseline splits), keep the best",
        metavar="",
    ),
    npus: int | None = typer.Option(None, "--npus", help="NPU count (keeps the local dimension)"),
    shape: str | None = typer.Option(None, "--shape", help="dimension sizes, e.g. 4x4x8"),
    nodes: int | None = typer.Option(None, "--nodes", help=NODES_HELP),
    iterations: int = typer.Option(3, "--iterations", "-n", help="iterations to simulate"),
    warmup: int = typer.Option(1, "--warmup", help="first iterations dropped before measuring"),
    loop: str = typer.Option("layerwise", "--loop", help=f"training loop: {LOOPS.choices()}"),
    bucket: str = typer.Option("25 MiB", "--bucket-size", help="bucket size for --loop bucketed"),
    batch: int | None = typer.Option(
        None, "--batch", help="per-NPU batch size (zoo workloads; default: the system's setting)"
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help=f"training precision ({PRECISIONS.choices()}; zoo workloads; default: the "
        "system's setting or the model's)",
    ),
    exact: bool = typer.Option(False, "--exact", help="simulate every NPU", metavar=""),
    stragglers: list[str] = typer.Option([], "--straggler", help=VARIATION_HELP["straggler"]),
    compute_spread: str | None = typer.Option(
        None, "--compute-spread", help=VARIATION_HELP["compute_spread"]
    ),
    links: list[str] = typer.Option([], "--link", help=VARIATION_HELP["link"]),
    npu_types: list[str] = typer.Option([], "--npu", help=VARIATION_HELP["npu"]),
    placement: Path | None = typer.Option(
        None, "--placement", help=VARIATION_HELP["placement"], metavar="FILE"
    ),
    output: Path | None = typer.Option(None, "--output", "-o", help="write JSON results here"),
    trace: Path | None = typer.Option(None, "--trace", help="write a Perfetto/Chrome trace here"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables", metavar=""),
    layers: bool = typer.Option(False, "--layers", help="also print per-layer rows", metavar=""),
    layers_csv: Path | None = typer.Option(
        None, "--layers-csv", help="write the per-layer rows to this CSV file (seconds, bytes)"
    ),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP),
    parallel: str | None = typer.Option(None, "--parallel", help=PARALLEL_HELP),
    global_batch: int | None = typer.Option(
        None,
        "--global-batch",
        help="LLM models: sequences per iteration (default: one micro-batch)",
    ),
    micro_batch: int = typer.Option(1, "--micro-batch", help="LLM models: sequences a micro-batch"),
    seq: int | None = typer.Option(
        None, "--seq", help="LLM models: tokens a sequence (default: the model's)"
    ),
    recompute: str | None = typer.Option(
        None, "--recompute", help="LLM models: activation recomputation none, selective or full"
    ),
) -> None:
    """Simulate training iterations; by default compare the best baseline, ACE and ideal."""
    if output is not None:
        check_output_path(output, "--output", (".json",))
    if trace is not None:
        check_output_path(trace, "--trace", (".json",))
        if endpoint is None:
            raise ConfigError("--trace", "needs one --endpoint (a trace shows one run)", str(trace))
    if layers_csv is not None:
        check_output_path(layers_csv, "--layers-csv", (".csv",))
    if (layers or layers_csv is not None) and endpoint is None:
        flag = "--layers" if layers else "--layers-csv"
        raise ConfigError(flag, "needs one --endpoint (rows of one run)")
    if endpoint is not None:
        ENDPOINT_KINDS.get(endpoint, "--endpoint")
        if endpoints is not None:
            raise ConfigError("--endpoints", "give either --endpoint or --endpoints", endpoints)
    elif search:
        raise ConfigError("--search", "needs one --endpoint (a comparison always searches)")
    kinds = (
        check_endpoints([e.strip() for e in endpoints.split(",") if e.strip()], "--endpoints")
        if endpoints is not None
        else None
    )
    if is_llm(workload, parallel):
        if npu_types:
            raise ConfigError(
                "--npu",
                "is not supported for LLM runs (their MFU and memory check use the system's "
                "one NPU)",
                npu_types[0],
            )
        if placement is not None:
            raise ConfigError(
                "--placement",
                "is not supported for LLM runs (their parallel configuration places the ranks)",
                str(placement),
            )
        for flag, given, value in (
            ("--layers", layers, layers),
            ("--layers-csv", layers_csv is not None, layers_csv),
            ("--search", search, search),
            ("--npus", npus is not None, npus),
            ("--shape", shape is not None, shape),
            ("--batch", batch is not None, batch),
            ("--loop", loop != "layerwise", loop),
            ("--bucket-size", bucket != "25 MiB", bucket),
            ("--iterations", iterations != 3, iterations),
            ("--warmup", warmup != 1, warmup),
        ):
            if given:
                raise ConfigError(flag, LLM_UNUSED, str(value))
        run_llm_command(
            system=system,
            workload=workload,
            parallel=parallel,
            global_batch=global_batch,
            micro_batch=micro_batch,
            seq=seq,
            recompute=recompute,
            precision=precision,
            nodes=nodes,
            endpoint=endpoint,
            endpoints=kinds,
            as_json=as_json,
            output=output,
            overrides=parse_sets(sets),
            trace=trace,
            exact=exact,
            stragglers=stragglers,
            compute_spread=compute_spread,
            links=links,
        )
        return
    case = cli_case(
        system,
        workload,
        npus=npus,
        shape=shape,
        nodes=nodes,
        iterations=iterations,
        warmup=warmup,
        loop=loop,
        bucket=bucket,
        exact=exact,
        batch=batch,
        precision=precision,
        search=search,
        overrides=parse_sets(sets),
        stragglers=stragglers,
        compute_spread=compute_spread,
        links=links,
        npu_types=npu_types,
        placement=placement,
    )
    cfg = case.system
    payload: dict[str, Any]
    if endpoint is not None:
        with progress() as bar:
            task = bar.add_task(f"{case.workload_name} on {cfg.name}", total=None)

            def estimated(messages: int) -> None:
                if messages > LONG_RUN_MESSAGES:
                    err_console.print(
                        f"[dim]this run sends about {messages:,} messages: roughly "
                        f"{messages / MESSAGES_PER_SECOND:.0f} s[/dim]"
                    )

            result, execution = run_case(
                variant_case(case, endpoint, None),
                trace=trace is not None,
                on_estimate=estimated,
                on_iteration=lambda done, total: bar.update(task, completed=done, total=total),
            )
        payload = result.to_dict()
        if trace is not None:
            _write_trace(execution, trace)
        if as_json:
            console.out(dumps(payload, indent=2))
        else:
            _single_table(console, result)
            if layers:
                _layer_table(console, result)
        if layers_csv is not None:
            result.layers_to_pandas().to_csv(layers_csv, index=False)
            err_console.print(f"per-layer rows written to {layers_csv}")
    else:
        jobs = plan(case, kinds)
        with progress() as bar:
            task = bar.add_task(f"{case.workload_name} on {cfg.name}", total=len(jobs))
            comp = assemble(run_jobs(jobs, 1, lambda: bar.advance(task)), kinds)
        payload = comp.to_dict()
        if as_json:
            console.out(dumps(payload, indent=2))
        else:
            _comparison_table(console, comp)
    if output is not None:
        output.write_text(dumps(payload, indent=2), encoding="utf-8")
        err_console.print(f"results written to {output}")
    count = sum(1 for s in cfg.sources.values() if s.assumed)
    if count and not as_json:
        err_console.print(
            f"[dim]{count} parameters of {cfg.name} are assumptions "
            f"(see `acesim assumptions {system}`).[/dim]"
        )


def _write_trace(execution: Any, path: Path) -> None:
    from ..results.trace import write_trace

    write_trace(execution, path)


def _rows(result: RunResult) -> list[tuple[str, str]]:
    rows = [
        ("iteration time", format_time(result.iteration_time)),
        ("compute (as run)", format_time(result.compute_time)),
        ("compute (alone)", format_time(result.compute_time_alone)),
        ("compute slowdown", f"{result.compute_slowdown:.3f}x"),
        ("exposed communication", format_time(result.exposed_comm)),
        ("communication time", format_time(result.comm_time)),
    ]
    for dim, util in result.net_util.items():
        rows.append((f"net util {dim}", f"{100 * util:.1f}%"))
    rows.append(("net util effective", f"{100 * result.net_util_effective:.1f}%"))
    rows.append(("HBM bw compute", format_rate(result.hbm_bw_compute)))
    rows.append(("HBM bw comm", format_rate(result.hbm_bw_comm)))
    rows.append(("compute units held by comm", f"{result.comm_units_held:.2f}"))
    if result.bound:
        share = result.bound_by[result.bound] / result.iteration_time
        rows.append(("bound by", f"{result.bound} ({100 * share:.0f}%)"))
    if result.comm_bound and result.comm_time > 0:
        share = min(result.comm_bound_by[result.comm_bound] / result.comm_time, 1.0)
        rows.append(("comm bound by", f"{result.comm_bound} ({100 * share:.0f}% of comm)"))
    return rows + energy_rows(result.energy)


def _single_table(console: Any, result: RunResult) -> None:
    info = result.info
    console.print(info.describe(), highlight=False, soft_wrap=True)
    table = Table(title=f"{info.endpoint} endpoint ({info.variant})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in _rows(result):
        table.add_row(name, value)
    console.print(table)
    bounds = Table(title="what bound the iteration (time per iteration)")
    bounds.add_column("resource")
    bounds.add_column("time", justify="right")
    bounds.add_column("share", justify="right")
    for name, seconds in result.bound_by.items():
        if seconds / result.iteration_time >= 0.001:
            share = f"{100 * seconds / result.iteration_time:.1f}%"
            bounds.add_row(name, format_time(seconds), share)
    console.print(bounds)


def _layer_table(console: Any, result: RunResult) -> None:
    table = Table(title="per-layer times, mean per measured iteration")
    for col in ("layer", "fwd", "in grad", "wt grad", "collective", "bytes"):
        # Names wrap instead of being cut; the number columns never wrap.
        if col == "layer":
            table.add_column(col, justify="left", overflow="fold", ratio=1)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for row in result.layers:
        table.add_row(
            row.name,
            format_time(row.fwd),
            format_time(row.ig),
            format_time(row.wg),
            format_time(row.comm),
            format_size(row.comm_bytes),
        )
    console.print(table)


def _comparison_table(console: Any, comp: Comparison) -> None:
    best = comp.best_baseline
    table = Table(title=best.info.describe())
    table.add_column("metric")
    heads = []
    for kind, out in comp.endpoints.items():
        if kind == comp.reference:
            heads.append(f"best {out.label} ({out.best.info.variant})")
        else:
            heads.append(out.label)
    for name in heads:
        table.add_column(name, justify="right")
    rows = [_rows(out.best) for out in comp.endpoints.values()]
    for i, (name, _) in enumerate(rows[0]):
        table.add_row(name, *(r[i][1] for r in rows))
    table.add_row(
        f"speedup vs best {comp.endpoints[comp.reference].label}",
        *(f"{comp.speedup(kind):.3f}x" for kind in comp.endpoints),
    )
    table.add_row(
        "net util gain (effective)",
        *(f"{comp.net_util_gain(kind):.2f}x" for kind in comp.endpoints),
    )
    console.print(table)
    for out in comp.endpoints.values():
        if len(out.tried) <= 1:
            continue
        variants = Table(title=f"{out.label} variants tried")
        for col in (
            "variant",
            "settings that vary",
            "iteration time",
            "compute slowdown",
            "exposed comm",
        ):
            variants.add_column(col, justify="right")
        keys = [
            k
            for k in out.tried[0].info.settings
            if len({repr(r.info.settings.get(k)) for r in out.tried}) > 1
        ]
        for r in out.tried:
            settings = ", ".join(f"{k}={r.info.settings.get(k)}" for k in keys)
            variants.add_row(
                r.info.variant,
                settings,
                format_time(r.iteration_time),
                f"{r.compute_slowdown:.3f}x",
                format_time(r.exposed_comm),
            )
        console.print(variants)
