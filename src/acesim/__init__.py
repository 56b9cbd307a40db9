"""acesim: a simulator of distributed deep-learning training platforms.

Compute kernels and collectives share an accelerator's compute units, HBM bandwidth and network
links; acesim simulates training iterations on that shared platform and compares collective
endpoints (NCCL-like baseline, the ACE offload engine, an ideal endpoint, and any kind a user
registers).

    import acesim
    comparison = acesim.compare("ace-isca21", "resnet50")   # the same case as `acesim run`
    print(comparison.speedup("ace"), comparison.best_baseline.info.describe())
    result = acesim.run("ace-isca21", "gnmt", endpoint="ace", iterations=5, npus=16)

    # LLM training with Megatron's parallelism (class mode: one simulated GPU per stage)
    par = acesim.parse_parallel("tp=4,pp=8,vpp=5", global_batch=128, micro_batch=1, seq=8192)
    case = acesim.make_llm_case("h100-nvswitch-8", "llama3-70b", par, precision="fp8", nodes=8)
    llm, _execution = acesim.run_llm(case)
"""

from . import _compiled, errors
from ._compiled import compiled
from .config import SystemConfig, load_system, preset_names
from .config.experiment import ExperimentConfig, RunOptions
from .errors import *  # noqa: F403 (the exceptions: errors.__all__, added to __all__ below)
from .hardware.endpoints import EndpointKind, register_endpoint
from .network.group import Group, Span
from .plan import PlanResult, plan
from .results.collective import CollectiveResult
from .results.jobs import JobsResult
from .results.llm import LlmResult
from .results.run import RunResult
from .runs import Comparison, compare, run, run_experiment
from .runs.jobs import run_jobs
from .runs.llm import LlmCase, make_llm_case, run_llm
from .simulate import simulate_collective
from .sweep import load_results, run_sweep
from .version import __version__
from .workload.llm.models import TransformerConfig
from .workload.llm.parallel import ParallelConfig, parse_parallel
from .workload.loader import load_workload

_compiled.warn_stale()  # an edit a stale compiled module would hide, said at import

__all__ = [
    "__version__",
    "compiled",
    "SystemConfig",
    "load_system",
    "preset_names",
    "simulate_collective",
    "CollectiveResult",
    "ExperimentConfig",
    "RunOptions",
    "run",
    "run_experiment",
    "run_jobs",
    "JobsResult",
    "compare",
    "plan",
    "PlanResult",
    "Comparison",
    "RunResult",
    "Group",
    "Span",
    "EndpointKind",
    "register_endpoint",
    "load_workload",
    "TransformerConfig",
    "ParallelConfig",
    "parse_parallel",
    "LlmCase",
    "make_llm_case",
    "run_llm",
    "LlmResult",
    "run_sweep",
    "load_results",
]
__all__ += errors.__all__  # the exceptions, one list
