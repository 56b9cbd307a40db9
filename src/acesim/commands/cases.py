"""Command-line options -> a :class:`~acesim.runs.case.Case` (the one run path).

Errors name the command-line flag (``--iterations``), not the run option behind it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from ..config.reader import read_json_file, read_value
from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..errors import ConfigError
from ..runs.case import Case, make_case
from ..training.loops import LOOPS
from ..units import parse_quantity
from .common import err_console, parse_sets

__all__ = [
    "FLAGS",
    "parse_shape",
    "parse_pairs",
    "read_placement",
    "cli_case",
    "cli_system",
    "VARIATION_HELP",
]

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
    "run.stragglers": "--straggler",
    "run.compute_spread": "--compute-spread",
    "run.links": "--link",
    "run.npu_types": "--npu",
    "run.placement": "--placement",
}

#: help of the exact-mode variation flags (acesim.config.variation)
VARIATION_HELP = {
    "straggler": "exact mode: a slow rank, e.g. rank=17,slowdown=1.3 (its kernels compute 1.3x "
    "as long); repeatable",
    "compute_spread": "exact mode: every rank's compute slowdown 1 + spread*U[0,1), e.g. "
    "spread=0.1,seed=7",
    "link": "exact mode: a rank's links on a dimension, e.g. dim=0,rank=3,direction=+,failed=true "
    "or dim=1,rank=5,bandwidth='25 GB/s',latency='2 us'; repeatable (a failed direction of a "
    "bidirectional ring reroutes the ring the other way; other failures are errors)",
    "npu": "exact mode: ranks on another NPU, e.g. ranks=0-3,preset=a100-sxm (an NPU preset) "
    "and/or [npu] fields changed, e.g. ranks=4-7,hbm_bandwidth='2 TB/s' or "
    "ranks=5,kernels.gemm_efficiency=0.6; their kernels run on that NPU, the network stays the "
    "system's; repeatable",
    "placement": "exact mode: a JSON file holding a list p, a permutation of 0..n-1: workload "
    "rank r runs on NPU position p[r] (its graph, sends and groups move with it; a group the "
    "placement splits into a set the network cannot express is an error)",
}


def parse_pairs(text: str, flag: str) -> dict[str, Any]:
    """``rank=17,slowdown=1.3`` -> ``{"rank": 17, "slowdown": 1.3}`` (values as TOML when they
    are TOML, else text; ConfigError naming ``flag``)."""
    out: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ConfigError(flag, "expected key=value pairs separated by commas", text)
        if key in out:
            raise ConfigError(flag, f"gives {key!r} twice", text)
        out[key] = read_value(value, flag)
    return out


def read_placement(path: Path, flag: str = "--placement") -> Any:
    """The JSON list in the file at ``path``, through the guarded reader
    (:func:`acesim.config.reader.read_json_file`: size, depth, integer and ``null`` limits;
    ConfigError naming ``flag``); the list itself is checked as ``run.placement``."""
    return read_json_file(path, flag, "JSON list of NPU positions")


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
    system: str, sets: list[str] | None = None, nodes: int | None = None, force: bool = False
) -> SystemConfig:
    """The system of a command's ``--system``, ``--set``, ``--nodes`` and ``--force`` options
    (errors name the flag)."""
    try:
        return resolve_system(system, overrides=parse_sets(sets), nodes=nodes, force=force)
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
    stragglers: list[str] | None = None,
    compute_spread: str | None = None,
    links: list[str] | None = None,
    npu_types: list[str] | None = None,
    placement: Path | None = None,
    force: bool = False,
) -> Case:
    """The case the command-line options describe (``stragglers``, ``compute_spread``,
    ``links``, ``npu_types``: the text of ``--straggler``, ``--compute-spread``, ``--link``
    and ``--npu``; ``placement``: the ``--placement`` file)."""
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
    if stragglers:
        options["stragglers"] = [parse_pairs(t, "--straggler") for t in stragglers]
    if compute_spread is not None:
        options["compute_spread"] = parse_pairs(compute_spread, "--compute-spread")
    if links:
        options["links"] = [parse_pairs(t, "--link") for t in links]
    if npu_types:
        options["npu_types"] = [parse_pairs(t, "--npu") for t in npu_types]
    if placement is not None:
        options["placement"] = read_placement(placement)
    try:
        return make_case(
            system,
            workload,
            options,
            overrides=overrides,
            batch_per_npu=batch,
            precision=precision,
            force=force,
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
            "--channels",
            f"must be a whole number from 1 to {units - 1} (npu.compute_units "
            f"{units} less one for the compute kernel)",
            channels,
        )
    kind = ENDPOINT_KINDS.get(cfg.endpoint.kind)
    if not kind.channel_fields:
        raise ConfigError(
            "--channels",
            f"the {kind.name} endpoint runs no SM channels (use an endpoint of "
            "SM kernels, e.g. --endpoint baseline)",
            channels,
        )
    return cfg.with_endpoint(kind.name, **{name: channels for name in kind.channel_fields})
