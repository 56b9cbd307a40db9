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
* HBM is one resource (``fair`` policy: compute and communication share it weighted max-min),
  or two (``static``: communication owns ``hbm_share`` of the bandwidth, compute the rest).
* Compute units: the compute kernel gets every unit not held by collective kernels. Which
  units collectives hold is the endpoint's business (:mod:`acesim.hardware.endpoints`).

Compute kernels on one NPU run one at a time (one compute stream); the training loop ensures
that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..config.system import NPUConfig
from ..engine import INF, Activity, Engine, Resource
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
        static_comm_share: ``None`` for one shared HBM resource; else the fraction (0..1) of HBM
            bandwidth reserved for communication.
    """

    def __init__(
        self,
        engine: Engine,
        rank: int,
        config: NPUConfig,
        static_comm_share: float | None = None,
    ):
        self.engine = engine
        self.rank = rank
        self.config = config
        bw = config.hbm_bandwidth
        if static_comm_share is None:
            self.hbm = engine.add_resource(f"npu{rank}.hbm", bw)
            self.hbm_compute = self.hbm
            self.hbm_comm = self.hbm
        else:
            self.hbm_compute = engine.add_resource(
                f"npu{rank}.hbm.compute", bw * (1 - static_comm_share)
            )
            self.hbm_comm = engine.add_resource(f"npu{rank}.hbm.comm", bw * static_comm_share)
            self.hbm = self.hbm_compute
        self.units_for_compute = config.compute_units
        self.kernel: Activity | None = None
        self._kernel_spec: tuple[float, float, int | None, float | None] | None = None
        self.compute_busy = 0.0  # s of kernel time so far
        self.compute_hbm_bytes = 0.0  # HBM bytes moved by compute kernels so far
        self.kernel_log: list[tuple[Any, float, float, float]] = []  # tag, start, end, alone

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
    ) -> Activity:
        """Start a compute kernel (FLOPs, HBM bytes; or a fixed ``duration`` in s)."""
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

        self.kernel = self.engine.start(1.0, demand, finished, cap=cap, tag=tag)
        return self.kernel

    def set_compute_units(self, units: int) -> None:
        """Units available to compute kernels from now on (collectives took the rest)."""
        self.units_for_compute = units
        if self.kernel is not None and self._kernel_spec is not None:
            flops, _bytes, blocks, duration = self._kernel_spec
            self.engine.set_cap(self.kernel, self._cap(flops, blocks, duration, units))
