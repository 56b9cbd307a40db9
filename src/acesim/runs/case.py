"""A case: one system, one workload and the run options, resolved once.

Every entry point builds a :class:`Case` here (the CLI, :func:`acesim.run`, :func:`acesim.compare`,
sweep points, reproduction cases), so the same inputs give the same case:

* the system is resolved once (:func:`acesim.config.resolve.resolve_system`: preset, file or
  table; overrides; scaled out to ``options.nodes`` nodes or the network resized to
  ``options.shape`` or ``options.npus``);
* a workload given by name is loaded with the system's own settings for it (the preset's
  ``[reproduction.workloads.<name>]`` batch and precision), unless the caller gives them; a
  :class:`~acesim.workload.model.Workload` object is used as built, a Chakra trace prefix is
  read as an execution graph;
* the workload's matrix kernels must have a peak on the system's NPU (``npu.matrix_flops``):
  a precision whose math dtype the NPU does not list is a ConfigError here, before anything
  runs;
* the case records the batch and precision it ended up with, so every result can say them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from ..config.errors import config_error_from
from ..config.experiment import ExperimentConfig, RunOptions, WorkloadConfig
from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..config.variation import check_placement
from ..errors import ConfigError
from ..precision import PRECISIONS
from ..workload.chakra import read_chakra
from ..workload.graph import Graph
from ..workload.loader import load_workload
from ..workload.model import Workload, matrix_dtypes
from .memory import check_footprint

__all__ = [
    "Case",
    "make_case",
    "case_from_experiment",
    "run_options",
    "chakra_source",
    "check_precision",
    "check_math",
]

SystemLike = SystemConfig | str | Path | Mapping[str, Any]
WorkloadLike = Workload | Graph | str | Path


@dataclass(frozen=True)
class Case:
    """What one training-graph run needs, resolved (picklable, for worker processes)."""

    kind: ClassVar[str] = "training"

    system: SystemConfig
    workload: Workload | Graph
    options: RunOptions
    workload_name: str
    batch_per_npu: int | None
    precision: str | None

    def with_system(self, system: SystemConfig) -> Case:
        """The same case on another system (an endpoint variant)."""
        return replace(self, system=system)

    def with_options(self, **changes: Any) -> Case:
        """The same case with some run options changed (validated)."""
        return replace(self, options=run_options(self.options, **changes))


def run_options(
    options: RunOptions | Mapping[str, Any] | None = None, **changes: Any
) -> RunOptions:
    """Validated run options from a RunOptions, a table or keywords (ConfigError naming
    ``run.<field>``); ``exact=True`` is short for ``mode="exact"``."""
    if isinstance(options, RunOptions):
        base: dict[str, Any] = options.model_dump()
    else:
        base = dict(options or {})
    if "exact" in changes:  # a convenience for mode
        changes = dict(changes)
        base["mode"] = "exact" if changes.pop("exact") else "symmetric"
    base.update(changes)
    try:
        return RunOptions.model_validate(base)
    except ValidationError as exc:
        raise config_error_from(exc, RunOptions, "run") from None


def chakra_source(name: str) -> str | None:
    """``name`` as a Chakra trace source (a ``.et`` file or a ``<prefix>`` of ``.<rank>.et``)."""
    if name.endswith(".et") or Path(f"{name}.0.et").exists():
        return name
    return None


def _workload(
    workload: WorkloadLike,
    system: SystemConfig,
    batch: int | None,
    precision: str | None,
) -> tuple[Workload | Graph, str, int | None, str | None]:
    if isinstance(workload, Graph):
        for option, value in (("batch_per_npu", batch), ("precision", precision)):
            if value is not None:
                raise ConfigError(f"workload.{option}", "does not apply to execution graphs")
        return workload, workload.name, None, None
    if isinstance(workload, Workload):
        for option, value in (("batch_per_npu", batch), ("precision", precision)):
            if value is not None:
                raise ConfigError(
                    f"workload.{option}",
                    "is fixed by the Workload object given; load it with this option instead",
                    value,
                )
        return workload, workload.name, workload.batch_per_npu, workload.precision
    name = os.fspath(workload)
    try:
        WorkloadConfig.model_validate(
            {"name": name, "batch_per_npu": batch, "precision": precision}
        )
    except ValidationError as exc:
        raise config_error_from(exc, WorkloadConfig, "workload") from None
    source = chakra_source(name)
    if source is not None:
        for option, value in (("batch_per_npu", batch), ("precision", precision)):
            if value is not None:
                raise ConfigError(f"workload.{option}", "does not apply to Chakra traces", value)
        graph = read_chakra(source, dim_sizes=list(system.network.shape))
        return graph, graph.name, None, None
    repro = system.reproduction
    if repro is not None and name in repro.workloads:
        # The system's own per-NPU settings for this workload, unless the caller gave them.
        preset = repro.workloads[name]
        batch = batch if batch is not None else preset.batch_per_npu
        precision = precision if precision is not None else preset.precision
    loaded = load_workload(name, batch_per_npu=batch, precision=precision)
    return loaded, loaded.name, loaded.batch_per_npu, loaded.precision


def check_precision(workload: Workload | Graph, system: SystemConfig) -> None:
    """ConfigError unless the system's NPU has a matrix peak for every matrix kernel's dtype
    (:func:`check_math`)."""
    if isinstance(workload, Graph):
        dtypes = matrix_dtypes(
            node.compute for nodes in workload.ranks for node in nodes if node.compute is not None
        )
    else:
        dtypes = workload.matrix_dtypes()
    precision = workload.precision if isinstance(workload, Workload) else None
    for dtype in dtypes:
        check_math(system, dtype, precision)


def check_math(system: SystemConfig, dtype: str, precision: str | None) -> None:
    """ConfigError unless the system's NPU has a matrix peak in ``dtype``; when ``dtype`` is
    the math of the training ``precision``, the error names ``workload.precision`` and the
    precisions the NPU can run, else the NPU's own error (``npu.matrix_flops.<dtype>``)."""
    npu = system.npu
    if dtype in npu.matrix_flops:
        return
    if precision is not None and PRECISIONS.get(precision).math == dtype:
        runnable = [n for n, p in PRECISIONS.items() if p.math in npu.matrix_flops]
        raise ConfigError(
            "workload.precision",
            f"runs its matrix math in {dtype}, which this NPU ({npu.name}, system "
            f"{system.name}) has no peak for "
            f"(npu.matrix_flops lists {', '.join(npu.matrix_flops)}); precisions it can "
            f"run: {', '.join(runnable) or 'none'}",
            precision,
        )
    npu.matrix_peak(dtype)


def make_case(
    system: SystemLike,
    workload: WorkloadLike = "resnet50",
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    batch_per_npu: int | None = None,
    precision: str | None = None,
    force: bool = False,
    **option_changes: Any,
) -> Case:
    """Resolve a case (see module docstring). ``option_changes`` are :class:`RunOptions`
    fields (``iterations=5``, ``npus=16``, ``nodes=4``); ``force`` accepts bare numbers
    implausible for their fields (:mod:`acesim.config.plausible`)."""
    opts = run_options(options, **option_changes)
    if opts.max_micro_batches != RunOptions.model_fields["max_micro_batches"].default:
        raise ConfigError(
            "run.max_micro_batches",
            "applies to LLM runs only (a training graph's work is bounded by run.max_messages)",
            opts.max_micro_batches,
        )
    resolved = resolve_system(
        system,
        overrides=overrides,
        shape=opts.shape,
        npus=opts.npus,
        nodes=opts.nodes,
        force=force,
    )
    check_placement(opts.placement, math.prod(resolved.network.shape))
    work, name, batch, prec = _workload(workload, resolved, batch_per_npu, precision)
    check_precision(work, resolved)
    check_footprint(work, resolved)
    return Case(resolved, work, opts, name, batch, prec)


def case_from_experiment(exp: ExperimentConfig | Mapping[str, Any]) -> Case:
    """The case of an experiment document."""
    if not isinstance(exp, ExperimentConfig):
        try:
            exp = ExperimentConfig.model_validate(dict(exp))
        except ValidationError as error:
            raise config_error_from(error, ExperimentConfig) from None
    return make_case(
        exp.system,
        exp.workload.name,
        exp.run,
        overrides=exp.overrides,
        batch_per_npu=exp.workload.batch_per_npu,
        precision=exp.workload.precision,
    )


def training_point_config(
    system: SystemConfig, system_doc: dict[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    """The normalised configuration of a training sweep point (an experiment document's
    ``workload`` and ``run`` tables; ConfigError naming ``workload.<field>`` or
    ``run.<field>``): the workload must exist (a zoo model, a file or a Chakra trace prefix)
    before anything runs, so a typo is one error, not a failed point per row."""
    options = run_options(raw.get("run", {})).model_dump(mode="json")
    try:
        workload = WorkloadConfig.model_validate(raw.get("workload", {}))
    except ValidationError as exc:
        raise config_error_from(exc, WorkloadConfig, "workload") from None
    _check_workload(workload.name)
    doc = workload.model_dump(mode="json")
    return {"kind": "run", "system": system_doc, "workload": doc, "run": options}


def _check_workload(name: str) -> None:
    """ConfigError unless ``name`` is a zoo model, a file or a Chakra trace prefix."""
    import difflib

    from ..workload.zoo import zoo_names

    if name in zoo_names() or chakra_source(name) is not None:
        return
    if Path(name).exists():  # run points read workload files from the current folder
        return
    close = difflib.get_close_matches(name, zoo_names(), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"the zoo has {', '.join(zoo_names())}"
    raise ConfigError(
        "workload.name", "is not a zoo model, a workload file or a Chakra trace", name, hint=hint
    )
