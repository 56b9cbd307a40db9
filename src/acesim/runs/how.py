"""How a run kind's ``execute`` runs a case (:mod:`acesim.runs.kinds`): what every kind takes
besides the case, one value so that its meaning is written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .estimate import Estimate

__all__ = ["How"]


@dataclass(frozen=True)
class How:
    """``trace``: record what :func:`acesim.results.trace.write_trace` needs (chunk phases,
    HBM and link samples) during the run; ``variant``: the endpoint variant's label in the
    result ("": its kind's own); ``on_estimate(estimate)``: told the run's cost before it
    starts (:class:`~acesim.runs.estimate.Estimate`); ``on_progress(done, total)``: told the
    graph nodes finished as it runs (from 0 of the total; again from 0 where the run is
    redone; progress bars)."""

    trace: bool = False
    variant: str = ""
    on_estimate: Callable[[Estimate], Any] | None = None
    on_progress: Callable[[int, int], Any] | None = None
