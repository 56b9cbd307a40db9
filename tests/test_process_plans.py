"""Kernel plans shared by the runs of one process (``acesim.hardware.platform.process_plans``):
runs of an equal NPU configuration plan each kernel once; a different configuration, or a
straggler's slowed kernels, plans its own; every figure is the one a fresh process computes."""

from __future__ import annotations

from typing import Any

import pytest

import acesim.hardware.npu as npu_module
from acesim.config import load_system
from acesim.config.resolve import derive
from acesim.hardware import platform
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    planned: list[Any] = []
    plan = npu_module.plan_kernel

    def counting(config: Any, kernel: Any) -> Any:
        planned.append(kernel)
        return plan(config, kernel)

    monkeypatch.setattr(npu_module, "plan_kernel", counting)
    monkeypatch.setattr(platform, "PROCESS_PLANS", {})
    return planned


def _document(system: Any, **options: Any) -> dict[str, Any]:
    result, _execution = execute(make_run_case(system, "resnet50", {"npus": 16, **options}))
    return dict(result.to_dict())


def test_runs_of_one_npu_configuration_plan_each_kernel_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system = load_system("ace-isca21")
    fresh = _document(system)  # (planned with whatever this process held)
    planned = _counted(monkeypatch)
    first = _document(system)
    assert planned and first == fresh
    count = len(planned)
    # another endpoint, an equal NPU (a copy): nothing planned again, the same figures
    again = _document(derive(system, {}))
    assert len(planned) == count and again == first
    assert _document(system.with_endpoint("ideal")) == _document(system.with_endpoint("ideal"))
    assert len(planned) == count
    # another NPU configuration plans its own
    faster = derive(system, {"npu.hbm_bandwidth": system.npu.hbm_bandwidth * 2})
    _document(faster)
    assert len(planned) > count


def test_a_stragglers_slowed_plans_are_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    system = load_system("ace-isca21")
    straggler = {"stragglers": [{"rank": 1, "slowdown": 1.5}], "npus": 4}
    _counted(monkeypatch)
    varied = _document(system, **straggler)
    plain = _document(system, npus=4)
    assert _document(system, **straggler) == varied  # after the plain run, the same
    assert varied["iteration_time"] > plain["iteration_time"]
