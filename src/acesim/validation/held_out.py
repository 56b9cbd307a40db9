"""``acesim validate --transfer``: every row of the corpus simulated with its own system held
out, next to the in-sample run.

A row's system is its NPU (:func:`.transfer.unit_of`); its world (:func:`.loso.held_out_world`)
gives every fitted parameter of that system the value the transfer rules give from the other
systems' fits, refitted without it. The rows are then evaluated by the same code as
:func:`.evaluate.validate` (:func:`.evaluate.evaluate_case`, the world's values set on the
row's system first), every one a test row: no row of the system under test is fitted. This is
the error a user gets on a system acesim has no measurement of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import AcesimError
from .corpus import Case, Corpus, load_corpus
from .evaluate import chosen_families, evaluate_case, validate
from .loso import Presets, World, held_out_world, new_cache
from .report import CaseResult, FamilyReport, HeldOutValue, Report, TransferReport
from .transfer import unit_of

__all__ = ["validate_transfer"]


def _simulated(case: Case, quick: bool) -> bool:
    return case.status == "live" and (case.quick or not quick)


def validate_transfer(
    families: Iterable[str] | None = None,
    *,
    quick: bool = False,
    corpus: Corpus | str | Path | None = None,
    on_case: Callable[[CaseResult], Any] | None = None,
    rows: Iterable[str] | None = None,
    on_refit: Callable[[str, str], Any] | None = None,
) -> TransferReport:
    """The in-sample run of :func:`.evaluate.validate` and the held-out run of the same rows
    (see the module); arguments as :func:`.evaluate.validate`'s (``rows`` picks the rows run
    and reported; every system's fits still come from the whole corpus). ``on_refit(unit,
    preset)`` is called before each preset is fitted again for the world of the system
    ``unit`` held out (the refits come before that system's first row)."""
    loaded = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    chosen = chosen_families(loaded, families, rows)
    wanted = None if rows is None else loaded.rows(rows)
    in_sample = validate(
        [f.name for f in chosen], quick=quick, corpus=loaded, on_case=on_case, rows=wanted
    )
    presets = Presets.of(loaded)
    cache = new_cache(presets)
    worlds: dict[str, World | str] = {}
    reports: list[FamilyReport] = []
    for family in chosen:
        results: list[CaseResult] = []
        for case in family.cases:
            if wanted is not None and case.id not in wanted:
                continue
            adjust = None
            world: World | str | None = None
            if _simulated(case, quick):
                unit = unit_of(case.system)
                if unit not in worlds:
                    cache.on_fit = None if on_refit is None else partial(on_refit, unit)
                    try:
                        worlds[unit] = held_out_world(unit, presets, cache)
                    except AcesimError as exc:  # a refit out of reach: the rows say so
                        worlds[unit] = f"no held-out world for {unit}: {exc}"
                world = worlds[unit]
                adjust = world.adjust(case.system) if isinstance(world, World) else None
            if isinstance(world, str):
                result = CaseResult(case, "error", note=world, fitted=False)
            else:
                result = evaluate_case(case, family, quick=quick, adjust=adjust, held_out=True)
            results.append(result)
            if on_case is not None:
                on_case(result)
        reports.append(FamilyReport(family, tuple(results), held_out=True))
    held_out = Report(tuple(reports), quick=quick, corpus=loaded.origin)
    values = [
        HeldOutValue(unit, preset, parameter, value, how)
        for unit, world in worlds.items()
        if isinstance(world, World)
        for (preset, parameter), (value, how) in sorted(world.of_system(unit).items())
    ]
    return TransferReport(in_sample, held_out, tuple(values))
