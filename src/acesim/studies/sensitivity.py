"""How far the reproduction's headline figures move under the assumptions a paper does not pin
down: the same reproduction re-run under each registered variant of the system.

Variants (:data:`VARIANTS`; each a change to the system, applied before the reproduction):

* ``shipped``: the preset as it is (fitted kernels, memory-level-parallelism HBM arbitration,
  PyTorch AMP, the streaming ACE);
* ``ideal_kernels``: kernels at 100% of the roofline (acesim before its kernel model);
* ``drf``: HBM shared by dominant-resource fairness instead of memory-level parallelism;
* ``static_hbm``: the baseline's HBM statically partitioned (the paper's baselines);
* ``fp32``: every workload in FP32 throughout instead of AMP;
* ``store_and_forward``: ACE without pipelining through its SRAM (acesim's ACE before issue
  13);
* ``batch_x4``: four times the batch per NPU (more compute per byte communicated);
* ``dma_half``: ACE's DMA at half its bandwidth.

The baseline's SM split is not a variant: every case already searches it for the best.

``sensitivity_study`` returns, per variant, the headline figures (the keys of
:func:`acesim.studies.reproduce.headline`) and, per figure, its range over the variants.
Every variant is a whole reproduction without the SRAM sweep, the other HBM targets and the
no-overlap runs (no headline figure or ordering reads them): minutes on two cores each;
:func:`plan_sensitivity` plans them as tasks that run in the same pool (or Dask cluster) as
the reproduction, :func:`assemble_sensitivity` reads them back. A variant's run that is one of
the reproduction's simulations (it never read what the variant moved: ``dma_half`` and a
baseline run) takes that run's result (:mod:`acesim.studies.dedup`).
``acesim reproduce ace-isca21`` runs every variant by default (``--no-sensitivity`` skips it,
``--sensitivity a,b`` picks some); :func:`acesim.studies.reproduce.reproduce` only when
asked (``sensitivity=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..config.resolve import derive
from ..config.system import SystemConfig
from ..hardware.endpoints.ace import AceSettings
from ..registry import Registry
from .tasks import Task

__all__ = [
    "VARIANTS",
    "FIGURES",
    "SensitivityVariant",
    "headline_values",
    "plan_sensitivity",
    "hold_back",
    "needed",
    "run_held_back",
    "assemble_sensitivity",
    "figure_ranges",
    "sensitivity_study",
]


@dataclass(frozen=True)
class SensitivityVariant:
    """One assumption moved: ``change(system)`` -> the system the reproduction runs on."""

    name: str
    label: str
    change: Callable[[SystemConfig], SystemConfig]


#: The variants, by name (register more with ``VARIANTS.register``).
VARIANTS: Registry[SensitivityVariant] = Registry("sensitivity variant", "--sensitivity")


def _npu(system: SystemConfig, **changes: Any) -> SystemConfig:
    """``system`` with ``[npu]`` fields changed."""
    return derive(system, {f"npu.{name}": value for name, value in changes.items()})


def _workloads(system: SystemConfig, **changes: Callable[[Any], Any]) -> SystemConfig:
    """``system`` with every reproduction workload's fields changed (``field=f``: the field's
    value becomes ``f(value)``)."""
    if system.reproduction is None:
        return derive(system, {})
    table = {
        name: {
            **work.model_dump(),
            **{f: change(getattr(work, f)) for f, change in changes.items()},
        }
        for name, work in system.reproduction.workloads.items()
    }  # the whole table: a workload's name may hold a dot, which a dotted path cannot
    return derive(system, {"reproduction.workloads": table})


def _ace(system: SystemConfig) -> AceSettings:
    return cast(AceSettings, system.endpoint.settings("ace"))


def _with_kind_settings(system: SystemConfig, kind: str, **changes: Any) -> SystemConfig:
    """``system`` with ``kind``'s settings changed, its endpoint kind unchanged."""
    return derive(system, {f"endpoint.{kind}.{name}": value for name, value in changes.items()})


for _variant in (
    SensitivityVariant("shipped", "as shipped", lambda s: s),
    SensitivityVariant(
        "ideal_kernels",
        "ideal roofline kernels",
        lambda s: _npu(s, kernels={}),  # every field at its default: the roofline
    ),
    SensitivityVariant("drf", "DRF HBM arbitration", lambda s: _npu(s, hbm_arbitration="drf")),
    SensitivityVariant(
        "static_hbm",
        "static HBM partition (baseline)",
        lambda s: _with_kind_settings(s, "baseline", hbm_sharing="static"),
    ),
    SensitivityVariant(
        "fp32", "FP32 throughout", lambda s: _workloads(s, precision=lambda _: "fp32")
    ),
    SensitivityVariant(
        "store_and_forward",
        "store-and-forward ACE",
        lambda s: _with_kind_settings(s, "ace", mode="store_and_forward"),
    ),
    SensitivityVariant(
        "batch_x4", "4x the batch per NPU", lambda s: _workloads(s, batch_per_npu=lambda b: 4 * b)
    ),
    SensitivityVariant(
        "dma_half",
        "ACE DMA at half its bandwidth",
        lambda s: _with_kind_settings(s, "ace", dma_bandwidth=_ace(s).dma_bandwidth / 2),
    ),
):
    VARIANTS.register(_variant.name, _variant)


#: The headline figures (label, summary key, workload or None), in the paper's order.
FIGURES = (
    ("HBM saving", "hbm_saving_avg", None),
    ("net util gain avg", "net_util_gain_avg", None),
    ("net util gain max", "net_util_gain_max", None),
    ("ResNet-50 avg", "speedup_avg", "resnet50"),
    ("GNMT avg", "speedup_avg", "gnmt"),
    ("DLRM avg", "speedup_avg", "dlrm"),
    ("ResNet-50 max", "speedup_max", "resnet50"),
    ("GNMT max", "speedup_max", "gnmt"),
    ("DLRM max", "speedup_max", "dlrm"),
)


def headline_values(summary: dict[str, Any]) -> dict[str, float | None]:
    """The headline figures of a reproduction summary by label (None: not in this run)."""
    out: dict[str, float | None] = {}
    for label, key, work in FIGURES:
        value = summary.get(key)
        if work is not None:
            value = value.get(work) if isinstance(value, dict) else None
        out[label] = float(value) if isinstance(value, (int, float)) else None
    return out


def _same(a: SystemConfig, b: SystemConfig) -> bool:
    return a is b or a == b


def plan_sensitivity(
    system: SystemConfig,
    variants: Sequence[str],
    *,
    workloads: list[str] | None = None,
    npus: list[int] | None = None,
    endpoints: Sequence[str] | None = None,
    include_shipped: bool = False,
) -> list[Task]:
    """The tasks of every variant's reproduction (keys prefixed ``("sensitivity", name)``):
    without the SRAM sweep, the other HBM targets and the no-overlap runs. A variant that
    leaves the system as it is (``shipped``) is the reproduction itself and plans nothing
    unless ``include_shipped`` (a study run without the main reproduction)."""
    from .reproduce import plan_reproduction

    tasks: list[Task] = []
    for name in variants:
        changed = VARIANTS.get(name, "--sensitivity").change(system)
        if _same(changed, system) and not include_shipped:
            continue
        tasks += plan_reproduction(
            changed,
            workloads=workloads,
            npus=npus,
            sram=False,
            endpoints=endpoints,
            hbm_targets=False,
            prefix=("sensitivity", name),
            no_overlap=False,
        )
    return tasks


def _ideal_after_first(task: Task) -> bool:
    """A variant's run of the ideal endpoint in a variant after its first
    (``(..., "run", workload, NPUs, "ideal", v)``, ``v`` > 0)."""
    key = task.key
    return (
        isinstance(key, tuple)
        and len(key) == 7
        and key[2] == "run"
        and key[5] == "ideal"
        and key[6] != 0
    )


def hold_back(tasks: Sequence[Task]) -> tuple[list[Task], list[Task]]:
    """``tasks`` of :func:`plan_sensitivity` as those run at once and those held back: the
    ideal endpoint's variants after its first. A variant's figures never read the ideal
    endpoint, and its orderings (ideal >= ACE >= best baseline) read only the ideal's best:
    where the first variant already keeps both of the ideal's orderings, the best (no slower
    than it) keeps them too, and the others change nothing a variant reports
    (:func:`needed`)."""
    now = [t for t in tasks if not _ideal_after_first(t)]
    held = [t for t in tasks if _ideal_after_first(t)]
    return now, held


def needed(
    system: SystemConfig,
    held: Sequence[Task],
    results: Mapping[Any, Any],
    *,
    npus: list[int] | None = None,
    endpoints: Sequence[str] | None = None,
) -> list[Task]:
    """Of the ``held`` tasks (:func:`hold_back`), those of a case (variant, workload, NPUs)
    where the ideal endpoint's variants run so far break an ordering that reads it: only the
    ideal endpoint's best says whether it holds there."""
    from .reproduce import assemble_reproduction

    keys = [cast(tuple[Any, ...], t.key) for t in held]
    broken: set[tuple[Any, ...]] = set()
    for name in sorted({str(key[1]) for key in keys}):
        changed = VARIANTS.get(name).change(system)
        summary = assemble_reproduction(
            changed, results, npus=npus, endpoints=endpoints, prefix=("sensitivity", name)
        ).summary
        for ordering, entry in summary["orderings"].items():
            if ordering.startswith("ideal"):
                broken |= {(name, b["workload"], b["npus"]) for b in entry["broken"]}
    return [t for t, key in zip(held, keys, strict=True) if (key[1], key[3], key[4]) in broken]


def run_held_back(
    system: SystemConfig,
    held: Sequence[Task],
    results: dict[Any, Any],
    *,
    npus: list[int] | None,
    endpoints: Sequence[str] | None,
    options: dict[str, Any],
) -> None:
    """Run the ``held`` tasks (:func:`hold_back`) an ordering needs (:func:`needed`) into
    ``results``, with :func:`~acesim.studies.reproduce.run_reusing`'s ``options``; the
    progress (``options["progress"]``) advanced for the others too."""
    from .reproduce import run_reusing

    if not held:
        return
    more = needed(system, held, results, npus=npus, endpoints=endpoints)
    results.update(run_reusing(more, [], **options))
    advance = options.get("progress")
    if advance is not None:
        for _ in range(len(held) - len(more)):
            advance()


def assemble_sensitivity(
    system: SystemConfig,
    variants: Sequence[str],
    results: Mapping[Any, Any],
    *,
    main: dict[str, Any] | None = None,
    npus: list[int] | None = None,
    endpoints: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Per variant its headline figures; per figure its range (:func:`figure_ranges`)."""
    from .reproduce import assemble_reproduction

    rows: dict[str, Any] = {}
    for name in variants:
        variant = VARIANTS.get(name)
        changed = variant.change(system)
        if main is not None and _same(changed, system):
            summary = main
        else:
            summary = assemble_reproduction(
                changed, results, npus=npus, endpoints=endpoints, prefix=("sensitivity", name)
            ).summary
        rows[name] = {
            "label": variant.label,
            "figures": headline_values(summary),
            "within": sum(1 for d in summary["deviations"] if d["within"]),
            "out_of": len(summary["deviations"]),
            # the orderings (ideal >= ACE >= best baseline) this variant breaks, and where
            "orderings_broken": {
                k: v["broken"] for k, v in summary.get("orderings", {}).items() if not v["holds"]
            },
        }
    shipped = headline_values(main) if main is not None else None
    return {"variants": rows, "ranges": figure_ranges(rows, shipped)}


def figure_ranges(
    rows: Mapping[str, Any], shipped: Mapping[str, float | None] | None
) -> dict[str, Any]:
    """Per headline figure (:data:`FIGURES`): the shipped value, the range over the variants'
    ``rows`` and the shipped value (a study of some variants still ranges from the preset as
    shipped: an assumption moved is measured from it), the variants at each end, and the
    paper's value."""
    from .reproduce import PAPER, figure_id

    ranges: dict[str, Any] = {}
    for label, key, work in FIGURES:
        values = {
            n: r["figures"][label] for n, r in rows.items() if r["figures"][label] is not None
        }
        if shipped is not None and shipped[label] is not None:
            values.setdefault("shipped", shipped[label])
        if not values:
            ranges[label] = None
            continue
        low = min(values, key=lambda n: (values[n], n))
        high = max(values, key=lambda n: (values[n], n))
        paper = PAPER[key][work] if work is not None else PAPER[key]
        ranges[label] = {
            "id": figure_id(key, work),
            "shipped": shipped[label] if shipped is not None else None,
            "low": values[low],
            "high": values[high],
            "low_variant": low,
            "high_variant": high,
            "paper": paper,
            "paper_in_range": values[low] <= paper <= values[high],
        }
    return ranges


def _variant_of(task: Task) -> str:
    """The variant a task of :func:`plan_sensitivity` belongs to."""
    return str(task.key[1]) if isinstance(task.key, tuple) else ""


def sensitivity_study(
    system: SystemConfig,
    *,
    variants: list[str] | None = None,
    workers: int | None = None,
    dask: Any = None,
    workloads: list[str] | None = None,
    npus: list[int] | None = None,
    endpoints: Sequence[str] | None = None,
    progress: Callable[[int], Callable[[], Any]] | None = None,
) -> dict[str, Any]:
    """The study alone (module): every variant's reproduction (the shipped one included) in
    one pool; :func:`assemble_sensitivity`'s result, with the shipped variant as ``main``."""
    from .reproduce import assemble_reproduction, run_reusing

    names = [VARIANTS.check(n, "--sensitivity") for n in (variants or VARIANTS.names())]
    tasks = plan_sensitivity(
        system,
        names,
        workloads=workloads,
        npus=npus,
        endpoints=endpoints,
        include_shipped=True,
    )
    advance = progress(len(tasks)) if progress else None
    shipped = [n for n in names if _same(VARIANTS.get(n).change(system), system)]
    tasks, held = hold_back(tasks)
    # the shipped variant's runs first: another variant's run that is one of them (it never
    # read what the variant moved) takes its result (acesim.studies.dedup)
    first = [t for t in tasks if _variant_of(t) in shipped[:1]]
    later = [t for t in tasks if _variant_of(t) not in shipped[:1]]
    options: dict[str, Any] = {"workers": workers, "dask": dask, "progress": advance}
    results = run_reusing(first, later, **options)
    run_held_back(system, held, results, npus=npus, endpoints=endpoints, options=options)
    main = None
    for name in shipped[:1]:
        main = assemble_reproduction(
            system, results, npus=npus, endpoints=endpoints, prefix=("sensitivity", name)
        ).summary
    return assemble_sensitivity(system, names, results, main=main, npus=npus, endpoints=endpoints)
