"""The event kernel's heap: a binary min-heap of ``(time, priority, sequence, target, payload)``
entries, ordered by their first three fields.

The order is Python's tuple order on those fields (``time`` a float, ``priority`` and
``sequence`` ints; the sequence is unique, so no two entries tie and the fields after it are
never compared): the same entries come out in the same order as from :mod:`heapq`. Compiled
(mypyc), the comparisons read the three keys as native numbers; :mod:`heapq` compares the
tuples through the generic rich comparison, a float equality and then a float order per
field, about 300 machine instructions each (measured with callgrind: the heap was 14% of an
ACE run's instructions). As Python (not compiled) the functions hand over to :mod:`heapq`,
which is C there and faster than a Python loop. The sifts are :mod:`heapq`'s algorithm
(its ``_siftdown`` and its bottom-up ``_siftup``).
"""

from __future__ import annotations

import heapq
from typing import Any, Final, cast

__all__ = ["Entry", "NATIVE", "pop", "push", "sift_pop", "sift_push"]

#: an event: (time s, priority among its instant's events, sequence number, target, payload)
Entry = tuple[float, int, int, Any, Any]

#: whether this module runs compiled (a compiled module's file is its extension)
NATIVE: Final = not __file__.endswith(".py")


def _before(time: float, priority: int, sequence: int, other: tuple[Any, ...]) -> bool:
    """Whether the key ``(time, priority, sequence)`` comes before entry ``other``'s."""
    other_time = cast(float, other[0])
    if time != other_time:
        return time < other_time
    other_priority = cast(int, other[1])
    if priority != other_priority:
        return priority < other_priority
    return sequence < cast(int, other[2])


def _less(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether entry ``a`` comes before entry ``b`` (the times first: the priorities and
    sequences are read only where the times are equal)."""
    time_a = cast(float, a[0])
    time_b = cast(float, b[0])
    if time_a != time_b:
        return time_a < time_b
    return _before(time_a, cast(int, a[1]), cast(int, a[2]), b)


def _settle(
    items: list[tuple[Any, ...]],
    pos: int,
    entry: tuple[Any, ...],
    time: float,
    priority: int,
    sequence: int,
) -> None:
    """Place ``entry`` (of key ``time``, ``priority``, ``sequence``) at ``pos`` or above it,
    moving down every parent it comes before (:mod:`heapq`'s ``_siftdown``)."""
    while pos > 0:
        parent_pos = (pos - 1) >> 1
        parent = items[parent_pos]
        if not _before(time, priority, sequence, parent):
            break
        items[pos] = parent
        pos = parent_pos
    items[pos] = entry


def push(heap: list[Entry], entry: Entry) -> None:
    """Add ``entry`` to ``heap`` (:func:`heapq.heappush`)."""
    if NATIVE:
        sift_push(heap, entry)
    else:
        heapq.heappush(heap, entry)


def pop(heap: list[Entry]) -> None:
    """Remove ``heap``'s first entry (:func:`heapq.heappop`, its value not returned: the
    kernel reads it as ``heap[0]`` first)."""
    if NATIVE:
        sift_pop(heap)
    else:
        heapq.heappop(heap)


def sift_push(heap: list[Entry], entry: Entry) -> None:
    """:func:`push` by this module's own sift (what runs compiled)."""
    items = cast(list[tuple[Any, ...]], heap)
    time, priority, sequence = entry[0], entry[1], entry[2]
    boxed: tuple[Any, ...] = entry
    items.append(boxed)
    _settle(items, len(items) - 1, boxed, time, priority, sequence)


def sift_pop(heap: list[Entry]) -> None:
    """:func:`pop` by this module's own sift (what runs compiled)."""
    items = cast(list[tuple[Any, ...]], heap)
    last = items.pop()
    end = len(items)
    if end == 0:
        return
    # heapq's _siftup: the smaller child moves up to the leaves, then ``last`` sifts down
    pos = 0
    child = 1
    while child < end:
        right = child + 1
        smaller = items[child]
        if right < end:
            other = items[right]
            if not _less(smaller, other):
                child = right
                smaller = other
        items[pos] = smaller
        pos = child
        child = 2 * pos + 1
    _settle(items, pos, last, cast(float, last[0]), cast(int, last[1]), cast(int, last[2]))
