"""`acesim collective`: one collective over a range of sizes (nccl-tests style table)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from ..config.resolve import derive
from ..config.system import PROTOCOLS, SystemConfig
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..network.algorithms import ALGORITHMS, algorithm_name
from ..network.ops import COLLECTIVE_OPS
from ..results.collective import CollectiveResult
from ..results.jsonout import dumps
from ..results.protocol import assumptions
from ..runs.collective import CollectiveCase, make_collective_case
from ..runs.compare import Comparison, assemble, plan, run_jobs
from ..runs.single import run_case
from ..units import (
    column_scale,
    format_rate,
    format_size,
    format_time,
    parse_quantity,
    parse_size_range,
)
from .cases import (
    COMPUTE_SPREAD_OPTION,
    LINKS_OPTION,
    MAX_MESSAGES_OPTION,
    NPU_TYPES_OPTION,
    STRAGGLERS_OPTION,
    cli_system,
    endpoint_kinds,
    flags,
    variation_options,
    with_channels,
)
from .common import (
    FORCE_OPTION,
    NODES_OPTION,
    SETS_OPTION,
    SYSTEM_OPTION,
    console,
    err_console,
    progress,
    system_title,
)
from .show import FORMAT_OPTION, assumptions_note, print_table, show_footnotes

OP_OPTION = typer.Option("all-reduce", "--op", help=COLLECTIVE_OPS.choices())
SIZES_OPTION = typer.Option("1KiB:1GiB", "--sizes", help="MIN:MAX[:xF], a list a,b,c, or one size")
ENDPOINT_OPTION = typer.Option(
    None, "--endpoint", help=f"endpoint kind: {ENDPOINT_KINDS.choices()}"
)
EXACT_OPTION = typer.Option(
    False, "--exact", help="simulate every NPU, not one representative", metavar=""
)
SEARCH_OPTION = typer.Option(
    False,
    "--search",
    help="run every variant of the endpoint kind (the baseline's splits) per size, keep the "
    "fastest",
    metavar="",
)
WITH_COMPUTE_OPTION = typer.Option(
    None, "--with-compute", help="concurrent kernel 'FLOPS,BYTES' (e.g. '1e12,2e9')"
)
PROTO_OPTION = typer.Option(
    None,
    "--proto",
    help="force an NCCL protocol (LL, LL128, Simple; like NCCL_PROTO) "
    "where the system configures collective.protocols; default: the fastest predicted",
)
ALGO_OPTION = typer.Option(
    None,
    "--algo",
    help=f"force an algorithm ({ALGORITHMS.choices()}; like NCCL_ALGO, whose names "
    "Tree, NVLS, NVLSTree and CollNetDirect are accepted too); "
    "default: the fastest predicted among the system's collective.choices",
)
CHANNELS_OPTION = typer.Option(
    None,
    "--channels",
    help="NCCL channels (one thread block on one SM each) the SM "
    "kernels run, like NCCL_MIN/MAX_NCHANNELS; default: the endpoint's settings",
)
ROOT_OPTION = typer.Option(
    None,
    "--root",
    help="the root of a rooted operation (broadcast, reduce): its position in the group, "
    "0 to n-1; default 0 (rooted operations run in exact mode)",
)
AS_JSON_OPTION = typer.Option(False, "--json", help="print JSON instead of a table", metavar="")
ENDPOINTS_OPTION = typer.Option(
    None,
    "--endpoints",
    help="endpoint kinds to compare at each size, comma-separated (each in its best variant: "
    "the baseline's SM splits searched, as acesim run --endpoints does; the baseline always "
    "runs, the reference); instead of --endpoint",
)


def collective_command(
    op: str = OP_OPTION,
    sizes: str = SIZES_OPTION,
    system: str = SYSTEM_OPTION,
    nodes: int | None = NODES_OPTION,
    endpoint: str | None = ENDPOINT_OPTION,
    endpoints: str | None = ENDPOINTS_OPTION,
    exact: bool = EXACT_OPTION,
    search: bool = SEARCH_OPTION,
    with_compute: str | None = WITH_COMPUTE_OPTION,
    proto: str | None = PROTO_OPTION,
    algo: str | None = ALGO_OPTION,
    channels: int | None = CHANNELS_OPTION,
    root: int | None = ROOT_OPTION,
    as_json: bool = AS_JSON_OPTION,
    fmt: str = FORMAT_OPTION,
    sets: list[str] = SETS_OPTION,
    force: bool = FORCE_OPTION,
    links: list[str] = LINKS_OPTION,
    npu_types: list[str] = NPU_TYPES_OPTION,
    stragglers: list[str] = STRAGGLERS_OPTION,
    compute_spread: str | None = COMPUTE_SPREAD_OPTION,
    max_messages: int | None = MAX_MESSAGES_OPTION,
) -> None:
    """Simulate one collective over a range of sizes (nccl-tests style: one line a size;
    --format plain prints it as nccl-tests does)."""
    spec = COLLECTIVE_OPS.get(op, "--op")
    if root is not None and not spec.rooted:
        rooted = ", ".join(name for name, o in COLLECTIVE_OPS.items() if o.rooted)
        raise ConfigError("--root", f"{op} takes no root (only {rooted} do)", root)
    size_list = parse_size_range(sizes, "--sizes")
    cfg = _system(system, sets, nodes, force, endpoint, proto, algo, channels)
    with flags(_FORCED):
        varied = (links, npu_types, stragglers, compute_spread)
        options = _options(exact, search, max_messages, *varied)
        compute = _parse_compute(with_compute) if with_compute else None
        cases = [
            make_collective_case(cfg, op, size, options, compute=compute, root=root)
            for size in size_list
        ]
        kinds = endpoint_kinds(endpoint, endpoints)
        if kinds is not None:
            if search:
                raise ConfigError("--search", "needs one --endpoint (a comparison always searches)")
            _compare_sizes(cases, kinds, as_json or fmt == "json")
            return
        results = []
        with progress() as bar:
            task = bar.add_task(f"{op} on {cfg.name}", total=len(size_list))
            for case in cases:
                results.append(run_case(case)[0])
                bar.advance(task)
    if as_json or fmt == "json":  # the result documents
        payload = {
            "schema": "acesim.collective/1",
            "system": cfg.name,
            "results": [r.to_dict() for r in results],
        }
        console.out(dumps(payload, indent=2))
        show_footnotes(results, cfg.name)
        return
    rooted = f", root {root or 0}" if spec.rooted else ""
    title = (
        f"{op} on {system_title(cfg)} ({results[0].npus} NPUs{rooted}, {cfg.endpoint.kind} "
        f"endpoint, {results[0].mode})"
    )
    print_table(_sizes_table(title, results))
    for r in results:
        if r.tuner is not None:  # the tuner's choice is kept, as NCCL would: say so
            err_console.print(f"[dim]{format_size(r.size)}: {escape(r.tuner['note'])}[/dim]")
    if any(r.algorithm == "collnet" for r in results):
        err_console.print(
            "[dim]collnet assumes the scale-out switches reduce (SHARP enabled on the cluster: "
            "scale_out.switch_reduction = true, an assumption).[/dim]"
        )
    show_footnotes(results, cfg.name)
    count = len(assumptions(cfg))
    if count:
        note = assumptions_note(count, cfg.name, "the preset's \\[sources] table")
        err_console.print(f"[dim]{note}[/dim]")


def _options(
    exact: bool,
    search: bool,
    max_messages: int | None,
    links: list[str],
    npu_types: list[str],
    stragglers: list[str],
    compute_spread: str | None,
) -> dict[str, Any]:
    """The run options the flags give: the mode, the search, the work bound where given and
    the variation (the variation flags' texts)."""
    options: dict[str, Any] = {"mode": "exact" if exact else "symmetric", "search": search}
    if max_messages is not None:
        options["max_messages"] = max_messages
    varied = {"links": links, "npu_types": npu_types, "stragglers": stragglers}
    options.update(variation_options({**varied, "compute_spread": compute_spread}))
    return options


def _compare_sizes(cases: list[CollectiveCase], kinds: list[str], as_json: bool) -> None:
    """``--endpoints``: the ``kinds`` side by side at each size (:func:`acesim.runs.compare.plan`,
    each kind in its best variant), a row a size: each kind's time and bus bandwidth and the
    fastest; JSON: each size's comparison document."""
    planned = [plan(case, kinds) for case in cases]
    comparisons: list[Comparison] = []
    with progress() as bar:
        task = bar.add_task("compare", total=sum(len(jobs) for jobs in planned))
        for jobs in planned:
            comparisons.append(assemble(run_jobs(jobs, 1, lambda: bar.advance(task)), kinds))
    cfg = cases[0].system
    if as_json:
        payload = {
            "schema": "acesim.collective-comparison/1",
            "system": cfg.name,
            "op": cases[0].op,
            "results": [
                {"size": case.size, **c.to_dict()}
                for case, c in zip(cases, comparisons, strict=True)
            ],
        }
        console.out(dumps(payload, indent=2))
        return
    title = f"{cases[0].op} on {system_title(cfg)}: endpoint kinds side by side, each its best"
    table = Table(title=title)
    table.add_column("size", justify="right")
    for kind in kinds:
        table.add_column(f"{kind} time", justify="right")
        table.add_column(f"{kind} busbw", justify="right")
    table.add_column("fastest", justify="left")
    for case, comparison in zip(cases, comparisons, strict=True):
        cells = [format_size(case.size)]
        best: tuple[float, str] | None = None
        for kind in kinds:
            outcome = comparison.endpoints.get(kind)
            if outcome is None:  # every variant refused: the reason is in --json
                cells += ["refused", "-"]
                continue
            result = outcome.best
            cells += [format_time(result.time), format_rate(result.busbw)]
            if best is None or result.time < best[0]:
                best = (result.time, f"{kind} ({outcome.best.variant})")
        table.add_row(*cells, best[1] if best is not None else "-")
    print_table(table)


Cell = Callable[[CollectiveResult, int], str]


def _sizes_table(title: str, results: list[CollectiveResult]) -> Table:
    """One row per size, nccl-tests style: one unit per bandwidth column (the largest value's
    prefix); the algorithm, protocol and concurrent-kernel columns where any row has them."""
    rates = {
        "algbw": [r.algbw for r in results],
        "busbw": [r.busbw for r in results],
        "net bw": [r.network_bandwidth for r in results],
        "HBM bw (comm)": [r.hbm_bandwidth for r in results],
    }
    columns: list[tuple[str, Cell]] = [
        ("size", lambda r, _i: format_size(r.size)),
        ("time", lambda r, _i: format_time(r.time)),
    ]
    for name, values in rates.items():
        scale, unit = column_scale(values, "B/s")
        columns.append((f"{name} ({unit})", _rate(values, scale)))
    if any(r.algorithm is not None for r in results):
        columns.append(("algo", lambda r, _i: r.algorithm or "-"))
    if any(r.protocol is not None for r in results):
        columns.append(("protocol", lambda r, _i: r.protocol or "-"))
    columns.append(("SMs", lambda r, _i: f"{r.comm_units:g}"))
    if any(r.compute for r in results):
        columns.append(("kernel slowdown", lambda r, _i: _slowdown(r, "kernel")))
        columns.append(("coll. slowdown", lambda r, _i: _slowdown(r, "collective")))
    columns.append(("bound by (busy)", lambda r, _i: _bound(r)))
    table = Table(title=title)
    for head, _cell in columns:
        table.add_column(head, justify="left" if head in _TEXT else "right")
    for i, r in enumerate(results):
        table.add_row(*(cell(r, i) for _head, cell in columns))
    return table


_TEXT = ("algo", "protocol", "bound by (busy)")


def _rate(values: list[float], scale: float) -> Cell:
    """The cell of one bandwidth column, in the column's unit."""
    return lambda _r, i: f"{values[i] / scale:.4g}"


def _slowdown(r: CollectiveResult, what: str) -> str:
    value = (r.compute or {}).get(f"{what}_slowdown")
    return f"{value:.3f}x" if value is not None else "-"


def _bound(r: CollectiveResult) -> str:
    busy = r.bound_by.get(r.bound, 0.0) / r.time if r.time > 0 else 0.0
    return f"{r.bound} ({100 * busy:.0f}%)" if r.bound else "-"


#: Collective settings the command's flags force, and the flag to name in their errors.
_FORCED = {"collective.algorithm": "--algo", "collective.protocol": "--proto", "root": "--root"}


def _system(
    system: str,
    sets: list[str],
    nodes: int | None,
    force: bool,
    endpoint: str | None,
    proto: str | None,
    algo: str | None,
    channels: int | None,
) -> SystemConfig:
    """The system with the endpoint kind, protocol, algorithm and channels the flags force
    (``force``: accept implausible bare numbers in ``--set``)."""
    cfg = cli_system(system, sets, nodes, force)
    if endpoint is not None:
        cfg = cfg.with_endpoint(ENDPOINT_KINDS.check(endpoint, "--endpoint"))
    forced: dict[str, Any] = {}
    if proto is not None:
        if proto not in PROTOCOLS:
            raise ConfigError("--proto", f"must be one of {', '.join(PROTOCOLS)}", proto)
        forced["protocol"] = proto
    if algo is not None:
        forced["algorithm"] = algorithm_name(algo, "--algo")
    if forced:
        cfg = derive(cfg, {f"collective.{name}": value for name, value in forced.items()})
    return with_channels(cfg, channels) if channels is not None else cfg


def _parse_compute(text: str) -> tuple[float, float]:
    """``FLOPS,BYTES`` (numbers or quantities: ``2 TFLOP,1.5 GiB``) of a concurrent kernel."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ConfigError("--with-compute", "expected FLOPS,BYTES", text)
    flops = parse_quantity(parts[0].strip(), "flops", "--with-compute")
    nbytes = parse_quantity(parts[1].strip(), "size", "--with-compute")
    if not all(math.isfinite(v) and v >= 0 for v in (flops, nbytes)):
        raise ConfigError("--with-compute", "FLOPs and bytes must be finite, >= 0", text)
    return flops, nbytes
