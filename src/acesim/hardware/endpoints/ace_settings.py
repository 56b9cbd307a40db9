"""The Accelerator Collectives Engine's settings (``[endpoint.ace]``): a validated document,
apart from the engine's mechanism (:mod:`acesim.hardware.endpoints.ace`, compiled where the
event path is: a settings model is a pydantic class, which a compiled module cannot define)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...config.strict import Strict
from ...config.validators import (
    NonNegativeFloat,
    PositiveBytes,
    PositiveBytesPerSecond,
    PositiveInt,
)

__all__ = ["AceSettings"]


class AceSettings(Strict):
    """The Accelerator Collectives Engine: SRAM, ALUs and DMA beside the network interface."""

    sram: PositiveBytes = Field(4 * 2**20, description="SRAM buffer, bytes")
    alu_bandwidth: PositiveBytesPerSecond = Field(1.6e12, description="reduction throughput, B/s")
    dma_bandwidth: PositiveBytesPerSecond = Field(500e9, description="HBM<->SRAM DMA, B/s")
    mode: Literal["streaming", "store_and_forward"] = Field(
        "streaming",
        description="streaming: SRAM partitioned per phase, pieces pipelined through DMA in, "
        "the phases and DMA out; store_and_forward: a chunk holds its footprint from read to "
        "write-back",
    )
    buffers_per_phase: PositiveInt | None = Field(
        None,
        description="streaming: pieces each SRAM partition holds (None: "
        "collective.active_chunks_per_dimension, the pieces a phase has in the network at once)",
    )
    split_chunks: bool = Field(
        True,
        description="store_and_forward: split chunks into pieces of at most sram/2 (two in "
        "flight); streaming always splits",
    )
    allow_spill: bool = Field(
        True, description="store_and_forward without splitting: chunks larger than SRAM spill"
    )
    spill_hbm_bytes_per_byte: NonNegativeFloat = Field(
        2.0, description="extra HBM bytes per network byte of a spilled chunk (write+read back)"
    )
