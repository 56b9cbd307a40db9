"""acesim plan: the space against a brute force, the bounds below the simulation, the branch
and bound against an exhaustive search, rows reproduced by ``acesim run``."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from test_compose import _cases as _compose_cases
from test_fast_paths import _cases as _fast_cases
from typer.testing import CliRunner

from acesim.cli import app
from acesim.errors import ConfigError, TopologyError
from acesim.network.group import Group, Span
from acesim.network.topology import Topology
from acesim.plan import PlanResult, plan
from acesim.plan.bound import (
    comm_bound,
    entering,
    least_received,
    slice_bounds,
    stage_collectives,
)
from acesim.plan.search import PlanRow
from acesim.plan.space import AXES, Cluster, enumerate_space, parse_space
from acesim.runs.case import resolve_system
from acesim.runs.collective import simulate_collective
from acesim.runs.llm import llm_graph, make_llm, make_llm_case, run_llm
from acesim.workload.llm.models import MODELS, TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig
from acesim.workload.model import Comm

TINY = TransformerConfig(
    name="plan-tiny", layers=4, hidden=512, heads=8, ffn=1536, vocab=4096, seq=512
)
#: a space where every rule has candidates to remove (enumerated, not simulated)
RULES = {
    "tp": [1, 2, 4],
    "pp": [1, 2, 4],
    "vpp": [1, 2],
    "cp": [1, 2],
    "micro_batch": [1, 2],
    "recompute": ["none", "full"],
    "tp_overlap": [0, 1],
}
#: a small space to simulate
SMALL = {
    "tp": [1, 2],
    "pp": [1, 2],
    "vpp": [1, 2],
    "cp": [1],
    "micro_batch": [1, 2],
    "recompute": ["none", "full"],
    "tp_overlap": [0, 1],
}


@pytest.fixture(autouse=True, scope="module")
def tiny_model() -> Iterator[None]:
    MODELS.register(TINY.name, TINY)
    yield
    MODELS.unregister(TINY.name)


@pytest.fixture(scope="module")
def pruned(tiny_model: None) -> PlanResult:
    return plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL)


@pytest.fixture(scope="module")
def full(tiny_model: None) -> PlanResult:
    return plan(
        "h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL,
        exhaustive=True,
    )  # fmt: skip


def test_space_lists_exactly_the_configurations_a_run_accepts() -> None:
    system = resolve_system("h100-nvswitch-8")
    space = enumerate_space(TINY, Cluster(8, 8), global_batch=8, seq=512, space=RULES)
    listed = {(c.text, c.parallel.micro_batch) for c in space.candidates}
    axes = space.axes
    brute = set()
    for combo in itertools.product(*axes.values()):
        v = dict(zip(axes, combo, strict=True))
        try:
            par = ParallelConfig(
                tp=v["tp"], pp=v["pp"], vpp=v["vpp"], cp=v["cp"], ep=v["ep"], zero=v["zero"],
                micro_batch=v["micro_batch"], recompute=v["recompute"],
                tp_overlap=bool(v["tp_overlap"]), global_batch=8, seq=512,
            )  # fmt: skip
            make_llm_case(system, TINY, par, check_memory=False)
        except (ConfigError, TopologyError):
            continue
        brute.add(par)
    assert len(listed) == len(brute) == len(space.candidates)
    assert {c.parallel for c in space.candidates} == brute
    assert sum(space.removed.values()) + len(space.candidates) == space.size
    assert not any(" 4 " in rule or "= 8" in rule for rule in space.removed)  # numbers as N


MOE = TransformerConfig(
    name="plan-moe", layers=4, hidden=512, heads=8, ffn=1536, vocab=4096, seq=512, experts=8,
    top_k=2, expert_ffn=512,
)  # fmt: skip


@pytest.mark.parametrize(
    ("model", "space"),
    [
        (
            TINY,
            {"tp": [1], "pp": [2], "vpp": [1, 2], "cp": [1], "micro_batch": [1],
             "recompute": ["none", "full"], "tp_overlap": [0], "zero": [1],
             "schedule": ["1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe", "dualpipev"]},
        ),
        (
            MOE,
            {"tp": [1], "pp": [1, 2], "vpp": [1], "cp": [1], "ep": [1, 2], "micro_batch": [1],
             "recompute": ["none"], "tp_overlap": [0], "zero": [1, 3]},
        ),
    ],
    ids=["schedules", "moe"],
)  # fmt: skip
def test_the_bounds_hold_on_every_schedule_and_on_experts(
    model: TransformerConfig, space: dict[str, list[object]]
) -> None:
    MODELS.register(model.name, model, replace=True)
    try:
        result = plan(
            "h100-nvswitch-8", model.name, global_batch=16, seq=512, top=1, space=space,
            exhaustive=True,
        )  # fmt: skip
    finally:
        if model is MOE:
            MODELS.unregister(MOE.name)
    rows = result.outcome.rows["baseline"]
    assert len(rows) >= 6
    for row in rows:
        assert row.gemm_bound <= row.kernel_bound <= row.iteration_time, row.candidate.text
        assert 0 < row.layer_bound <= row.kernel_bound, row.candidate.text
        assert row.network_bound <= row.iteration_time, row.candidate.text
        # computed where the candidate runs class mode (FSDP over DP with pipeline stages),
        # not where composed
        par = row.candidate.parallel
        assert (row.network_bound > 0) == (par.zero == 3 and par.pp > 1), row.candidate.text
    if model is TINY:
        assert any("1f1b" in rule for rule in result.accounting()["removed_by_rule"])


def test_the_network_bound_holds_in_class_mode_across_nodes() -> None:
    """Simulated in class mode (``full``), every candidate gets the network bound; on two
    nodes DP runs over the scale-out network, where plain DP, ZeRO-1 and FSDP differ most."""
    space = {
        "tp": [2], "pp": [2], "vpp": [1], "cp": [1], "micro_batch": [1],
        "recompute": ["none"], "tp_overlap": [0, 1], "zero": [0, 1, 3],
    }  # fmt: skip
    result = plan(
        "h100-nvswitch-8", TINY.name, nodes=2, global_batch=16, seq=512, top=1, space=space,
        exhaustive=True, full=True,
    )  # fmt: skip
    rows = result.outcome.rows["baseline"]
    assert len(rows) == 6
    for row in rows:
        assert 0 < row.network_bound <= row.iteration_time, row.candidate.text
        # the kernel bound with FSDP's gathers in turn, the first forward's parameters and
        # the gradient reduction and optimizer step after the last op
        assert row.kernel_bound <= row.iteration_time, row.candidate.text
    fsdp = [r.network_bound for r in rows if r.candidate.parallel.zero == 3]
    assert min(fsdp) > max(r.network_bound for r in rows if r.candidate.parallel.zero < 3)


@pytest.mark.parametrize("full", [False, True], ids=["composed", "class"])
def test_the_kernel_bound_holds_where_parameters_and_gradients_cross_a_slow_network(
    full: bool,
) -> None:
    """The kernel bound counts FSDP's gathers one unit after another in every pass, the first
    forward's wait for the distributed optimizer's gather, and the gradient reduction and
    optimizer step after a stage's last op: on a scale-out network slowed to 25 Gb/s those
    terms dominate it, and it still holds in mode composed and in class mode."""
    space = {
        "tp": [1, 2], "pp": [1, 2], "vpp": [1, 2], "cp": [1], "micro_batch": [1],
        "recompute": ["none"], "tp_overlap": [0], "zero": [0, 1, 3],
    }  # fmt: skip

    def rows(nic: str | None) -> dict[str, PlanRow]:
        result = plan(
            "h100-nvswitch-8", TINY.name, nodes=2, global_batch=16, seq=512, top=1,
            space=space, exhaustive=True, full=full,
            overrides={"scale_out.link_bandwidth": nic} if nic else None,
        )  # fmt: skip
        return {r.candidate.text: r for r in result.outcome.rows["baseline"]}

    slow, fast = rows("25 Gb/s"), rows(None)
    assert len(slow) == 18
    for text, row in slow.items():
        assert row.kernel_bound <= row.iteration_time, text
    # FSDP without pipeline stages: DP over both nodes, its gathers in every pass
    assert slow["tp=1,pp=1,zero=3"].kernel_bound > 2 * fast["tp=1,pp=1,zero=3"].kernel_bound


def test_the_kernel_bound_holds_where_experts_gather_over_their_own_group() -> None:
    """MoE layers gather and reduce their experts over the expert-data-parallel group, the
    rest over DP (FSDP units and the distributed optimizer's chunks alike): on two nodes with
    a slow scale-out network, in class mode, the bound holds with expert parallelism or
    without."""
    MODELS.register(MOE.name, MOE, replace=True)
    try:
        result = plan(
            "h100-nvswitch-8", MOE.name, nodes=2, global_batch=16, seq=512, top=1,
            space={"tp": [1], "pp": [1, 2], "vpp": [1], "cp": [1], "ep": [1, 2, 8],
                   "micro_batch": [1], "recompute": ["none"], "tp_overlap": [0],
                   "zero": [1, 3]},
            exhaustive=True, full=True, overrides={"scale_out.link_bandwidth": "25 Gb/s"},
        )  # fmt: skip
    finally:
        MODELS.unregister(MOE.name)
    rows = result.outcome.rows["baseline"]
    assert len(rows) == 12
    for row in rows:
        assert row.kernel_bound <= row.iteration_time, row.candidate.text


def _graph_collectives(case: Any) -> list[Counter[Comm]]:
    """Each simulated rank's collectives in the class-mode graph, counted per iteration."""
    graph = llm_graph(case, classes=True)
    out = []
    for nodes in graph.ranks:
        count: Counter[Comm] = Counter(
            Comm(n.op, n.size, n.dims, n.group)
            for n in nodes
            if n.kind == "collective" and n.op is not None
        )
        out.append(Counter({c: k // graph.iterations for c, k in count.items()}))
    return out


@pytest.mark.parametrize("draw", ["fast_paths", "compose"])
def test_the_network_bound_counts_the_collectives_the_graph_issues(draw: str) -> None:
    """The network bound counts a stage's collectives from the case (no graph built): each
    op's steps', FSDP's per unit and pass, the DP reductions and gathers per chunk. On drawn
    configurations (dense and MoE models, four systems, one and two nodes, TP/PP/VPP/CP/EP,
    ZeRO 0/1/3, the 1F1B, interleaved, ZB-H1 and DualPipe schedules, recomputation) they are
    the class-mode graph's, rank by rank."""
    cases = _fast_cases(25) if draw == "fast_paths" else _compose_cases(16)
    for case in cases:
        graph = _graph_collectives(case)
        assert len(graph) == case.parallel.pp
        for stage, want in enumerate(graph):
            assert stage_collectives(case, stage) == want, (case.parallel.describe(), stage)


def test_branch_and_bound_finds_the_exhaustive_top(pruned: PlanResult, full: PlanResult) -> None:
    top = [(r.candidate.text, r.iteration_time) for r in pruned.top()]
    assert top == [(r.candidate.text, r.iteration_time) for r in full.top()]
    acc = pruned.accounting()
    simulated = acc["simulated"]["baseline"]
    assert simulated < full.accounting()["simulated"]["baseline"]
    assert simulated + acc["pruned_by_kernel_bound"]["baseline"] + acc["pruned_unbuilt"][
        "baseline"
    ] == len(pruned.outcome.space.candidates)
    # the bounds are lower bounds of every simulated candidate
    for row in full.outcome.rows["baseline"]:
        assert row.gemm_bound <= row.kernel_bound <= row.iteration_time
        assert 0 < row.layer_bound <= row.kernel_bound


@pytest.mark.parametrize("where", [{"workers": 2}, {"dask": "local", "workers": 2}])
def test_a_plan_on_worker_processes_or_a_dask_cluster_ranks_as_in_this_process(
    pruned: PlanResult, where: dict[str, Any]
) -> None:
    """The simulations on local worker processes or a (local) Dask cluster, one pool or
    client for the whole search, of a model the workers' registry does not hold (the plan
    sends the model itself): the same ranked rows, every figure equal."""
    result = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL,
                  **where)  # fmt: skip
    assert not result.outcome.failed
    got = [(r.candidate.text, r.candidate.parallel.micro_batch, r.metrics) for r in result.top()]
    want = [(r.candidate.text, r.candidate.parallel.micro_batch, r.metrics) for r in pruned.top()]
    assert len(want) == 3 and got == want
    if "dask" not in where:  # the same simulations, whichever finished first
        again = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3,
                     space=SMALL, **where)  # fmt: skip
        assert again.accounting() == result.accounting()
        assert [(r.candidate.text, r.metrics) for r in again.outcome.rows["baseline"]] == [
            (r.candidate.text, r.metrics) for r in result.outcome.rows["baseline"]
        ]


def test_a_row_is_what_acesim_run_gives_for_its_command_line(pruned: PlanResult) -> None:
    result = pruned
    best = result.top()[0]
    case = make_llm(
        "h100-nvswitch-8", TINY.name, parallel=best.candidate.text, global_batch=8,
        micro_batch=best.candidate.parallel.micro_batch, seq=512, precision="bf16",
    )  # fmt: skip
    run, _ = run_llm(case, mode="composed")  # the plan simulates in mode composed
    assert run.iteration_time == best.iteration_time
    assert run.memory["total"] == best.memory["total"]
    command = result.command(best)
    assert "--parallel" in command and "-w plan-tiny" in command and "--composed" in command


def test_configurations_that_do_not_fit_are_refused_by_their_dominant_term() -> None:
    result = plan(
        "h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=2, space=SMALL,
        overrides={"npu.hbm_capacity": "80 MiB"},
    )  # fmt: skip
    acc = result.accounting()
    refused = sum(acc["memory_refused_by_term"].values())
    assert refused > 0 and acc["memory_refused_unbuilt"] > 0
    assert acc["fit"] + refused - acc["memory_refused_unbuilt"] == acc["built"]
    for row in result.outcome.rows["baseline"]:
        assert row.memory["total"] <= 80 * 2**20


def test_the_memory_floor_is_below_the_built_footprint() -> None:
    """The floor a plan refuses unbuilt candidates on (their layers' weights, gradients and
    optimizer state, the activations its layers keep at the schedule's peak) is at most the
    built case's largest stage's total, on every candidate of a space with ZeRO 0, 1 and 3
    (FSDP: the activations only), recomputation and the experts of a MoE model."""
    from acesim.plan.bound import memory_floor

    system = resolve_system("h100-nvswitch-8")
    for model in (TINY, MOE):
        space = {**SMALL, "zero": [0, 1, 3], "ep": [1, 2] if model is MOE else [1]}
        found = enumerate_space(model, Cluster(8, 8), global_batch=8, seq=512, space=space)
        checked = 0
        for c in found.candidates:
            floor = memory_floor(system, model, c.parallel, "bf16")
            try:
                case = make_llm_case(system, model, c.parallel, check_memory=False)
            except (ConfigError, TopologyError):
                continue
            assert floor is not None and 0 < floor[0] <= case.memory["total"], c.text
            checked += 1
        assert checked >= 10


def test_substrates_are_ranked_side_by_side() -> None:
    result = plan(
        "h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=2,
        space={**SMALL, "tp": [2], "pp": [1], "cp": [1]}, endpoints=["sm", "copy_engine"],
    )  # fmt: skip
    subs = result.substrates()
    assert subs and {"baseline.rank", "copy_engine.rank"} <= set(subs[0])
    assert result.endpoints == ["baseline", "copy_engine"]


def test_the_figure_labels_the_best_row_inside_the_axes() -> None:
    """The fastest row is often the leftmost (least memory): its label goes on the side of
    its point with room, never out of the axes over the tick labels."""
    result = plan(
        "h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=2,
        space={**SMALL, "tp": [1, 2], "pp": [1], "cp": [1]},
    )  # fmt: skip
    fig = result.draw()
    fig.canvas.draw()
    (ax,) = fig.axes
    (label,) = ax.texts
    inside = ax.get_window_extent()
    box = label.get_window_extent()
    assert inside.x0 <= box.x0 and box.x1 <= inside.x1, (box, inside)
    assert label.get_text().startswith(result.outcome.rows["baseline"][0].candidate.text)


def test_space_values_are_checked_by_name() -> None:
    assert parse_space(["tp=2,4", "recompute=full"]) == {"tp": [2, 4], "recompute": ["full"]}
    for bad, field in [
        (["tq=2"], "--space"),
        (["tp=two"], "--space tp"),
        (["recompute=some"], "--space recompute"),
        (["tp=2", "tp=4"], "--space"),
        (["schedule=zb"], "--space schedule"),
    ]:
        with pytest.raises(ConfigError) as err:
            parse_space(bad)
        assert err.value.field == field
    assert [a.name for a in AXES][:3] == ["tp", "pp", "vpp"]


def test_cli_plan_prints_json_and_writes_the_figure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    figure = tmp_path / "plan.png"
    out = CliRunner().invoke(
        app,
        [
            "plan", "-w", TINY.name, "--global-batch", "8", "--seq", "512", "--top", "2",
            "--space", "tp=1,2", "--space", "pp=1", "--space", "cp=1", "--space", "vpp=1",
            "--space", "micro_batch=1", "--space", "recompute=none", "--json",
            "--figure", str(figure),
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["kind"] == "plan" and len(doc["ranked"]["baseline"]) == 2
    assert doc["ranked"]["baseline"][0]["command"].startswith("acesim run -s h100-nvswitch-8")
    assert figure.stat().st_size > 0
    bad = CliRunner().invoke(app, ["plan", "-w", TINY.name, "--space", "tq=1"])
    assert isinstance(bad.exception, ConfigError) and bad.exception.field == "--space"


@pytest.mark.parametrize(
    ("system", "op", "endpoint", "dims"),
    [
        ("h100-nvswitch-8", "all-reduce", "baseline", None),
        ("h100-nvswitch-8", "all-reduce", "nvls", None),
        ("h100-nvswitch-8", "reduce-scatter", "nvls", None),
        ("h100-nvswitch-8", "all-gather", "copy_engine", None),
        ("h100-nvswitch-8", "all-to-all", "baseline", None),
        ("b200-nvswitch-8", "all-reduce", "ace", None),
        ("mi300x-8", "all-reduce", "baseline", None),
        ("h100-nvswitch-8", "all-reduce", "ideal", (1,)),
        ("h100-nvswitch-8", "reduce-scatter", "ideal", None),
        ("h100-nvswitch-8", "sendrecv", "baseline", (0,)),
        # no switch that reduces: the members' sums, (n - 1) / n of S each
        ("a100-nvswitch-8", "reduce-scatter", "baseline", None),
        ("mi300x-8", "reduce-scatter", "baseline", None),
        ("h100-nvswitch-8", "reduce-scatter", "baseline", (1,)),
        ("h100-nvswitch-8", "reduce-scatter", "ideal", (1,)),
    ],
)  # fmt: skip
@pytest.mark.parametrize("size", [1 << 16, 64 << 20])
def test_a_collective_never_runs_faster_than_its_plan_bound(
    system: str, op: str, endpoint: str, dims: tuple[int, ...] | None, size: int
) -> None:
    """The plan's communication bound (the bytes that must reach a member over its raw links)
    is at most the collective's simulated time alone, on every endpoint kind, in-switch
    reduction and across nodes; and it is not vacuous for large messages (over a third of
    the simulated time of an H100 node's all-reduce and all-gather)."""
    cfg = resolve_system(system, nodes=2 if dims == (1,) else None)
    topology = Topology(cfg.network, cfg.collective)
    bound = comm_bound(topology, Comm(op, float(size), dims=dims))
    simulated = simulate_collective(
        cfg, op, size, endpoint=endpoint, dims=dims, tuner_check=False
    ).time
    assert 0 < bound <= simulated, (bound, simulated)
    if size > 1 << 20 and system.startswith("h100") and op in ("all-reduce", "all-gather"):
        assert bound > simulated / 3, (bound, simulated)


@pytest.mark.parametrize(
    ("op", "endpoint", "group"),
    [
        ("all-reduce", "baseline", None),
        ("all-reduce", "nvls", None),
        ("all-gather", "baseline", None),
        ("reduce-scatter", "ideal", None),
        ("all-to-all", "baseline", None),
        # an FSDP DP group: two of a node's GPUs four apart, across the four nodes
        ("all-gather", "baseline", Group((Span(0, 2, 4), Span(1, 4, 1)), "dp")),
        ("reduce-scatter", "baseline", Group((Span(0, 2, 4), Span(1, 4, 1)), "dp")),
    ],
)  # fmt: skip
def test_a_collective_across_nodes_never_runs_faster_than_its_slice_bounds(
    op: str, endpoint: str, group: Group | None
) -> None:
    """Each dimension's slice bound (the bytes that must enter a member's slice over it, at
    its members' raw links) is at most the collective's simulated time, on groups that span
    a node's NVLink and the scale-out network; on one dimension it is the member bound; and
    for a group with few members a node, the scale-out dimension's is several times the
    bound on every link of the group's dimensions together."""
    cfg = resolve_system("h100-nvswitch-8", nodes=4)
    topology = Topology(cfg.network, cfg.collective)
    size = 256 << 20
    comm = Comm(op, float(size), group=group)
    bounds = slice_bounds(topology, comm)
    simulated = simulate_collective(
        cfg, op, size, endpoint=endpoint, group=group, tuner_check=False
    ).time
    assert set(bounds) == {0, 1}
    assert 0 < max(bounds.values()) <= simulated, (bounds, simulated)
    if group is not None:  # two members a node: the node's share of NICs is what bounds
        assert bounds[1] > 3 * comm_bound(topology, comm), (bounds, comm_bound(topology, comm))
    if op in ("all-gather", "all-reduce"):
        assert bounds[1] > simulated / 4, (bounds, simulated)
    one = Comm(op, float(size), dims=(0,))
    assert slice_bounds(topology, one) == {0: pytest.approx(comm_bound(topology, one), rel=1e-12)}


def test_the_least_bytes_a_member_receives_per_operation() -> None:
    assert least_received("all-gather", 8) == least_received("all-reduce", 8) == 7 / 8
    assert least_received("reduce-scatter", 8) == 1 / 8
    # no switch reduces: every combination of partials but the first is received by a member
    assert least_received("reduce-scatter", 8, switch_reduction=False) == 7 / 8
    assert entering("reduce-scatter", 32, 4) == 1 / 4
    assert entering("reduce-scatter", 32, 4, switch_reduction=False) == 3 / 4
    assert least_received("sendrecv", 8) == 1.0
    assert least_received("broadcast", 8) == least_received("reduce", 8) == 0.0


def test_a_full_plan_simulates_in_class_mode_and_ranks_alike(pruned: PlanResult) -> None:
    """``full=True`` (``--full``): every candidate in class mode; its top is the composed
    plan's, each time within issue 27's bound of the composed one, and its rows' command
    lines do not say ``--composed``."""
    exact = plan(
        "h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL, full=True
    )
    assert exact.to_dict()["mode"] == "class" and pruned.to_dict()["mode"] == "composed"
    assert [r.candidate.text for r in exact.top()] == [r.candidate.text for r in pruned.top()]
    for a, b in zip(exact.top(), pruned.top(), strict=True):
        assert abs(b.iteration_time / a.iteration_time - 1) <= 1e-3
        assert "--composed" not in exact.command(a)


@pytest.mark.parametrize("model", [TINY, MOE], ids=["dense", "moe"])
def test_the_layer_bound_is_below_the_kernel_bound_of_every_built_candidate(
    model: TransformerConfig,
) -> None:
    """The layer bound (before building) never exceeds the kernel bound of the built case,
    over every schedule, CP, EP, recomputation and micro-batch size of a small space (built,
    not simulated)."""
    from acesim.plan.bound import kernel_bound, layer_bound

    system = resolve_system("h100-nvswitch-8")
    space = {**RULES, "tp": [1, 2], "micro_batch": [1], "zero": [1],
             "schedule": ["1f1b", "interleaved", "zb-h1", "dualpipe"]}  # fmt: skip
    if model is MOE:
        space.update(ep=[1, 2], cp=[1])
    candidates = enumerate_space(model, Cluster(8, 8), global_batch=16, seq=512, space=space)
    checked = 0
    for c in candidates.candidates:
        try:
            case = make_llm_case(system, model, c.parallel, check_memory=False)
        except (ConfigError, TopologyError):
            continue
        bound = layer_bound(system, model, c.parallel, "bf16")
        assert 0 < bound <= kernel_bound(case), c.text
        checked += 1
    assert checked >= 20


def test_a_budget_stops_the_search_and_bounds_what_it_left(full: PlanResult) -> None:
    """Stopped by ``max_simulations`` before its bounds end it, the search simulates that
    many, says so, and the least lower bound it reports is below every configuration it left
    unexplored (the exhaustive search's times): its gap is then a true one, and the rows it
    calls certain are the exhaustive top's."""
    result = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL,
                  max_simulations=4)  # fmt: skip
    acc = result.accounting()
    assert acc["simulated"]["baseline"] == 4
    # on two workers, with simulations running while the search goes on: the same four
    on_workers = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3,
                      space=SMALL, max_simulations=4, workers=2)  # fmt: skip
    assert on_workers.accounting()["simulated"]["baseline"] == 4
    assert [r.metrics for r in on_workers.top()] == [r.metrics for r in result.top()]
    b = result.budget()
    assert b is not None and b["stopped_by"] == "simulation limit"
    assert acc["budget"]["stopped"]["baseline"] == b and acc["budget"]["max_simulations"] == 4
    simulated = {(r.candidate.text, r.candidate.parallel.micro_batch) for r in result.top()}
    every = full.outcome.rows["baseline"]
    left = [
        r for r in every if (r.candidate.text, r.candidate.parallel.micro_batch) not in simulated
    ]
    assert left and all(r.iteration_time >= b["least_bound"] for r in left)
    best = result.top()[0].iteration_time
    assert b["gap"] == best / min(best, b["least_bound"]) - 1.0
    assert best / (1.0 + b["gap"]) <= every[0].iteration_time
    certain = result.top()[: b["certain_rows"]]
    assert [r.metrics for r in certain] == [r.metrics for r in full.top()[: len(certain)]]
    assert (
        acc["simulated"]["baseline"] + acc["pruned_by_kernel_bound"]["baseline"]
        + acc["pruned_unbuilt"]["baseline"] + b["unexplored"]
    ) == len(result.outcome.space.candidates)  # fmt: skip


def test_a_budget_the_search_does_not_reach_changes_nothing(pruned: PlanResult) -> None:
    result = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL,
                  max_simulations=1000, time_limit=3600)  # fmt: skip
    assert result.budget() is None and not result.outcome.unexplored
    assert [r.metrics for r in result.top()] == [r.metrics for r in pruned.top()]
    assert result.accounting()["budget"]["stopped"] == {}


def test_a_spent_time_limit_simulates_nothing_and_says_so() -> None:
    result = plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, top=3, space=SMALL,
                  time_limit=1e-9)  # fmt: skip
    b = result.budget()
    assert b is not None and b["stopped_by"] == "time limit" and b["gap"] is None
    assert not result.top() and b["unexplored"] > 0


@pytest.mark.parametrize(
    ("option", "value"),
    [("time_limit", 0), ("time_limit", -1.0), ("time_limit", float("nan")),
     ("time_limit", float("inf")), ("time_limit", "10"), ("max_simulations", 0),
     ("max_simulations", 2.5), ("max_simulations", True)],
)  # fmt: skip
def test_a_bad_budget_is_refused_by_name(option: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        plan("h100-nvswitch-8", TINY.name, global_batch=8, seq=512, space=SMALL,
             **{option: value})  # fmt: skip
    assert err.value.field == option


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--time-limit", "0"), ("--time-limit", "nan"), ("--time-limit", "-5"),
     ("--max-simulations", "0")],
)  # fmt: skip
def test_cli_plan_refuses_a_bad_budget_by_its_flag(flag: str, value: str) -> None:
    out = CliRunner().invoke(app, ["plan", "-w", TINY.name, flag, value])
    assert isinstance(out.exception, ConfigError) and out.exception.field == flag


def test_cli_plan_says_where_its_budget_stopped_it() -> None:
    out = CliRunner().invoke(
        app,
        [
            "plan", "-w", TINY.name, "--global-batch", "8", "--seq", "512", "--top", "2",
            "--space", "tp=1,2", "--space", "pp=1", "--space", "cp=1", "--space", "vpp=1",
            "--space", "micro_batch=1", "--space", "recompute=none", "--max-simulations",
            "1", "-j", "0",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    text = " ".join(out.stdout.split())
    assert "stopped at its simulation limit (--max-simulations)" in text
    assert "unexplored" in text


def test_cli_plan_cautions_when_its_top_rows_lean_on_tp_overlap() -> None:
    """The validation rows that ran TP overlap are fast in acesim (docs/validation.md): a
    plan whose top rows overlap TP communication says so; one whose space has no overlap
    does not."""
    from acesim.runs.llm import TP_OVERLAP_NOTE

    def plan_text(overlap: str) -> str:
        out = CliRunner().invoke(
            app,
            [
                "plan", "-w", TINY.name, "--global-batch", "8", "--seq", "512", "--top", "2",
                "--space", "tp=2", "--space", "pp=1", "--space", "cp=1", "--space", "vpp=1",
                "--space", "micro_batch=1", "--space", "recompute=none",
                "--space", f"tp_overlap={overlap}",
            ],
            env={"COLUMNS": "400"},
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        return str(out.output)

    assert TP_OVERLAP_NOTE in plan_text("1")
    assert "Caution" not in plan_text("0")
