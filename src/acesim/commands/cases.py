"""Command-line options -> a :class:`~acesim.experiment.case.Case` (the one run path).

Errors name the command-line flag (``--iterations``), not the run option behind it.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..errors import ConfigError
from ..experiment.case import Case, make_case
from ..training.loops import LOOPS
from ..units import parse_quantity
from .common import err_console, parse_sets

__all__ = ["FLAGS", "parse_shape", "cli_case", "cli_system"]

#: run option (or workload setting) -> the flag that sets it
FLAGS = {
    "run.iterations": "--iterations",
    "run.warmup": "--warmup",
    "run.loop": "--loop",
    "run.npus": "--npus",
    "run.nodes": "--nodes",
    "run.shape": "--shape",
    "run.bucket_size": "--bucket-size",
    "run.search": "--search",
    "npus": "--npus",
    "nodes": "--nodes",
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


def cli_system(
    system: str, sets: list[str] | None = None, nodes: int | None = None
) -> SystemConfig:
    """The system of a command's ``--system``, ``--set`` and ``--nodes`` options (errors name
    the flag)."""
    try:
        return resolve_system(system, overrides=parse_sets(sets), nodes=nodes)
    except ConfigError as err:
        flag = FLAGS.get(err.field)
        if flag is None:
            raise
        raise ConfigError(flag, err.rule, err.value, hint=err.hint) from None


def cli_case(
    system: str,
    workload: str,
    *,
    npus: int | None = None,
    shape: str | None = None,
    nodes: int | None = None,
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
    if nodes is not None and (npus is not None or shape is not None):
        other = "--npus" if npus is not None else "--shape"
        raise ConfigError(
            "--nodes", f"give either --nodes or {other}, not both (--nodes keeps the node)", nodes
        )
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
        "nodes": nodes,
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
    bigger switch, which no such node is: say so (several nodes: ``--nodes`` and the system's
    ``[scale_out]`` network)."""
    from ..config.presets import system_document

    try:
        doc = system_document(system)
    except ConfigError:
        return  # the resolution reports it
    dims = doc.get("network", {}).get("dimensions", [])
    if len(dims) == 1 and isinstance(dims[0], dict) and dims[0].get("size") != npus:
        size = max(int(dims[0].get("size") or 1), 1)
        advice = (
            f"use --nodes {max(npus // size, 2)} for nodes joined by its [scale_out] network"
            if isinstance(doc.get("scale_out"), dict)
            else "add a [scale_out] table to the system and use --nodes for several nodes"
        )
        kind = dims[0].get("kind", "ring")
        message = (
            f"{system} is one {kind} of {dims[0].get('size')} NPUs; --npus {npus} makes a "
            f"single {npus}-NPU {kind}, not {npus // size} nodes ({advice})"
        )
        err_console.print(
            f"[yellow]warning[/yellow]: {escape(message)}", highlight=False, soft_wrap=True
        )


def with_channels(cfg: SystemConfig, channels: int) -> SystemConfig:
    """``cfg`` with its endpoint's SM kernels running ``channels`` NCCL channels (one thread
    block on one SM each: the kind's ``channel_fields``); ConfigError naming ``--channels``
    for a count that is not a whole number from 1 to one fewer than the NPU's units, or an
    endpoint that runs no SM channels."""
    from ..hardware.endpoints import ENDPOINT_KINDS

    units = cfg.npu.compute_units
    if isinstance(channels, bool) or not 1 <= channels < units:
        raise ConfigError(
            "--channels", f"must be a whole number from 1 to {units - 1} (npu.compute_units "
            f"{units} less one for the compute kernel)", channels
        )
    kind = ENDPOINT_KINDS.get(cfg.endpoint.kind)
    if not kind.channel_fields:
        raise ConfigError(
            "--channels", f"the {kind.name} endpoint runs no SM channels (use an endpoint of "
            "SM kernels, e.g. --endpoint baseline)", channels
        )
    return cfg.with_endpoint(kind.name, **{name: channels for name in kind.channel_fields})
