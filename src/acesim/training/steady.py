"""A composed iteration's steady state, simulated twice and extrapolated over micro-batches.

Once the pipeline is full, a schedule repeats one pattern of ops per micro-batch (1F1B: a
forward and a backward on every stage; interleaved: ``p`` micro-batches' forwards and
backwards over every chunk), and in mode composed every pass of that pattern is a timer of
the same duration (:mod:`.compose`). A composed iteration of ``m`` micro-batches with many more
micro-batches than stages spends most of its CPU on that repetition (GPT 1T on 512 A100 with
PP 64 and 512 micro-batches: 448 periods, 65,536 passes).

**The model.** The iteration (a run of one) is simulated, composed, at sizes ``m1 < m2 =
m1 + step < m1 + 2 step ...`` from the pipeline's fill on (:func:`reduced_sizes`) until
one is the one before it with one period inserted (within :func:`within_budget`): on every
simulated rank, the larger run's records (each node's start and end, sorted) are the smaller
run's up to some instant and the smaller run's after it moved later by ``P`` = the difference
of the two iterations, with the inserted period's records between (:func:`inserted_period`).
Its state after the inserted period is then its state before it, moved by ``P`` (the records
are every node's times: the messages, queues and passes in flight), so every further period
inserts the same records again. Every figure that sums over the run (the iteration time,
each rank's compute and idle time by what it waited for, the bound attribution's seconds,
every NPU's energy counters) then grows by its difference between the two runs per ``step``
micro-batches: the figures of ``m`` micro-batches are ``f(m1) + (m - m1) / step x (f(m2) -
f(m1))`` (:func:`extrapolated`), and the ratios (throughput, MFU, bubble fraction, power)
follow from them as in a full run.

**Where it is exact, and its bound.** The check compares times to a tolerance of
:data:`TOLERANCE` of the larger run's iteration; an iteration whose runs never pass it
within the budget (a transient longer than the runs, a pattern that repeats every two
periods, a DP collective whose place moves with ``m``) is simulated at its own size,
composed, as before, and its result says why it was not extrapolated. Where the check holds
to the last bits, as on the benchmark cases, the extrapolated figures equal the full
composed run's to rounding (``tests/test_steady.py`` compares them on drawn configurations);
each period inserted by extrapolation can move an instant by at most the tolerance, so ``n``
periods by ``n`` times it. What a composed run approximates of class mode (:mod:`.compose`)
is unchanged. The split of exposed time among the labels of the messages in flight is a ratio
of sums (:class:`~.bounds.Attribution`): the sums are extrapolated, then split.

The run's execution (what :func:`~acesim.runs.llm.run_llm` returns beside the result) is the
larger reduced run's, its composition saying so (:attr:`~.composition.Composition.
extrapolated`). :data:`ENABLED` switches it off (tests compare both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

from ..errors import ConfigError
from .executor import Execution
from .schedules import PipelineSchedule

__all__ = [
    "ENABLED",
    "FILL_PERIODS",
    "SAVING",
    "SAVING_BESIDE_DP",
    "SCHEDULE_FILL_PERIODS",
    "TOLERANCE",
    "extrapolated",
    "inserted_period",
    "periods_past",
    "reduced_sizes",
    "within_budget",
]

#: Extrapolate composed iterations over their steady state (False: simulate every
#: micro-batch; the same figures where the check holds, to rounding).
ENABLED = True

#: The first run's periods beyond the pipeline's stages: ``m1`` is the smallest multiple of
#: the period ``step`` that is at least ``stages + FILL_PERIODS x step`` (the fill: every
#: stage's warm-up done, and periods left to insert one into). A choice of cost: the check
#: decides whether a run was already in its steady state, and where it was not, the next
#: size is run. :data:`SCHEDULE_FILL_PERIODS` sets it per schedule.
FILL_PERIODS = 2

#: :data:`FILL_PERIODS` of the schedules whose steady state starts sooner, as measured on the
#: drawn configurations of ``tests/test_steady.py`` (the first sizes that passed the check,
#: trying 0, 1 and 2 periods): 1F1B passed at ``stages`` every time (10 of 10: once the
#: pipeline is full each stage alternates a forward and a backward). Interleaved passed at
#: one period (5 of 5) but keeps two: smaller first runs bring candidates with VPP and DP
#: within the budget, whose reduced runs each repeat every chunk's DP collectives beside
#: passes simulated in full and cost more than the run at its size (Llama 3 70B TP8 PP2
#: VPP5 at DP 4, docs/performance.md). ZB-H1 (steady from ``stages + 3`` to ``stages + 7``)
#: and DualPipe (4 stages: from 10 micro-batches) keep the default.
SCHEDULE_FILL_PERIODS = {"1f1b": 0}

#: Extrapolate only where the reduced runs simulate at most ``1 / SAVING`` of the
#: micro-batches in all (a choice of cost: beyond it, the run at its own size costs little
#: more; a run whose check never held costs at most that much more than the run at its size).
SAVING = 2.0
#: The same where DP collectives run beside passes: each reduced run simulates the passes
#: beside the iteration's first and last DP collectives in full, a cost the micro-batches do
#: not count (measured on Llama 3 70B candidates of ``acesim plan``'s space: at DP 4 with 32
#: micro-batches, runs of 14 cost more than the run at its size; docs/performance.md).
SAVING_BESIDE_DP = 3.0

#: The check's tolerance on every instant (relative to the larger run's iteration time): a
#: float's rounding over a long run, far below any figure a result prints.
TOLERANCE = 1e-9

T = TypeVar("T")


def _schedulable(
    schedule: PipelineSchedule, stages: int, vpp: int, chunks: int, micro: int
) -> bool:
    """``micro`` micro-batches are a case the schedule runs (its checks and its ops)."""
    try:
        schedule.check(stages, vpp, micro)
        for stage in range(stages):
            schedule.stage_ops(stages, stage, micro, chunks)
    except ConfigError:
        return False
    return True


def reduced_sizes(
    schedule: PipelineSchedule,
    stages: int,
    vpp: int,
    chunks: int,
    micro: int,
    *,
    beside_dp: bool = False,
) -> tuple[int, int] | None:
    """The first two micro-batch counts (``m1``, ``m2``) whose composed runs may stand for
    ``micro`` micro-batches of ``schedule`` on ``stages`` stages (``vpp`` model chunks per
    rank and direction, ``chunks`` per rank; ``beside_dp``: DP collectives run beside passes)
    (module docstring), or None where that would not save (:func:`within_budget`) or the
    schedule runs no such sizes. The period ``step`` is
    the smallest of 1, 2, ``stages`` and ``2 stages`` (a schedule that needs the micro-batches
    a multiple of the stages, or of its directions) that divides ``micro - m1`` with both
    sizes schedulable."""
    fill = SCHEDULE_FILL_PERIODS.get(schedule.name, FILL_PERIODS)
    for step in sorted({1, 2, stages, 2 * stages}):
        first = -(-(stages + fill * step) // step) * step
        second = first + step
        if not within_budget(first + second, micro, beside_dp=beside_dp):
            return None
        if (micro - first) % step:
            continue
        if _schedulable(schedule, stages, vpp, chunks, first) and _schedulable(
            schedule, stages, vpp, chunks, second
        ):
            return first, second
    return None


def within_budget(simulated: int, micro: int, *, beside_dp: bool = False) -> bool:
    """Runs of ``simulated`` micro-batches in all save enough on one of ``micro``
    (:data:`SAVING`; ``beside_dp``: :data:`SAVING_BESIDE_DP`)."""
    return (SAVING_BESIDE_DP if beside_dp else SAVING) * simulated <= micro


def _times(execution: Execution, rank: int) -> list[tuple[float, float]]:
    return sorted((r.start, r.end) for r in execution.records[rank].values())


def inserted_period(first: Execution, second: Execution) -> str | None:
    """Why ``second``'s run is not ``first``'s with one period inserted on every rank (module
    docstring), or None where it is (to :data:`TOLERANCE` of ``second``'s makespan)."""
    if len(first.records) != len(second.records):
        return "the runs simulate different ranks"
    period = second.makespan - first.makespan
    tol = TOLERANCE * second.makespan
    if not period > tol:
        return f"the larger run is not longer ({period:.9g} s)"
    for rank in range(len(first.records)):
        a, b = _times(first, rank), _times(second, rank)
        extra = len(b) - len(a)
        if extra <= 0:
            return f"rank {rank}: the larger run has no more records"
        same = 0
        while (
            same < len(a)
            and abs(a[same][0] - b[same][0]) <= tol
            and abs(a[same][1] - b[same][1]) <= tol
        ):
            same += 1
        for (start, end), (later_start, later_end) in zip(a[same:], b[same + extra :], strict=True):
            if abs(start + period - later_start) > tol or abs(end + period - later_end) > tol:
                return (
                    f"rank {rank}: a node at {start:.9g}-{end:.9g} s moves to "
                    f"{later_start:.9g}-{later_end:.9g} s, not by the period {period:.9g} s"
                )
    return None


def extrapolated(first: T, second: T, periods: float) -> T:
    """``first + periods x (second - first)`` through floats, and dicts, lists, tuples and
    dataclasses of them, item by item (a key in one only: counted 0 in the other); other
    values must be equal and are kept (ValueError where they are not). ``periods``:
    :func:`periods_past`."""
    return _lerp(first, second, periods)  # type: ignore[no-any-return]


def _lerp(a: Any, b: Any, n: float) -> Any:
    if isinstance(a, bool) or isinstance(b, bool):
        if a != b:
            raise ValueError(f"flags differ between the runs: {a!r}, {b!r}")
        return a
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a + n * (b - a)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = list(a) + [k for k in b if k not in a]
        return {k: _lerp(a.get(k, 0.0), b.get(k, 0.0), n) for k in keys}
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise ValueError(f"lengths differ between the runs: {len(a)}, {len(b)}")
        return type(a)(_lerp(x, y, n) for x, y in zip(a, b, strict=True))
    if is_dataclass(a) and not isinstance(a, type) and type(a) is type(b):
        return replace(a, **{f.name: _lerp(getattr(a, f.name), getattr(b, f.name), n)
                             for f in fields(a)})  # fmt: skip
    if a != b:
        raise ValueError(f"values differ between the runs: {a!r}, {b!r}")
    return a


def periods_past(first: int, second: int, micro: int) -> float:
    """The factor of :func:`extrapolated` for ``micro`` micro-batches from runs of ``first``
    and ``second``: ``(micro - first) / (second - first)``."""
    return (micro - first) / (second - first)
