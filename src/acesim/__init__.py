"""acesim: a simulator of distributed deep-learning training platforms.

Compute kernels and collectives share an accelerator's compute units, HBM bandwidth and network
links; acesim simulates training iterations on that shared platform and compares collective
endpoints (NCCL-like baseline, the ACE offload engine, an ideal endpoint).
"""

from .config import SystemConfig, load_system, preset_names
from .config.experiment import ExperimentConfig
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
from .experiment import compare, run_experiment
from .results.collective import CollectiveResult
from .results.run import RunResult
from .simulate import simulate_collective
from .sweep import load_results, run_sweep
from .version import __version__
from .workload.loader import load_workload

__all__ = [
    "__version__",
    "SystemConfig",
    "load_system",
    "preset_names",
    "simulate_collective",
    "CollectiveResult",
    "ExperimentConfig",
    "run_experiment",
    "compare",
    "RunResult",
    "load_workload",
    "run_sweep",
    "load_results",
    "AcesimError",
    "ConfigError",
    "UnitError",
    "TopologyError",
    "WorkloadError",
    "TraceError",
    "SimulationError",
    "SweepError",
]
