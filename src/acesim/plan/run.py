"""``acesim.plan(...)``: the plan's one entry point, from the CLI's inputs to a
:class:`~acesim.plan.report.PlanResult`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..errors import ConfigError
from ..workload.llm.models import MODELS, TransformerConfig
from .report import PlanResult
from .search import PlanRequest, search
from .space import parse_space

__all__ = ["plan"]


def _whole(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, "must be a whole number of at least 1", value)
    return value


def _positive_seconds(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(field, "must be a finite number of seconds", value)
    if value <= 0:
        raise ConfigError(field, "must be more than 0 seconds", value)
    return float(value)


def plan(
    system: SystemConfig | str | Path | Mapping[str, Any],
    model: TransformerConfig | str,
    *,
    global_batch: int,
    seq: int | None = None,
    precision: str = "bf16",
    nodes: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    endpoints: Sequence[str] | None = None,
    top: int = 10,
    space: Sequence[str] | Mapping[str, list[object]] = (),
    exhaustive: bool = False,
    full: bool = False,
    workers: int = 0,
    dask: Any = None,
    command: str | None = None,
    progress: Callable[[str, int], None] | None = None,
    time_limit: float | None = None,
    max_simulations: int | None = None,
) -> PlanResult:
    """Rank the parallel configurations of ``model`` on ``system`` (``nodes`` nodes,
    ``overrides`` applied) at ``global_batch`` sequences of ``seq`` tokens (default: the
    model's) in ``precision`` (docs/plan.md). ``endpoints``: substrates to rank under (default:
    the system's); ``space``: ``["tp=2,4"]`` or {axis: values} replacing default axes;
    ``full``: simulate each candidate in class mode (default: mode composed, each distinct
    pipeline pass once, :mod:`acesim.training.compose`);
    ``workers``/``dask``: where the simulations run (as ``acesim sweep``); ``command``: the
    ``acesim run`` options naming the system, for the rows' command lines (default ``-s NAME``
    when ``system`` is a name); ``time_limit`` (wall s, split evenly over the endpoints) and
    ``max_simulations`` (per endpoint): stop the search there, its result saying how far its
    best row can be from the best possible (docs/plan.md, "A budget")."""
    cfg = resolve_system(system, overrides=overrides, nodes=nodes)
    m = model if isinstance(model, TransformerConfig) else MODELS.get(model, "workload.name")
    _whole(global_batch, "global_batch")
    _whole(top, "top")
    if max_simulations is not None:
        _whole(max_simulations, "max_simulations")
    if time_limit is not None:
        _positive_seconds(time_limit, "time_limit")
    length = _whole(seq, "seq") if seq is not None else m.seq
    axes = parse_space(list(space)) if not isinstance(space, Mapping) else dict(space)
    if command is None:
        words = f"-s {system}" if isinstance(system, str | Path) else f"-s {cfg.name}"
        command = words + (f" --nodes {nodes}" if nodes is not None else "")
    request = PlanRequest(
        model=m,
        system=cfg,
        global_batch=global_batch,
        seq=length,
        precision=precision,
        endpoints=tuple(endpoints or ()),
        top=top,
        space=axes,
        exhaustive=exhaustive,
        command=command,
        mode="class" if full else "composed",
        time_limit=time_limit,
        max_simulations=max_simulations,
    )
    return PlanResult(request, search(request, workers=workers, dask=dask, progress=progress))
