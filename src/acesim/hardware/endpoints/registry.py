"""The registry of endpoint kinds: one entry per kind, with its settings schema and its model.

Adding a kind is one module that defines a settings model, an
:class:`~acesim.network.endpoint.Endpoint` subclass and a call to :func:`register_endpoint`;
everything else (the system document's ``[endpoint.<kind>]`` table, ``--endpoint`` choices,
``compare``, sweeps, reproduce, figures, the docs table) reads :data:`ENDPOINT_KINDS`.

A kind may declare *variants*: settings a practitioner would search for the best one (the
baseline's compute-unit/HBM splits). ``compare`` runs every variant and keeps the fastest; a
sweep does so for the endpoint value ``best_<kind>`` (``best_baseline``). One kind is the
*reference* that speedups are measured against (``baseline``); the comparison also reports the
*bound* (``ideal``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ...config.endpoint import ENDPOINT_SETTINGS, EndpointSchema
from ...config.system import SystemConfig
from ...engine import Engine
from ...network.endpoint import Endpoint
from ...network.topology import Topology
from ...registry import Registry
from ..npu import NPU

__all__ = [
    "AMPLE_RATE",
    "EndpointContext",
    "EndpointKind",
    "Variant",
    "ENDPOINT_KINDS",
    "register_endpoint",
    "unregister_endpoint",
    "build_endpoint",
    "reference_kind",
    "chunk_limits",
]


@dataclass(frozen=True)
class EndpointContext:
    """What an endpoint model is built from: the engine, the simulated NPUs, the network, the
    whole system document and the kind's own settings."""

    engine: Engine
    npus: list[NPU]
    topology: Topology
    system: SystemConfig
    settings: Any


@dataclass(frozen=True)
class Variant:
    """One setting of a kind's searched knobs: a label and the settings it changes."""

    label: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EndpointKind:
    """An endpoint kind.

    Attributes:
        name: the value of ``endpoint.kind``.
        label: the column heading in comparisons (``ACE``).
        summary: one line for help texts and the docs table.
        settings: pydantic model of the ``[endpoint.<name>]`` table.
        build: ``build(context)`` -> the endpoint model for one platform.
        check: optional ``check(settings, system)`` raising ConfigError when the settings do not
            fit the system (run when a system document is validated).
        variants: optional ``variants(settings, system)`` -> the settings searched for the best
            one (empty or None: the settings as given).
        role: ``reference`` (speedups are measured against its best variant), ``bound`` (an
            upper bound, no endpoint cost) or ``candidate``.
        default_compare: part of ``compare``'s default endpoint list.
        chunk_limit: optional ``chunk_limit(settings, system)`` -> the largest piece (bytes)
            the kind splits chunks into, or None; the model's ``max_chunk_bytes`` returns the
            same, and the ideal endpoint searches these limits so that no kind out-pipelines
            the bound.
        channel_fields: its settings that count NCCL channels (one thread block on one SM
            each), set together by ``--channels`` (empty: it runs no SM channels).
        ample: optional ``ample(system)`` -> setting changes, each giving the kind enough of
            its own resources (units, engines, buffers) that only HBM and the network bind it,
            as far as one setting can (an SRAM is a trade-off: pieces small enough to pipeline,
            large enough to amortise latency, so several sizes are offered and the best
            used): what "driving the same network bandwidth" gives each endpoint.
        link_efficiency: optional ``link_efficiency(settings, system)`` -> the payload
            fraction of the links its messages get, per step kind, where it is not the
            dimension's (a DMA engine's writes carry no collective protocol); the ideal
            endpoint takes it in its variant for this kind, so that no kind out-drives the
            bound.
        offloads: the collective operations the kind runs otherwise than the SM kernels of
            the ``baseline`` kind (None: every one); a run with none of them gets the
            baseline's figures, and its result says so (:meth:`idle_note`).
        aliases: other names that stand for this kind wherever a kind is named
            (``endpoint.kind``, ``--endpoint(s)``, ``compare(endpoints=...)``); results and
            tables use ``name``.
    """

    name: str
    label: str
    summary: str
    settings: type[BaseModel]
    build: Callable[[EndpointContext], Endpoint]
    check: Callable[[Any, SystemConfig], None] | None = None
    variants: Callable[[Any, SystemConfig], list[Variant]] | None = None
    role: str = "candidate"
    default_compare: bool = False
    chunk_limit: Callable[[Any, SystemConfig], float | None] | None = None
    channel_fields: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    ample: Callable[[SystemConfig], list[dict[str, object]]] | None = None
    link_efficiency: Callable[[Any, SystemConfig], dict[str, float]] | None = None
    offloads: frozenset[str] | None = None

    def idle_note(self, ops: set[str]) -> str | None:
        """A note when a run whose collectives are ``ops`` gives this kind nothing to do (none
        of :attr:`offloads`): its figures are then the SM endpoint's. None otherwise."""
        if self.offloads is None or ops & self.offloads:
            return None
        ran = ", ".join(sorted(ops)) or "none"
        return (
            f"{self.name} has nothing to do in this run: it offloads "
            f"{', '.join(sorted(self.offloads))} only, and the run's collectives are {ran}; "
            "they ran as the SM endpoint's kernels (its figures are the baseline's)"
        )

    def variants_of(self, system: SystemConfig) -> list[Variant]:
        """The variants to search on ``system`` (one, the settings as given, when none)."""
        if self.variants is None:
            return [Variant(self.label)]
        found = self.variants(system.endpoint.settings(self.name), system)
        return found or [Variant(self.label)]


#: A rate no endpoint resource reaches (B/s): what ``ample`` settings give engines and units.
AMPLE_RATE = 1e18

#: Endpoint kinds by name, in registration order.
ENDPOINT_KINDS: Registry[EndpointKind] = Registry("endpoint kind", "endpoint.kind")


def register_endpoint(kind: EndpointKind, *, replace: bool = False) -> EndpointKind:
    """Register ``kind``: its model here and its settings schema in the system document."""
    if kind.role not in ("reference", "bound", "candidate"):
        raise ValueError(f"endpoint kind {kind.name!r}: unknown role {kind.role!r}")
    ENDPOINT_SETTINGS.register(
        kind.name, EndpointSchema(kind.settings, kind.check), replace=replace
    )
    ENDPOINT_KINDS.register(kind.name, kind, replace=replace)
    for alias in kind.aliases:
        ENDPOINT_SETTINGS.alias(alias, kind.name)
        ENDPOINT_KINDS.alias(alias, kind.name)
    return kind


def unregister_endpoint(name: str) -> None:
    """Withdraw a kind (tests, plug-ins)."""
    ENDPOINT_KINDS.unregister(name)
    ENDPOINT_SETTINGS.unregister(name)


def build_endpoint(
    engine: Engine, npus: list[NPU], topology: Topology, system: SystemConfig
) -> Endpoint:
    """The endpoint model of ``system.endpoint.kind``."""
    kind = ENDPOINT_KINDS.get(system.endpoint.kind)
    context = EndpointContext(engine, npus, topology, system, system.endpoint.settings(kind.name))
    return kind.build(context)


def chunk_limits(system: SystemConfig) -> dict[str, float]:
    """Kind name -> the piece size (bytes) it splits chunks into on ``system``, for every
    registered kind that splits them."""
    out: dict[str, float] = {}
    for name, kind in ENDPOINT_KINDS.items():
        if kind.chunk_limit is not None:
            limit = kind.chunk_limit(system.endpoint.settings(name), system)
            if limit is not None:
                out[name] = limit
    return out


def reference_kind() -> str:
    """The name of the reference kind (speedups are measured against it)."""
    for name, kind in ENDPOINT_KINDS.items():
        if kind.role == "reference":
            return name
    raise LookupError("no endpoint kind is registered as the reference")
