"""The `acesim` command line (typer + rich).

This module is only the app: the root options, the registration of the commands (each lives in
:mod:`acesim.commands`) and the error handler :func:`run_cli`.
Command modules never import this one; what they share is in :mod:`acesim.commands.common`.

Errors a user causes are printed as one or two lines naming the field and exit with status 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import gc
import inspect
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from . import __version__
from .commands.assumptions import assumptions_command
from .commands.astra import import_astra_command
from .commands.chakra import export_chakra_command
from .commands.collective import collective_command
from .commands.common import console, err_console
from .commands.jobs import jobs_command
from .commands.kernel import kernel_command
from .commands.kinds import kinds_command
from .commands.membw import membw_command
from .commands.overlap import overlap_command
from .commands.plan import plan_command
from .commands.presets import presets_app
from .commands.reproduce import reproduce_command
from .commands.run import run_command
from .commands.sweep import register as register_sweep
from .commands.validate import validate_command
from .config.reader import lenient_argument
from .errors import AcesimError


class _StrictGroup(TyperGroup):
    """The root command: refuses a number argument that the CLI library would read
    leniently (``-n ８``, ``--global-batch 4_0``) before any option is converted."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        error = lenient_argument(args)
        if error is not None:
            raise error
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_StrictGroup,
    help="acesim: simulate distributed DL training platforms where compute and collectives "
    "share compute units, HBM and links.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        console.print(f"acesim {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors.", metavar=""),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version.", metavar=""
    ),
) -> None:
    _state["debug"] = debug
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())


app.add_typer(presets_app, name="presets")
#: The commands by name, in the order ``acesim --help`` lists them
COMMANDS: dict[str, Callable[..., Any]] = {
    "kinds": kinds_command,
    "collective": collective_command,
    "run": run_command,
    "plan": plan_command,
    "jobs": jobs_command,
    "membw": membw_command,
    "kernel": kernel_command,
    "overlap": overlap_command,
    "reproduce": reproduce_command,
    "assumptions": assumptions_command,
    "export-chakra": export_chakra_command,
    "import-astra": import_astra_command,
    "validate": validate_command,
}


def short_help(command: Callable[..., Any]) -> str:
    """The first paragraph of ``command``'s docstring on one line: the command list wraps it
    to the terminal (the docstring's own line breaks would show as they are)."""
    first = (inspect.getdoc(command) or "").split("\n\n")[0]
    return " ".join(first.split())


for _name, _command in COMMANDS.items():
    app.command(_name, short_help=short_help(_command))(_command)
register_sweep(app)  # acesim sweep / results / plot


def run_cli(func: Callable[[], Any]) -> None:
    try:
        func()
    except AcesimError as exc:
        if _state["debug"] or "--debug" in sys.argv:
            raise
        # escaped: a message may name a table ("[scale_out]"), which is not markup
        message = escape(str(exc))
        err_console.print(f"[bold red]error:[/bold red] {message}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None


def main() -> None:
    """Console-script entry point.

    The command line owns its process, so it moves the objects its imports created (tens of
    thousands: modules, classes, pydantic schemas) out of the cyclic garbage collector's
    reach (``gc.freeze()``) before the command runs: they live as long as the process, and
    the collector's passes over them were half of a small exact-mode run's time. Objects the
    command creates are collected as usual. The library (``import acesim``) leaves the
    collector enabled, but for pausing it while a run runs
    (:func:`~acesim.engine.collector.collector_paused`)."""
    gc.freeze()
    run_cli(app)


if __name__ == "__main__":  # pragma: no cover
    main()
