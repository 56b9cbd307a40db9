"""Sweep points, whatever their run kind: a normalised point configuration in, flat
metrics out.

The endpoint value ``best_<kind>`` (``best_baseline``) runs that kind in every one of its
variants and keeps the fastest (``search``), so a sweep can express the paper's comparison
against the best baseline at every point; the row's ``variant`` says which variant won.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .kinds import RUN_KINDS
from .single import run_case

__all__ = ["run_point", "BEST_PREFIX"]

#: ``endpoint.kind = "best_<kind>"`` in a sweep means: search ``<kind>``'s variants.
BEST_PREFIX = "best_"


def run_point(config: Mapping[str, Any]) -> dict[str, Any]:
    """One point (its kind's configuration: ``kind``, ``system`` and the kind's inputs); its
    result's metrics as a flat dict (:meth:`~acesim.results.protocol.Result.metrics`)."""
    case = RUN_KINDS.get(config.get("kind", "training"), "kind").point_case(config)
    result, _execution = run_case(case)
    return dict(result.metrics())
