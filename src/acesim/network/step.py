"""A step of a collective phase: what every NPU of the group does at once (the message it
sends, to whom, and what it costs the endpoint).

A module of its own so that it compiles (``acesim._compiled.MODULES``): the event path reads a
step's fields for every message it sends, and a compiled class's fields are read as native
struct fields, not through the generic attribute lookup of an interpreted dataclass. The
algorithms that make steps are :mod:`acesim.network.algorithms`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Step"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a phase, identical at every NPU of the group.

    Attributes:
        message_bytes: bytes of each message this NPU sends in the step.
        pattern: ``next`` (coordinate + 1), ``xor`` (coordinate ^ distance), ``all`` (every
            other coordinate) or ``span`` (the ``count`` coordinates ``distance``,
            ``distance + 1`` ... ahead, modulo the size: one wave of a direct step issued in
            waves, in which every NPU also receives from ``count`` peers) or ``chain`` (step
            ``distance`` of a pipelined chain of ``pieces`` pieces starting at coordinate
            ``root``: see :func:`chain_steps`; the sends and receives differ by coordinate).
        distance: XOR distance for the ``xor`` pattern; the first offset of a ``span``; the
            step's index in a ``chain``.
        kind: ``reduce``, ``gather``, ``alltoall``, ``nvls_reduce`` or ``nvls_gather``
            (endpoint accounting).
        count: messages of a ``span`` step (1 for the others).
        root: a ``chain``'s first coordinate (the root of a broadcast, the one after the root
            of a reduce).
        pieces: a ``chain``'s pieces.
    """

    message_bytes: float
    pattern: str
    distance: int
    kind: str
    count: int = 1
    root: int = 0
    pieces: int = 1

    def destinations(self, coordinate: int, size: int) -> list[int]:
        """Coordinates this NPU sends to."""
        if self.pattern == "next":
            return [(coordinate + 1) % size]
        if self.pattern == "xor":
            return [coordinate ^ self.distance]
        if self.pattern == "span":
            return [(coordinate + self.distance + j) % size for j in range(self.count)]
        if self.pattern == "chain":
            i = (coordinate - self.root) % size
            sends = i <= size - 2 and 0 <= self.distance - i < self.pieces
            return [(coordinate + 1) % size] if sends else []
        return [c for c in range(size) if c != coordinate]

    def message_count(self, size: int) -> int:
        """Messages one NPU sends (and receives) in the step; a ``chain``'s busiest
        position's (one each way)."""
        if self.pattern == "all":
            return size - 1
        return self.count if self.pattern == "span" else 1

    def arrivals(self, coordinate: int, size: int) -> int:
        """Messages the NPU at ``coordinate`` receives in the step (a ``chain``'s differ by
        position; the other patterns' are :meth:`message_count`)."""
        if self.pattern != "chain":
            return self.message_count(size)
        i = (coordinate - self.root) % size
        return 1 if i >= 1 and 0 <= self.distance - (i - 1) < self.pieces else 0

    def __reduce__(self) -> tuple[type[Step], tuple[float, str, int, str, int, int, int]]:
        """Pickled as its constructor's arguments (a compiled frozen dataclass refuses the
        attribute setting of the default unpickling; steps go to pool workers)."""
        return (
            Step,
            (
                self.message_bytes,
                self.pattern,
                self.distance,
                self.kind,
                self.count,
                self.root,
                self.pieces,
            ),
        )
