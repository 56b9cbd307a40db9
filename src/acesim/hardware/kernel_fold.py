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

__all__ = ["KernelFold"]

#: Amounts of demand at or below this are dropped, as :meth:`acesim.engine.Engine.start` drops
#: them (rounding residue, not demand).
_RESIDUE = 1e-300


class KernelFold:
    """The running pass of ``npu`` (its ``plans``, from kernel 0) in closed form."""

    __slots__ = ("npu", "plans", "units", "launches", "ends", "rates", "_end")

    def __init__(self, npu: NPU, plans: list[KernelPlan]):
        self.npu = npu
        self.plans = plans
        #: the units free for compute, constant while the fold holds
        self.units = npu.units_for_compute
        #: each kernel's launch and end (s), and its rate alone (work/s)
        self.launches: list[float] = []
        self.ends: list[float] = []
        self.rates: list[float] = []
        self._end: EventHandle | None = None

    def begin(self) -> bool:
        """Claim the NPU's compute HBM and schedule the pass's end; False (nothing done) when
        the resource is not idle or a kernel would not run at a finite positive rate alone."""
        npu = self.npu
        engine = npu.engine
        resource = npu.hbm_compute
        if not engine.idle(resource):
            return False
        time = engine.now
        for plan in self.plans:
            rate = npu.solo_kernel_rate(plan, self.units)
            if not (0 < rate < INF):
                return False
            launch = time + plan.latency if plan.latency > 0 else time
            time = launch + 1.0 / rate
            self.launches.append(launch)
            self.ends.append(time)
            self.rates.append(rate)
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
        last = len(self.plans) - 1
        self._account(last + 1)
        npu._index = last
        npu._run_next(last + 1)

    def _account(self, done: int) -> None:
        """The first ``done`` kernels ended: what their launches and completions did to the
        resource and the NPU's counters (:meth:`NPU._launch`, :meth:`NPU._kernel_done`), in
        their order."""
        npu = self.npu
        engine = npu.engine
        resource = npu.hbm_compute
        flops = npu.flops_by_math
        for i in range(done):
            plan = self.plans[i]
            launch, end = self.launches[i], self.ends[i]
            amount = plan.hbm_demand
            if amount > _RESIDUE:
                engine.account_alone(resource, self.rates[i] * amount, launch, end)
            npu.compute_unit_seconds += npu.occupied(plan, self.units) * (end - launch)
            npu.compute_hbm_bytes += 1.0 * plan.hbm_bytes
            npu.compute_hbm_demand += 1.0 * plan.hbm_demand
            flops[plan.math] = flops.get(plan.math, 0.0) + 1.0 * plan.flops
        if done:
            npu._unit_since = self.ends[done - 1]
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
        last = len(self.plans) - 1
        for i, plan in enumerate(self.plans):
            launch = self.launches[i]
            if now < launch:  # waiting for its launch latency
                self._account(i)
                npu._index = i
                engine.call_at(launch, npu._launch, plan)
                return
            if now <= self.ends[i] or i == last:  # running (ending this instant at the latest)
                self._account(i)
                self._resume(i)
                return

    def _resume(self, i: int) -> None:
        """Kernel ``i`` running since its launch: the activity :meth:`NPU._launch` started."""
        npu = self.npu
        plan = self.plans[i]
        launch = self.launches[i]
        npu._index = i
        npu._plan = plan
        npu._unit_since = launch
        npu._active_units = npu.occupied(plan, self.units)
        npu._kernel_since = launch
        demand, basis, weight, cap = npu.kernel_inputs(plan, self.units)
        npu.kernel = npu.engine.resume(
            1.0,
            demand,
            npu._kernel_done,
            started=launch,
            rate=self.rates[i],
            bound=None,
            weight=weight,
            basis=basis,
            tag=npu._sequence[2],
            track=None,
            cap=cap,
        )
