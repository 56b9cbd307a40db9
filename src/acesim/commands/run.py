"""`acesim run`: one case of any run kind (a training graph, an LLM model), on one endpoint
kind or comparing several, each in its best variant (the one run path, :mod:`acesim.runs`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..precision import PRECISIONS
from ..results.jsonout import dumps
from ..runs.compare import Comparison, Job, assemble, default_endpoints, plan, run_jobs
from ..runs.estimate import Estimate
from ..runs.single import run_case, variant_case
from ..training.loops import LOOPS
from ..units import format_time
from .cases import (
    COMPUTE_SPREAD_OPTION,
    LINKS_OPTION,
    MAX_MESSAGES_OPTION,
    NPU_TYPES_OPTION,
    PARALLEL_HELP,
    PLACEMENT_OPTION,
    STRAGGLERS_OPTION,
    cli_case,
    endpoint_kinds,
)
from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    SYSTEM_OPTION,
    check_output_path,
    console,
    err_console,
    progress,
)
from .show import (
    FORMAT_OPTION,
    layer_table,
    print_table,
    show_comparison,
    show_footnotes,
    show_result,
)

DEFAULT_WORKLOAD = "resnet50"
#: Runs estimated to take more CPU seconds than this say so before they start.
LONG_RUN_SECONDS = 5.0


WORKLOAD_OPTION = typer.Option(
    DEFAULT_WORKLOAD,
    "--workload",
    "-w",
    help="zoo name, ASTRA-sim .txt file, Chakra prefix or LLM model",
)
ENDPOINT_OPTION = typer.Option(
    None,
    "--endpoint",
    help=f"run one endpoint kind ({ENDPOINT_KINDS.choices()}) instead of comparing",
)
ENDPOINTS_OPTION = typer.Option(
    None,
    "--endpoints",
    help="endpoint kinds to compare, comma-separated (default: "
    + ",".join(default_endpoints())
    + "; sm names the baseline's SM kernels); the reference kind is always included; "
    "each kind runs its searched variants (the baseline's SM splits) and keeps the best",
)
SEARCH_OPTION = typer.Option(
    False,
    "--search",
    help="with --endpoint: run every variant (baseline splits), keep the best",
    metavar="",
)
NPUS_OPTION = typer.Option(None, "--npus", help="NPU count (keeps the local dimension)")
SHAPE_OPTION = typer.Option(None, "--shape", help="dimension sizes, e.g. 4x4x8")
ITERATIONS_OPTION = typer.Option(
    None, "--iterations", "-n", help="iterations to simulate (default 3)"
)
WARMUP_OPTION = typer.Option(
    None, "--warmup", help="first iterations dropped before measuring (default 1)"
)
STOP_OPTION = typer.Option(
    None,
    "--stop",
    help="end (default): every iteration run to its end; measured: stop once every figure "
    "of the measured window is final (the same figures, the last iteration not run to its "
    "end: about a third less work at 3 iterations; makespan is then that instant)",
)
LOOP_OPTION = typer.Option(
    None, "--loop", help=f"training loop: {LOOPS.choices()} (default layerwise)"
)
BUCKET_OPTION = typer.Option(
    None, "--bucket-size", help="bucket size for --loop bucketed (default 25 MiB)"
)
BATCH_OPTION = typer.Option(
    None, "--batch", help="per-NPU batch size (zoo workloads; default: the system's setting)"
)
PRECISION_OPTION = typer.Option(
    None,
    "--precision",
    help=f"training precision ({PRECISIONS.choices()}; default: the system's setting or "
    "the model's; LLM models: bf16)",
)
EXACT_OPTION = typer.Option(False, "--exact", help="simulate every NPU", metavar="")
COMPOSED_OPTION = typer.Option(
    False,
    "--composed",
    help="LLM runs: compose the iteration from each distinct pipeline pass simulated once "
    "(the default where the iteration composes; an approximation of class mode: within "
    "0.03% of it on the benchmark cases, docs/performance.md)",
    metavar="",
)
FULL_OPTION = typer.Option(
    False,
    "--full",
    help="LLM runs: class mode's full simulation, every pass of every micro-batch (instead of "
    "composing the iteration from each distinct pass; 10-40x the CPU)",
    metavar="",
)
OUTPUT_OPTION = typer.Option(None, "--output", "-o", help="write JSON results here")
TRACE_OPTION = typer.Option(None, "--trace", help="write a Perfetto/Chrome trace here")
AS_JSON_OPTION = typer.Option(False, "--json", help="print JSON instead of tables", metavar="")
LAYERS_OPTION = typer.Option(False, "--layers", help="also print per-layer rows", metavar="")
LAYERS_CSV_OPTION = typer.Option(
    None, "--layers-csv", help="write the per-layer rows to this CSV file (seconds, bytes)"
)
PARALLEL_OPTION = typer.Option(None, "--parallel", help=PARALLEL_HELP)
GLOBAL_BATCH_OPTION = typer.Option(
    None,
    "--global-batch",
    help="LLM models: sequences per iteration (default: the smallest the configuration runs: "
    "a micro-batch per data-parallel replica, as many per pipeline as its schedule needs)",
)
MICRO_BATCH_OPTION = typer.Option(
    None, "--micro-batch", help="LLM models: sequences a micro-batch (default 1)"
)
SEQ_OPTION = typer.Option(
    None, "--seq", help="LLM models: tokens a sequence (default: the model's)"
)
RECOMPUTE_OPTION = typer.Option(
    None, "--recompute", help="LLM models: activation recomputation none, selective or full"
)
WORKERS_OPTION = typer.Option(
    None,
    "--workers",
    help="a comparison: local processes running its runs side by side (default 1, in this "
    "process; the same results)",
)
MAX_MICRO_BATCHES_OPTION = typer.Option(
    None,
    "--max-micro-batches",
    help="LLM models: the work bound on micro-batches an iteration (default 4096, about a "
    "quarter of an hour); raise it knowingly",
)


def run_command(
    system: str = SYSTEM_OPTION,
    workload: str = WORKLOAD_OPTION,
    endpoint: str | None = ENDPOINT_OPTION,
    endpoints: str | None = ENDPOINTS_OPTION,
    search: bool = SEARCH_OPTION,
    npus: int | None = NPUS_OPTION,
    shape: str | None = SHAPE_OPTION,
    nodes: int | None = NODES_OPTION,
    iterations: int | None = ITERATIONS_OPTION,
    warmup: int | None = WARMUP_OPTION,
    stop: str | None = STOP_OPTION,
    loop: str | None = LOOP_OPTION,
    bucket: str | None = BUCKET_OPTION,
    batch: int | None = BATCH_OPTION,
    precision: str | None = PRECISION_OPTION,
    exact: bool = EXACT_OPTION,
    composed: bool = COMPOSED_OPTION,
    full: bool = FULL_OPTION,
    stragglers: list[str] = STRAGGLERS_OPTION,
    compute_spread: str | None = COMPUTE_SPREAD_OPTION,
    links: list[str] = LINKS_OPTION,
    npu_types: list[str] = NPU_TYPES_OPTION,
    placement: Path | None = PLACEMENT_OPTION,
    output: Path | None = OUTPUT_OPTION,
    trace: Path | None = TRACE_OPTION,
    as_json: bool = AS_JSON_OPTION,
    fmt: str = FORMAT_OPTION,
    layers: bool = LAYERS_OPTION,
    layers_csv: Path | None = LAYERS_CSV_OPTION,
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    parallel: str | None = PARALLEL_OPTION,
    global_batch: int | None = GLOBAL_BATCH_OPTION,
    micro_batch: int | None = MICRO_BATCH_OPTION,
    seq: int | None = SEQ_OPTION,
    recompute: str | None = RECOMPUTE_OPTION,
    max_messages: int | None = MAX_MESSAGES_OPTION,
    max_micro_batches: int | None = MAX_MICRO_BATCHES_OPTION,
    workers: int | None = WORKERS_OPTION,
) -> None:
    """Simulate training iterations; by default compare the best baseline, ACE and ideal."""
    as_json = as_json or fmt == "json"  # the result document, as --json prints it
    given = dict(locals())
    kinds = _check_flags(given)
    case = cli_case(**{k: v for k, v in given.items() if k not in _COMMAND_FLAGS})
    if (layers or layers_csv is not None) and case.kind != "training":
        flag = "--layers" if layers else "--layers-csv"
        raise ConfigError(flag, "applies to training graphs (rows of layers)", True)
    labels: list[str] | None = None
    if endpoint is not None:
        payload, results = _single(variant_case(case, endpoint, None), trace, given)
    else:
        comp = _compare(case, kinds, workers or 1)
        payload, results = comp.to_dict(), [o.best for o in comp.endpoints.values()]
        labels = [o.label for o in comp.endpoints.values()]
        if not as_json:
            show_comparison(comp)
    if as_json:
        console.out(dumps(payload, indent=2))
    if output is not None:
        output.write_text(dumps(payload, indent=2), encoding="utf-8")
        err_console.print(f"results written to {output}")
    show_footnotes(results, system, assumptions=not as_json, labels=labels)


#: The command's own flags (output and what to run), not the case's.
_COMMAND_FLAGS = (
    "endpoint",
    "endpoints",
    "output",
    "trace",
    "as_json",
    "fmt",
    "layers",
    "layers_csv",
    "workers",
)


def _check_flags(given: dict[str, Any]) -> list[str] | None:
    """Check the output paths and the flags that need one endpoint, before anything runs;
    the endpoint kinds to compare (None: the default list)."""
    endpoint, endpoints = given["endpoint"], given["endpoints"]
    for flag, key, suffix in (
        ("--output", "output", ".json"),
        ("--trace", "trace", ".json"),
        ("--layers-csv", "layers_csv", ".csv"),
    ):
        if given[key] is not None:
            check_output_path(given[key], flag, (suffix,))
    for flag, key, why in (
        ("--trace", "trace", "needs one --endpoint (a trace shows one run)"),
        ("--layers", "layers", "needs one --endpoint (rows of one run)"),
        ("--layers-csv", "layers_csv", "needs one --endpoint (rows of one run)"),
        ("--search", "search", "needs one --endpoint (a comparison always searches)"),
    ):
        if given[key] and endpoint is None:
            raise ConfigError(flag, why, str(given[key]))
    if given["trace"] is not None and given["stop"] == "measured":
        raise ConfigError(
            "--stop",
            "a trace records the whole run, and measured stops before its end: use end with "
            "--trace",
            "measured",
        )
    if given["workers"] is not None:
        if given["workers"] < 1:
            raise ConfigError("--workers", "must be at least 1", given["workers"])
        if endpoint is not None:
            raise ConfigError(
                "--workers",
                "runs a comparison's runs side by side: not with --endpoint",
                given["workers"],
            )
    if endpoint is not None:
        ENDPOINT_KINDS.get(endpoint, "--endpoint")
    return endpoint_kinds(endpoint, endpoints)


def _label(case: Any) -> str:
    name = getattr(case, "workload_name", None) or case.model.name
    return f"{name} on {case.system.name}"


def _long_run(estimate: Estimate, what: str) -> bool:
    """Say what a run will simulate and its CPU, before it starts, where that is long; whether
    it was said."""
    if estimate.seconds <= LONG_RUN_SECONDS:
        return False
    err_console.print(
        f"[dim]{what} simulates {estimate.nodes:,} graph nodes and about "
        f"{estimate.messages:,} messages: roughly {format_time(estimate.seconds)} of CPU[/dim]"
    )
    return True


def _compare(case: Any, kinds: list[str] | None, workers: int) -> Comparison:
    """The endpoint comparison of ``case`` (its runs on ``workers`` processes), drawn as it
    goes: a bar of its runs and, for the run in this process, one of its graph nodes."""
    jobs = plan(case, kinds)
    with progress() as bar:
        runs = bar.add_task(_label(case), total=len(jobs))
        nodes = bar.add_task("graph nodes", total=None, visible=False)  # shown once told

        def moved(job: Job, done: int, total: int) -> None:
            label = f"{job.variant}: graph nodes"
            bar.update(nodes, completed=done, total=total, description=label, visible=True)

        told = _comparison_estimate(jobs)
        return assemble(run_jobs(jobs, workers, lambda: bar.advance(runs), told, moved), kinds)


def _comparison_estimate(jobs: list[Job]) -> Callable[[Job, Estimate], None]:
    """A comparison's ``on_estimate`` (its runs in this process): each long run of ``jobs``
    said before it starts, the first with the option that runs them side by side."""
    position = {job.key: i + 1 for i, job in enumerate(jobs)}
    hinted = len(jobs) < 2

    def told(job: Job, estimate: Estimate) -> None:
        nonlocal hinted
        kind = ENDPOINT_KINDS.get(job.case.system.endpoint.kind).label
        what = f"the {kind} run ({job.variant}), {position[job.key]} of {len(jobs)},"
        if _long_run(estimate, what) and not hinted:
            hinted = True
            err_console.print(
                f"[dim](--workers N runs the comparison's {len(jobs)} runs side by side, the "
                "same results)[/dim]"
            )

    return told


def _single(case: Any, trace: Path | None, given: dict[str, Any]) -> tuple[Any, list[Any]]:
    """Run one endpoint kind (its variants with --search); print, trace, per-layer rows."""
    with progress() as bar:
        task = bar.add_task(f"{_label(case)}: graph nodes", total=None)

        result, execution = run_case(
            case,
            trace=trace is not None,
            on_estimate=lambda estimate: _long_run(estimate, "this run"),
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    if trace is not None:
        from ..results.trace import write_trace

        write_trace(execution, trace)
        err_console.print(f"trace written to {trace}")
    if not given["as_json"]:
        show_result(result)
    if given["layers"] or given["layers_csv"] is not None:
        _layers(result, given)
    return result.to_dict(), [result]


def _layers(result: Any, given: dict[str, Any]) -> None:
    """Per-layer rows of a training run (table and/or CSV)."""
    if given["layers"]:
        print_table(layer_table(result))
    if given["layers_csv"] is not None:
        result.layers_to_pandas().to_csv(given["layers_csv"], index=False)
        err_console.print(f"per-layer rows written to {given['layers_csv']}")
