"""How a run kind's ``execute`` runs a case (:mod:`acesim.runs.kinds`): what every kind takes
besides the case, one value so that its meaning is written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .estimate import Estimate

__all__ = ["How", "CannotBeat"]


@dataclass(frozen=True)
class How:
    """``trace``: record what :func:`acesim.results.trace.write_trace` needs (chunk phases,
    HBM and link samples) during the run; ``variant``: the endpoint variant's label in the
    result ("": its kind's own); ``on_estimate(estimate)``: told the run's cost before it
    starts (:class:`~acesim.runs.estimate.Estimate`); ``on_progress(done, total)``: told the
    graph nodes finished as it runs (from 0 of the total; again from 0 where the run is
    redone; progress bars); ``beat``: a figure of merit the run matters only below (a search
    of variants: the fastest so far): a kind that bounds its figure before running
    (training graphs: :mod:`acesim.training.figure_bound`) raises :class:`CannotBeat` instead
    of running where the bound exceeds it by :data:`BEAT_MARGIN`; others ignore it."""

    trace: bool = False
    variant: str = ""
    on_estimate: Callable[[Estimate], Any] | None = None
    on_progress: Callable[[int, int], Any] | None = None
    beat: float | None = None


#: How far (relative) a run's lower bound must exceed :attr:`How.beat` for the run to be
#: skipped: far above the rounding of the bound and of the simulated times.
BEAT_MARGIN = 1e-6


class CannotBeat(Exception):
    """The run's figure of merit cannot be below :attr:`How.beat`: its lower ``bound`` (s)
    exceeds it; the run was not simulated."""

    def __init__(self, bound: float, beat: float):
        super().__init__(f"its figure cannot be below {bound!r} s, over {beat!r} s")
        self.bound = bound
        self.beat = beat


def check_beat(how: How, bound: float) -> None:
    """Raise :class:`CannotBeat` where ``bound`` (s) shows the run cannot beat ``how.beat``."""
    if how.beat is not None and bound * (1 - BEAT_MARGIN) > how.beat:
        raise CannotBeat(bound, how.beat)
