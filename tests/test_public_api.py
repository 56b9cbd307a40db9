"""The curated public API (httpx style): ``acesim.__all__`` is exactly this, and it imports."""

from __future__ import annotations

import importlib

import pytest

import acesim
import acesim.errors

PUBLIC_API = {
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
    "AcesimError",
    "ConfigError",
    "UnitError",
    "TopologyError",
    "WorkloadError",
    "TraceError",
    "SimulationError",
    "SweepError",
}


def test_all_is_the_curated_public_api() -> None:
    assert set(acesim.__all__) == PUBLIC_API
    assert len(acesim.__all__) == len(set(acesim.__all__)), "duplicates in __all__"


@pytest.mark.parametrize("name", sorted(PUBLIC_API))
def test_every_public_name_imports(name: str) -> None:
    module = importlib.import_module("acesim")
    assert getattr(module, name) is not None
    namespace: dict[str, object] = {}
    exec(f"from acesim import {name}", namespace)
    assert namespace[name] is getattr(acesim, name)


def test_every_error_class_is_public_and_derives_from_the_base() -> None:
    for name in acesim.errors.__all__:
        cls = getattr(acesim.errors, name)
        assert name in acesim.__all__
        assert issubclass(cls, acesim.AcesimError)


def test_public_classes_and_functions_are_documented() -> None:
    for name in acesim.__all__:
        if name.startswith("__"):
            continue
        assert (getattr(acesim, name).__doc__ or "").strip(), f"{name} has no docstring"


def test_simulate_collective_returns_the_result_object() -> None:
    result = acesim.simulate_collective("a100-nvswitch-8", "all-reduce", "1 MiB")
    assert isinstance(result, acesim.CollectiveResult)
    assert result.size == 2**20
    assert result.algbw == pytest.approx(result.size / result.time, rel=1e-12)


def test_version_is_the_package_metadata_version() -> None:
    from importlib.metadata import version

    assert acesim.__version__ == version("acesim")
