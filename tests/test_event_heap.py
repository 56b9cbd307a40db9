"""The event kernel's heap (:mod:`acesim.engine.heap`): its own sift gives the entries in
:mod:`heapq`'s order, ties of time and priority included, and runs where the module is
compiled."""

from __future__ import annotations

import heapq
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples

from acesim import _compiled
from acesim.engine import heap as event_heap
from acesim.engine.heap import Entry

#: one operation: push an entry of (time index, priority), or pop (None)
_OPERATIONS = st.lists(
    st.one_of(st.none(), st.tuples(st.integers(0, 6), st.sampled_from([-1, 0, 1]))),
    max_size=200,
)
#: a few times, so that entries tie on time (and on priority) often
_TIMES = [0.0, 1e-9, 0.5, 1.0, 1.0 + 2**-52, 3.0, 1e300]


def _run(operations: list[tuple[int, int] | None], native: bool) -> list[Any]:
    """The entries at the heap's top after each operation, and every popped sequence."""
    heap: list[Entry] = []
    seen: list[Any] = []
    for sequence, operation in enumerate(operations):
        if operation is None:
            if not heap:
                continue
            seen.append(("popped", heap[0][2]))
            if native:
                event_heap.sift_pop(heap)
            else:
                heapq.heappop(heap)
        else:
            time, priority = operation
            entry: Entry = (_TIMES[time], priority, sequence, object(), None)
            if native:
                event_heap.sift_push(heap, entry)
            else:
                heapq.heappush(heap, entry)
        seen.append(("top", heap[0][:3] if heap else None, len(heap)))
    while heap:  # the rest, in order
        seen.append(("popped", heap[0][2]))
        if native:
            event_heap.sift_pop(heap)
        else:
            heapq.heappop(heap)
    return seen


@settings(max_examples=examples(300), deadline=None)
@given(_OPERATIONS)
def test_the_sift_gives_heapqs_order(operations: list[tuple[int, int] | None]) -> None:
    assert _run(operations, native=True) == _run(operations, native=False)


def test_push_and_pop_keep_the_order_whichever_runs() -> None:
    heap: list[Entry] = []
    for sequence, (time, priority) in enumerate([(2.0, 0), (1.0, 0), (1.0, -1), (2.0, -1)]):
        event_heap.push(heap, (time, priority, sequence, None, None))
    order = []
    while heap:
        order.append(heap[0][2])
        event_heap.pop(heap)
    assert order == [2, 1, 3, 0]


def test_native_says_whether_the_module_runs_compiled() -> None:
    assert event_heap.NATIVE == ("acesim.engine.heap" in _compiled.compiled())
