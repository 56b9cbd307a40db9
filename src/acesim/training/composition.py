"""How a composed run went (:mod:`.compose`): what a result says of it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Composition", "MAX_ROUNDS"]

#: Composed runs at most (the first, then one per round of expansion): each round expands the
#: passes a DP collective overlaps; a DP collective slowed by the expanded passes can reach
#: further ones, so more than one round may be needed (a result says how many it took).
MAX_ROUNDS = 8


@dataclass(frozen=True)
class Composition:
    """How a composed run went: the distinct passes simulated alone, the passes run as
    timers and those expanded (simulated in full: beside a DP collective, or leaving work
    running after their end), the composed runs
    it took, and whether the last left no timer beside a DP collective (False:
    :data:`MAX_ROUNDS` reached first)."""

    distinct: int
    timed: int
    expanded: int
    rounds: int
    converged: bool
    #: the micro-batch counts of the two composed runs whose steady state the iteration was
    #: extrapolated from (:mod:`.steady`; None: simulated at its own size)
    extrapolated: tuple[int, int] | None = None
    #: why the steady state was not extrapolated where it was tried ("": not tried, or done)
    not_extrapolated: str = ""

    def note(self) -> str:
        """The result's words for it."""
        passes = self.timed + self.expanded
        text = (
            f"composed: {self.distinct} distinct pipeline passes simulated alone stand for "
            f"{self.timed} of {passes}; {self.expanded} beside a DP collective or outliving "
            f"their end simulated in full ({self.rounds} composed "
            f"{'run' if self.rounds == 1 else 'runs'}; "
            "acesim.training.compose: an approximation of class mode, its error measured in "
            "benchmarks/compose_error.py)"
        )
        if not self.converged:
            text += f"; after {MAX_ROUNDS} runs timed passes still overlap a DP collective"
        if self.extrapolated is not None:
            small, large = self.extrapolated
            text += (
                f"; its steady state extrapolated from composed runs of {small} and {large} "
                "micro-batches, the larger the smaller with one period inserted on every "
                "stage (acesim.training.steady)"
            )
        elif self.not_extrapolated:
            text += f"; simulated at its size, not extrapolated: {self.not_extrapolated}"
        return text
