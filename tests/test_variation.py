"""Stragglers and link changes (exact mode): against hand-computed cases, and the errors.

Ring model used by the hand computations (one chunk, ideal endpoint): a step sends ``u = m/B``
seconds and its message arrives ``a`` (latency + endpoint delay) later, so step ``s`` completes
at rank ``j`` at ``C[j][s] = max(C[j][s-1], C[j-1][s-1] + a) + u`` with ``C[j][-1]`` the time
rank ``j`` joins.
"""

from __future__ import annotations

import pytest
import systems
from clitools import cli_error, cli_json_stderr, iteration_time
from dp_workloads import comm_layers, graded_layers
from hypothesis import given, settings
from hypothesis import strategies as st
from systems import dim, examples, make_system
from typer.testing import CliRunner

import acesim
import acesim.network.vectorized as vectorized
from acesim import simulate_collective
from acesim.cli import app
from acesim.config.variation import ComputeSpread, LinkChange, Straggler, Variation
from acesim.errors import ConfigError, TopologyError
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy
from acesim.runs import run_system
from acesim.workload.model import Comm, Workload

MiB = 2**20
P, BW, LAT, DELAY, GRAD, D = 8, 50e9, 1e-6, 10e-9, 8 * MiB, 2e-3


def ring8(links: int = 1, bandwidth: float = BW) -> object:
    return make_system([dim("ring", P, bandwidth, LAT, links)], chunks=1, endpoint_delay=DELAY)


def data_parallel(layers: int) -> Workload:
    """``layers`` layers of a fixed-time forward and weight-gradient pass (D s each), each
    gradient all-reduced (GRAD bytes)."""
    return graded_layers([GRAD] * layers, D)


def ring_allreduce_finish(joins: list[float]) -> list[float]:
    return systems.ring_allreduce_finish(joins, LAT + DELAY, GRAD / P / BW)


def test_a_straggler_delays_a_one_layer_iteration_by_its_extra_compute() -> None:
    """Everyone waits for the straggler's gradients: 2*s*D of compute, then the all-reduce."""
    slowdown = 1.3
    base, _ = run_system(ring8(), data_parallel(1), iterations=1, warmup=0, mode="exact")
    slow, _ = run_system(
        ring8(),
        data_parallel(1),
        iterations=1,
        warmup=0,
        mode="exact",
        stragglers=[{"rank": 5, "slowdown": slowdown}],
    )
    allreduce = 2 * (P - 1) * (LAT + DELAY + GRAD / (P * BW))
    assert base.iteration_time == pytest.approx(2 * D + allreduce, rel=1e-12)
    assert slow.iteration_time == pytest.approx(2 * slowdown * D + allreduce, rel=1e-12)


def test_a_straggler_in_a_blocking_data_parallel_loop_matches_the_ring_recurrence() -> None:
    """Three layers, every all-reduce blocking the next compute (no_overlap): each rank's next
    compute starts when its own part of the all-reduce is done."""
    layers, slowdown, rank = 3, 1.3, 5
    result, execution = run_system(
        ring8(),
        data_parallel(layers),
        iterations=1,
        warmup=0,
        loop="no_overlap",
        mode="exact",
        stragglers=[{"rank": rank, "slowdown": slowdown}],
    )
    speed = [slowdown if r == rank else 1.0 for r in range(P)]
    finish = [0.0] * P
    for layer in range(layers):
        # the first segment is every forward pass and the last layer's weight gradient
        segment = (layers + 1) * D if layer == 0 else D
        finish = ring_allreduce_finish([finish[r] + speed[r] * segment for r in range(P)])
    assert result.iteration_time == pytest.approx(max(finish), rel=1e-12)
    # the all-reduces ran without message events, each rank joining at its own time
    assert execution.event_collectives == 0 and execution.redone == 0
    vectorized.ENABLED = False
    try:
        events, _ = run_system(
            ring8(),
            data_parallel(layers),
            iterations=1,
            warmup=0,
            loop="no_overlap",
            mode="exact",
            stragglers=[{"rank": rank, "slowdown": slowdown}],
        )
    finally:
        vectorized.ENABLED = True
    assert result.iteration_time == pytest.approx(events.iteration_time, rel=1e-12)


def test_a_failed_ring_link_reroutes_without_message_events_as_the_event_path() -> None:
    """A failed ring direction (rerouted: the other direction carries both) on a 3-D
    platform: the collective alone runs vectorized and agrees with the event simulation."""
    system = make_system(
        [dim("ring", 4, BW, LAT, 2), dim("switch", 2, BW, LAT)],
        chunks=2,
        endpoint_delay=DELAY,
        algorithms={"all-reduce": ["ring", "ring"]},
    )
    variation = Variation(links=(LinkChange(dim=0, rank=1, failed=True, direction="+"),))
    platform = Platform(system, Strategy.every_npu(variation))
    assert not isinstance(vectorized.run_alone(platform.collectives, "all-reduce", 8 * MiB), str)
    fast = simulate_collective(system, "all-reduce", 8 * MiB, exact=True, variation=variation)
    vectorized.ENABLED = False
    try:
        events = simulate_collective(system, "all-reduce", 8 * MiB, exact=True, variation=variation)
    finally:
        vectorized.ENABLED = True
    assert fast.time == pytest.approx(events.time, rel=1e-9)
    assert fast.time > simulate_collective(system, "all-reduce", 8 * MiB, exact=True).time


def test_compute_spread_is_seeded_and_bounded() -> None:
    def run(**kw: object) -> float:
        result, _ = run_system(
            ring8(), data_parallel(2), iterations=1, warmup=0, mode="exact", **kw
        )
        return result.iteration_time

    base = run()
    spread = {"spread": 0.2, "seed": 3}
    first = run(compute_spread=spread)
    assert run(compute_spread=spread) == first
    assert run(compute_spread={"spread": 0.2, "seed": 4}) != first
    worst = run(stragglers=[{"rank": r, "slowdown": 1.2} for r in range(P)])
    assert base < first < worst


def test_variation_runs_in_exact_mode_and_says_why() -> None:
    """One rule for every run kind: variation asked for in symmetric mode switches to exact
    mode, the same run as asking for it, and the result's mode_note names what varies."""
    slow = {"stragglers": [{"rank": 1, "slowdown": 2.0}], "iterations": 2, "warmup": 0}
    switched, _ = run_system(ring8(), data_parallel(1), **slow)
    asked, _ = run_system(ring8(), data_parallel(1), mode="exact", **slow)
    assert switched.mode == asked.mode == "exact"
    assert switched.iteration_time == asked.iteration_time
    assert switched.mode_note.startswith("exact mode (every NPU simulated): stragglers")
    failed = {
        "links": [{"dim": 0, "rank": 1, "bandwidth": "10 GB/s"}],
        "iterations": 2,
        "warmup": 0,
    }
    link, _ = run_system(ring8(), data_parallel(1), **failed)
    assert link.mode == "exact" and "link changes" in link.mode_note
    with pytest.raises(ConfigError, match=r"run\.stragglers\[0\]\.rank.*below 8"):
        run_system(
            ring8(), data_parallel(1), mode="exact", stragglers=[{"rank": 8, "slowdown": 2.0}]
        )


def _allreduce(system: object, *changes: LinkChange) -> float:
    variation = Variation(links=tuple(changes))
    return simulate_collective(system, "all-reduce", 64 * MiB, exact=True, variation=variation).time  # type: ignore[arg-type]


def test_a_failed_direction_of_a_bidirectional_ring_reroutes_the_ring_the_other_way() -> None:
    """The whole ring then runs on one direction's link: exactly a one-link ring."""
    rerouted = _allreduce(ring8(links=2), LinkChange(dim=0, rank=3, direction="+", failed=True))
    assert rerouted == _allreduce(ring8(links=1))
    assert rerouted > _allreduce(ring8(links=2))


@pytest.mark.parametrize(
    ("system", "change", "message"),
    [
        (ring8(links=1), {"rank": 3}, r"npu3 -> npu4 .*unidirectional"),
        (ring8(links=2), {"rank": 3}, r"npu3 -> npu4 .*both directions"),
        (
            make_system([dim("switch", P)], chunks=1),
            {"rank": 6},
            r"npu6's port .*switch.*no other path",
        ),
        (
            make_system([dim("fully_connected", 4)], chunks=1),
            {"rank": 2},
            r"npu2's links .*fully_connected.*not modelled",
        ),
    ],
)
def test_a_failed_link_without_another_path_is_an_error_naming_it(
    system: object, change: dict[str, int], message: str
) -> None:
    with pytest.raises(TopologyError, match=message):
        _allreduce(system, LinkChange(dim=0, failed=True, **change))  # type: ignore[arg-type]


def test_both_directions_failing_in_one_ring_names_both_links() -> None:
    with pytest.raises(TopologyError, match=r"npu3 -> npu4 .* and npu6 -> npu5 .*no working"):
        _allreduce(
            ring8(links=2),
            LinkChange(dim=0, rank=3, direction="+", failed=True),
            LinkChange(dim=0, rank=6, direction="-", failed=True),
        )


def test_one_slow_link_paces_the_ring_between_the_fast_and_the_all_slow_case() -> None:
    slow = _allreduce(ring8(), LinkChange(dim=0, rank=2, bandwidth=BW / 2))
    assert _allreduce(ring8()) < slow <= _allreduce(ring8(bandwidth=BW / 2)) * (1 + 1e-12)
    later = _allreduce(ring8(), LinkChange(dim=0, rank=2, latency=LAT + 5e-6))
    assert later > _allreduce(ring8())


@st.composite
def neutral_variations(draw: st.DrawFn) -> tuple[object, Variation]:
    """A small system and changes that change nothing (slowdown 1, the dimension's own link)."""
    kind = draw(st.sampled_from(["ring", "switch", "fully_connected"]))
    size = draw(st.integers(2, 5))
    bandwidth = draw(st.sampled_from([10e9, 50e9]))
    latency = draw(st.sampled_from([0.0, 1e-6]))
    system = make_system(
        [dim(kind, size, bandwidth, latency), dim("ring", 2, 25e9, 1e-6)],
        chunks=draw(st.integers(1, 3)),
    )
    ranks = st.integers(0, 2 * size - 1)
    links = tuple(
        LinkChange(dim=0, rank=r, bandwidth=bandwidth, latency=latency)
        for r in draw(st.lists(ranks, max_size=3, unique=True))
    )
    stragglers = tuple(
        Straggler(rank=r, slowdown=1.0) for r in draw(st.lists(ranks, max_size=2, unique=True))
    )
    return system, Variation(stragglers=stragglers, links=links)


@settings(max_examples=examples(15), deadline=None)
@given(neutral_variations(), st.sampled_from(["all-reduce", "all-gather"]))
def test_exact_mode_with_neutral_changes_agrees_with_symmetric_mode(
    case: tuple[object, Variation], op: str
) -> None:
    system, variation = case
    symmetric = simulate_collective(system, op, 3 * MiB)  # type: ignore[arg-type]
    exact = simulate_collective(system, op, 3 * MiB, exact=True, variation=variation)  # type: ignore[arg-type]
    assert exact.time == symmetric.time
    assert exact.bytes_sent_per_npu == pytest.approx(symmetric.bytes_sent_per_npu, rel=1e-12)


def test_cli_straggler_flag_and_its_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ResNet-50, not GNMT: the flag's path (parsing, the switch to exact mode and its note,
    # the per-rank platform) is the same for any zoo graph, and its exact run is ~8x cheaper
    base = ["run", "--endpoint", "ideal", "--npus", "8", "-n", "1", "--warmup", "0"]
    base += ["-w", "resnet50"]
    base += ["--set", "collective.chunks=1", "--loop", "no_overlap"]
    slow = ["--straggler", "rank=3,slowdown=1.3", "--json"]
    switched, stderr = cli_json_stderr(*base, *slow)  # exact mode, and it says so
    assert switched["info"]["mode"] == "exact" and "stragglers" in stderr
    assert switched["iteration_time"] == iteration_time(*base, "--exact", *slow)
    bad = cli_error(monkeypatch, capsys, *base, "--exact", "--straggler", "rank=3,slow=1.3")
    assert "slowdown" in bad
    link = cli_error(monkeypatch, capsys, *base, "--exact", "--link", "dim=0,rank=3,failed=true")
    assert "npu3" in link


def test_a_straggler_on_a_pipelined_3d_torus_completes_and_slows_the_iteration() -> None:
    """Four chunks, one in flight per dimension, LIFO, overlapping layers: ranks that run at
    different speeds once picked different chunk phases and deadlocked; with one agreed order
    per dimension they finish, the straggler's extra compute bounded by what it adds. Three
    iterations (one warm-up), the fewest with a warm-up: before the agreed order (74993b7)
    the straggler and the spread deadlocked in the first iteration, so three catch it as four
    did (checked on that commit's parent)."""
    system = make_system(
        [
            dim("ring", 2, 50e9, 1e-6, 2),
            dim("ring", 2, 25e9, 1e-6, 2),
            dim("ring", 4, 25e9, 2e-6, 2),
        ],
        chunks=4,
        active_chunks_per_dimension=1,
        scheduling="lifo",
    )
    workload = data_parallel(4)

    def run(**kw: object) -> float:
        result, _ = run_system(system, workload, iterations=3, warmup=1, mode="exact", **kw)
        return result.iteration_time

    base = run()
    symmetric, _ = run_system(system, workload, iterations=3, warmup=1)
    assert base == symmetric.iteration_time
    slow = run(stragglers=[{"rank": 5, "slowdown": 1.25}])
    compute = 2 * 4 * D  # every pass of one iteration, alone
    assert base < slow <= base + 0.25 * compute * (1 + 1e-9)
    spread = run(compute_spread={"spread": 0.3, "seed": 11})
    assert base < spread <= base + 0.3 * compute * (1 + 1e-9)


def test_collective_command_takes_link_changes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["collective", "--exact", "--sizes", "1MiB", "--endpoint", "ideal", "--json"]
    fine = CliRunner().invoke(app, base)
    rerouted = CliRunner().invoke(app, [*base, "--link", "dim=0,rank=3,direction=+,failed=true"])
    assert fine.exit_code == 0 and rerouted.exit_code == 0, rerouted.output
    time = '"time": '
    slow = float(rerouted.output.split(time)[1].split(",")[0])
    assert slow > float(fine.output.split(time)[1].split(",")[0])
    failed = ["--link", "dim=0,rank=3,direction=+,failed=true"]
    switched, stderr = cli_json_stderr(*[b for b in base if b != "--exact"], *failed)
    assert switched["results"][0]["mode"] == "exact" and "link changes" in stderr
    assert switched["results"][0]["time"] == slow


def test_collective_command_takes_stragglers_and_says_when_they_change_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--sizes", "1MiB", "-s", "h100-nvswitch-8", "--json"]
    slow = ["--straggler", "rank=1,slowdown=2", "--compute-spread", "spread=0.1"]
    alone, stderr = cli_json_stderr("collective", *base, *slow)
    assert alone["results"][0]["mode"] == "symmetric"
    assert "slow compute kernels only" in " ".join(stderr.split())
    beside, stderr = cli_json_stderr("collective", *base, *slow, "--with-compute", "1e12,2e9")
    assert beside["results"][0]["mode"] == "exact" and "stragglers" in stderr
    # dropped where they change nothing, but still checked
    line = cli_error(monkeypatch, capsys, "collective", *base, "--straggler", "rank=8,slowdown=2")
    assert line == "error: --straggler[0].rank: must be a rank below 8 (the NPUs), got 8"


def test_the_agreed_order_skips_collectives_a_rank_never_joins() -> None:
    """Per-rank graphs on a 4x2 torus: the ranks of one dimension-0 ring (ranks 0-3) all-reduce
    8 MiB, those of the other (4-7) 2 MiB, then everyone 1 MiB. Each ring's collective is a
    collective of its own that the other ring never joins; the agreed order of dimension 0 must
    let each rank skip the other ring's phases (else a deadlock)."""
    from acesim.hardware.platform import Platform
    from acesim.training.executor import GraphExecutor
    from acesim.workload.graph import Graph, Node

    system = make_system([dim("ring", 4), dim("ring", 2)], chunks=2, active_chunks_per_dimension=1)

    def program(rank: int) -> list[Node]:
        mine = 8 * MiB if rank < 4 else 2 * MiB
        return [
            Node(0, "ring", "collective", op="all-reduce", size=mine, dims=(0,)),
            Node(1, "all", "collective", deps=(0,), op="all-reduce", size=MiB),
        ]

    graph = Graph([program(r) for r in range(8)], npus=8)
    platform = Platform(system, exact=True)
    platform.collectives.agree()
    execution = GraphExecutor(platform, graph).run()
    ends = [max(r.end for r in execution.records[rank].values()) for rank in range(8)]
    assert all(end > 0 for end in ends)
    assert ends[0] > ends[4]  # the 8 MiB ring finishes its first collective later


def _group_then_everyone(duration: float) -> Workload:
    """Two layers: a weight-gradient all-reduce on dimension 0 only (1 MiB), then one over every
    dimension (4 MiB); forward and weight-gradient compute of ``duration`` s each."""
    comms = [Comm("all-reduce", MiB, dims=(0,)), Comm("all-reduce", 4 * MiB)]
    return comm_layers(comms, duration, "group-then-everyone")


def test_a_one_graph_group_collective_is_agreed_within_its_group_only() -> None:
    """One graph for every rank of a 2x2 torus, an all-reduce on dimension 0 (one instance per
    dimension-0 ring), agreed orders and nothing making ranks differ: each instance's phases are
    agreed within its ring. Marked as joined by every rank, they went into the dimension's order
    across both rings, and ranks 2-3 waited forever for ring 0-1's instance (the agreed redo of
    a stalled run deadlocked at once); with ranks alike the agreed orders are the ones every
    rank picks alone: the same run, to the last bit."""
    from acesim.training.executor import GraphExecutor
    from acesim.training.loops import build_graph

    system = make_system([dim("ring", 2), dim("ring", 2)], chunks=2, active_chunks_per_dimension=1)
    graph = build_graph(_group_then_everyone(1e-4), 2, "layerwise")

    def run(agreed: bool) -> object:
        platform = Platform(system, Strategy.every_npu(lockstep=False))
        if agreed:
            platform.collectives.agree()
        return GraphExecutor(platform, graph, event_path=None).run()

    free, agreed = run(False), run(True)
    assert agreed.redone == 0 and {c.members for c in agreed.collectives} >= {
        frozenset({0, 1}),
        frozenset({2, 3}),
    }
    assert agreed.makespan == free.makespan
    assert [{i: (r.start, r.end) for i, r in recs.items()} for recs in agreed.records] == [
        {i: (r.start, r.end) for i, r in recs.items()} for recs in free.records
    ]


def test_a_group_line_admits_its_group_and_everyones_phases_in_one_order() -> None:
    """A 2x2 torus, rank 1 a straggler (1.5x): its dimension-0 ring 0-1 runs a group all-reduce
    and one over everyone, and its two members must admit their dimension-0 phases in one order.
    With an order for the group's phases and another for everyone's, rank 0 admitted the
    everyone all-reduce's phase while rank 1 admitted the group's, each holding its one slot and
    waiting for the other's message of the phase it did not pick: a deadlock."""
    from acesim.training.executor import GraphExecutor
    from acesim.training.loops import build_graph

    system = make_system([dim("ring", 2), dim("ring", 2)], chunks=1, active_chunks_per_dimension=1)
    variation = Variation(stragglers=(Straggler(rank=1, slowdown=1.5),))
    platform = Platform(system, Strategy.every_npu(variation, lockstep=False))
    platform.collectives.phase_log = []
    graph = build_graph(_group_then_everyone(1e-4), 1, "layerwise")
    execution = GraphExecutor(platform, graph, event_path=None).run()
    assert all(rec.end > 0 for recs in execution.records for rec in recs.values())

    def admitted(rank: int) -> list[tuple[int, int, int]]:
        """(collective, chunk, phase) of ``rank``'s dimension-0 phases, in order of start (one
        slot: one at a time)."""
        log = [e for e in platform.collectives.phase_log or () if e[1] == rank and e[4] == 0]
        return [(e[0], e[2], e[3]) for e in sorted(log, key=lambda e: e[5])]

    # the group all-reduce's one phase, the everyone all-reduce's first and last
    assert admitted(0) == admitted(1) and len(admitted(0)) == 3


@pytest.mark.parametrize(
    ("system", "op", "endpoint"),
    [
        ("ace-isca21", "all-reduce", "baseline"),
        ("ace-isca21", "all-reduce", "ace"),
        ("ace-isca21", "all-reduce", "ideal"),
        ("h100-nvswitch-8", "all-reduce", "nvls"),
        ("h100-nvswitch-8", "all-gather", "copy_engine"),
        ("h100-nvswitch-8", "reduce-scatter", "baseline"),
    ],
)
def test_stragglers_change_nothing_in_a_collective_alone_so_it_runs_symmetric(
    monkeypatch: pytest.MonkeyPatch, system: str, op: str, endpoint: str
) -> None:
    """A straggler and a compute spread slow compute kernels only: a collective without
    concurrent kernels runs alike on every NPU with them, so symmetric mode runs it (issue 27:
    >400 s at 1,024 NPUs in exact mode before) and the note says why. Checked against exact
    mode with the variation applied (the rule switched off): the same figures."""
    import acesim.training.strategy as strategy

    cfg = acesim.load_system(system)
    variation = Variation(
        stragglers=(Straggler(rank=3, slowdown=1.5),), compute_spread=ComputeSpread(spread=0.2)
    )
    fast = simulate_collective(cfg, op, 8 * MiB, endpoint=endpoint, variation=variation)
    assert fast.mode == "symmetric"
    assert "slow compute kernels only" in fast.mode_note
    monkeypatch.setattr(strategy, "_COMPUTE_ONLY", ())
    slow = simulate_collective(cfg, op, 8 * MiB, endpoint=endpoint, variation=variation)
    assert slow.mode == "exact"
    assert fast.time == slow.time
    assert fast.bytes_sent_per_npu == pytest.approx(slow.bytes_sent_per_npu, rel=1e-12)
    assert fast.hbm_bytes_per_npu == pytest.approx(slow.hbm_bytes_per_npu, rel=1e-12)


def test_a_straggler_beside_concurrent_compute_still_runs_every_npu() -> None:
    variation = Variation(stragglers=(Straggler(rank=3, slowdown=1.5),))
    cfg = acesim.load_system("h100-nvswitch-8")
    result = simulate_collective(
        cfg, "all-reduce", 8 * MiB, compute=(1e12, 1e9), variation=variation
    )
    assert result.mode == "exact" and "stragglers" in result.mode_note


def test_ranks_of_one_graph_share_its_nodes_and_users_not_their_waiting_counts() -> None:
    """Exact mode's ranks of one node list (thousands of ranks of one training graph) share
    its nodes, users and counts per iteration, read only, each keeping its own waiting
    counts; a graph the run adds nodes to (choices) or ranks of different lists share
    nothing."""
    from acesim.training.executor import _rank_states
    from acesim.workload.graph import Node

    one = [
        Node(0, "a", "compute"),
        Node(1, "b", "compute", deps=(0,)),
        Node(2, "c", "compute", deps=(0, 1)),
    ]
    other = [Node(0, "a", "compute")]
    states = _rank_states([one, one, one, other], shared=True)
    first = states[0]
    for state in states[1:3]:
        assert state.nodes is first.nodes and state.users is first.users
        assert state.left_per_iter is first.left_per_iter
        assert state.waiting == first.waiting and state.waiting is not first.waiting
    assert states[3].nodes is not first.nodes and list(states[3].nodes) == [0]
    assert first.waiting == {0: 0, 1: 1, 2: 2} and dict(first.users) == {0: [1, 2], 1: [2]}
    states[1].waiting[1] = 0  # a count of one rank moves alone
    assert first.waiting[1] == 1 and states[2].waiting[1] == 1
    alone = _rank_states([one, one], shared=False)
    assert alone[0].nodes is not alone[1].nodes and alone[0].users is not alone[1].users
