"""How a run executes (its strategy): which NPUs are simulated and which fast paths may run.

Decided once, before the run, by :func:`acesim.training.strategy.decide` (with the reason);
:class:`~acesim.hardware.platform.Platform` and
:class:`~acesim.training.executor.GraphExecutor` follow it and derive nothing:

``symmetric``
    One simulated NPU stands for every rank (every peer of a collective mapped onto it).
``class``
    One simulated NPU per class of identical ranks (:class:`~acesim.network.classes.
    RankClasses`: an LLM run's pipeline stages). Within it, ``composed`` (asked for as mode
    ``composed``): each distinct pipeline pass simulated once alone and the schedule run on
    those durations, the passes beside a DP collective in full (:mod:`acesim.training.compose`:
    an approximation whose error is measured, not bounded).
``exact``
    Every NPU simulated, with what makes ranks differ (``variation``). Within it,
    ``lockstep``: collectives may run on the lockstep backend (:mod:`acesim.network.
    vectorized`: numpy recurrences over the ranks instead of an event per message), each
    collective the backend declares it supports; the others run on the event path and the
    result says which and why. ``replicate``: every rank is rank 0's copy, so rank 0 alone is
    simulated (checked during the run; a run whose ranks would differ is redone with every
    rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config.variation import Variation
from ..network.classes import RankClasses

__all__ = ["Mode", "MODES", "Strategy"]

Mode = Literal["symmetric", "class", "exact"]
#: The simulation modes, from the fewest simulated NPUs to every NPU.
MODES: tuple[Mode, ...] = ("symmetric", "class", "exact")


@dataclass(frozen=True)
class Strategy:
    """One run's strategy (module docstring); ``note`` says why the mode is not the one
    asked for, ``events`` why exact mode runs every collective on the event path ("" when
    neither)."""

    mode: Mode = "symmetric"
    classes: RankClasses | None = None
    variation: Variation | None = None
    lockstep: bool = False
    replicate: bool = False
    note: str = ""
    events: str = ""
    #: class mode: compose the iteration from passes simulated alone
    #: (:mod:`acesim.training.compose`)
    composed: bool = False

    @property
    def exact(self) -> bool:
        """Every NPU simulated."""
        return self.mode == "exact"

    @classmethod
    def every_npu(
        cls,
        variation: Variation | None = None,
        *,
        lockstep: bool = True,
        replicate: bool = False,
        note: str = "",
    ) -> Strategy:
        """Exact mode (lockstep collectives where supported; no replication unless asked, and
        none where something varies)."""
        varied = variation or None
        return cls("exact", None, varied, lockstep, replicate and varied is None, note)

    @classmethod
    def of_classes(
        cls, classes: RankClasses, note: str = "", *, composed: bool = False
    ) -> Strategy:
        """Class mode with ``classes`` (``composed``: the iteration composed from passes
        simulated alone)."""
        return cls("class", classes, note=note, composed=composed)
