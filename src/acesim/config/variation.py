"""Ranks and links that differ from the system document: stragglers and link faults.

Only exact mode simulates every NPU, so only exact mode can run a platform whose ranks differ;
symmetric mode refuses these options by name (:func:`variation_problem`).

* ``stragglers``: ``{rank, slowdown}``: every compute kernel of that rank takes ``slowdown``
  times as long as the kernel model says (a throttled clock, a slower part): its compute rate
  cap and its launch latency scale by ``1 / slowdown``; what it moves per unit of work is
  unchanged, so its HBM rate slows with it.
* ``compute_spread``: ``{spread, seed}``: every rank's slowdown is ``1 + spread * u`` with ``u``
  drawn uniformly from [0, 1) by ``numpy.random.default_rng(seed)`` (rank order); stragglers
  multiply on top. The uniform law is an assumption (a simple bounded spread), not a fit.
* ``links``: ``{dim, rank, direction, bandwidth, latency, failed}``: the links rank ``rank``
  sends on along dimension ``dim`` (``direction`` ``"+"`` or ``"-"``: only that direction of a
  bidirectional ring) get this bandwidth per link (B/s) and latency (s), or fail. How the
  network carries it is :mod:`acesim.hardware.links`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from .system import Strict
from .validators import (
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveBytesPerSecond,
    PositiveFloat,
)

__all__ = ["Straggler", "ComputeSpread", "LinkChange", "Variation", "variation_problem"]


class Straggler(Strict):
    """One rank whose compute kernels run ``slowdown`` times as long."""

    rank: NonNegativeInt = Field(description="the slow rank")
    slowdown: PositiveFloat = Field(description="its kernels' time multiplier (1.3: 30% slower)")


class ComputeSpread(Strict):
    """Per-rank compute slowdowns ``1 + spread * u``, ``u`` uniform in [0, 1), seeded."""

    spread: PositiveFloat = Field(description="largest extra slowdown (0.1: up to 10% slower)")
    seed: NonNegativeInt = Field(0, description="seed of numpy.random.default_rng")


class LinkChange(Strict):
    """The links a rank sends on along one dimension, degraded, re-timed or failed."""

    dim: NonNegativeInt = Field(description="dimension index (0 = innermost)")
    rank: NonNegativeInt = Field(description="the sending rank")
    direction: Literal["+", "-"] | None = Field(
        None, description="bidirectional ring only: just the links towards rank+1 or rank-1"
    )
    bandwidth: PositiveBytesPerSecond | None = Field(
        None, description="per link per direction, B/s (None: the dimension's)"
    )
    latency: NonNegativeSeconds | None = Field(
        None, description="s per message (None: the dimension's)"
    )
    failed: bool = Field(False, description="the links carry nothing")


def variation_problem(
    stragglers: list[Straggler], spread: ComputeSpread | None, links: list[LinkChange]
) -> str | None:
    """The option that needs exact mode (None when nothing varies)."""
    if stragglers:
        return "stragglers"
    if spread is not None:
        return "compute_spread"
    if links:
        return "links"
    return None


@dataclass(frozen=True)
class Variation:
    """Everything that makes ranks or links differ (empty: a symmetric platform)."""

    stragglers: tuple[Straggler, ...] = ()
    compute_spread: ComputeSpread | None = None
    links: tuple[LinkChange, ...] = ()

    def __bool__(self) -> bool:
        return (
            variation_problem(list(self.stragglers), self.compute_spread, list(self.links))
            is not None
        )
