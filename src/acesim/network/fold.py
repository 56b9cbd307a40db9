"""Identical steps of a symmetric collective in closed form, while they run alone.

In symmetric (and class) mode a ring's steps are alike: the representative sends one message
of ``m`` bytes to its mirror, the message leaves at the rate ``r`` the fluid allocation gives
it alone on its resources, and is delivered a fixed delay ``a`` after its last byte; the next
step starts at that delivery. A run of ``K`` such steps with nothing else on those resources
is therefore the recurrence

    start[0] = now,  out[j] = start[j] + m / r,  start[j + 1] = out[j] + a,

evaluated with the very float operations the event path performs (the completion time of a
fresh activity is ``start + work / rate``; a delivery ``out + delay``), so a folded run ends at
the same instant to the last bit. :class:`StepFold` claims the message's resources
(:meth:`acesim.engine.Engine.claim`) and schedules one event, the last step's delivery, instead
of two events per step. The instant anything else touches a claimed resource (another
activity on the link or HBM, a capacity change, an observer, a sync), the fold materialises:
the steps done are accounted as their events would have (resource integrals and peaks, bytes
sent and received, bound segments), the step in flight becomes the activity it would be (or,
between its last byte and its delivery, that delivery's event), and the event path goes on.

Where it applies (decided per step by :meth:`CollectiveRuntime._start_step`): symmetric mode,
an endpoint without step hooks (no units held, no per-step setup), a phase without lanes,
no per-rank latencies, two or more consecutive single-message steps (``next`` or ``xor``)
with the same bytes and kind, every resource of the message idle but its meters (an engine's
reduction units, :meth:`acesim.engine.Engine.add_resource`), which the steps hold beside other
work (:meth:`~acesim.engine.Engine.hold_meters`: declined where a meter would come near its
capacity) and count as their bytes go out. What differs from the event
path: the events processed (two per step fewer), and the order in which a bound listener
hears the steps' segments relative to other tracks' (heard at materialisation or at the end).
This is what keeps symmetric mode flat in NPUs: a 2 (N - 1)-step ring costs a few float
operations a step, not two events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import Activity, EventHandle, Resource
from ..engine.fluid import INF, solo_rate
from ..intervals import Times, floats
from ..sums import Ladder, add_repeatedly, ladders

if TYPE_CHECKING:
    from .collective import CollectiveRuntime, _ChunkRun

__all__ = ["MIN_STEPS", "StepFold"]

#: Fewest steps folded: below, the bookkeeping costs more than the events it saves (measured:
#: a lone 1 MiB ring all-reduce, 2 steps a phase 1.17x the event path's CPU time, 4 steps
#: 0.80x, 16 steps 0.27x; results are the same either way).
MIN_STEPS = 4
#: Up to this many steps the recurrence is evaluated in a loop, beyond it with numpy.
_FEW = 64


class StepFold:
    """``count`` identical steps of ``run``, from its current step, in closed form."""

    def __init__(
        self,
        runtime: CollectiveRuntime,
        run: _ChunkRun,
        count: int,
        demand: dict[Resource, float],
        nbytes: float,
        delay: float,
    ):
        self.runtime = runtime
        self.run = run
        self.count = count
        self.demand = demand
        #: what the steps claim, and the meters they hold (kept out of claims and fillings:
        #: :meth:`acesim.engine.Engine.hold_meters`)
        self.claimed = {res: amount for res, amount in demand.items() if not res.metered}
        self.meters = {res: amount for res, amount in demand.items() if res.metered}
        self.nbytes = nbytes
        self.delay = delay
        self.first = run.step
        self.phase = run.phase
        self.dim = run.coll.phases[run.phase].dim
        self.track = runtime.tracks.get(run.rank)
        self.start = runtime.engine.now
        self.rate = 0.0
        self.bound: Any = None
        self._end: EventHandle | None = None
        #: many steps: the recurrence's instants as ladders (arithmetic progressions, exact:
        #: :func:`~acesim.sums.ladders`), computed once by :meth:`begin`
        self._ladders: list[Ladder] | None = None
        #: the instants as an array, s (start, out, start, out, ..., the last delivery): where
        #: no ladders serve, one sequential cumulative sum; else expanded when needed
        self._clock: np.ndarray | None = None

    def begin(self) -> bool:
        """Claim the resources and schedule the last delivery; False (nothing done) when the
        message would not run at a finite positive rate alone or the steps would not end
        at a finite time."""
        runtime = self.runtime
        engine = runtime.engine
        weight, basis = runtime.shares.solo(self.run.rank, self.claimed)
        probe = Activity(self.nbytes, self.claimed, INF, weight, None, None, 0)
        probe.basis = basis
        probe.track = self.track if engine.bound_listener is not None else None
        rate = solo_rate(probe)
        if not (0 < rate < INF):
            return False
        self.rate = rate
        self.bound = probe.bound_now
        start = self.start
        deliver = start
        if self.count <= _FEW:
            for _ in range(self.count):
                deliver = (start + self.nbytes / rate) + self.delay
                start = deliver
        else:
            self._ladders = ladders(start, self.nbytes / rate, self.delay, self.count)
            if self._ladders is not None:
                deliver = self._ladders[-1].after
            else:
                terms = np.empty(2 * self.count + 1)
                terms[0] = start
                terms[1::2] = self.nbytes / rate
                terms[2::2] = self.delay
                self._clock = np.cumsum(terms)  # the loop's additions, in its order
                deliver = float(self._clock[-1])
        if deliver == INF:  # the event path says which time overflowed
            return False
        if self.meters and not engine.hold_meters(self.meters, rate, self.claimed, basis):
            return False
        engine.claim(list(self.claimed), self._materialise)
        self._end = engine.schedule_at(deliver, self._finish)
        self.run.in_step = True
        self.run.sends_out = 1  # its message is out until the fold says otherwise
        return True

    def _times(self, steps: int) -> tuple[Sequence[float], Sequence[float]]:
        """The first ``steps`` steps' starts and last bytes out (s): the recurrence's float
        operations in order (a few in a loop, many as one sequential cumulative sum)."""
        step, delay = self.nbytes / self.rate, self.delay
        if self._clock is not None or self._ladders is not None:
            clock: Any = self._instants()  # a numpy array serves as a sequence of floats
            return clock[0 : 2 * steps : 2], clock[1 : 2 * steps : 2]
        if steps <= _FEW:
            starts, outs = [], []
            start = self.start
            for _ in range(steps):
                out = start + step
                starts.append(start)
                outs.append(out)
                start = out + delay
            return starts, outs
        terms = np.empty(2 * steps)
        terms[0] = self.start
        terms[1::2] = step
        terms[2::2] = delay
        times: Any = np.cumsum(terms)  # a numpy array serves as a sequence of floats
        return times[0::2], times[1::2]

    def _account(self, done: int, sent: int) -> float:
        """Account the first ``done`` steps delivered and, when ``sent`` > ``done``, the next
        step's last byte out; returns the start of step ``first + done`` (s)."""
        engine = self.runtime.engine
        if self.meters:
            engine.release_meters(self.meters, self.rate)
            for res, amount in self.meters.items():  # each step's bytes out, as they finish
                engine.count_on_meter(res, self.nbytes * amount, sent)
        if sent == 0:
            return self.start
        if self._ladders is not None:
            return self._account_ladders(done, sent)
        starts, outs = self._times(sent)
        for res, amount in self.claimed.items():
            engine.account_alone_many(res, self.rate * amount, starts, outs)
        listener = engine.bound_listener
        if self.track is not None and listener is not None:
            self._tell(listener, starts, outs)
        self._account_bytes(done, sent)
        return float(starts[done]) if done < sent else float(outs[-1]) + self.delay

    def _account_bytes(self, done: int, sent: int) -> None:
        """The bytes of ``sent`` steps out and ``done`` delivered."""
        coll = self.run.coll
        nbytes = self.nbytes
        coll.bytes_sent = add_repeatedly(coll.bytes_sent, nbytes, sent)
        per_dim = coll.bytes_sent_per_dim
        per_dim[self.dim] = add_repeatedly(per_dim.get(self.dim, 0.0), nbytes, sent)
        coll.bytes_received = add_repeatedly(coll.bytes_received, nbytes, done)

    def _account_ladders(self, done: int, sent: int) -> float:
        """:meth:`_account` from the ladders: every sum in closed form, the bound listener
        told the spans as ladders where it takes them (a :class:`BoundRecorder`)."""
        assert self._ladders is not None
        engine = self.runtime.engine
        steps = _prefix(self._ladders, sent)
        first, last = _instant(steps, 0), _instant(steps, sent - 1)
        durations = [(ladder.end - ladder.start, ladder.count) for ladder in steps]
        durations[0] = (durations[0][0], durations[0][1] - 1)  # the first goes by itself
        for res, amount in self.claimed.items():
            engine.account_alone_runs(res, self.rate * amount, first, durations, last)
        listener = engine.bound_listener
        if self.track is not None and listener is not None:
            many = getattr(listener, "ladders", None)  # BoundRecorder's batch of ladders
            if many is not None:
                many(self.track, self.bound, steps)
            else:
                starts = np.concatenate([ladder.starts() for ladder in steps])
                outs = np.concatenate([ladder.ends() for ladder in steps])
                self._tell(listener, starts, outs)
        self._account_bytes(done, sent)
        return _instant(steps, done)[0] if done < sent else last[1] + self.delay

    def _instants(self) -> np.ndarray:
        """Every instant of the steps (s): start, out, start, out, ..., the last delivery."""
        if self._clock is None:
            assert self._ladders is not None
            clock = np.empty(2 * self.count + 1)
            clock[0 : 2 * self.count : 2] = np.concatenate([x.starts() for x in self._ladders])
            clock[1 : 2 * self.count : 2] = np.concatenate([x.ends() for x in self._ladders])
            clock[-1] = self._ladders[-1].after
            self._clock = clock
        return self._clock

    def _tell(self, listener: Any, starts: Times, outs: Any) -> None:
        """Tell the bound listener the steps' spans (``starts``, ``outs``: s)."""
        many = getattr(listener, "spans", None)  # BoundRecorder's batch
        if many is not None:
            many(self.track, self.bound, starts, outs)
            return
        for start, out in zip(floats(starts), floats(outs), strict=True):
            listener.opened(self.track, start)
            if out > start:
                listener.segment(self.track, self.bound, start, out)
            listener.closed(self.track, out)

    def _finish(self) -> None:
        """Every step ran alone: account them, hand the last delivery to the event path."""
        self.runtime.engine.unclaim(list(self.claimed))
        self._hand_over(self.count - 1, delivered=True)

    def _hand_over(self, j: int, *, delivered: bool) -> None:
        """Steps before ``first + j`` done; step ``first + j``'s bytes out and (``delivered``)
        its message arriving now, or its delivery scheduled."""
        runtime = self.runtime
        run = self.run
        start = self._account(j, j + 1)
        run.step = self.first + j
        run.in_step = True
        run.sends_out = 0
        if delivered:
            runtime._deliver(run.coll, run.rank, run.chunk, self.phase, run.step, self.nbytes)
        else:
            deliver = (start + self.nbytes / self.rate) + self.delay
            runtime.engine.call_at(
                deliver,
                runtime._deliver,
                run.coll,
                run.rank,
                run.chunk,
                self.phase,
                run.step,
                self.nbytes,
            )

    def _materialise(self) -> None:
        """Something else touches a claimed resource now: the event path's state at this
        instant (the claim is already ended)."""
        runtime = self.runtime
        engine = runtime.engine
        now = engine.now
        if self._end is not None:
            self._end.cancel()
        if self._ladders is not None:
            self._materialise_on_ladders(now, self._ladders)
            return
        if self._clock is not None:
            self._materialise_at(now, self._clock)
            return
        start = self.start
        for j in range(self.count):
            out = start + self.nbytes / self.rate
            deliver = out + self.delay
            if now < out:  # its bytes going out: the activity it would be
                self._resume(j, start)
                return
            if now < deliver or j == self.count - 1:  # out, not yet delivered
                self._hand_over(j, delivered=False)
                return
            start = deliver

    def _materialise_at(self, now: float, clock: np.ndarray) -> None:
        """:meth:`_materialise` with the instants computed (the same search, by bisection):
        the first step not delivered by ``now`` (the last one at the latest)."""
        delivered = clock[2::2]  # step j's delivery, the next one's start
        j = min(int(np.searchsorted(delivered, now, side="right")), self.count - 1)
        if now < clock[2 * j + 1]:  # its bytes going out: the activity it would be
            self._resume(j, float(clock[2 * j]))
        else:
            self._hand_over(j, delivered=False)

    def _materialise_on_ladders(self, now: float, steps: list[Ladder]) -> None:
        """:meth:`_materialise` on the ladders (the same search: the first step not delivered
        by ``now``, the last one at the latest), without expanding them."""
        j = 0
        for ladder in steps:
            if ladder.after > now or ladder is steps[-1]:
                i = _first_delivered_after(ladder, now)
                start, out = _instant([ladder], i)
                if now < out:  # its bytes going out: the activity it would be
                    self._resume(j + i, start)
                else:
                    self._hand_over(j + i, delivered=False)
                return
            j += ladder.count

    def _resume(self, j: int, start: float) -> None:
        runtime = self.runtime
        run = self.run
        self._account(j, j)
        run.step = self.first + j
        run.in_step = True
        run.sends_out = 1
        runtime.shares.resume(
            run.rank,
            self.nbytes,
            self.demand,
            runtime._sent,
            started=start,
            rate=self.rate,
            bound=self.bound,
            tag=(run, run.rank, self.phase, run.step, self.dim),
            track=self.track,
        )


def _prefix(steps: list[Ladder], count: int) -> list[Ladder]:
    """The first ``count`` steps of ``steps`` (ladders, 1 <= count <= their steps)."""
    out: list[Ladder] = []
    for ladder in steps:
        if ladder.count >= count:
            if ladder.count > count:
                after = ladder.start + count * ladder.period
                ladder = Ladder(ladder.start, ladder.end, ladder.period, count, after)
            out.append(ladder)
            return out
        out.append(ladder)
        count -= ladder.count
    return out


def _instant(steps: list[Ladder], j: int) -> tuple[float, float]:
    """Step ``j``'s start and last byte out (s) in the ladders ``steps``."""
    for ladder in steps:
        if j < ladder.count:
            if ladder.count == 1:
                return ladder.start, ladder.end
            start = ladder.start + j * ladder.period
            return start, start + (ladder.end - ladder.start)
        j -= ladder.count
    raise IndexError("step beyond the ladders")


def _first_delivered_after(ladder: Ladder, now: float) -> int:
    """The first step of ``ladder`` delivered after ``now`` (the next step's start, s), or
    its last: step ``i`` is delivered at ``start + (i + 1) period`` (``after`` for the
    last), exactly."""
    last = ladder.count - 1
    if last == 0:
        return 0
    guess = int((now - ladder.start) // ladder.period) - 1 if ladder.period > 0 else 0
    i = min(max(guess, 0), last)
    while i > 0 and ladder.start + i * ladder.period > now:  # step i - 1 delivered after now
        i -= 1
    while i < last and not ladder.start + (i + 1) * ladder.period > now:
        i += 1
    return i
