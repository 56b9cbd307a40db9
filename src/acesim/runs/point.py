"""Sweep points of kind ``run``: an experiment document in, flat metrics out.

The endpoint value ``best_<kind>`` (``best_baseline``) runs that kind in every one of its
variants and keeps the fastest (``run.search``), so a sweep can express the paper's
comparison against the best baseline at every point; ``run.variant`` in the row says which
variant won.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .case import case_from_experiment
from .single import run_case

__all__ = ["run_point", "BEST_PREFIX"]

#: ``endpoint.kind = "best_<kind>"`` in a sweep means: search ``<kind>``'s variants.
BEST_PREFIX = "best_"


def run_point(doc: Mapping[str, Any]) -> dict[str, Any]:
    """One run point (an experiment document); its metrics and run facts as a flat dict."""
    result, _execution = run_case(case_from_experiment(doc))
    return result.metrics()
