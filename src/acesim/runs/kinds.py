"""The run kinds: one registry, one protocol (parse -> case -> plan -> strategy -> execute ->
result).

Every kind of run (one collective, a training graph, LLM training) provides:

* a case type (a frozen dataclass with ``kind``, ``system``, ``options``,
  ``with_system(system)`` and ``with_options(**changes)``), built from the kind's inputs by
  ``make`` (``acesim.run``/``acesim.compare``: the kind that ``claims`` the workload) or from a
  sweep point (``point_config`` normalises a raw point, ``point_case`` builds its case);
* ``execute(case, how) -> (result, execution)``: the strategy decided
  (:func:`acesim.training.strategy.decide`), the run as ``how`` (:class:`~acesim.runs.how.How`:
  trace, variant, estimate and progress hooks) says, its result in the
  :class:`~acesim.results.protocol.Result` protocol.

The plan, searching an endpoint kind's variants and comparing kinds
(:mod:`acesim.runs.single`, :mod:`acesim.runs.compare`), tables, JSON and sweep rows are then
the same code for every kind. A new kind is one module with those functions and one
registration here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config.system import SystemConfig
from ..errors import ConfigError
from ..network.ops import COLLECTIVE_OPS
from ..registry import Registry
from ..workload.llm.models import MODELS, TransformerConfig
from .case import make_case
from .collective import (
    POINT_PARAMS as COLLECTIVE_PARAMS,
)
from .collective import (
    collective_point_case,
    collective_point_config,
    execute_collective,
    make_collective_case,
)
from .jobs import POINT_PARAMS as JOBS_PARAMS
from .jobs import execute_jobs, jobs_point_case, jobs_point_config
from .llm import POINT_PARAMS as LLM_PARAMS
from .llm import execute_llm, llm_point_case, llm_point_config, make_llm
from .training import execute_training

__all__ = ["RunKind", "RUN_KINDS", "kind_of", "make_run_case", "LLM_INPUTS"]


@dataclass(frozen=True)
class RunKind:
    """A run kind (module docstring). ``point_params``: the sweep point's own inputs (besides
    the system); ``claims(workload, inputs)``: whether ``acesim.run``'s workload and keyword
    inputs are this kind's."""

    name: str
    summary: str
    execute: Callable[..., tuple[Any, Any]]
    point_config: Callable[[SystemConfig, dict[str, Any], Mapping[str, Any]], dict[str, Any]]
    point_case: Callable[[Mapping[str, Any]], Any]
    point_params: tuple[str, ...] = ()
    make: Callable[..., Any] | None = None
    claims: Callable[[Any, Mapping[str, Any]], bool] | None = None


#: Run kinds by name (``run`` stands for ``training``, the sweep kind's name).
RUN_KINDS: Registry[RunKind] = Registry("run kind", "kind")

#: ``acesim.run``'s keyword inputs that only LLM runs take.
LLM_INPUTS = ("parallel", "global_batch", "micro_batch", "seq", "recompute")


def _training_point_config(
    system: SystemConfig, system_doc: dict[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    from .case import training_point_config

    return training_point_config(system, system_doc, raw)


def _training_point_case(config: Mapping[str, Any]) -> Any:
    from .case import case_from_experiment

    return case_from_experiment({k: config[k] for k in ("system", "workload", "run")})


def _is_collective(workload: Any, _inputs: Mapping[str, Any]) -> bool:
    """``acesim.run``/``compare``'s workload names a collective operation (``all-reduce``)."""
    return isinstance(workload, str) and workload in COLLECTIVE_OPS


def _make_collective(system: Any, op: str, options: Any = None, **inputs: Any) -> Any:
    """The collective case of ``op`` (``size=`` its bytes, required; the other keyword inputs
    as :func:`~acesim.runs.collective.make_collective_case` takes them)."""
    if inputs.get("size") is None:
        raise ConfigError("size", f"a collective ({op}) needs its size, e.g. size='64 MiB'")
    size = inputs.pop("size")
    return make_collective_case(system, op, size, options, **inputs)


def _is_llm(workload: Any, inputs: Mapping[str, Any]) -> bool:
    named = isinstance(workload, str) and workload in MODELS
    given = any(inputs.get(k) is not None for k in LLM_INPUTS)
    return named or isinstance(workload, TransformerConfig) or given


RUN_KINDS.register(
    "collective",
    RunKind(
        "collective",
        "one collective (nccl-tests style), optionally beside compute kernels",
        execute_collective,
        collective_point_config,
        collective_point_case,
        COLLECTIVE_PARAMS,
        make=_make_collective,
        claims=_is_collective,
    ),
)
RUN_KINDS.register(
    "llm",
    RunKind(
        "llm",
        "LLM training with Megatron parallelism (a model of the LLM registry)",
        execute_llm,
        llm_point_config,
        llm_point_case,
        LLM_PARAMS,
        make=make_llm,
        claims=_is_llm,
    ),
)
RUN_KINDS.register(
    "training",
    RunKind(
        "training",
        "a training graph: a zoo model, a workload file or a Chakra trace",
        execute_training,
        _training_point_config,
        _training_point_case,
        ("workload", "run"),
        make=make_case,
        claims=lambda _workload, _inputs: True,
    ),
)
RUN_KINDS.alias("run", "training")
RUN_KINDS.register(
    "jobs",
    RunKind(
        "jobs",
        "several jobs (runs of any kind) placed on one system, in one simulation",
        execute_jobs,
        jobs_point_config,
        jobs_point_case,
        JOBS_PARAMS,
    ),
)


def kind_of(case: Any) -> RunKind:
    """The run kind of ``case``."""
    return RUN_KINDS.get(case.kind)


def make_run_case(system: Any, workload: Any, options: Any = None, **inputs: Any) -> Any:
    """The case of ``workload`` on ``system``: built by the first kind that claims the
    workload and the keyword inputs (an LLM model name, or ``parallel=``; else a training
    graph); LLM inputs given as None count as not given."""
    inputs = {k: v for k, v in inputs.items() if k not in LLM_INPUTS or v is not None}
    for _name, kind in RUN_KINDS.items():
        if kind.make is not None and kind.claims is not None and kind.claims(workload, inputs):
            return kind.make(system, workload, options, **inputs)
    raise AssertionError("the training kind claims every workload")  # pragma: no cover
