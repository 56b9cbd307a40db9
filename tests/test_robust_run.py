"""No input breaks a run: bounded work, finite results, one-line errors (issue "No input breaks
it": the engine, the collective runtime, the executor and the result writers)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from clitools import cli_error
from typer.testing import CliRunner

import acesim
from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.engine import Engine
from acesim.errors import ConfigError, SimulationError, WorkloadError
from acesim.hardware.platform import Platform
from acesim.results.jsonout import dumps
from acesim.runs import execute, make_case
from acesim.training.executor import GraphExecutor
from acesim.workload.graph import Graph, Node
from acesim.workload.model import Compute

runner = CliRunner()
MiB = 2**20


def _one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str, *args: str
) -> None:
    """``acesim ARGS`` through the console script's entry point (acesim.cli:main) in this
    process: exit status 2, one line naming ``text``, no traceback (tests/test_cli.py's
    test_errors_exit_2_with_one_line_and_no_traceback runs the real process)."""
    assert text in cli_error(monkeypatch, capsys, *args)


# -- the engine ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capacity,demand,message",
    [
        (1.0, math.inf, "demand on 'r' must be finite and >= 0, got inf"),
        (1.0, math.nan, "demand on 'r' must be finite and >= 0, got nan"),
        (1e-320, 1.0, "capacity must be at least 1e-300 per second (or inf), got 1e-320"),
        (math.nan, 1.0, "capacity must be at least 1e-300 per second (or inf), got nan"),
    ],
)
def test_the_allocator_never_divides_by_zero(capacity: float, demand: float, message: str) -> None:
    engine = Engine()
    with pytest.raises(SimulationError) as info:
        res = engine.add_resource("r", capacity)
        engine.start(1.0, {res: demand})
        engine.run()
    assert message in str(info.value)


def test_simulated_time_cannot_overflow() -> None:
    engine = Engine()
    engine.schedule(1e308, engine.schedule, 1e308, lambda: None)
    with pytest.raises(SimulationError, match="simulated time overflowed"):
        engine.run()


def test_non_finite_latency_results_are_an_error_not_infinity() -> None:
    # forced: a bare 1e308 s is refused as a unit left out (test_bare_numbers.py); taken as
    # written, the run must still end in an error, not infinity
    system = resolve_system(
        "ace-isca21", overrides={"network.dimensions[0].link_latency": 1e308}, force=True
    )
    with pytest.raises(SimulationError, match="overflowed"):
        acesim.simulate_collective(system, "all-reduce", MiB)
    with pytest.raises(SimulationError):
        acesim.run(system, "resnet50", endpoint="ideal")


def test_cli_reports_an_impossible_latency_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dim = {"size": 4, "link_bandwidth": 1e9, "link_latency": 1e308}
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"network": {"dimensions": [dim, dim]}}), encoding="utf-8")
    args = ("collective", "--sizes", "1MiB", "-s", str(path), "--json")
    implausible = "a bare number is in seconds and above 1 s is implausible"
    _one_line_error(monkeypatch, capsys, implausible, *args)
    _one_line_error(monkeypatch, capsys, "simulated time overflowed", *args, "--force")


# -- bounded work ----------------------------------------------------------------------------


def test_ace_splitting_is_bounded() -> None:
    tiny = resolve_system("ace-isca21", overrides={"endpoint.ace.sram": 1}, force=True)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"endpoint.ace: splitting a 1e\+06-byte all-reduce"):
        acesim.simulate_collective(tiny, "all-reduce", 1e6, endpoint="ace")
    with pytest.raises(ConfigError, match="more than 1048576"):
        acesim.simulate_collective("ace-isca21", "all-reduce", 1e15, endpoint="ace")
    assert time.perf_counter() - start < 5  # refused, not run


def test_a_collective_beyond_the_message_bound_is_refused_before_it_runs() -> None:
    many = resolve_system("ace-isca21", overrides={"collective.chunks": 1_000_000})
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        acesim.simulate_collective(many, "all-reduce", MiB)
    assert str(info.value).startswith("collective.max_messages: a 1.049e+06-byte all-reduce")
    assert "use fewer chunks, symmetric mode or fewer NPUs" in str(info.value)
    assert time.perf_counter() - start < 5
    # The bound is a setting: raised knowingly, the same collective is allowed to plan.
    raised = resolve_system(
        "ace-isca21", overrides={"collective.chunks": 1000, "collective.max_messages": 10**9}
    )
    assert acesim.simulate_collective(raised, "all-reduce", MiB).time > 0


def test_the_cost_estimate_counts_every_message() -> None:
    # Ring all-reduce on one 8-NPU ring: each rank sends 2(p-1) messages per chunk.
    system = resolve_system(
        {
            "network": {"dimensions": [{"kind": "ring", "size": 8, "link_bandwidth": 1e10}]},
            "collective": {"chunks": 3},
        }
    )
    node = Node(0, "ar", "collective", op="all-reduce", size=8 * MiB)
    # symmetric: one rank's; exact with the lockstep backend: one rank's too (each step one
    # pass over every rank, not a message per rank); on the event path, every rank's
    for exact, event_path, ranks in (
        (False, frozenset(), 1),
        (True, frozenset(), 1),
        (True, None, 8),
    ):
        platform = Platform(system, exact=exact)
        executor = GraphExecutor(platform, Graph([[node]]), event_path=event_path)
        assert executor.estimate_messages() == 3 * 2 * 7 * ranks


# -- the executor ----------------------------------------------------------------------------


def test_a_long_chain_of_satisfied_receives_does_not_recurse() -> None:
    n = 3000  # well beyond Python's recursion limit
    sends = [Node(i, "s", "send", peer=1, tag=i, size=8) for i in range(n)]
    waits = [Node(0, "wait", "compute", compute=Compute(duration=1.0))] + [
        Node(i + 1, "r", "recv", peer=0, tag=i, size=8, deps=(i,)) for i in range(n)
    ]
    system = resolve_system(
        {"network": {"dimensions": [{"kind": "switch", "size": 2, "link_bandwidth": 1e9}]}}
    )
    ex = GraphExecutor(Platform(system, exact=True), Graph([sends, waits], npus=2)).run()
    assert ex.makespan == 1.0
    assert all(rec.end == 1.0 for i, rec in ex.records[1].items() if i > 0)


def test_a_graph_with_nothing_to_run_is_an_error() -> None:
    case = make_case("ace-isca21", Graph([[]], name="empty"), warmup=0)
    with pytest.raises(WorkloadError, match="empty: the graph has no node to run"):
        execute(case)


def test_a_graph_whose_iterations_do_not_exist_is_an_error() -> None:
    node = Node(0, "k", "compute", compute=Compute(duration=1e-6))
    case = make_case("ace-isca21", Graph([[node]], name="short", iterations=3))
    with pytest.raises(WorkloadError, match="says it has 3 iterations, but no node of iteration 1"):
        execute(case)


# -- results ---------------------------------------------------------------------------------


def test_a_one_npu_collective_reports_zero_bandwidth_not_nan() -> None:
    system = resolve_system({"network": {"dimensions": [{"size": 1, "link_bandwidth": 1e9}]}})
    result = acesim.simulate_collective(system, "all-reduce", MiB)
    assert (result.time, result.algbw, result.busbw) == (0.0, 0.0, 0.0)
    json.loads(dumps(result.to_dict()), parse_constant=_refuse)


def _refuse(token: str) -> float:
    raise AssertionError(f"non-strict JSON token {token}")


def test_json_output_is_strict() -> None:
    with pytest.raises(SimulationError, match=r"non-finite number at a.b\[1\]"):
        dumps({"a": {"b": [1.0, math.nan]}})
    # a comparison's whole document (every field a 3-iteration run has), one iteration measured
    out = runner.invoke(
        app, ["run", "--json", "--npus", "16", "--endpoints", "ace", "-n", "1", "--warmup", "0"]
    )
    assert out.exit_code == 0, out.output
    json.loads(out.stdout[out.stdout.index("{") :], parse_constant=_refuse)


@pytest.mark.parametrize(
    "text,message",
    [
        ("inf,1", "--with-compute: expected a flops"),
        ("1e12", "--with-compute: expected FLOPS,BYTES"),
        ("1e12,-5", "--with-compute: must be"),
    ],
)
def test_with_compute_rejects_non_finite_and_negative(
    text: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # exit status 2 and no traceback, through the entry point in this process (_one_line_error)
    line = cli_error(monkeypatch, capsys, "collective", "--sizes", "1MiB", "--with-compute", text)
    assert message in line or "must be finite" in line, line


def test_with_compute_takes_quantities() -> None:
    out = runner.invoke(
        app, ["collective", "--sizes", "16MiB", "--with-compute", "2 TFLOP,1 GiB", "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout[out.stdout.index("{") :])
    assert data["results"][0]["compute"]["kernel_time_alone"] > 0


@pytest.mark.parametrize("sizes", ["1e400", "1KiB:1e400", "nan", "1KiB:inf"])
def test_sizes_beyond_range_are_one_line(
    sizes: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_line_error(monkeypatch, capsys, "--sizes", "collective", "--sizes", sizes)
