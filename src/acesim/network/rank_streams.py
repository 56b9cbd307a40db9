"""Exact mode, every rank at once: each rank's compute stream beside its collective.

The per-rank backend (:mod:`acesim.network.rank_fluid`) runs a collective's messages as one
fluid problem per rank. Here each rank also runs a sequence of compute kernels on its compute
stream, as :meth:`acesim.hardware.npu.NPU.run_kernels` does on the event path:

* a kernel waits its plan's latency, then runs as one activity of work 1.0 on the units its
  NPU's pool leaves free (its demand, basis, weight and rate cap the NPU's ``kernel_inputs``);
  the next follows at its end;
* the collective's kernel, as it becomes active at a rank, takes ``units`` of the rank's pool
  (:meth:`~acesim.network.endpoint.Endpoint.kernel_units`), after the NPU's SM wait while a
  compute kernel's blocks hold them (``fifo``: at the running kernel's last wave if that
  leaves the units idle, else at its end; ``priority``: at the end of the running wave;
  ``immediate``: at once), and gives them back when the rank's part ends; the running
  kernel's rate cap and weight follow the free units;
* a kernel shares its rank's HBM with the rank's messages where both demand it (then the
  allocator fills them together), else it is filled on its own.

The kernel is one more column of a rank's local configuration, beside its dimensions'
messages (``kernel id``: its index in the sequence and whether the collective holds units).
What the kernels did (bytes, FLOPs, busy time) follows from their plans in order; what this
module times is when each rank's sequence ends and the unit-seconds its kernels occupied.

Arithmetic is the event path's: progress ``remaining -= rate x dt``, finish ``now +
remaining / rate``, the SM wait from the work done at the collective's issue. Events of one
rank at one instant are taken together (kernel end, next launch, units taken or given back)
and its rates filled once, as the engine does at an instant's end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..engine import Activity, Resource

__all__ = ["KernelPlanLike", "KernelStream", "StreamsDone", "Streams"]

_INF = math.inf
#: a kernel without blocks (its work spreads over any units) occupies every free unit
_ALL = 1 << 62


class KernelPlanLike(Protocol):
    """What this module reads of a kernel's plan (:class:`acesim.hardware.kernel_model.
    KernelPlan`)."""

    @property
    def latency(self) -> float: ...  # s before it computes

    @property
    def blocks(self) -> int | None: ...  # thread blocks (None: its work spreads evenly)

    def waves(self, units: int) -> int: ...


#: a kernel's activity on some free units: its demand (per unit of work), basis, weight and
#: rate cap (work/s), as :meth:`acesim.hardware.npu.NPU.kernel_inputs` gives them
KernelInputs = tuple[dict[Resource, float], Resource | None, float, float]


@dataclass(frozen=True)
class KernelStream:
    """One rank's compute stream beside the collective, started at the run's start.

    Args:
        plans: its kernels' plans, in order.
        inputs: a plan's activity on some free units (:data:`KernelInputs`).
        units: the units its pool leaves free at the start.
        signature: what makes two ranks' streams alike (same plans, capacities, units).
    """

    plans: Sequence[KernelPlanLike]
    inputs: Callable[[Any, int], KernelInputs]
    units: int
    signature: Hashable


@dataclass(frozen=True)
class StreamsDone:
    """When each rank's kernels ended (s), the unit-s they occupied, and when the collective
    held each rank's units (s; infinite where it held none)."""

    end: np.ndarray
    unit_seconds: np.ndarray
    taken: np.ndarray
    given: np.ndarray
    held: int


class Streams:
    """Every rank's compute stream as arrays (see the module docstring).

    Args:
        streams: each rank's stream.
        rank_class: each rank's class (ranks of one class have alike streams).
        classes: each class's first rank.
        claim: the units the collective's kernel takes as it becomes active and its launch
            policy (None: it takes none).
        start: the run's start (s).
    """

    def __init__(
        self,
        streams: Sequence[KernelStream],
        rank_class: np.ndarray,
        classes: Sequence[int],
        claim: tuple[int, str] | None,
        start: float,
    ):
        n = len(streams)
        self.streams = streams
        self.rank_class = rank_class
        self.classes = classes
        self.held = claim[0] if claim is not None else 0
        self.launch = claim[1] if claim is not None else "immediate"
        self.claims = claim is not None
        longest = max(len(streams[c].plans) for c in classes)
        self.kmax = longest
        #: per class and kernel: its latency (s) and the units its blocks occupy at most
        self.latency = np.zeros((len(classes), longest + 1))
        self.blocks = np.full((len(classes), longest + 1), _ALL, dtype=np.int64)
        self.count = np.zeros(len(classes), dtype=np.int64)
        #: per class: the free units without and with the collective's units taken
        self.units_of = np.zeros((len(classes), 2), dtype=np.int64)
        for c, rank in enumerate(classes):
            stream = streams[rank]
            self.count[c] = len(stream.plans)
            for k, plan in enumerate(stream.plans):
                self.latency[c, k] = plan.latency
                if plan.blocks is not None:
                    self.blocks[c, k] = plan.blocks
            self.units_of[c] = (stream.units, stream.units - self.held)
        self.index = np.zeros(n, dtype=np.int64)
        #: 0: waiting for its launch (``launch_at``), 1: running, 2: the sequence ended
        self.mode = np.zeros(n, dtype=np.int64)
        self.launch_at = np.full(n, _INF)
        self.rem = np.zeros(n)
        self.rate = np.zeros(n)
        self.last = np.zeros(n)
        self.fin = np.full(n, _INF)
        self.since = np.zeros(n)
        self.seq = np.zeros(n, dtype=np.int64)
        self.taken = np.zeros(n, dtype=np.int64)  # 1 while the collective holds units
        self.grant_at = np.full(n, _INF)
        self.waited_from = np.full(n, _INF)
        self.occupied = np.zeros(n, dtype=np.int64)
        self.unit_since = np.zeros(n)
        self.unit_seconds = np.zeros(n)
        self.end = np.full(n, _INF)
        self.given_at = np.full(n, _INF)
        self.taken_at = np.full(n, _INF)
        #: this instant: a kernel ended, launched or had its units changed; and whether such
        #: a kernel shares a resource with the rank's messages (its change reaches them)
        self.changed = np.zeros(n, dtype=bool)
        self.reach = np.zeros(n, dtype=bool)
        #: per class and kernel: whether it shares a resource with the rank's messages (set
        #: by the caller, which knows the messages)
        self.share = np.zeros((len(classes), longest + 1), dtype=bool)
        #: ranks granted their units at their last stream events
        self.granted = np.zeros(0, dtype=np.int64)
        cls = rank_class
        empty = self.count[cls] == 0
        self.mode[empty] = 2
        self.end[empty] = start
        first = self.latency[cls, 0]
        waiting = ~empty
        self.launch_at[waiting] = start + first[waiting]

    # -- the local events --------------------------------------------------------------------
    def next_times(self) -> np.ndarray:
        """Each rank's next stream event (a kernel's end or launch, units granted), s."""
        times: np.ndarray = np.minimum(
            np.where(self.mode == 1, self.fin, self.launch_at), self.grant_at
        )
        return times

    def kernel_id(self, ranks: np.ndarray) -> np.ndarray:
        """The configuration id of the running kernel of ``ranks`` (0: none running): its
        index and whether the collective holds units."""
        ids: np.ndarray = np.where(
            self.mode[ranks] == 1, 1 + self.index[ranks] * 2 + self.taken[ranks], 0
        )
        return ids

    def advance(self, ranks: np.ndarray, clock: np.ndarray, counter: int) -> int:
        """The stream events of ``ranks`` at their clocks (``clock``: every rank's): kernels
        that end, the next launched, units granted; the start counter after (launches take
        the next start numbers)."""
        now = clock[ranks]
        ends = ranks[(self.mode[ranks] == 1) & (self.fin[ranks] == now)]
        if len(ends):
            t = clock[ends]
            self.unit_seconds[ends] += self.occupied[ends] * (t - self.unit_since[ends])
            self.unit_since[ends] = t
            self.occupied[ends] = 0
            self.fin[ends] = _INF
            self.changed[ends] = True
            cls = self.rank_class[ends]
            self.reach[ends] |= self.share[cls, self.index[ends]]
            nxt = self.index[ends] + 1
            self.index[ends] = nxt
            over = nxt >= self.count[cls]
            self.mode[ends] = np.where(over, 2, 0)
            self.end[ends[over]] = t[over]
            going = ~over
            self.launch_at[ends[going]] = t[going] + self.latency[cls[going], nxt[going]]
        launch = ranks[(self.mode[ranks] == 0) & (self.launch_at[ranks] == now)]
        if len(launch):
            t = clock[launch]
            self.mode[launch] = 1
            self.launch_at[launch] = _INF
            self.rem[launch] = 1.0
            self.rate[launch] = 0.0
            self.last[launch] = t
            self.since[launch] = t
            self.fin[launch] = _INF
            self.seq[launch] = counter + np.arange(len(launch))
            counter += len(launch)
            self.unit_since[launch] = t
            self.occupied[launch] = self._occupied(launch)
            self.changed[launch] = True
            self.reach[launch] |= self.share[self.rank_class[launch], self.index[launch]]
        grants = ranks[self.grant_at[ranks] == now]
        self.granted = grants
        if len(grants):
            self.grant_at[grants] = _INF
            self._units(grants, clock, 1)
        return counter

    def _occupied(self, ranks: np.ndarray) -> np.ndarray:
        """Units the running kernels of ``ranks`` occupy on the units free now."""
        cls = self.rank_class[ranks]
        free = self.units_of[cls, self.taken[ranks]]
        occupied: np.ndarray = np.minimum(free, self.blocks[cls, self.index[ranks]])
        return occupied

    def _units(self, ranks: np.ndarray, clock: np.ndarray, taken: int) -> None:
        """The collective takes (``taken`` 1) or gives back (0) the units of ``ranks`` now."""
        self.taken[ranks] = taken
        t = clock[ranks]
        if taken:
            self.taken_at[ranks] = t
        else:
            self.given_at[ranks] = t
        running = ranks[self.mode[ranks] == 1]
        if len(running):
            t = clock[running]
            self.unit_seconds[running] += self.occupied[running] * (t - self.unit_since[running])
            self.unit_since[running] = t
            self.occupied[running] = self._occupied(running)
            self.changed[running] = True
            self.reach[running] |= self.share[self.rank_class[running], self.index[running]]

    def issue(self, ranks: np.ndarray, clock: np.ndarray) -> np.ndarray:
        """The collective becomes active at ``ranks`` now: each takes its units after its SM
        wait (:meth:`acesim.hardware.npu.NPU.sm_wait`), now where there is none; the grant
        times (s)."""
        now: np.ndarray = clock[ranks]
        if not self.claims:
            return now.copy()
        wait = np.array([self._wait(int(r), float(clock[r])) for r in ranks.tolist()])
        granted: np.ndarray = now + wait
        at_once = wait <= 0
        if at_once.any():
            self._units(ranks[at_once], clock, 1)
        later = ranks[~at_once]
        self.grant_at[later] = granted[~at_once]
        self.waited_from[later] = now[~at_once]
        return granted

    def _wait(self, r: int, now: float) -> float:
        """How long the collective's kernel at rank ``r`` waits for its units, s (the NPU's
        ``sm_wait``: no wait where no kernel runs, where it started this very instant, or
        where its work spreads evenly over the units)."""
        if self.launch == "immediate" or self.mode[r] != 1:
            return 0.0
        c = int(self.rank_class[r])
        k = int(self.index[r])
        plan = self.streams[self.classes[c]].plans[k]
        rate = float(self.rate[r])
        if plan.blocks is None or now <= float(self.since[r]) or rate <= 0:
            return 0.0
        # the engine's work_done: the work at the last change plus the rate since
        done = 1.0 - float(self.rem[r])
        if rate < _INF:
            done += rate * (now - float(self.last[r]))
        done = min(max(done, 0.0), 1.0)
        held = max(1, int(self.units_of[c, self.taken[r]]))
        waves = plan.waves(held)
        wave = min(int(done * waves), waves - 1)
        if self.launch == "priority":
            target = (wave + 1) / waves
        else:
            idle = held - (plan.blocks - (waves - 1) * held)
            target = (waves - 1) / waves if idle >= self.held else 1.0
        return max(0.0, (target - done) / rate)

    def give_back(self, ranks: np.ndarray, clock: np.ndarray) -> None:
        """The collective's part ended at ``ranks`` now: their units given back."""
        if self.claims and len(ranks):
            self._units(ranks, clock, 0)

    def done(self) -> bool:
        """Every rank's sequence has ended."""
        return bool((self.mode == 2).all())

    def outcome(self) -> StreamsDone:
        return StreamsDone(self.end, self.unit_seconds, self.taken_at, self.given_at, self.held)

    # -- the kernel's activity in a filling ----------------------------------------------------
    def activity(self, cls: int, kernel_id: int, seq: int, tag: int) -> Activity:
        """The activity the engine would hold for kernel configuration ``kernel_id`` of a
        rank of class ``cls``: its demand, basis, weight and cap on the units free."""
        k, taken = divmod(kernel_id - 1, 2)
        stream = self.streams[self.classes[cls]]
        units = int(self.units_of[cls, taken])
        demand, basis, weight, cap = stream.inputs(stream.plans[k], units)
        act = Activity(1.0, demand, cap, weight, None, tag, seq)
        act.basis = basis
        return act

    def resources(self, cls: int) -> list[set[Resource]]:
        """Per kernel of class ``cls``: the resources it demands (on the units free at the
        start; the units change its cap and weight, not what it demands)."""
        stream = self.streams[self.classes[cls]]
        return [set(stream.inputs(plan, stream.units)[0]) for plan in stream.plans]
