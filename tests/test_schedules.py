"""Pipeline schedules as a registry of F/B/W op sequences (issue 26): op kinds, per-op graph
emitters, a chunk's input- and weight-gradient steps, the memory walk by op kind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from acesim.config.resolve import resolve_system
from acesim.config.system import SystemConfig
from acesim.errors import ConfigError
from acesim.hardware.kernels import Fixed, Gemm
from acesim.hardware.platform import Platform
from acesim.precision import PRECISIONS
from acesim.results.llm import idle_breakdown
from acesim.runs.llm import make_llm_case, run_llm
from acesim.training.executor import Execution, GraphExecutor
from acesim.training.pipeline import pipeline_graph
from acesim.training.schedules import SCHEDULES, Op, PipelineSchedule, check_ops, schedule
from acesim.workload.graph import Graph
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.chunk import ChunkWork, Step, split_backward
from acesim.workload.llm.memory import peak_activations
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, placement
from acesim.workload.model import Comm

TF, TB, TW = 1e-3, 1.5e-3, 0.5e-3  # forward, input gradient, weight gradient of a stage, s

TINY = TransformerConfig(
    "tiny", layers=2, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=1024
)


def _no_latency(npus: int) -> SystemConfig:
    """An NVSwitch node with free point-to-point messages: the schedule alone sets the time."""
    return resolve_system(
        "h100-nvswitch-8",
        overrides={"network.dimensions[0].link_latency": "0 s", "collective.endpoint_delay": "0 s"},
        npus=npus,
    )


def _fixed_chunk(saved: float = 0.0, weight_saved: float = 0.0) -> ChunkWork:
    """A chunk of fixed-time work whose backward is an input gradient then a weight gradient
    (marked as such)."""
    backward = (Step((Fixed(TB), Fixed(TW)), weight=(False, True)),)
    return ChunkWork((Step((Fixed(TF),)),), backward, saved, 0, 0.0, weight_saved=weight_saved)


def _run(kind: str, p: int, m: int, chunk: ChunkWork) -> tuple[Execution, float]:
    system = _no_latency(p)
    place = placement(ParallelConfig(pp=p, global_batch=m), tuple(system.network.shape))
    graph = pipeline_graph([[chunk]] * p, place, m, kind=kind)
    ex = GraphExecutor(Platform(system, exact=True), graph).run()
    _compute, bubble, _exposed = idle_breakdown(ex)
    return ex, bubble / p


def _gpipe(stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """GPipe: every forward, then every backward (a schedule defined outside the package)."""
    return [Op("F", 0, i) for i in range(micro)] + [Op("B", 0, i) for i in range(micro)]


def _deferred(stages: int, stage: int, micro: int, chunks: int = 1) -> list[Op]:
    """1F1B with each weight gradient right after its input gradient."""
    return [
        Op(kind, op.chunk, op.micro)
        for op in schedule("1f1b", stages, stage, micro)
        for kind in (("F",) if op.forward else ("B", "W"))
    ]


@pytest.fixture
def registered() -> Iterator[None]:
    added = [
        PipelineSchedule("gpipe-test", "all forwards, then all backwards", _gpipe),
        PipelineSchedule("deferred-test", "1F1B, W after each B", _deferred),
    ]
    for s in added:
        SCHEDULES.register(s.name, s)
    yield
    for s in added:
        SCHEDULES.unregister(s.name)


@pytest.mark.parametrize(
    ("p", "m", "v"), [(1, 3, 1), (4, 4, 1), (4, 7, 1), (4, 8, 2), (2, 6, 3), (4, 16, 2), (4, 16, 1)]
)
def test_every_registered_schedule_runs_each_op_of_each_micro_batch_once(
    p: int, m: int, v: int
) -> None:
    for name, sched in SCHEDULES.items():
        chunks, micro = v * sched.directions, m // sched.directions
        for s in range(p):
            try:
                sched.check(p, v, m)
                ops = sched.ops(p, s, micro, chunks)
            except ConfigError:
                continue  # the schedule refuses this case by name (checked elsewhere)
            check_ops(ops, chunks, micro, f"{name} stage {s}")


def test_check_ops_refuses_a_missing_op_and_an_op_before_its_forward() -> None:
    with pytest.raises(ConfigError, match="0 B ops of chunk 0 on micro-batch 1"):
        check_ops([Op("F", 0, 0), Op("B", 0, 0), Op("F", 0, 1)], 1, 2, "x")
    with pytest.raises(ConfigError, match="out of order"):
        check_ops([Op("B", 0, 0), Op("F", 0, 0)], 1, 1, "x")
    with pytest.raises(ConfigError, match="1f1b runs one model chunk"):
        schedule("1f1b", 2, 0, 2, 2)
    with pytest.raises(ConfigError, match="parallel.schedule"):
        SCHEDULES.get("zero-bubble")


@pytest.mark.usefixtures("registered")
def test_a_schedule_registered_from_outside_runs_with_its_bubble_and_memory() -> None:
    p, m = 4, 6
    ex, bubble = _run("gpipe-test", p, m, _fixed_chunk())
    assert ex.makespan == pytest.approx((m + p - 1) * (TF + TB + TW), rel=1e-9)
    assert bubble == pytest.approx((p - 1) * (TF + TB + TW), rel=1e-9)
    chunk = _fixed_chunk(saved=10.0)
    assert peak_activations([chunk], _gpipe(p, 0, m)) == m * 10.0  # GPipe holds all of them
    assert peak_activations([chunk], schedule("1f1b", p, 0, m)) == p * 10.0


@pytest.mark.usefixtures("registered")
def test_a_deferred_weight_gradient_runs_as_its_own_op_and_gates_the_dp_reduction() -> None:
    p, m = 4, 5
    ex, _bubble = _run("deferred-test", p, m, _fixed_chunk())
    # B sends its gradient before its W runs: the gradients cross the stages at TF + TB a
    # stage, and stage 0 runs all its m (F, B, W) after waiting (p - 1)(TF + TB)
    assert ex.makespan == pytest.approx((p - 1) * (TF + TB) + m * (TF + TB + TW), rel=1e-9)
    names = [n.name for n in ex.graph.ranks[0] if n.kind == "compute"]
    assert "B.0.0.0" in names and "W.0.0.0" in names
    w = next(n for n in ex.graph.ranks[0] if n.name == "W.0.0.0")
    assert w.compute is not None and w.compute.kernels == (Fixed(TW),)
    b = next(n for n in ex.graph.ranks[0] if n.name == "B.0.0.0")
    assert b.compute is not None and b.compute.kernels == (Fixed(TB),)
    # data parallelism: the chunk's gradients reduce after its last W, not its last B
    system = _no_latency(8)
    place = placement(ParallelConfig(pp=2, global_batch=8), tuple(system.network.shape))
    chunk = replace(_fixed_chunk(), params=1000)
    graph: Graph = pipeline_graph([[chunk]] * 2, place, 2, kind="deferred-test")
    nodes = graph.ranks[0]
    reduce = next(n for n in nodes if n.name.startswith("dp.all-reduce.grad"))
    last_w = max(n.id for n in nodes if n.name.startswith("W."))
    assert reduce.deps == (last_w,)


@pytest.mark.usefixtures("registered")
def test_fsdp_refuses_a_schedule_that_defers_weight_gradients() -> None:
    system = _no_latency(8)
    place = placement(ParallelConfig(pp=2, zero=3, global_batch=8), tuple(system.network.shape))
    with pytest.raises(ConfigError, match="FSDP"):
        pipeline_graph([[_fixed_chunk()]] * 2, place, 2, kind="deferred-test", fsdp=True)


def test_the_memory_walk_frees_at_b_or_keeps_the_weight_operands_until_w() -> None:
    chunk = _fixed_chunk(saved=10.0, weight_saved=4.0)
    plain = [Op("F", 0, 0), Op("F", 0, 1), Op("B", 0, 0), Op("B", 0, 1)]
    assert peak_activations([chunk], plain) == 20.0
    # held: 10, 20, 14 (B0 keeps 4), 24 (F2), 18, 14, 10, 4, 0
    deferred = [
        Op("F", 0, 0),
        Op("F", 0, 1),
        Op("B", 0, 0),
        Op("F", 0, 2),
        Op("B", 0, 1),
        Op("W", 0, 0),
        Op("W", 0, 1),
        Op("B", 0, 2),
        Op("W", 0, 2),
    ]
    assert peak_activations([chunk], deferred) == 24.0
    # a W that keeps more than its B frees (a gathered input) raises the peak after the B
    heavy = _fixed_chunk(saved=10.0, weight_saved=15.0)
    assert peak_activations([heavy], [Op("F", 0, 0), Op("B", 0, 0), Op("W", 0, 0)]) == 15.0


@pytest.mark.parametrize(
    ("parallel", "precision"),
    [
        (ParallelConfig(tp=2, global_batch=1, seq=1024), "bf16"),
        (ParallelConfig(tp=2, tp_overlap=True, global_batch=1, seq=1024), "fp8"),
        (ParallelConfig(global_batch=1, seq=1024, recompute="full"), "bf16"),
    ],
    ids=["tp-sp", "tp-overlap-fp8", "full-recompute"],
)
def test_a_chunk_carries_its_input_and_weight_gradient_steps(
    parallel: ParallelConfig, precision: str
) -> None:
    system = resolve_system("h100-nvswitch-8", npus=parallel.tp)
    place = placement(parallel, tuple(system.network.shape))
    work = chunk_work(
        TINY,
        PRECISIONS.get(precision),
        range(TINY.layers),
        micro_batch=1,
        seq=1024,
        tp=parallel.tp,
        sp=bool(parallel.sp),
        tp_overlap=parallel.tp_overlap,
        recompute=parallel.recompute,
        tp_group=place.tp_group,
        embedding=True,
        head=True,
    )
    every = [k for st in work.backward for k in st.kernels]
    weight = [k for st in work.weight_grad for k in st.kernels]
    inputs = [k for st in work.input_grad for k in st.kernels]
    assert sorted(map(repr, weight + inputs)) == sorted(map(repr, every))
    gemms = {k.name for k in every if isinstance(k, Gemm) and k.name.endswith(".wgrad")}
    # 4 GEMMs a layer (QKV, projection, fc1, fc2) and the output layer's
    assert len(gemms) == 4 * TINY.layers + 1
    assert gemms <= {k.name for k in weight}
    assert "embedding.bwd" in {k.name for k in weight}
    assert not any(isinstance(k, Gemm) and k.name.endswith(".dgrad") for k in weight)
    # W keeps every weight-gradient GEMM's operands
    kept = sum(k.read_bytes for k in weight if isinstance(k, Gemm))
    assert work.weight_saved == pytest.approx(kept + 1024 * TINY.hidden * 2)
    # the TP collectives stay with B, in order
    assert [st.comm for st in work.backward if st.comm] == [
        st.comm for st in work.input_grad if st.comm
    ]


def test_a_collective_overlapping_a_deferred_weight_gradient_blocks_in_b() -> None:
    comm = Comm("reduce-scatter", 1e6)
    steps = (
        Step((Fixed(1.0),)),
        Step(comm=comm, kind="tp", overlap="next"),
        Step((Fixed(2.0),), sealed=True, weight=(True,)),
        Step((Fixed(3.0),)),
    )
    inputs, weights = split_backward(steps)
    assert inputs == (
        Step((Fixed(1.0),)),
        Step(comm=comm, kind="tp", overlap=""),
        Step((Fixed(3.0),)),
    )
    assert weights == (Step((Fixed(2.0),)),)


def _span_bubble(name: str, p: int, m: int, tf: float, tb: float, tw: float) -> float:
    """The papers' bubble: the longest stage's span, first op to last, less its work (each
    chunk's forward ``tf``, input gradient ``tb``, weight gradient ``tw``; no communication)."""
    sched = SCHEDULES.get(name)
    chunks = (sched.vpp or 1) * sched.directions
    system = _no_latency(p)
    place = placement(ParallelConfig(pp=p, global_batch=m), tuple(system.network.shape))
    backward = (Step((Fixed(tb), Fixed(tw)), weight=(False, True)),)
    chunk = ChunkWork((Step((Fixed(tf),)),), backward, 1.0, 0, 0.0, weight_saved=0.5)
    graph = pipeline_graph([[chunk] * chunks] * p, place, m, kind=name)
    ex = GraphExecutor(Platform(system, exact=True), graph).run()
    spans = []
    for records in ex.records:
        busy = [(r.start, r.end) for r in records.values() if r.node.kind == "compute"]
        spans.append(max(e for _, e in busy) - min(s for s, _ in busy))
    return max(spans) - m * chunks * (tf + tb + tw) / sched.directions


@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 13), (8, 16)])
@pytest.mark.parametrize(("tf", "tb", "tw"), [(1e-3, 1e-3, 1e-3), (1e-3, 1.5e-3, 0.5e-3)])
def test_zb_h1_bubble_is_p_minus_1_times_tf_plus_tb_minus_tw(
    p: int, m: int, tf: float, tb: float, tw: float
) -> None:
    # Qi et al. section 2.1: (p - 1)(T_F + T_B - T_W), a third of 1F1B's at equal times
    assert _span_bubble("zb-h1", p, m, tf, tb, tw) == pytest.approx(
        (p - 1) * (tf + tb - tw), rel=1e-9
    )
    assert _span_bubble("1f1b", p, m, tf, tb, tw) == pytest.approx(
        (p - 1) * (tf + tb + tw), rel=1e-9
    )


@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 16), (8, 16)])
def test_balanced_zero_bubble_and_dualpipe_schedules_meet_their_closed_forms(
    p: int, m: int
) -> None:
    t = 1e-3  # T_F = T_B = T_W per chunk: the papers' balanced case
    full = 2 * t  # DualPipe's B: input and weight gradient together
    pair = t + full  # an overlapped F&B with nothing to overlap: one after the other
    assert _span_bubble("zb-v", p, m, t, t, t) == pytest.approx(0.0, abs=1e-12)
    # DeepSeek-V3 report, table 2: (PP/2 - 1)(F&B + B - 3W); DualPipeV as DualPipe on 2p
    dual = (p / 2 - 1) * (pair + full - 3 * t)
    assert _span_bubble("dualpipe", p, m, t, t, t) == pytest.approx(dual, rel=1e-9)
    folded = (p - 1) * (pair + full - 3 * t)
    assert _span_bubble("dualpipev", p, m, t, t, t) == pytest.approx(folded, rel=1e-9)


@pytest.mark.parametrize("p", [4, 8])
def test_each_schedule_keeps_its_activation_memory_bound(p: int) -> None:
    m = 4 * p
    chunk = _fixed_chunk(saved=1.0, weight_saved=0.5)  # M_B = 1, M_W = 0.5 a chunk

    def peaks(name: str) -> list[float]:
        sched = SCHEDULES.get(name)
        chunks = (sched.vpp or 1) * sched.directions
        return [
            peak_activations([chunk] * chunks, sched.stage_ops(p, s, m, chunks)) for s in range(p)
        ]

    assert peaks("1f1b") == [p - s for s in range(p)]
    # ZB-H1: (p - s) M_B + s M_W on stage s, 1F1B's p M_B at most
    assert peaks("zb-h1") == [(p - s) + 0.5 * s for s in range(p)]
    # ZB-V: 2p chunks of half a stage on every stage, 1F1B's first-stage peak everywhere
    assert peaks("zb-v") == [2.0 * p] * p
    # DualPipe: PP + 1 chunks' micro-batches (report, table 2); DualPipeV: 2 PP + 1 chunks
    assert peaks("dualpipe") == [p + 1.0] * p
    assert peaks("dualpipev") == [2.0 * p + 1] * p


@pytest.mark.parametrize(
    ("schedule", "vpp"),
    [("zb-h1", 1), ("zb-v", 2), ("dualpipe", 1), ("dualpipev", 2)],
)
def test_every_schedule_runs_an_llm_case_alike_in_class_and_exact_mode(
    schedule: str, vpp: int
) -> None:
    model = TransformerConfig(
        "tiny", layers=8, hidden=512, heads=8, kv_heads=2, ffn=1024, vocab=8000, seq=512
    )
    par = ParallelConfig(tp=2, pp=2, vpp=vpp, global_batch=8, seq=512, schedule=schedule)
    case = make_llm_case("h100-nvswitch-8", model, par, nodes=1)
    fast, ex = run_llm(case, mode="class")
    full, _ = run_llm(case, mode="exact")
    assert (fast.schedule, fast.mode) == (schedule, "class")
    assert fast.iteration_time == pytest.approx(full.iteration_time, rel=1e-9)
    ops = {n.name.split(".")[0] for n in ex.graph.ranks[0] if n.kind == "compute"}
    assert {"F", "B", "W"} <= ops  # the trace's op names carry F, B and W
    if schedule.startswith("dual"):
        assert "BW" in ops  # DualPipe's full backwards
        assert any(
            n.name.startswith("pair.") or n.name.endswith(".done") for n in ex.graph.ranks[0]
        )


def test_schedule_choice_is_checked_by_name_and_shape() -> None:
    with pytest.raises(ConfigError, match="parallel.schedule: must be one of 1f1b"):
        make_llm_case(
            "h100-nvswitch-8",
            TINY,
            ParallelConfig(pp=2, global_batch=8, seq=1024, schedule="zb"),
            nodes=1,
        )
    with pytest.raises(ConfigError, match="zb-v schedule runs 2 model chunks per rank: give vpp=2"):
        make_llm_case(
            "h100-nvswitch-8",
            TINY,
            ParallelConfig(pp=2, global_batch=8, seq=1024, schedule="zb-v"),
            nodes=1,
        )
    with pytest.raises(ConfigError, match="dualpipe needs at least 2 pp = 4 micro-batches"):
        make_llm_case(
            "h100-nvswitch-8",
            TINY,
            ParallelConfig(pp=2, global_batch=8, seq=1024, schedule="dualpipe"),
            nodes=1,
        )
