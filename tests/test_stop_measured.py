"""A training run stopped once its measurement is complete (``run.stop = "measured"``): the
same figures as the run to its end, every one, bit for bit; only the makespan is the stop's
instant. Also the engine's stop and the segments it closes, the reuse of a full run's result
for a stopped one, and the refusals where the option does not apply."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config import load_system
from acesim.engine import Engine
from acesim.errors import ConfigError
from acesim.runs.collective import make_collective_case
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute
from acesim.studies.reproduce import plan_reproduction, run_job
from acesim.studies.sensitivity import plan_sensitivity

# --- the engine -------------------------------------------------------------------------------


class _Segments:
    def __init__(self) -> None:
        self.heard: list[tuple[str, Any, float, float]] = []

    def opened(self, kind: str, time: float) -> None:
        pass

    def segment(self, kind: str, bound: Any, start: float, end: float) -> None:
        self.heard.append((kind, bound, start, end))

    def closed(self, kind: str, time: float) -> None:
        pass


def _two_activities(engine: Engine) -> None:
    link = engine.add_resource("link", 10.0)
    engine.start(30.0, {link: 1.0}, lambda _a: None, tag="long", track="message")
    engine.call_at(1.0, lambda: engine.start(10.0, {link: 1.0}, lambda _a: None, tag="short"))


def test_stop_ends_the_run_after_the_current_event_and_a_later_run_goes_on() -> None:
    whole = Engine()
    _two_activities(whole)
    whole.run()
    stopped = Engine()
    _two_activities(stopped)
    stopped.call_at(0.5, stopped.stop)
    assert stopped.run() == 0.5
    assert stopped.active  # the activity left stays, not refused as stuck
    assert stopped.run() == whole.now  # and the run goes on to the same end
    assert [r.used for r in stopped.resources] == [r.used for r in whole.resources]


def test_close_segments_tells_what_bound_the_activities_left_up_to_now() -> None:
    engine = Engine()
    listener = _Segments()
    engine.add_bound_listener(listener)
    _two_activities(engine)
    engine.call_at(2.0, engine.stop)
    engine.run()
    before = len(listener.heard)
    engine.close_segments()
    closed = listener.heard[before:]
    assert [(kind, start, end) for kind, _bound, start, end in closed] == [("message", 0.0, 2.0)]
    engine.close_segments()  # its next segment starts now: nothing more to tell
    assert len(listener.heard) == before + 1


# --- training runs ----------------------------------------------------------------------------

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("ace-isca21", "resnet50", {"npus": 16}),
    ("ace-isca21", "gnmt", {"npus": 16, "endpoint": "ace"}),
    ("ace-isca21", "dlrm", {"npus": 32, "endpoint": "ideal"}),
    ("ace-isca21", "resnet50", {"npus": 16, "loop": "bucketed"}),
    ("ace-isca21", "resnet50", {"npus": 16, "loop": "no_overlap", "endpoint": "ace"}),
    ("ace-isca21", "resnet50", {"npus": 16, "iterations": 5, "warmup": 2}),
    ("ace-isca21", "gnmt", {"npus": 16, "iterations": 4, "warmup": 1, "endpoint": "ideal"}),
    ("ace-isca21", "resnet50", {"npus": 8, "stragglers": [{"rank": 2, "slowdown": 1.5}]}),
    ("h100-nvswitch-8", "gpt", {"npus": 8}),
    ("h100-nvswitch-8", "resnet50", {"npus": 8, "endpoint": "copy_engine"}),
]


def _run(system: str, workload: str, options: dict[str, Any], stop: str) -> Any:
    options = dict(options)
    endpoint = options.pop("endpoint", None)
    base = load_system(system)
    config = base.with_endpoint(endpoint) if endpoint else base
    result, _execution = execute(make_run_case(config, workload, dict(options, stop=stop)))
    return result


@pytest.mark.parametrize(("system", "workload", "options"), CASES)
def test_a_run_stopped_at_its_measurement_has_every_figure_of_the_run_to_its_end(
    system: str, workload: str, options: dict[str, Any]
) -> None:
    whole = _run(system, workload, options, "end")
    stopped = _run(system, workload, options, "measured")
    assert stopped.info.stop == "measured" and whole.info.stop == "end"
    assert stopped.makespan < whole.makespan
    full, cut = whole.to_dict(), stopped.to_dict()
    for doc in (full, cut):
        doc.pop("makespan")
        doc["info"].pop("stop")
        doc["info"].pop("mode_note")  # exact mode counts the collectives the run started
    assert cut == full  # every figure, bound share, layer row and energy, to the last bit
    assert any("run.stop = measured" in note for note in stopped.footnotes())


def test_without_a_warm_up_the_whole_run_is_measured_and_runs_to_its_end() -> None:
    options = {"npus": 16, "warmup": 0}
    whole = _run("ace-isca21", "resnet50", options, "end")
    asked = _run("ace-isca21", "resnet50", options, "measured")
    assert asked.info.stop == "end"
    assert asked.to_dict() == whole.to_dict()


@pytest.mark.parametrize(
    "options",
    [
        # exact mode on a platform without variation: no agreed orders, and a stall found at
        # the run's end would redo it (so would a collective computed without events, revised)
        {"npus": 8, "mode": "exact"},
        # a straggler on the ideal endpoint: collectives computed in agreed orders as the run
        # goes (acesim.network.agreed_lockstep), where a later decision could redo the run
        {"npus": 8, "stragglers": [{"rank": 1, "slowdown": 1.3}], "endpoint": "ideal"},
    ],
)
def test_a_run_that_a_later_finding_could_redo_runs_to_its_end_and_says_why(
    options: dict[str, Any],
) -> None:
    whole = _run("ace-isca21", "resnet50", options, "end")
    asked = _run("ace-isca21", "resnet50", options, "measured")
    assert asked.info.stop == "end" and asked.makespan == whole.makespan
    assert "run to its end although run.stop = measured" in asked.info.mode_note
    full, cut = whole.to_dict(), asked.to_dict()
    for doc in (full, cut):
        doc["info"].pop("mode_note")
    assert cut == full


# --- where it is refused ----------------------------------------------------------------------


def test_the_option_is_refused_where_it_does_not_apply() -> None:
    with pytest.raises(ConfigError, match=r"run\.stop.*training graphs"):
        make_collective_case("ace-isca21", "all-reduce", "1 MiB", stop="measured")
    with pytest.raises(ConfigError, match=r"run\.stop.*LLM runs"):
        make_run_case("h100-nvswitch-8", "llama3-8b", {"stop": "measured"})
    with pytest.raises(ConfigError, match=r"run\.stop"):
        make_run_case("ace-isca21", "resnet50", {"stop": "sometimes"})


def test_a_trace_of_a_stopped_run_is_refused() -> None:
    from acesim.runs.single import run_case

    case = make_run_case("ace-isca21", "resnet50", {"npus": 16, "stop": "measured"})
    with pytest.raises(ConfigError, match=r"run\.stop.*trace"):
        run_case(case, trace=True)


# --- the sensitivity variants and the reuse of full runs --------------------------------------


def test_the_reproduction_and_its_variants_stop_their_runs_at_the_measurement() -> None:
    system = load_system("ace-isca21")
    tasks = plan_reproduction(system, workloads=["dlrm"], npus=[16])
    tasks += plan_sensitivity(system, ["drf"], workloads=["dlrm"], npus=[16])
    runs = [t for t in tasks if t.fn is run_job]
    assert runs and all(t.args[0].case.options.stop == "measured" for t in runs)
