"""Local process pools whose workers never outlive the process that started them.

A ``ProcessPoolExecutor`` worker waits on its call queue forever once its parent is gone
without shutting the pool down (SIGKILL, an out-of-memory kill): nothing closes the queue. The
workers of :func:`process_pool` watch the parent's pid from a daemon thread and exit within
:data:`PARENT_POLL_S` of its death. The pool uses the ``forkserver`` start method where there is
one (``spawn`` elsewhere): workers are not forked from a parent that may run threads (a progress
bar), and forking from a server that has imported the simulator once keeps them quick to start.
A worker owns its process, as the command line does (:func:`acesim.cli.main`): it moves what
exists when it starts (the server's imports) out of the cyclic garbage collector's reach
(``gc.freeze()``), so the collector's passes after each task's run do not walk them again.

Used by the sweep runner and by :func:`acesim.runs.compare.run_jobs` (``acesim run``,
``acesim reproduce``). It imports nothing from acesim, so every layer may use it.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

__all__ = ["process_pool", "watch_parent", "PARENT_POLL_S"]

PARENT_POLL_S = 0.5
"""How often a worker checks that its parent is alive (seconds)."""


def watch_parent(parent: int, ignore_sigint: bool = False) -> None:
    """Worker initializer: exit (status 1) once process ``parent`` is gone; with
    ``ignore_sigint``, also ignore Ctrl-C (the parent decides what an interrupt stops); the
    objects that exist now frozen out of the cyclic collector (module docstring)."""
    gc.freeze()
    if ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if not _alive(parent):
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="acesim-parent-watch").start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the pid now belongs to another user
        return False
    return True


def process_pool(
    workers: int, *, preload: Sequence[str] = (), ignore_sigint: bool = False
) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` of ``workers`` processes that exit when this process dies.

    ``preload``: modules the forkserver imports once, before forking workers (ignored with
    ``spawn``). ``ignore_sigint``: workers ignore Ctrl-C.
    """
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if preload and ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(list(preload))
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=watch_parent,
        initargs=(os.getpid(), ignore_sigint),
    )
