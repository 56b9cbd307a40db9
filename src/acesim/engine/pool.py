"""Space-shared capacity: amounts held for a while, not rates (an NPU's compute units).

Model
-----
A *pool* has a capacity in whole units (SMs). Holders acquire an amount and keep it until they
release it, as a kernel's thread blocks occupy SMs: the units are partitioned in space, not
shared in time. What no holder has is *free*; the NPU's compute kernel runs on the free units
(its rate cap follows them), which is why a pool notifies observers whenever the free amount
changes. A request larger than what is free waits, first come first served, until releases make
room; a request larger than the capacity can never be met and is an error.

Each pool integrates the amount held over time (``held_time``, unit-seconds), so reports can
say how many units communication took on average.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import SimulationError

__all__ = ["Pool"]


class Pool:
    """Units held by holders; the rest are free.

    Args:
        name: unique label (``npu0.units``).
        capacity: units in the pool (> 0).
        clock: returns the current simulated time (s).
    """

    def __init__(self, name: str, capacity: float, clock: Callable[[], float]):
        if not capacity > 0:
            raise SimulationError(f"pool {name!r}: capacity must be positive, got {capacity}")
        self.name = name
        self.capacity = float(capacity)
        self.held = 0.0
        self.held_time = 0.0  # integral of held units over time, unit-s
        self.peak = 0.0
        self._since = 0.0
        self._clock = clock
        self._waiting: deque[tuple[float, Callable[[], Any]]] = deque()
        self._observers: list[Callable[[Pool], Any]] = []

    @property
    def free(self) -> float:
        """Units no holder has."""
        return self.capacity - self.held

    def observe(self, callback: Callable[[Pool], Any]) -> None:
        """Call ``callback(pool)`` whenever the free amount changes."""
        self._observers.append(callback)

    def sync(self) -> None:
        """Bring ``held_time`` up to the current time."""
        now = self._clock()
        if now > self._since:
            self.held_time += self.held * (now - self._since)
            self._since = now

    def acquire(self, amount: float, then: Callable[[], Any]) -> None:
        """Hold ``amount`` units, then call ``then()``: at once if they are free and nobody
        waits before, else when releases make room (FIFO)."""
        if not 0 <= amount <= self.capacity:
            raise SimulationError(
                f"pool {self.name!r}: cannot hold {amount:g} of {self.capacity:g} units"
            )
        if amount == 0:
            then()
            return
        if self._waiting or amount > self.free * (1 + 1e-12):
            self._waiting.append((amount, then))
            return
        self._take(amount)
        then()

    def _take(self, amount: float) -> None:
        if amount == 0:
            return
        self.sync()
        self.held += amount
        self.peak = max(self.peak, self.held)
        self._changed()

    def release(self, amount: float) -> None:
        """Give back ``amount`` units; waiting requests that now fit are granted in order."""
        if amount == 0:
            return
        if amount > self.held * (1 + 1e-12):
            raise SimulationError(
                f"pool {self.name!r}: releasing {amount:g} units, only {self.held:g} held"
            )
        self.sync()
        self.held = max(self.held - amount, 0.0)
        granted: list[Callable[[], Any]] = []
        while self._waiting and self._waiting[0][0] <= self.free * (1 + 1e-12):
            want, then = self._waiting.popleft()
            self.held += want
            granted.append(then)
        self.peak = max(self.peak, self.held)
        self._changed()
        for then in granted:
            then()

    def record_hold(self, amount: float, start: float, end: float) -> None:
        """Count a hold of ``amount`` units from ``start`` to ``end`` (s, both past: a run
        that timed it without the pool, exact mode's per-rank backend) in the held-time
        integral and the peak; nothing is held after it."""
        if not 0 <= amount <= self.capacity or not start <= end:
            raise SimulationError(
                f"pool {self.name!r}: cannot record {amount:g} units held from {start:g} s "
                f"to {end:g} s"
            )
        self.sync()
        self.held_time += amount * (end - start)
        self.peak = max(self.peak, self.held + amount)

    def _changed(self) -> None:
        for callback in self._observers:
            callback(self)

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, held={self.held:g}/{self.capacity:g})"
