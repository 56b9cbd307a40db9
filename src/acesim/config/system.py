"""The system document: NPU, network, collective settings and collective endpoint.

Every physical field accepts a unit string ("900 GB/s") or a number in SI base units. Unknown
keys are rejected with a did-you-mean hint. The ``sources`` table records, for any dotted field
path, where its value comes from (paper, datasheet, ASTRA-sim input, or an assumption with its
reason); :func:`acesim.config.presets.assumptions` lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ConfigError
from ..registry import listed
from .endpoint import ENDPOINT_SETTINGS, EndpointConfig
from .errors import FieldRuleError
from .quantities import Bytes, BytesPerSecond, FlopsPerSecond, Seconds

DimensionKind = Literal["ring", "fully_connected", "switch"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


M = TypeVar("M", bound=BaseModel)


def defaults(model: type[M]) -> Callable[[], M]:
    """A ``default_factory`` building ``model`` with every field at its default (typed for mypy,
    which cannot check a bare model class against pydantic's factory signature)."""
    return lambda: model.model_validate({})


class NPUConfig(Strict):
    """One accelerator: compute units, their peak rate, HBM."""

    name: str = "npu"
    compute_units: int = Field(108, description="SM-like units")
    flops_per_unit: FlopsPerSecond = Field(1.15e12, description="peak FLOP/s of one unit")
    hbm_bandwidth: BytesPerSecond = Field(900e9, description="HBM bandwidth, B/s")
    hbm_capacity: Bytes = Field(32 * 2**30, description="HBM capacity, bytes")
    wave_quantization: bool = Field(False, description="kernels run ceil(W/U) waves")

    @field_validator("compute_units")
    @classmethod
    def _units_positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("flops_per_unit", "hbm_bandwidth", "hbm_capacity")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g}")
        return v

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of the whole NPU."""
        return self.compute_units * self.flops_per_unit


class DimensionConfig(Strict):
    """One network dimension as seen from an NPU."""

    name: str | None = None
    kind: DimensionKind = "ring"
    size: int = Field(description="NPUs along this dimension")
    link_bandwidth: BytesPerSecond = Field(description="one link, one direction, B/s")
    link_latency: Seconds = Field(0.0, description="per message, s")
    links_per_npu: int = Field(1, description="links of this dimension at each NPU")

    @field_validator("size")
    @classmethod
    def _size(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("link_bandwidth")
    @classmethod
    def _bw(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g} B/s")
        return v

    @field_validator("link_latency")
    @classmethod
    def _lat(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"must not be negative, got {v:g} s")
        return v

    @field_validator("links_per_npu")
    @classmethod
    def _links(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v


class NetworkConfig(Strict):
    """A multi-dimensional network; the NPU count is the product of the dimension sizes."""

    dimensions: list[DimensionConfig]
    npus: int | None = Field(None, description="optional check: must equal the product of sizes")

    @field_validator("dimensions")
    @classmethod
    def _nonempty(cls, v: list[DimensionConfig]) -> list[DimensionConfig]:
        if not v:
            raise ValueError("must list at least one dimension")
        return v

    @model_validator(mode="after")
    def _count(self) -> NetworkConfig:
        product = 1
        for dim in self.dimensions:
            product *= dim.size
        if self.npus is not None and self.npus != product:
            shape = "x".join(str(d.size) for d in self.dimensions)
            raise FieldRuleError(
                "npus",
                f"must equal the product of dimension sizes {shape} = {product}, got {self.npus}",
            )
        return self

    @property
    def total_npus(self) -> int:
        product = 1
        for dim in self.dimensions:
            product *= dim.size
        return product

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dimensions)


class CollectiveConfig(Strict):
    """How collectives are decomposed and scheduled."""

    algorithms: dict[str, str | list[str]] = Field(
        default_factory=dict,
        description="per collective op: one algorithm for all dimensions or one per dimension; "
        "default ring, and direct for all-to-all on switch/fully-connected dimensions "
        "(names: the registries of acesim.network; checked when the platform is elaborated)",
    )
    composition: Literal["hierarchical", "per_dimension"] = "hierarchical"
    chunks: int = Field(4, description="chunks a collective is split into (dataset splits)")
    active_chunks_per_dimension: int = Field(1, description="cap on chunks in flight per dim")
    scheduling: Literal["fifo", "lifo"] = "fifo"
    priorities: Literal["blocking_first", "none"] = Field(
        "blocking_first",
        description="waiting chunks of collectives the training loop blocks on go first "
        "(ASTRA-sim issues blocking collectives at the highest priority); none: fifo/lifo only",
    )
    endpoint_delay: Seconds = Field(10e-9, description="fixed per-message endpoint delay, s")
    protocol_efficiency: float = Field(
        1.0, description="fraction of link bandwidth carrying payload (protocol overhead)"
    )
    max_messages: int = Field(
        5_000_000,
        description="bound on the messages one collective may send (all simulated NPUs): a "
        "limit on work, about a minute of simulation at ~70,000 messages/s; raise it knowingly",
    )

    @field_validator("algorithms")
    @classmethod
    def _names(cls, value: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        ops, algorithms = listed("collective operation"), listed("algorithm")
        for op, choice in value.items():
            if ops is not None and op not in ops:
                err = ops.unknown(op)
                raise FieldRuleError(op, f"unknown collective operation; {err.rule}", hint=err.hint)
            for i, name in enumerate(choice if isinstance(choice, list) else [choice]):
                if algorithms is not None and name not in algorithms:
                    err = algorithms.unknown(name)
                    where = f"{op}[{i}]" if isinstance(choice, list) else op
                    raise FieldRuleError(where, err.rule, name, hint=err.hint)
        return value

    @field_validator("chunks", "active_chunks_per_dimension", "max_messages")
    @classmethod
    def _at_least_one(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("endpoint_delay")
    @classmethod
    def _delay(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"must not be negative, got {v:g} s")
        return v

    @field_validator("protocol_efficiency")
    @classmethod
    def _eff(cls, v: float) -> float:
        if not 0 < v <= 1:
            raise ValueError(f"must be in (0, 1], got {v:g}")
        return v


class Source(Strict):
    """Where a parameter's value comes from."""

    kind: Literal["paper", "datasheet", "astra-sim", "public-measurement", "assumption"]
    note: str


class ReproWorkload(Strict):
    """A workload of a paper reproduction and its per-NPU settings."""

    batch_per_npu: int | None = None
    dtype_bytes: int | None = None


class ReproductionConfig(Strict):
    """What a paper reproduction runs on this system (see acesim.experiments.reproduce)."""

    workloads: dict[str, ReproWorkload] = Field(default_factory=dict)
    npus: list[int] = Field(default_factory=lambda: [16, 32, 64, 128])
    iterations: int = 3
    sram_sizes: list[Bytes] = Field(default_factory=list, description="ACE SRAM sensitivity")
    membw_size: Bytes = Field(64 * 2**20, description="collective size of the membw analysis")


class SystemConfig(Strict):
    """A whole platform: NPUs, network, collective settings, endpoint."""

    name: str = "custom"
    description: str = ""
    npu: NPUConfig = Field(default_factory=defaults(NPUConfig))
    network: NetworkConfig
    collective: CollectiveConfig = Field(default_factory=defaults(CollectiveConfig))
    endpoint: EndpointConfig = Field(default_factory=defaults(EndpointConfig))
    sources: dict[str, Source] = Field(default_factory=dict)
    reproduction: ReproductionConfig | None = None

    @model_validator(mode="after")
    def _endpoint_rules(self) -> SystemConfig:
        # Each endpoint kind checks its own settings against the rest of the system.
        for name, schema in ENDPOINT_SETTINGS.items():
            if schema.check is None:
                continue
            try:
                schema.check(self.endpoint.settings(name), self)
            except ConfigError as err:
                raise FieldRuleError(err.field, err.rule, err.value, hint=err.hint) from None
        return self

    def with_endpoint(self, kind: str | None = None, **changes: object) -> SystemConfig:
        """A copy whose endpoint is ``kind`` (default: unchanged) with ``changes`` applied to
        that kind's settings (``comm_units=4``): the one way endpoint variants are derived."""
        copy = self.model_copy(deep=True)
        if kind is not None:
            copy.endpoint.kind = kind
        if changes:
            settings = copy.endpoint.settings()
            for name, value in changes.items():
                if name not in type(settings).model_fields:
                    raise ConfigError(
                        f"endpoint.{copy.endpoint.kind}.{name}", "unknown setting", value
                    )
                setattr(settings, name, value)
        return copy

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimension sizes of the network."""
        return self.network.shape
