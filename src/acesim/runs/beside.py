"""A collective beside compute kernels in exact mode, every rank at once.

Where a platform's ranks differ (a variation: agreed orders) and its endpoint charges the NPUs
(``baseline``), :func:`acesim.network.rank_fluid.run_beside` runs the collective and each
NPU's compute stream together without an event per message or kernel. This module gives it
each NPU's stream (its kernels' plans and activities, the units its pool leaves free) and
records what it timed on the NPUs (the kernel log, busy time, bytes and FLOPs, the units the
collective held), as the event path would have left them. Where it cannot run, the reason,
and nothing has started: the caller runs the event path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..hardware.kernels import Kernel
from ..hardware.npu import NPU
from ..hardware.platform import Platform
from ..network import rank_fluid
from ..network.collective import Collective
from ..network.group import Group
from ..network.rank_streams import KernelStream

__all__ = ["run_beside"]

#: the per-rank backend's reasons that only say it does not take this platform's collectives
#: at all (the lockstep backend's reason, concurrent kernels, is then the one to give)
_GENERIC = (
    "the per-rank backend is off",
    "not exact mode",
    "no variation: its ranks alike, without agreed orders",
)
#: why the lockstep backend does not run a collective beside compute kernels
CONCURRENT = "concurrent kernels share the NPUs"


def run_beside(
    platform: Platform,
    op: str,
    size: float,
    kernels: Sequence[Kernel],
    *,
    at: float = 0.0,
    dims: Any = None,
    group: Group | None = None,
    tag: Any = "compute",
) -> Collective | str:
    """``op`` of ``size`` bytes issued ``at`` s from now beside ``kernels`` on every NPU's
    compute stream (started now, tagged ``tag``), on the per-rank backend; else why the
    event path runs them (nothing started). A tie the event order would decide raises
    :class:`~acesim.network.vectorized.Conflict` with nothing started either."""
    npus = platform.npus
    streams = [_stream(npu, kernels) for npu in npus]
    start = platform.engine.now
    done = rank_fluid.run_beside(
        platform.collectives, op, size, streams, at=at, dims=dims, group=group
    )
    if isinstance(done, str):
        return CONCURRENT if done in _GENERIC else done
    coll, timed = done
    for r, npu in enumerate(npus):
        npu.record_kernels(
            kernels, start, float(timed.end[r]), float(timed.unit_seconds[r]), tag=tag
        )
        taken, given = float(timed.taken[r]), float(timed.given[r])
        if taken <= given < float("inf"):
            npu.units.record_hold(timed.held, taken, given)
    return coll


def _stream(npu: NPU, kernels: Sequence[Kernel]) -> KernelStream:
    """``npu``'s compute stream of ``kernels``, as :meth:`NPU.run_kernels` would run it."""
    plans = [npu.plan(k) for k in npu.chosen(kernels)]
    units = npu.units_for_compute
    signature = (
        tuple(id(p) for p in plans),
        units,
        npu.hbm_compute.capacity,
        npu.config.hbm_arbitration,
    )
    return KernelStream(plans, npu.kernel_inputs, units, signature)
