"""The system document: NPU, network, collective settings and collective endpoint.

Every physical field accepts a unit string ("900 GB/s") or a number in SI base units. Unknown
keys are rejected with a did-you-mean hint. The ``sources`` table records, for any dotted field
path, where its value comes from (paper, datasheet, ASTRA-sim input, or an assumption with its
reason); :func:`acesim.config.presets.assumptions` lists them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError
from ..precision import DTYPES
from ..registry import listed
from .endpoint import ENDPOINT_SETTINGS, EndpointConfig
from .errors import FieldRuleError, config_error_from
from .power import LinkPowerConfig, NPUPowerConfig, check_link_power, check_npu_power
from .provenance import Provenance
from .strict import Strict as Strict
from .validators import (
    MAX_NPUS,
    DimensionSize,
    NonNegativeFloat,
    NonNegativeSeconds,
    NpuCount,
    PositiveBytes,
    PositiveBytesPerSecond,
    PositiveFlopsPerSecond,
    PositiveFraction,
    PositiveInt,
    PrecisionName,
    at_least,
    dtype_table,
    real_number,
    show_number,
)

#: a ratio of at least 1 (a leaf switch's downlink to uplink bandwidth)
AtLeastOne = Annotated[float, BeforeValidator(real_number()), AfterValidator(at_least(1))]

DimensionKind = Literal["ring", "fully_connected", "switch"]


M = TypeVar("M", bound=BaseModel)


def defaults(model: type[M]) -> Callable[[], M]:
    """A ``default_factory`` building ``model`` with every field at its default (typed for mypy,
    which cannot check a bare model class against pydantic's factory signature)."""
    return lambda: model.model_validate({})


class KernelModelConfig(Strict):
    """How close kernels come to the NPU's peaks (``[npu.kernels]``; see
    :mod:`acesim.hardware.kernel_model`). The defaults are an ideal machine: every kernel at
    its roofline, no tile, no latency. Presets give measured values with their sources."""

    gemm_efficiency: PositiveFraction | dict[str, PositiveFraction] = Field(
        1.0,
        description="fraction of the matrix peak a large GEMM's full waves sustain: one for "
        "every dtype, or a table per math dtype (CUDA-core and tensor-core GEMMs differ)",
    )
    attention_efficiency: PositiveFraction = Field(
        1.0, description="fraction of the matrix peak fused (Flash) attention's forward sustains"
    )
    attention_backward_efficiency: PositiveFraction | None = Field(
        None,
        description="fraction of the matrix peak fused attention's backward sustains "
        "(None: the forward's)",
    )
    attention_block_overhead: NonNegativeFloat = Field(
        0.0,
        description="fixed cost of each fused-attention forward thread-block beside its tile "
        "iterations (prologue: Q tile load, pipeline fill; epilogue: pipeline drain, normalise "
        "and write O and the log-sum-exp), in iterations of its main loop; the backward's too "
        "when attention_backward_block_overhead is unset",
    )
    attention_backward_block_overhead: NonNegativeFloat | None = Field(
        None,
        description="fixed cost of each fused-attention backward thread-block beside its tile "
        "iterations (K/V tile load, pipeline fill and drain, dK/dV write, its share of the "
        "preprocessing and dQ conversion kernels), in iterations of its main loop (None: the "
        "forward's)",
    )
    tile: tuple[PositiveInt, PositiveInt] | None = Field(
        None,
        description="GEMM output tile [rows, cols] one compute unit computes at a time (the "
        "tile the NPU's GEMM library uses for large problems); None: no tiling (no waves)",
    )
    hbm_efficiency: PositiveFraction = Field(
        1.0, description="fraction of hbm_bandwidth a streaming read sustains"
    )
    write_penalty: NonNegativeFloat = Field(
        0.0, description="extra HBM time of a written byte over a read byte (bus turnaround)"
    )
    latency: NonNegativeSeconds = Field(
        0.0, description="fixed time of every kernel (launch, fill and drain), s"
    )
    unit_hbm_bandwidth: PositiveBytesPerSecond | None = Field(
        None, description="most HBM B/s one compute unit can draw (None: no limit)"
    )

    @field_validator("gemm_efficiency")
    @classmethod
    def _gemm_dtypes(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        if isinstance(value, dict):
            if not value:
                raise ValueError("must give at least one dtype's efficiency")
            for name in value:
                if name not in DTYPES:
                    err = DTYPES.unknown(name)
                    raise FieldRuleError(name, f"unknown dtype; {err.rule}", hint=err.hint)
        return value

    def gemm_efficiency_for(self, dtype: str) -> float:
        """The GEMM efficiency of math in ``dtype``; ConfigError when a table lacks it."""
        if not isinstance(self.gemm_efficiency, dict):
            return self.gemm_efficiency
        try:
            return self.gemm_efficiency[dtype]
        except KeyError:
            raise ConfigError(
                f"npu.kernels.gemm_efficiency.{dtype}",
                f"the table lists no {dtype} efficiency (it lists "
                f"{', '.join(self.gemm_efficiency)})",
            ) from None


class NPUConfig(Strict):
    """One accelerator: compute units, their peak rates per dtype, HBM."""

    name: str = "npu"
    compute_units: PositiveInt = Field(108, description="SM-like units")
    matrix_flops: dict[str, PositiveFlopsPerSecond] = Field(
        default_factory=lambda: {"fp32": 124.2e12},
        description="dense matrix (tensor-core) peak FLOP/s of the whole NPU per math dtype "
        "(fp64, fp32, tf32, bf16, fp16, fp8); a kernel in a dtype not listed cannot run",
    )
    vector_flops: PositiveFlopsPerSecond = Field(
        124.2e12, description="FP32 peak FLOP/s of the non-matrix units (element-wise math)"
    )
    hbm_bandwidth: PositiveBytesPerSecond = Field(900e9, description="HBM bandwidth, B/s")
    hbm_capacity: PositiveBytes = Field(32 * 2**30, description="HBM capacity, bytes")
    host_link_bandwidth: PositiveBytesPerSecond | None = Field(
        None,
        description="the link to the host (PCIe, NVLink-C2C), one direction, B/s; host-device "
        "copies run on the copy engines over it; None: not modelled (host copies refused)",
    )
    host_memory_bandwidth: PositiveBytesPerSecond | None = Field(
        None,
        description="this NPU's share of its host CPU's memory bandwidth, B/s: what bounds a "
        "CPU optimizer step (optimizer offload); None: not modelled (optimizer offload refused)",
    )
    hbm_arbitration: Literal["mlp", "drf"] = Field(
        "mlp",
        description="how HBM is shared: mlp (in proportion to each party's memory-level "
        "parallelism: its compute units or engine) or drf (dominant-resource fairness)",
    )
    kernels: KernelModelConfig = Field(
        default_factory=defaults(KernelModelConfig), description="[npu.kernels] below"
    )
    power: NPUPowerConfig | None = Field(
        None,
        description="[npu.power] below: the power model's coefficients (acesim.hardware.power); "
        "None: no energy figures",
    )

    _dtypes = field_validator("matrix_flops")(dtype_table("peak"))

    @model_validator(mode="after")
    def _peak_finite(self) -> NPUConfig:
        # Per-unit rates are peaks over units; the rates times the units must stay finite.
        rates = [(f"matrix_flops.{d}", v) for d, v in self.matrix_flops.items()]
        for where, rate in [*rates, ("vector_flops", self.vector_flops)]:
            if not math.isfinite(self.compute_units * rate):
                raise FieldRuleError(
                    where,
                    f"times compute_units ({self.compute_units}) must be a finite FLOP/s, "
                    f"got {show_number(rate, 'FLOP/s')}",
                )
        check_npu_power(self.power, list(self.matrix_flops))
        return self

    def matrix_peak(self, dtype: str) -> float:
        """Dense matrix peak FLOP/s for math in ``dtype``; ConfigError when not listed."""
        try:
            return self.matrix_flops[dtype]
        except KeyError:
            raise ConfigError(
                f"npu.matrix_flops.{dtype}",
                f"this NPU ({self.name}) lists no {dtype} matrix peak (it lists "
                f"{', '.join(self.matrix_flops)}); choose a precision it supports",
            ) from None

    def require_matrix(self, dtype: str, field: str) -> None:
        """ConfigError naming ``field`` (where ``dtype`` came from) when no peak is listed."""
        if dtype not in self.matrix_flops:
            raise ConfigError(
                field,
                f"{self.name} has no {dtype} matrix peak; it has {', '.join(self.matrix_flops)}",
                dtype,
            )

    @property
    def peak_flops(self) -> float:
        """Highest matrix peak FLOP/s of the whole NPU (any dtype)."""
        return max(self.matrix_flops.values())


def _check_egress(link_bandwidth: float, links_per_npu: int) -> None:
    """The egress of a dimension (links times their bandwidth) is a finite B/s."""
    if not math.isfinite(link_bandwidth * links_per_npu):
        raise FieldRuleError(
            "link_bandwidth",
            f"times links_per_npu ({links_per_npu}) must be a finite B/s, "
            f"got {show_number(link_bandwidth, 'B/s')}",
        )


def _check_switch_reduction(kind: str, switch_reduction: bool) -> None:
    """Only a switch reduces in the network."""
    if switch_reduction and kind != "switch":
        raise FieldRuleError(
            "switch_reduction", f"applies only to a switch dimension, got kind {kind!r}", True
        )


def _check_leaves(
    kind: str, size: int | None, leaf_size: int | None, oversubscription: float
) -> None:
    """A leaf/spine fabric is a switch; its leaves tile the dimension."""
    if leaf_size is None:
        if oversubscription != 1.0:
            raise FieldRuleError(
                "oversubscription",
                "needs leaf_size (the nodes under one leaf switch)",
                oversubscription,
            )
        return
    if kind != "switch":
        raise FieldRuleError("leaf_size", f"applies only to a switch dimension, got {kind!r}")
    if size is not None and size > leaf_size and size % leaf_size:
        raise FieldRuleError(
            "leaf_size", f"must divide the dimension's size {size} (whole leaves)", leaf_size
        )


# The GPU-NIC path of a network dimension: the same five facts on a [network.dimensions]
# entry and on [scale_out] (which becomes one), each described once here.
NicEfficiency = Annotated[
    PositiveFraction,
    Field(
        description="network dimensions: the fraction of the NICs' payload rate NCCL's network "
        "proxy sustains (one proxy thread per GPU posts every channel's sends: a per-NPU "
        "resource of links x bandwidth x efficiency x this / npus_per_link that every send "
        "takes); 1: the NIC's whole payload rate",
    ),
]
NetOverhead = Annotated[
    NonNegativeSeconds,
    Field(
        description="network dimensions: NCCL's network overhead per ring step, s (getNetOverhead "
        "in src/graph/tuning.cc: 1 us with Intel host CPUs, 2 us with AMD; three times that "
        "for Simple): on a ring through several nodes every step's latency is at least it",
    ),
]
PcieBandwidth = Annotated[
    PositiveBytesPerSecond | None,
    Field(
        description="network dimensions: one NIC's PCIe link to the PCIe switch it shares with "
        "its GPUs, one direction, B/s (Gen4 x16: 32 GB/s, Gen5 x16: 64 GB/s); every byte a GPU "
        "sends or receives through its NIC crosses it, and with it the GPU's own PCIe link "
        "(npu.host_link_bandwidth, shared with host copies); None: the PCIe path is not "
        "modelled",
    ),
]
PcieEfficiency = Annotated[
    PositiveFraction,
    Field(
        description="the payload fraction of the PCIe links on the GPU-NIC path (TLP and "
        "DLLP overhead); with pcie_bandwidth",
    ),
]
PortsPerNic = Annotated[
    PositiveInt,
    Field(
        description="network ports (links) that share one NIC's PCIe link (a dual-port card: "
        "2); each NPU's share of the PCIe path is pcie_bandwidth x pcie_efficiency x "
        "links_per_npu / (ports_per_nic x npus_per_link)",
    ),
]


class DimensionConfig(Strict):
    """One network dimension as seen from an NPU."""

    name: str | None = Field(
        None, description="unique; default local, vertical, horizontal, then dim3, dim4 ..."
    )
    kind: DimensionKind = "ring"
    size: DimensionSize = Field(
        description="NPUs along this dimension (at most 2**20, MAX_DIMENSION_SIZE)"
    )
    link_bandwidth: PositiveBytesPerSecond = Field(description="one link, one direction, B/s")
    link_latency: NonNegativeSeconds = Field(0.0, description="per message, s")
    links_per_npu: PositiveInt = Field(1, description="links of this dimension at each NPU")
    switch_reduction: bool = Field(
        False,
        description="the switch reduces in the network (NVLink SHARP on NVSwitch from H100 on, "
        "SHARP on InfiniBand): in-switch algorithms may run here (nvls and nvls_tree in a "
        "node, collnet on a network dimension); switch dimensions only",
    )
    efficiency: PositiveFraction | None = Field(
        None,
        description="fraction of this dimension's link bandwidth carrying payload (its link "
        "type's protocol efficiency); None: collective.protocol_efficiency",
    )
    incast_fan_in: PositiveInt | None = Field(
        None,
        description="the most peers a switch port takes writes from at once at full rate; a "
        "step with more writers per receiver (a direct step's p-1, a wave's copies) runs at "
        "incast_efficiency; None: no incast loss; switch dimensions only",
    )
    incast_efficiency: PositiveFraction = Field(
        1.0,
        description="fraction of the links' bandwidth a step with more than incast_fan_in "
        "writers per receiver delivers (switch output-port congestion)",
    )
    npus_per_link: PositiveInt = Field(
        1,
        description="NPUs that share each of these links (a NIC serving two GPUs: 2; NICs per "
        "GPU below one); each NPU's egress and ingress are its share, links x bandwidth / this "
        "(exact when the NPUs behind a link all send at once, as collectives over whole nodes "
        "do)",
    )
    nic_efficiency: NicEfficiency = 1.0
    net_overhead: NetOverhead = 0.0
    pcie_bandwidth: PcieBandwidth = None
    pcie_efficiency: PcieEfficiency = 1.0
    ports_per_nic: PortsPerNic = 1
    network: bool = Field(
        False,
        description="its links are NICs on a scale-out network (InfiniBand/RoCE) rather than "
        "a scale-up fabric: NCCL's network step latencies (collective.protocols.*.*."
        "net_hop_latency) apply to its steps; set on the [scale_out] dimension of --nodes",
    )
    leaf_size: PositiveInt | None = Field(
        None,
        description="switch dimensions: coordinates (nodes) under one leaf switch of a "
        "leaf/spine fabric (per rail on a rail-optimised one); messages between leaves cross "
        "the spine (oversubscription); None: one non-blocking switch",
    )
    oversubscription: AtLeastOne = Field(
        1.0,
        description="a leaf's downlink over uplink bandwidth (2: a 2:1 oversubscribed fabric): "
        "the leaf's traffic to other leaves shares 1/oversubscription of its NPUs' links",
    )
    power: LinkPowerConfig | None = Field(
        None, description="its links', switches' or NICs' power (acesim.hardware.power)"
    )

    @model_validator(mode="after")
    def _egress_finite(self) -> DimensionConfig:
        _check_egress(self.link_bandwidth, self.links_per_npu)
        _check_switch_reduction(self.kind, self.switch_reduction)
        if self.incast_fan_in is not None and self.kind != "switch":
            raise FieldRuleError(
                "incast_fan_in",
                f"applies only to a switch dimension, got kind {self.kind!r}",
                self.incast_fan_in,
            )
        _check_leaves(self.kind, self.size, self.leaf_size, self.oversubscription)
        check_link_power(self.kind, self.power)
        if not self.network:
            _check_nic_fields(
                self.nic_efficiency, self.pcie_bandwidth, self.ports_per_nic, self.net_overhead
            )
        return self


def _check_nic_fields(
    nic_efficiency: float, pcie_bandwidth: float | None, ports: int, net_overhead: float
) -> None:
    """NIC and PCIe facts belong to network dimensions (the NICs between nodes)."""
    for name, value, default in (
        ("nic_efficiency", nic_efficiency, 1.0),
        ("pcie_bandwidth", pcie_bandwidth, None),
        ("ports_per_nic", ports, 1),
        ("net_overhead", net_overhead, 0.0),
    ):
        if value != default:
            raise FieldRuleError(
                name,
                "applies only to a network dimension (network = true: the NICs between "
                "nodes, as [scale_out] makes)",
                value,
            )


class HostConfig(Strict):
    """The host thread that issues each GPU's work (``[host]``; the model:
    :mod:`acesim.training.host`). Its time per kernel launch is ``op_time x ops_per_launch``;
    either None: host time not modelled."""

    op_time: NonNegativeSeconds | None = Field(
        None,
        description="host CPU time of one framework op on this system's host CPU, s (measured: "
        "a PyTorch op's CPU time, Python to the driver's launch); None: not modelled",
    )
    ops_per_launch: NonNegativeFloat | None = Field(
        None,
        description="host ops (of op_time each) the training framework spends per GPU kernel "
        "launch where the host cannot run ahead of the GPU (acesim.training.host); a property "
        "of the framework, not of the CPU; None: not modelled",
    )

    @property
    def launch_time(self) -> float | None:
        """Host time per kernel launch, s (None: not modelled)."""
        if self.op_time is None or self.ops_per_launch is None:
            return None
        return self.op_time * self.ops_per_launch


class ScaleOutConfig(Strict):
    """The network dimension that joins several nodes of this system (``[scale_out]``): a
    system resolved with ``nodes = N`` (``--nodes N``) gets it as its last dimension, of size N
    (see :mod:`acesim.config.scaleout`)."""

    name: str = Field("scaleout", description="name of the appended dimension")
    kind: DimensionKind = Field("switch", description="how the nodes are joined")
    link_bandwidth: PositiveBytesPerSecond = Field(
        description="one link (NIC port), one direction, B/s"
    )
    link_latency: NonNegativeSeconds = Field(0.0, description="per message, s")
    links_per_npu: PositiveInt = Field(1, description="scale-out links (NICs) at each NPU")
    npus_per_link: PositiveInt = Field(
        1,
        description="GPUs that share one NIC (NICs per GPU below one: 4 NICs for 8 GPUs is 2); "
        "each GPU's share is links_per_npu x link_bandwidth / this",
    )
    nic_efficiency: NicEfficiency = 1.0
    net_overhead: NetOverhead = 0.0
    pcie_bandwidth: PcieBandwidth = None
    pcie_efficiency: PcieEfficiency = 1.0
    ports_per_nic: PortsPerNic = 1
    switch_reduction: bool = Field(
        False,
        description="the scale-out switches reduce in the network (InfiniBand SHARP, NCCL's "
        "CollNet): collnet, and nvls over nodes (NVLS with SHARP), may run across the "
        "nodes; off by default (a deployment choice)",
    )
    efficiency: PositiveFraction | None = Field(
        None,
        description="fraction of the NICs' bandwidth carrying payload; None: "
        "collective.protocol_efficiency",
    )

    leaf_size: PositiveInt | None = Field(
        None,
        description="nodes under one leaf switch (per rail on a rail-optimised fabric); "
        "traffic between leaves crosses the spine; None: one non-blocking switch",
    )
    oversubscription: AtLeastOne = Field(
        1.0,
        description="a leaf's downlink over uplink bandwidth (2: 2:1 oversubscribed); needs "
        "leaf_size",
    )
    power: LinkPowerConfig | None = Field(
        None, description="its NICs', links' and switches' power (acesim.hardware.power)"
    )

    @model_validator(mode="after")
    def _egress_finite(self) -> ScaleOutConfig:
        _check_egress(self.link_bandwidth, self.links_per_npu)
        _check_switch_reduction(self.kind, self.switch_reduction)
        _check_leaves(self.kind, None, self.leaf_size, self.oversubscription)
        check_link_power(self.kind, self.power)
        return self


#: Names of dimensions 0, 1 and 2 without an explicit name; dimension i >= 3 is ``dim<i>``.
#: (The topology, acesim.network.topology, names its dimensions the same way.)
DEFAULT_DIMENSION_NAMES = ("local", "vertical", "horizontal")


def dimension_name(index: int, name: str | None = None) -> str:
    """The name of dimension ``index``: ``name`` if given, else its default."""
    if name:
        return name
    return DEFAULT_DIMENSION_NAMES[index] if index < len(DEFAULT_DIMENSION_NAMES) else f"dim{index}"


class NetworkConfig(Strict):
    """A multi-dimensional network; the NPU count is the product of the dimension sizes."""

    dimensions: list[DimensionConfig]
    npus: NpuCount | None = Field(
        None, description="optional check: must equal the product of sizes"
    )

    @field_validator("dimensions")
    @classmethod
    def _nonempty(cls, v: list[DimensionConfig]) -> list[DimensionConfig]:
        if not v:
            raise ValueError("must list at least one dimension")
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> NetworkConfig:
        # Names are unique, default names included (a dimension named "local" beside an unnamed
        # dimension 0). The explicit name of a clash is reported, the later one if both are.
        seen: dict[str, int] = {}
        for i, dim in enumerate(self.dimensions):
            name = dimension_name(i, dim.name)
            if name not in seen:
                seen[name] = i
                continue
            j = seen[name]
            at, other = (j, i) if dim.name is None else (i, j)
            default = "" if self.dimensions[other].name else " (its default)"
            raise FieldRuleError(
                f"dimensions[{at}].name",
                f"must be unique, {name!r} is also dimensions[{other}]'s name{default}",
            )
        return self

    @model_validator(mode="after")
    def _count(self) -> NetworkConfig:
        shape = "x".join(str(d.size) for d in self.dimensions)
        product = 1
        for dim in self.dimensions:
            product *= dim.size
            if product > MAX_NPUS:
                raise FieldRuleError(
                    "dimensions",
                    f"must hold at most 2**32 = {MAX_NPUS} NPUs in all (the product of the "
                    f"sizes), got {shape}",
                )
        if self.npus is not None and self.npus != product:
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


#: NCCL's protocols (NCCL_PROTO names), in the tuner's order.
PROTOCOLS = ("LL", "LL128", "Simple")
#: Algorithms restricted to some protocols: NCCL runs NVLS (in-switch reduction) with Simple
#: only (its tuner skips LL and LL128 for NVLS), and so NVLS_TREE; CollNet runs Simple only
#: (NCCL 2.18.5 tuning.cc: CollNet's LL and LL128 bandwidths are 0, "not used").
PROTOCOLS_OF_ALGORITHM = {
    "nvls": ("Simple",),
    "nvls_tree": ("Simple",),
    "collnet": ("Simple",),
}


class ProtocolConfig(Strict):
    """One NCCL protocol of one algorithm: its bandwidth and its latency (docs/model.md)."""

    bandwidth: PositiveFraction = Field(
        description="fraction of the algorithm's efficiency it carries: LL 0.5 (an 8-byte "
        "flag per 8 data bytes), LL128 120/128 (8 flag bytes per 128-byte line), Simple 1.0"
    )
    base_latency: NonNegativeSeconds = Field(
        0.0, description="latency paid once per collective, s (NCCL's base latency)"
    )
    hop_latency: NonNegativeSeconds = Field(
        description="per-message delay of the algorithm's steps, s, in place of "
        "endpoint_delay / nvls_delay (NCCL's per-step hardware latency)"
    )
    net_hop_latency: NonNegativeSeconds | None = Field(
        None,
        description="per-message delay of its steps across a network dimension (network = "
        "true: NICs between nodes), s (NCCL's hwLat[NET]); None: hop_latency",
    )


class CollectiveConfig(Strict):
    """How collectives are decomposed and scheduled."""

    algorithms: dict[str, str | list[str]] = Field(
        default_factory=dict,
        description="per collective op: one algorithm for all dimensions or one per dimension; "
        "default ring, and direct for all-to-all on switch/fully-connected dimensions "
        "(names: the registries of acesim.network; checked when the platform is elaborated)",
    )
    choices: dict[str, list[str]] = Field(
        default_factory=dict,
        description="per collective op, the algorithms NCCL's tuner chooses among for each "
        "collective (the fastest predicted; each applies on the dimensions it can run on, the "
        "others keep collective.algorithms), e.g. { all-reduce = ['ring', 'nvls'] }",
    )
    algorithm: str | None = Field(
        None,
        description="force this algorithm (NCCL_ALGO) for every operation that lists it in "
        "collective.choices; None: the fastest predicted",
    )
    composition: Literal["hierarchical", "per_dimension"] = "hierarchical"
    chunks: PositiveInt = Field(4, description="chunks a collective is split into (dataset splits)")
    active_chunks_per_dimension: PositiveInt = Field(
        1, description="cap on chunks in flight per dim"
    )
    scheduling: Literal["fifo", "lifo"] = "fifo"
    priorities: Literal["blocking_first", "none"] = Field(
        "blocking_first",
        description="waiting chunks of collectives the training loop blocks on go first "
        "(ASTRA-sim issues blocking collectives at the highest priority); none: fifo/lifo only",
    )
    endpoint_delay: NonNegativeSeconds = Field(
        10e-9, description="fixed per-message endpoint delay, s"
    )
    protocol_efficiency: PositiveFraction = Field(
        1.0, description="fraction of link bandwidth carrying payload (protocol overhead)"
    )
    nvls_efficiency: PositiveFraction | None = Field(
        None,
        description="fraction of link bandwidth carrying payload in NVLS (in-switch reduction) "
        "steps, in place of protocol_efficiency (None: protocol_efficiency)",
    )
    nvls_delay: NonNegativeSeconds | None = Field(
        None,
        description="per-message delay of NVLS steps, s, in place of endpoint_delay "
        "(None: endpoint_delay)",
    )
    nvls_chunk_bytes: PositiveBytes = Field(
        131072,
        description="NVLS chunk size, bytes (NCCL_NVLS_CHUNKSIZE, 128 KiB in NCCL 2.18-2.27): "
        "the largest chunk; smaller buffers use smaller chunks by NCCL's rule "
        "(acesim.network.plan.nvls_chunk)",
    )
    nvls_loop_latency: NonNegativeSeconds = Field(
        0.0,
        description="NVLS synchronisation per NCCL loop, s: each loop moves nvls_channels x p x "
        "chunk bytes of the buffer (its scatter, switch reduce-multicast and gather warps "
        "hand over through flags once per loop); 0: none",
    )
    nvls_stages: PositiveInt | None = Field(
        None,
        description="pipeline stages of NCCL's NVLS kernel per channel (3 on one node: its "
        "scatter, reduce-multicast and gather warps); set, an NVLS all-reduce of L loops takes "
        "(L + stages - 1) stage times, a stage being nvls_loop_latency plus one channel's "
        "bytes of a loop at 1/nvls_channels of the NVLS bandwidth "
        "(acesim.network.plan.nvls_pipeline_latency); None: L x nvls_loop_latency",
    )
    chain_piece_bytes: PositiveBytes = Field(
        8 * 1024 * 1024,
        description="bytes a broadcast or reduce ring chain moves per pipeline step, over all "
        "its channels: NCCL's Simple chunk of one step per channel (512 KiB: NCCL_BUFFSIZE "
        "4 MiB / NCCL_STEPS 8, BROADCAST_CHUNKSTEPS 1) times 16 channels (the channel count "
        "is an assumption: NCCL picks it per system); a buffer of D goes in ceil(D / piece) "
        "pieces (acesim.network.algorithms.chain_steps)",
    )
    nvls_channels: PositiveInt = Field(
        16,
        description="channels of an NVLS collective (NCCL_NVLS_NCHANNELS; its loops move "
        "nvls_channels x p x chunk bytes)",
    )
    nvls_layout: Literal["fill_channels", "spread"] = Field(
        "fill_channels",
        description="how NCCL lays an NVLS buffer out over its channels, by NCCL version: "
        "fill_channels (NCCL 2.17-2.19: channel b takes the b-th p x chunk of each loop, so a "
        "small buffer fills channel 0 first; all_reduce.h) or spread (NCCL 2.20-2.21: every "
        "channel an equal 4 KiB-aligned share, enqueue.cc addCBDCollToPlan); sets the bytes "
        "of the busiest channel's loop in the nvls_stages pipeline "
        "(acesim.network.plan.nvls_channel_loop)",
    )
    protocols: dict[str, dict[str, ProtocolConfig]] = Field(
        default_factory=dict,
        description="per algorithm, its NCCL protocols (LL, LL128, Simple): each collective "
        "runs the one predicted fastest (latency + bytes / bandwidth); algorithms not listed "
        "run as without protocols (endpoint_delay, protocol_efficiency)",
    )
    protocol: str | None = Field(
        None, description="force this protocol (NCCL_PROTO) where configured; None: the fastest"
    )
    max_messages: PositiveInt = Field(
        5_000_000,
        description="bound on the messages one collective may send (all simulated NPUs) on "
        "the event path (exact mode's lockstep backend computes its collectives without "
        "them, bounded by their steps): a limit on work, about 4 minutes of simulation at "
        "the 4.9e-5 s a message measured for exact-mode collectives (acesim.runs.estimate); "
        "raise it knowingly",
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

    @field_validator("choices")
    @classmethod
    def _choices(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        ops, algorithms = listed("collective operation"), listed("algorithm")
        for op, names in value.items():
            if ops is not None and op not in ops:
                err = ops.unknown(op)
                raise FieldRuleError(op, f"unknown collective operation; {err.rule}", hint=err.hint)
            if not names:
                raise FieldRuleError(op, "must list at least one algorithm", names)
            if len(set(names)) != len(names):
                raise FieldRuleError(op, "must not list an algorithm twice", names)
            for i, name in enumerate(names):
                if algorithms is not None and name not in algorithms:
                    err = algorithms.unknown(name)
                    raise FieldRuleError(f"{op}[{i}]", err.rule, name, hint=err.hint)
        return value

    @field_validator("algorithm")
    @classmethod
    def _forced_algorithm(cls, value: str | None) -> str | None:
        algorithms = listed("algorithm")
        if value is not None and algorithms is not None and value not in algorithms:
            err = algorithms.unknown(value)
            raise FieldRuleError("", err.rule, value, hint=err.hint)
        return value

    @field_validator("protocols")
    @classmethod
    def _protocols(
        cls, value: dict[str, dict[str, ProtocolConfig]]
    ) -> dict[str, dict[str, ProtocolConfig]]:
        algorithms = listed("algorithm")
        for algo, table in value.items():
            if algorithms is not None and algo not in algorithms:
                err = algorithms.unknown(algo)
                raise FieldRuleError(algo, err.rule, algo, hint=err.hint)
            allowed = PROTOCOLS_OF_ALGORITHM.get(algo, PROTOCOLS)
            if not table:
                raise FieldRuleError(algo, "must list at least one protocol", table)
            for name in table:
                if name not in allowed:
                    raise FieldRuleError(
                        f"{algo}.{name}", f"must be one of {', '.join(allowed)}", name
                    )
        return value

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: str | None) -> str | None:
        if value is not None and value not in PROTOCOLS:
            raise FieldRuleError("", f"must be one of {', '.join(PROTOCOLS)}", value)
        return value


#: Source kinds that are assumptions: stated outright, or a value fitted on another system and
#: carried here by a transfer rule (``acesim.validation.transfer``). Outputs count both.
ASSUMED_KINDS = ("assumption", "transfer")


class Source(Strict):
    """Where a parameter's value comes from: ``fit`` on this preset's own validation rows (the
    note names them), ``transfer`` from other presets' fits by a named rule of
    ``acesim.validation.transfer`` (the note names the rule), ``override`` (a ``--set`` or
    ``overrides=`` value, the note naming what the source had said), or a paper, datasheet,
    ASTRA-sim setting, public measurement, or assumption."""

    kind: Literal[
        "paper",
        "datasheet",
        "astra-sim",
        "public-measurement",
        "fit",
        "transfer",
        "assumption",
        "override",
    ]
    note: str

    @property
    def assumed(self) -> bool:
        """An assumption (outright, or carried from another system's fit)."""
        return self.kind in ASSUMED_KINDS


class ReproWorkload(Strict):
    """A workload of a paper reproduction and its per-NPU settings."""

    batch_per_npu: PositiveInt | None = None
    precision: PrecisionName = Field(
        None, description="training precision (acesim.precision.PRECISIONS; None: the model's)"
    )


class ReproductionConfig(Strict):
    """What a paper reproduction runs on this system (see acesim.studies.reproduce)."""

    workloads: dict[str, ReproWorkload] = Field(default_factory=dict)
    npus: list[NpuCount] = Field(default_factory=lambda: [16, 32, 64, 128])
    iterations: PositiveInt = 3
    sram_sizes: list[PositiveBytes] = Field(
        default_factory=list, description="ACE SRAM sensitivity"
    )
    membw_size: PositiveBytes = Field(
        64 * 2**20, description="collective size of the membw analysis"
    )


class SystemConfig(Strict):
    """A whole platform: NPUs, network, collective settings, endpoint."""

    name: str = Field("custom", description="the system's name, echoed in every result")
    description: str = Field("", description="one line for `acesim presets`")
    npu: NPUConfig = Field(default_factory=defaults(NPUConfig), description="[npu] below")
    network: NetworkConfig = Field(description="[network] below")
    collective: CollectiveConfig = Field(
        default_factory=defaults(CollectiveConfig), description="[collective] below"
    )
    endpoint: EndpointConfig = Field(
        default_factory=defaults(EndpointConfig), description="[endpoint] below"
    )
    sources: dict[str, Source] = Field(
        default_factory=dict, description="where each value comes from ([sources] below)"
    )
    reproduction: ReproductionConfig | None = Field(
        None, description="[reproduction] below; also the system's settings per zoo workload"
    )
    scale_out: ScaleOutConfig | None = Field(
        None, description="[scale_out] below: how N nodes of this system join (--nodes N)"
    )
    host: HostConfig = Field(
        default_factory=defaults(HostConfig),
        description="[host] below: the host thread issuing each GPU's launches",
    )
    #: how the system was made (not part of the document; :mod:`acesim.config.provenance`)
    _provenance: Provenance = PrivateAttr(default_factory=Provenance)

    @property
    def provenance(self) -> Provenance:
        """The document, ``extends`` chain, NPU preset and overrides this system was made
        from (:func:`acesim.config.resolve.resolve_system` records them)."""
        return self._provenance

    def __eq__(self, other: object) -> bool:
        """Systems are equal when their documents are, however each was made."""
        if not isinstance(other, SystemConfig):
            return NotImplemented
        return self.__dict__ == other.__dict__ and self.__pydantic_extra__ == (
            other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as every pydantic model

    def with_provenance(self, provenance: Provenance) -> SystemConfig:
        """This system, recorded as made from ``provenance`` (the same object, changed)."""
        self._provenance = provenance
        return self

    @model_validator(mode="after")
    def _endpoint_rules(self) -> SystemConfig:
        # Each endpoint kind checks its own settings against the rest of the system.
        for name, schema in ENDPOINT_SETTINGS.items():
            if schema.check is None:
                continue
            try:
                schema.check(self.endpoint.checked_settings(name), self)
            except ConfigError as err:
                raise FieldRuleError(err.field, err.rule, err.value, hint=err.hint) from None
        return self

    def with_endpoint(self, kind: str | None = None, **changes: object) -> SystemConfig:
        """A copy whose endpoint is ``kind`` (default: unchanged) with ``changes`` applied to
        that kind's settings (``comm_units=4``): the one way endpoint variants are derived."""
        # a shallow copy sharing every section but the endpoint's, which alone is changed (a
        # whole deep copy was most of the call's cost; no section is changed in place after
        # validation), the fields set as they were
        copy = self.model_copy()
        copy.__dict__["endpoint"] = self.endpoint.model_copy(deep=True)
        if kind is not None:
            try:
                copy.endpoint.kind = kind
            except ValidationError as exc:
                raise config_error_from(exc, EndpointConfig, "endpoint") from None
        if changes:
            settings = copy.endpoint.settings()
            where = f"endpoint.{copy.endpoint.kind}"
            for name, value in changes.items():
                if name not in type(settings).model_fields:
                    raise ConfigError(f"{where}.{name}", "unknown setting", value)
                try:
                    setattr(settings, name, value)  # validated (validate_assignment)
                except ValidationError as exc:
                    raise config_error_from(exc, type(settings), where) from None
            # and checked against the rest of the system, as when the document was validated
            check = ENDPOINT_SETTINGS.get(copy.endpoint.kind).check
            if check is not None:
                check(settings, copy)
        return copy
