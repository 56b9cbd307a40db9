"""A sequence kept as runs of repeats: an item and how many times it comes in a row.

A ring's phase on ``p`` NPUs is ``p - 1`` identical steps (``2 (p - 1)`` for an all-reduce, in
two runs); kept as runs, what is computed from a phase's steps (their count, the messages and
bytes they send, whether they can be folded) costs one operation per run, not per step, so
symmetric mode stays flat in the NPU count. :class:`Repeats` is an immutable sequence: indexing
and iterating give the items as a tuple would (iteration expands the runs); equality with
another :class:`Repeats` compares the runs, which are canonical (consecutive equal items are
always merged into one run).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

__all__ = ["Repeats"]

T = TypeVar("T")


class Repeats(Sequence[T], Generic[T]):
    """An immutable sequence stored as runs ``(item, count)`` (see module)."""

    __slots__ = ("runs", "ends", "items", "_size")

    runs: tuple[tuple[T, int], ...]
    #: each run's end: the index after its last item
    ends: tuple[int, ...]
    #: each run's item
    items: tuple[T, ...]
    _size: int

    def __init__(self, runs: Iterable[tuple[T, int]] = ()):
        merged: list[tuple[T, int]] = []
        for item, count in runs:
            if count < 0:
                raise ValueError(f"a run's count must be >= 0, got {count}")
            if count == 0:
                continue
            if merged and (merged[-1][0] is item or merged[-1][0] == item):
                merged[-1] = (merged[-1][0], merged[-1][1] + count)
            else:
                merged.append((item, count))
        self.runs = tuple(merged)
        self.ends = tuple(itertools.accumulate(count for _item, count in merged))
        self.items = tuple(item for item, _count in merged)
        self._size = self.ends[-1] if self.ends else 0

    @classmethod
    def of(cls, items: Iterable[T]) -> Repeats[T]:
        """``items`` as runs (one pass, consecutive equal items merged); a :class:`Repeats`
        is returned as it is."""
        if isinstance(items, Repeats):
            return items
        return cls((item, 1) for item in items)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Repeats[T]: ...

    def __getitem__(self, index: int | slice) -> T | Repeats[T]:
        if type(index) is int and 0 <= index < self._size:  # the hot path: a step of a phase
            items = self.items
            if len(items) == 1:
                return items[0]
            return items[bisect.bisect_right(self.ends, index)]
        if isinstance(index, slice):
            return Repeats.of(itertools.islice(self, *index.indices(self._size)))
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("Repeats index out of range")
        return self.items[bisect.bisect_right(self.ends, index)]

    def __iter__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(
            itertools.repeat(item, count) for item, count in self.runs
        )

    def __reversed__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(
            itertools.repeat(item, count) for item, count in reversed(self.runs)
        )

    def __contains__(self, value: object) -> bool:
        return any(item is value or item == value for item, _count in self.runs)

    def run_from(self, index: int) -> tuple[int, int]:
        """The run holding item ``index`` (0 <= index < len) and how many of its items come
        from ``index`` on, itself included."""
        run = bisect.bisect_right(self.ends, index)
        return run, self.ends[run] - index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Repeats):
            return self.runs == other.runs
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.runs)

    def __repr__(self) -> str:
        inner = ", ".join(f"{item!r} x {count}" for item, count in self.runs)
        return f"Repeats([{inner}])"

    def __add__(self, other: Sequence[T]) -> Repeats[T]:
        return Repeats(self.runs + Repeats.of(other).runs)

    def __radd__(self, other: Sequence[T]) -> Repeats[T]:
        return Repeats(Repeats.of(other).runs + self.runs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Repeats, (self.runs,))
