"""The host thread that issues launches (acesim.training.host): where Megatron-core's all-to-all
MoE dispatcher synchronises the host with the GPU, the work after the sync point waits for the
host's launches; with no sync point, or with launches captured in CUDA graphs, nothing moves."""

from __future__ import annotations

import math

import pytest

from acesim.commands.show import show_footnotes
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError
from acesim.hardware.kernels import Fixed, Gemm
from acesim.hardware.platform import Platform
from acesim.runs.llm import HOST_SYNC_NOTE, host_note, make_llm_case, run_llm
from acesim.training.executor import Execution, GraphExecutor
from acesim.training.host import launches, segments
from acesim.training.pipeline import pipeline_graph
from acesim.validation import load_corpus
from acesim.validation.evaluate import simulate_case
from acesim.workload.llm.chunk import ChunkWork, Step
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, placement
from acesim.workload.model import Comm

LAUNCH = 1e-3  # s a launch: far above the GPU's work, so the host sets the pace

MOE = TransformerConfig(
    "tiny-moe",
    layers=2,
    hidden=512,
    heads=4,
    kv_heads=2,
    ffn=1024,
    vocab=4000,
    seq=512,
    experts=8,
    top_k=2,
    expert_ffn=256,
)


def _forward(sync: bool) -> tuple[Step, ...]:
    system = resolve_system("h100-nvswitch-8", npus=2)
    place = placement(ParallelConfig(ep=2, global_batch=2), tuple(system.network.shape))
    assert place.ep_group is not None
    a2a = Comm("all-to-all", 2**20, group=place.ep_group)
    return (
        Step((Fixed(1e-3, name="before"),)),
        Step(comm=a2a, kind="ep", sync=sync),
        Step((Fixed(1e-4, name="a"), Fixed(1e-4, name="b"), Fixed(1e-4, name="c"))),
    )


def _run(sync: bool, launch_time: float | None) -> Execution:
    system = resolve_system("h100-nvswitch-8", npus=2)
    place = placement(ParallelConfig(ep=2, global_batch=2), tuple(system.network.shape))
    chunk = ChunkWork(_forward(sync), (Step((Fixed(2e-3, name="back"),)),), 0.0, 0, 0.0)
    graph = pipeline_graph([[chunk]], place, 2, launch_time=launch_time)
    return GraphExecutor(Platform(system, exact=True), graph).run()


def test_a_segment_counts_its_launches_a_grouped_gemms_experts_one_each() -> None:
    experts = Gemm(64, 64, 64, batch=4, name="experts")
    comm = Comm("all-to-all", 1.0)
    steps = (
        Step((Fixed(1e-6),)),  # before the first sync point: the host runs ahead, not counted
        Step(comm=comm, kind="ep", sync=True),
        Step((Fixed(1e-6), experts)),
        Step(comm=comm, kind="ep"),  # the combine: no sync
        Step((Fixed(1e-6),)),
        Step(comm=comm, kind="ep", sync=True),
        Step((Fixed(1e-6), Fixed(1e-6))),
    )
    assert launches(steps[2]) == 1 + 4 and launches(steps[1]) == 1
    assert segments(steps) == {1: 1 + 5 + 1 + 1, 5: 1 + 2}
    assert segments(steps[:1]) == {}


def test_a_sync_point_makes_the_gpu_wait_for_the_hosts_launches() -> None:
    ex = _run(sync=True, launch_time=LAUNCH)
    records = sorted(ex.records[0].values(), key=lambda r: r.start)
    hosts = [r for r in records if r.node.kind == "host"]
    assert len(hosts) == 2  # one sync point a forward, two micro-batches
    for host in hosts:
        # the dispatch and the three kernels after it: 4 launches
        assert host.end - host.start == pytest.approx(4 * LAUNCH, rel=1e-12)
        # the host waited at the sync point for the GPU work issued before it
        before = [r for r in records if r.node.kind == "compute" and r.end <= host.start]
        assert before and host.start == pytest.approx(max(r.end for r in before), abs=1e-12)
        # the GPU runs the segment in 0.3 ms and the all-to-all; the backward after it cannot
        # start before the host has issued the forward's last launch
        later = [r for r in records if r.node.name.startswith("BW.") and r.start >= host.start]
        assert later and min(r.start for r in later) >= host.end - 1e-12
    plain = _run(sync=True, launch_time=None)
    assert ex.makespan > plain.makespan + 2 * (4 * LAUNCH - 1e-3)


def test_without_a_sync_point_the_host_changes_nothing() -> None:
    with_host, without = _run(sync=False, launch_time=LAUNCH), _run(sync=False, launch_time=None)
    assert [n for n in with_host.graph.ranks[0]] == [n for n in without.graph.ranks[0]]
    assert with_host.makespan == without.makespan
    assert not any(r.node.kind == "host" for r in with_host.records[0].values())


def _moe(parallel: str, host: dict[str, float | None]) -> tuple[float, list[str]]:
    par = ParallelConfig(ep=2, global_batch=4, seq=512, cuda_graphs="cuda_graphs" in parallel)
    case = make_llm_case(resolve_system("h100-nvswitch-8", npus=2, overrides=host), MOE, par)
    result, _ = run_llm(case)
    return result.iteration_time, result.notes


def test_moe_dispatch_waits_for_the_host_unless_cuda_graphs_capture_the_launches() -> None:
    slow = {"host.op_time": LAUNCH, "host.ops_per_launch": 1.0}
    unset: dict[str, float | None] = {"host.op_time": None, "host.ops_per_launch": None}
    eager, eager_notes = _moe("", slow)
    graphed, graphed_notes = _moe("cuda_graphs", slow)
    plain, plain_notes = _moe("", unset)
    assert eager > plain * 1.5  # the host's millisecond launches set the layers' pace
    assert graphed == plain  # replayed from CUDA graphs: nothing charged, bit-identical
    assert host_note(LAUNCH) in eager_notes
    assert HOST_SYNC_NOTE in plain_notes and HOST_SYNC_NOTE not in graphed_notes


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("host.op_time", -1e-6),
        ("host.op_time", math.nan),
        ("host.ops_per_launch", -1.0),
        ("host.ops_per_launch", math.inf),
    ],
)
def test_a_bad_host_figure_is_a_one_line_error_naming_the_field(path: str, value: float) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_system("h100-nvswitch-8", overrides={path: value})
    assert info.value.field == path
    assert "\n" not in str(info.value) and path in str(info.value)


def test_the_h100_preset_carries_the_host_fit_of_its_gpt_oss_row() -> None:
    # host.ops_per_launch is fitted on this row (acesim.validation.fit, HOST_FITS); the preset
    # carries it to four digits, so the row comes out within a part in a thousand
    corpus = load_corpus()
    family = corpus.families["llm"]
    (case,) = [c for c in family.cases if c.id == "mbridge-dgxh100-gpt-oss-120b-bf16"]
    assert case.fit and case.fits == ["host.ops_per_launch"]
    simulated, _ = simulate_case(case, family)
    assert simulated == pytest.approx(case.measured, rel=1e-3)


def test_a_trace_shows_the_hosts_issuing_on_a_lane_of_its_own() -> None:
    from acesim.results.trace import trace_events

    host = {"host.op_time": LAUNCH, "host.ops_per_launch": 1.0}
    par = ParallelConfig(ep=2, global_batch=2, seq=512)
    case = make_llm_case(resolve_system("h100-nvswitch-8", npus=2, overrides=host), MOE, par)
    result, ex = run_llm(case, trace=True)
    events = trace_events(ex)["traceEvents"]
    issued = [e for e in events if e.get("cat") == "host"]
    assert len(issued) == MOE.layers  # one sync point a MoE layer, one micro-batch
    assert result.exposed["host"] > 0


def test_a_footnote_s_square_brackets_are_printed_not_taken_as_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class _Result:
        def footnotes(self) -> list[str]:
            return [f"model: {HOST_SYNC_NOTE}"]

    show_footnotes([_Result()], "h100-nvswitch-8", assumptions=False)
    assert "states no [host] (host.op_time" in " ".join(capsys.readouterr().err.split())
