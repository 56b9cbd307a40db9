"""Whole-tree CPU of a study's tasks (issue 27: reproductions <= 60 CPU s, workers included).

:func:`timed_tasks` wraps every task so that the worker that runs it measures its CPU
(``time.process_time`` around the call, in whichever process runs it: this one with one worker,
a pool worker otherwise); :func:`unwrap` returns the results and the per-task CPU seconds. The
whole tree's CPU is this process's own (planning, assembly, figures) plus the tasks'; a pool
worker's start-up (its imports, about 1 CPU s each, once per worker) is not a task's and is left
out (with ``--workers 1`` there is none: the figure is the process's CPU, exactly).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from acesim.studies.tasks import Task


def timed_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, float]:
    """``fn(*args)`` and the CPU seconds it took in the process that ran it."""
    start = time.process_time()
    value = fn(*args)
    return value, time.process_time() - start


def timed_tasks(tasks: Sequence[Task]) -> list[Task]:
    """The same tasks, each returning (its value, its CPU s)."""
    return [Task(t.key, timed_call, (t.fn, t.args)) for t in tasks]


def unwrap(results: dict[Hashable, Any]) -> tuple[dict[Hashable, Any], dict[Hashable, float]]:
    """(values by key, CPU seconds by key)."""
    values = {k: v[0] for k, v in results.items()}
    cpu = {k: v[1] for k, v in results.items()}
    return values, cpu
