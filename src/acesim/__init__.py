"""acesim: a simulator of distributed deep-learning training platforms.

Compute kernels and collectives share an accelerator's compute units, HBM bandwidth and network
links; acesim simulates training iterations on that shared platform and compares collective
endpoints (NCCL-like baseline, the ACE offload engine, an ideal endpoint).
"""

from .config import SystemConfig, load_system, preset_names
from .errors import (
    AcesimError,
    ConfigError,
    SimulationError,
    SweepError,
    TopologyError,
    TraceError,
    UnitError,
    WorkloadError,
)
from .results.collective import CollectiveResult
from .simulate import simulate_collective

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "SystemConfig",
    "load_system",
    "preset_names",
    "simulate_collective",
    "CollectiveResult",
    "AcesimError",
    "ConfigError",
    "UnitError",
    "TopologyError",
    "WorkloadError",
    "TraceError",
    "SimulationError",
    "SweepError",
]
