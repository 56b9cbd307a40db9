"""What the endpoint kinds share: collective work on held compute units, and an engine's
memory-level parallelism.

* :func:`sm_kernel_demand` — the resources a collective kernel on ``units`` held compute units
  consumes per network byte: its throughput (``units x unit_bandwidth``), its reductions on the
  units' FP32 vector peak (``units x vector_flops / compute_units``), its HBM bytes by step
  kind and, with ``npu.kernels.unit_hbm_bandwidth``, the loads those units keep in flight
  (``units x unit_hbm_bandwidth``, the kind's own figure where it sets one: a collective
  library's kernel keeps its own bytes in flight). The baseline's kernels and the copy
  engines' reduce fallback are both this.

  That limit is Little's law over one source's loads (``threads x unroll x 16`` bytes, see
  :mod:`acesim.validation.comm_limits`), and it is charged with the payload bytes the
  kernel's copy/reduce loop covers (:data:`LOOP_BYTES_PER_BYTE`), not with the HBM bytes a
  step moves. NCCL's and RCCL's loop (``reduceCopyPacks``, ``src/device/common_kernel.h``)
  issues ``unroll`` 16-byte loads from *every* source of a hunk before it reduces any
  (``acc[u]`` from the first source, ``tmp[u]`` from each further one, the reduce after
  them), stores the result and only then loads the next hunk: so a reduce step (two sources)
  keeps twice a copy step's loads in flight, and each warp covers one hunk of payload per
  loaded latency in both. The peer's or the NIC's writes into this HBM, the kernel's stores
  and the NIC's reads take no load slot. HBM capacity is still charged with every byte
  (``hbm_bytes_per_byte``).
* :func:`engine_parallelism` — the compute units' worth of requests a DMA engine keeps in
  flight to stream ``bandwidth``: over what one unit draws at most, or (without that limit)
  over a unit's even share of HBM. Its weight under memory-level-parallelism arbitration.
* :func:`check_fewer_units` — a count of held units must leave the compute kernel some.
* :class:`NvlsKernelSettings` — the NVLS (in-switch reduction) kernel's settings, shared by every
  kind that runs NVLS steps on SMs: the units it holds and its HBM bytes per network byte by
  step kind (:meth:`~NvlsKernelSettings.nvls_hbm_bytes_per_byte`); :func:`check_nvls_units`
  checks its units wherever NVLS can run (a switch that reduces).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from ...config.system import NPUConfig, Strict, SystemConfig
from ...config.validators import NonNegativeFloat, PositiveInt
from ...engine import Engine, Resource
from ...errors import ConfigError
from ...network.algorithms import ALLTOALL, GATHER, NVLS_GATHER, NVLS_REDUCE, REDUCE

__all__ = [
    "LOOP_BYTES_PER_BYTE",
    "NvlsKernelSettings",
    "reduction_meters",
    "check_fewer_units",
    "check_nvls_units",
    "engine_parallelism",
    "sm_kernel_demand",
]

#: Payload bytes a collective kernel's copy/reduce loop covers per network byte, by step kind:
#: what its units' load-issue limit (``unit_hbm_bandwidth``) is charged with (see the module).
#: A ring reduce-scatter step reduces the received piece with the local one and sends the sum
#: (two sources, one pass); an all-gather step forwards the received piece (one source); an
#: all-to-all step copies out on send and in on receive, each on its own half of a channel's
#: threads (NCCL's ``sendrecv.h``: two passes); an NVLS load-reduce step loads each byte once
#: through the switch (``multimem.ld_reduce``), its multicast store is that step's.
LOOP_BYTES_PER_BYTE: dict[str, float] = {
    REDUCE: 1.0,
    GATHER: 1.0,
    ALLTOALL: 2.0,
    NVLS_REDUCE: 1.0,
    NVLS_GATHER: 0.0,
}


class NvlsKernelSettings(Strict):
    """The NVLS kernel of a kind that runs NVLS steps on SMs (see the module)."""

    nvls_units: PositiveInt = Field(
        16, description="compute units an NVLS (in-switch reduction) kernel holds"
    )
    nvls_reduce_hbm_bytes_per_byte: NonNegativeFloat = Field(
        2.0, description="NVLS load-reduce step: one read and one write per buffer byte"
    )
    nvls_gather_hbm_bytes_per_byte: NonNegativeFloat = Field(
        0.0, description="NVLS multicast-store step (counted with the load-reduce step)"
    )

    def nvls_hbm_bytes_per_byte(self) -> dict[str, float]:
        """HBM bytes per network byte of the NVLS step kinds."""
        return {
            NVLS_REDUCE: self.nvls_reduce_hbm_bytes_per_byte,
            NVLS_GATHER: self.nvls_gather_hbm_bytes_per_byte,
        }


def check_nvls_units(kind: str, settings: NvlsKernelSettings, system: SystemConfig) -> None:
    """Where NVLS can run (a dimension whose switch reduces), its kernel's units must leave the
    compute kernel some (ConfigError naming ``endpoint.<kind>.nvls_units``)."""
    if any(d.switch_reduction for d in system.network.dimensions):
        check_fewer_units(f"endpoint.{kind}.nvls_units", settings.nvls_units, system)


def sm_kernel_demand(
    engine: Engine,
    npu: NPUConfig,
    hbm: Resource,
    name: str,
    units: int,
    unit_bandwidth: float,
    hbm_bytes_per_byte: Mapping[str, float],
    reduce_kind: str,
    reduction_flops_per_byte: float,
    unit_hbm_bandwidth: float | None = None,
) -> dict[str, dict[Resource, float]]:
    """Per step kind, the resources (and amounts per network byte) of a collective kernel on
    ``units`` held units (see the module docstring); resources are named ``<name>.bytes``,
    ``<name>.flops``, ``<name>.hbm``.

    Args:
        hbm: the NPU's HBM resource communication draws on.
        unit_bandwidth: network bytes/s one unit drives (B/s).
        hbm_bytes_per_byte: HBM bytes per network byte, per step kind.
        reduce_kind: the step kind that reduces (pays ``reduction_flops_per_byte``).
        unit_hbm_bandwidth: most load B/s one held unit of this kernel keeps in flight (B/s),
            charged with :data:`LOOP_BYTES_PER_BYTE`; None: ``npu.kernels.unit_hbm_bandwidth``
            (no limit if that is unset too).
    """
    throughput = engine.add_resource(f"{name}.bytes", units * unit_bandwidth)
    demand: dict[str, dict[Resource, float]] = {
        kind: ({hbm: b, throughput: 1.0} if b > 0 else {throughput: 1.0})
        for kind, b in hbm_bytes_per_byte.items()
    }
    unit_hbm = npu.kernels.unit_hbm_bandwidth if unit_hbm_bandwidth is None else unit_hbm_bandwidth
    if unit_hbm is not None:
        # what the held units keep in flight bounds the payload their loop covers
        issue = engine.add_resource(f"{name}.hbm", units * unit_hbm)
        for kind, per_byte in demand.items():
            if hbm in per_byte and LOOP_BYTES_PER_BYTE[kind] > 0:
                per_byte[issue] = LOOP_BYTES_PER_BYTE[kind]
    if reduction_flops_per_byte > 0 and reduce_kind in demand:
        flops = engine.add_resource(f"{name}.flops", units * npu.vector_flops / npu.compute_units)
        demand[reduce_kind][flops] = reduction_flops_per_byte
    return demand


def reduction_meters(demand: Mapping[str, Mapping[Resource, float]]) -> list[Resource]:
    """The reduction-FLOP resources (``<name>.flops``) of :func:`sm_kernel_demand`'s demand:
    their ``used`` counts the FLOPs its kernels reduced."""
    found = {r for per_byte in demand.values() for r in per_byte if r.name.endswith(".flops")}
    return sorted(found, key=lambda r: r.index)


def engine_parallelism(npu: NPUConfig, bandwidth: float) -> float:
    """Compute units' worth of memory-level parallelism of an engine streaming ``bandwidth``
    (B/s) from HBM (see the module docstring)."""
    unit_hbm = npu.kernels.unit_hbm_bandwidth
    per_unit = (
        unit_hbm
        if unit_hbm is not None
        else npu.hbm_bandwidth * npu.kernels.hbm_efficiency / npu.compute_units
    )
    return bandwidth / per_unit


def check_fewer_units(field: str, count: int, system: SystemConfig) -> None:
    """ConfigError naming ``field`` unless ``count`` held units leave the compute kernel some."""
    units = system.npu.compute_units
    if count >= units:
        raise ConfigError(field, f"must be fewer than npu.compute_units ({units}), got {count}")
