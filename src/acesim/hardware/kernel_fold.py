"""A compute stream's kernel sequence in closed form, while nothing else uses the NPU's HBM.

The model is the event path's (:mod:`acesim.hardware.npu`): each kernel of a pass waits its
launch latency, then runs as one fluid activity of work 1.0 on the NPU's compute HBM resource,
its rate capped by its compute on the free units. Alone on that resource, it runs at the rate
``r`` the fluid allocation gives it alone (:func:`~acesim.engine.fluid.solo_rate`) until it
ends, so a pass of ``K`` kernels is the recurrence

    launch[i] = end[i - 1] + latency[i]   (end[-1]: the pass's start; no latency: the same)
    end[i]    = launch[i] + 1.0 / r[i]

evaluated with the very float operations of the event path (a timer's ``now + delay``, a fresh
activity's completion ``start + work / rate``), so a folded pass ends at the same instant to
the last bit. :class:`KernelFold` claims the resource (:meth:`acesim.engine.Engine.claim`)
and schedules one event, the pass's end among the completions of its instant
(:meth:`~acesim.engine.Engine.complete_at`), instead of two events per kernel (its launch and
its completion); at the end the kernels are accounted as their events would have (the
resource's integrals and peak, the NPU's HBM bytes, FLOPs and unit-seconds, in the same
order). The instant anything else touches the resource (an activity on it, a capacity change,
an observer, a sync) or the NPU's free units change, the fold materialises: the kernels done
are accounted, the kernel running becomes the activity it would be
(:meth:`~acesim.engine.Engine.resume`), or the launch it waits for is scheduled, and the event
path goes on.

Where it applies (:meth:`NPU.run_kernels`, where the platform set ``NPU.fold_kernels``: exact
mode whose collectives charge the NPUs nothing, :class:`~acesim.hardware.platform.Platform`):
a pass whose kernels run at a finite positive rate alone, not tracked for the bound listener,
on an HBM resource nothing uses, watches or claims. What differs from the event path: the
events processed (two per kernel fewer), and, among events of one instant, the order of a
pass's end relative to other NPUs' completions (each NPU's own order is kept). A kernel that
materialises as an activity beside two or more others would sum its resource's load in
another order (the activity is newer than it would be); where the platform folds, nothing
else runs on an NPU's HBM, and only a sync materialises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine import EventHandle
from ..engine.fluid import INF
from .kernel_model import KernelPlan

if TYPE_CHECKING:
    from .npu import NPU

__all__ = ["FoldedKernel", "KernelFold", "folded_kernels"]

#: Amounts of demand at or below this are dropped, as :meth:`acesim.engine.Engine.start` drops
#: them (rounding residue, not demand).
_RESIDUE = 1e-300


class FoldedKernel:
    """What a pass's kernel needs to run folded: its plan, launch latency (s), rate alone
    (work/s) and its reciprocal (s: the time of its work 1.0), its allocation of the compute
    HBM (B/s; negative: it demands none), the compute units it occupies, and what its
    completion counts (its plan's HBM bytes, HBM demand, FLOPs and what they run on), read
    once."""

    __slots__ = (
        "plan",
        "latency",
        "rate",
        "step",
        "allocated",
        "occupied",
        "hbm_bytes",
        "hbm_demand",
        "flops",
        "math",
    )

    def __init__(self, plan: KernelPlan, rate: float, occupied: int):
        self.plan = plan
        self.latency: float = plan.latency
        self.rate = rate
        self.step = 1.0 / rate
        amount = plan.hbm_demand
        self.allocated = rate * amount if amount > _RESIDUE else -1.0
        self.occupied = occupied
        self.hbm_bytes: float = plan.hbm_bytes
        self.hbm_demand: float = amount
        self.flops: float = plan.flops
        self.math: str = plan.math


def folded_kernels(npu: NPU, plans: list[KernelPlan], units: int) -> list[FoldedKernel] | None:
    """The kernels of ``plans`` on ``npu`` with ``units`` free units, as a fold runs them;
    None where one would not run at a finite positive rate alone."""
    out = []
    for plan in plans:
        rate = npu.solo_kernel_rate(plan, units)
        if not (0 < rate < INF):
            return None
        out.append(FoldedKernel(plan, rate, npu.occupied(plan, units)))
    return out


class KernelFold:
    """The running pass of ``npu`` (its ``kernels``, from the first, on ``units`` free units)
    in closed form."""

    __slots__ = ("npu", "kernels", "units", "times", "_end")

    def __init__(self, npu: NPU, kernels: list[FoldedKernel], units: int):
        self.npu = npu
        self.kernels = kernels
        #: the units free for compute, constant while the fold holds
        self.units = units
        #: each kernel's launch and end, in turn (s)
        self.times: list[float] = []
        self._end: EventHandle | None = None

    def begin(self) -> bool:
        """Claim the NPU's compute HBM and schedule the pass's end; False (nothing done) when
        the resource is not idle or the pass would not end at a finite time."""
        npu = self.npu
        engine = npu.engine
        resource = npu.hbm_compute
        if not engine.idle(resource):
            return False
        time = engine.now
        times = self.times
        for kernel in self.kernels:
            latency = kernel.latency
            launch = time + latency if latency > 0 else time
            time = launch + kernel.step
            times.append(launch)
            times.append(time)
        if time == INF:  # the event path says which time overflowed
            return False
        engine.claim([resource], self._materialise)
        self._end = engine.complete_at(time, self._finish)
        return True

    def _finish(self) -> None:
        """Every kernel ran alone: account them and end the pass as its last completion
        would."""
        npu = self.npu
        npu.engine.unclaim([npu.hbm_compute])
        npu._fold = None
        count = len(self.kernels)
        self._account(count)
        npu._index = count - 1
        npu._run_next(count)

    def _account(self, done: int) -> None:
        """The first ``done`` kernels ended: what their launches and completions did to the
        resource and the NPU's counters (:meth:`NPU._launch`, :meth:`NPU._kernel_done`), in
        their order (a kernel's work is 1.0: its counts are its plan's)."""
        if not done:
            return
        npu = self.npu
        engine = npu.engine
        resource = npu.hbm_compute
        flops = npu.flops_by_math
        times = self.times
        kernels = self.kernels
        # the NPU's sums in locals (the same additions in the same order)
        unit_seconds = npu.compute_unit_seconds
        hbm_bytes = npu.compute_hbm_bytes
        hbm_demand = npu.compute_hbm_demand
        for i in range(done):
            kernel = kernels[i]
            launch, end = times[2 * i], times[2 * i + 1]
            if kernel.allocated >= 0:
                engine.account_alone(resource, kernel.allocated, launch, end)
            unit_seconds += kernel.occupied * (end - launch)
            hbm_bytes += kernel.hbm_bytes
            hbm_demand += kernel.hbm_demand
            math = kernel.math
            flops[math] = flops.get(math, 0.0) + kernel.flops
        npu.compute_unit_seconds = unit_seconds
        npu.compute_hbm_bytes = hbm_bytes
        npu.compute_hbm_demand = hbm_demand
        npu._unit_since = times[2 * done - 1]
        npu._active_units = 0

    def release(self) -> None:
        """End the claim now and materialise (the NPU's free units are about to change)."""
        self.npu.engine.unclaim([self.npu.hbm_compute])
        self._materialise()

    def _materialise(self) -> None:
        """Something else touches the resource now (the claim is already ended): the event
        path's state at this instant."""
        npu = self.npu
        engine = npu.engine
        now = engine.now
        npu._fold = None
        if self._end is not None:
            self._end.cancel()
        last = len(self.kernels) - 1
        times = self.times
        for i, kernel in enumerate(self.kernels):
            launch = times[2 * i]
            if now < launch:  # waiting for its launch latency
                self._account(i)
                npu._index = i
                engine.call_at(launch, npu._launch, kernel.plan)
                return
            if now <= times[2 * i + 1] or i == last:  # running (ending now at the latest)
                self._account(i)
                self._resume(i)
                return

    def _resume(self, i: int) -> None:
        """Kernel ``i`` running since its launch: the activity :meth:`NPU._launch` started."""
        npu = self.npu
        kernel = self.kernels[i]
        plan = kernel.plan
        launch = self.times[2 * i]
        npu._index = i
        npu._plan = plan
        npu._unit_since = launch
        npu._active_units = kernel.occupied
        npu._kernel_since = launch
        demand, basis, weight, cap = npu.kernel_inputs(plan, self.units)
        npu.kernel = npu.engine.resume(
            1.0,
            demand,
            npu._kernel_done,
            started=launch,
            rate=kernel.rate,
            bound=None,
            weight=weight,
            basis=basis,
            tag=npu._sequence[2],
            track=None,
            cap=cap,
        )
