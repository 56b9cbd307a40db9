"""The ``ideal`` endpoint kind: collectives cost the endpoint nothing, with the best choices
any endpoint may make: a bound on every endpoint kind of the same case.

Messages still take link bandwidth and latency; no compute unit, HBM byte or engine resource is
charged. Costing nothing is not enough for a bound: an endpoint that runs another algorithm
(the ``nvls`` kind's in-switch all-reduce: one switch pass instead of a ring's ``2(p-1)``
steps), splits chunks more finely or simply gets another pick from the tuner can finish before
a free endpoint that runs the system's choices. So the ideal endpoint is run in every one of its
*variants* (a comparison, ``acesim run --endpoint ideal`` and ``acesim collective --endpoint
ideal`` alike) and the fastest is kept: the system's choices; for every registered kind, that
kind's pieces and algorithms at no cost (so that ideal <= that kind); and each algorithm the
tuner may choose (``collective.choices``) run wherever it can.

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
ring's ``p-1``; the nvls kind's NVLS all-reduce); the ideal endpoint's variant for such a kind
runs that kind's algorithms (``algorithms``) with its pieces.
"""

from __future__ import annotations

from pydantic import Field

from ...config.system import Strict, SystemConfig
from ...config.validators import PositiveBytes, PositiveFraction
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
    link_efficiency: dict[str, PositiveFraction] = Field(
        default_factory=dict,
        description="per step kind, the links' payload fraction for its messages (another "
        "kind's, searched as a variant); empty: the dimension's",
    )


class IdealEndpoint(Endpoint):
    """Collectives consume no endpoint resources."""

    name = "ideal"

    def __init__(self, ctx: EndpointContext):
        self.npus = ctx.npus
        self.limit: float | None = ctx.settings.max_chunk_bytes
        self.preferred_algorithms = dict(ctx.settings.algorithms)
        self.efficiencies: dict[str, float] = dict(ctx.settings.link_efficiency)

    def max_chunk_bytes(self) -> float | None:
        return self.limit


class _IdealAtOthersEfficiency(IdealEndpoint):
    """The ideal endpoint with another kind's link payload fractions (a separate class, so that
    the plain one keeps every hook of the free base endpoint: exact mode's vectorized path
    takes only endpoints that override none)."""

    def link_efficiency(self, kind: str) -> float | None:
        return self.efficiencies.get(kind)


def _build(ctx: EndpointContext) -> IdealEndpoint:
    if ctx.settings.link_efficiency:
        return _IdealAtOthersEfficiency(ctx)
    return IdealEndpoint(ctx)


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
    """The settings as given; each registered kind's pieces and algorithms; each algorithm the
    tuner may choose (see the module docstring). Duplicates are dropped."""
    variants: list[Variant] = []
    seen: set[str] = set()
    base = settings.link_efficiency

    def add(
        label: str, limit: float | None, algorithms: dict[str, str], efficiency: dict[str, float]
    ) -> None:
        changes = {
            "max_chunk_bytes": limit,
            "algorithms": algorithms,
            "link_efficiency": efficiency,
        }
        key = repr((limit, sorted(algorithms.items()), sorted(efficiency.items())))
        if key not in seen:
            seen.add(key)
            variants.append(Variant(label, changes))

    add("ideal", settings.max_chunk_bytes, dict(settings.algorithms), dict(base))
    limits = chunk_limits(system)
    for name, other in ENDPOINT_KINDS.items():
        if name == "ideal" or other.role == "bound":
            continue
        own: dict[str, str] = dict(getattr(other.build, "preferred_algorithms", {}))
        own = {op: a for op, a in own.items() if _runs_somewhere(a, op, system)}
        efficiency = dict(base)
        if other.link_efficiency is not None:
            found = other.link_efficiency(system.endpoint.settings(name), system)
            efficiency.update({k: max(v, base.get(k, 0.0)) for k, v in found.items()})
        limit = limits.get(name, settings.max_chunk_bytes)
        add(f"ideal, as {name}", limit, {**settings.algorithms, **own}, efficiency)
    if system.collective.algorithm is None:
        names = dict.fromkeys(a for names in system.collective.choices.values() for a in names)
        for algorithm in names:
            # where it cannot run on a group, the tuner chooses (choose_algorithm's preferred)
            ops = {op: algorithm for op, a in system.collective.choices.items() if algorithm in a}
            add(f"ideal, {algorithm}", settings.max_chunk_bytes, ops, dict(base))
    return variants


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="ideal",
    label="ideal",
    summary="collectives cost the endpoint nothing, with the best algorithm and pieces any "
    "endpoint may use (its variants; the bound on every kind of the same case)",
    settings=IdealSettings,
    build=_build,
    check=_check,
    variants=_variants,
    role="bound",
    default_compare=True,
)
