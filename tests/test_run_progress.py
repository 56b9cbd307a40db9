"""Progress inside one run and the cost estimate before it (issue 30): the executor tells each
finished graph node, once, in the run's own order; `acesim run` draws that as its bar; every
run kind is estimated with its own measured constants (never timed here: the estimate's
accuracy is benchmarks/estimate_accuracy.py's)."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from typer.testing import CliRunner

import acesim.commands.common as common
import acesim.commands.run as run_command
from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy
from acesim.runs.collective import make_collective_case
from acesim.runs.estimate import RUN_COSTS, Estimate, cost_name
from acesim.runs.graph_run import PROGRESS_STEPS, run_graph
from acesim.runs.how import How
from acesim.runs.kinds import RUN_KINDS, make_run_case
from acesim.runs.single import execute, run_case, variant_case
from acesim.training.executor import GraphExecutor
from acesim.training.loops import build_graph
from acesim.workload.graph import Graph, Node
from acesim.workload.zoo import load_zoo

LLM = {"parallel": "tp=2,pp=2", "nodes": 1, "global_batch": 4, "seq": 1024}


def _exact_graph() -> tuple[Any, Graph]:
    """ace-isca21 on 4 NPUs, and one iteration of resnet50 (8 samples per NPU)."""
    system = resolve_system("ace-isca21", npus=4)
    model = load_zoo("resnet50", batch_per_npu=8)
    return system, build_graph(model, iterations=1)


def _finished_nodes(system: Any, graph: Graph, strategy: Strategy) -> tuple[list[Any], Any]:
    """(rank, node id) of every node as the executor reports it, and the execution."""
    seen: list[tuple[int, int]] = []
    totals: list[int] = []

    def start(total: int) -> Any:
        totals.append(total)
        return lambda rank, node: seen.append((rank, node.id))

    executor = GraphExecutor(Platform(system, strategy), graph, node_progress=start)
    execution = executor.run()
    assert totals == [executor.node_total]
    return seen, execution


def test_the_node_hook_sees_every_node_once_in_the_runs_order() -> None:
    system, graph = _exact_graph()
    strategy = Strategy.every_npu(lockstep=False)
    seen, execution = _finished_nodes(system, graph, strategy)
    every = {(rank, i) for rank, records in enumerate(execution.records) for i in records}
    assert len(seen) == len(set(seen)) == len(every) > 0
    assert set(seen) == every
    ends = [execution.records[rank][i].end for rank, i in seen]
    assert ends == sorted(ends)  # told as they finish, in simulated time
    again, _ = _finished_nodes(system, graph, strategy)
    assert again == seen  # deterministic


def test_the_node_hook_changes_no_result() -> None:
    system, graph = _exact_graph()
    strategy = Strategy.every_npu(lockstep=False)
    _, told = _finished_nodes(system, graph, strategy)
    plain = GraphExecutor(Platform(system, strategy), graph).run()
    assert told.makespan == plain.makespan
    for a, b in zip(told.records, plain.records, strict=True):
        assert [(r.start, r.end) for r in a.values()] == [(r.start, r.end) for r in b.values()]


def test_run_graph_reports_progress_from_zero_to_the_total_in_bounded_steps() -> None:
    system, graph = _exact_graph()
    reports: list[tuple[int, int]] = []
    estimates: list[Estimate] = []
    run_graph(
        system,
        Strategy(),
        graph,
        kind="training",
        how=How(
            on_estimate=estimates.append,
            on_progress=lambda done, total: reports.append((done, total)),
        ),
    )
    total = estimates[0].nodes
    assert reports[0] == (0, total) and reports[-1] == (total, total)
    assert [d for d, _ in reports] == sorted({d for d, _ in reports})
    assert len(reports) <= PROGRESS_STEPS + 2


def test_an_llm_run_reports_node_progress_through_the_run_path() -> None:
    case = variant_case(make_run_case("h100-nvswitch-8", "llama3-8b", **LLM), "sm", None)
    reports: list[tuple[int, int]] = []
    result, execution = run_case(case, on_progress=lambda d, t: reports.append((d, t)))
    total = sum(len(r) for r in execution.records)
    assert reports[-1] == (total, total)
    assert result.to_dict() == run_case(case)[0].to_dict()


def test_acesim_run_draws_the_node_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    terminal = common.Console(file=screen, force_terminal=True, width=120)
    monkeypatch.setattr(common, "err_console", terminal)
    args = ["run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--endpoint", "sm", "--json"]
    args += ["--parallel", "tp=2,pp=2", "--global-batch", "4", "--seq", "1024"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    drawn = screen.getvalue()
    assert "llama3-8b on h100-nvswitch-8: graph nodes" in drawn
    assert "0/" in drawn  # the bar starts from 0 of the total


def _estimate(case: Any) -> Estimate:
    told: list[Estimate] = []
    execute(case, on_estimate=told.append)
    assert len(told) == 1
    return told[0]


def _collective(mode: str) -> Any:
    return make_collective_case("ace-isca21", "all-reduce", "1MiB", {"mode": mode})


@pytest.mark.parametrize(
    ("make", "cost"),
    [
        (lambda: _collective("symmetric"), "collective symmetric"),
        (lambda: _collective("exact"), "collective exact"),
        # a variation on the baseline endpoint: every rank at once (network/rank_fluid.py)
        (
            lambda: make_collective_case(
                "ace-isca21",
                "all-reduce",
                "1MiB",
                {"mode": "exact", "links": [{"dim": 0, "rank": 3, "bandwidth": 100e9}]},
            ),
            "collective per-rank",
        ),
        (
            lambda: make_run_case("ace-isca21", "resnet50", iterations=1, warmup=0),
            "training symmetric",
        ),
        # the ideal endpoint: its messages hold links only, a cost of their own
        (
            lambda: variant_case(
                make_run_case("ace-isca21", "resnet50", iterations=1, warmup=0), "ideal", None
            ),
            "training symmetric ideal",
        ),
        (
            lambda: make_run_case("h100-nvswitch-8", "llama3-8b", {"mode": "class"}, **LLM),
            "llm class",
        ),
        # the default: composed, its first composed run estimated with its own constants
        (lambda: make_run_case("h100-nvswitch-8", "llama3-8b", **LLM), "llm composed"),
        # a straggler: its collectives computed in agreed orders as the run goes
        (
            lambda: variant_case(
                make_run_case(
                    "ace-isca21",
                    "resnet50",
                    iterations=1,
                    warmup=0,
                    npus=16,
                    stragglers=[{"rank": 3, "slowdown": 1.5}],
                ),
                "ideal",
                None,
            ),
            "training exact agreed",
        ),
    ],
)
def test_each_run_kind_is_estimated_with_its_own_constants(make: Any, cost: str) -> None:
    estimate = _estimate(make())
    assert estimate.cost == cost
    c = RUN_COSTS[cost]
    expected = c.per_run + estimate.messages * c.per_message + estimate.kernels * c.per_kernel
    assert estimate.seconds == expected
    assert math.isfinite(estimate.seconds) and estimate.seconds > 0
    assert estimate.messages > 0


def test_the_estimate_grows_with_the_work_for_every_kind() -> None:
    for name, c in RUN_COSTS.items():
        assert all(math.isfinite(v) and v >= 0 for v in (c.per_run, c.per_message, c.per_kernel))
        small = Estimate(1000, 1000, 10, name).seconds
        if name.endswith(" agreed"):
            # its messages are one rank's steps (every rank's kernels simulated): the fit
            # found no use for them beside the kernels, which carry its cost
            assert c.per_kernel > 0, name
            assert Estimate(1000, 2000, 10, name).seconds > small
            continue
        assert c.per_message > 0, name  # every kind's messages cost something
        assert Estimate(2000, 1000, 10, name).seconds > small
        assert Estimate(1000, 2000, 10, name).seconds >= small


def test_every_run_kind_has_constants_for_the_modes_it_runs_in() -> None:
    for kind in RUN_KINDS.names():
        assert cost_name(kind, "exact") in RUN_COSTS
        assert cost_name(kind, "symmetric") in RUN_COSTS
    assert cost_name("llm", "class") == "llm class"
    assert cost_name("llm", "composed") == "llm composed"
    assert cost_name("jobs", "symmetric") == "jobs exact"  # jobs always run every NPU
    # an endpoint kind with constants of its own takes them; the others the mode's
    assert cost_name("training", "symmetric", endpoint="ideal") == "training symmetric ideal"
    assert cost_name("training", "symmetric", endpoint="baseline") == "training symmetric"
    assert cost_name("training", "exact", endpoint="ideal") == "training exact"


def test_the_estimate_counts_the_graphs_kernels() -> None:
    system, graph = _exact_graph()
    executor = GraphExecutor(Platform(system, Strategy()), graph)
    kernels = sum(len(n.compute.kernels) for n in graph.ranks[0] if n.compute is not None)
    assert executor.estimate_kernels() == kernels > 0
    assert executor.node_total == len(graph.ranks[0])


def test_a_collective_case_takes_the_npu_count_of_its_options() -> None:
    """``npus`` (and ``shape``/``nodes``) in a collective case's options resize its system, as
    for a training case, instead of being dropped."""
    case = make_collective_case("ace-isca21", "all-reduce", "1MiB", {"npus": 16})
    assert run_case(case)[0].npus == 16


def test_a_point_to_point_graph_counts_as_one_node_per_send_and_receive() -> None:
    system = resolve_system("ace-isca21", npus=4)
    send = Node(0, "send", "send", size=1024.0, peer=1, tag=7)
    recv = Node(0, "recv", "recv", size=1024.0, peer=0, tag=7)
    idle: list[Node] = []
    graph = Graph([[send], [recv], idle, idle])
    seen, _ = _finished_nodes(system, graph, Strategy.every_npu(lockstep=False))
    assert sorted(seen) == [(0, 0), (1, 0)]


def test_a_comparison_says_each_long_run_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`acesim run` comparing endpoints tells each run's estimate where it is long (here every
    run: the threshold at 0), numbered among the comparison's runs, and once the option that
    runs them side by side; a short run says nothing."""
    screen = io.StringIO()
    monkeypatch.setattr(run_command, "err_console", common.Console(file=screen, width=300))
    monkeypatch.setattr(run_command, "LONG_RUN_SECONDS", 0.0)
    args = ["run", "--npus", "8", "--iterations", "1", "--warmup", "0", "--json"]
    out = CliRunner().invoke(app, [*args, "--endpoints", "ideal"])
    assert out.exit_code == 0, out.output
    said = screen.getvalue()
    runs = len([line for line in said.splitlines() if " of CPU" in line])
    assert runs >= 3  # the baseline's splits and the ideal endpoint's run(s)
    assert f"the baseline run (2 units), 1 of {runs}, simulates " in said
    assert said.count("--workers N runs the comparison's") == 1
    quiet = io.StringIO()
    monkeypatch.setattr(run_command, "err_console", common.Console(file=quiet, width=300))
    monkeypatch.setattr(run_command, "LONG_RUN_SECONDS", math.inf)
    assert CliRunner().invoke(app, [*args, "--endpoints", "ideal"]).exit_code == 0
    assert " of CPU" not in quiet.getvalue()


def test_a_comparison_on_worker_processes_gives_the_same_document() -> None:
    args = ["run", "--npus", "8", "--iterations", "1", "--warmup", "0", "--json"]
    alone = CliRunner().invoke(app, args)
    side_by_side = CliRunner().invoke(app, [*args, "--workers", "2"])
    assert alone.exit_code == side_by_side.exit_code == 0, side_by_side.output
    assert alone.stdout == side_by_side.stdout


def test_a_comparison_draws_its_runs_and_the_current_runs_nodes_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = io.StringIO()
    terminal = common.Console(file=screen, force_terminal=True, width=160)
    monkeypatch.setattr(common, "err_console", terminal)
    args = ["run", "--npus", "8", "--iterations", "1", "--warmup", "0", "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    drawn = screen.getvalue()
    assert "resnet50 on ace-isca21" in drawn  # the bar of the comparison's runs
    assert ": graph nodes" in drawn  # the bar of the run in progress, named by its variant
    assert "/None" not in drawn  # no bar before its total is known
