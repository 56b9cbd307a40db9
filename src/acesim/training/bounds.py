"""What bound a run: the resource behind every second of the measured iteration.

The engine tells a :class:`BoundRecorder` what bound each tracked activity of NPU 0 (its
compute kernels and the messages it sends), segment by segment: the resource that saturated
first when rates were allocated (HBM, a link, comm-unit throughput, an engine's DMA or ALU),
or the activity's own cap (a kernel's compute units). :func:`attribute` turns the segments into
a breakdown of the window:

* while a kernel runs: ``compute: compute units`` (at its roofline's compute side, or slowed by
  units held by communication), ``compute: HBM`` (memory-bound, or HBM shared with
  communication), ...;
* while the compute stream is idle (exposed communication): ``exposed: <what bound the
  messages in flight>`` (a time with several messages in flight is shared by what bound
  each, in proportion), and ``exposed: latency and waiting`` when no message is in flight
  (link latency, step synchronisation, SRAM admission, dependencies).

The labels of a run sum to its iteration time; the largest is what bound the run.
:func:`collective_bounds` gives, for one collective alone, the time each label kept at least
one of its messages, DMA transfers or SRAM waits busy (they overlap: the busiest stage of the
pipeline is its bottleneck).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from ..engine import CAP, Resource
from ..intervals import (
    Batch,
    Times,
    batch_arrays,
    floats,
    union,
    union_arrays,
    union_length,
)
from ..sums import Ladder

__all__ = [
    "Attribution",
    "BoundRecorder",
    "Segment",
    "Segments",
    "attribute",
    "attribution",
    "collective_bounds",
    "WAITING",
]

WAITING = "exposed: latency and waiting"
_EGRESS = re.compile(r"^npu\d+\.(?P<dim>.+)\.egress$")
#: the path to a NIC beyond its links (network dimensions that state it)
_PATH = re.compile(r"^npu\d+\.(?P<dim>.+)\.(?P<what>nic_proxy|pcie_send|pcie_receive)$")
_PATH_NAMES = {
    "nic_proxy": "NIC proxy",
    "pcie_send": "PCIe switch (to the NIC)",
    "pcie_receive": "PCIe switch (from the NIC)",
}
_NAMES = {
    "hbm": "HBM",
    "hbm.comm": "HBM",
    "comm_units.bytes": "comm-unit throughput",
    "comm_units.flops": "comm-unit reductions",
    "comm_units.hbm": "comm-unit HBM issue",
    "copy_engines": "copy engines",
    "copy_engine.fallback.bytes": "SM fallback throughput",
    "copy_engine.fallback.hbm": "SM fallback HBM issue",
    "copy_engine.fallback.flops": "SM fallback reductions",
    "ace.dma": "ACE DMA",
    "ace.alu": "ACE ALU",
    "host_link.d2h": "GPU PCIe link (device to host)",
    "host_link.h2d": "GPU PCIe link (host to device)",
}


def label(bound: Any, kind: str) -> str:
    """A readable name of what bound an activity."""
    if bound is None:
        return "nothing (instant)"
    if bound == CAP:
        return "compute units" if kind == "kernel" else "rate cap"
    if isinstance(bound, Resource):
        match = _EGRESS.match(bound.name)
        if match:
            return f"link {match['dim']}"
        path = _PATH.match(bound.name)
        if path:
            return f"{_PATH_NAMES[path['what']]} {path['dim']}"
        short = bound.name.split(".", 1)[1] if "." in bound.name else bound.name
        return _NAMES.get(short, short)
    return str(bound)


Segment = tuple[str, float, float]


class Segments(MutableSequence[Segment]):
    """Segments ``(label, start s, end s)`` kept as three columns (labels, starts, ends), read
    as the tuples they stand for (iteration, indexing, slices, ``len``, ``==``): a run records
    tens of thousands, and as tuples each was a container the cyclic collector walked when the
    run's garbage was collected (most of it, on the ACE reproduction's runs)."""

    __slots__ = ("names", "starts", "ends")

    def __init__(self, items: Iterable[Segment] = ()) -> None:
        self.names: list[str] = []
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.extend(items)

    def add(self, name: str, start: float, end: float) -> None:
        """Add the segment ``(name, start, end)`` (s)."""
        self.names.append(name)
        self.starts.append(start)
        self.ends.append(end)

    def extend(self, values: Iterable[Segment]) -> None:
        """Add each segment of ``values``, in order."""
        for name, start, end in values:
            self.names.append(name)
            self.starts.append(start)
            self.ends.append(end)

    def __iadd__(self, values: Iterable[Segment]) -> Segments:
        self.extend(values)
        return self

    def insert(self, index: int, value: Segment) -> None:
        name, start, end = value
        self.names.insert(index, name)
        self.starts.insert(index, start)
        self.ends.insert(index, end)

    @overload
    def __setitem__(self, index: int, value: Segment) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Segment]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):
            items = list(value)
            self.names[index] = [name for name, _s, _e in items]
            self.starts[index] = [start for _n, start, _e in items]
            self.ends[index] = [end for _n, _s, end in items]
            return
        self.names[index], self.starts[index], self.ends[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self.names[index]
        del self.starts[index]
        del self.ends[index]

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[Segment]:
        return zip(self.names, self.starts, self.ends, strict=True)

    @overload
    def __getitem__(self, index: int) -> Segment: ...

    @overload
    def __getitem__(self, index: slice) -> list[Segment]: ...

    def __getitem__(self, index: int | slice) -> Segment | list[Segment]:
        if isinstance(index, slice):
            columns = (self.names[index], self.starts[index], self.ends[index])
            return list(zip(*columns, strict=True))
        return (self.names[index], self.starts[index], self.ends[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Segments):
            return (self.names, self.starts, self.ends) == (other.names, other.starts, other.ends)
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"Segments({list(self)!r})"

    def ended_after(self, time: float) -> Segments:
        """The segments that end after ``time`` (s), in order."""
        out = Segments()
        for name, start, end in self:
            if end > time:
                out.add(name, start, end)
        return out


class BoundRecorder:
    """The engine's :class:`~acesim.engine.BoundListener` for one NPU: the segments of its
    kernels and messages as (label, start s, end s) (:class:`Segments`)."""

    def __init__(self) -> None:
        self.kernels = Segments()
        self.messages = Segments()
        #: batches of many message spans heard at once (:meth:`spans`, :meth:`ladders`: a
        #: fold's steps), kept as arrays or ladders: (their place in :attr:`messages`, label,
        #: the batch), the spans that took no time included (:meth:`message_segments` leaves
        #: them out)
        self.message_runs: list[tuple[int, str, Batch]] = []
        #: kernel segments added in batches after :attr:`kernels` (a composed run's timed
        #: passes, :meth:`~acesim.training.compose.PassTimes.complete`), each as its labels
        #: (in order of first appearance), every segment's label's index there, its starts
        #: and its ends (arrays, s): in order, after the segments of :attr:`kernels`
        self.kernel_runs: list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = []
        self._labels: dict[tuple[int, str], str] = {}
        #: the message labels heard before :meth:`forget_before` dropped segments, in the
        #: order first heard (they keep their place in :meth:`message_labels`)
        self._heard: list[str] = []

    def forget_before(self, time: float) -> None:
        """Drop the kernel and message segments that ended at or before ``time`` (s), and the
        message batches all of whose spans did: a measurement whose window starts at ``time``
        or later reads none of them (every sum over a window clips to it: they add nothing),
        and a run that will be measured so holds half the segments (a warm-up's) no longer.
        The labels keep their order (:meth:`message_labels`). Composed passes' kernel
        batches (:attr:`kernel_runs`) are kept."""
        self._heard = self.message_labels()
        self.kernels = self.kernels.ended_after(time)
        messages = Segments()
        runs: list[tuple[int, str, Batch]] = []
        at = 0
        for index, name, batch in self.message_runs:
            messages.extend(seg for seg in self.messages[at:index] if seg[2] > time)
            at = index
            ends = batch_arrays(batch)[1]
            if len(ends) and ends.max() > time:
                runs.append((len(messages), name, batch))
        messages.extend(seg for seg in self.messages[at:] if seg[2] > time)
        self.messages = messages
        self.message_runs = runs

    def opened(self, kind: str, time: float) -> None:
        """An activity began (nothing to record until its first segment ends)."""

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None:
        key = (id(bound), kind)
        name = self._labels.get(key)
        if name is None:
            # Resources live as long as the run, so their ids are stable keys.
            name = self._labels[key] = label(bound, kind)
        out = self.kernels if kind == "kernel" else self.messages
        out.names.append(name)
        out.starts.append(start)
        out.ends.append(end)

    def closed(self, kind: str, time: float) -> None:
        """An activity ended (its last segment was recorded just before)."""

    def spans(self, kind: str, bound: Any, starts: Times, ends: Times) -> None:
        """One activity per ``(starts[i], ends[i])`` (s), each one segment bound by ``bound``:
        what opened, :meth:`segment` (when it took time) and closed record for each."""
        key = (id(bound), kind)
        name = self._labels.get(key)
        if name is None:
            name = self._labels[key] = label(bound, kind)
        if kind != "kernel" and len(starts) > _BATCH:
            begin, finish = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
            self.message_runs.append((len(self.messages), name, (begin, finish)))
            return
        out = self.kernels if kind == "kernel" else self.messages
        pairs = zip(floats(starts), floats(ends), strict=True)
        out.extend((name, s, e) for s, e in pairs if e > s)

    def message_segments(self) -> Sequence[Segment]:
        """Every message segment (label, start s, end s) in the order heard: :attr:`messages`
        with the batches of :attr:`message_runs` in their places (those that took time)."""
        if not self.message_runs:
            return self.messages
        out: list[Segment] = []
        at = 0
        for index, name, batch in self.message_runs:
            out.extend(self.messages[at:index])
            at = index
            starts, ends = batch_arrays(batch)
            keep = ends > starts
            pairs = zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)
            out.extend((name, s, e) for s, e in pairs)
        out.extend(self.messages[at:])
        return out

    def message_columns(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """:meth:`message_segments` as columns: every segment's label, and its start and end
        (s) as arrays, the batches' spans read from their arrays (no tuple made)."""
        messages = self.messages
        if not self.message_runs:
            starts = np.array(messages.starts, dtype=float)
            return messages.names, starts, np.array(messages.ends, dtype=float)
        names: list[str] = []
        begin: list[np.ndarray] = []
        finish: list[np.ndarray] = []
        at = 0
        for index, name, batch in self.message_runs:
            names.extend(messages.names[at:index])
            begin.append(np.array(messages.starts[at:index], dtype=float))
            finish.append(np.array(messages.ends[at:index], dtype=float))
            at = index
            starts, ends = batch_arrays(batch)
            keep = ends > starts
            kept = int(np.count_nonzero(keep))
            names.extend([name] * kept)
            begin.append(np.asarray(starts, dtype=float)[keep])
            finish.append(np.asarray(ends, dtype=float)[keep])
        names.extend(messages.names[at:])
        begin.append(np.array(messages.starts[at:], dtype=float))
        finish.append(np.array(messages.ends[at:], dtype=float))
        return names, np.concatenate(begin), np.concatenate(finish)

    def message_labels(self) -> list[str]:
        """The labels of the message segments, in the order each was first heard (those
        heard before :meth:`forget_before` first, whether or not a segment is left)."""
        names = self.messages.names  # each label's first place, found from the few labels
        first = {name: (names.index(name), 1) for name in dict.fromkeys(names)}
        for index, name, batch in self.message_runs:
            if _took_time(batch) and (index, 0) < first.get(name, (index + 1, 0)):
                first[name] = (index, 0)  # a batch goes before the message at its index
        heard = sorted(first, key=first.__getitem__)
        if not self._heard:
            return heard
        earlier = set(self._heard)
        return self._heard + [name for name in heard if name not in earlier]

    def ladders(self, kind: str, bound: Any, ladders: Sequence[Ladder]) -> None:
        """One activity per span of ``ladders`` (:class:`~acesim.sums.Ladder`: spans one after
        another in arithmetic progression), each one segment bound by ``bound``: what
        :meth:`spans` records for their starts and ends; a message's kept as ladders."""
        if kind == "kernel":
            for ladder in ladders:
                self.spans(kind, bound, ladder.starts(), ladder.ends())
            return
        key = (id(bound), kind)
        name = self._labels.get(key)
        if name is None:
            name = self._labels[key] = label(bound, kind)
        self.message_runs.extend((len(self.messages), name, ladder) for ladder in ladders)

    def repeated(self, kind: str, bound: Any, start: float, end: float, count: int) -> None:
        """``count`` activities of one segment each, all ``(start, end)`` bound by ``bound``:
        what ``count`` times opened, :meth:`segment` and closed records."""
        self.segment(kind, bound, start, end)
        if count > 1:
            out = self.kernels if kind == "kernel" else self.messages
            out.extend([out[-1]] * (count - 1))


#: :meth:`BoundRecorder.spans` keeps batches of more message spans than this as arrays
_BATCH = 64


def _took_time(batch: Batch) -> bool:
    """Whether any span of ``batch`` took time (ended after it started)."""
    if isinstance(batch, tuple):
        return bool((batch[1] > batch[0]).any())
    return batch.end > batch.start


def _overlap(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    """Length of [start, end) inside the sorted disjoint ``spans``."""
    total = 0.0
    i = max(bisect.bisect_right(spans, (start, float("inf"))) - 1, 0)
    while i < len(spans) and spans[i][0] < end:
        lo, hi = max(start, spans[i][0]), min(end, spans[i][1])
        if hi > lo:
            total += hi - lo
        i += 1
    return total


def _overlaps(
    intervals: Sequence[tuple[Any, float, float]], spans: list[tuple[float, float]]
) -> list[float]:
    """:func:`_overlap` of each ``(_, start, end)`` of ``intervals`` with ``spans``, with
    numpy over the intervals (the same float operations, in the same order)."""
    if not intervals or not spans:
        return [0.0] * len(intervals)
    starts = np.array([s for _n, s, _e in intervals], dtype=float)
    ends = np.array([e for _n, _s, e in intervals], dtype=float)
    return _overlaps_arrays(starts, ends, spans)


def _overlaps_arrays(
    starts: np.ndarray, ends: np.ndarray, spans: list[tuple[float, float]]
) -> list[float]:
    """:func:`_overlaps` of the intervals ``starts[i]``..``ends[i]`` (s, arrays)."""
    if not len(starts) or not spans:
        return [0.0] * len(starts)
    lo = np.array([s for s, _e in spans], dtype=float)
    hi = np.array([e for _s, e in spans], dtype=float)
    last = len(spans) - 1
    index = np.maximum(np.searchsorted(lo, starts, side="right") - 1, 0)
    total = np.zeros(len(starts))
    active = np.ones(len(starts), dtype=bool)
    while True:
        at = np.minimum(index, last)
        active &= (index <= last) & (lo[at] < ends)
        if not active.any():
            break
        low = np.maximum(starts, lo[at])
        high = np.minimum(ends, hi[at])
        total = np.where(active & (high > low), total + (high - low), total)
        index += 1
    out: list[float] = total.tolist()
    return out


@dataclass
class Attribution:
    """What :func:`attribute` adds up before it splits the exposed time with messages in
    flight among their labels (s): each label's kernel time (``compute: ...``, ``compute:
    other`` included), the exposed time, the part of it with a message in flight, and each
    message label's time in it (the split's weights); ``span``: the window's length. Every
    one is a sum over the window's segments (:mod:`.steady` extrapolates them); the split is
    a ratio of them (:meth:`seconds`)."""

    computes: dict[str, float]
    exposed: float
    with_messages: float
    weights: dict[str, float]
    span: float

    def seconds(self) -> dict[str, float]:
        """Seconds of the window by what bound them (:func:`attribute`)."""
        out = dict(self.computes)
        total_weight = sum(self.weights.values())
        for name, weight in self.weights.items():
            key = f"exposed: {name}"
            out[key] = out.get(key, 0.0) + self.with_messages * weight / total_weight
        waiting = self.exposed - self.with_messages
        if waiting > 1e-15 * max(self.span, 1.0):
            out[WAITING] = waiting
        return out


def attribute(
    recorder: BoundRecorder,
    busy: list[tuple[float, float]],
    lo: float,
    hi: float,
) -> dict[str, float]:
    """Seconds of the window [lo, hi) by what bound them (see module docstring); ``busy`` are
    the compute kernels' (start, end) intervals of the NPU."""
    return attribution(recorder, busy, lo, hi).seconds()


def attribution(
    recorder: BoundRecorder,
    busy: list[tuple[float, float]],
    lo: float,
    hi: float,
) -> Attribution:
    """The sums :func:`attribute` splits (:class:`Attribution`), of the window [lo, hi) (s);
    ``busy``: the NPU's compute kernels' (start, end) intervals (s)."""
    running = [(max(s, lo), min(e, hi)) for s, e in union(busy) if e > lo and s < hi]
    by_name: dict[str, float] = {}  # each label's kernel time, labels in order heard
    get = by_name.get
    for name, start, end in recorder.kernels:
        # _overlap(start, end, [(lo, hi)]), written out: the same float
        if lo < end:
            first = start if start > lo else lo  # max(start, lo): the same float
            last = end if end < hi else hi  # min(end, hi)
            if last > first:
                by_name[name] = get(name, 0.0) + (last - first)
    for batch in recorder.kernel_runs:
        _add_kernel_run(by_name, batch, lo, hi)
    out = {f"compute: {name}": seconds for name, seconds in by_name.items()}
    covered = sum(out.values())
    idle: list[tuple[float, float]] = []
    cursor = lo
    for start, end in running:
        if start > cursor:
            idle.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < hi:
        idle.append((cursor, hi))
    exposed = sum(e - s for s, e in idle)
    # Kernel time the segments did not cover (kernels that took no time to allocate): compute.
    busy_total = (hi - lo) - exposed
    if busy_total - covered > 1e-15 * max(hi - lo, 1.0):
        out["compute: other"] = out.get("compute: other", 0.0) + (busy_total - covered)
    weights: dict[str, float] = {}
    names, starts, ends = recorder.message_columns()
    with_messages, insides = _in_idle(names, starts, ends, idle)
    for name, inside in zip(names, insides, strict=True):
        if inside > 0:
            weights[name] = weights.get(name, 0.0) + inside
    return Attribution(out, exposed, with_messages, weights, hi - lo)


def _in_idle(
    names: list[str], starts: np.ndarray, ends: np.ndarray, idle: list[tuple[float, float]]
) -> tuple[float, list[float]]:
    """(time in ``idle`` with a message in flight, each message's time in ``idle``), s:
    :func:`_overlaps` of the union of the messages (``names``, ``starts``, ``ends``: columns,
    s) and of each; many messages on their arrays (:func:`~acesim.intervals.union_arrays`:
    the same union, pairs)."""
    if len(names) <= _MANY_MESSAGES:
        begin, finish = starts.tolist(), ends.tolist()
        in_flight = union(list(zip(begin, finish, strict=True)))
        with_messages = sum(_overlaps([(None, s, e) for s, e in in_flight], idle))
        messages = list(zip(names, begin, finish, strict=True))
        return with_messages, _overlaps(messages, idle)
    flight_starts, flight_ends = union_arrays(starts, ends)
    with_messages = sum(_overlaps_arrays(flight_starts, flight_ends, idle))
    return with_messages, _overlaps_arrays(starts, ends, idle)


#: above this many message segments :func:`_in_idle` reads them into arrays (where
#: :func:`~acesim.intervals.union` would: above its few hundred)
_MANY_MESSAGES = 256


def _add_kernel_run(
    by_name: dict[str, float],
    batch: tuple[list[str], np.ndarray, np.ndarray, np.ndarray],
    lo: float,
    hi: float,
) -> None:
    """What :func:`attribute`'s loop over kernel segments adds to ``by_name`` for those of
    ``batch`` (:attr:`BoundRecorder.kernel_runs`), with numpy: each segment clipped to [lo,
    hi), each label's lengths added one after another in order (a sequential cumulative
    sum: the same floats), new labels in order of their first segment that took time."""
    labels, codes, starts, ends = batch
    first = np.maximum(starts, lo)
    last = np.minimum(ends, hi)
    took = (lo < ends) & (last > first)
    lengths = last - first
    kept = codes[took]
    if not len(kept):
        return
    found, first_at = np.unique(kept, return_index=True)
    for code in found[np.argsort(first_at, kind="stable")].tolist():
        name = labels[code]
        run = lengths[took & (codes == code)]
        by_name[name] = float(np.cumsum(np.concatenate(([by_name.get(name, 0.0)], run)))[-1])


def collective_bounds(
    recorder: BoundRecorder, lo: float, hi: float, *, waiting: bool = True
) -> dict[str, float]:
    """Busy seconds of a collective's window [lo, hi) by what bound its activities: for every
    label (``link <dim>``, ``HBM``, ``ACE DMA``, ``ACE SRAM (...)``, ``copy engines``, ...),
    the time at least one of NPU 0's messages, DMA transfers or SRAM waits had it as its
    bound, and (``waiting``) ``latency and waiting`` for the time none was, largest first
    (a training run leaves it out: there, time without communication is compute). Unlike
    :func:`attribute` the labels overlap (a pipeline keeps several stages busy at once): the
    stage busy longest is its bottleneck."""
    spans: dict[str, list[tuple[float, float]]] = {name: [] for name in recorder.message_labels()}
    for name, start, end in recorder.messages:
        spans[name].append((start, end))  # clipped to [lo, hi) by union
    batches: dict[str, list[Batch]] = {}
    for _at, name, batch in recorder.message_runs:
        batches.setdefault(name, []).append(batch)
    # batches of spans (a fold's steps) stay arrays: the same unions, summed the same way
    out = {name: union_length(v, batches.get(name, []), lo, hi) for name, v in spans.items()}
    if waiting:  # time nothing was in flight: latency, step synchronisation, setup delays
        every = [x for v in spans.values() for x in v]
        busy = union_length(every, [b for v in batches.values() for b in v], lo, hi)
        idle = (hi - lo) - busy
        if idle > 1e-15 * max(hi - lo, 1.0):
            out[WAITING.removeprefix("exposed: ")] = idle
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))
