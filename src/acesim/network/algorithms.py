"""Per-dimension collective algorithms as sequences of steps.

Size conventions (nccl-tests'): ``D`` is, per NPU, the whole buffer of an all-reduce, the *input*
of a reduce-scatter (output ``D/p``), the *output* of an all-gather (input ``D/p``) and the send
buffer of an all-to-all. A step sends, from every NPU of the dimension group, ``len(dests)``
messages of ``message_bytes`` each and completes at an NPU when its own sends are out and the
same number of messages has arrived from its peers.

Steps per algorithm (p NPUs in the dimension):

* ring: reduce-scatter and all-gather take ``p-1`` steps of ``D/p`` to the next NPU; all-reduce
  is reduce-scatter then all-gather, ``2(p-1)`` steps. All-to-all on a ring forwards: step ``k``
  (1..p-1) carries the ``(p-k) D/p`` bytes not yet delivered, so ``D(p-1)/2`` bytes cross each
  NPU's link while each NPU originates ``D(p-1)/p``.
* direct (fully connected or switch): one step of ``p-1`` messages of ``D/p``; all-reduce is a
  direct reduce-scatter then a direct all-gather.
* halving_doubling (p a power of two): reduce-scatter in ``log2 p`` steps of ``D/2, D/4, ...``
  with the partner at XOR distance ``p/2, p/4, ...``; all-gather the reverse; all-reduce both.
* double_binary_tree (all-reduce only): NCCL's two complementary trees, each carrying half of
  the data. Modelled by its per-level cost: ``2 ceil(log2 p)`` levels (reduce up, broadcast
  down), each moving ``D/2`` on each tree, so ``D`` per NPU per level. One chunk then takes
  ``2 ceil(log2 p) (a + D/B)``; pipelining comes from chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import TopologyError

#: Step kinds, used by endpoints for their memory accounting.
REDUCE = "reduce"
GATHER = "gather"
ALLTOALL = "alltoall"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a phase, identical at every NPU of the group.

    Attributes:
        message_bytes: bytes of each message this NPU sends in the step.
        pattern: ``next`` (coordinate + 1), ``xor`` (coordinate ^ distance) or ``all`` (every
            other coordinate).
        distance: XOR distance for the ``xor`` pattern.
        kind: ``reduce``, ``gather`` or ``alltoall`` (endpoint accounting).
    """

    message_bytes: float
    pattern: str
    distance: int
    kind: str

    def destinations(self, coordinate: int, size: int) -> list[int]:
        """Coordinates this NPU sends to."""
        if self.pattern == "next":
            return [(coordinate + 1) % size]
        if self.pattern == "xor":
            return [coordinate ^ self.distance]
        return [c for c in range(size) if c != coordinate]

    def message_count(self, size: int) -> int:
        return size - 1 if self.pattern == "all" else 1


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def check_algorithm(algorithm: str, op: str, kind: str, size: int, where: str) -> None:
    """Raise :class:`TopologyError` if ``algorithm`` cannot run ``op`` on this dimension."""
    if algorithm == "direct" and kind == "ring" and size > 3:
        raise TopologyError(
            f"{where}: algorithm 'direct' needs a fully_connected or switch dimension, "
            f"got a ring of {size}"
        )
    if algorithm == "halving_doubling":
        if not _is_pow2(size):
            raise TopologyError(
                f"{where}: algorithm 'halving_doubling' needs a power-of-two size, got {size}"
            )
        if kind == "ring" and size > 2:
            raise TopologyError(
                f"{where}: algorithm 'halving_doubling' needs a fully_connected or switch "
                f"dimension, got a ring of {size}"
            )
    if algorithm == "double_binary_tree" and op != "all-reduce":
        raise TopologyError(
            f"{where}: algorithm 'double_binary_tree' runs only all-reduce, not {op}"
        )


def phase_steps(op: str, algorithm: str, size: int, data_bytes: float) -> list[Step]:
    """The steps of ``op`` on ``size`` NPUs with per-NPU buffer ``data_bytes`` (see module)."""
    p = size
    if p <= 1:
        return []
    piece = data_bytes / p
    if algorithm == "ring":
        if op == "reduce-scatter":
            return [Step(piece, "next", 0, REDUCE)] * (p - 1)
        if op == "all-gather":
            return [Step(piece, "next", 0, GATHER)] * (p - 1)
        if op == "all-reduce":
            return [Step(piece, "next", 0, REDUCE)] * (p - 1) + [Step(piece, "next", 0, GATHER)] * (
                p - 1
            )
        if op == "all-to-all":
            return [Step((p - k) * piece, "next", 0, ALLTOALL) for k in range(1, p)]
    if algorithm == "direct":
        if op == "reduce-scatter":
            return [Step(piece, "all", 0, REDUCE)]
        if op == "all-gather":
            return [Step(piece, "all", 0, GATHER)]
        if op == "all-reduce":
            return [Step(piece, "all", 0, REDUCE), Step(piece, "all", 0, GATHER)]
        if op == "all-to-all":
            return [Step(piece, "all", 0, ALLTOALL)]
    if algorithm == "halving_doubling":
        levels = int(math.log2(p))
        rs = [Step(data_bytes / 2 ** (k + 1), "xor", p >> (k + 1), REDUCE) for k in range(levels)]
        ag = [Step(piece * 2**k, "xor", 1 << k, GATHER) for k in range(levels)]
        if op == "reduce-scatter":
            return rs
        if op == "all-gather":
            return ag
        if op == "all-reduce":
            return rs + ag
        if op == "all-to-all":
            # Bruck-style exchange: each level ships half of the buffer to the XOR partner.
            return [Step(data_bytes / 2, "xor", 1 << k, ALLTOALL) for k in range(levels)]
    if algorithm == "double_binary_tree" and op == "all-reduce":
        levels = max(1, math.ceil(math.log2(p)))
        pattern = "xor" if _is_pow2(p) else "next"
        up = [
            Step(
                data_bytes,
                pattern,
                1 << (k % max(1, int(math.log2(p)))) if pattern == "xor" else 0,
                REDUCE,
            )
            for k in range(levels)
        ]
        down = [Step(data_bytes, pattern, s.distance, GATHER) for s in reversed(up)]
        return up + down
    raise TopologyError(f"algorithm {algorithm!r} cannot run {op}")  # pragma: no cover
