"""The NPU: compute units and HBM, shared by compute kernels and collectives.

Model
-----
* A compute kernel of ``F`` FLOPs touching ``M`` bytes of HBM is one fluid activity of work 1.0
  demanding ``M`` bytes of HBM per unit of work, capped at ``u * f / F`` per second, where ``u``
  is the compute units it may use and ``f`` the peak FLOP/s of one unit. Alone, it therefore
  runs at its roofline ``max(F / (u f), M / B_hbm)``.
* Wave quantisation (optional): a kernel of ``W`` thread-blocks on ``u`` units runs
  ``ceil(W/u)`` waves, i.e. as if on ``W / ceil(W/u)`` units.
* A kernel given as a fixed time ``T`` (measured on all ``U`` units) runs at ``u/U`` of its
  speed on ``u`` units; its HBM demand is ``M`` if known, else none.
* HBM is one resource shared weighted max-min by compute and communication, unless an endpoint
  partitions it (:meth:`NPU.partition_hbm`: communication owns a share of the bandwidth,
  compute the rest).
* Compute units are a space-shared pool (:class:`acesim.engine.Pool`): collective kernels hold
  units (for a whole collective or for one step, the endpoint decides; see
  :mod:`acesim.hardware.endpoints`), and the compute kernel runs on the units nobody holds; its
  rate cap follows the free units whenever they change.

Compute kernels on one NPU run one at a time (one compute stream); the training loop ensures
that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..config.system import NPUConfig
from ..engine import INF, Activity, Engine, Pool, Resource
from ..errors import SimulationError


def effective_units(units: int, blocks: int | None) -> float:
    """Units a kernel of ``blocks`` thread-blocks effectively uses on ``units`` units."""
    if units <= 0:
        return 0.0
    if not blocks:
        return float(units)
    waves = math.ceil(blocks / units)
    return blocks / waves


class NPU:
    """One simulated NPU.

    Args:
        engine: the event kernel.
        rank: simulated rank index.
        config: NPU parameters.
    """

    def __init__(self, engine: Engine, rank: int, config: NPUConfig):
        self.engine = engine
        self.rank = rank
        self.config = config
        self.hbm = engine.add_resource(f"npu{rank}.hbm", config.hbm_bandwidth)
        self.hbm_compute = self.hbm
        self.hbm_comm = self.hbm
        #: compute units; collective kernels hold some, the compute kernel runs on the rest
        self.units = engine.add_pool(f"npu{rank}.units", config.compute_units)
        self.units.observe(self._units_changed)
        self.units_for_compute = config.compute_units
        self.kernel: Activity | None = None
        self._kernel_spec: tuple[float, float, int | None, float | None] | None = None
        self.compute_busy = 0.0  # s of kernel time so far
        self.compute_hbm_bytes = 0.0  # HBM bytes moved by compute kernels so far
        self.kernel_log: list[tuple[Any, float, float, float]] = []  # tag, start, end, alone

    def partition_hbm(self, comm_share: float) -> None:
        """Split HBM statically (before the run): communication owns ``comm_share`` (0..1) of
        the bandwidth, compute kernels the rest."""
        if self.hbm_comm is not self.hbm_compute:
            raise SimulationError(f"npu{self.rank}: HBM is already partitioned")
        if not 0 < comm_share < 1:
            raise SimulationError(f"npu{self.rank}: HBM share must be in (0, 1), got {comm_share}")
        bw = self.config.hbm_bandwidth
        self.engine.set_capacity(self.hbm, bw * (1 - comm_share))
        self.hbm_compute = self.hbm
        self.hbm_comm = self.engine.add_resource(f"npu{self.rank}.hbm.comm", bw * comm_share)

    @property
    def comm_hbm_bytes(self) -> float:
        """HBM bytes moved by communication so far (everything that is not a compute kernel)."""
        return sum(r.used for r in self.hbm_resources) - self.compute_hbm_bytes

    @property
    def hbm_resources(self) -> list[Resource]:
        return [self.hbm] if self.hbm is self.hbm_comm else [self.hbm_compute, self.hbm_comm]

    def kernel_time_alone(
        self,
        flops: float,
        hbm_bytes: float,
        blocks: int | None = None,
        duration: float | None = None,
    ) -> float:
        """Roofline time (s) of a kernel on all units and all HBM bandwidth."""
        cap = self._cap(flops, blocks, duration, self.config.compute_units)
        t_compute = 1.0 / cap if cap < INF else 0.0
        t_memory = hbm_bytes / self.config.hbm_bandwidth
        return max(t_compute, t_memory)

    def _cap(self, flops: float, blocks: int | None, duration: float | None, units: int) -> float:
        eff = effective_units(units, blocks) if self.config.wave_quantization else float(units)
        if eff <= 0:
            return 0.0
        if duration is not None:
            if duration <= 0:
                return INF
            return eff / self.config.compute_units / duration
        if flops <= 0:
            return INF
        return eff * self.config.flops_per_unit / flops

    def run_kernel(
        self,
        flops: float,
        hbm_bytes: float,
        on_done: Callable[[Activity], Any],
        *,
        blocks: int | None = None,
        duration: float | None = None,
        tag: Any = None,
        track: bool = False,
    ) -> Activity:
        """Start a compute kernel (FLOPs, HBM bytes; or a fixed ``duration`` in s); ``track``:
        report what binds it to the engine's bound listener."""
        if self.kernel is not None:
            raise SimulationError(f"npu{self.rank}: a compute kernel is already running")
        self._kernel_spec = (flops, hbm_bytes, blocks, duration)
        cap = self._cap(flops, blocks, duration, self.units_for_compute)
        demand = {self.hbm_compute: hbm_bytes} if hbm_bytes > 0 else {}
        alone = self.kernel_time_alone(flops, hbm_bytes, blocks, duration)
        start = self.engine.now

        def finished(act: Activity) -> None:
            self.kernel = None
            self._kernel_spec = None
            self.compute_busy += self.engine.now - start
            self.compute_hbm_bytes += act.work * hbm_bytes
            self.kernel_log.append((tag, start, self.engine.now, alone))
            on_done(act)

        self.kernel = self.engine.start(
            1.0, demand, finished, cap=cap, tag=tag, track="kernel" if track else None
        )
        return self.kernel

    def _units_changed(self, pool: Pool) -> None:
        """The units free for compute changed (collective kernels took or returned some)."""
        units = int(round(pool.free))
        if units == self.units_for_compute:
            return
        self.units_for_compute = units
        if self.kernel is not None and self._kernel_spec is not None:
            flops, _bytes, blocks, duration = self._kernel_spec
            self.engine.set_cap(self.kernel, self._cap(flops, blocks, duration, units))

    def kernel_work_done(self) -> float:
        """Fraction (0..1) of the running compute kernel done so far (0 when none runs)."""
        return self.engine.work_done(self.kernel) if self.kernel is not None else 0.0

    @property
    def kernel_hbm_bytes(self) -> float:
        """HBM bytes of the running compute kernel's whole work (0 when none runs)."""
        return self._kernel_spec[1] if self._kernel_spec is not None else 0.0
