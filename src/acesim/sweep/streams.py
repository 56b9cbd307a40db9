"""Point streams: resolved points submitted one at a time and taken back as they finish.

A stream runs :func:`~acesim.sweep.worker.execute_point` on its backend: this process (each
point when it is submitted), a local process pool, or a Dask client. ``submit(key, config)``
hands a point over; ``next()`` returns the next finished one as ``(key, outcome)`` (blocking
until one finishes; an outcome never raises for a failing point); ``in_flight`` counts the
points submitted and not yet taken back; ``window`` is how many a caller should keep in
flight to keep every worker busy (a few per worker). :func:`drive` runs a list of points
through a stream within its window, as a sweep does; a search that decides its next point
from the results so far (``acesim plan``) submits and takes back one at a time.

A local worker that dies (out of memory, a crash) breaks the pool: the pool is rebuilt and the
points in flight retried once, then returned as errors; a pool that dies before finishing any
point is a :class:`~acesim.errors.SweepError` (something is wrong with every point or with
the workers themselves).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from ..errors import SweepError
from ..processes import process_pool
from .worker import error_outcome, execute_point

__all__ = ["PointStream", "InlineStream", "LocalStream", "DaskStream", "drive"]

Item = tuple[str, dict[str, Any]]  # (key, config)


class PointStream(Protocol):
    """Points submitted one at a time, taken back as they finish (module docstring)."""

    @property
    def window(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    def submit(self, key: str, config: dict[str, Any]) -> None: ...

    def next(self) -> Item: ...


def drive(stream: PointStream, items: list[Item]) -> Iterator[Item]:
    """Run ``items`` through ``stream``, at most its window in flight, yielding each
    ``(key, outcome)`` as it finishes."""
    queue = list(reversed(items))
    while queue or stream.in_flight:
        while queue and stream.in_flight < stream.window:
            stream.submit(*queue.pop())
        yield stream.next()


class InlineStream:
    """This process: a point runs when it is submitted (a window of one)."""

    window = 1

    def __init__(self) -> None:
        self.done: deque[Item] = deque()

    @property
    def in_flight(self) -> int:
        return len(self.done)

    def submit(self, key: str, config: dict[str, Any]) -> None:
        self.done.append((key, execute_point(config)))

    def next(self) -> Item:
        return self.done.popleft()


def local_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes for points. Workers ignore Ctrl-C (the parent decides)
    and exit once the parent is gone; forked from a server that has already imported the
    simulator, they start fast."""
    return process_pool(
        workers, preload=["acesim.sweep.worker", "acesim.simulate"], ignore_sigint=True
    )


class LocalStream:
    """A local process pool of ``workers`` (a window of four points per worker); ``run``: what
    a worker does with a point (:func:`~acesim.sweep.worker.execute_point`; a module-level
    function, pickled by name)."""

    def __init__(
        self, workers: int, run: Callable[[dict[str, Any]], dict[str, Any]] = execute_point
    ):
        self.workers = workers
        self.run = run
        self.window = max(4, 4 * workers)
        self.pool = local_pool(workers)
        self.pending: dict[Future[dict[str, Any]], str] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.attempts: dict[str, int] = {}
        self.done: deque[Item] = deque()
        self.finished_by_pool = 0

    @property
    def in_flight(self) -> int:
        return len(self.pending) + len(self.done)

    def submit(self, key: str, config: dict[str, Any]) -> None:
        self.configs[key] = config
        self.pending[self.pool.submit(self.run, config)] = key

    def next(self) -> Item:
        while not self.done:
            self._wait()
        return self.done.popleft()

    def close(self) -> None:
        """Stop the pool: points not started are cancelled, points still running abandoned
        (their workers terminated: a plan stopped at its time limit does not wait for
        them), and the pool shut down and waited for. Nothing of it is then left to the
        interpreter's exit, whose handler races a pool shut down without waiting on CPython
        3.11 (an ``OSError: Bad file descriptor`` printed after the output)."""
        if any(not fut.done() for fut in self.pending):
            for process in list((self.pool._processes or {}).values()):
                process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _wait(self) -> None:
        finished, _ = wait(self.pending, return_when=FIRST_COMPLETED)
        try:
            for fut in finished:
                try:
                    outcome = fut.result()
                except BrokenProcessPool:
                    raise
                except Exception as exc:  # pickling problems and the like
                    outcome = error_outcome(f"{type(exc).__name__}: {exc}")
                key = self.pending.pop(fut)
                self.configs.pop(key, None)
                self.finished_by_pool += 1
                self.done.append((key, outcome))
        except BrokenProcessPool:
            self._rebuild()

    def _rebuild(self) -> None:
        """A worker died (OOM, crash): every point in flight is lost with the pool; retried
        once on a new pool, then returned as an error (a point that kills its worker again
        ends as an error, the other points go on)."""
        lost = list(self.pending.values())
        self.pending.clear()
        self.pool.shutdown(wait=False, cancel_futures=True)
        # a new pool dying on points none of which died before: the workers themselves fail
        retried = any(self.attempts.get(key, 0) for key in lost)
        if self.finished_by_pool == 0 and not retried:
            raise SweepError(
                "local worker processes died before finishing any point "
                "(see the messages above); try --workers 0 to run in this process"
            ) from None
        self.pool = local_pool(self.workers)
        self.finished_by_pool = 0
        for key in lost:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            if self.attempts[key] >= 2:
                self.configs.pop(key, None)
                self.done.append(
                    (
                        key,
                        error_outcome(
                            "a worker process died while this point was running "
                            "(out of memory or a crash); rerun with --retry-errors"
                        ),
                    )
                )
            else:
                self.submit(key, self.configs[key])


class DaskStream:
    """A Dask ``client`` (``dist``: the distributed module; a window of four points per
    thread, at least 16)."""

    def __init__(self, dist: Any, client: Any):
        self.client = client
        self.window = max(16, 4 * (sum(client.nthreads().values()) or 1))
        self.stream = dist.as_completed()
        self.keys: dict[Any, str] = {}

    @property
    def in_flight(self) -> int:
        return len(self.keys)

    def submit(self, key: str, config: dict[str, Any]) -> None:
        fut = self.client.submit(execute_point, config, key=f"acesim-point-{key}", pure=False)
        self.keys[fut.key] = key
        self.stream.add(fut)

    def next(self) -> Item:
        fut = next(self.stream)
        key = self.keys.pop(fut.key)
        if fut.status == "finished":
            outcome = fut.result()
        else:
            failure = fut.exception()
            outcome = error_outcome(f"dask: {type(failure).__name__}: {failure}")
        fut.release()
        return key, outcome
