"""Mode ``composed`` (:mod:`acesim.training.compose`): an LLM iteration composed from each
distinct pipeline pass simulated once alone, the passes beside a DP collective simulated in
full. Against class mode, on 50 drawn configurations (models dense and MoE, four systems, five
endpoint kinds, 1F1B, interleaved, ZB-H1 and DualPipe, TP overlap, CP, EP, ZeRO and
recomputation; 16 with 3-4 micro-batches per stage, 34 with 1-2): the iteration within issue
27's bound (0.1%);
where it cannot compose (FSDP over DP with pipeline stages), variation, a trace, a run without
pipeline stages, what it does instead says why; FSDP over DP without pipeline stages composes
its passes in their context, equal to class mode.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator
from dataclasses import asdict, is_dataclass
from typing import Any

import pytest
from llm_draws import SCHEDULES, SYSTEMS, finish_draw, resolving, small_models
from test_fast_paths import _cases as _few_cases

from acesim.errors import ConfigError
from acesim.runs.llm import make_llm_case, run_llm
from acesim.training.compose import PassTimes
from acesim.workload.graph import beside_passes
from acesim.workload.llm.parallel import parse_parallel

#: the module's shared runs (module fixtures) made once: its tests in one worker
pytestmark = pytest.mark.xdist_group("compose")

#: issue 27's bound on an approximation's iteration time, relative to class mode
_BOUND = 1e-3
_DRAWN = 50
#: of them, drawn by :func:`_cases` (3-4 micro-batches per stage: passes repeat); the rest as
#: tests/test_fast_paths.py draws (1-2)
_REPEATING = 16

#: small transformers, dense and MoE
_MODELS = small_models(8)


def _draw(rng: random.Random) -> tuple[Any, ...]:
    """One configuration: model, system, nodes, parallel string, global batch, endpoint."""
    model = rng.choice(_MODELS)
    system = rng.choice(SYSTEMS)
    nodes = rng.choice([1, 1, 2])
    tp = rng.choice([1, 2, 4])
    pp = rng.choice([4, 4, 8])
    parts = [f"tp={tp}", f"pp={pp}"]
    if rng.random() < 0.4:
        parts.append("vpp=2")
    else:
        kind = rng.choice(SCHEDULES)
        if kind:
            parts.append(f"schedule={kind}")
    # enough micro-batches that passes repeat
    return finish_draw(rng, model, system, nodes, tp, pp, parts, [3, 4])


def _cases(count: int) -> Iterator[Any]:
    """``count`` drawn configurations that resolve (a seeded draw: the same every run)."""
    return resolving(_draw, count, 2027)


@pytest.fixture(scope="module")
def pairs() -> list[tuple[Any, Any, Any]]:
    """(case, composed result and execution, class-mode result) of each drawn case."""
    out = []
    drawn = [*_cases(_REPEATING), *_few_cases(_DRAWN - _REPEATING)]
    for case in drawn:
        composed = run_llm(case, mode="composed")
        full, _ = run_llm(case, mode="class")
        out.append((case, composed, full))
    return out


@pytest.mark.parametrize("index", range(_DRAWN))
def test_a_composed_iteration_is_within_a_thousandth_of_class_mode(
    index: int, pairs: list[tuple[Any, Any, Any]]
) -> None:
    case, (composed, _), full = pairs[index]
    assert math.isclose(composed.iteration_time, full.iteration_time, rel_tol=_BOUND)
    assert math.isclose(composed.compute_time, full.compute_time, rel_tol=_BOUND)
    assert set(composed.exposed) == set(full.exposed)
    if full.energy is not None:
        assert composed.energy is not None
        assert math.isclose(
            composed.energy.per_iteration, full.energy.per_iteration, rel_tol=_BOUND
        )


def test_the_drawn_runs_compose_expand_and_fall_back(pairs: list[tuple[Any, Any, Any]]) -> None:
    """Not vacuous: some draws run timers, some expand passes beside a DP collective (as
    the run goes, and over several rounds), and the FSDP draws over DP with pipeline stages
    run class mode and say why (those without compose: a test below)."""
    compositions = [ex.composed for _, (_, ex), _ in pairs if ex.composed is not None]
    assert any(c.timed > 0 and c.expanded > 0 and c.rounds > 1 for c in compositions)
    assert all(c.converged for c in compositions)
    # passes expanded as the run goes (beside a DP collective as they start), and some draws
    # (a DP collective issued while a timer ran: DualPipe) still taking a second run
    assert sum(ex.chosen_full for _, (_, ex), _ in pairs) > 0
    fsdp = [(case, r) for case, (r, _), _ in pairs if r.mode == "class"]
    assert fsdp
    for case, result in fsdp:
        assert case.parallel.zero == 3 and case.parallel.pp > 1
        assert result.mode_note.startswith("class mode, not composed: FSDP")
    for _, (result, ex), _ in pairs:
        if ex.composed is not None:
            assert result.mode == "composed"
            assert "distinct pipeline passes simulated alone" in result.mode_note


def _small(parallel: str = "tp=2,pp=4,vpp=2", nodes: int = 2, **options: Any) -> Any:
    """A small dense model (8 layers) on two 8-GPU nodes, 16 micro-batches per pipeline."""
    par = parse_parallel(parallel, global_batch=32, micro_batch=1, seq=128)
    case = make_llm_case("h100-nvswitch-8", _MODELS[0], par, nodes=nodes)
    return case.with_options(**options) if options else case


def test_a_composed_run_is_deterministic() -> None:
    case = _small(mode="composed")
    first, _ = run_llm(case)
    again, _ = run_llm(case)
    assert first.to_dict() == again.to_dict()


def _passes(execution: Any) -> dict[tuple[int, Any], tuple[str, float, float]]:
    """Each pass of a composed run's ``execution`` by ``(stage, episode)``: ``timer`` or
    ``own`` (its own nodes ran), when it became ready and when it ended (s)."""
    found: dict[tuple[int, Any], tuple[str, float, float]] = {}
    for stage, records in enumerate(execution.records):
        for r in records.values():
            node = r.node
            if node.episode is None or beside_passes(node):
                continue
            key = (stage, node.episode)
            form = "timer" if node.kind == "pass" else "own"
            held = found.get(key)
            if held is None:
                found[key] = (form, r.ready, r.end)
            else:
                assert held[0] == form  # a pass runs one way
                found[key] = (form, min(held[1], r.ready), max(held[2], r.end))
    return found


def _dp_spans(execution: Any, stage: int) -> list[tuple[float, float]]:
    return [
        (r.start, r.end)
        for r in execution.records[stage].values()
        if beside_passes(r.node) and r.end > r.start
    ]


@pytest.mark.parametrize(("parallel", "nodes"), [("tp=2,pp=4,vpp=2", 2), ("tp=1,pp=2,vpp=2", 1)])
def test_a_pass_runs_its_own_nodes_where_a_dp_collective_is_in_flight_as_it_starts(
    parallel: str, nodes: int
) -> None:
    """The run decides each pass's form as it becomes ready: its own nodes where a DP
    collective is in flight on its stage then, else its timer, which no DP collective
    overlaps (the composition converged in one run)."""
    _, execution = run_llm(_small(parallel, nodes=nodes), mode="composed")
    composition = execution.composed
    assert composition is not None and composition.rounds == 1 and composition.converged
    passes = _passes(execution)
    own = [key for key, (form, _, _) in passes.items() if form == "own"]
    assert composition.expanded == len(own) == execution.chosen_full > 0
    assert composition.timed == len(passes) - len(own) > 0
    for (stage, _), (form, ready, end) in passes.items():
        spans = _dp_spans(execution, stage)
        if form == "own":  # a DP collective issued before it and not yet done
            assert any(s <= ready <= e for s, e in spans)
        else:  # none beside it
            assert not any(s < end and ready < e for s, e in spans)


def test_a_run_that_expands_passes_reports_its_progress_to_its_total() -> None:
    """A pass's own nodes built by the run count as its timer in the progress told: each
    composed run ends at its total, never beyond it."""
    from acesim.runs.how import How
    from acesim.runs.llm import execute_llm

    reports: list[tuple[int, int]] = []
    case = _small("tp=2,pp=4,vpp=2", nodes=2).with_options(mode="composed")
    _, execution = execute_llm(case, How(on_progress=lambda d, t: reports.append((d, t))))
    assert execution.chosen_full > 0
    assert all(done <= total for done, total in reports)
    assert reports[-1][0] == reports[-1][1]


def test_passes_expanded_as_the_run_goes_run_as_those_expanded_in_the_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass expanded as the run goes (its nodes built when it becomes ready) runs as it
    does expanded in the graph: the same passes expanded in the composed graph, none left
    to the run, give the same figures to the last bit."""
    case = _small("tp=2,pp=4,vpp=2", nodes=2)
    decided, execution = run_llm(case, mode="composed")
    own = {key for key, (form, _, _) in _passes(execution).items() if form == "own"}
    assert own

    def expanded(sink: PassTimes, stage: int, episode: tuple[Any, ...]) -> bool:
        sink.passes += 1
        return (stage, episode) in own

    monkeypatch.setattr(PassTimes, "expanded", expanded)
    monkeypatch.setattr(PassTimes, "either", lambda sink, stage, episode: False)
    built, again = run_llm(case, mode="composed")
    assert again.chosen_full == 0 and again.composed == execution.composed
    assert _passes(again) == _passes(execution)
    assert decided.to_dict() == built.to_dict()


def test_a_pass_alone_is_measured_once_per_key() -> None:
    """Each distinct pass (stage, ops and chunks) is simulated once: the memo's keys are the
    timers' keys, and every timer of a key takes its memo's duration."""
    from acesim.hardware.platform import Platform
    from acesim.hardware.strategy import Strategy
    from acesim.runs.llm import llm_graph

    case = _small()
    sink = PassTimes()
    graph = llm_graph(case, classes=True, passes=sink)
    assert graph.classes is not None
    sink.measure(lambda: Platform(case.system, Strategy.of_classes(graph.classes)), graph)
    assert set(sink.memos) == set(sink.timers)
    assert len(sink.memos) == 4 * 2 * 2  # stages x chunks x (F, BW)
    for key, timers in sink.timers.items():
        assert {t.size for t in timers} == {sink.memos[key].duration}
        assert sink.memos[key].duration > 0


def test_variation_runs_exact_mode_and_says_why() -> None:
    result, _ = run_llm(_small(mode="composed", stragglers=[{"rank": 1, "slowdown": 1.2}]))
    assert result.mode == "exact"
    assert "stragglers" in result.mode_note


def test_a_trace_of_a_composed_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="run.mode.*no per-kernel trace"):
        run_llm(_small(mode="composed"), trace=True)


def test_composed_is_refused_where_there_are_no_pipeline_passes() -> None:
    from acesim import run

    with pytest.raises(ConfigError, match="run.mode.*LLM runs only"):
        run("h100-nvswitch-8", "resnet50", endpoint="baseline", mode="composed")


def test_the_command_line_composes_an_llm_run(capsys: pytest.CaptureFixture[str]) -> None:
    from clitools import cli_stdout

    out = cli_stdout(
        "run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--nodes", "2",
        "--parallel", "tp=2,pp=4", "--global-batch", "32", "--seq", "1024",
        "--endpoint", "baseline", "--composed", "--json",
    )  # fmt: skip
    assert '"mode": "composed"' in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", "resnet50", "--composed"], "--composed: applies to LLM models"),
        (["-w", "llama3-8b", "--exact", "--composed"], "--composed: give at most one of --exact"),
        (["-w", "llama3-8b", "--composed", "--full"], "--full: give at most one of --exact"),
        (["-w", "resnet50", "--full"], "--full: applies to LLM models"),
    ],
)
def test_the_composed_flag_is_refused_where_it_cannot_apply(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    from clitools import cli_error

    line = cli_error(monkeypatch, capsys, "run", "-s", "h100-nvswitch-8", *args)
    assert message in line


def _numbers(value: Any) -> list[Any]:
    """``value`` (a memo's fields: floats, strings, dataclasses, nested containers) flat."""
    if is_dataclass(value) and not isinstance(value, type):
        return _numbers(asdict(value))
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in (k, *_numbers(value[k]))]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    return [value]


@pytest.mark.parametrize("parallel", ["tp=2,pp=4", "tp=2,pp=4,vpp=2"])
def test_a_pass_alike_an_earlier_one_is_not_simulated_again_and_its_memos_agree(
    monkeypatch: pytest.MonkeyPatch, parallel: str
) -> None:
    """A pass whose nodes are an earlier pass's but for their labels takes that pass's times
    on its own nodes: the memos equal those of simulating every pass, to the last bits (a
    pass's times from its start round with the instant it starts at)."""
    from acesim.hardware.platform import Platform
    from acesim.hardware.strategy import Strategy
    from acesim.runs.llm import llm_graph
    from acesim.training import compose

    case = _small(parallel, nodes=2)

    def memos() -> dict[Any, Any]:
        sink = PassTimes()
        graph = llm_graph(case, classes=True, passes=sink)
        assert graph.classes is not None
        classes = graph.classes
        sink.measure(lambda: Platform(case.system, Strategy.of_classes(classes)), graph)
        return {
            key: _numbers(
                (
                    memo.duration,
                    [(r.node.name, r.node.kind, r.start, r.end) for r in memo.records],
                    memo.kernels,
                    memo.messages,
                    memo.meters,
                    key in sink.tailed,
                )
            )
            for key, memo in sink.memos.items()
        }

    alike = compose._alike_passes
    seen: list[dict[Any, Any]] = []

    def recorded(*args: Any) -> dict[Any, Any]:
        seen.append(alike(*args))
        return seen[-1]

    monkeypatch.setattr(compose, "_alike_passes", recorded)
    deduplicated = memos()
    assert seen[0]  # the middle stages' passes
    if "vpp" in parallel:  # two chunks: a chunk's pass takes another chunk's times
        assert any(key[1] != same[1] for key, same in seen[0].items())
    assert all(key[0] != 0 or same[0] == 0 for key, same in seen[0].items())
    monkeypatch.setattr(compose, "_alike_passes", lambda *args: {})
    every = memos()
    assert every.keys() == deduplicated.keys()
    for key, values in every.items():
        mine = deduplicated[key]
        assert len(mine) == len(values)
        for a, b in zip(mine, values, strict=True):
            if isinstance(b, float):
                assert a == pytest.approx(b, rel=1e-12, abs=1e-18), key
            else:
                assert a == b, key


def test_layer_granular_offload_runs_class_mode_and_says_why() -> None:
    """A layer's activations copied out in its forward and back in its backward link the two
    passes: no pass runs alone, so composed runs class mode (the same figures) and says so."""
    par = parse_parallel(
        "tp=2,pp=1,offload=activations,offload_layers=2", global_batch=8, micro_batch=1,
        seq=128,
    )  # fmt: skip
    case = make_llm_case("h100-nvswitch-8", _MODELS[0], par)
    composed, _ = run_llm(case, mode="composed")
    full, _ = run_llm(case, mode="class")
    assert composed.mode == "class"
    assert composed.mode_note.startswith("class mode, not composed: layer-granular")
    assert composed.iteration_time == full.iteration_time


@functools.cache
def _fsdp_draws() -> list[Any]:
    """FSDP over DP without pipeline stages, from both distributions (3-4 and 1-2
    micro-batches per rank), a few of each (drawn once per process)."""
    drawn = [*_cases(60), *_few_cases(120)]
    return [c for c in drawn if c.parallel.zero == 3 and c.place.dp_group is not None
            and c.parallel.pp == 1][:8]  # fmt: skip


@pytest.mark.parametrize("index", range(8))
def test_fsdp_without_pipeline_stages_composes_each_pass_in_its_context_as_class_mode(
    index: int,
) -> None:
    """A backward's last gradient reduce-scatter runs on into the next forward: each pass is
    measured right after the pass before it, over the window from that pass's end to its
    own, and the windows tile the iteration as in the full run: every figure of the result
    equal to class mode's (to rounding: shifted records)."""
    case = _fsdp_draws()[index]
    (composed, execution), (full, _) = run_llm(case), run_llm(case, mode="class")
    assert composed.mode == "composed" and execution.composed is not None
    assert execution.composed.timed > 0 and execution.composed.expanded == 0
    got, want = _flat(composed.to_dict()), _flat(full.to_dict())
    assert set(got) == set(want)
    for name, value in want.items():
        if isinstance(value, float) and name not in (".mode_note",):
            assert math.isclose(got[name], value, rel_tol=1e-9, abs_tol=1e-12), name


def test_a_context_that_does_not_hold_expands_every_pass() -> None:
    """Measured alone, a pass keyed by a context must follow that context; where it does
    not, no pass of the run is timed (all simulated in full: class mode's figures)."""
    from acesim.hardware.platform import Platform
    from acesim.hardware.strategy import Strategy
    from acesim.runs.llm import llm_graph

    case = _fsdp_draws()[0]
    sink = PassTimes(contexts=True)
    graph = llm_graph(case, classes=True, passes=sink)
    assert graph.classes is not None
    first = next(iter(sink.builders))
    builders = dict(reversed(list(sink.builders.items())))  # the contexts out of order
    sink.builders = builders
    sink.measure(lambda: Platform(case.system, Strategy.of_classes(graph.classes)), graph)
    assert first in sink.tailed and set(sink.tailed) == set(builders)
    assert all(sink.expanded(0, ((), (0, (0,)))) for _ in range(2))


def _flat(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict):
        out: dict[str, Any] = {}
        for key, value in doc.items():
            out.update(_flat(value, f"{prefix}.{key}"))
        return out
    if isinstance(doc, list):
        out = {}
        for i, value in enumerate(doc):
            out.update(_flat(value, f"{prefix}[{i}]"))
        return out
    return {prefix: doc}
