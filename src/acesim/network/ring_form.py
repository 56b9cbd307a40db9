"""A ring phase's steps in closed form: every rank's end after a run of identical ring steps,
the same floats the step-by-step recurrence gives.

The recurrence (:meth:`acesim.network.vectorized.Lockstep._phase`): on a line of ``p``
ranks, position ``q`` receives from position ``q - 1`` (mod ``p``); each rank sends a step's
messages in ``t`` s and a message arrives ``a`` s after its last byte left, alike at every
rank. Step ``s`` ends at ``q`` at

    out[q] = done[q] + t,   arrive[q] = out[q] + a,   done'[q] = max(out[q], arrive[q - 1])

each addition rounded. Inside one binade ``[B/2, B)`` of unit ``u`` every value is a multiple
of ``u``, so where ``t`` and ``a`` are not halfway between two multiples each addition of
``t`` adds the same ``T`` (``t`` rounded to a multiple of ``u``) and each addition of ``a``
the same ``A``, exactly, while the sums stay below ``B`` (:func:`acesim.sums.ladders` uses the
same fact). Adding is monotone, so the max of the recurrence is the max over paths: after
``s`` steps the value at ``q`` is ``s * T`` plus the largest ``begin[q - d] + h * A`` over
the ``d`` positions upstream reachable in ``s`` steps, ``h`` the most hops a path of ``s``
steps can make from there (``d`` plus whole turns of the ring). Each partial sum is a
multiple of ``u`` below ``B``, so it is computed exactly. Where the values would leave the
binade, or a term is halfway, :func:`ring_ends` returns None and the caller steps.

Unknown starts (``inf``) stay unknown downstream, as in the recurrence.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..sums import alike_steps

__all__ = ["ring_ends", "MAX_ELEMENTS"]

#: The most elements (lines x positions x positions) one computation holds; beyond it the
#: caller steps (a line of thousands of ranks).
MAX_ELEMENTS = 1 << 22


def ring_ends(
    begin: np.ndarray,
    took: float,
    delay: float,
    steps: int,
    watch: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Every position's end after ``steps`` ring steps (module docstring) and, for
    ``watch`` = (line, position), that position's start of every step and the end of the
    last (``steps + 1`` values, s); None where the closed form does not hold (the caller
    steps).

    Args:
        begin: each position's start, s, shape (lines, p): the rank at ``[i, q]`` receives
            from ``[i, q - 1]``.
        took: each rank's time to send a step's messages, s.
        delay: a message's latency and endpoint delay, s.
        steps: how many identical steps.
        watch: a position whose every step is wanted (rank 0's, for its segments).
    """
    lines, p = begin.shape
    if lines < 1 or lines * p * p > MAX_ELEMENTS or steps < 1 or p < 2:
        return None
    if not (took >= 0 and delay >= 0) or not math.isfinite(took + delay):
        return None
    low = float(np.minimum.reduce(begin, axis=None))  # (the ufuncs: no Python layer a call)
    high = float(np.maximum.reduce(begin, axis=None))
    if high == math.inf and watch is None and steps >= p - 1:
        # every position is reached from every start: a line with an unknown start is
        # unknown everywhere
        unknown = np.isinf(begin).any(axis=1)
        if bool(unknown.all()):
            return np.full_like(begin, math.inf), None
    if high == math.inf:  # unknown starts: the binade of the known ones
        high = float(np.max(begin, where=begin < math.inf, initial=-math.inf))
        if high == -math.inf:
            return None  # every start unknown
    if not low >= sys.float_info.min or math.frexp(low)[1] != math.frexp(high)[1]:
        return None
    if alike_steps(high, took, delay, steps) < steps:  # leaves the binade, or a halfway term
        return None
    step = (high + took) - high  # T: every addition of took in the binade
    hop = ((high + step) + delay) - (high + step)  # A: every addition of delay after it
    source, hops, unreachable = _paths(p, steps)
    terms = begin[:, source] + hops * hop  # (lines, p, p), exact (module docstring)
    if unreachable is not None:
        terms[:, unreachable] = -math.inf
    ends: np.ndarray = terms.max(axis=2) + steps * step
    trail = None
    if watch is not None:
        line, q = watch
        trail = _trail(begin[line], q, step, hop, steps)
    return ends, trail


#: :func:`_paths` by (p, steps): a run's phases repeat their shape
_PATHS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}


def _paths(p: int, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """For every position ``q`` and distance ``d``: the position ``q - d`` whose start
    reaches ``q`` over ``d`` positions, the most hops a path of ``steps`` steps makes from
    there (``d`` plus whole turns), and where ``d`` exceeds ``steps`` (unreachable; None:
    nowhere)."""
    known = _PATHS.get((p, steps))
    if known is None:
        dist = np.arange(p)
        reachable = dist <= steps
        hops = np.where(reachable, dist + p * ((steps - dist) // p), 0).astype(float)
        source = (np.arange(p)[:, None] - dist[None, :]) % p
        unreachable = None
        if not bool(reachable.all()):
            unreachable = np.broadcast_to(~reachable, (p, p)).copy()
        known = _PATHS[(p, steps)] = (source, np.broadcast_to(hops, (p, p)).copy(), unreachable)
    return known


def _trail(begin: np.ndarray, q: int, step: float, hop: float, steps: int) -> np.ndarray:
    """Position ``q``'s value before each step and after the last (s, ``steps + 1``).

    With ``c[d] = begin[q - d] + d * A`` (the start ``d`` positions upstream, carried there),
    step ``s = j * p + r`` (``0 <= r < p``) reaches ``q`` from ``d <= r`` with ``j`` more whole
    turns and from ``d > r`` with ``j - 1`` (none where ``j = 0``): the largest of the
    prefix maxima of ``c`` to ``r`` and its suffix maxima from ``r + 1``, each plus its turns.
    Every sum is exact (module docstring)."""
    p = len(begin)
    upstream = begin[(q - np.arange(p)) % p] + np.arange(p) * hop  # c, exact
    prefix = np.maximum.accumulate(upstream)
    suffix = np.empty(p + 1)
    suffix[p] = -math.inf
    suffix[:p] = np.maximum.accumulate(upstream[::-1])[::-1]
    s = np.arange(steps + 1)
    turns, r = np.divmod(s, p)
    turn = p * hop
    around = np.where(turns >= 1, suffix[r + 1] + (turns - 1) * turn, -math.inf)
    out: np.ndarray = np.maximum(prefix[r] + turns * turn, around) + s * step
    return out
