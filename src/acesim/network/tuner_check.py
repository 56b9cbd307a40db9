"""The tuner's choice against simulation: does another candidate simulate faster?

NCCL's tuner (:func:`acesim.network.plan.choose_algorithm`) picks an algorithm by a prediction
(latency plus bytes over bandwidth, per protocol), and NCCL runs that choice: acesim runs it
too, as NCCL would. Where the prediction and the simulation disagree, more bandwidth can make a
collective slower (doubling NVLink bandwidth on two H100 nodes flips a 64 MiB all-reduce from
``flat_ring`` to ``ring``, which simulates 7% slower than ``flat_ring`` did). :func:`check_choice`
simulates the other candidates the tuner considered and reports the fastest one that beats the
chosen one, so a result can say that it kept NCCL's choice although another algorithm simulates
faster (``--algo`` forces that one, as ``NCCL_ALGO`` would).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TunerCheck", "check_choice"]


@dataclass(frozen=True)
class TunerCheck:
    """The tuner's choice and the candidate that simulates faster (times in s)."""

    chosen: str
    chosen_time: float
    faster: str
    faster_time: float

    @property
    def note(self) -> str:
        """One line for tables and logs."""
        gain = 1.0 - self.faster_time / self.chosen_time
        return (
            f"NCCL's tuner chose {self.chosen} (predicted fastest); {self.faster} simulates "
            f"{100 * gain:.1f}% faster; kept NCCL's choice, as NCCL would (--algo "
            f"{self.faster} forces it)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "chosen_time": self.chosen_time,
            "faster": self.faster,
            "faster_time": self.faster_time,
            "note": self.note,
        }


def check_choice(
    predicted: Sequence[tuple[str, float]],
    chosen: str,
    chosen_time: float,
    simulate: Callable[[str], float | None],
) -> TunerCheck | None:
    """The fastest candidate of ``predicted`` (the tuner's ``(algorithm, predicted time)``
    list) whose simulated time (``simulate(algorithm)``, s; None: it cannot run) is below
    ``chosen_time`` (the chosen one's, s), or None when the tuner's choice simulates fastest.
    Ties keep the tuner's choice."""
    best: TunerCheck | None = None
    for name, _predicted in predicted:
        if name == chosen:
            continue
        time = simulate(name)
        if time is None or not time < chosen_time:
            continue
        if best is None or time < best.faster_time:
            best = TunerCheck(chosen, chosen_time, name, time)
    return best
