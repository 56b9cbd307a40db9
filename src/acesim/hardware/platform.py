"""A platform elaborated from a system document: engine, NPUs, endpoint, network, collectives.

Elaboration (desmod's idea) checks that the model is fully wired before time starts: the
topology exists, every collective has an algorithm that can run on its dimension, the endpoint
parameters are coherent.
"""

from __future__ import annotations

from ..config.system import SystemConfig
from ..engine import Engine
from ..network.collective import CollectiveRuntime
from ..network.topology import Topology
from .endpoints import make_endpoint
from .npu import NPU


class Platform:
    """Everything the simulation of one system needs.

    Args:
        system: the validated system document.
        exact: simulate every NPU (True) or one representative per class (False).
    """

    def __init__(self, system: SystemConfig, *, exact: bool = False):
        self.system = system
        self.exact = exact
        self.engine = Engine()
        self.topology = Topology(system.network, system.collective)
        count = self.topology.npus if exact else 1
        endpoint_cfg = system.endpoint
        static = (
            endpoint_cfg.baseline.hbm_share
            if endpoint_cfg.kind == "baseline" and endpoint_cfg.baseline.hbm_sharing == "static"
            else None
        )
        self.npus = [NPU(self.engine, r, system.npu, static) for r in range(count)]
        self.endpoint = make_endpoint(self.engine, self.npus, endpoint_cfg, system.npu)
        self.collectives = CollectiveRuntime(
            self.engine, self.topology, system.collective, self.endpoint, exact=exact
        )
