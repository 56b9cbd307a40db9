"""Pipeline schedules as execution graphs: the bubble comes out of the simulation (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.config.variation import Straggler, Variation
from acesim.errors import ConfigError, WorkloadError
from acesim.hardware.kernels import Fixed
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy
from acesim.network.classes import RankClasses
from acesim.network.group import Span
from acesim.network.topology import Topology
from acesim.results.llm import LlmResult, idle_breakdown
from acesim.runs.llm import LlmCase, make_llm_case, run_llm
from acesim.training.executor import Execution, GraphExecutor
from acesim.training.pipeline import pipeline_graph
from acesim.training.schedules import Op, schedule
from acesim.workload.graph import Graph, Node
from acesim.workload.llm.block import ChunkWork, Step
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, placement
from acesim.workload.model import Comm

TF, TB = 1e-3, 2e-3  # forward and backward of a whole stage, s


def _no_latency(npus: int) -> SystemConfig:
    """An NVSwitch node with zero link latency and per-message delay: empty point-to-point
    messages cost nothing, so the schedule alone sets the time."""
    return resolve_system(
        "h100-nvswitch-8",
        overrides={"network.dimensions[0].link_latency": "0 s", "collective.endpoint_delay": "0 s"},
        npus=npus,
    )


def _pipeline(p: int, m: int, v: int) -> tuple[Execution, float]:
    system = _no_latency(p)
    place = placement(ParallelConfig(pp=p, vpp=v, global_batch=m), tuple(system.network.shape))
    chunk = ChunkWork((Step((Fixed(TF / v),)),), (Step((Fixed(TB / v),)),), 0.0, 0, 0.0)
    graph = pipeline_graph([[chunk] * v] * p, place, m, kind="interleaved" if v > 1 else "1f1b")
    ex = GraphExecutor(Platform(system, exact=True), graph).run()
    _compute, bubble, exposed = idle_breakdown(ex)
    assert exposed == {"tp": 0.0, "cp": 0.0, "ep": 0.0, "pp": 0.0, "dp": 0.0}
    return ex, bubble / p


def test_1f1b_order_of_each_stage() -> None:
    names = [str(o) for o in schedule("1f1b", 4, 1, 6)]
    assert names == ["F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3", "B4", "B5"]
    last = schedule("1f1b", 4, 3, 2)
    assert last == [Op("F", 0, 0), Op("B", 0, 0), Op("F", 0, 1), Op("B", 0, 1)]


def test_interleaved_order_follows_megatron() -> None:
    ops = schedule("interleaved", 2, 0, 4, 2)
    # warm-up (p - s - 1) * 2 + (v - 1) * p = 4 forwards: chunk 0 on micro-batches 0, 1, then
    # chunk 1 on 0, 1; then one forward, one backward; backwards take the chunks in reverse.
    assert [(o.forward, o.chunk, o.micro) for o in ops[:6]] == [
        (True, 0, 0),
        (True, 0, 1),
        (True, 1, 0),
        (True, 1, 1),
        (True, 0, 2),
        (False, 1, 0),
    ]
    assert sum(o.forward for o in ops) == sum(not o.forward for o in ops) == 8
    with pytest.raises(Exception, match="multiple of the pipeline stages"):
        schedule("interleaved", 4, 0, 6, 2)


@pytest.mark.parametrize(("p", "m"), [(2, 2), (4, 8), (8, 8), (4, 13)])
def test_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(p: int, m: int) -> None:
    ex, bubble = _pipeline(p, m, 1)
    iteration = ex.makespan
    assert iteration == pytest.approx((m + p - 1) * (TF + TB), rel=1e-9)
    assert bubble / iteration == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)


@pytest.mark.parametrize(("p", "m", "v"), [(4, 8, 2), (4, 16, 4), (8, 16, 2), (4, 4, 2)])
def test_interleaving_divides_the_bubble_by_v(p: int, m: int, v: int) -> None:
    _ex, plain = _pipeline(p, m, 1)
    _ex, interleaved = _pipeline(p, m, v)
    assert interleaved == pytest.approx(plain / v, rel=1e-9)
    assert interleaved == pytest.approx((p - 1) * (TF + TB) / v, rel=1e-9)


def test_two_tp_groups_share_the_switch_at_their_own_link_bandwidth() -> None:
    # TP=4 on an 8-GPU NVSwitch node: ranks 0-3 and 4-7 all-reduce at the same time; each
    # NPU has its own links to the switch, so each group runs as fast as one group alone.
    size = 256 * 2**20

    def tp_time(npus: int, tp: int) -> list[float]:
        """Each rank's time in its TP group's all-reduce (every rank simulated)."""
        system = resolve_system("h100-nvswitch-8", npus=npus)
        place = placement(
            ParallelConfig(tp=tp, global_batch=npus // tp), tuple(system.network.shape)
        )
        assert place.tp_group is not None
        comm = Comm("all-reduce", size, group=place.tp_group)
        chunk = ChunkWork((Step(comm=comm, kind="tp"),), (), 0.0, 0, 0.0)
        graph = pipeline_graph([[chunk]], place, 1)
        ex = GraphExecutor(Platform(system, exact=True), graph).run()
        assert {c.group_size for c in ex.collectives} == {tp}
        return [
            rec.end - rec.start
            for records in ex.records
            for rec in records.values()
            if rec.node.kind == "collective"
        ]

    both = tp_time(8, 4)
    alone = tp_time(4, 4)
    assert len(both) == 8 and len(alone) == 4
    assert both == pytest.approx([alone[0]] * 8, rel=1e-12)
    assert len(tp_time(8, 8)) == 8  # one group of the whole node


def _floats(data: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every number of a result's dictionary, by dotted key."""
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_floats(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix + key] = float(value)
    return out


def _agree(case: LlmCase) -> tuple[LlmResult, LlmResult, Execution]:
    """Class and exact mode of ``case``: every reported number equal to 1e-9 relative."""
    fast, ex = run_llm(case, mode="class")
    full, every = run_llm(case, mode="exact")
    assert (fast.mode, fast.mode_note, full.mode) == ("class", "", "exact")
    assert len(ex.records) == case.place.pp and len(every.records) == case.place.npus
    a, b = _floats(fast.to_dict()), _floats(full.to_dict())
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=0), key
    return fast, full, ex


def test_class_mode_agrees_with_exact_mode_on_64_gpus_tp2_pp4_dp8() -> None:
    tiny = TransformerConfig(
        "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=1024
    )
    case = make_llm_case(
        "h100-nvswitch-8", tiny, ParallelConfig(tp=2, pp=4, global_batch=32, seq=1024), nodes=8
    )
    assert (case.place.dp, case.micro_batches) == (8, 4)
    result, _exact, ex = _agree(case)
    assert ex.graph.classes == RankClasses(4, 16)
    # consistency of the accounting (not a result): every second of every rank is computing,
    # exposed communication or bubble
    total = result.compute_time + result.bubble_time + sum(result.exposed.values())
    assert total == pytest.approx(result.iteration_time, rel=1e-9)
    assert all(result.exposed[k] > 0 for k in ("tp", "pp", "dp")) and result.exposed["ep"] == 0
    assert result.bubble_fraction > 0
    assert 0 < result.mfu < 1
    again, _ = run_llm(case, mode="class")
    assert again.to_dict() == result.to_dict()  # deterministic


TINY = TransformerConfig(
    "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=1024
)
MOE = TransformerConfig(
    "tiny-moe",
    layers=4,
    hidden=512,
    heads=8,
    kv_heads=2,
    ffn=1024,
    vocab=8000,
    seq=512,
    experts=8,
    top_k=2,
    expert_ffn=256,
)


@pytest.mark.parametrize(
    ("model", "parallel", "nodes"),
    [
        (TINY, ParallelConfig(tp=2, pp=4, vpp=2, global_batch=16, seq=1024), 4),  # interleaved
        (TINY, ParallelConfig(tp=2, pp=2, cp=2, global_batch=8, seq=1024), 2),  # CP
        (MOE, ParallelConfig(pp=2, ep=2, global_batch=16, seq=512), 2),  # EP
        (TINY, ParallelConfig(pp=2, zero=3, global_batch=16, seq=1024), 2),  # FSDP
        # stages of 4 GPUs: stage 1's messages to stage 2 leave the node through stage 0's
        (TINY, ParallelConfig(tp=2, pp=4, zero=0, global_batch=8, seq=1024), 2),
    ],
    ids=["interleaved", "cp", "ep", "fsdp", "two-hop"],
)
def test_class_mode_agrees_with_exact_mode(
    model: TransformerConfig, parallel: ParallelConfig, nodes: int
) -> None:
    _agree(make_llm_case("h100-nvswitch-8", model, parallel, nodes=nodes))


def test_a_later_stages_pipelined_all_reduce_across_nodes_reaches_its_own_class() -> None:
    """Stage 1's DP x CP all-reduce spans its node's switch (CP) and two nodes (DP): the
    tuner runs it as NCCL's TREE or NVLS_TREE, one pipelined phase whose lanes' messages go to
    the class's own mirror (they went to class 0 once, and stage 1 waited forever)."""
    case = make_llm_case(
        "h100-nvswitch-8",
        TINY,
        ParallelConfig(tp=4, pp=2, cp=2, zero=0, global_batch=4, seq=1024),
        nodes=4,
    )
    assert case.place.dp == 2
    _result, _exact, ex = _agree(case)
    pipelined = [c for c in ex.collectives if any(p.pipelined for p in c.phases)]
    assert pipelined and {c.algorithm for c in pipelined} <= {"double_binary_tree", "nvls_tree"}
    assert {tuple(c.rank_finished) for c in pipelined} == {(0,), (1,)}  # both stages' own


@pytest.mark.parametrize("endpoint", ["ace", "ideal"])
def test_class_mode_agrees_with_exact_mode_on_other_endpoints_and_iterations(
    endpoint: str,
) -> None:
    case = make_llm_case(
        "h100-nvswitch-8",
        TINY,
        ParallelConfig(tp=2, pp=2, global_batch=4, seq=1024),
        nodes=1,
        iterations=2,
    )
    _agree(case.with_endpoint(endpoint))


def test_ranks_that_differ_run_in_exact_mode_and_say_so() -> None:
    case = make_llm_case(
        "h100-nvswitch-8", TINY, ParallelConfig(tp=2, pp=2, global_batch=4, seq=1024), nodes=1
    )
    slow = Variation(stragglers=[Straggler(rank=1, slowdown=1.5)])
    result, ex = run_llm(case, variation=slow)
    assert result.mode == "exact" and len(ex.records) == 8
    assert "stragglers" in result.mode_note
    plain, _ = run_llm(case, mode="class")
    assert result.iteration_time > plain.iteration_time
    with pytest.raises(ConfigError, match="run.mode"):
        run_llm(case, mode="fast")  # type: ignore[arg-type]


def test_classes_whose_members_route_differently_are_refused() -> None:
    # 3 x 4 NPUs in classes of 4: ranks 0-2 reach their peer 4 ranks on through their own
    # class, rank 3 through class 1
    system = resolve_system(resolve_system("h100-nvswitch-8", nodes=4), shape=[3, 4])
    topology = Topology(system.network, system.collective)
    classes = RankClasses(3, 4)
    assert classes.route(topology, 0, 1) == [(0, 0), (1, 1)]
    problem = classes.route_problem(topology, [(0, 1)])
    assert problem is not None and "rank 3" in problem
    nodes = resolve_system("h100-nvswitch-8", nodes=2)
    assert (
        RankClasses(2, 8).route_problem(Topology(nodes.network, nodes.collective), [(0, 1), (1, 0)])
        is None
    )


def test_expert_parallelism_dispatches_and_combines_over_the_ep_group() -> None:
    moe = TransformerConfig(
        "tiny-moe",
        layers=4,
        hidden=512,
        heads=8,
        kv_heads=2,
        ffn=1024,
        vocab=8000,
        seq=512,
        experts=8,
        top_k=2,
        expert_ffn=256,
    )
    case = make_llm_case(
        "h100-nvswitch-8", moe, ParallelConfig(pp=2, ep=2, global_batch=8, seq=512), nodes=1
    )
    place = case.place
    assert (place.dp, place.ep, place.expert_dp) == (4, 2, 2)
    assert place.ep_group is not None and place.ep_group.spans == (Span(0, 2, 1),)
    assert place.expert_dp_group is not None
    assert place.expert_dp_group.spans == (Span(0, 2, 2),)
    work = case.stages[0][0]
    a2a = [st.comm for st in work.forward if st.comm is not None]
    tokens_copies = 512 * moe.top_k * moe.hidden * 2  # T k h bf16 bytes, one micro-batch
    assert [c.op for c in a2a] == ["all-to-all"] * 4  # dispatch and combine, two MoE layers
    assert all(c.size == tokens_copies and c.group == place.ep_group for c in a2a)
    assert work.expert_params == 2 * moe.experts * moe.mlp_params(moe.expert_ffn) // 2
    result, ex = run_llm(case, mode="class")
    assert result.exposed["ep"] > 0
    grads = {n.group for n in ex.graph.ranks[0] if n.kind == "collective" and ".grad." in n.name}
    assert grads == {place.dp_group, place.expert_dp_group}


def test_tp_communication_overlap_hides_tp_time_behind_the_gemms() -> None:
    tiny = TransformerConfig(
        "tiny", layers=4, hidden=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000, seq=2048
    )
    runs = {}
    for overlap in (False, True):
        par = ParallelConfig(tp=4, pp=2, tp_overlap=overlap, global_batch=4, seq=2048)
        case = make_llm_case("h100-nvswitch-8", tiny, par, nodes=1)
        steps = case.stages[0][0].forward
        marked = [st.overlap for st in steps if st.comm is not None and st.kind == "tp"]
        # two layers of two sublayers, an all-gather and a reduce-scatter each; the
        # embedding's reduce-scatter stays blocking
        assert sum(bool(m) for m in marked) == (8 if overlap else 0)
        assert len(marked) == 9
        runs[overlap], _ = run_llm(case, mode="class")
    plain, hidden = runs[False], runs[True]
    assert hidden.exposed["tp"] < plain.exposed["tp"]
    assert hidden.iteration_time < plain.iteration_time
    total = hidden.compute_time + hidden.bubble_time + sum(hidden.exposed.values())
    assert total == pytest.approx(hidden.iteration_time, rel=1e-9)


def test_fsdp_gathers_every_unit_for_every_pass_and_reduces_its_gradients() -> None:
    tiny = TransformerConfig("tiny", layers=3, hidden=512, heads=8, ffn=1024, vocab=8000, seq=512)
    par = ParallelConfig(zero=3, global_batch=8, seq=512)  # 8 GPUs: dp 8, 1 micro-batch each
    case = make_llm_case("h100-nvswitch-8", tiny, par, nodes=1)
    work = case.stages[0][0]
    units = work.unit_params  # embedding, three layers, head
    assert len(units) == 5 and sum(units) == work.params
    result, ex = run_llm(case, mode="class")
    nodes = ex.graph.ranks[0]
    gathers = [n for n in nodes if n.name.startswith("dp.all-gather.fsdp")]
    scatters = [n for n in nodes if n.name.startswith("dp.reduce-scatter.fsdp")]
    assert len(gathers) == 2 * len(units)  # forward and backward, one micro-batch
    assert sorted(n.size for n in scatters) == sorted(u * 4 for u in units)  # FP32 gradients
    assert all(n.group == case.place.dp_group for n in gathers + scatters)
    sharded = make_llm_case(
        "h100-nvswitch-8", tiny, ParallelConfig(zero=1, global_batch=8, seq=512), nodes=1
    )
    assert case.memory["weights"] < sharded.memory["weights"]
    assert case.memory["optimizer"] == pytest.approx(sharded.memory["optimizer"])
    assert result.exposed["dp"] > 0


def test_recompute_layers_recomputes_only_the_first_layers_of_a_chunk() -> None:
    tiny = TransformerConfig("tiny", layers=4, hidden=512, heads=8, ffn=1024, vocab=8000, seq=512)

    def backward_kernels(**kw: object) -> int:
        par = ParallelConfig(global_batch=8, seq=512, **kw)  # type: ignore[arg-type]
        work = make_llm_case("h100-nvswitch-8", tiny, par, nodes=1).stages[0][0]
        return sum(len(st.kernels) for st in work.backward)

    none, full = backward_kernels(), backward_kernels(recompute="full")
    two = backward_kernels(recompute="full", recompute_layers=2)
    assert none < two < full
    assert two - none == (full - none) // 2


def test_a_class_mode_trace_names_the_ranks_each_process_stands_for() -> None:
    from acesim.results.trace import trace_events

    case = make_llm_case(
        "h100-nvswitch-8", TINY, ParallelConfig(tp=2, pp=2, global_batch=2, seq=1024), nodes=1
    )
    _result, ex = run_llm(case, trace=True)
    meta = trace_events(ex)["metadata"]
    assert meta["processes"]["2"] == {
        "simulated_rank": 1,
        "represents": "4-7",
        "represents_count": 4,
    }
    assert meta["note"].startswith("class mode")


def test_class_mode_refuses_a_collective_across_classes() -> None:
    system = resolve_system("h100-nvswitch-8", nodes=2)
    classes = RankClasses(2, 8)
    node = Node(0, "dp.all-reduce", "collective", op="all-reduce", size=1e6)  # every rank
    graph = Graph([[node], [node]], npus=16, classes=classes)
    with pytest.raises(WorkloadError, match="class mode needs every group within one class"):
        GraphExecutor(Platform(system, Strategy.of_classes(classes)), graph).run()
