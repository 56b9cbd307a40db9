"""MoE as 2025-26 runs it (issue 29): expert parallelism with CP and with FSDP, the expert
all-to-alls on an SM budget of their own, hidden behind the other micro-batch's compute
(DualPipe) or the shared experts'."""

from __future__ import annotations

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.system import NPUConfig
from acesim.errors import ConfigError
from acesim.hardware.kernel_model import plan_kernel
from acesim.hardware.kernels import Fixed
from acesim.hardware.platform import Platform
from acesim.network.group import Span
from acesim.precision import PRECISIONS
from acesim.runs.llm import HOST_SYNC_NOTE, host_note, make_llm_case, run_llm
from acesim.training.executor import GraphExecutor
from acesim.training.pipeline import pipeline_graph
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.chunk import ChunkWork, Step
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, placement
from acesim.workload.model import Comm

MOE = TransformerConfig(
    "tiny-moe",
    layers=4,
    hidden=1024,
    heads=8,
    kv_heads=2,
    ffn=2048,
    vocab=8000,
    seq=1024,
    experts=8,
    top_k=2,
    expert_ffn=512,
    shared_experts=1,
)


def _intervals_overlap(a: tuple[float, float], spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(a[1], e) - max(a[0], s)) for s, e in spans)


def test_an_all_to_all_hides_behind_the_other_micro_batch_and_slows_it_by_its_sm_share() -> None:
    # DualPipeV on 2 stages x 2 DP ranks: each forward is compute, an expert all-to-all over
    # the EP pair on a budget of 20 SMs, compute; each backward is compute. In an overlapped
    # pair the backward computes while the forward's all-to-all runs.
    budget = 20
    system = resolve_system("h100-nvswitch-8", npus=4)
    place = placement(ParallelConfig(pp=2, ep=2, global_batch=16), tuple(system.network.shape))
    assert place.ep_group is not None
    a2a = Comm("all-to-all", 256 * 2**20, group=place.ep_group, units=budget)
    forward = (Step((Fixed(1e-3),)), Step(comm=a2a, kind="ep"), Step((Fixed(1e-3),)))
    chunk = ChunkWork(forward, (Step((Fixed(4e-3),)),), 0.0, 0, 0.0)
    graph = pipeline_graph([[chunk, chunk]] * 2, place, 8, kind="dualpipev")
    ex = GraphExecutor(Platform(system, exact=True), graph).run()
    units = system.npu.compute_units
    records = ex.records[0].values()
    a2as = [(r.start, r.end) for r in records if r.node.name.startswith("ep.all-to-all")]
    assert a2as and all(e > s for s, e in a2as)
    slowed = 0
    for rec in records:
        compute = rec.node.compute
        if compute is None or not compute.kernels or not rec.node.name.startswith("BW."):
            continue
        hidden = _intervals_overlap((rec.start, rec.end), a2as)
        # work 4 ms at full speed; while the all-to-all holds 20 of 132 SMs the kernel runs
        # on the other 112: it takes 4 ms + (time beside the all-to-all) x 20/132
        assert rec.end - rec.start == pytest.approx(4e-3 + hidden * budget / units, rel=1e-9)
        slowed += hidden > 0
    assert slowed >= 2  # the all-to-alls did hide behind backwards
    # the budget holds only its 20 SMs: a forward's compute alone runs at full speed
    lone = [r for r in records if r.node.name.startswith("F.") and r.node.kind == "compute"]
    assert any(r.end - r.start == pytest.approx(1e-3, rel=1e-12) for r in lone)


def test_expert_parallelism_runs_with_context_parallelism() -> None:
    par = ParallelConfig(pp=2, cp=2, ep=2, global_batch=8, seq=1024)
    case = make_llm_case("h100-nvswitch-8", MOE, par, nodes=1)
    # EP pairs from the CP x DP block (stride TP = 1), the expert-DP group the other pairs
    assert case.place.ep_group is not None and case.place.ep_group.spans == (Span(0, 2, 1),)
    assert case.place.expert_dp_group is not None
    assert case.place.expert_dp_group.spans == (Span(0, 2, 2),)
    fast, _ = run_llm(case, mode="class")
    full, _ = run_llm(case, mode="exact")
    assert fast.exposed["ep"] > 0 and fast.exposed["cp"] > 0
    assert fast.iteration_time == pytest.approx(full.iteration_time, rel=1e-9)
    # the dispatcher's host synchronisation is modelled with the preset's [host] and said
    launch = case.system.host.launch_time
    assert launch is not None
    assert host_note(launch) in fast.notes and f"model: {host_note(launch)}" in fast.footnotes()


def test_no_host_sync_note_without_expert_parallelism() -> None:
    case = make_llm_case("h100-nvswitch-8", MOE, ParallelConfig(global_batch=8, seq=1024), nodes=1)
    result, _ = run_llm(case)
    assert HOST_SYNC_NOTE not in result.notes


def test_fsdp_with_experts_gathers_them_over_the_expert_data_parallel_group() -> None:
    par = ParallelConfig(pp=2, zero=3, ep=2, global_batch=8, seq=1024)
    case = make_llm_case("h100-nvswitch-8", MOE, par, nodes=1)
    result, ex = run_llm(case)
    nodes = ex.graph.ranks[0]
    experts = [n for n in nodes if n.name.startswith("dp.all-gather.fsdp") and "experts" in n.name]
    dense = [
        n for n in nodes if n.name.startswith("dp.all-gather.fsdp") and "experts" not in n.name
    ]
    assert experts and all(n.group == case.place.expert_dp_group for n in experts)
    assert dense and all(n.group == case.place.dp_group for n in dense)
    # weights: the dense parameters sharded over DP (4), the experts' over expert DP (2), and
    # the largest unit twice, gathered (BF16)
    chunks = case.stages[case.memory_stage]
    params = sum(c.params for c in chunks)
    experts = sum(c.expert_params for c in chunks)
    largest = max(u for c in chunks for u in c.unit_params)
    shard = (params - experts) / 4 + experts / 2
    assert case.memory["weights"] == pytest.approx(2 * shard + 2 * largest * 2)
    assert result.exposed["dp"] > 0


def test_shared_expert_overlap_hides_the_expert_all_to_alls() -> None:
    runs = {}
    for overlap in (False, True):
        par = ParallelConfig(
            pp=2, ep=2, shared_expert_overlap=overlap, ep_comm_units=16, global_batch=8, seq=1024
        )
        case = make_llm_case("h100-nvswitch-8", MOE, par, nodes=1)
        steps = case.stages[0][0].forward
        marked = [st.overlap for st in steps if st.comm is not None and st.kind == "ep"]
        assert marked == (["next"] * 4 if overlap else [""] * 4)  # two MoE layers
        assert all(st.comm.units == 16 for st in steps if st.comm is not None and st.kind == "ep")
        runs[overlap], _ = run_llm(case)
    assert runs[True].exposed["ep"] < runs[False].exposed["ep"]
    assert runs[True].iteration_time < runs[False].iteration_time


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"ep_comm_units": 20}, "ep_comm_units: is the expert all-to-alls' SM budget"),
        ({"ep": 2, "ep_comm_units": 0}, "must be a whole number of at least 1"),
        ({"ep": 2, "ep_comm_units": 132}, "fewer than the 132 compute units"),
    ],
)
def test_the_sm_budget_is_checked(kw: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        par = ParallelConfig(pp=2, global_batch=8, seq=1024, **kw)  # type: ignore[arg-type]
        make_llm_case("h100-nvswitch-8", MOE, par, nodes=1)


def test_multi_head_latent_attention_runs_with_its_projections_and_parameters() -> None:
    mla = TransformerConfig(
        "tiny-mla",
        layers=4,
        hidden=1024,
        heads=8,
        head_dim=64,
        ffn=2048,
        vocab=8000,
        seq=1024,
        experts=8,
        top_k=2,
        expert_ffn=512,
        shared_experts=1,
        dense_layers=1,
        q_lora_rank=256,
        kv_lora_rank=128,
        rope_dim=32,
        v_head_dim=64,
    )
    whole, split = mla.mla_params
    # down projections and their norms whole; up projections and output split by heads
    assert whole == 1024 * 256 + 256 + 1024 * (128 + 32) + 128
    assert split == 256 * 8 * 96 + 128 * 8 * 128 + 8 * 64 * 1024
    par = ParallelConfig(tp=2, pp=2, ep=2, global_batch=8, seq=1024)
    case = make_llm_case("h100-nvswitch-8", mla, par, nodes=1)
    work = case.stages[0][0]
    names = [k.name for st in work.forward for k in st.kernels]
    assert [n for n in names if n.startswith("l0.") and ("_down" in n or "_up" in n)] == [
        "l0.q_down",
        "l0.q_up",
        "l0.kv_down",
        "l0.kv_up",
    ]
    weights = {k.name for st in work.weight_grad for k in st.kernels}
    assert {"l0.q_down.wgrad", "l0.kv_up.wgrad", "l0.o_proj.wgrad"} <= weights
    fast, _ = run_llm(case, mode="class")
    full, _ = run_llm(case, mode="exact")
    assert fast.iteration_time == pytest.approx(full.iteration_time, rel=1e-9)
    assert 0 < fast.mfu < 1
    with pytest.raises(ConfigError, match="context parallelism with tiny-mla"):
        make_llm_case("h100-nvswitch-8", mla, ParallelConfig(pp=2, cp=2, seq=1024), nodes=1)


# -- the all-to-all dispatcher's chunk sorts (issue 32) --------------------------------------


def _moe_layer(ep: int, npus: int) -> tuple[ChunkWork, NPUConfig]:
    system = resolve_system("h100-nvswitch-8", npus=npus)
    place = placement(ParallelConfig(ep=ep, global_batch=8), tuple(system.network.shape))
    work = chunk_work(
        MOE,
        PRECISIONS.get("bf16"),
        range(1, 2),
        micro_batch=1,
        seq=1024,
        ep=ep,
        ep_group=place.ep_group,
    )
    return work, system.npu


def _names(steps: tuple[Step, ...]) -> list[str]:
    """Kernel names in order, each communication step as its kind (``ep``: an all-to-all)."""
    out: list[str] = []
    for st in steps:
        out.extend([k.name for k in st.kernels] if st.comm is None else [st.kind])
    return out


def test_the_all_to_all_dispatcher_sorts_the_copies_by_local_expert_and_back() -> None:
    # Megatron-core's alltoall dispatcher with EP 2 and 8 experts (4 local): after the
    # dispatch it sorts the received copies by local expert, before the combine it restores
    # them by source rank (TE's fused moe_sort_chunks_by_index: one gather each); backward,
    # the gradients go through the same gathers in reverse.
    work, npu = _moe_layer(ep=2, npus=4)
    fwd, bwd = _names(work.forward), _names(work.backward)
    i = fwd.index("l1.experts.fc1")
    assert fwd[i - 2 : i] == ["ep", "l1.experts.sort"]
    j = fwd.index("l1.experts.fc2")
    assert fwd[j + 1 : j + 3] == ["l1.experts.unsort", "ep"]
    assert bwd[bwd.index("l1.experts.fc2.dgrad") - 1] == "l1.experts.unsort.bwd"
    assert bwd[bwd.index("l1.experts.unsort.bwd") - 1] == "ep"
    assert bwd[bwd.index("l1.experts.fc1.wgrad") + 1 :][:2] == ["l1.experts.sort.bwd", "ep"]
    # by hand: 1,024 tokens x top-2 x hidden 1,024 in BF16 = 4 MiB of copies, and the sort
    # moves their 2,048 FP32 probabilities too; each gather reads and writes them once
    kernels = {k.name: k for st in (*work.forward, *work.backward) for k in st.kernels}
    copies, probs = 1024 * 2 * 1024 * 2, 1024 * 2 * 4
    for name, moved in (
        ("l1.experts.sort", copies + probs),
        ("l1.experts.unsort", copies),
        ("l1.experts.unsort.bwd", copies),
        ("l1.experts.sort.bwd", copies + probs),
    ):
        plan = plan_kernel(npu, kernels[name])
        assert (plan.read_bytes, plan.write_bytes) == (moved, moved)
        # alone on the H100: its launch latency, then HBM at the sustained rate, a written
        # byte costing 1 + write_penalty read bytes
        k = npu.kernels
        rate = npu.hbm_bandwidth * k.hbm_efficiency
        hand = k.latency + moved * (2 + k.write_penalty) / rate
        assert plan.time_alone == pytest.approx(hand, rel=1e-12)


@pytest.mark.parametrize(("ep", "npus"), [(1, 4), (8, 8)])
def test_no_chunk_sort_without_expert_parallelism_or_with_one_local_expert(
    ep: int, npus: int
) -> None:
    work, _ = _moe_layer(ep=ep, npus=npus)
    names = _names(work.forward) + _names(work.backward)
    assert "l1.experts.fc1" in names and not any("sort" in n for n in names)
