"""Command-line options -> a :class:`~acesim.experiment.case.Case` (the one run path).

Errors name the command-line flag (``--iterations``), not the run option behind it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..experiment.case import Case, make_case
from ..training.loops import LOOPS
from ..units import parse_quantity
from .common import err_console

__all__ = ["FLAGS", "parse_shape", "cli_case"]

#: run option (or workload setting) -> the flag that sets it
FLAGS = {
    "run.iterations": "--iterations",
    "run.warmup": "--warmup",
    "run.loop": "--loop",
    "run.npus": "--npus",
    "run.shape": "--shape",
    "run.bucket_size": "--bucket-size",
    "run.search": "--search",
    "npus": "--npus",
    "workload.batch_per_npu": "--batch",
    "workload.precision": "--precision",
}


def parse_shape(text: str) -> list[int]:
    """``4x4x8`` -> ``[4, 4, 8]`` (ConfigError naming ``--shape``)."""
    try:
        sizes = [int(p) for p in text.lower().replace("*", "x").split("x")]
    except ValueError:
        raise ConfigError("--shape", "expected sizes like 4x4x8", text) from None
    if any(s < 1 for s in sizes):
        raise ConfigError("--shape", "sizes must be at least 1", text)
    return sizes


def cli_case(
    system: str,
    workload: str,
    *,
    npus: int | None = None,
    shape: str | None = None,
    iterations: int = 3,
    warmup: int = 1,
    loop: str = "layerwise",
    bucket: str = "25 MiB",
    exact: bool = False,
    batch: int | None = None,
    precision: str | None = None,
    search: bool = False,
    overrides: dict[str, Any] | None = None,
) -> Case:
    """The case the command-line options describe."""
    if npus is not None and shape is not None:
        raise ConfigError("--npus", "give either --npus or --shape, not both", npus)
    if npus is not None:
        _warn_single_node(system, npus)
    LOOPS.check(loop, "--loop")
    options: dict[str, Any] = {
        "iterations": iterations,
        "warmup": warmup,
        "mode": "exact" if exact else "symmetric",
        "loop": loop,
        "bucket_size": parse_quantity(bucket, "size", "--bucket-size"),
        "search": search,
        "shape": parse_shape(shape) if shape is not None else None,
        "npus": npus,
    }
    try:
        return make_case(
            system,
            workload,
            options,
            overrides=overrides,
            batch_per_npu=batch,
            precision=precision,
        )
    except ConfigError as err:
        flag = FLAGS.get(err.field)
        if flag is None:
            raise
        raise ConfigError(flag, err.rule, err.value, hint=err.hint) from None


def _warn_single_node(system: str, npus: int) -> None:
    """A one-dimension system (an 8-GPU NVSwitch node) resized to other NPU counts becomes one
    bigger switch, which no such node is: say so (multi-node systems need a scale-out
    dimension of their own)."""
    from ..config.presets import system_document

    try:
        dims = system_document(system).get("network", {}).get("dimensions", [])
    except ConfigError:
        return  # the resolution reports it
    if len(dims) == 1 and isinstance(dims[0], dict) and dims[0].get("size") != npus:
        err_console.print(
            f"[yellow]warning[/yellow]: {system} is one {dims[0].get('kind', 'ring')} of "
            f"{dims[0].get('size')} NPUs; --npus {npus} makes a single {npus}-NPU "
            f"{dims[0].get('kind', 'ring')}, not {npus // max(int(dims[0].get('size') or 1), 1)} "
            "nodes (add a scale-out dimension to the system for several nodes)",
            highlight=False,
            soft_wrap=True,
        )
