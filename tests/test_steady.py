"""A composed iteration's steady state extrapolated from two smaller runs
(:mod:`acesim.training.steady`): the same figures as the composed run at its own size, to
rounding, on drawn configurations (models dense and MoE, four systems, five endpoint kinds,
1F1B, interleaved, ZB-H1 and DualPipe, DP, CP, EP, ZeRO, recomputation, TP overlap) with many
micro-batches per stage; where its check fails, the run at its own size, to the last bit."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import pytest
from llm_draws import SYSTEMS, finish_draw, resolving, small_models

from acesim.runs.llm import run_llm
from acesim.training import steady
from acesim.training.schedules import SCHEDULES

#: the module's shared runs (module fixtures) made once: its tests in one worker
pytestmark = pytest.mark.xdist_group("steady")

_DRAWN = 24
#: a figure's difference from the run at its own size: relative to itself, and absolute
#: relative to the iteration time (sums of many floats in another order)
_RELATIVE = 1e-9
_ABSOLUTE = 1e-11

_MODELS = small_models(8)


def _draw(rng: random.Random) -> tuple[Any, ...]:
    """One configuration with 24 or 32 micro-batches per pipeline stage and DP rank."""
    model = rng.choice(_MODELS)
    system = rng.choice(SYSTEMS)
    nodes = rng.choice([1, 1, 2])
    tp = rng.choice([1, 2])
    pp = rng.choice([2, 4, 4])
    parts = [f"tp={tp}", f"pp={pp}"]
    kind = rng.choice(["", "", "vpp", "zb-h1", "dualpipe"])
    parts += ["vpp=2"] if kind == "vpp" else [f"schedule={kind}"] if kind else []
    return finish_draw(rng, model, system, nodes, tp, pp, parts, [24, 32])


def _cases(count: int) -> Iterator[Any]:
    return resolving(_draw, count, 2028)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}.{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}[{i}]").items()
        }
    return {prefix: value}


def _sizes(case: Any) -> tuple[int, int] | None:
    order = SCHEDULES.get(case.schedule)
    chunks = len(case.stages[0])
    return steady.reduced_sizes(order, case.place.pp, case.parallel.vpp, chunks, case.micro_batches)


def _run(case: Any, enabled: bool) -> tuple[Any, Any]:
    held = steady.ENABLED
    steady.ENABLED = enabled
    try:
        return run_llm(case, mode="composed")
    finally:
        steady.ENABLED = held


@pytest.fixture(scope="module")
def runs() -> list[tuple[Any, Any, Any]]:
    """(case, the run extrapolated where it applies and its execution, the run at its size)."""
    out = []
    for case in _cases(_DRAWN):
        out.append((case, _run(case, True), _run(case, False)[0]))
    return out


def _differences(fast: Any, full: Any) -> list[str]:
    """The figures of two results that differ by more than rounding (see the tolerances)."""
    scale = full.iteration_time
    a, b = _flat(asdict(fast)), _flat(asdict(full))
    assert a.keys() == b.keys()
    out = []
    for key, value in b.items():
        if key == ".mode_note":
            continue
        other = a[key]
        if isinstance(value, float) and not isinstance(value, bool):
            if abs(other - value) > _RELATIVE * abs(value) + _ABSOLUTE * scale:
                out.append(f"{key}: {other!r} against {value!r}")
        elif other != value:
            out.append(f"{key}: {other!r} against {value!r}")
    return out


@pytest.mark.parametrize("index", range(_DRAWN))
def test_an_extrapolated_iteration_has_the_figures_of_the_run_at_its_size(
    runs: list[tuple[Any, Any, Any]], index: int
) -> None:
    case, (fast, execution), full = runs[index]
    assert _differences(fast, full) == [], case.parallel.describe()
    composition = execution.composed  # (None: class mode, the iteration does not compose)
    if composition is not None and composition.extrapolated is not None:
        small, large = composition.extrapolated
        assert small < large < case.micro_batches
        assert "steady state extrapolated from composed runs of" in fast.mode_note
        # the execution is the larger run's (module docstring)
        assert execution.graph.iterations == case.iterations


def test_most_draws_extrapolate(runs: list[tuple[Any, Any, Any]]) -> None:
    """Not vacuous: most draws extrapolate, over each schedule drawn (the others run class
    mode, FSDP over DP, or never pass the check within the budget: DualPipe on 2 stages)."""
    done = [case for case, (_, ex), _ in runs if ex.composed and ex.composed.extrapolated]
    assert len(done) >= 0.5 * len(runs)
    assert {case.schedule for case in done} >= {"1f1b", "interleaved", "zb-h1", "dualpipe"}


def test_a_run_not_yet_steady_is_followed_by_the_next_size(
    runs: list[tuple[Any, Any, Any]],
) -> None:
    """Some draws (ZB-H1 on 4 stages: steady from 7 or 8 micro-batches) pass the check on a
    later pair of sizes than the first."""
    later = [
        (case, ex.composed.extrapolated)
        for case, (_, ex), _ in runs
        if ex.composed and ex.composed.extrapolated and ex.composed.extrapolated != _sizes(case)
    ]
    assert later


def test_a_failed_check_runs_the_iteration_at_its_size_and_says_why(
    monkeypatch: pytest.MonkeyPatch, runs: list[tuple[Any, Any, Any]]
) -> None:
    """No tolerance passes the check: every draw runs at its own size with the passes the
    two runs measured, the same figures to the last bit as a run that never tried."""
    monkeypatch.setattr(steady, "TOLERANCE", -1.0)
    checked = 0
    for case, _, full in runs[:8]:
        result, execution = _run(case, True)
        if execution.composed is None or _sizes(case) is None:
            continue  # class mode, or not tried
        assert execution.composed.extrapolated is None
        assert "simulated at its size, not extrapolated: " in result.mode_note
        a, b = asdict(result), asdict(full)
        a.pop("mode_note"), b.pop("mode_note")
        assert a == b
        checked += 1
    assert checked >= 3


def test_reduced_sizes_follow_the_schedules_period() -> None:
    one = SCHEDULES.get("1f1b")  # steady from the fill: SCHEDULE_FILL_PERIODS
    assert steady.reduced_sizes(one, 4, 1, 1, 64) == (4, 5)
    assert steady.reduced_sizes(one, 64, 1, 1, 512) == (64, 65)
    assert steady.reduced_sizes(one, 4, 1, 1, 16) is None  # 4 + 5 micro-batches save too little
    assert steady.reduced_sizes(one, 4, 1, 1, 24, beside_dp=True) is None  # a third: 27 > 24
    # interleaved needs the micro-batches a multiple of the stages: the period is 4
    assert steady.reduced_sizes(SCHEDULES.get("interleaved"), 4, 2, 2, 64) == (12, 16)
    # DualPipe splits them over two directions (and starts two periods past the fill)
    assert steady.reduced_sizes(SCHEDULES.get("dualpipe"), 4, 1, 2, 64) == (8, 10)
    assert steady.reduced_sizes(SCHEDULES.get("zb-h1"), 4, 1, 1, 64) == (6, 7)
    # 62 micro-batches are no whole number of 4-micro-batch periods past 12 (and 8-micro-batch
    # periods from 24 would cost too much)
    assert steady.reduced_sizes(SCHEDULES.get("interleaved"), 4, 2, 2, 62) is None


def test_the_schedules_given_their_own_fill_are_registered() -> None:
    assert set(steady.SCHEDULE_FILL_PERIODS) <= set(SCHEDULES.names())


def _execution(makespan: float, *ranks: list[tuple[float, float]]) -> Any:
    records = [
        {i: SimpleNamespace(start=s, end=e) for i, (s, e) in enumerate(times)} for times in ranks
    ]
    return SimpleNamespace(makespan=makespan, records=records)


def test_the_check_finds_one_period_inserted_and_nothing_else() -> None:
    small = _execution(5.0, [(0, 1), (1, 2), (2, 4), (4, 5)])
    # a period (1, 2) inserted after the second node: the rest moved by 1
    assert (
        steady.inserted_period(small, _execution(6.0, [(0, 1), (1, 2), (2, 3), (3, 5), (5, 6)]))
        is None
    )
    # the last node moved by less than the period
    moved = _execution(6.0, [(0, 1), (1, 2), (2, 3), (3, 5), (5, 5.5)])
    assert "not by the period" in steady.inserted_period(small, moved)
    assert "no more records" in steady.inserted_period(small, _execution(6.0, [(0, 1), (1, 6)]))
    assert "not longer" in steady.inserted_period(small, _execution(5.0, [(0, 1)] * 5))


def test_extrapolation_is_linear_item_by_item_and_refuses_other_forms() -> None:
    got = steady.extrapolated({"a": 1.0, "b": [2.0, 3.0]}, {"a": 2.0, "b": [4.0, 3.0], "c": 1.0}, 3)
    assert got == {"a": 4.0, "b": [8.0, 3.0], "c": 3.0}
    with pytest.raises(ValueError, match="lengths differ"):
        steady.extrapolated([1.0], [1.0, 2.0], 2)
    with pytest.raises(ValueError, match="values differ"):
        steady.extrapolated("x", "y", 2)
    assert steady.periods_past(66, 67, 512) == 446


def test_the_command_line_says_an_iteration_was_extrapolated() -> None:
    from clitools import cli_stdout

    out = cli_stdout(
        "run", "-s", "h100-nvswitch-8", "-w", "llama3-8b",
        "--parallel", "tp=2,pp=4", "--global-batch", "64", "--seq", "1024",
        "--endpoint", "baseline", "--json",
    )  # fmt: skip
    assert '"mode": "composed"' in out
    assert "steady state extrapolated from composed runs of 4 and 5 micro-batches" in out


def test_fsdp_over_dp_passes_measured_in_context_run_at_their_size() -> None:
    # Llama 3 8B's FSDP recipe shape on a small model: each pass measured in its context
    # (PassTimes.contexts). A smaller run whose contexts did not hold expanded every pass, and
    # its seeded sink carried that into the run at its size (every pass simulated in full,
    # 5x the CPU of llm_scale.py's 8b case): no steady state is tried there.
    from acesim.runs.llm import _steady_sizes, make_llm

    case = make_llm(
        "h100-nvswitch-8",
        _MODELS[0],
        parallel="tp=1,pp=1,zero=3,recompute=full",
        global_batch=128,
        micro_batch=1,
        seq=128,
    )
    assert case.micro_batches == 16 and _steady_sizes(case) is None
    (on, executed), (off, _) = _run(case, True), _run(case, False)
    assert on.to_dict() == off.to_dict()
    assert executed.composed is not None and executed.composed.expanded == 0
