"""Simulations planned twice run once (acesim.studies.dedup): a copy only where the run never
read what differs, and the copied result equals the re-simulated one."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config import load_system
from acesim.config.endpoint import settings_reads
from acesim.config.resolve import derive
from acesim.config.system import SystemConfig
from acesim.studies import membw
from acesim.studies.dedup import ExactMemo, canonical, reuse_plan, traced_call
from acesim.studies.reproduce import (
    plan_cases,
    plan_reproduction,
    relabeled,
    run_job,
    same_runs,
)
from acesim.studies.sensitivity import VARIANTS
from acesim.studies.tasks import Task


def _dma(system: SystemConfig) -> float:
    return float(system.endpoint.settings("ace").dma_bandwidth)


def _baseline_units(system: SystemConfig) -> Any:
    return system.endpoint.settings("baseline").comm_units


def test_a_call_records_the_endpoint_kinds_whose_settings_it_read() -> None:
    system = load_system("ace-isca21")
    traced = traced_call(_dma, (system,))
    assert traced.value == _dma(system)
    assert traced.kinds == {"ace"}


def test_settings_a_call_never_read_do_not_tell_two_calls_apart() -> None:
    # derived as the variants are (a preset keeps a float field's integer as written; a
    # derived system holds it as a float, and 131072 and 131072.0 are different inputs)
    system = derive(load_system("ace-isca21"), {})
    halved = VARIANTS.get("dma_half").change(system)
    unread = frozenset({"baseline"})
    assert canonical(_baseline_units, (system,), unread) == canonical(
        _baseline_units, (halved,), unread
    )
    # ...those it read do, and so does everything outside the endpoint settings
    assert canonical(_dma, (system,), frozenset({"ace"})) != canonical(
        _dma, (halved,), frozenset({"ace"})
    )
    faster = VARIANTS.get("drf").change(system)
    assert canonical(_baseline_units, (system,), unread) != canonical(
        _baseline_units, (faster,), unread
    )
    # 1 and 1.0 are different inputs
    assert canonical(_dma, (1,), unread) != canonical(_dma, (1.0,), unread)


def test_an_argument_it_cannot_write_down_makes_a_call_unique() -> None:
    assert canonical(_dma, (lambda: None,), frozenset()) is None


def _tasks(system: SystemConfig, prefix: tuple[Any, ...]) -> dict[str, Task]:
    jobs = plan_cases(system, workloads=["dlrm"], npus=[16], sram=False)
    picked = {job.key[2]: job for job in jobs if job.key[2] in ("baseline", "ace")}
    return {kind: Task((*prefix, *job.key), run_job, (job,)) for kind, job in picked.items()}


def test_a_reused_run_equals_the_run_simulated_again() -> None:
    system = load_system("ace-isca21")
    main = _tasks(system, ())
    halved = _tasks(VARIANTS.get("dma_half").change(system), ("dma_half",))
    traced = {t.key: traced_call(t.fn, t.args) for t in main.values()}
    copies = reuse_plan(
        list(main.values()), {k: v.kinds for k, v in traced.items()}, list(halved.values())
    )
    # ACE's DMA bandwidth cannot move a baseline run: the same simulation; an ACE run reads it
    assert copies == {halved["baseline"].key: main["baseline"].key}
    again = halved["baseline"].fn(*halved["baseline"].args)
    assert again == traced[main["baseline"].key].value


def test_the_memo_computes_a_call_once_and_replays_its_reads() -> None:
    system = derive(load_system("ace-isca21"), {})
    memo = ExactMemo()
    first = memo.call(_baseline_units, system)
    # dma_half changes nothing the call read: the same computation, not run again
    halved = VARIANTS.get("dma_half").change(system)
    with settings_reads() as kinds:
        again = memo.call(_baseline_units, halved)
    assert again is first and (memo.hits, memo.misses) == (1, 1)
    assert kinds == {"baseline"}  # an enclosing trace sees the reads the result depends on
    memo.call(_baseline_units, VARIANTS.get("static_hbm").change(system))
    assert memo.misses == 2


def test_the_sram_sweeps_own_size_is_the_ace_run_relabelled() -> None:
    """The SRAM sweep's 4 MiB (the preset's own SRAM) is the case's ACE run: planned once,
    its result the ACE run's with the sweep's label, equal to simulating it."""
    tasks = plan_reproduction(
        load_system("ace-isca21"), workloads=["resnet50"], npus=[16], hbm_targets=False
    )
    sram = ("run", "resnet50", 16, "ace_sram", 4.0 * 2**20)
    ace = ("run", "resnet50", 16, "ace", 0)
    assert same_runs(tasks) == {sram: ace}
    by_key = {t.key: t for t in tasks}
    (sram_job,) = by_key[sram].args
    (ace_job,) = by_key[ace].args
    simulated = run_job(sram_job)
    copied = relabeled(run_job(ace_job), sram_job.variant)
    assert copied.info.variant == sram_job.variant != ace_job.variant
    assert repr(copied) == repr(simulated)


def test_a_variant_of_the_workloads_only_takes_the_main_hbm_analysis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The HBM analysis never reads the workloads: under ``fp32`` (every workload's precision
    changed) it is the main reproduction's very simulation, taken instead of run; simulated
    again (its collectives not taken from the analysis's memo either), it gives the same
    row."""
    system = load_system("ace-isca21")

    def membw_tasks(changed: SystemConfig, prefix: tuple[Any, ...]) -> list[Task]:
        tasks = plan_reproduction(
            changed, workloads=["dlrm"], npus=[16], sram=False, hbm_targets=False, prefix=prefix
        )
        return [t for t in tasks if "membw" in t.key]

    (main,) = membw_tasks(system, ())
    (fp32,) = membw_tasks(VARIANTS.get("fp32").change(system), ("fp32",))
    (drf,) = membw_tasks(VARIANTS.get("drf").change(system), ("drf",))
    traced = traced_call(main.fn, main.args)
    assert reuse_plan([main], {main.key: traced.kinds}, [fp32, drf]) == {fp32.key: main.key}
    monkeypatch.setattr(membw, "MEMO", ExactMemo())
    assert fp32.fn(*fp32.args) == traced.value


def test_a_derived_call_is_looked_up_before_its_system_is_derived() -> None:
    """``call_derived`` computes ``fn(derive())`` once per distinct computation: a base equal
    in everything the call read, derived the same way, takes the result without deriving;
    a base that differs in what it read, or another derivation, computes again."""
    system = derive(load_system("ace-isca21"), {})
    memo = ExactMemo()
    derived: list[str] = []

    def units_with(base: SystemConfig, units: int) -> Any:
        def make() -> SystemConfig:
            derived.append(base.name)
            return base.with_endpoint("baseline", comm_units=units)

        return memo.call_derived(base, ("units", units), make, _baseline_units)

    first = units_with(system, 4)
    assert first == 4 and derived == [system.name]
    # dma_half changes nothing the call read: looked up, not derived, its reads replayed
    halved = VARIANTS.get("dma_half").change(system)
    with settings_reads() as kinds:
        assert units_with(halved, 4) is first
    assert kinds == {"baseline"} and len(derived) == 1 and (memo.hits, memo.misses) == (1, 1)
    # another derivation, or a base that differs in what the call read: computed
    assert units_with(system, 8) == 8
    static = VARIANTS.get("static_hbm").change(system)
    assert units_with(static, 4) == 4
    assert len(derived) == 3 and memo.misses == 3


@pytest.mark.parametrize("variant", ["dma_half", "static_hbm", "store_and_forward"])
def test_a_variant_s_hbm_analysis_takes_the_collectives_it_does_not_change(
    monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """After the main HBM analysis, a variant's takes from the memo every collective whose
    inputs it leaves as they were: ``dma_half`` all of ACE's (its ample settings replace the
    DMA rate), ``static_hbm`` ACE's and ``store_and_forward`` the baseline's (a derived
    system's validation reads every kind's settings, and changes none: not counted as read);
    simulated again with a fresh memo, the variant's row is the same."""
    system = load_system("ace-isca21")

    def membw_task(changed: SystemConfig, prefix: tuple[Any, ...]) -> Task:
        tasks = plan_reproduction(
            changed, workloads=["dlrm"], npus=[16], sram=False, hbm_targets=False, prefix=prefix
        )
        (task,) = [t for t in tasks if "membw" in t.key]
        return task

    main = membw_task(system, ())
    other = membw_task(VARIANTS.get(variant).change(system), (variant,))
    monkeypatch.setattr(membw, "MEMO", ExactMemo())
    main.fn(*main.args)
    hits = membw.MEMO.hits
    row = other.fn(*other.args)
    assert membw.MEMO.hits > hits
    monkeypatch.setattr(membw, "MEMO", ExactMemo())
    assert other.fn(*other.args) == row
