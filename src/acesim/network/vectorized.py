"""Exact mode without an event per message: one collective on one dimension, every NPU at once.

When a collective runs alone on a one-dimension network with an endpoint that charges nothing
(the ``ideal`` kind) and one chunk in flight per NPU, the event simulation of
:mod:`acesim.network.collective` reduces to a recurrence that numpy evaluates for every NPU at
once, step by step (no per-message Python):

* each NPU admits its chunks' phases in one fixed order (the dimension queue is FIFO by
  arrival within a collective, so the order does not depend on timing: it is computed once);
* a step of ``k`` messages of ``m`` bytes that starts at ``S`` at rank ``r`` has its messages
  out at ``F = S + m / x_r``, where ``x_r`` is the rate the fluid allocator gives ``k`` equal
  messages on the rank's egress and their receivers' ingress (the same arithmetic as
  :func:`acesim.engine.fluid.max_min_rates`: share ``w / max(1/C)``, load the sequential sum of
  ``k`` shares, level ``C / load``, rate ``share * level``);
* a message from ``q`` arrives at ``F_q + a_q`` (``a``: latency plus endpoint delay); the step
  completes at ``C_r = max(F_r, max over the senders q of r of (F_q + a_q))``, and the next
  step (or the next phase in the queue) starts then;
* the bytes sent and received are summed message by message in the order the events would
  have been processed (sequential float additions, as the event runtime does).

Every NPU is simulated: a slower link at one rank (``run.links``) delays exactly the steps
that depend on it. The result is bit-identical to the event simulation whenever every rank's
egress is the same; with per-rank capacities each rank's rate uses its own fill level, where the
allocator, reallocating several ranks' messages at one instant, freezes fill levels within a
relative 1e-9 of each other at the lowest: the two differ by at most that (in practice by a few
units in the last place). Cases outside these conditions (several dimensions, endpoints that
charge HBM or hold units, concurrent chunks or kernels, NCCL protocols and NVLS steps, per-rank
links under a direct step, whose messages into one receiver couple their senders through its
ingress) run on the event engine.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from .algorithms import NVLS_KINDS, Step
from .collective import Collective, CollectiveRuntime
from .endpoint import Endpoint
from .group import Group
from .plan import nvls_sync_latency

__all__ = ["ENABLED", "run_alone", "add_repeatedly"]

#: Tests turn this off to compare with the event simulation.
ENABLED = True

_HOOKS = (
    "shape_phases",
    "link_efficiency",
    "hbm_parallelism",
    "message_demand",
    "step_begin",
    "phase_begin",
    "step_end",
    "chunk_begin",
    "chunk_end",
    "collective_started",
    "collective_finished",
)

#: Sequential additions are done this many at a time (numpy's accumulate is sequential).
_BLOCK = 1 << 20


def _free_endpoint(endpoint: Endpoint) -> bool:
    kind = type(endpoint)
    return all(getattr(kind, name) is getattr(Endpoint, name) for name in _HOOKS)


def run_alone(
    runtime: CollectiveRuntime,
    op: str,
    size: float,
    *,
    dims: Sequence[int] | None = None,
    group: Group | None = None,
) -> Collective | None:
    """Run ``op`` of ``size`` bytes as the only work of an exact platform, vectorized over the
    ranks; None when the case needs the event simulation (see the module docstring)."""
    if not ENABLED or not runtime.exact or group is not None:
        return None
    topo = runtime.topology
    if len(topo.dimensions) != 1 or dims not in (None, (0,), [0]):
        return None
    if not runtime.engine.quiet(listened=True) or runtime.phase_log is not None:
        return None
    if not _free_endpoint(runtime.endpoint):
        return None
    axes, chunks, choice = runtime.choose(op, size, dims=dims, group=group)
    phases = choice.phases
    n = topo.npus
    if not phases or any(p.dim != 0 or p.size != n or p.stride != 1 for p in phases):
        return None
    if min(runtime.config.active_chunks_per_dimension, chunks) != 1:
        return None
    # NCCL protocols, NVLS steps and their synchronisation run on the event path
    protocol = choice.protocol
    if protocol is not None and (
        protocol.name is not None
        or protocol.base_latency != 0
        or any(f != 1.0 for f in protocol.factors)
        or any(h is not None for h in protocol.hop_latencies)
    ):
        return None
    if nvls_sync_latency(runtime.config, phases, chunks) > 0:
        return None
    if any(s.kind in NVLS_KINDS for p in phases for s in p.steps):
        return None
    if any(d.incast_fan_in is not None for d in topo.dimensions):
        return None  # incast weights: the event path
    # The work bound (collective.max_messages) counts what the simulation iterates over: here
    # steps, each one numpy pass over the ranks, not messages (the event path refuses it).
    if chunks * sum(len(p.steps) for p in phases) > runtime.config.max_messages:
        return None
    egress = np.array([row[0].capacity for row in runtime.egress], dtype=float)
    ingress = np.array([row[0].capacity for row in runtime.ingress], dtype=float)
    if runtime.rank_latencies is None:
        delay = np.full(n, runtime.delays[0])
    else:
        latency = np.array([row[0] for row in runtime.rank_latencies], dtype=float)
        delay = latency + runtime.config.endpoint_delay
    uniform = bool(
        np.all(egress == egress[0]) and np.all(ingress == egress[0]) and np.all(delay == delay[0])
    )
    sizes = {s.message_bytes for p in phases for s in p.steps}
    if not uniform and (len(sizes) > 1 or any(s.pattern == "all" for p in phases for s in p.steps)):
        # bytes would be summed in an order that depends on the ranks' timing; and a direct
        # step's messages into one receiver share its ingress, coupling the senders' rates
        return None
    listener = runtime.engine.bound_listener
    if listener is not None and not egress[0] <= ingress.min():
        return None  # rank 0's messages would be bound by a receiver's ingress: the event path
    bound = runtime.egress[0][0]  # what binds rank 0's (tracked) messages
    weight = runtime.endpoint.message_weight
    runtime._next_id += 1
    now = runtime.engine.now
    coll = Collective(
        id=runtime._next_id,
        op=op,
        size=size,
        dims=tuple(a.dim for a in axes),
        group_size=n,
        phases=phases,
        chunks=chunks,
        issued=now,
        axes=axes,
        expected=n,
        algorithm=choice.algorithm,
        protocol=protocol,
    )
    runtime.collectives.append(coll)
    # Time a step's messages take at each rank (its bytes over its rate), per (k, bytes).
    times: dict[tuple[int, float], np.ndarray] = {}
    rates: dict[int, np.ndarray] = {}
    ranks = np.arange(n)
    done = np.full(n, now)  # completion of the previous step (or phase) at each rank
    out = np.empty(n)
    arrive = np.empty(n)
    latest = np.empty(n)
    sums: list[list[float]] = []  # runs of [bytes of a message, messages], in event order
    for _chunk, index in _admissions(chunks, len(phases)):
        phase = phases[index]
        for step in phase.steps:
            k = step.message_count(phase.size)
            m = float(step.message_bytes)
            took = times.get((k, m))
            if took is None:
                rate = rates.get(k)
                if rate is None:
                    receiver = ingress if step.pattern == "all" else _from(ingress, step)
                    rate = rates[k] = _rates(egress, receiver, weight, k)
                # finish = now + remaining / rate (an infinite rate, or no bytes: now + 0)
                took = times[(k, m)] = m / rate
            np.add(done, took, out=out)
            if listener is not None:  # rank 0's messages, as the engine reports them
                start, end = float(done[0]), float(out[0])
                for _ in range(k):
                    listener.opened("message", start)
                    if end > start:
                        listener.segment("message", bound, start, end)
                    listener.closed("message", end)
            np.add(out, delay, out=arrive)
            if step.pattern == "next":  # the sender of rank r is r - 1
                latest[1:] = arrive[:-1]
                latest[0] = arrive[-1]
            elif step.pattern == "xor":
                np.take(arrive, ranks ^ step.distance, out=latest)
            else:
                latest[:] = _max_of_others(arrive)
            np.maximum(out, latest, out=done)
            if sums and sums[-1][0] == m:
                sums[-1][1] += n * k
            else:
                sums.append([m, n * k])
    sent = 0.0
    for m, count in sums:
        sent = add_repeatedly(sent, m, int(count))
    coll.bytes_sent = sent
    coll.bytes_received = sent
    coll.bytes_sent_per_dim[0] = sent
    coll.rank_finished = dict(zip(range(n), done.tolist(), strict=True))
    coll.chunks_left = dict.fromkeys(range(n), 0)
    coll.finished = float(done.max())
    if not math.isfinite(coll.finished):
        return coll  # the caller reports a time that is not finite
    runtime.engine.advance_to(coll.finished)
    return coll


def _admissions(chunks: int, phases: int) -> list[tuple[int, int]]:
    """(chunk, phase) in the order one NPU admits them on the dimension (one at a time, waiting
    ones by order of arrival): the queue of :class:`CollectiveRuntime`, without time."""
    waiting: deque[tuple[int, int]] = deque((c, 0) for c in range(1, chunks))
    order = [(0, 0)]
    current = (0, 0)
    while True:
        chunk, phase = current
        follow = (chunk, phase + 1) if phase + 1 < phases else None
        if waiting:
            current = waiting.popleft()
            if follow is not None:
                waiting.append(follow)
        elif follow is not None:
            current = follow
        else:
            return order
        order.append(current)


def _from(ingress: np.ndarray, step: Step) -> np.ndarray:
    """For each sender, the ingress capacity of the rank its one message goes to."""
    if step.pattern == "next":
        out: np.ndarray = np.roll(ingress, -1)
        return out
    picked: np.ndarray = ingress[np.arange(len(ingress)) ^ step.distance]
    return picked


def _rates(egress: np.ndarray, ingress: np.ndarray, weight: float, k: int) -> np.ndarray:
    """The rate (B/s) of each of a rank's ``k`` equal messages, each demanding one unit per byte
    of its egress and of its receiver's ingress (``ingress``: per sender, that receiver's
    capacity; every receiver gets ``k`` messages), as the fluid allocator computes it when
    every message is frozen at its own fill level (inf on infinite capacities)."""
    finite_e, finite_i = np.isfinite(egress), np.isfinite(ingress)
    frac_e = np.where(finite_e, 1.0 / np.where(finite_e, egress, 1.0), 0.0)
    frac_i = np.where(finite_i, 1.0 / np.where(finite_i, ingress, 1.0), 0.0)
    dominant = np.maximum(frac_e, frac_i)
    safe = np.where(dominant <= 1e-300, 1.0, dominant)
    share = np.where(dominant <= 1e-300, weight, weight / safe)
    load = np.zeros_like(egress)
    for _ in range(k):
        load = load + share * 1.0
    level_e = np.where(finite_e, egress / load, math.inf)
    level_i = np.where(finite_i, ingress / load, math.inf)
    return np.where(finite_e | finite_i, share * np.minimum(level_e, level_i), math.inf)


def _max_of_others(values: np.ndarray) -> np.ndarray:
    """For each rank, the largest value of every other rank."""
    top = int(np.argmax(values))
    rest = values.copy()
    rest[top] = -math.inf
    out = np.full(values.shape, values[top])
    out[top] = rest.max()
    return out


def add_repeatedly(total: float, value: float, count: int) -> float:
    """``total`` plus ``value``, ``count`` times, one float addition at a time (rounding after
    each), without doing them all: inside one binade every addition of a non-negative
    ``value`` rounds to the same increment (a multiple of the binade's unit), unless ``value``
    lies halfway between two multiples (then they are done one by one, in blocks)."""
    if not (value >= 0) or not math.isfinite(value) or not math.isfinite(total) or total < 0:
        return _accumulate(total, value, count)
    while count > 0:
        if value == 0.0:
            return total + 0.0 if count else total
        unit = math.ulp(total) if total > 0 else 0.0
        if unit == 0.0 or (value / unit) % 1.0 == 0.5:
            total += value
            count -= 1
            continue
        step = (total + value) - total  # the increment of every addition in this binade
        if step == 0.0:
            return total  # value is below half a unit: nothing more changes
        upper = 2.0 ** math.frexp(total)[1]  # the binade is [upper / 2, upper)
        # additions whose exact sum stays a unit below the binade's end round alike
        room = upper - unit - total - value
        jumps = min(count, int(room // step)) if room > 0 else 0
        if jumps <= 0:
            total += value
            count -= 1
            continue
        total += jumps * step
        count -= jumps
    return total


def _accumulate(total: float, value: float, count: int) -> float:
    """``total`` plus ``value``, ``count`` times, by numpy's sequential accumulate."""
    while count > 0:
        block = min(count, _BLOCK)
        terms = np.full(block + 1, value)
        terms[0] = total
        total = float(np.add.accumulate(terms)[-1])
        count -= block
    return total
