"""Running a study's simulations: in this process, on local worker processes, or on Dask.

A study (the ACE reproduction, its sensitivity variants, the 2026 study) plans its work as
:class:`Task`\\ s: a key, a module-level function and its arguments (everything picklable), each
task independent of the others. :func:`run_tasks` runs them and returns the results by key:

* ``workers=1``: one after another in this process;
* local (default): a :func:`acesim.processes.process_pool` of ``workers`` processes (None: one
  per usable CPU) that exit when this process dies;
* ``dask="local"``: a ``distributed.LocalCluster`` of ``workers`` single-threaded processes;
  ``dask="tcp://host:port"``: an existing scheduler (its workers need the same acesim);
  ``dask=<distributed.Client>``: that client (tests).

Every task is a deterministic simulation of its own arguments, so the results do not depend on
the backend, the number of workers or the order tasks finish in (bit-identical; the tests
check local against Dask). ``progress()`` is called once per finished task. A task that raises
is a :class:`~acesim.errors.SimulationError` in the caller naming the task (a study that
reports failures as results catches them in its task function).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from ..clusters import dask_client
from ..errors import ConfigError, SimulationError
from ..processes import process_pool

__all__ = ["Task", "run_tasks", "usable_cpus"]


@dataclass(frozen=True)
class Task:
    """One independent simulation: ``fn(*args)``, its result stored under ``key``."""

    key: Hashable
    fn: Callable[..., Any]
    args: tuple[Any, ...] = field(default=())


def usable_cpus() -> int:
    """CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _Failed:
    """A task's exception, carried back as text (not every exception pickles)."""

    kind: str
    message: str


def _call(task: Task) -> tuple[Hashable, Any]:
    try:
        return task.key, task.fn(*task.args)
    except Exception as exc:  # re-raised in the parent, naming the task
        return task.key, _Failed(type(exc).__name__, str(exc))


def _value(key: Hashable, value: Any) -> Any:
    if isinstance(value, _Failed):
        raise SimulationError(f"task {key!r} failed: {value.kind}: {value.message}")
    return value


def run_tasks(
    tasks: Sequence[Task],
    *,
    workers: int | None = None,
    dask: Any = None,
    progress: Callable[[], Any] | None = None,
    preload: Sequence[str] = (),
) -> dict[Hashable, Any]:
    """Run every task (module docstring); results by key. ``preload``: modules a local
    forkserver imports once before forking workers."""
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ConfigError("tasks", "two tasks have the same key")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise ConfigError("--workers", "must be at least 1", workers)
    if dask is not None:
        return _run_dask(tasks, dask, workers or usable_cpus(), progress)
    count = workers if workers is not None else usable_cpus()
    results: dict[Hashable, Any] = {}
    if count == 1 or len(tasks) <= 1:
        for task in tasks:
            key, value = _call(task)
            results[key] = _value(key, value)
            if progress is not None:
                progress()
        return results
    with process_pool(min(count, len(tasks)), preload=list(preload)) as pool:
        # longest first would need costs; submission order is the plan's, a bounded window
        window = 4 * count
        queue = list(reversed(tasks))
        pending: set[Future[tuple[Hashable, Any]]] = set()
        while queue or pending:
            while queue and len(pending) < window:
                pending.add(pool.submit(_call, queue.pop()))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                key, value = fut.result()
                results[key] = _value(key, value)
                if progress is not None:
                    progress()
    return results


def _run_dask(
    tasks: Sequence[Task], dask: Any, workers: int, progress: Callable[[], Any] | None
) -> dict[Hashable, Any]:
    def unreachable(address: str, exc: BaseException) -> Exception:
        return ConfigError("--dask", f"cannot reach the scheduler ({exc})", address)

    results: dict[Hashable, Any] = {}
    with dask_client(dask, workers, unreachable) as (dist, client):
        futures = [client.submit(_call, t, pure=False) for t in tasks]
        for fut in dist.as_completed(futures):
            key, value = fut.result()
            results[key] = _value(key, value)
            fut.release()
            if progress is not None:
                progress()
    return results
