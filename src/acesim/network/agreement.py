"""Exact mode: the NPUs of a group admit chunk phases on a dimension in one agreed order.

Each NPU runs at most ``active_chunks_per_dimension`` chunk phases on a dimension at once and
picks the next waiting one by priority, FIFO/LIFO and arrival (:mod:`acesim.network.collective`).
In symmetric mode, and in exact mode while every NPU runs the same traffic at the same times,
every member of a group picks the same phase. Once NPUs differ (a straggler, a slow link, ranks
whose programs differ), two members could pick different phases, each then waiting for the
other's messages of the phase it did not pick: a deadlock the real system does not have (NCCL
runs the kernels of a communicator in the order every rank launched them).

So in exact mode the NPUs keep agreed admission orders: the first NPU to admit a chunk phase
in an order appends it; every other NPU admits that order's phases in that order, keeping a
slot idle until its next one has reached it.

* Every phase keeps the order of its group line (the NPUs that exchange its messages), whatever
  its collective: phases of a collective only some ranks join (``Collective.members``: per-rank
  graphs, or one graph's instance on a group smaller than the platform) and of one every rank
  joins are admitted by a line's members in one order. Separate orders for the two left a
  member free to admit one kind while its peer admitted the other: each then held its slot
  waiting for the other's messages of the phase it did not pick.
* Phases of collectives every rank joins also share one order per dimension and group axis,
  across all group lines: lines that agreed only among themselves could still wait on each
  other in a cycle through the other dimensions. Those of collectives only some ranks join stay
  out of it: a rank then never waits for a collective its program reaches only after the one it
  is in, nor for another group's instance.

While the NPUs run identically each order is exactly the order every NPU would have picked, so
results do not change.

A new entry is decided once the run has passed every event of its instant
(:meth:`~acesim.engine.Engine.schedule_last`): every phase that reaches an NPU at that instant
is then waiting there. Where several NPUs are ready to decide the next entry of an order at
one instant (a slot free and a phase waiting), the lowest-numbered decides, and the others
follow its pick. Ties at one instant are common once NPUs differ (a straggler's delay reaches
the members of a dimension's lines at once, with different phases arrived at each), and the
order in which the engine happens to run the events of one instant is no part of the model
(before stop 59 it decided them). The lockstep backend
(:mod:`acesim.network.agreed_lockstep`) decides by the same rule.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typed for the compiled build (runs' attributes read natively)
    from .collective import CollectiveRuntime, _ChunkRun

__all__ = ["Line", "LineOrders"]

#: a dimension queue's waiting entry: (priority key, arrival, run)
Waiting = tuple[tuple[int, int], int, "_ChunkRun"]


class Line:
    """The agreed admission order of one group line on one dimension."""

    __slots__ = ("order", "start", "cursor", "ranks")

    def __init__(self, ranks: int):
        #: (collective id, chunk, phase index, the collective's members or None for all)
        self.order: list[tuple[int, int, int, frozenset[int] | None]] = []
        self.start = 0  # absolute index of order[0] (consumed entries are dropped)
        self.cursor: dict[int, int] = {}  # rank -> absolute index of its next entry
        self.ranks = ranks

    def _next(self, rank: int) -> int:
        """The rank's next entry (absolute index), past those of collectives it is not in."""
        at = self.cursor.get(rank, 0)
        order = self.order
        while at - self.start < len(order):
            members = order[at - self.start][3]
            if members is None or rank in members:
                break
            at += 1
        self.cursor[rank] = at
        return at

    def admitted(
        self, rank: int, item: tuple[int, int, int], members: frozenset[int] | None
    ) -> None:
        at = self._next(rank)
        if at - self.start >= len(self.order):
            self.order.append((*item, members))
        self.cursor[rank] = at + 1
        if len(self.order) > 2 * self.ranks + 16 and len(self.cursor) == self.ranks:
            low = min(self.cursor.values())
            if low > self.start:
                del self.order[: low - self.start]
                self.start = low


class LineOrders:
    """The agreed orders of one runtime (see the module docstring)."""

    def __init__(self, runtime: CollectiveRuntime):
        self.runtime = runtime
        self.lines_by_key: dict[tuple[int, int, int, int], Line] = {}
        self._bases: dict[tuple[int, int, int, int], int] = {}
        #: (rank, dimension) ready to decide a new entry at this instant, decided after its
        #: every event (:meth:`_decide`); deciding now
        self._pending: set[tuple[int, int]] = set()
        self._deciding = False

    def lines(self, run: _ChunkRun) -> tuple[Line, ...]:
        """The orders ``run``'s current phase is admitted in (see the module docstring): its
        group line's, and for a collective every rank joins the dimension's across all lines
        too. Kept on the run for its phase (``agreed_phase``, ``agreed_lines``): a line, once
        made, is the line of its key for the whole run."""
        if run.agreed_phase == run.phase:
            lines: tuple[Line, ...] = run.agreed_lines
            return lines
        lines = self._lines_of(run)
        run.agreed_phase = run.phase
        run.agreed_lines = lines
        return lines

    def _lines_of(self, run: _ChunkRun) -> tuple[Line, ...]:
        phase = run.coll.phases[run.phase]
        dim, size, stride = phase.dim, phase.size, phase.stride
        base = self._bases.get((run.rank, dim, size, stride))
        if base is None:
            topo = self.runtime.topology
            own = topo.coordinate(run.rank, dim)
            first = own - ((own // stride) % size) * stride  # the member at position 0
            base = self._bases[(run.rank, dim, size, stride)] = topo.peer(run.rank, dim, first)
        own_line = self._line((dim, size, stride, base), size)
        members = run.coll.members
        ranks = len(self.runtime.ranks)
        if members is not None and len(members) != ranks:
            return (own_line,)
        return (self._line((dim, size, stride, -1), ranks), own_line)

    def _line(self, key: tuple[int, int, int, int], ranks: int) -> Line:
        line = self.lines_by_key.get(key)
        if line is None:
            line = self.lines_by_key[key] = Line(ranks)
        return line

    def fill(self, rank: int, dim: int) -> None:
        """Admit waiting chunk phases at ``rank`` on ``dim`` while slots are free and the
        lines' orders allow, best (priority, FIFO/LIFO, arrival) first."""
        rt = self.runtime
        queue = rt._queues[rank][dim]
        limit = rt.config.active_chunks_per_dimension
        while queue.active < limit and queue.waiting:
            waiting = queue.waiting
            blocked = self._blocked(waiting[0][2])
            if blocked is None:
                if not self._deciding and self._decides(waiting[0][2]):
                    self._defer(rank, dim)
                    return
                chosen = heapq.heappop(waiting)
            else:
                found = self._wanted(waiting, *blocked)
                if found is None:
                    return  # the next agreed phases have not reached this rank yet
                if not self._deciding and self._decides(found[2]):
                    self._defer(rank, dim)
                    return
                chosen = found
                waiting.remove(chosen)
                heapq.heapify(waiting)
            run = chosen[2]
            item = (run.coll.id, run.chunk, run.phase)
            for line in self.lines(run):
                line.admitted(run.rank, item, run.coll.members)
            queue.active += 1
            run.step = 0
            rt._phase_started(run)
            rt._start_step(run)

    def _decides(self, run: _ChunkRun) -> bool:
        """Whether admitting ``run``'s phase now is its rank's own choice: its rank is at the
        end of every order the phase is admitted in (it appends, none holding an entry for it
        next)."""
        rank = run.rank
        for line in self.lines(run):
            if line._next(rank) - line.start < len(line.order):
                return False
        return True

    def _defer(self, rank: int, dim: int) -> None:
        """``rank`` is ready to decide a new entry on ``dim``: decided after every event of
        this instant."""
        if not self._pending:
            engine = self.runtime.engine
            engine.schedule_last(engine.now, self._decide)
        self._pending.add((rank, dim))

    def _decide(self) -> None:
        """The ranks ready to decide at this instant, lowest first: the first to append an
        entry to an order decides it, the others follow it (module docstring)."""
        pending = sorted(self._pending)
        self._pending = set()
        self._deciding = True
        try:
            for rank, dim in pending:
                self.fill(rank, dim)
        finally:
            self._deciding = False

    def _blocked(self, run: _ChunkRun) -> tuple[Line, tuple[int, int, int]] | None:
        """The first of ``run``'s lines whose order holds another phase next for its rank,
        with that phase's item (collective id, chunk, phase index); None: the run's phase
        may be admitted now (every line's next entry is it, or the rank is ahead and
        decides)."""
        item = (run.coll.id, run.chunk, run.phase)
        rank = run.rank
        for line in self.lines(run):
            index = line._next(rank) - line.start
            if index < len(line.order):
                wanted = line.order[index][:3]
                if wanted != item:
                    return line, wanted
        return None

    def _wanted(
        self, waiting: list[Waiting], line: Line, wanted: tuple[int, int, int]
    ) -> Waiting | None:
        """The best admissible entry of ``waiting`` (a queue whose best entry ``line`` holds
        back for ``wanted``). Where every entry is admitted in ``line``'s order, only
        ``wanted``'s entry can be (a run is one entry): it alone is checked, not the whole
        queue in order."""
        candidate = None
        for entry in waiting:
            run = entry[2]
            if line not in self.lines(run):
                return self._first_admissible(waiting)
            if (run.coll.id, run.chunk, run.phase) == wanted:
                candidate = entry
        if candidate is not None and self._blocked(candidate[2]) is None:
            return candidate
        return None

    def _first_admissible(self, waiting: list[Waiting]) -> Waiting | None:
        """The best entry of ``waiting`` whose every line allows it now (None: none does)."""
        for entry in sorted(waiting)[1:]:
            if self._blocked(entry[2]) is None:
                return entry
        return None
