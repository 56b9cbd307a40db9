"""The ``ace`` endpoint kind: the Accelerator Collectives Engine (Rashidi et al., ISCA 2021).

``ace``
    An engine with SRAM, ALUs and DMA beside the network interface. A chunk entering a
    collective is read from HBM once by DMA into SRAM (its input bytes), every phase runs out of
    SRAM, the result is written once (its output bytes). Reduce steps use the ALU at one byte of
    ALU throughput per network byte. ACE holds no compute unit. The ALU is an engine meter
    (:meth:`acesim.engine.Engine.add_resource`): every reduce message also takes its link at
    a weight of at least one byte per byte, so at the shipped rates the ALU's load stays below
    the rank's links' and it binds nothing; it is kept out of the allocation while that
    holds, and becomes an ordinary resource where a smaller ``alu_bandwidth`` lets it bind.
    Two ways to use the SRAM (``mode``):

``mode = "streaming"`` (default)
    The SRAM is partitioned among the phases a collective can be in at once: one partition of
    ``sram / K`` per phase position, ``K`` the most phases a collective has on the system's
    network (a hierarchical all-reduce on ``D`` dimensions: ``2D - 1``; per-dimension
    composition: ``D``). Chunks are split into pieces of ``sram / (K * buffers_per_phase)``,
    so that every partition holds ``buffers_per_phase`` pieces (2: double buffering, one piece
    in the network while the next is delivered). A piece holds, in the partition of the phase
    it is in, that phase's live bytes (``Phase.data_bytes``: it shrinks through the
    reduce-scatters of a hierarchical all-reduce and grows back through its all-gathers). It
    enters phase ``k`` only once partition ``k`` has room (FIFO), and only then frees partition
    ``k - 1`` (back-pressure: a piece that cannot move on keeps its buffer); DMA reads fill
    partition 0, DMA writes drain the last. So DMA reads, network phases and DMA writes of
    successive pieces overlap, every dimension can have a piece in flight, and the SRAM binds
    only when a partition is full. The DMA serves reads in order, one at a time (a descriptor
    queue), and writes likewise, so the first piece is not slowed by the ones behind it.

``mode = "store_and_forward"``
    A chunk (or piece) holds its whole footprint in SRAM from its DMA read to the end of its
    DMA write, through every phase. SRAM bounds the chunks in flight: a chunk waits (FIFO)
    until its footprint fits. With ``split_chunks`` ACE splits every chunk into pieces of at
    most half its SRAM (one piece streams in while another is in the network); with splitting
    off, a chunk larger than the whole SRAM is, if spilling is allowed, staged through HBM:
    the fraction ``1 - sram/chunk`` of its network bytes pays ``spill_hbm_bytes_per_byte`` of
    extra HBM traffic (written out and read back); otherwise it is a configuration error.
    This was acesim's only ACE before issue 13; on a multi-dimensional network it keeps at
    most two pieces in a pipeline of ``2D + 1`` stages (DMA in, the phases, DMA out).

Why streaming is the default: the paper's ACE has its DMA engines, its ALUs and the network
interface as separate units beside one SRAM, run by a control unit that moves chunks through
the phases of the collective (paper.md section 4); units that are separate run at the same time
unless something serialises them, and nothing in the mechanism does (a store-and-forward engine
would leave its DMA idle while its pieces are in the network, and the network idle while they
are read). The full paper (not in paper.md, which holds the abstract and figure 1) describes
the SRAM as split into partitions per phase with chunks pipelined through them, from our
recollection; the partition count, equal partition sizes and double buffering are
assumptions (equal: the simplest split; a piece's live bytes never exceed the piece).

What bound communication ("what bound a run", and a collective's ``bound_by``): DMA transfers
are tracked like messages (``ACE DMA``, or the HBM behind it). Store and forward records the
time each chunk waits for SRAM space as :data:`SRAM_WAIT`; streaming records, once per
interval, the time a piece is held back by a full partition after its DMA read (back-pressure;
pieces queued for the read partition are the collective's work queue, as pieces queued for a
dimension are, and are not recorded).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial

from ...config.system import SystemConfig
from ...engine import Resource
from ...errors import ConfigError, SimulationError
from ...network.algorithms import REDUCE
from ...network.endpoint import ACE_ALU, ACE_DMA, SM_FREE_STEP_KINDS, Endpoint
from ...network.plan import Phase
from .ace_settings import AceSettings
from .registry import AMPLE_RATE, EndpointContext, EndpointKind
from .sm_kernels import engine_parallelism

__all__ = [
    "AceSettings",
    "AceEndpoint",
    "SRAM_WAIT",
    "buffers_per_partition",
    "phase_partitions",
    "piece_bytes",
]

#: What binds communication while a chunk waits for SRAM space (for "what bound a run").
SRAM_WAIT = "ACE SRAM (chunks waiting for space)"


def phase_partitions(system: SystemConfig) -> int:
    """The SRAM partitions of a streaming ACE on ``system``: the most phases one collective
    has on its network (a hierarchical all-reduce on ``D`` dimensions has ``2D - 1``; every
    other operation, and per-dimension composition, ``D``)."""
    dims = len(system.network.dimensions)
    if system.collective.composition == "hierarchical":
        return max(2 * dims - 1, 1)
    return max(dims, 1)


def _check(settings: AceSettings, system: SystemConfig) -> None:
    if settings.mode == "streaming" and not settings.split_chunks:
        raise ConfigError(
            "endpoint.ace.split_chunks",
            "applies to mode = 'store_and_forward' only (a streaming ACE always splits chunks "
            "into pieces that fit its phase partitions); set mode = 'store_and_forward' to "
            "stage whole chunks",
            settings.split_chunks,
        )


class _Partition:
    """One phase's share of the SRAM at one NPU: free bytes and pieces waiting (FIFO) for room
    as (bytes, continuation, since)."""

    __slots__ = ("free", "waiting")

    def __init__(self, size: float):
        self.free = size
        self.waiting: deque[tuple[float, Callable[[], None], float]] = deque()


class AceEndpoint(Endpoint):
    """The Accelerator Collectives Engine (see module docstring)."""

    name = "ace"
    step_kinds = SM_FREE_STEP_KINDS

    def __init__(self, ctx: EndpointContext):
        engine = ctx.engine
        npus = ctx.npus
        self.engine = engine
        self.npus = npus
        self.cfg: AceSettings = ctx.settings
        self.streaming = self.cfg.mode == "streaming"
        self._free = [self.cfg.sram] * len(npus)
        self._waiting: list[deque[tuple[float, float, Callable[[], None], float]]] = [
            deque() for _ in npus
        ]
        self._alu = [
            engine.add_resource(f"npu{n.rank}.ace.alu", self.cfg.alu_bandwidth, meter=True)
            for n in npus
        ]
        self._dma = [
            engine.add_resource(f"npu{n.rank}.ace.dma", self.cfg.dma_bandwidth) for n in npus
        ]
        self._spill_fraction = [0.0] * len(npus)
        self._demand_epoch = 0
        self.hbm_bytes = 0.0
        npu = ctx.system.npu
        self._mlp = npu.hbm_arbitration == "mlp"
        # the DMA engine keeps the requests in flight that streaming dma_bandwidth needs
        self.dma_parallelism = [  # each NPU's own (mixed NPU types)
            engine_parallelism(n.config, self.cfg.dma_bandwidth) for n in npus
        ]
        #: streaming: SRAM partitions per NPU (DMA read, one per phase position, DMA write)
        #: and each one's bytes
        self.partitions = phase_partitions(ctx.system) + 2
        self.partition_bytes = self.cfg.sram / self.partitions
        #: the piece size chunks are split into (bytes; None: not split)
        self.piece = piece_bytes(self.cfg, ctx.system)
        self._parts = [
            [_Partition(self.partition_bytes) for _ in range(self.partitions)] for _ in npus
        ]
        #: streaming: the partition and bytes each piece in flight holds, per NPU
        self._held: list[dict[Hashable, tuple[int, float]]] = [{} for _ in npus]
        #: streaming: DMA descriptor queues per NPU (reads, writes)
        self._dma_queues: list[tuple[deque[tuple[float, Callable[[], None]]], ...]] = [
            (deque(), deque()) for _ in npus
        ]
        #: streaming: pieces held back by a full partition now, and since when (s); the
        #: waits are told to the bound listeners as SRAM_WAIT segments
        self._blocked_count = 0
        self._blocked_since = 0.0

    def max_chunk_bytes(self) -> float | None:
        return self.piece

    def meters(self, rank: int) -> Mapping[str, Sequence[Resource]]:
        return {ACE_ALU: [self._alu[rank]], ACE_DMA: [self._dma[rank]]}

    # -- per network byte ---------------------------------------------------------------------
    def demand_epoch(self) -> int:
        return self._demand_epoch  # a rank's spill fraction grows: its HBM demand

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        demand: dict[Resource, float] = {}
        if kind == REDUCE:
            demand[self._alu[rank]] = 1.0
        spill = self._spill_fraction[rank]
        if spill > 0:
            demand[self.npus[rank].hbm_comm] = spill * self.cfg.spill_hbm_bytes_per_byte
        return demand

    def hbm_parallelism(self, rank: int) -> tuple[Resource, float] | None:
        # spilled chunks' traffic goes through the same DMA engine
        return (self.npus[rank].hbm_comm, self.dma_parallelism[rank]) if self._mlp else None

    def _dma_transfer(self, rank: int, nbytes: float, then: Callable[[], None]) -> None:
        npu = self.npus[rank]
        self.hbm_bytes += nbytes
        self.engine.start(
            nbytes,
            {npu.hbm_comm: 1.0, self._dma[rank]: 1.0},
            lambda _act: then(),
            weight=self.dma_parallelism[rank] if self._mlp else 1.0,
            basis=npu.hbm_comm if self._mlp else None,
            tag=("ace-dma", rank),
            track="message" if rank == 0 else None,
        )

    def _dma_in_order(
        self, rank: int, direction: int, nbytes: float, then: Callable[[], None]
    ) -> None:
        """Streaming: a DMA transfer served in order, one at a time per direction (reads 0,
        writes 1: a descriptor queue each), so the first piece is not slowed by the rest."""
        queue = self._dma_queues[rank][direction]
        queue.append((nbytes, then))
        if len(queue) == 1:
            self._dma_next(rank, direction)

    def _dma_next(self, rank: int, direction: int) -> None:
        queue = self._dma_queues[rank][direction]
        nbytes, then = queue[0]

        def done() -> None:
            queue.popleft()
            if queue:
                self._dma_next(rank, direction)
            then()

        self._dma_transfer(rank, nbytes, done)

    def _waited(self, rank: int, since: float) -> None:
        """A piece of ``rank`` admitted now after waiting for SRAM space since ``since``."""
        now = self.engine.now
        if rank != 0 or now <= since:
            return
        listener = self.engine.bound_listener
        if listener is not None:
            # Time a chunk waited for SRAM space: what binds communication then.
            listener.segment("message", SRAM_WAIT, since, now)

    # -- streaming: SRAM partitions per stage -------------------------------------------------
    def phase_begin(
        self,
        rank: int,
        chunk: Hashable,
        index: int,
        phases: Sequence[Phase],
        io: tuple[float, float, float],
        proceed: Callable[[], None],
    ) -> None:
        if not self.streaming:
            proceed()
            return
        if index > self.partitions - 2:
            raise SimulationError(
                f"a collective with {len(phases)} phases on an ACE with "
                f"{self.partitions - 2} phase partitions (one per phase of a hierarchical "
                "all-reduce)"
            )
        # (partials of methods, not nested functions: compiled, nested functions that refer
        # to each other are a cycle per piece, left to the cyclic collector)
        if index == 0:
            # DMA reads the piece's input into the read partition, then it enters phase 0
            read = partial(self._read, rank, chunk, io[0], phases[0].data_bytes, proceed)
            self._take_space(rank, 0, io[0], chunk, read)
            return
        if index < len(phases):
            self._move(rank, chunk, index + 1, phases[index].data_bytes, proceed)
            return
        # left its last phase: into the write partition, written back, then freed
        write = partial(self._write_back, rank, chunk, io[1], proceed)
        self._move(rank, chunk, self.partitions - 1, io[1], write)

    def _read(
        self, rank: int, chunk: Hashable, nbytes: float, first: float, proceed: Callable[[], None]
    ) -> None:
        """A piece's input (``nbytes``) read into the read partition, then the piece moved
        into phase 0's (``first`` bytes)."""
        self._dma_in_order(rank, 0, nbytes, partial(self._move, rank, chunk, 1, first, proceed))

    def _write_back(
        self, rank: int, chunk: Hashable, nbytes: float, proceed: Callable[[], None]
    ) -> None:
        """A piece's output (``nbytes``) written back from the write partition, then freed."""
        self._dma_in_order(rank, 1, nbytes, partial(self._written, rank, chunk, proceed))

    def _written(self, rank: int, chunk: Hashable, proceed: Callable[[], None]) -> None:
        self._free_space(rank, *self._held[rank].pop(chunk))
        proceed()

    def _move(
        self, rank: int, chunk: Hashable, index: int, need: float, then: Callable[[], None]
    ) -> None:
        """``chunk`` takes ``need`` bytes of partition ``index``, then frees what it held
        (back-pressure: it keeps its buffer until the next one has room), then ``then``."""
        self._take_space(rank, index, need, chunk, then, self._held[rank][chunk])

    def _take_space(
        self,
        rank: int,
        index: int,
        need: float,
        chunk: Hashable,
        then: Callable[[], None],
        previous: tuple[int, float] | None = None,
    ) -> None:
        if need > self.partition_bytes * (1 + 1e-12):
            raise SimulationError(
                f"a piece holding {need:.0f} bytes does not fit an ACE SRAM partition of "
                f"{self.partition_bytes:.0f} bytes"
            )
        part = self._parts[rank][index]
        if part.waiting or part.free < need * (1 - 1e-12):
            taken = partial(self._taken, rank, chunk, index, need, then, previous)
            part.waiting.append((need, taken, self.engine.now))
            if index > 0:
                self._blocked(rank, +1)
            return
        part.free -= need
        self._taken(rank, chunk, index, need, then, previous)

    def _taken(
        self,
        rank: int,
        chunk: Hashable,
        index: int,
        need: float,
        then: Callable[[], None],
        previous: tuple[int, float] | None,
    ) -> None:
        """``chunk`` holds ``need`` bytes of partition ``index`` now: it frees the partition
        it held before (``previous``: index and bytes, if any), then ``then``."""
        self._held[rank][chunk] = (index, need)
        if previous is not None:
            self._free_space(rank, *previous)
        then()

    def _free_space(self, rank: int, index: int, nbytes: float) -> None:
        part = self._parts[rank][index]
        part.free += nbytes
        while part.waiting and part.free >= part.waiting[0][0] * (1 - 1e-12):
            need, then, _since = part.waiting.popleft()
            part.free -= need
            if index > 0:
                self._blocked(rank, -1)
            then()

    def _blocked(self, rank: int, change: int) -> None:
        """Streaming, NPU 0: count pieces held back by a full partition after their DMA read
        (back-pressure; pieces queued for the read partition are the collective's work queue,
        as pieces queued for a dimension are, and are not counted); each interval with at
        least one is recorded once as :data:`SRAM_WAIT`."""
        if rank != 0:
            return
        before = self._blocked_count
        self._blocked_count += change
        now = self.engine.now
        if before == 0 and change > 0:
            self._blocked_since = now
        elif self._blocked_count == 0 and now > self._blocked_since:
            listener = self.engine.bound_listener
            if listener is not None:
                listener.segment("message", SRAM_WAIT, self._blocked_since, now)

    # -- store and forward: a chunk holds its footprint from read to write-back -----------------
    def _footprint(self, nbytes: float) -> float:
        if nbytes > self.cfg.sram and not self.cfg.allow_spill:
            raise ConfigError(
                "endpoint.ace.sram",
                f"a chunk of {nbytes:.0f} bytes does not fit and allow_spill is off; "
                "raise sram, use more collective.chunks or allow spilling",
                self.cfg.sram,
            )
        return min(nbytes, self.cfg.sram)

    def chunk_begin(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        if self.streaming:
            proceed()
            return
        need = self._footprint(footprint)
        if footprint > self.cfg.sram:
            spill = max(self._spill_fraction[rank], 1 - self.cfg.sram / footprint)
            if spill != self._spill_fraction[rank]:
                self._spill_fraction[rank] = spill
                self._demand_epoch += 1  # its messages' HBM demand changed
        queue = self._waiting[rank]
        if queue or self._free[rank] < need * (1 - 1e-12):
            queue.append((in_bytes, footprint, proceed, self.engine.now))
            return
        self._admit(rank, in_bytes, footprint, proceed)

    def _admit(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        self._free[rank] -= self._footprint(footprint)
        self._dma_transfer(rank, in_bytes, proceed)

    def chunk_end(
        self, rank: int, out_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        if self.streaming:
            proceed()  # written back when it left its last phase
            return

        def stored() -> None:
            self._free[rank] += self._footprint(footprint)
            queue = self._waiting[rank]
            while queue and self._free[rank] >= self._footprint(queue[0][1]) * (1 - 1e-12):
                size, fp, cont, since = queue.popleft()
                self._waited(rank, since)
                self._admit(rank, size, fp, cont)
            proceed()

        self._dma_transfer(rank, out_bytes, stored)


def buffers_per_partition(settings: AceSettings, system: SystemConfig) -> int:
    """Pieces each streaming partition holds: ``buffers_per_phase``, or by default
    ``collective.active_chunks_per_dimension`` (the pieces a phase can have in the network at
    once; the piece waiting to enter a phase waits in the previous partition)."""
    if settings.buffers_per_phase is not None:
        return settings.buffers_per_phase
    return system.collective.active_chunks_per_dimension


def piece_bytes(settings: AceSettings, system: SystemConfig) -> float | None:
    """The piece size chunks are split into on ``system`` (bytes; None: not split).

    Streaming: ``sram / ((K + 2) * buffers)``, so that each of the ``K + 2`` equal partitions
    (DMA read, ``K`` phases, DMA write) holds ``buffers`` pieces; store and forward: half the
    SRAM (one piece streams in while another is in the network), or none without splitting."""
    if settings.mode == "streaming":
        partitions = phase_partitions(system) + 2
        return settings.sram / (partitions * buffers_per_partition(settings, system))
    return settings.sram / 2 if settings.split_chunks else None


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
#: SRAM sizes offered as "enough" (bytes): 4x, 16x and 64x the shipped 4 MiB; the best is used.
AMPLE_SRAM = (16 * 2**20, 64 * 2**20, 256 * 2**20)


def _ample(system: SystemConfig) -> list[dict[str, object]]:
    """DMA and ALUs of any rate, with SRAMs of :data:`AMPLE_SRAM` (each cut into its pieces as
    configured): its one HBM read and one write per chunk remain."""
    return [
        {"dma_bandwidth": AMPLE_RATE, "alu_bandwidth": AMPLE_RATE, "sram": sram}
        for sram in AMPLE_SRAM
    ]


KIND = EndpointKind(
    name="ace",
    label="ACE",
    summary="offload engine beside the NIC: SRAM, ALUs and DMA; one HBM read and one write "
    "per chunk, no compute units; streaming (SRAM partitioned per phase) or store-and-forward",
    settings=AceSettings,
    build=AceEndpoint,
    check=_check,
    default_compare=True,
    chunk_limit=piece_bytes,
    ample=_ample,
)
