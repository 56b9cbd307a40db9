"""Command-line options -> a case of any run kind (:mod:`acesim.runs.kinds`), and errors
that name the command-line flag (``--iterations``), not the field behind it.

:func:`flags` is the one place that renames an error's field to its flag (:data:`FLAGS`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ..config.reader import read_json_file, read_value
from ..config.resolve import check_sizing, resolve_system
from ..config.system import SystemConfig
from ..errors import ConfigError
from ..runs.case import make_case
from ..runs.compare import check_endpoints
from ..runs.kinds import RUN_KINDS
from ..runs.llm import make_llm
from ..training.loops import LOOPS
from ..units import parse_quantity
from .common import err_console, parse_sets

__all__ = [
    "FLAGS",
    "flags",
    "parse_shape",
    "parse_pairs",
    "read_placement",
    "cli_case",
    "cli_system",
    "variation_options",
    "VARIATION_HELP",
    "STRAGGLERS_OPTION",
    "COMPUTE_SPREAD_OPTION",
    "LINKS_OPTION",
    "MAX_MESSAGES_OPTION",
    "NPU_TYPES_OPTION",
    "PLACEMENT_OPTION",
    "PARALLEL_HELP",
    "PARALLEL_SIZES_HELP",
]

#: field (a run option, a workload setting, an LLM size) -> the flag that sets it
FLAGS = {
    "run.iterations": "--iterations",
    "run.warmup": "--warmup",
    "run.stop": "--stop",
    "run.loop": "--loop",
    "run.npus": "--npus",
    "run.nodes": "--nodes",
    "run.shape": "--shape",
    "run.bucket_size": "--bucket-size",
    "run.search": "--search",
    "run.max_messages": "--max-messages",
    "run.max_micro_batches": "--max-micro-batches",
    "npus": "--npus",
    "nodes": "--nodes",
    "workload.name": "--workload",
    "workload.batch_per_npu": "--batch",
    "workload.precision": "--precision",
    "run.stragglers": "--straggler",
    "run.compute_spread": "--compute-spread",
    "run.links": "--link",
    "run.npu_types": "--npu",
    "run.placement": "--placement",
    "parallel": "--parallel",
    "parallel.global_batch": "--global-batch",
    "parallel.micro_batch": "--micro-batch",
    "parallel.seq": "--seq",
    "parallel.recompute": "--recompute",
}


def flag_of(field: str, extra: Mapping[str, str]) -> str | None:
    """The flag behind ``field`` (``extra`` first, then :data:`FLAGS`; a field inside one,
    ``run.stragglers[0].slowdown``, as ``--straggler[0].slowdown``; ``parallel.tp`` as
    ``--parallel tp``), or None."""
    table = {**FLAGS, **extra}
    if field in table:
        return table[field]
    for name, flag in table.items():
        if field.startswith((f"{name}.", f"{name}[")) and name not in ("parallel",):
            return flag + field[len(name) :]
    if field.startswith("parallel."):
        return f"--parallel {field.removeprefix('parallel.')}"
    return None


@contextmanager
def flags(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """A ConfigError raised inside names the flag behind its field (:func:`flag_of`;
    ``extra``: this command's own, e.g. ``collective.algorithm`` -> ``--algo``)."""
    try:
        yield
    except ConfigError as err:
        flag = flag_of(err.field, extra or {})
        if flag is None:
            raise
        raise ConfigError(flag, err.rule, err.value, hint=err.hint) from None


#: What --parallel takes (every command that builds an LLM iteration).
PARALLEL_SIZES_HELP = (
    "LLM models: Megatron parallel sizes, e.g. tp=4,pp=8,vpp=5,cp=1,ep=1,dp=auto; also "
    "sp=1 (sequence parallelism), tp_overlap=1 (TP communication overlap), zero=1 (distributed "
    "optimizer), grad_fp32=0|1 (main gradients in FP32), recompute=none|selective|full, "
    "order=tp-cp-ep-dp-pp|tp-cp-ep-pp-dp (Megatron's rank order), first_stage_layers=K,"
    "last_stage_layers=K (uneven stages) or account_embedding=1,account_loss=1 (the embedding "
    "and the loss counted as pipeline layers), schedule=1f1b|interleaved|zb-h1|zb-v|dualpipe|"
    "dualpipev (the pipeline schedule; default interleaved with vpp > 1, else 1f1b)."
)

#: --parallel of the commands that run the iteration.
PARALLEL_HELP = (
    PARALLEL_SIZES_HELP + " One iteration is simulated, one GPU per pipeline stage (class mode: "
    "the same figures as simulating every GPU); --exact, --straggler, --compute-spread, "
    "--link, --npu and --placement simulate every GPU"
)

#: help of the variation flags (acesim.config.variation): they put a run in exact mode
VARIATION_HELP = {
    "straggler": "a slow rank, e.g. rank=17,slowdown=1.3 (its kernels compute 1.3x "
    "as long); repeatable; runs in exact mode",
    "compute_spread": "every rank's compute slowdown 1 + spread*U[0,1), e.g. "
    "spread=0.1,seed=7; runs in exact mode",
    "link": "a rank's links on a dimension, e.g. dim=0,rank=3,direction=+,failed=true "
    "or dim=1,rank=5,bandwidth='25 GB/s',latency='2 us'; repeatable (a failed direction of a "
    "bidirectional ring reroutes the ring the other way; other failures are errors); runs in "
    "exact mode",
    "npu": "ranks on another NPU, e.g. ranks=0-3,preset=a100-sxm (an NPU preset) "
    "and/or \\[npu] fields changed, e.g. ranks=4-7,hbm_bandwidth='2 TB/s' or "
    "ranks=5,kernels.gemm_efficiency=0.6; their kernels run on that NPU, the network stays the "
    "system's; repeatable; runs in exact mode",
    "placement": "a JSON file holding a list p, a permutation of 0..n-1: workload "
    "rank r runs on NPU position p\\[r] (its graph, sends and groups move with it; a group the "
    "placement splits into a set the network cannot express is an error); runs in exact mode",
}

#: the work bound (``run.max_messages``), for every command that runs simulations
MAX_MESSAGES_OPTION = typer.Option(
    None,
    "--max-messages",
    help="the work bound: refuse a run estimated to send more messages (default 10**8, "
    "about 24 minutes); raise it knowingly",
)

#: The variation flags' options (``acesim run``; ``acesim collective`` takes --link, --npu)
STRAGGLERS_OPTION = typer.Option([], "--straggler", help=VARIATION_HELP["straggler"])
COMPUTE_SPREAD_OPTION = typer.Option(
    None, "--compute-spread", help=VARIATION_HELP["compute_spread"]
)
LINKS_OPTION = typer.Option([], "--link", help=VARIATION_HELP["link"])
NPU_TYPES_OPTION = typer.Option([], "--npu", help=VARIATION_HELP["npu"])
PLACEMENT_OPTION = typer.Option(
    None, "--placement", help=VARIATION_HELP["placement"], metavar="FILE"
)


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


def endpoint_kinds(endpoint: str | None, endpoints: str | None) -> list[str] | None:
    """The kinds ``--endpoints`` compares (checked, the reference first: a comma list), or
    None where it is not given (``--endpoint``, or the command's default); both given is an
    error naming ``--endpoints``."""
    if endpoints is None:
        return None
    if endpoint is not None:
        raise ConfigError("--endpoints", "give either --endpoint or --endpoints", endpoints)
    return check_endpoints([e.strip() for e in endpoints.split(",") if e.strip()], "--endpoints")


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
    with flags():
        return resolve_system(system, overrides=parse_sets(sets), nodes=nodes, force=force)


#: Flags of training graphs (zoo models, files, traces) only, and of LLM models only.
TRAINING_FLAGS = {
    "npus": "--npus",
    "shape": "--shape",
    "batch": "--batch",
    "loop": "--loop",
    "bucket": "--bucket-size",
    "iterations": "--iterations",
    "warmup": "--warmup",
    "stop": "--stop",
}
LLM_FLAGS = {
    "max_micro_batches": "--max-micro-batches",
    "global_batch": "--global-batch",
    "micro_batch": "--micro-batch",
    "seq": "--seq",
    "recompute": "--recompute",
}


def variation_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The variation flags' texts as run options (pairs parsed; validated with the case)."""
    out: dict[str, Any] = {}
    for name, flag in (("stragglers", "--straggler"), ("links", "--link"), ("npu_types", "--npu")):
        if given.get(name):
            out[name] = [parse_pairs(t, flag) for t in given[name]]
    if given.get("compute_spread") is not None:
        out["compute_spread"] = parse_pairs(given["compute_spread"], "--compute-spread")
    if given.get("placement") is not None:
        out["placement"] = read_placement(given["placement"])
    return out


def _refuse(given: Mapping[str, Any], table: Mapping[str, str], why: str) -> None:
    for name, flag in table.items():
        value = given.get(name)
        if value is not None and value != []:
            raise ConfigError(flag, why, str(value))


def cli_case(system: str, workload: str, **given: Any) -> Any:
    """The case the command-line options describe, of the run kind that claims the workload
    (an LLM model of the registry or ``--parallel``: LLM; else a training graph). ``given``:
    the options by parameter name (None or empty: not given): ``exact``, or ``composed`` or
    ``full`` (LLM runs: :data:`MODE_FLAGS`), ``search``,
    ``nodes``, ``sets``, ``force`` (accept implausible bare numbers),
    ``stragglers``/``compute_spread``/``links``/``npu_types`` (the flags' texts),
    ``placement`` (a file), the training flags (:data:`TRAINING_FLAGS`) and the LLM ones
    (:data:`LLM_FLAGS`, ``parallel``, ``precision``). Errors name the flag."""
    mode = _mode(given)
    options: dict[str, Any] = {"mode": mode}
    options.update(search=bool(given.get("search")), nodes=given.get("nodes"))
    for bound in ("max_messages", "max_micro_batches"):
        if given.get(bound) is not None:
            options[bound] = given[bound]
    with flags():
        options.update(variation_options(given))
        overrides = parse_sets(given.get("sets"))
        if RUN_KINDS.get("llm").claims(workload, {"parallel": given.get("parallel")}):  # type: ignore[misc]
            _refuse(given, TRAINING_FLAGS, LLM_UNUSED)
            return make_llm(
                system,
                workload,
                options,
                parallel=given.get("parallel") or "",
                global_batch=given.get("global_batch"),
                micro_batch=1 if given.get("micro_batch") is None else given["micro_batch"],
                seq=given.get("seq"),
                recompute=given.get("recompute"),
                precision=given.get("precision"),
                overrides=overrides,
                force=bool(given.get("force")),
            )
        _refuse(given, LLM_FLAGS, LLM_ONLY)
        for flag in ("composed", "full"):
            if given.get(flag):
                raise ConfigError(f"--{flag}", LLM_ONLY, True)
        _known_workload(workload)
        return _training_case(system, workload, options, overrides, given)


def _known_workload(workload: str) -> None:
    """Refuse a ``--workload`` that is neither a workload file nor a model of the zoo or the
    LLM registry, naming both lists (the zoo's own error names only the zoo)."""
    from ..workload.llm.models import MODELS
    from ..workload.loader import looks_like_path
    from ..workload.zoo import zoo_names
    from ..workload.zoo.checks import did_you_mean

    if looks_like_path(workload) or workload in zoo_names():
        return
    hint = did_you_mean(workload.lower(), [*zoo_names(), *MODELS.names()])
    raise ConfigError(
        "--workload",
        f"not a workload file, a model of the zoo ({', '.join(zoo_names())}) or an LLM model "
        f"({', '.join(sorted(MODELS.names()))}){hint}",
        workload,
    )


#: The mode flags of ``acesim run`` and the mode each asks for (none: the run kind's default).
MODE_FLAGS = {"exact": "exact", "composed": "composed", "full": "class"}


def _mode(given: Mapping[str, Any]) -> str:
    """The mode the flags in ``given`` ask for (at most one of :data:`MODE_FLAGS`)."""
    asked = [name for name in MODE_FLAGS if given.get(name)]
    if len(asked) > 1:
        raise ConfigError(
            f"--{asked[1]}",
            f"give at most one of --{', --'.join(MODE_FLAGS)}",
            " ".join(f"--{name}" for name in asked),
        )
    return MODE_FLAGS[asked[0]] if asked else "symmetric"


#: Why an LLM flag is refused for a training graph.
LLM_ONLY = "applies to LLM models (a model of the LLM registry)"

#: Why a training-graph flag is refused for an LLM model.
LLM_UNUSED = (
    "does not apply to LLM runs (they simulate one steady-state iteration; size them with "
    "--nodes, --global-batch, --micro-batch, --seq and --parallel)"
)


def _training_case(
    system: str,
    workload: str,
    options: dict[str, Any],
    overrides: dict[str, Any],
    given: Mapping[str, Any],
) -> Any:
    npus, shape, nodes = given.get("npus"), given.get("shape"), given.get("nodes")
    check_sizing(npus, shape, nodes, "--")
    if npus is not None:
        _warn_single_node(system, npus)
    loop = given.get("loop") or "layerwise"
    LOOPS.check(loop, "--loop")
    options.update(
        iterations=3 if given.get("iterations") is None else given["iterations"],
        warmup=1 if given.get("warmup") is None else given["warmup"],
        stop=given.get("stop") or "end",
        loop=loop,
        bucket_size=parse_quantity(given.get("bucket") or "25 MiB", "size", "--bucket-size"),
        shape=parse_shape(shape) if shape is not None else None,
        npus=npus,
    )
    return make_case(
        system,
        workload,
        options,
        overrides=overrides,
        batch_per_npu=given.get("batch"),
        precision=given.get("precision"),
        force=bool(given.get("force")),
    )


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
