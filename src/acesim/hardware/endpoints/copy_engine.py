"""The ``copy_engine`` endpoint kind: collectives driven by the GPU's DMA copy engines (zero SMs).

``copy_engine``
    Each NPU has ``engines`` DMA copy engines of ``engine_bandwidth`` each. A gather or
    all-to-all step's messages are copies the engines drive: every network byte consumes one
    byte of the NPU's copy-engine throughput (one resource of ``engines * engine_bandwidth``)
    and no compute unit. Before a copy step sends, the engines pay ``setup`` once (the copy
    commands of a step are issued together and their setups overlap on the engines: one
    setup per step, whatever its message count); with ``batched_submission = false`` the host
    submits each copy on its own (one ``cudaMemcpyAsync`` per copy) and a step of ``m`` copies
    pays ``setup + m * command_setup``.

    Waves (``wave_size``): a direct gather or all-to-all step (``p-1`` copies) is issued as one
    batch (``wave_size = 0``) or in waves of ``wave_size`` copies: wave ``k`` writes to the
    peers ``1 + k w .. (k+1) w`` ahead (anti-diagonal order, so every NPU is also written by
    ``w`` peers in each wave), and a wave is a step of its own (a barrier: it ends when its
    copies are out and its peers' have arrived; it pays its own setup). Waves exist to bound
    the writers per receiver below the switch's ``incast_fan_in`` (see
    :mod:`acesim.network.collective`); they cost a setup and a synchronisation each.
    ``wave_sizes`` lists the sizes searched for the best (the kind's variants).

    Local copy (``local_copy_bandwidth``): NCCL's copy-engine all-to-all and out-of-place
    all-gather (src/ce_coll.cc) put the NPU's own piece in the same batch as the peer copies,
    a copy within its HBM on the engines; the batch's copies run at once (a one-batch copy
    step loads every receiver with ``p-1`` writers: the incast torchcomms PR 1089 measures).
    With ``local_copy_bandwidth`` set, a direct (one-batch, ``all``) gather or all-to-all
    step makes that copy beside its messages: ``message_bytes`` at most
    ``local_copy_bandwidth`` (a local copy on the engines is several times slower than a copy
    to a peer: NVIDIA/nccl issue 2177), one byte of the engines' throughput and the read and
    write HBM bytes per byte; the step ends when the copy is done too. None: no local copy
    (a library that leaves the NPU's own piece in place, or copies it apart).

    HBM: a copy reads the source at the sender (``read_hbm_bytes_per_byte``, 1) and the peer's
    HBM absorbs the write (``write_hbm_bytes_per_byte``, 1). The runtime charges a message at
    its sender only, so the receiver's write is charged to the sender's HBM: in the symmetric
    collectives modelled every rank receives, in every step, as many bytes as it sends, so the
    writes its peers make into its HBM equal the bytes it sends (exact in symmetric mode, and
    in exact mode for the balanced ops). Set ``write_hbm_bytes_per_byte = 0`` to charge the
    read alone.

    Copy engines cannot reduce: a reduce step falls back to SM kernels. It holds
    ``fallback_units`` compute units from the NPU's pool for the step (``step_begin`` ..
    ``step_end``), costs the baseline's ``reduce_hbm_bytes_per_byte`` of HBM and
    ``reduction_flops_per_byte`` FLOPs per network byte (on the held units' share of the
    vector FLOPs), and the held units drive at most ``fallback_units * fallback_unit_bandwidth``
    network bytes/s (None, the default: the SM endpoint's ``endpoint.baseline.unit_bandwidth``,
    one definition of what an SM of the library's kernel drives). It pays no copy setup (a
    kernel, not a copy command). NCCL runs no reduction on copy engines
    (``ncclCeImplemented`` in ``src/ce_coll.cc``, 2.28 on: all-gather, all-to-all, scatter and
    gather only): a reduce collective of a copy-engine communicator
    (``NCCL_CTA_POLICY_ZERO``) is one of its SM kernels. So the fallback's loads in flight are
    the SM endpoint's: at most ``fallback_units`` x ``endpoint.baseline.unit_hbm_bandwidth``
    (NCCL's per-channel figure, :mod:`acesim.validation.comm_limits`; None: the NPU's
    ``npu.kernels.unit_hbm_bandwidth``), charged as the baseline's reduce step
    (:data:`~.sm_kernels.LOOP_BYTES_PER_BYTE`): the ring kernel's ``reduceCopyPacks`` loop,
    whose HBM bytes (``reduce_hbm_bytes_per_byte``) the step is charged too. Not modelled: NCCL
    2.28 runs a reduce-scatter or all-reduce on buffers registered as symmetric windows on its
    symmetric kernels (``src/device/symmetric/reduce_scatter.cuh``), which load every peer's
    piece over NVLink instead of reducing a ring's received piece, a loop of its own.

    Or the switch reduces (``collective.algorithms`` naming ``nvls`` for the all-reduce: the
    user's choice): an NVLS step is issued by SM kernels (multimem loads and stores), so it
    holds ``nvls_units`` units for the step (16 thread blocks on Hopper in NCCL), drives at
    most ``nvls_units * fallback_unit_bandwidth``, keeps the SM endpoint's loads in flight per
    unit (as the reduce fallback) and costs ``nvls_reduce_hbm_bytes_per_byte``
    (one read and one write of the buffer) on its load-reduce step and
    ``nvls_gather_hbm_bytes_per_byte`` on its multicast-store step, no FLOPs (as the
    baseline's NVLS kernels).

HBM arbitration (``npu.hbm_arbitration = "mlp"``): the engines weigh their memory-level
parallelism in compute units' worth, ``engines * engine_bandwidth`` over what one unit draws
(as ACE's DMA); while reduce steps hold fallback units, those units are added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from pydantic import Field

from ...config.lineage import LINEAGE
from ...config.system import SystemConfig
from ...config.validators import (
    NonNegativeFloat,
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveBytesPerSecond,
    PositiveFloat,
    PositiveFraction,
    PositiveInt,
)
from ...engine import Resource
from ...errors import ConfigError
from ...network.algorithms import ALLTOALL, GATHER, NVLS_KINDS, REDUCE
from ...network.endpoint import REDUCTION_FLOPS, SM_FREE_STEP_KINDS, Endpoint
from ...network.plan import Phase
from ...network.repeats import Repeats
from ...network.step import Step
from .baseline import BaselineSettings, sm_kernel_unit_hbm_bandwidth
from .registry import EndpointContext, EndpointKind, Variant
from .sm_kernels import (
    NvlsKernelSettings,
    check_fewer_units,
    check_nvls_units,
    engine_parallelism,
    reduction_meters,
    sm_kernel_demand,
)

__all__ = [
    "CopyEngineSettings",
    "CopyEngineEndpoint",
    "SETUP",
    "fallback_unit_bandwidth",
    "unstated_facts",
    "facts_refusal",
    "check_facts_stated",
]

#: The kind's name (its settings table is ``[endpoint.copy_engine]``).
KIND_NAME = "copy_engine"

#: What binds communication while a copy step waits for its commands' setup.
SETUP = "copy-engine setup"


class CopyEngineSettings(NvlsKernelSettings):
    """DMA copy engines drive gather/all-to-all steps; reduce steps fall back to SM kernels."""

    engines: PositiveInt = Field(4, description="DMA copy engines per NPU used by collectives")
    engine_bandwidth: PositiveBytesPerSecond = Field(
        30.27e9,
        description="network bytes/s one copy engine drives (fit: 4x H100 all-to-all, "
        "NVIDIA/nccl issue 2169)",
    )
    setup: NonNegativeSeconds = Field(
        4e-6, description="per-command setup of the engines, paid once per copy step, s"
    )
    local_copy_bandwidth: PositiveBytesPerSecond | None = Field(
        None,
        description="bytes/s of the local copy (the NPU's own piece, within its HBM) a direct "
        "gather or all-to-all step makes on the engines beside its peer copies, as NCCL's "
        "copy-engine collectives do; None: no local copy",
    )
    link_efficiency: PositiveFraction | None = Field(
        None,
        description="payload fraction of the links for the engines' writes (DMA writes carry "
        "no collective protocol); None: the dimension's efficiency",
    )
    batched_submission: bool = Field(
        True,
        description="a step's copies are submitted with one batched call (cudaMemcpyBatchAsync);"
        " false: one call per copy, each paying command_setup",
    )
    command_setup: NonNegativeSeconds = Field(
        0.0,
        description="host submission of one copy on its own (batched_submission = false), s",
    )
    wave_size: NonNegativeInt = Field(
        0,
        description="copies each NPU issues at once in a direct gather/all-to-all step: 0, "
        "the step's p-1 copies in one batch; w, waves of w copies in anti-diagonal peer order, "
        "each wave a barrier with its own setup",
    )
    wave_sizes: list[NonNegativeInt] = Field(
        default_factory=list,
        description="wave sizes searched for the best (0: one batch; empty: wave_size alone)",
    )
    read_hbm_bytes_per_byte: NonNegativeFloat = Field(
        1.0, description="HBM bytes per network byte read at the sender"
    )
    write_hbm_bytes_per_byte: NonNegativeFloat = Field(
        1.0,
        description="HBM bytes per network byte written at the receiver (charged at the "
        "sender: by symmetry it receives what it sends)",
    )
    fallback_units: PositiveInt = Field(
        8, description="compute units a reduce step holds (copy engines cannot reduce)"
    )
    fallback_unit_bandwidth: PositiveBytesPerSecond | None = Field(
        None,
        description="network bytes/s one fallback or NVLS unit drives; None: the SM "
        "endpoint's endpoint.baseline.unit_bandwidth (the same library kernel on an SM)",
    )
    reduce_hbm_bytes_per_byte: PositiveFloat = Field(
        5.0, description="reduce step on SMs: HBM bytes per network byte (the baseline's)"
    )
    reduction_flops_per_byte: NonNegativeFloat = Field(
        0.25, description="reduce step: FP32 add, 1 FLOP per 4 bytes"
    )


def fallback_unit_bandwidth(settings: CopyEngineSettings, system: SystemConfig) -> float:
    """Network B/s one unit of the reduce fallback or NVLS kernel drives: the settings' own
    ``fallback_unit_bandwidth``, or (None) the SM endpoint's ``endpoint.baseline.
    unit_bandwidth``: the fallback is the library's SM kernel (see the module), one definition
    of what an SM of it drives."""
    if settings.fallback_unit_bandwidth is not None:
        return settings.fallback_unit_bandwidth
    return system.endpoint.of(BaselineSettings, "baseline").unit_bandwidth


#: The maker whose copy engines the settings' defaults describe (their engine bandwidth and
#: setup are fits on NVIDIA H100 rows, their waves and local copy NCCL's), so the one vendor
#: on whose NPUs a system may run on them without stating its own (:func:`unstated_facts`).
DEFAULTS_VENDOR = "nvidia"


def unstated_facts(system: SystemConfig) -> str | None:
    """Why ``system`` may not run copy-engine collectives on the settings' defaults, or None.

    The rule: the defaults are NVIDIA copy engines' figures (:data:`DEFAULTS_VENDOR`); a system
    whose NPU preset is another vendor's (:data:`acesim.config.lineage.LINEAGE`, by the NPU
    preset the system extends) must state its copy-engine facts, an ``[endpoint.copy_engine]``
    table (or ``--set endpoint.copy_engine.<field>``), rather than take another maker's engines.
    An NPU written out in full (no NPU preset) has no lineage to compare and is not refused."""
    stated = bool(system.endpoint.of(CopyEngineSettings, "copy_engine").model_fields_set)
    return facts_refusal(system.name, system.provenance.npu, stated)


def facts_refusal(system_name: str, npu_preset: str, stated: bool) -> str | None:
    """:func:`unstated_facts`'s rule on its three facts: the system's name, the NPU preset it
    extends ("" for none) and whether it states any copy-engine setting (for a caller that
    holds a system document, not a :class:`SystemConfig`: a sweep's points)."""
    lineage = LINEAGE.get(npu_preset)
    if stated or lineage is None or lineage.vendor == DEFAULTS_VENDOR:
        return None
    return (
        f"{system_name or 'the system'} ({lineage.vendor} NPU {npu_preset}) states "
        f"no [endpoint.copy_engine] table: the kind's defaults are {DEFAULTS_VENDOR} copy "
        "engines' figures, not a measurement of this NPU's"
    )


def check_facts_stated(system: SystemConfig, kind: str = KIND_NAME) -> None:
    """ConfigError naming ``endpoint.copy_engine`` when ``kind`` is this kind and ``system``
    may not run it on the defaults (:func:`unstated_facts`). Called where a run is built and
    where a command takes its kinds before it hands systems on as documents (which carry no
    provenance): ``acesim plan``'s ``--endpoints``."""
    if kind != KIND_NAME:
        return
    refusal = unstated_facts(system)
    if refusal is not None:
        raise ConfigError("endpoint.copy_engine", refusal)


def _check(settings: CopyEngineSettings, system: SystemConfig) -> None:
    check_fewer_units("endpoint.copy_engine.fallback_units", settings.fallback_units, system)
    check_nvls_units("copy_engine", settings, system)


def _variants(settings: CopyEngineSettings, system: SystemConfig) -> list[Variant]:
    return [
        Variant(f"waves of {w}" if w else "one batch", {"wave_size": w})
        for w in dict.fromkeys(settings.wave_sizes)
    ]


def in_waves(step: Step, size: int, wave: int) -> list[Step]:
    """A direct (``all``) step of a ``size``-NPU phase as waves of ``wave`` copies (``span``
    steps in anti-diagonal order); the step itself when one wave would hold every copy."""
    copies = size - 1
    if step.pattern != "all" or wave <= 0 or wave >= copies:
        return [step]
    return [
        Step(step.message_bytes, "span", first, step.kind, min(wave, copies - first + 1))
        for first in range(1, copies + 1, wave)
    ]


class CopyEngineEndpoint(Endpoint):
    """Copy engines for gathers and all-to-alls, SM kernels for reductions (see module)."""

    name = "copy_engine"
    #: copies, and reduce steps on SM kernels: point-to-point ones or NVLS (the SM kernels
    #: issue the switch's multimem operations), as NCCL's tuner or the user picks
    step_kinds = SM_FREE_STEP_KINDS | NVLS_KINDS
    #: copy-engine all-gathers write the NPU's shard straight into every peer (NCCL's and
    #: torchcomms' CE all-gathers), wherever a dimension connects every pair
    preferred_algorithms: Mapping[str, str] = MappingProxyType({"all-gather": "direct"})

    def __init__(self, ctx: EndpointContext):
        engine = ctx.engine
        npus = ctx.npus
        npu = ctx.system.npu
        self.engine = engine
        self.npus = npus
        self.cfg: CopyEngineSettings = ctx.settings
        cfg = self.cfg
        check_facts_stated(ctx.system)
        self._mlp = npu.hbm_arbitration == "mlp"
        self._reducing = [0] * len(npus)
        self._nvls = [0] * len(npus)
        self.nvls_steps = 0
        self.copy_steps = 0
        self.reduce_steps = 0
        copy_hbm = cfg.read_hbm_bytes_per_byte + cfg.write_hbm_bytes_per_byte
        #: the library's reduce and NVLS kernels on SMs: the SM endpoint's per-channel limit
        self.unit_hbm_bandwidth = sm_kernel_unit_hbm_bandwidth(ctx.system)
        #: and the SM endpoint's drive per unit, unless the settings state their own
        self.unit_bandwidth = fallback_unit_bandwidth(cfg, ctx.system)
        self._demand: list[dict[str, dict[Resource, float]]] = []
        #: per NPU, what a byte of its local copy consumes (None: no local copy)
        self._local: list[dict[Resource, float] | None] = []
        for n in npus:
            # the NPU's engines (host-device copies share them), or the endpoint's own
            engines = n.copy_engines or engine.add_resource(
                f"npu{n.rank}.copy_engines", cfg.engines * cfg.engine_bandwidth
            )
            copy: dict[Resource, float] = {engines: 1.0}
            if copy_hbm > 0:
                copy[n.hbm_comm] = copy_hbm
            fallback = sm_kernel_demand(
                engine,
                n.config,  # this NPU's units (mixed NPU types: its own)
                n.hbm_comm,
                f"npu{n.rank}.copy_engine.fallback",
                cfg.fallback_units,
                self.unit_bandwidth,
                {REDUCE: cfg.reduce_hbm_bytes_per_byte},
                REDUCE,
                cfg.reduction_flops_per_byte,
                self.unit_hbm_bandwidth,
            )
            reduce = fallback[REDUCE]
            nvls = sm_kernel_demand(
                engine,
                npu,
                n.hbm_comm,
                f"npu{n.rank}.copy_engine.nvls",
                cfg.nvls_units,
                self.unit_bandwidth,
                cfg.nvls_hbm_bytes_per_byte(),
                REDUCE,
                0.0,
                self.unit_hbm_bandwidth,
            )
            self._demand.append({GATHER: copy, ALLTOALL: copy, REDUCE: reduce, **nvls})
            local: dict[Resource, float] | None = None
            if cfg.local_copy_bandwidth is not None:
                own = engine.add_resource(
                    f"npu{n.rank}.copy_engine.local_copy", cfg.local_copy_bandwidth
                )
                local = {**copy, own: 1.0}
            self._local.append(local)
        #: the engines' memory-level parallelism, in compute units' worth (as ACE's DMA)
        self.engine_parallelism = engine_parallelism(npu, cfg.engines * cfg.engine_bandwidth)

    def hbm_bytes_per_network_byte(self, kind: str) -> float:
        if kind == REDUCE:
            return self.cfg.reduce_hbm_bytes_per_byte
        nvls = self.cfg.nvls_hbm_bytes_per_byte()
        if kind in nvls:
            return nvls[kind]
        return self.cfg.read_hbm_bytes_per_byte + self.cfg.write_hbm_bytes_per_byte

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        return self._demand[rank][kind]

    def meters(self, rank: int) -> Mapping[str, Sequence[Resource]]:
        return {REDUCTION_FLOPS: reduction_meters(self._demand[rank])}

    def local_copy_demand(self, rank: int, kind: str) -> dict[Resource, float] | None:
        return self._local[rank] if kind in (GATHER, ALLTOALL) else None

    def link_efficiency(self, kind: str) -> float | None:
        return self.cfg.link_efficiency if kind in (GATHER, ALLTOALL) else None

    def shape_phases(self, phases: Sequence[Phase]) -> list[Phase]:
        wave = self.cfg.wave_size
        if wave == 0:
            return list(phases)
        out = []
        for phase in phases:
            runs: list[tuple[Step, int]] = []  # the phase's runs of repeats, each step in waves
            for step, count in phase.steps.runs:
                copies = step.kind in (GATHER, ALLTOALL)
                waves = in_waves(step, phase.size, wave) if copies else [step]
                if len(waves) == 1:
                    runs.append((waves[0], count))
                else:
                    runs.extend([(w, 1) for w in waves] * count)
            steps = Repeats(runs)
            shaped = len(steps) != len(phase.steps)
            out.append(replace(phase, steps=steps) if shaped else phase)
        return out

    def hbm_parallelism(self, rank: int) -> tuple[Resource, float] | None:
        if not self._mlp:
            return None
        held = self.cfg.fallback_units if self._reducing[rank] > 0 else 0
        held += self.cfg.nvls_units if self._nvls[rank] > 0 else 0
        return self.npus[rank].hbm_comm, self.engine_parallelism + held

    def step_begin(
        self, rank: int, kind: str, proceed: Callable[[], None], messages: int = 1
    ) -> None:
        on_units = self._on_units(kind)
        if on_units is not None:
            active, units = on_units
            if kind == REDUCE:
                self.reduce_steps += 1
            else:
                self.nvls_steps += 1

            def held() -> None:
                active[rank] += 1
                proceed()

            self.npus[rank].units.acquire(units, held)
            return
        self.copy_steps += 1
        setup = self.cfg.setup
        if not self.cfg.batched_submission:
            setup += messages * self.cfg.command_setup
        if setup > 0:
            since = self.engine.now

            def set_up() -> None:
                listener = self.engine.bound_listener
                if rank == 0 and listener is not None:
                    # the step waits for its copy commands: what binds communication then
                    listener.segment("message", SETUP, since, self.engine.now)
                proceed()

            self.engine.schedule(setup, set_up)
        else:
            proceed()

    def step_end(self, rank: int, kind: str) -> None:
        on_units = self._on_units(kind)
        if on_units is not None:
            active, units = on_units
            active[rank] -= 1
            self.npus[rank].units.release(units)

    def _on_units(self, kind: str) -> tuple[list[int], int] | None:
        """A step of ``kind`` on SM kernels: its per-rank count of active steps and the compute
        units it holds (a reduce step on the fallback kernel, an NVLS step on the NVLS kernel);
        None for a copy."""
        if kind == REDUCE:
            return self._reducing, self.cfg.fallback_units
        if kind in NVLS_KINDS:
            return self._nvls, self.cfg.nvls_units
        return None


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
def _link_efficiency(settings: CopyEngineSettings, system: SystemConfig) -> dict[str, float]:
    """The engines' writes' payload fraction, per step kind they drive (see the settings)."""
    if settings.link_efficiency is None:
        return {}
    return {GATHER: settings.link_efficiency, ALLTOALL: settings.link_efficiency}


KIND = EndpointKind(
    name="copy_engine",
    label="copy engine",
    summary="DMA copy engines drive gathers and all-to-alls with zero SMs (a setup per step); "
    "reduce steps fall back to SM kernels, or to the switch (NVLS) where configured",
    settings=CopyEngineSettings,
    build=CopyEngineEndpoint,
    check=_check,
    variants=_variants,
    channel_fields=("fallback_units",),
    link_efficiency=_link_efficiency,
)
