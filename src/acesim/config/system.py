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

from .errors import FieldRuleError
from .quantities import Bytes, BytesPerSecond, FlopsPerSecond, Seconds

DimensionKind = Literal["ring", "fully_connected", "switch"]
Algorithm = Literal["ring", "direct", "halving_doubling", "double_binary_tree"]
CollectiveOp = Literal["all-reduce", "reduce-scatter", "all-gather", "all-to-all"]
COLLECTIVE_OPS: tuple[str, ...] = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")


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
                f"must equal the product of dimension sizes {shape} = {product}, "
                f"got {self.npus}",
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

    algorithms: dict[CollectiveOp, Algorithm | list[Algorithm]] = Field(
        default_factory=dict,
        description="per op: one algorithm for all dimensions or one per dimension; "
        "default ring, and direct for all-to-all on switch/fully-connected dimensions",
    )
    composition: Literal["hierarchical", "per_dimension"] = "hierarchical"
    chunks: int = Field(4, description="chunks a collective is split into (dataset splits)")
    active_chunks_per_dimension: int = Field(1, description="cap on chunks in flight per dim")
    scheduling: Literal["fifo", "lifo"] = "fifo"
    endpoint_delay: Seconds = Field(10e-9, description="fixed per-message endpoint delay, s")
    protocol_efficiency: float = Field(
        1.0, description="fraction of link bandwidth carrying payload (protocol overhead)"
    )

    @field_validator("chunks", "active_chunks_per_dimension")
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


class BaselineSplit(Strict):
    """One resource split between communication and compute, for best-baseline searches."""

    comm_units: int = Field(description="compute units held by collective kernels")
    hbm_share: float | None = Field(
        None, description="static policy: fraction of HBM for comm (None = keep the default)"
    )
    hbm_weight: float | None = Field(
        None, description="fair policy: comm's max-min weight (None = keep the default)"
    )

    @field_validator("comm_units")
    @classmethod
    def _units(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v


class BaselineEndpointConfig(Strict):
    """NCCL-like collectives running as kernels on the NPU's own compute units."""

    comm_units: int = Field(8, description="compute units the collective kernels hold")
    unit_policy: Literal["while_active", "reserved"] = Field(
        "while_active", description="units held only while a collective runs, or for the run"
    )
    unit_bandwidth: BytesPerSecond = Field(
        50e9, description="network bytes/s one comm unit can drive"
    )
    hbm_sharing: Literal["static", "fair"] = Field(
        "fair", description="static: comm gets hbm_share of HBM; fair: weighted max-min"
    )
    hbm_share: float = Field(0.25, description="static policy: fraction of HBM for comm")
    hbm_weight: float = Field(1.0, description="fair policy: comm's max-min weight vs compute")
    reduce_hbm_bytes_per_byte: float = Field(5.0, description="reduce-scatter step")
    gather_hbm_bytes_per_byte: float = Field(2.0, description="all-gather step")
    alltoall_hbm_bytes_per_byte: float = Field(2.0, description="all-to-all step")
    reduction_flops_per_byte: float = Field(0.25, description="FP32 add: 1 FLOP per 4 bytes")
    splits: list[BaselineSplit] = Field(
        default_factory=list,
        description="splits tried when searching the best baseline (empty: the one above)",
    )

    @field_validator("comm_units")
    @classmethod
    def _units(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be at least 1, got {v}")
        return v

    @field_validator("unit_bandwidth")
    @classmethod
    def _ubw(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g} B/s")
        return v

    @field_validator("hbm_share")
    @classmethod
    def _share(cls, v: float) -> float:
        if not 0 < v < 1:
            raise ValueError(f"must be in (0, 1), got {v:g}")
        return v

    @field_validator(
        "hbm_weight",
        "reduce_hbm_bytes_per_byte",
        "gather_hbm_bytes_per_byte",
        "alltoall_hbm_bytes_per_byte",
    )
    @classmethod
    def _pos(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g}")
        return v

    @field_validator("reduction_flops_per_byte")
    @classmethod
    def _nonneg(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"must not be negative, got {v:g}")
        return v


class AceEndpointConfig(Strict):
    """The Accelerator Collectives Engine: SRAM, ALUs and DMA beside the network interface."""

    sram: Bytes = Field(4 * 2**20, description="SRAM buffer, bytes")
    alu_bandwidth: BytesPerSecond = Field(1.6e12, description="reduction throughput, B/s")
    dma_bandwidth: BytesPerSecond = Field(500e9, description="HBM<->SRAM DMA, B/s")
    split_chunks: bool = Field(
        True, description="split chunks into pieces of at most sram/2 (two in flight)"
    )
    allow_spill: bool = Field(
        True, description="without splitting: chunks larger than SRAM spill to HBM"
    )
    spill_hbm_bytes_per_byte: float = Field(
        2.0, description="extra HBM bytes per network byte of a spilled chunk (write+read back)"
    )

    @field_validator("sram", "alu_bandwidth", "dma_bandwidth")
    @classmethod
    def _pos(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be positive, got {v:g}")
        return v


class EndpointConfig(Strict):
    """Which collective endpoint runs the local part of collectives, and its parameters."""

    kind: Literal["baseline", "ace", "ideal"] = "ideal"
    baseline: BaselineEndpointConfig = Field(default_factory=defaults(BaselineEndpointConfig))
    ace: AceEndpointConfig = Field(default_factory=defaults(AceEndpointConfig))


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
        base = self.endpoint.baseline
        for i, split in enumerate(base.splits):
            if split.comm_units >= self.npu.compute_units:
                raise FieldRuleError(
                    f"endpoint.baseline.splits[{i}].comm_units",
                    f"must be fewer than npu.compute_units ({self.npu.compute_units}), "
                    f"got {split.comm_units}",
                )
            if split.hbm_weight is not None and not split.hbm_weight > 0:
                raise FieldRuleError(
                    f"endpoint.baseline.splits[{i}].hbm_weight",
                    f"must be positive, got {split.hbm_weight:g}",
                )
            if split.hbm_share is not None and not 0 < split.hbm_share < 1:
                raise FieldRuleError(
                    f"endpoint.baseline.splits[{i}].hbm_share",
                    f"must be in (0, 1), got {split.hbm_share:g}",
                )
        if base.comm_units >= self.npu.compute_units:
            raise FieldRuleError(
                "endpoint.baseline.comm_units",
                f"must be fewer than npu.compute_units ({self.npu.compute_units}), "
                f"got {base.comm_units}",
            )
        return self
