"""Collective endpoints: what the local part of a collective costs at an NPU.

``baseline`` (NCCL-like)
    Collective kernels hold ``comm_units`` compute units, either only while a collective is
    active at the NPU (``while_active``) or for the whole run (``reserved``). Each network byte
    costs HBM traffic by step kind: a reduce-scatter step ~5 bytes (the interface writes the
    received piece, the kernel reads it and the local piece, writes the sum, the interface reads
    it to send on), an all-gather step ~2 (write the received piece, read it to forward), an
    all-to-all step 2 (write on receive, read on send: no reduction). Reductions cost
    ``reduction_flops_per_byte`` FLOPs per network byte on the held units; the held units drive
    at most ``comm_units * unit_bandwidth`` network bytes/s.

``ace``
    An engine with SRAM, ALUs and DMA beside the network interface. A chunk entering a
    collective is read from HBM once by DMA into SRAM (its input bytes), every phase runs out of
    SRAM, the result is written once (its output bytes). Reduce steps use the ALU at one byte of
    ALU throughput per network byte. SRAM bounds the chunks in flight: a chunk waits (FIFO)
    until its footprint fits. By default ACE splits every chunk into pieces of at most half its
    SRAM (so that one piece streams in while another is in the network); with splitting off, a
    chunk larger than the whole SRAM is, if spilling is allowed,
    staged through HBM: the fraction ``1 - sram/chunk`` of its network bytes pays
    ``spill_hbm_bytes_per_byte`` of extra HBM traffic (written out and read back); otherwise it
    is a configuration error. ACE holds no compute unit.

``ideal``
    Collectives cost the endpoint nothing (upper bound).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..config.system import EndpointConfig, NPUConfig
from ..engine import Engine, Resource
from ..errors import ConfigError
from ..network.algorithms import ALLTOALL, GATHER, REDUCE
from ..network.collective import Endpoint
from .npu import NPU


class IdealEndpoint(Endpoint):
    """Collectives consume no endpoint resources."""

    name = "ideal"

    def __init__(self, npus: list[NPU]):
        self.npus = npus


class BaselineEndpoint(Endpoint):
    """NCCL-like collectives on the NPU's own compute units and HBM (see module docstring)."""

    name = "baseline"

    def __init__(self, engine: Engine, npus: list[NPU], config: EndpointConfig, npu: NPUConfig):
        self.engine = engine
        self.npus = npus
        self.cfg = config.baseline
        cfg = self.cfg
        self.units = cfg.comm_units
        self.message_weight = cfg.hbm_weight
        self.total_units = npu.compute_units
        self._active = [0] * len(npus)
        self._throughput: list[Resource] = []
        self._flops: list[Resource] = []
        self._demand: list[dict[str, dict[Resource, float]]] = []
        for n in npus:
            thr = engine.add_resource(
                f"npu{n.rank}.comm_units.bytes", cfg.comm_units * cfg.unit_bandwidth
            )
            flo = engine.add_resource(
                f"npu{n.rank}.comm_units.flops", cfg.comm_units * npu.flops_per_unit
            )
            self._throughput.append(thr)
            self._flops.append(flo)
            per_kind = {
                REDUCE: {n.hbm_comm: cfg.reduce_hbm_bytes_per_byte, thr: 1.0},
                GATHER: {n.hbm_comm: cfg.gather_hbm_bytes_per_byte, thr: 1.0},
                ALLTOALL: {n.hbm_comm: cfg.alltoall_hbm_bytes_per_byte, thr: 1.0},
            }
            if cfg.reduction_flops_per_byte > 0:
                per_kind[REDUCE][flo] = cfg.reduction_flops_per_byte
            self._demand.append(per_kind)
            if cfg.unit_policy == "reserved":
                n.set_compute_units(npu.compute_units - cfg.comm_units)

    def hbm_bytes_per_network_byte(self, kind: str) -> float:
        return {
            REDUCE: self.cfg.reduce_hbm_bytes_per_byte,
            GATHER: self.cfg.gather_hbm_bytes_per_byte,
            ALLTOALL: self.cfg.alltoall_hbm_bytes_per_byte,
        }[kind]

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        return self._demand[rank][kind]

    def collective_started(self, rank: int) -> None:
        self._active[rank] += 1
        if self._active[rank] == 1 and self.cfg.unit_policy == "while_active":
            self.npus[rank].set_compute_units(self.total_units - self.units)

    def collective_finished(self, rank: int) -> None:
        self._active[rank] -= 1
        if self._active[rank] == 0 and self.cfg.unit_policy == "while_active":
            self.npus[rank].set_compute_units(self.total_units)


class AceEndpoint(Endpoint):
    """The Accelerator Collectives Engine (see module docstring)."""

    name = "ace"

    def __init__(self, engine: Engine, npus: list[NPU], config: EndpointConfig):
        self.engine = engine
        self.npus = npus
        self.cfg = config.ace
        self._free = [self.cfg.sram] * len(npus)
        self._waiting: list[deque[tuple[float, float, Callable[[], None]]]] = [
            deque() for _ in npus
        ]
        self._alu = [
            engine.add_resource(f"npu{n.rank}.ace.alu", self.cfg.alu_bandwidth) for n in npus
        ]
        self._dma = [
            engine.add_resource(f"npu{n.rank}.ace.dma", self.cfg.dma_bandwidth) for n in npus
        ]
        self._spill_fraction = [0.0] * len(npus)
        self.hbm_bytes = 0.0

    def max_chunk_bytes(self) -> float | None:
        return self.cfg.sram / 2 if self.cfg.split_chunks else None

    def _footprint(self, nbytes: float) -> float:
        if nbytes > self.cfg.sram and not self.cfg.allow_spill:
            raise ConfigError(
                "endpoint.ace.sram",
                f"a chunk of {nbytes:.0f} bytes does not fit and allow_spill is off; "
                "raise sram, use more collective.chunks or allow spilling",
                self.cfg.sram,
            )
        return min(nbytes, self.cfg.sram)

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        demand: dict[Resource, float] = {}
        if kind == REDUCE:
            demand[self._alu[rank]] = 1.0
        spill = self._spill_fraction[rank]
        if spill > 0:
            demand[self.npus[rank].hbm_comm] = spill * self.cfg.spill_hbm_bytes_per_byte
        return demand

    def chunk_begin(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        need = self._footprint(footprint)
        if footprint > self.cfg.sram:
            self._spill_fraction[rank] = max(
                self._spill_fraction[rank], 1 - self.cfg.sram / footprint
            )
        queue = self._waiting[rank]
        if queue or self._free[rank] < need * (1 - 1e-12):
            queue.append((in_bytes, footprint, proceed))
            return
        self._admit(rank, in_bytes, footprint, proceed)

    def _admit(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        self._free[rank] -= self._footprint(footprint)
        self._dma_transfer(rank, in_bytes, proceed)

    def _dma_transfer(self, rank: int, nbytes: float, then: Callable[[], None]) -> None:
        npu = self.npus[rank]
        self.hbm_bytes += nbytes
        self.engine.start(
            nbytes,
            {npu.hbm_comm: 1.0, self._dma[rank]: 1.0},
            lambda _act: then(),
            tag=("ace-dma", rank),
        )

    def chunk_end(
        self, rank: int, out_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        def stored() -> None:
            self._free[rank] += self._footprint(footprint)
            queue = self._waiting[rank]
            while queue and self._free[rank] >= self._footprint(queue[0][1]) * (1 - 1e-12):
                size, fp, cont = queue.popleft()
                self._admit(rank, size, fp, cont)
            proceed()

        self._dma_transfer(rank, out_bytes, stored)


def make_endpoint(
    engine: Engine, npus: list[NPU], config: EndpointConfig, npu: NPUConfig
) -> Endpoint:
    """The endpoint model named by ``config.kind``."""
    if config.kind == "baseline":
        return BaselineEndpoint(engine, npus, config, npu)
    if config.kind == "ace":
        return AceEndpoint(engine, npus, config)
    return IdealEndpoint(npus)
