"""`acesim collective`: one collective over a range of sizes (nccl-tests style table)."""

from __future__ import annotations

import math
from typing import Any

import typer
from rich.table import Table

from ..config.presets import DEFAULT_PRESET
from ..config.system import PROTOCOLS
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..network.algorithms import ALGORITHMS, algorithm_name
from ..network.ops import COLLECTIVE_OPS
from ..results.jsonout import dumps
from ..units import column_scale, format_size, format_time, parse_quantity, parse_size_range
from .cases import VARIATION_HELP, cli_system, parse_pairs, with_channels
from .common import NODES_HELP, SET_HELP, console, err_console, progress


def collective_command(
    op: str = typer.Option("all-reduce", "--op", help=COLLECTIVE_OPS.choices()),
    sizes: str = typer.Option(
        "1KiB:1GiB", "--sizes", help="MIN:MAX[:xF], a list a,b,c, or one size"
    ),
    system: str = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file"),
    nodes: int | None = typer.Option(None, "--nodes", help=NODES_HELP),
    endpoint: str | None = typer.Option(
        None, "--endpoint", help=f"endpoint kind: {ENDPOINT_KINDS.choices()}"
    ),
    exact: bool = typer.Option(
        False, "--exact", help="simulate every NPU, not one representative", metavar=""
    ),
    with_compute: str | None = typer.Option(
        None, "--with-compute", help="concurrent kernel 'FLOPS,BYTES' (e.g. '1e12,2e9')"
    ),
    proto: str | None = typer.Option(
        None,
        "--proto",
        help="force an NCCL protocol (LL, LL128, Simple; like NCCL_PROTO) "
        "where the system configures collective.protocols; default: the fastest predicted",
    ),
    algo: str | None = typer.Option(
        None,
        "--algo",
        help=f"force an algorithm ({ALGORITHMS.choices()}; like NCCL_ALGO, whose names "
        "Tree, NVLS, NVLSTree and CollNetDirect are accepted too); "
        "default: the fastest predicted among the system's collective.choices",
    ),
    channels: int | None = typer.Option(
        None,
        "--channels",
        help="NCCL channels (one thread block on one SM each) the SM "
        "kernels run, like NCCL_MIN/MAX_NCHANNELS; default: the endpoint's settings",
    ),
    root: int | None = typer.Option(
        None,
        "--root",
        help="the root of a rooted operation (broadcast, reduce): its position in the group, "
        "0 to n-1; default 0 (rooted operations run in exact mode only: --exact)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table", metavar=""),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP),
    links: list[str] = typer.Option([], "--link", help=VARIATION_HELP["link"]),
    npu_types: list[str] = typer.Option([], "--npu", help=VARIATION_HELP["npu"]),
) -> None:
    """Simulate one collective over a range of sizes (nccl-tests style table)."""
    from ..simulate import simulate_collective

    spec = COLLECTIVE_OPS.get(op, "--op")
    if root is not None and not spec.rooted:
        rooted = ", ".join(name for name, o in COLLECTIVE_OPS.items() if o.rooted)
        raise ConfigError("--root", f"{op} takes no root (only {rooted} do)", root)
    size_list = parse_size_range(sizes, "--sizes")
    compute = _parse_compute(with_compute) if with_compute else None
    cfg = cli_system(system, sets, nodes)
    if endpoint is not None:
        cfg = cfg.with_endpoint(ENDPOINT_KINDS.check(endpoint, "--endpoint"))
    variation = _variation(links, npu_types, exact) if links or npu_types else None
    if proto is not None:
        if proto not in PROTOCOLS:
            raise ConfigError("--proto", f"must be one of {', '.join(PROTOCOLS)}", proto)
        collective = cfg.collective.model_copy(update={"protocol": proto})
        cfg = cfg.model_copy(update={"collective": collective})
    if algo is not None:
        algo = algorithm_name(algo, "--algo")
        collective = cfg.collective.model_copy(update={"algorithm": algo})
        cfg = cfg.model_copy(update={"collective": collective})
    if channels is not None:
        cfg = with_channels(cfg, channels)
    results = []
    with progress() as bar:
        task = bar.add_task(f"{op} on {cfg.name}", total=len(size_list))
        for size in size_list:
            try:
                results.append(
                    simulate_collective(
                        cfg,
                        op,
                        size,
                        exact=exact,
                        compute=compute,
                        variation=variation,
                        root=root,
                    )
                )
            except ConfigError as err:
                # a forced algorithm or protocol that cannot run: name the flag that forced it
                flag = _FORCED.get(err.field)
                if flag is None:
                    raise
                raise ConfigError(flag, err.rule, err.value, hint=err.hint) from None
            bar.advance(task)
    if as_json:
        payload = {
            "schema": "acesim.collective/1",
            "system": cfg.name,
            "results": [r.to_dict() for r in results],
        }
        console.out(dumps(payload, indent=2))
        return
    mode = "exact" if exact else "symmetric"
    rooted = f", root {root or 0}" if spec.rooted else ""
    table = Table(
        title=f"{op} on {cfg.name} ({results[0].npus} NPUs{rooted}, {cfg.endpoint.kind} "
        f"endpoint, {mode})"
    )
    # One unit per column (the largest value's prefix), as nccl-tests prints.
    rates = {
        "algbw": [r.algbw for r in results],
        "busbw": [r.busbw for r in results],
        "net bw": [r.network_bandwidth for r in results],
        "HBM bw (comm)": [r.hbm_bandwidth for r in results],
    }
    scales = {name: column_scale(values, "B/s") for name, values in rates.items()}
    table.add_column("size", justify="right")
    table.add_column("time", justify="right")
    for name, (_scale, unit) in scales.items():
        table.add_column(f"{name} ({unit})", justify="right")
    tuned = any(r.algorithm is not None for r in results)
    if tuned:
        table.add_column("algo")
    protocols = any(r.protocol is not None for r in results)
    if protocols:
        table.add_column("protocol")
    table.add_column("SMs", justify="right")
    if compute:
        table.add_column("kernel slowdown", justify="right")
        table.add_column("coll. slowdown", justify="right")
    table.add_column("bound by (busy)")
    for i, r in enumerate(results):
        row = [format_size(r.size), format_time(r.time)]
        row += [f"{rates[name][i] / scale:.4g}" for name, (scale, _unit) in scales.items()]
        if tuned:
            row.append(r.algorithm or "-")
        if protocols:
            row.append(r.protocol or "-")
        row.append(f"{r.comm_units:g}")
        if compute and r.compute:
            row += [
                f"{r.compute['kernel_slowdown']:.3f}x",
                f"{r.compute['collective_slowdown']:.3f}x",
            ]
        busy = r.bound_by.get(r.bound, 0.0) / r.time if r.time > 0 else 0.0
        row.append(f"{r.bound} ({100 * busy:.0f}%)" if r.bound else "-")
        table.add_row(*row)
    console.print(table)
    for r in results:
        if r.tuner is not None:  # the tuner's choice is kept, as NCCL would: say so
            err_console.print(f"[dim]{format_size(r.size)}: {r.tuner['note']}[/dim]")
    if any(r.algorithm == "collnet" for r in results):
        err_console.print(
            "[dim]collnet assumes the scale-out switches reduce (SHARP enabled on the cluster: "
            "scale_out.switch_reduction = true, an assumption).[/dim]"
        )
    _print_assumptions(cfg)


#: Collective settings the command's flags force, and the flag to name in their errors.
_FORCED = {"collective.algorithm": "--algo", "collective.protocol": "--proto", "root": "--root"}


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


def _print_assumptions(cfg: Any) -> None:
    count = sum(1 for s in cfg.sources.values() if s.assumed)
    if count:
        err_console.print(
            f"[dim]{count} parameters of {cfg.name} are assumptions "
            f"(see the preset's \\[sources] table).[/dim]"
        )


def _variation(links: list[str], npu_types: list[str], exact: bool) -> Any:
    """``--link`` and ``--npu`` texts -> a Variation (ConfigError naming the flag)."""
    from pydantic import BaseModel, ValidationError

    from ..config.errors import config_error_from
    from ..config.variation import LinkChange, NpuType, Variation

    def parsed(model: type[BaseModel], texts: list[str], flag: str) -> list[Any]:
        if texts and not exact:
            raise ConfigError(flag, "needs --exact (symmetric mode simulates one NPU)", texts[0])
        out = []
        for text in texts:
            try:
                out.append(model.model_validate(parse_pairs(text, flag)))
            except ValidationError as exc:
                raise config_error_from(exc, model, flag) from None
        return out

    return Variation(
        links=tuple(parsed(LinkChange, links, "--link")),
        npu_types=tuple(parsed(NpuType, npu_types, "--npu")),
    )
