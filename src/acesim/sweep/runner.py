"""Running a sweep: local processes, a Dask cluster, or this process; rows written as points end.

The parent expands and validates every point, skips the hashes already in the database, then
hands the rest to a backend that yields ``(hash, outcome)`` as points finish; each outcome is
written in its own transaction before the next is taken. Backends keep a bounded window of
points in flight (a few per worker), so a killed sweep loses at most the points that were
running, and a huge sweep does not queue millions of tasks.

* local (default): ``concurrent.futures.ProcessPoolExecutor`` on a ``forkserver`` context (no
  fork of a parent that runs a progress-bar thread); workers ignore SIGINT (the parent decides)
  and exit when the parent disappears. A worker that dies (OOM, segfault) breaks the pool: the
  pool is rebuilt and the points in flight retried once, then recorded as errors.
* ``dask="local"``: a ``distributed.LocalCluster`` of ``workers`` single-threaded processes.
* ``dask="tcp://host:port"``: an existing scheduler; its workers need the same acesim.
* ``workers=0``: points run one after another in this process (debugging).

A ``dask`` address is checked (:func:`check_dask`) before the spec is expanded or the database
opened.
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..clusters import dask_client, require_dask
from ..errors import ConfigError, SweepError, short_repr
from .spec import Point, SweepSpec, canonical_json, load_spec
from .store import ResultStore
from .streams import DaskStream, InlineStream, LocalStream, PointStream, drive
from .worker import error_outcome

__all__ = [
    "run_sweep",
    "run_items",
    "point_stream",
    "SweepSummary",
    "default_workers",
    "default_db",
    "check_dask",
]

Item = tuple[str, dict[str, Any]]  # (hash, config)


def _bootstrapping_worker() -> bool:
    """True inside a worker process while it imports the parent's main script (forkserver and
    spawn workers do that before they serve; multiprocessing marks the process as
    ``_inheriting`` meanwhile, the flag it checks itself before refusing to start processes)."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def default_workers() -> int:
    """CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


DASK_FORMS = "'local' (a new LocalCluster) or a scheduler address tcp://HOST:PORT (or tls://)"
_DASK_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # distributed's network transports


def check_dask(dask: Any) -> None:
    """Raise :class:`SweepError` naming ``--dask`` unless ``dask`` is None, ``"local"``, a
    scheduler address ``tcp://HOST:PORT`` (or another transport of distributed: ``tls``, ``ws``,
    ``wss``, ``ucx``; ``inproc://`` for a scheduler in this process) or a ``distributed.Client``.
    """
    if dask is None:
        return
    require_dask()
    if dask == "local" or not isinstance(dask, str):
        return
    if dask.startswith("inproc://") and len(dask) > len("inproc://"):
        return
    problem = _dask_address_problem(dask)
    if problem:
        raise SweepError(f"--dask {short_repr(dask)}: {problem}; expected {DASK_FORMS}")


def _dask_address_problem(text: str) -> str | None:
    if "://" not in text:
        return "not a scheduler address (no scheme://)"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        return f"malformed address ({exc})"
    if parts.scheme not in _DASK_SCHEMES:
        return f"unsupported scheme {short_repr(parts.scheme + '://')}"
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return "a scheduler address is only scheme://HOST:PORT"
    host = parts.hostname or ""
    if not host:
        return "no host"
    if port is None:
        return "no port"
    if port == 0:
        return "port 0"
    if not _valid_host(host):
        return f"invalid host {short_repr(host)}"
    return None


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return len(host) <= 253 and all(
        0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
        for label in labels
    )


def default_db(spec: SweepSpec) -> Path:
    """``<spec name>.sqlite`` in the current folder."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.name)
    return Path(f"{safe}.sqlite")


@dataclass
class SweepSummary:
    """What a call to :func:`run_sweep` did."""

    name: str
    db: Path
    points: int  # distinct points of the spec
    skipped: int  # already in the database
    ran: int  # executed now
    ok: int  # executed now and succeeded
    failed: int  # executed now and failed
    wall_time: float
    backend: str
    errors: list[tuple[int, str]] = field(default_factory=list)  # (point index, error), first 20
    interrupted: bool = False
    #: refused now: an invalid value, or a configuration that does not divide or fit (an LLM
    #: split, an HBM misfit); recorded with the reason, not a failure
    refused: int = 0
    refusals: list[tuple[int, str]] = field(default_factory=list)  # (point index, reason)

    @property
    def points_per_second(self) -> float:
        return self.ran / self.wall_time if self.wall_time > 0 else 0.0


def run_sweep(
    spec: SweepSpec | dict[str, Any] | str | Path,
    db: str | Path | None = None,
    *,
    workers: int | None = None,
    dask: str | Any | None = None,
    strict: bool = False,
    retry_errors: bool = False,
    progress: Any = False,
) -> SweepSummary:
    """Run every point of ``spec`` not yet in ``db``; one row per point.

    Args:
        spec: a spec file (TOML/YAML/JSON), a spec dict, or a :class:`SweepSpec`.
        db: the SQLite results file (default ``<spec name>.sqlite`` in the current folder).
        workers: local worker processes (default: the usable CPUs; 0 runs in this process), or
            the LocalCluster's worker count with ``dask="local"``.
        dask: None (local processes), ``"local"`` (a new LocalCluster), a scheduler address
            ``"tcp://host:port"``, or a ``distributed.Client``.
        strict: reject the whole spec if any point has an invalid value (default: record the
            point's error and run the rest).
        retry_errors: run again the points recorded with status ``error`` or ``refused``.
        progress: False, True (a rich progress bar on stderr) or a ``rich.progress.Progress``.

    Raises:
        ConfigError: the spec is structurally wrong (unknown key or path, bad axis), every point
            is invalid, or ``strict`` and one is.
        SweepError: the database or the execution backend is unusable (a malformed ``dask``
            address before anything else).
    """
    check_dask(dask)
    if _bootstrapping_worker():
        # A worker process is re-running the top level of the script that started this sweep
        # (a script without an ``if __name__ == "__main__":`` guard): the parent does the work.
        return SweepSummary("(worker)", Path(db or "."), 0, 0, 0, 0, 0, 0.0, "none")
    sweep = load_spec(spec)
    points = sweep.points()
    _check_points(sweep, points, strict)
    unique: dict[str, Point] = {}
    for p in points:
        unique.setdefault(p.hash, p)
    db_path = Path(db) if db is not None else default_db(sweep)
    workers = default_workers() if workers is None else workers
    if workers < 0:
        raise ConfigError("workers", "must be 0 (this process) or more", workers)
    backend_name = _backend_name(dask, workers)
    start = time.perf_counter()
    summary = SweepSummary(sweep.name, db_path, len(unique), 0, 0, 0, 0, 0.0, backend_name)
    with ResultStore(db_path) as store:
        done = store.finished(include_errors=not retry_errors)
        summary.skipped = sum(1 for h in unique if h in done)
        todo = [p for h, p in unique.items() if h not in done]
        bar, own_bar = _progress(progress)
        task = None
        if bar is not None:
            task = bar.add_task(f"sweep {sweep.name}", total=len(unique), completed=summary.skipped)

        def advance() -> None:
            if bar is not None:
                bar.advance(task)

        try:
            if own_bar and bar is not None:
                bar.start()
            record = _Recorder(store, sweep, summary)
            _run_points(todo, record, _backend(dask, workers), advance)
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            if own_bar and bar is not None:
                bar.stop()
            summary.wall_time = time.perf_counter() - start
    return summary


def _check_points(sweep: SweepSpec, points: list[Point], strict: bool) -> None:
    """Refuse the spec when every point is invalid, or (``strict``) any one is."""
    invalid = [p for p in points if not p.ok]
    if invalid and (strict or len(invalid) == len(points)):
        first = invalid[0]
        which = "every point" if len(invalid) == len(points) else f"{len(invalid)} points"
        raise ConfigError(
            f"sweep {sweep.name!r}",
            f"{which} invalid; point {first.index} {_describe(first)}: {first.error}",
        )


@dataclass
class _Recorder:
    """Writes each point's outcome to the store and counts it in the summary."""

    store: ResultStore
    sweep: SweepSpec
    summary: SweepSummary

    def __call__(self, p: Point, outcome: dict[str, Any]) -> None:
        self.store.write(
            hash=p.hash,
            sweep=self.sweep.name,
            point=p.index,
            kind=self.sweep.kind,
            axes=p.columns,
            outcome=outcome,
            config=canonical_json(p.config),
        )
        summary = self.summary
        if outcome["status"] == "refused":
            summary.refused += 1
            if len(summary.refusals) < 20:
                summary.refusals.append((p.index, str(outcome["error"])))
        elif outcome["status"] != "ok":
            summary.failed += 1
            if len(summary.errors) < 20:
                summary.errors.append((p.index, str(outcome["error"])))


def _run_points(
    todo: list[Point],
    record: _Recorder,
    backend: Callable[[list[Item]], Iterator[tuple[str, Any]]],
    advance: Callable[[], None],
) -> None:
    """Record the invalid points of ``todo`` as refused, then run the others on ``backend``
    and record each outcome as it comes."""
    for p in todo:
        if not p.ok:
            record(p, error_outcome(f"refused: {p.error}", "refused"))
            advance()
    runnable = {p.hash: p for p in todo if p.ok}
    items = [(h, p.config) for h, p in runnable.items()]
    summary = record.summary
    for h, outcome in backend(items):
        record(runnable[h], outcome)
        summary.ran += 1
        summary.ok += outcome["status"] == "ok"
        advance()


def _describe(p: Point) -> str:
    return "(" + ", ".join(f"{k}={short_repr(v)}" for k, v in p.values.items()) + ")"


def _progress(progress: Any) -> tuple[Any, bool]:
    if progress is True:
        from rich.progress import Progress

        return Progress(transient=True), True
    if progress is False or progress is None:
        return None, False
    return progress, False


def _backend_name(dask: Any, workers: int) -> str:
    if dask is None:
        return "this process" if workers == 0 else f"{workers} local processes"
    if isinstance(dask, str):
        return f"dask LocalCluster ({workers} workers)" if dask == "local" else f"dask {dask}"
    return "dask client"


def run_items(
    items: list[Item], *, dask: Any = None, workers: int = 0
) -> Iterator[tuple[str, Any]]:
    """Run resolved points ``(key, configuration)`` where a sweep runs them (this process when
    ``workers`` is 0 and no ``dask``; local processes; a Dask cluster: an address or
    ``"local"``), yielding ``(key, outcome)`` as they finish (:func:`acesim.sweep.worker.
    execute_point`'s outcome: never raises for a failing point)."""
    return _backend(dask, workers)(items)


@contextmanager
def point_stream(*, dask: Any = None, workers: int = 0) -> Iterator[PointStream]:
    """A :class:`~acesim.sweep.streams.PointStream` on the backend :func:`run_items` uses
    (this process, ``workers`` local processes, a Dask cluster), kept until the block ends:
    for a search that submits point after point (``acesim plan``), so that each worker's
    caches (kernel plans, chunk works) serve every point and no cluster starts twice."""
    if dask is None and workers == 0:
        yield InlineStream()
        return
    if dask is None:
        local = LocalStream(workers)
        try:
            yield local
        finally:
            local.close()
        return
    if isinstance(dask, str) and dask != "local":
        check_dask(dask)
    with dask_client(dask, workers, _unreachable) as (dist, client):
        yield DaskStream(dist, client)


def _backend(dask: Any, workers: int) -> Callable[[list[Item]], Iterator[tuple[str, Any]]]:
    def run(items: list[Item]) -> Iterator[tuple[str, Any]]:
        if not items:
            return
        with point_stream(dask=dask, workers=workers) as stream:
            yield from drive(stream, items)

    return run


def _unreachable(address: str, exc: BaseException) -> Exception:
    return SweepError(f"--dask {address}: cannot reach the scheduler ({exc})")
