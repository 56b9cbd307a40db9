"""The ``ideal`` endpoint kind: collectives cost the endpoint nothing (an upper bound).

Messages still take link bandwidth and latency; no compute unit, HBM byte or engine resource is
charged.

For the bound to hold against every kind, it must also pipeline at least as finely as they do:
an endpoint that splits chunks into smaller pieces (ACE, to fit its SRAM) fills a
multi-dimensional pipeline sooner, which alone can make it finish an uncontended collective
before an ideal endpoint with the collective's own, coarser chunking (a 27 MB all-to-all on a
4x2x4 torus: 444 us for ACE's 16 pieces against 472 us for 4 chunks). So the ideal endpoint's
variants are the collective's own chunking and the piece size of every registered kind that
splits chunks; a comparison keeps the fastest. ``max_chunk_bytes`` sets the piece size of one
run (None: no splitting).
"""

from __future__ import annotations

from pydantic import Field

from ...config.system import Strict, SystemConfig
from ...config.validators import PositiveBytes
from ...network.endpoint import Endpoint
from .registry import EndpointContext, EndpointKind, Variant, chunk_limits

__all__ = ["IdealSettings", "IdealEndpoint"]


class IdealSettings(Strict):
    """The ideal endpoint costs nothing; only its chunk pieces can be set."""

    max_chunk_bytes: PositiveBytes | None = Field(
        None, description="split chunks into pieces of at most this many bytes (None: don't)"
    )


class IdealEndpoint(Endpoint):
    """Collectives consume no endpoint resources."""

    name = "ideal"

    def __init__(self, ctx: EndpointContext):
        self.npus = ctx.npus
        self.limit: float | None = ctx.settings.max_chunk_bytes

    def max_chunk_bytes(self) -> float | None:
        return self.limit


def _variants(settings: IdealSettings, system: SystemConfig) -> list[Variant]:
    variants = [Variant("ideal", {"max_chunk_bytes": settings.max_chunk_bytes})]
    seen = {settings.max_chunk_bytes}
    for kind, limit in chunk_limits(system).items():
        if limit not in seen:
            seen.add(limit)
            variants.append(Variant(f"ideal, {kind}'s pieces", {"max_chunk_bytes": limit}))
    return variants


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="ideal",
    label="ideal",
    summary="collectives cost the endpoint nothing (upper bound)",
    settings=IdealSettings,
    build=IdealEndpoint,
    variants=_variants,
    role="bound",
    default_compare=True,
)
