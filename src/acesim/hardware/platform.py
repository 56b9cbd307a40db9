"""A platform elaborated from a system document: engine, NPUs, endpoint, network, collectives.

Elaboration (desmod's idea) checks that the model is fully wired before time starts: the
topology exists, every collective operation has an algorithm that can run on every dimension,
the endpoint kind is registered and its settings fit the system. :func:`elaborate` runs those
checks without building the simulation (for sweeps and early errors).
"""

from __future__ import annotations

from typing import Any

from ..config.system import NPUConfig, SystemConfig
from ..engine import Engine
from ..errors import ConfigError
from ..network.collective import CollectiveRuntime
from ..network.plan import validate_algorithms
from ..network.topology import Topology
from .endpoints import ENDPOINT_KINDS, CopyEngineSettings, build_endpoint
from .npu import NPU, SharedPlans
from .strategy import Strategy
from .variation import apply_variation, npu_configs

__all__ = ["Platform", "elaborate", "SharedPlansByConfig"]

#: kernel plans per NPU configuration: ``id(config) -> (config, plans)`` (the configuration held
#: so that its id is not reused)
SharedPlansByConfig = dict[int, tuple[NPUConfig, SharedPlans]]


def _plans_for(shared: SharedPlansByConfig, config: NPUConfig) -> SharedPlans:
    """The plans ``shared`` holds for ``config`` (the first time, this process's plans for
    an equal configuration: :func:`process_plans`)."""
    held = shared.get(id(config))
    if held is None or held[0] is not config:
        held = shared[id(config)] = (config, process_plans(config).for_a_run())
    return held[1]


#: this process's kernel plans by NPU configuration (its JSON form), the most recently used
#: last: a plan is a function of the configuration and the kernel, and the runs of a study
#: or a sweep (a reproduction's endpoints and SM splits) run one workload on one NPU model
#: again and again
PROCESS_PLANS: dict[str, SharedPlans] = {}
#: NPU configurations whose plans :data:`PROCESS_PLANS` keeps, at most
PROCESS_PLANS_LIMIT = 8
#: exact mode whose collectives charge the NPUs nothing (``Strategy.lockstep``): fold each
#: pass's kernels while they have the NPU's HBM to themselves (:mod:`.kernel_fold`; the same
#: results, fewer events; False: every kernel on the event path, for comparison)
FOLD_KERNELS = True


def process_plans(config: NPUConfig) -> SharedPlans:
    """This process's plans for NPUs of ``config`` (equal configurations share them)."""
    key = config.model_dump_json()
    plans = PROCESS_PLANS.pop(key, None)
    if plans is None:
        plans = SharedPlans()
        if len(PROCESS_PLANS) >= PROCESS_PLANS_LIMIT:
            PROCESS_PLANS.pop(next(iter(PROCESS_PLANS)))
    PROCESS_PLANS[key] = plans
    return plans


def elaborate(system: SystemConfig) -> Topology:
    """Check ``system`` as the platform would (errors name the field); returns its topology."""
    topology = Topology(system.network, system.collective)
    validate_algorithms(system.collective, topology)
    ENDPOINT_KINDS.get(system.endpoint.kind)
    return topology


class Platform:
    """Everything the simulation of one system needs, built for one :class:`Strategy`.

    Args:
        system: the validated system document.
        strategy: how the run executes (:mod:`acesim.hardware.strategy`: symmetric, class
            mode with its classes, or exact mode with what makes ranks differ); decided by
            :func:`acesim.training.strategy.decide`, followed here.
        exact: shorthand for ``Strategy.every_npu()`` when no strategy is given.
        plans: kernel plans to share with other platforms of the same system (a composed
            run's: its passes alone and its rounds), per NPU configuration object (held, so
            its id names it); None: this platform's own.
    """

    def __init__(
        self,
        system: SystemConfig,
        strategy: Strategy | None = None,
        *,
        exact: bool = False,
        plans: SharedPlansByConfig | None = None,
    ):
        if strategy is None:
            strategy = Strategy.every_npu() if exact else Strategy()
        #: what observers attached to this platform record during a run (traces), by name
        self.recording: dict[str, Any] = {}
        self.system = system
        self.strategy = strategy
        self.exact = strategy.exact
        #: what made its ranks differ (None: nothing)
        self.variation = strategy.variation if strategy.exact else None
        self.engine = Engine()
        self.topology = elaborate(system)
        classes = strategy.classes if strategy.mode == "class" else None
        if classes is not None and classes.npus != self.topology.npus:
            raise ConfigError(
                "run.mode",
                f"the rank classes cover {classes.npus} NPUs but the system has "
                f"{self.topology.npus}",
                "class",
            )
        #: class mode's classes (None: exact mode, or symmetric mode's one class)
        self.classes = classes
        count = self.topology.npus if self.exact else (classes.count if classes else 1)
        variation = self.variation
        if variation and variation.npu_types:
            configs = npu_configs(variation, system, count)
        else:
            configs = [system.npu] * count
        shared = {} if plans is None else plans  # one per NPU configuration object
        self.npus = [NPU(self.engine, r, configs[r], _plans_for(shared, configs[r]))
                     for r in range(count)]  # fmt: skip
        for npu in self.npus if strategy.exact and strategy.lockstep else ():
            # collectives charge these NPUs nothing: a pass's kernels have HBM to themselves
            npu.fold_kernels = FOLD_KERNELS
        engines = system.endpoint.of(CopyEngineSettings, "copy_engine")
        for npu in self.npus:  # the hardware's DMA engines, whatever drives the collectives
            npu.copy_engines = self.engine.add_resource(
                f"npu{npu.rank}.copy_engines", engines.engines * engines.engine_bandwidth
            )
        self.endpoint = build_endpoint(self.engine, self.npus, self.topology, system)
        self.collectives = CollectiveRuntime(
            self.engine,
            self.topology,
            system.collective,
            self.endpoint,
            exact=self.exact,
            classes=count if not self.exact else 1,
        )
        _gpu_pcie_paths(self.npus, self.topology, self.collectives)
        if variation:
            apply_variation(variation, system, self.topology, self.npus, self.collectives)
            self.collectives.agree()

    def close(self) -> None:
        """The run on this platform has ended: what only the run needed is let go, so that
        it is freed at once by reference counting, not by the cyclic collector (the engine's
        remembered fillings: :meth:`Engine.forget_fills`; each NPU's units watcher:
        :meth:`NPU.close`). Every figure stays readable; nothing is computed differently."""
        self.engine.forget_fills()
        for npu in self.npus:
            npu.close()


def _gpu_pcie_paths(npus: list[NPU], topology: Topology, runtime: CollectiveRuntime) -> None:
    """On network dimensions that model the GPU-NIC PCIe path (``pcie_bandwidth``), every
    message an NPU sends or receives through its NIC also crosses the GPU's own PCIe link to
    the switch (GPUDirect RDMA: the NIC reads the GPU's memory for a send, writes it for a
    receive), the link host copies take too (``npu.host_link_bandwidth``: device-to-host for
    sends, host-to-device for receives), so the two share it."""
    for d in topology.dimensions:
        if d.pcie_bandwidth is None:
            continue
        for npu in npus:
            if npu.host_links:
                runtime.add_path(npu.rank, d.index, npu.host_links["d2h"], npu.host_links["h2d"])
