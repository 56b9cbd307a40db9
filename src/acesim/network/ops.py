"""Collective operations: how each decomposes into per-dimension phases, and its conventions.

Sizes follow nccl-tests: ``S`` is, per NPU, the whole buffer of an all-reduce, the *input* of a
reduce-scatter (output ``S/n``), the *output* of an all-gather (input ``S/n``) and the send
buffer of an all-to-all, for a group of ``n`` NPUs.

Decomposition over the group's dimensions ``1..N`` (innermost first), hierarchical
(ASTRA-sim's "localBWAware"):

* all-reduce: reduce-scatter along 1..N-1 (the data shrinks by each size), all-reduce on N,
  all-gather back along N-1..1; with ``composition = "per_dimension"``, a full-size all-reduce on
  every dimension in turn;
* reduce-scatter: reduce-scatter on 1..N;
* all-gather: all-gather on N..1 (the output grows from the outermost dimension inwards, so the
  local dimension carries the largest data);
* all-to-all: all-to-all along each dimension in turn with the whole buffer (data is routed one
  dimension at a time);
* broadcast (``S`` the root's buffer, received whole by every NPU) and reduce (``S`` every NPU's
  buffer, summed at the root): NCCL's pipelined ring chain from (to) the root, on one dimension
  (:func:`acesim.network.algorithms.chain_steps`). Rooted: position ``i`` of the chain does
  other work than position ``j``, so symmetric mode (one representative NPU) cannot represent
  it and refuses it; exact mode runs it. A group over several dimensions is refused (NCCL runs
  one ring through every member of such a group; not modelled for rooted operations);
* sendrecv (nccl-tests' ``sendrecv_perf``): every NPU sends ``S`` to the next member of the
  group and receives ``S`` from the previous one. On one dimension this is a shift every NPU
  runs alike (symmetric mode represents it exactly, and the vectorized exact path runs it); on
  several dimensions only the members at the end of an inner line cross the outer dimension,
  which no per-dimension phase expresses (``routed_shift``): symmetric mode refuses it, exact
  mode sends each member's buffer to its successor as one point-to-point message routed
  dimension by dimension (:mod:`acesim.network.p2p`), a member done when its message has
  arrived and its predecessor's has.

``bus_factor`` is nccl-tests' bus-bandwidth factor: ``2(n-1)/n`` for all-reduce, 1 for
broadcast, reduce (nccl-tests' doc/PERFORMANCE.md: all data leaves or reaches the root,
busbw = algbw; NCCL's tuner's ring ratio ``nRanks / nsteps`` with ``nsteps = nRanks``) and
sendrecv (nccl-tests' sendrecv.cu: factor 1), ``(n-1)/n`` otherwise. ``chunk_io`` gives
one chunk's (input, output, live footprint) bytes at an NPU, for
endpoints that stage chunks (ACE).

Register a new operation with ``COLLECTIVE_OPS.register(name, CollectiveOp(...))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..registry import Registry

__all__ = ["CollectiveOp", "COLLECTIVE_OPS", "PhaseSink"]

#: ``add(axis index, phase op, data bytes, algorithm op)``: append one phase to a chunk's plan.
PhaseSink = Callable[[int, str, float, str], None]


@dataclass(frozen=True)
class CollectiveOp:
    """One collective operation.

    Attributes:
        name: as users write it (``all-reduce``).
        summary: one line for help texts.
        compose: ``compose(add, sizes, data, composition)`` calls ``add`` for each phase of a
            chunk of ``data`` bytes over axes of ``sizes`` (innermost first).
        chunk_io: ``chunk_io(chunk bytes, group size)`` -> (input, output, footprint) bytes.
        bus_factor: ``bus_factor(n)`` for a group of ``n``.
        rooted: takes a root (a member of the group: ``--root``, ``issue(..., root=)``).
        symmetric: symmetric mode (one representative NPU) represents it exactly; False:
            symmetric mode refuses it by name and exact mode runs it.
        single_axis: runs only on groups along one dimension (refused on more).
        default_algorithm: the algorithm it runs where ``collective.algorithms`` names none
            (None: the planner's default, ``ring``, or ``direct`` for all-to-all off rings).
        routed_shift: on groups over several dimensions, every member sends its buffer to
            the next member as one routed point-to-point message (exact mode only).
    """

    name: str
    summary: str
    compose: Callable[[PhaseSink, list[int], float, str], None]
    chunk_io: Callable[[float, int], tuple[float, float, float]]
    bus_factor: Callable[[int], float]
    rooted: bool = False
    symmetric: bool = True
    single_axis: bool = False
    default_algorithm: str | None = None
    routed_shift: bool = False


COLLECTIVE_OPS: Registry[CollectiveOp] = Registry("collective operation", "op", listed=True)


def _all_reduce(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    if composition == "per_dimension":
        for i in range(len(sizes)):
            add(i, "all-reduce", data, "all-reduce")
        return
    for i in range(len(sizes) - 1):
        add(i, "reduce-scatter", data, "all-reduce")
        data /= sizes[i]
    add(len(sizes) - 1, "all-reduce", data, "all-reduce")
    for i in reversed(range(len(sizes) - 1)):
        data *= sizes[i]
        add(i, "all-gather", data, "all-reduce")


def _reduce_scatter(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    for i, size in enumerate(sizes):
        add(i, "reduce-scatter", data, "reduce-scatter")
        data /= size


def _all_gather(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    total = 1
    for size in sizes:
        total *= size
    data /= total
    for i in reversed(range(len(sizes))):
        data *= sizes[i]
        add(i, "all-gather", data, "all-gather")


def _all_to_all(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    for i in range(len(sizes)):
        add(i, "all-to-all", data, "all-to-all")


def _broadcast(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    # outermost first: the data leaves the root's line before it spreads inwards (one
    # dimension only at run time: single_axis)
    for i in reversed(range(len(sizes))):
        add(i, "broadcast", data, "broadcast")


def _reduce(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    for i in range(len(sizes)):
        add(i, "reduce", data, "reduce")


def _sendrecv(add: PhaseSink, sizes: list[int], data: float, composition: str) -> None:
    for i in range(len(sizes)):
        add(i, "sendrecv", data, "sendrecv")


def _algbw_factor(n: int) -> float:
    return 1.0 if n > 1 else 0.0


def _all_reduce_factor(n: int) -> float:
    return 2 * (n - 1) / n if n > 1 else 0.0


def _one_pass_factor(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


def _same_io(chunk: float, n: int) -> tuple[float, float, float]:
    return chunk, chunk, chunk


COLLECTIVE_OPS.register(
    "all-reduce",
    CollectiveOp(
        "all-reduce",
        "sum every NPU's buffer into every NPU",
        _all_reduce,
        _same_io,
        _all_reduce_factor,
    ),
)
COLLECTIVE_OPS.register(
    "reduce-scatter",
    CollectiveOp(
        "reduce-scatter",
        "sum, each NPU keeping 1/n of the result",
        _reduce_scatter,
        lambda chunk, n: (chunk, chunk / n, chunk),
        _one_pass_factor,
    ),
)
COLLECTIVE_OPS.register(
    "all-gather",
    CollectiveOp(
        "all-gather",
        "every NPU's 1/n piece to every NPU",
        _all_gather,
        lambda chunk, n: (chunk / n, chunk, chunk),
        _one_pass_factor,
    ),
)
COLLECTIVE_OPS.register(
    "all-to-all",
    CollectiveOp(
        "all-to-all",
        "a distinct 1/n piece from every NPU to every NPU",
        _all_to_all,
        _same_io,
        _one_pass_factor,
    ),
)


def _rooted_chain(
    name: str, summary: str, compose: Callable[[PhaseSink, list[int], float, str], None]
) -> CollectiveOp:
    """A rooted operation on NCCL's pipelined ring chain: exact mode, one dimension."""
    return CollectiveOp(
        name,
        summary + " (NCCL's pipelined ring chain; exact mode, one dimension)",
        compose,
        _same_io,
        _algbw_factor,
        rooted=True,
        symmetric=False,
        single_axis=True,
    )


COLLECTIVE_OPS.register(
    "broadcast", _rooted_chain("broadcast", "the root's buffer to every NPU", _broadcast)
)
COLLECTIVE_OPS.register(
    "reduce", _rooted_chain("reduce", "sum every NPU's buffer into the root", _reduce)
)
COLLECTIVE_OPS.register(
    "sendrecv",
    CollectiveOp(
        "sendrecv",
        "every NPU sends its buffer to the next member and receives the previous one's "
        "(nccl-tests sendrecv_perf; across dimensions in exact mode)",
        _sendrecv,
        _same_io,
        _algbw_factor,
        default_algorithm="p2p",
        routed_shift=True,
    ),
)
