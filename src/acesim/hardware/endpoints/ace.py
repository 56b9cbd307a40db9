"""The ``ace`` endpoint kind: the Accelerator Collectives Engine (Rashidi et al., ISCA 2021).

``ace``
    An engine with SRAM, ALUs and DMA beside the network interface. A chunk entering a
    collective is read from HBM once by DMA into SRAM (its input bytes), every phase runs out of
    SRAM, the result is written once (its output bytes). Reduce steps use the ALU at one byte of
    ALU throughput per network byte. SRAM bounds the chunks in flight: a chunk waits (FIFO)
    until its footprint fits. By default ACE splits every chunk into pieces of at most half its
    SRAM (so that one piece streams in while another is in the network); with splitting off, a
    chunk larger than the whole SRAM is, if spilling is allowed,
    staged through HBM: the fraction ``1 - sram/chunk`` of its network bytes pays
    ``spill_hbm_bytes_per_byte`` of extra HBM traffic (written out and read back); otherwise it
    is a configuration error. ACE holds no compute unit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from pydantic import Field

from ...config.system import Strict
from ...config.validators import NonNegativeFloat, PositiveBytes, PositiveBytesPerSecond
from ...engine import Resource
from ...errors import ConfigError
from ...network.algorithms import REDUCE
from ...network.endpoint import SM_FREE_STEP_KINDS, Endpoint
from .registry import EndpointContext, EndpointKind
from .sm_kernels import engine_parallelism

__all__ = ["AceSettings", "AceEndpoint", "SRAM_WAIT"]

#: What binds communication while a chunk waits for SRAM space (for "what bound a run").
SRAM_WAIT = "ACE SRAM (chunks waiting for space)"


class AceSettings(Strict):
    """The Accelerator Collectives Engine: SRAM, ALUs and DMA beside the network interface."""

    sram: PositiveBytes = Field(4 * 2**20, description="SRAM buffer, bytes")
    alu_bandwidth: PositiveBytesPerSecond = Field(1.6e12, description="reduction throughput, B/s")
    dma_bandwidth: PositiveBytesPerSecond = Field(500e9, description="HBM<->SRAM DMA, B/s")
    split_chunks: bool = Field(
        True, description="split chunks into pieces of at most sram/2 (two in flight)"
    )
    allow_spill: bool = Field(
        True, description="without splitting: chunks larger than SRAM spill to HBM"
    )
    spill_hbm_bytes_per_byte: NonNegativeFloat = Field(
        2.0, description="extra HBM bytes per network byte of a spilled chunk (write+read back)"
    )


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
        self._free = [self.cfg.sram] * len(npus)
        self._waiting: list[deque[tuple[float, float, Callable[[], None], float]]] = [
            deque() for _ in npus
        ]
        self._alu = [
            engine.add_resource(f"npu{n.rank}.ace.alu", self.cfg.alu_bandwidth) for n in npus
        ]
        self._dma = [
            engine.add_resource(f"npu{n.rank}.ace.dma", self.cfg.dma_bandwidth) for n in npus
        ]
        self._spill_fraction = [0.0] * len(npus)
        self.hbm_bytes = 0.0
        npu = ctx.system.npu
        self._mlp = npu.hbm_arbitration == "mlp"
        # the DMA engine keeps the requests in flight that streaming dma_bandwidth needs
        self.dma_parallelism = engine_parallelism(npu, self.cfg.dma_bandwidth)

    def max_chunk_bytes(self) -> float | None:
        return _chunk_limit(self.cfg)

    def _footprint(self, nbytes: float) -> float:
        if nbytes > self.cfg.sram and not self.cfg.allow_spill:
            raise ConfigError(
                "endpoint.ace.sram",
                f"a chunk of {nbytes:.0f} bytes does not fit and allow_spill is off; "
                "raise sram, use more collective.chunks or allow spilling",
                self.cfg.sram,
            )
        return min(nbytes, self.cfg.sram)

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
        return (self.npus[rank].hbm_comm, self.dma_parallelism) if self._mlp else None

    def chunk_begin(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        need = self._footprint(footprint)
        if footprint > self.cfg.sram:
            self._spill_fraction[rank] = max(
                self._spill_fraction[rank], 1 - self.cfg.sram / footprint
            )
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

    def _dma_transfer(self, rank: int, nbytes: float, then: Callable[[], None]) -> None:
        npu = self.npus[rank]
        self.hbm_bytes += nbytes
        self.engine.start(
            nbytes,
            {npu.hbm_comm: 1.0, self._dma[rank]: 1.0},
            lambda _act: then(),
            weight=self.dma_parallelism if self._mlp else 1.0,
            basis=npu.hbm_comm if self._mlp else None,
            tag=("ace-dma", rank),
            track="message" if rank == 0 else None,
        )

    def chunk_end(
        self, rank: int, out_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        def stored() -> None:
            self._free[rank] += self._footprint(footprint)
            queue = self._waiting[rank]
            while queue and self._free[rank] >= self._footprint(queue[0][1]) * (1 - 1e-12):
                size, fp, cont, since = queue.popleft()
                listener = self.engine.bound_listener
                if rank == 0 and listener is not None and self.engine.now > since:
                    # Time a chunk waited for SRAM space: what binds communication then.
                    listener.segment("message", SRAM_WAIT, since, self.engine.now)
                self._admit(rank, size, fp, cont)
            proceed()

        self._dma_transfer(rank, out_bytes, stored)


def _chunk_limit(settings: AceSettings) -> float | None:
    """Pieces of at most half the SRAM (one streams in while another is in the network)."""
    return settings.sram / 2 if settings.split_chunks else None


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="ace",
    label="ACE",
    summary="offload engine beside the NIC: SRAM, ALUs and DMA; one HBM read and one write "
    "per chunk, no compute units",
    settings=AceSettings,
    build=AceEndpoint,
    default_compare=True,
    chunk_limit=_chunk_limit,
)
