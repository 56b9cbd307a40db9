"""What every `acesim` command shares: the consoles, the progress bar, output-path checks, and
the options several commands take (``--system``, ``--nodes``, ``--set``, ``--force``).

Command modules import from here, never from :mod:`acesim.cli` (which imports them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..config.presets import DEFAULT_PRESET
from ..config.reader import read_value, strict_int
from ..errors import ConfigError
from ..hardware.kernels import Gemm
from ..precision import DTYPES

__all__ = [
    "console",
    "err_console",
    "progress",
    "check_output_path",
    "IMAGE_SUFFIXES",
    "parse_sets",
    "SET_HELP",
    "NODES_HELP",
    "FORCE_HELP",
    "SYSTEM_OPTION",
    "NODES_OPTION",
    "SETS_OPTION",
    "FORCE_OPTION",
    "system_title",
]

SET_HELP = (
    "change one system field: dotted.path=value (repeatable), e.g. "
    "--set npu.hbm_bandwidth='3.6 TB/s' --set collective.chunks=8"
)

FORCE_HELP = (
    "accept bare numbers implausible for their fields as written (a bandwidth below 1 MB/s, "
    "a size below 1 KiB, a latency above 1 s: refused by default as a unit left out)"
)

NODES_HELP = (
    "scale a node preset out to N nodes: its \\[scale_out] network (NICs) becomes a last "
    "dimension of size N (e.g. --nodes 4 on h100-nvswitch-8: 8x4 = 32 NPUs)"
)

SYSTEM_OPTION = typer.Option(DEFAULT_PRESET, "--system", "-s", help="preset name or config file")
NODES_OPTION = typer.Option(None, "--nodes", help=NODES_HELP)
SETS_OPTION = typer.Option([], "--set", help=SET_HELP)
FORCE_OPTION = typer.Option(False, "--force", help=FORCE_HELP, metavar="")

console = Console()
err_console = Console(stderr=True)

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def system_title(made: Any) -> str:
    """A system's name in a title, with its extends chain and overrides when it has any
    (``ace-isca21 (set endpoint.ace.sram=16 MiB)``): ``made`` is a
    :class:`~acesim.config.SystemConfig` or a result with ``system`` and ``provenance``."""
    from ..results.protocol import system_title as title

    provenance = made.provenance
    if not isinstance(provenance, dict):
        provenance = provenance.to_dict()
    name = made.name if hasattr(made, "name") else made.system
    return title(str(name), provenance)


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


def check_output_path(path: Path, option: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """Check that ``path`` can be written as the output of ``option``, before any work is done.

    Raises :class:`~acesim.errors.ConfigError` (one line on the CLI) when ``path`` is an
    existing directory, when its folder does not exist or is not writable (or the file exists
    and is not writable), or when its suffix is not one of ``suffixes`` (compared
    case-insensitively; ``None`` allows any). Returns ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(option, "is a directory, expected a file name", str(path))
    folder = path.parent
    if not folder.is_dir():
        rule = "not a folder" if folder.exists() else "folder does not exist"
        raise ConfigError(option, f"{rule}: {folder}", str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(option, f"folder is not writable: {folder}", str(path))
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(option, "file is not writable", str(path))
    if suffixes is not None and path.suffix.lower() not in suffixes:
        allowed = ", ".join(suffixes)
        raise ConfigError(option, f"file name must end in one of {allowed}", str(path))
    return path


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["a.b=4", "x.y=3.6 TB/s"]`` -> ``{"a.b": 4, "x.y": "3.6 TB/s"}``.

    A value is read as a TOML value when it is one (numbers, ``true``/``false``, ``"text"``,
    ``[1, 2]``, ``{k = 1}``), else taken as text ("3.6 TB/s", "ring"); ConfigError naming
    ``--set`` for an item without ``=`` or a path given twice.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        path, sep, text = item.partition("=")
        path, text = path.strip(), text.strip()
        if not sep or not path:
            raise ConfigError("--set", "expected dotted.path=value", item)
        if path in out:
            raise ConfigError("--set", f"sets {path!r} twice", item)
        out[path] = read_value(text, "--set")
    return out


#: Largest GEMM dimension: cuBLAS takes m, n and k as 32-bit ``int``.
MAX_GEMM_DIMENSION = 2**31 - 1


def parse_gemm(text: str, option: str = "--gemm", dtype: str = "fp16") -> Gemm:
    """``MxNxK[:dtype]`` (or ``N[:dtype]`` for N^3) -> a :class:`Gemm` in that dtype (default
    ``dtype``); ConfigError naming ``option`` otherwise."""
    shape, _, named = text.strip().partition(":")
    parts = shape.lower().replace(" ", "").split("x")
    try:
        values = [strict_int(p) for p in parts]
    except ValueError:
        raise ConfigError(option, "expected MxNxK[:dtype] (positive integers)", text) from None
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) <= 0:
        raise ConfigError(option, "expected MxNxK[:dtype] (positive integers)", text)
    if max(values) > MAX_GEMM_DIMENSION:
        raise ConfigError(
            option,
            f"dimensions must be at most 2**31 - 1 = {MAX_GEMM_DIMENSION} (cuBLAS's int m, n, k)",
            text,
        )
    dtype = named.strip() or dtype
    if dtype not in DTYPES:
        raise ConfigError(option, f"unknown dtype; expected one of {DTYPES.choices()}", text)
    m, n, k = values
    return Gemm(float(m), float(n), float(k), dtype=dtype, name=f"gemm {shape}:{dtype}")
