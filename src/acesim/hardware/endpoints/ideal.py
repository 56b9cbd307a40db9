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

Likewise for algorithms: a kind may run an operation with an algorithm of its own
(``preferred_algorithms``: the copy engine's direct all-gather, one latency instead of the
ring's ``p-1``); the ideal endpoint's variants add, for every such kind whose algorithm can run
on some dimension of the system, a run with that kind's algorithms (``algorithms``).
"""

from __future__ import annotations

from pydantic import Field

from ...config.system import Strict, SystemConfig
from ...config.validators import PositiveBytes
from ...network.algorithms import ALGORITHMS
from ...network.endpoint import Endpoint
from ...network.ops import COLLECTIVE_OPS
from .registry import ENDPOINT_KINDS, EndpointContext, EndpointKind, Variant, chunk_limits

__all__ = ["IdealSettings", "IdealEndpoint"]


class IdealSettings(Strict):
    """The ideal endpoint costs nothing; only its chunk pieces can be set."""

    max_chunk_bytes: PositiveBytes | None = Field(
        None, description="split chunks into pieces of at most this many bytes (None: don't)"
    )
    algorithms: dict[str, str] = Field(
        default_factory=dict,
        description="per operation, an algorithm the bound runs wherever it can (another "
        "kind's own, searched as a variant); empty: the system's choice",
    )


class IdealEndpoint(Endpoint):
    """Collectives consume no endpoint resources."""

    name = "ideal"

    def __init__(self, ctx: EndpointContext):
        self.npus = ctx.npus
        self.limit: float | None = ctx.settings.max_chunk_bytes
        self.preferred_algorithms = dict(ctx.settings.algorithms)

    def max_chunk_bytes(self) -> float | None:
        return self.limit


def _runs_somewhere(algorithm: str, op: str, system: SystemConfig) -> bool:
    """``algorithm`` can run ``op`` on some dimension of ``system``."""
    algo = ALGORITHMS.get(algorithm)
    return op in algo.phase_ops and any(
        d.size > 1 and not algo.problem(op, d.kind, d.size, d.switch_reduction)
        for d in system.network.dimensions
    )


def _check(settings: IdealSettings, system: SystemConfig) -> None:
    for op, algorithm in settings.algorithms.items():
        COLLECTIVE_OPS.get(op, "endpoint.ideal.algorithms")
        ALGORITHMS.get(algorithm, f"endpoint.ideal.algorithms.{op}")


def _variants(settings: IdealSettings, system: SystemConfig) -> list[Variant]:
    variants = [Variant("ideal", {"max_chunk_bytes": settings.max_chunk_bytes})]
    seen = {settings.max_chunk_bytes}
    for kind, limit in chunk_limits(system).items():
        if limit not in seen:
            seen.add(limit)
            variants.append(Variant(f"ideal, {kind}'s pieces", {"max_chunk_bytes": limit}))
    for name, other in ENDPOINT_KINDS.items():
        own: dict[str, str] = dict(getattr(other.build, "preferred_algorithms", {}))
        own = {op: a for op, a in own.items() if _runs_somewhere(a, op, system)}
        if own and own != settings.algorithms:
            changes = {"max_chunk_bytes": settings.max_chunk_bytes, "algorithms": own}
            variants.append(Variant(f"ideal, {name}'s algorithms", changes))
    return variants


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="ideal",
    label="ideal",
    summary="collectives cost the endpoint nothing (upper bound)",
    settings=IdealSettings,
    build=IdealEndpoint,
    check=_check,
    variants=_variants,
    role="bound",
    default_compare=True,
)
