"""One run of a case, whatever its kind: execute it, or search its endpoint kind's variants.

With ``options.search`` the case's endpoint kind is run in every one of its variants (the
baseline's splits) and the fastest (the smallest figure of merit) is reported, as a
practitioner would tune it; ties keep the first listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config.experiment import ExperimentConfig, RunOptions
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS, Variant
from ..units import format_time
from .case import SystemLike, WorkloadLike, case_from_experiment
from .estimate import Estimate
from .how import CannotBeat, How
from .kinds import kind_of, make_run_case

__all__ = ["execute", "run_case", "run", "run_system", "run_experiment", "variant_case"]


def variant_case(case: Any, kind: str | None, variant: Variant | None) -> Any:
    """``case`` with endpoint ``kind`` (default: unchanged) in ``variant``'s settings."""
    system = case.system.with_endpoint(kind, **(variant.changes if variant else {}))
    return case.with_system(system)


def execute(
    case: Any,
    *,
    trace: bool = False,
    variant: str = "",
    on_estimate: Callable[[Estimate], Any] | None = None,
    on_progress: Callable[[int, int], Any] | None = None,
    beat: float | None = None,
) -> tuple[Any, Any]:
    """Run ``case`` as given (its kind's ``execute``): the result and the execution (None
    for a collective). ``trace``: record what :func:`acesim.results.trace.write_trace`
    needs; ``on_estimate(estimate)`` is told the run's cost before it starts
    (:class:`~acesim.runs.estimate.Estimate`), ``on_progress(done, total)`` the graph nodes
    finished as it runs (progress bars); ``beat``: raise
    :class:`~acesim.runs.how.CannotBeat` instead of running where the kind bounds the
    figure above it (:class:`~acesim.runs.how.How`). A run estimated to send more than
    ``options.max_messages`` messages is refused before it starts (the work bound:
    ConfigError naming ``run.max_messages``, the endpoint kind and ``variant``, with the
    estimate)."""
    bound = case.options.max_messages
    # which run: a comparison runs several endpoints, a search their variants
    where = f"{case.system.endpoint.kind} endpoint" + (f" ({variant})" if variant else "")

    def estimated(estimate: Estimate) -> None:
        if estimate.messages > bound:
            raise ConfigError(
                "run.max_messages",
                f"the run on the {where} would send about {estimate.messages:,} "
                "messages (roughly "
                f"{format_time(estimate.seconds)} of CPU at the measured cost of "
                f"{estimate.cost} runs), more than the bound; raise it knowingly "
                "(--max-messages N, run.max_messages)",
                bound,
            )
        if on_estimate is not None:
            on_estimate(estimate)

    how = How(
        trace=trace, variant=variant, on_estimate=estimated, on_progress=on_progress, beat=beat
    )
    return kind_of(case).execute(case, how)


def run_case(
    case: Any,
    *,
    trace: bool = False,
    on_estimate: Callable[[Estimate], Any] | None = None,
    on_progress: Callable[[int, int], Any] | None = None,
) -> tuple[Any, Any]:
    """Run ``case``; with ``options.search`` (always for the bound kind, ``ideal``), every
    variant of its endpoint kind, keeping the fastest (module docstring): a variant whose
    figure the run kind bounds above the fastest so far is not run (it would not be kept:
    :class:`~acesim.runs.how.CannotBeat`). Callbacks as :func:`execute`'s."""
    hooks: dict[str, Any] = {"on_estimate": on_estimate, "on_progress": on_progress}
    kind = ENDPOINT_KINDS.get(case.system.endpoint.kind)
    if not case.options.search and kind.role != "bound":  # the bound is always its best
        return execute(case, trace=trace, **hooks)
    best: tuple[Any, Any] | None = None
    for v in kind.variants_of(case.system):
        beat = None if best is None else best[0].figure
        try:
            outcome = execute(
                variant_case(case, None, v), trace=trace, variant=v.label, beat=beat, **hooks
            )
        except CannotBeat:
            continue
        if best is None or outcome[0].figure < best[0].figure:
            best = outcome
    assert best is not None  # variants_of returns at least one
    return best


def run(
    system: SystemLike = "ace-isca21",
    workload: WorkloadLike | Any = "resnet50",
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    endpoint: str | None = None,
    **inputs: Any,
) -> Any:
    """Simulate ``workload`` on ``system`` with one endpoint; the result
    (:class:`~acesim.results.run.RunResult`, :class:`~acesim.results.llm.LlmResult` for an
    LLM model, :class:`~acesim.results.collective.CollectiveResult` for a collective).

    Args:
        system: a preset name, a system file, a table or a :class:`~acesim.SystemConfig`.
        workload: a zoo name (loaded with the system's settings for it), a workload file, a
            Chakra trace prefix, a :class:`~acesim.workload.model.Workload` or a graph; an
            LLM model (a name of the LLM registry, or a TransformerConfig); or a collective
            operation (``"all-reduce"``, with ``size=``: bytes or ``"64 MiB"``).
        options: :class:`~acesim.config.experiment.RunOptions` (or a table of them).
        endpoint: run this endpoint kind instead of the system's.
        inputs: the run options as keywords (``iterations=5``, ``npus=16``, ``nodes=4``,
            ``mode="exact"``, ``search=True``); for zoo workloads ``batch_per_npu`` and
            ``precision``; for LLM models ``parallel`` (``"tp=8,pp=4"``), ``global_batch``,
            ``micro_batch``, ``seq``, ``recompute``, ``precision``; ``force=True`` accepts bare
            numbers implausible for their fields (:mod:`acesim.config.plausible`).
    """
    case = make_run_case(system, workload, options, **inputs)
    if endpoint is not None:
        case = variant_case(case, endpoint, None)
    return run_case(case)[0]


def run_system(
    system: SystemLike, workload: WorkloadLike, *, trace: bool = False, **inputs: Any
) -> tuple[Any, Any]:
    """Run ``workload`` on ``system`` as configured (its endpoint kind and settings), with run
    options as keywords; the result and the execution (for traces and inspection)."""
    return run_case(make_run_case(system, workload, **inputs), trace=trace)


def run_experiment(exp: ExperimentConfig | Mapping[str, Any]) -> Any:
    """One run as an experiment document (or its table) says."""
    return run_case(case_from_experiment(exp))[0]
