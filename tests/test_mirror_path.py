"""Symmetric mode's one-message steps sent to the mirror and completed at their delivery
(acesim.network.collective.MIRROR_PATH) equal the general step path exactly: the same
instants, byte counts, resource integrals and peaks, events, bit for bit, on drawn systems,
on ACE's streaming and store-and-forward pipelines at several SRAM sizes with a kernel taking
HBM from its DMA, and on a training run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from collective_figures import run_figures
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import examples
from test_collectives import scenarios

from acesim.config import SystemConfig, load_system
from acesim.network import collective as collective_module
from acesim.studies.reproduce import plan_cases, run_job

MiB = 2**20


@pytest.fixture(autouse=True)
def mirror_restored() -> Iterator[None]:
    try:
        yield
    finally:
        collective_module.MIRROR_PATH = True


def _run(
    system: SystemConfig,
    work: list[tuple[str, float]],
    *,
    mirror: bool,
    kernel_at: float | None = None,
) -> dict[str, object]:
    """Issue ``work`` together (and a memory-bound kernel on every NPU at ``kernel_at`` s);
    every figure the run leaves."""
    collective_module.MIRROR_PATH = mirror
    return run_figures(system, work, kernel_at)


@settings(max_examples=examples(30), deadline=None)
@given(scenarios(), st.sampled_from(["baseline", "ace", "ideal"]))
def test_mirror_steps_equal_the_general_path_on_random_systems(
    scenario: tuple[SystemConfig, list[tuple[str, float]]], endpoint: str
) -> None:
    system, work = scenario
    system = system.with_endpoint(endpoint)
    assert _run(system, work, mirror=True) == _run(system, work, mirror=False)


def _torus(shape: tuple[int, ...], mode: str, sram: float) -> SystemConfig:
    """ace-isca21 with ``shape`` (its first dimensions' kinds and links), ACE in ``mode``
    with ``sram`` bytes."""
    system = load_system("ace-isca21").model_copy(deep=True)
    system.network.dimensions = system.network.dimensions[: len(shape)]
    for dim, size in zip(system.network.dimensions, shape, strict=True):
        dim.size = size
    system.network.npus = None
    return system.with_endpoint("ace", mode=mode, sram=sram)


@settings(max_examples=examples(12), deadline=None)
@given(
    st.sampled_from([(4,), (2, 2), (4, 4), (2, 2, 2), (4, 2, 4)]),
    st.sampled_from(["streaming", "store_and_forward"]),
    st.sampled_from([256 * 1024.0, 512 * 1024.0, 1.0 * MiB, 4.0 * MiB]),
    st.lists(
        st.tuples(
            st.sampled_from(["all-reduce", "all-gather", "reduce-scatter"]),
            st.sampled_from([1e6, 3.0 * MiB, 8.0 * MiB]),
        ),
        min_size=1,
        max_size=2,
    ),
    st.one_of(st.none(), st.floats(0.0, 1.0)),
)
def test_ace_pipelines_with_a_kernel_equal_the_general_path(
    shape: tuple[int, ...],
    mode: str,
    sram: float,
    work: list[tuple[str, float]],
    kernel_at: float | None,
) -> None:
    """ACE's pieces (``sram`` over its partitions) through the phases and DMA, and a
    memory-bound kernel on every NPU at a drawn fraction of the run taking HBM from the DMA."""
    system = _torus(shape, mode, sram)
    at = None
    if kernel_at is not None:
        span = _run(system, work, mirror=False)["end"]
        assert isinstance(span, float)
        at = span * kernel_at
    mirrored = _run(system, work, mirror=True, kernel_at=at)
    assert mirrored == _run(system, work, mirror=False, kernel_at=at)


def test_a_training_run_on_ace_equals_the_general_path() -> None:
    """ResNet-50 on 16 NPUs of ace-isca21 with ACE at 1 MiB of SRAM (the reproduction's SRAM
    sweep, smaller): compute and the streamed pieces contend for HBM; every figure equal."""
    (job,) = [
        j
        for j in plan_cases(load_system("ace-isca21"), workloads=["resnet50"], npus=[16])
        if j.key[2] == "ace_sram" and j.key[3] == 1.0 * MiB
    ]
    collective_module.MIRROR_PATH = True
    mirrored = run_job(job)
    collective_module.MIRROR_PATH = False
    general = run_job(job)
    assert repr(mirrored) == repr(general)
    assert mirrored.iteration_time == general.iteration_time


def test_the_switch_turns_the_mirror_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mirror path is what runs a symmetric ACE pipeline's steps, and the switch makes the
    general path run them instead (so the equalities above compare two paths)."""
    calls: list[int] = []
    runtime = collective_module.CollectiveRuntime
    deliver = runtime._deliver_single

    def counted(self: object, *args: object) -> None:
        calls.append(1)
        deliver(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(runtime, "_deliver_single", counted)
    system = _torus((4, 4), "streaming", 1.0 * MiB)
    _run(system, [("all-reduce", 3.0 * MiB)], mirror=True)
    assert calls
    calls.clear()
    _run(system, [("all-reduce", 3.0 * MiB)], mirror=False)
    assert not calls
