"""The ``baseline`` endpoint kind (alias ``sm``): NCCL-like collective kernels on the NPU's own
compute units.

``baseline`` (NCCL-like)
    Collective kernels hold ``comm_units`` compute units, either only while a collective is
    active at the NPU (``while_active``) or for the whole run (``reserved``). Each network byte
    costs HBM traffic by step kind: a reduce-scatter step ~5 bytes (the interface writes the
    received piece, the kernel reads it and the local piece, writes the sum, the interface reads
    it to send on), an all-gather step ~2 (write the received piece, read it to forward), an
    all-to-all step 2 (write on receive, read on send: no reduction). Reductions cost
    ``reduction_flops_per_byte`` FLOPs per network byte on the held units; the held units drive
    at most ``comm_units * unit_bandwidth`` network bytes/s.

NVLS (in-switch reduction, the ``nvls`` algorithm): the switch reduces and multicasts, so the
NVLS kernel does no reduction FLOPs and moves each buffer byte through HBM once each way (the
switch reads the NPU's copy, the multicast writes the sum): ``nvls_reduce`` steps, which send
the whole buffer, cost ``nvls_reduce_hbm_bytes_per_byte`` = 2 (one read and one write per byte)
and ``nvls_gather`` steps (the ``1/p`` store upload) nothing more. An NVLS kernel holds
``nvls_units`` units (16 thread blocks on Hopper in NCCL) instead of ``comm_units``, which drive
at most ``nvls_units * unit_bandwidth``.

HBM is shared with compute kernels (``hbm_sharing = "fair"``) the way the NPU arbitrates it
(``npu.hbm_arbitration``): in proportion to memory-level parallelism, the collective kernels
weighing the ``comm_units`` they hold, their loops covering at most ``comm_units *
unit_hbm_bandwidth`` of payload (the kind's own ``unit_hbm_bandwidth`` where set: the bytes the
library's kernel keeps in flight, else the NPU's ``npu.kernels.unit_hbm_bandwidth``; charged
with the payload, one byte per network byte of a reduce or gather step:
:data:`~.sm_kernels.LOOP_BYTES_PER_BYTE`)
(``mlp``), or by dominant-resource fairness, messages weighing ``hbm_weight`` (``drf``). Or
HBM is partitioned (``static``: communication owns ``hbm_share`` of the bandwidth). The held
units come out of the NPU's unit pool, so the compute kernel runs on the rest; reductions run
on their FP32 vector units (``vector_flops`` per unit).

A collective on an SM budget of its own (``Comm.units``: DeepEP's expert-parallel dispatch and
combine kernels, which DeepSeek-V3 ran on 20 of the H800's 132 SMs) holds those units while any
collective on that budget is active at the NPU, whatever the unit policy, and its messages
cost what the kind's do per byte with the throughput of its own units.

Variants: ``splits`` lists the (comm units, HBM share or weight) settings searched for the best
baseline; empty means the settings as given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from ...config.system import Strict, SystemConfig
from ...config.validators import (
    NonNegativeFloat,
    PositiveBytesPerSecond,
    PositiveFloat,
    PositiveInt,
    ProperFraction,
    show_number,
)
from ...engine import Resource
from ...errors import ConfigError
from ...network.algorithms import ALLTOALL, GATHER, REDUCE
from ...network.endpoint import REDUCTION_FLOPS, SM_WAIT, Endpoint
from .registry import AMPLE_RATE, EndpointContext, EndpointKind, Variant
from .sm_kernels import (
    NvlsKernelSettings,
    check_fewer_units,
    check_nvls_units,
    reduction_meters,
    sm_kernel_demand,
)

__all__ = ["BaselineSplit", "BaselineSettings", "BaselineEndpoint", "sm_kernel_unit_hbm_bandwidth"]


def _nothing() -> None:
    """Units held for the whole run need no continuation."""


class BaselineSplit(Strict):
    """One resource split between communication and compute, for best-baseline searches."""

    comm_units: PositiveInt = Field(description="compute units held by collective kernels")
    hbm_share: ProperFraction | None = Field(
        None, description="static policy: fraction of HBM for comm (None = keep the default)"
    )
    hbm_weight: PositiveFloat | None = Field(
        None, description="fair policy: comm's max-min weight (None = keep the default)"
    )


class BaselineSettings(NvlsKernelSettings):
    """NCCL-like collectives running as kernels on the NPU's own compute units."""

    comm_units: PositiveInt = Field(8, description="compute units the collective kernels hold")
    unit_policy: Literal["while_active", "reserved"] = Field(
        "while_active", description="units held only while a collective runs, or for the run"
    )
    unit_bandwidth: PositiveBytesPerSecond = Field(
        50e9, description="network bytes/s one comm unit can drive"
    )
    launch: Literal["fifo", "priority", "immediate"] = Field(
        "fifo",
        description="how the collective kernel gets its units while a compute kernel's blocks "
        "hold them (SM scheduling: blocks are not preempted): fifo, streams of one priority "
        "(CUDA's default, PyTorch's NCCL streams): after the running kernel's pending blocks, "
        "at its last wave if that leaves the units idle, else at its end; priority, a "
        "higher-priority stream: at the end of the running wave; immediate: at once, the "
        "running blocks' work moving to the units left (acesim before issue 32)",
    )
    unit_hbm_bandwidth: PositiveBytesPerSecond | None = Field(
        None,
        description="most HBM B/s one held unit of the collective kernels keeps in flight (the "
        "library kernel's loads in flight from one source over the loaded HBM latency), "
        "charged with the payload its loop covers (one byte per network byte of a reduce or "
        "gather step, two of an all-to-all step); None: npu.kernels.unit_hbm_bandwidth",
    )
    hbm_sharing: Literal["static", "fair"] = Field(
        "fair", description="static: comm gets hbm_share of HBM; fair: weighted max-min"
    )
    hbm_share: ProperFraction = Field(0.25, description="static policy: fraction of HBM for comm")
    hbm_weight: PositiveFloat | None = Field(
        None,
        description="fair policy under npu.hbm_arbitration = drf: messages' weight vs compute "
        "(None = 1); under mlp the held units are the weight",
    )
    reduce_hbm_bytes_per_byte: PositiveFloat = Field(5.0, description="reduce-scatter step")
    gather_hbm_bytes_per_byte: PositiveFloat = Field(2.0, description="all-gather step")
    alltoall_hbm_bytes_per_byte: PositiveFloat = Field(2.0, description="all-to-all step")
    reduction_flops_per_byte: NonNegativeFloat = Field(
        0.25, description="FP32 add: 1 FLOP per 4 bytes"
    )
    splits: list[BaselineSplit] = Field(
        default_factory=list,
        description="splits tried when searching the best baseline (empty: the one above)",
    )


def sm_kernel_unit_hbm_bandwidth(system: SystemConfig) -> float | None:
    """Most HBM B/s one unit of the system's SM collective kernels keeps in flight (the
    library's per-channel figure): ``endpoint.baseline.unit_hbm_bandwidth``, the one setting
    of it for every kind that runs the library's reduce kernels on SMs (the baseline's and
    NVLS's, the copy engines' reduce fallback); None: the NPU's
    ``npu.kernels.unit_hbm_bandwidth`` (what :func:`~.sm_kernels.sm_kernel_demand` then takes).
    """
    return system.endpoint.of(BaselineSettings, "baseline").unit_hbm_bandwidth


def _check(settings: BaselineSettings, system: SystemConfig) -> None:
    units = system.npu.compute_units
    if system.npu.hbm_arbitration == "mlp":
        weights = [("endpoint.baseline.hbm_weight", settings.hbm_weight)] + [
            (f"endpoint.baseline.splits[{i}].hbm_weight", split.hbm_weight)
            for i, split in enumerate(settings.splits)
        ]
        for where, weight in weights:
            if weight is not None:
                raise ConfigError(
                    where,
                    "applies only with npu.hbm_arbitration = 'drf' (under 'mlp' the collective "
                    "kernels weigh the units they hold)",
                    weight,
                )
    for i, split in enumerate(settings.splits):
        check_fewer_units(f"endpoint.baseline.splits[{i}].comm_units", split.comm_units, system)
    check_fewer_units("endpoint.baseline.comm_units", settings.comm_units, system)
    check_nvls_units("baseline", settings, system)
    # The held units drive at most comm_units * unit_bandwidth; fewer than compute_units of
    # them, so bounding that product bounds every split's.
    if not math.isfinite(units * settings.unit_bandwidth):
        raise ConfigError(
            "endpoint.baseline.unit_bandwidth",
            f"times npu.compute_units ({units}) must be a finite B/s, "
            f"got {show_number(settings.unit_bandwidth, 'B/s')}",
        )


def _variants(settings: BaselineSettings, system: SystemConfig) -> list[Variant]:
    out = []
    for split in settings.splits:
        changes: dict[str, object] = {"comm_units": split.comm_units}
        if split.hbm_share is not None:
            changes["hbm_share"] = split.hbm_share
        if split.hbm_weight is not None:
            changes["hbm_weight"] = split.hbm_weight
        out.append(Variant(f"{split.comm_units} units", changes))
    return out


class BaselineEndpoint(Endpoint):
    """NCCL-like collectives on the NPU's own compute units and HBM (see module docstring)."""

    name = "baseline"

    def __init__(self, ctx: EndpointContext):
        engine = ctx.engine
        npus = ctx.npus
        npu = ctx.system.npu
        self.engine = engine
        self.npus = npus
        self.cfg: BaselineSettings = ctx.settings
        cfg = self.cfg
        self.units = cfg.comm_units
        self.message_weight = cfg.hbm_weight if cfg.hbm_weight is not None else 1.0
        self._mlp = npu.hbm_arbitration == "mlp" and cfg.hbm_sharing == "fair"
        self.nvls_units = cfg.nvls_units
        self._active = [0] * len(npus)
        self._active_nvls = [0] * len(npus)
        #: per rank, when the units of its active collectives are granted (SM scheduling), s
        self._granted = [0.0] * len(npus)
        self._demand: list[dict[str, dict[Resource, float]]] = []
        per_byte = {
            REDUCE: cfg.reduce_hbm_bytes_per_byte,
            GATHER: cfg.gather_hbm_bytes_per_byte,
            ALLTOALL: cfg.alltoall_hbm_bytes_per_byte,
        }
        self._per_byte = per_byte
        # collectives on an SM budget of their own: their kernels' demand and active count
        self._budgets: dict[tuple[int, int], dict[str, dict[Resource, float]]] = {}
        self._active_budget: dict[int, list[int]] = {}
        nvls_per_byte = cfg.nvls_hbm_bytes_per_byte()
        for n in npus:
            if cfg.hbm_sharing == "static":
                n.partition_hbm(cfg.hbm_share)
            demand = sm_kernel_demand(
                engine,
                n.config,  # this NPU's units (mixed NPU types: its own)
                n.hbm_comm,
                f"npu{n.rank}.comm_units",
                cfg.comm_units,
                cfg.unit_bandwidth,
                per_byte,
                REDUCE,
                cfg.reduction_flops_per_byte,
                cfg.unit_hbm_bandwidth,
            )
            # NVLS kernels hold their own units; the switch reduces (no FLOPs here)
            demand.update(
                sm_kernel_demand(
                    engine,
                    n.config,
                    n.hbm_comm,
                    f"npu{n.rank}.nvls_units",
                    cfg.nvls_units,
                    cfg.unit_bandwidth,
                    nvls_per_byte,
                    REDUCE,
                    0.0,
                    cfg.unit_hbm_bandwidth,
                )
            )
            self._demand.append(demand)
            if cfg.unit_policy == "reserved":
                n.units.acquire(cfg.comm_units, _nothing)

    def hbm_bytes_per_network_byte(self, kind: str) -> float:
        return {
            REDUCE: self.cfg.reduce_hbm_bytes_per_byte,
            GATHER: self.cfg.gather_hbm_bytes_per_byte,
            ALLTOALL: self.cfg.alltoall_hbm_bytes_per_byte,
            **self.cfg.nvls_hbm_bytes_per_byte(),
        }[kind]

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        return self._demand[rank][kind]

    def budget_demand(self, rank: int, kind: str, units: int) -> dict[Resource, float] | None:
        """A kernel library on ``units`` units of its own (DeepEP's): the same costs per
        byte, its throughput driven by its own units."""
        key = (rank, units)
        if key not in self._budgets:
            n, cfg = self.npus[rank], self.cfg
            self._budgets[key] = sm_kernel_demand(
                self.engine,
                n.config,
                n.hbm_comm,
                f"npu{rank}.budget{units}",
                units,
                cfg.unit_bandwidth,
                self._per_byte,
                REDUCE,
                cfg.reduction_flops_per_byte,
                cfg.unit_hbm_bandwidth,
            )
        return self._budgets[key][kind]

    def hbm_parallelism(self, rank: int) -> tuple[Resource, float] | None:
        if not self._mlp:
            return None
        return self.npus[rank].hbm_comm, float(self.units)

    def meters(self, rank: int) -> Mapping[str, Sequence[Resource]]:
        # the kinds' kernels and those on SM budgets of their own (their own flops resources)
        found = reduction_meters(self._demand[rank])
        for (owner, _), demand in sorted(self._budgets.items()):
            if owner == rank:
                found += reduction_meters(demand)
        return {REDUCTION_FLOPS: found}

    def collective_started(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> None:
        # NVLS kernels hold nvls_units, others comm_units; each while any of its kind is
        # active; a collective on a budget holds its own units while any on it is active
        active, held = self._held(rank, algorithms, units)
        active[rank] += 1
        if active[rank] > 1 or (units is None and self.cfg.unit_policy != "while_active"):
            return
        npu = self.npus[rank]
        wait = npu.sm_wait(held, self.cfg.launch)
        now = self.engine.now
        self._granted[rank] = now + wait
        if wait <= 0:
            npu.units.acquire(held, _nothing)
            return

        def granted() -> None:
            listener = self.engine.bound_listener
            if rank == 0 and listener is not None:  # what held communication back meanwhile
                listener.segment("message", SM_WAIT, now, self.engine.now)
            npu.units.acquire(held, _nothing)

        self.engine.schedule(wait, granted)

    def kernel_units(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> tuple[int, str] | None:
        if units is None and self.cfg.unit_policy != "while_active":
            return None
        return self._held(rank, algorithms, units)[1], self.cfg.launch

    def start_delay(self, rank: int) -> float:
        return max(0.0, self._granted[rank] - self.engine.now)

    def collective_finished(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> None:
        active, held = self._held(rank, algorithms, units)
        active[rank] -= 1
        if active[rank] == 0 and (units is not None or self.cfg.unit_policy == "while_active"):
            self.npus[rank].units.release(held)

    def _held(
        self, rank: int, algorithms: frozenset[str], units: int | None = None
    ) -> tuple[list[int], int]:
        """The active-collective counter and the units of a collective running ``algorithms``
        (an NVLS all-reduce on one switch; one that also runs rings holds ``comm_units``), or
        on a budget of ``units``."""
        if units is not None:
            return self._active_budget.setdefault(units, [0] * len(self.npus)), units
        nvls = algorithms & {"nvls", "nvls_tree"}  # NCCL runs these on its nvlsChannels,
        if nvls and algorithms <= nvls | {"collnet"}:  # across nodes too (SHARP: collnet)
            return self._active_nvls, self.nvls_units
        return self._active, self.units


def _ample(system: SystemConfig) -> list[dict[str, object]]:
    """Every compute unit but one for the collective kernel, each driving any bandwidth: its
    HBM traffic (and the units' HBM issue) remains."""
    return [{"comm_units": system.npu.compute_units - 1, "unit_bandwidth": AMPLE_RATE}]


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="baseline",
    label="baseline",
    summary="NCCL-like: collective kernels on the NPU's compute units, several HBM bytes "
    "per network byte",
    settings=BaselineSettings,
    build=BaselineEndpoint,
    check=_check,
    variants=_variants,
    role="reference",
    default_compare=True,
    channel_fields=("comm_units", "nvls_units"),
    ample=_ample,
    aliases=("sm",),
)
