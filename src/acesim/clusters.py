"""Dask clients for the sweep runner and the reproduction studies: one way to get one.

``"local"`` starts a ``LocalCluster`` of worker processes (one thread each, no dashboard, quiet
logs) and closes it afterwards; an address (``tcp://host:port``) connects to a running
scheduler; a ``distributed.Client`` is used as given and left open. It imports only acesim's
errors, so every layer may use it.

Dask is an optional dependency (``pip install 'acesim[dask]'``; the ``dev`` extra has it):
:func:`require_dask` says so in one line where a Dask feature is asked for without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import SweepError

__all__ = ["dask_client", "require_dask", "DASK_INSTALL"]

#: How to install what the Dask features need.
DASK_INSTALL = "pip install 'acesim[dask]'"


def require_dask(option: str = "--dask") -> None:
    """Raise :class:`SweepError` naming ``option`` when Dask's distributed is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise SweepError(
            f"{option}: Dask is not installed (an optional dependency); install it with "
            f"{DASK_INSTALL}"
        ) from None


@contextmanager
def dask_client(
    dask: Any, workers: int, unreachable: Callable[[str, BaseException], Exception]
) -> Iterator[tuple[Any, Any]]:
    """``(distributed, client)`` for ``dask`` (module docstring); a scheduler that cannot be
    reached raises ``unreachable(address, exc)``. ``workers``: a local cluster's processes."""
    import logging

    require_dask()
    import distributed

    # distributed ships no type hints: go through an Any so mypy --strict accepts the calls.
    dist: Any = distributed
    cluster = None
    own = True
    if isinstance(dask, str) and dask == "local":
        cluster = dist.LocalCluster(
            n_workers=max(1, workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = dist.Client(cluster)
    elif isinstance(dask, str):
        try:
            client = dist.Client(dask, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise unreachable(dask, exc) from None
    else:
        client, own = dask, False
    try:
        yield dist, client
    finally:
        if own:
            client.close()
        if cluster is not None:
            cluster.close()
