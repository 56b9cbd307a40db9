"""A simulation run with Python's cyclic garbage collector paused (issue 27).

A run allocates hundreds of thousands of objects that live until it ends (graph nodes, their
records, activities, events): the collector's full passes over them, triggered by that very
growth, were a tenth to a fifth of a composed LLM iteration's CPU time, and freed almost
nothing (what a run makes is garbage only when it ends). :func:`collector_paused` disables
the collector for the run and enables it again after (where it was enabled): nothing is
frozen, and what the run leaves is collected as usual afterwards. Simulated figures do not
depend on it. Every run kind's simulation runs inside it, its summary included (a training
run's bound shares build a list per message segment, and the passes that growth triggered
were about 6% of the ACE reproduction); a lone exact-mode collective's too (a 64 MiB
all-reduce on 1,024 NPUs with one slow link, the baseline endpoint: 26 full passes, nothing
collected, about a third of its CPU)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block (nested blocks: the outermost
    enables it again; a collector disabled before stays disabled)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
