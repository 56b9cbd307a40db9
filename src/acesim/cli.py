"""The `acesim` command line (typer + rich).

Errors a user causes are printed as one or two lines naming the field and exit with status 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from . import __version__
from .config.presets import DEFAULT_PRESET, load_system, preset_document, preset_names
from .errors import AcesimError, ConfigError
from .units import format_rate, format_size, format_time, parse_size_range

app = typer.Typer(
    help="acesim: simulate distributed DL training platforms where compute and collectives "
    "share compute units, HBM and links.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)
_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        console.print(f"acesim {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    _state["debug"] = debug
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())


def progress() -> Progress:
    """The progress bar used by every long command (on stderr, hidden when not a terminal)."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )


@app.command()
def presets() -> None:
    """List the shipped system presets."""
    table = Table(title="acesim presets")
    table.add_column("name")
    table.add_column("NPUs", justify="right")
    table.add_column("description")
    for name in preset_names():
        doc = preset_document(name)
        system = load_system(name)
        mark = " (default)" if name == DEFAULT_PRESET else ""
        table.add_row(name + mark, str(system.network.total_npus), doc.get("description", ""))
    console.print(table)


OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")


@app.command()
def collective(
    op: str = typer.Option(
        "all-reduce", "--op", help="all-reduce, reduce-scatter, all-gather, all-to-all"
    ),
    sizes: str = typer.Option(
        "1KiB:1GiB", "--sizes", help="MIN:MAX[:xF], a list a,b,c, or one size"
    ),
    system: str = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file"),
    endpoint: str | None = typer.Option(None, "--endpoint", help="baseline, ace or ideal"),
    exact: bool = typer.Option(False, "--exact", help="simulate every NPU, not one representative"),
    with_compute: str | None = typer.Option(
        None, "--with-compute", help="concurrent kernel 'FLOPS,BYTES' (e.g. '1e12,2e9')"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """Simulate one collective over a range of sizes (nccl-tests style table)."""
    from .simulate import resolve_system, simulate_collective, with_endpoint

    if op not in OPS:
        raise ConfigError("--op", "must be one of " + ", ".join(OPS), op)
    size_list = parse_size_range(sizes, "--sizes")
    compute = _parse_compute(with_compute) if with_compute else None
    cfg = with_endpoint(resolve_system(system), endpoint)
    results = []
    with progress() as bar:
        task = bar.add_task(f"{op} on {cfg.name}", total=len(size_list))
        for size in size_list:
            results.append(simulate_collective(cfg, op, size, exact=exact, compute=compute))
            bar.advance(task)
    if as_json:
        payload = {
            "schema": "acesim.collective/1",
            "system": cfg.name,
            "results": [r.to_dict() for r in results],
        }
        console.out(json.dumps(payload, indent=2))
        return
    mode = "exact" if exact else "symmetric"
    table = Table(
        title=f"{op} on {cfg.name} ({results[0].npus} NPUs, {cfg.endpoint.kind} endpoint, {mode})"
    )
    for col in ("size", "time", "algbw", "busbw", "net bw", "HBM bw (comm)"):
        table.add_column(col, justify="right")
    if compute:
        table.add_column("kernel slowdown", justify="right")
        table.add_column("coll. slowdown", justify="right")
    for r in results:
        row = [
            format_size(r.size),
            format_time(r.time),
            format_rate(r.algbw),
            format_rate(r.busbw),
            format_rate(r.network_bandwidth),
            format_rate(r.hbm_bandwidth),
        ]
        if compute and r.compute:
            row += [
                f"{r.compute['kernel_slowdown']:.3f}x",
                f"{r.compute['collective_slowdown']:.3f}x",
            ]
        table.add_row(*row)
    console.print(table)
    _print_assumptions(cfg)


def _parse_compute(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise ConfigError("--with-compute", "expected FLOPS,BYTES", text)
    try:
        flops, nbytes = float(parts[0]), float(parts[1])
    except ValueError:
        raise ConfigError("--with-compute", "expected two numbers FLOPS,BYTES", text) from None
    if flops < 0 or nbytes < 0:
        raise ConfigError("--with-compute", "FLOPs and bytes must not be negative", text)
    return flops, nbytes


def _print_assumptions(cfg: Any) -> None:
    count = sum(1 for s in cfg.sources.values() if s.kind == "assumption")
    if count:
        err_console.print(
            f"[dim]{count} parameters of {cfg.name} are assumptions "
            f"(see the preset's \\[sources] table).[/dim]"
        )


def _register() -> None:
    from .commands.chakra import export_chakra_command
    from .commands.membw import membw_command
    from .commands.reproduce import assumptions_command, reproduce_command
    from .commands.run import run_command

    app.command("run")(run_command)
    app.command("membw")(membw_command)
    app.command("reproduce")(reproduce_command)
    app.command("assumptions")(assumptions_command)
    app.command("export-chakra")(export_chakra_command)


_register()


def run_cli(func: Callable[[], Any]) -> None:
    try:
        func()
    except AcesimError as exc:
        if _state["debug"] or "--debug" in sys.argv:
            raise
        err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


from .sweep.commands import register as _register_sweep  # noqa: E402

_register_sweep(app)  # acesim sweep / results / plot


def main() -> None:
    """Console-script entry point."""
    run_cli(app)


if __name__ == "__main__":  # pragma: no cover
    main()
