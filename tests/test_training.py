"""Training loops and the main job: semantics pinned on the execution records."""

from __future__ import annotations

from typing import Any

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config import SystemConfig, system_from_dict
from acesim.errors import ConfigError, WorkloadError
from acesim.runs import run_system
from acesim.training.loops import build_graph
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

MiB = 2**20


def torus(
    endpoint: str = "ideal", *, bandwidth: float = 50e9, latency: float = 1e-6
) -> SystemConfig:
    dims = [
        {
            "kind": "ring",
            "size": s,
            "link_bandwidth": bandwidth,
            "link_latency": latency,
            "links_per_npu": 2,
        }
        for s in (2, 2, 2)
    ]
    return system_from_dict(
        {
            "name": "train-test",
            "npu": {"compute_units": 80, "matrix_flops": {"fp32": 80e12}, "hbm_bandwidth": 900e9},
            "network": {"dimensions": dims},
            "collective": {"chunks": 2, "endpoint_delay": 0.0 if latency == 0 else 1e-8},
            "endpoint": {"kind": endpoint},
        }
    )


def mlp(
    layers: int = 6, flops: float = 2e9, nbytes: float = 1e8, grad: float = 8 * MiB
) -> Workload:
    def layer(i: int) -> Layer:
        c = Compute(flops=flops, hbm_bytes=nbytes)
        return Layer(
            f"fc{i}",
            forward=Pass(c),
            input_grad=Pass(c),
            weight_grad=Pass(c, Comm("all-reduce", grad) if grad else None),
        )

    return Workload("mlp", tuple(layer(i) for i in range(layers)))


def test_ideal_endpoint_and_infinite_network_iteration_equals_compute() -> None:
    cfg = torus(bandwidth=1e30, latency=0.0)
    result, _ = run_system(cfg, mlp(), iterations=3)
    assert result.iteration_time == pytest.approx(result.compute_time, rel=1e-9)
    assert result.compute_time == pytest.approx(result.compute_time_alone, rel=1e-12)


def test_zero_compute_iteration_equals_communication_time() -> None:
    w = mlp(flops=0.0, nbytes=0.0)
    result, _ = run_system(torus(), w, iterations=3)
    assert result.compute_time == 0.0
    assert result.iteration_time == pytest.approx(result.comm_time, rel=1e-9)
    assert result.exposed_comm == pytest.approx(result.iteration_time, rel=1e-9)


def _records(ex: Any) -> dict[tuple[int, str, str], Any]:
    return {
        (r.node.iteration, r.node.layer, r.node.kind + r.node.pass_name): r
        for r in ex.records[0].values()
    }


@pytest.mark.parametrize("endpoint", ["ideal", "baseline", "ace"])
def test_forward_of_a_layer_waits_for_its_gradient_all_reduce(endpoint: str) -> None:
    result, ex = run_system(torus(endpoint), mlp(), iterations=3)
    rec = _records(ex)
    for it in (1, 2):
        for i in range(6):
            fwd = rec[(it, f"fc{i}", "computefwd")]
            ar = rec[(it - 1, f"fc{i}", "collectivewg")]
            assert fwd.start >= ar.end
    # Backward issues each all-reduce after its weight-gradient compute, non-blocking: the
    # next compute starts before the all-reduce finishes.
    wg = rec[(0, "fc5", "computewg")]
    ar = rec[(0, "fc5", "collectivewg")]
    ig = rec[(0, "fc5", "computeig")]
    assert ar.start == wg.end and ig.start == wg.end and ar.end > ig.start


def test_no_overlap_loop_blocks_on_every_collective() -> None:
    layerwise, _ = run_system(torus("baseline"), mlp(), iterations=3)
    serial, ex = run_system(torus("baseline"), mlp(), iterations=3, loop="no_overlap")
    rec = _records(ex)
    for i in range(6):
        assert rec[(1, f"fc{i}", "computeig")].start >= rec[(1, f"fc{i}", "collectivewg")].end
    assert serial.iteration_time > layerwise.iteration_time


def test_bucketed_loop_issues_one_all_reduce_per_bucket() -> None:
    graph = build_graph(mlp(grad=8 * MiB), iterations=1, loop="bucketed", bucket_size=16 * MiB)
    sizes = [n.size for n in graph.ranks[0] if n.kind == "collective"]
    assert sizes == [16 * MiB, 16 * MiB, 16 * MiB]
    result, _ = run_system(torus(), mlp(), iterations=3, loop="bucketed", bucket_size=16 * MiB)
    assert result.iteration_time > 0


def dlrm_like() -> Workload:
    c = Compute(flops=1e9, hbm_bytes=1e7)
    emb = Layer(
        "emb",
        forward=Pass(c, Comm("all-to-all", 4 * MiB)),
        input_grad=Pass(c, Comm("all-to-all", 4 * MiB)),
        weight_grad=Pass(c),
    )
    mlps = [
        Layer(
            f"m{i}",
            forward=Pass(c),
            input_grad=Pass(c),
            weight_grad=Pass(c, Comm("all-reduce", MiB)),
        )
        for i in range(5)
    ]
    return Workload("dlrm-like", (emb, *mlps), parallelism="hybrid_dlrm", bottom_layers=2)


def test_dlrm_all_to_all_blocks_only_the_top_mlp() -> None:
    _, ex = run_system(torus("baseline"), dlrm_like(), iterations=2, warmup=0)
    rec = _records(ex)
    a2a = rec[(0, "emb", "collectivefwd")]
    # The bottom MLP (m0, m1) runs while the all-to-all is in flight; the top MLP waits.
    assert rec[(0, "m0", "computefwd")].start < a2a.end
    assert rec[(0, "m2", "computefwd")].start >= a2a.end
    # The backward all-to-all is issued when input gradients reach the first top-MLP layer.
    bwd = rec[(0, "emb", "collectiveig")]
    assert bwd.start == rec[(0, "m2", "computeig")].end
    assert rec[(0, "emb", "computewg")].start >= bwd.end


def test_exact_and_symmetric_runs_agree() -> None:
    sym, _ = run_system(torus("baseline"), mlp(layers=3), iterations=3)
    exact, _ = run_system(torus("baseline"), mlp(layers=3), iterations=3, exact=True)
    assert exact.iteration_time == pytest.approx(sym.iteration_time, rel=1e-12)
    assert exact.compute_time == pytest.approx(sym.compute_time, rel=1e-12)


def test_repeated_runs_are_bit_identical() -> None:
    a, _ = run_system(torus("ace"), mlp(), iterations=3)
    b, _ = run_system(torus("ace"), mlp(), iterations=3)
    assert a.to_dict() == b.to_dict()


def test_bad_loop_and_iterations_are_workload_errors() -> None:
    with pytest.raises(WorkloadError, match="iterations must be at least 1"):
        build_graph(mlp(), iterations=0)
    with pytest.raises(ConfigError, match="run.loop: must be one of layerwise, bucketed"):
        build_graph(mlp(), loop="pipelined")


def test_run_cli_compares_three_endpoints() -> None:
    runner = CliRunner()
    # one iteration, measured whole: the comparison table is the same for any iteration count
    args = ["run", "--workload", "resnet50", "--npus", "16", "-n", "1", "--warmup", "0"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    for word in ("best baseline", "ACE", "ideal", "speedup vs best"):
        assert word in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--npus", "6"], "error: --npus: must be a multiple of the local dimension size 4, got 6"),
        (["--workload", "resnet"], "did you mean 'resnet50'?"),
        (["--loop", "pipelined"], "--loop: must be one of layerwise, bucketed, no_overlap"),
        (["--batch", "0"], "--batch: must be at least 1, got 0"),
        (["--shape", "4x4"], "--shape: must give one size per network dimension (3)"),
        (["-n", "2"], "--iterations: must be at least warm-up + 2 = 3"),
        (["--warmup", "-1"], "--warmup: must not be negative, got -1"),
        (
            ["--endpoint", "acee"],
            "--endpoint: must be one of baseline, ace, ideal, copy_engine, nvls, got 'acee'",
        ),
    ],
)
def test_run_cli_bad_input_is_one_line(
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the console script's entry point (acesim.cli:main) in this process: exit status 2, one
    # line, no traceback, as a new process gives it (tests/test_cli.py's
    # test_errors_exit_2_with_one_line_and_no_traceback runs the real process)
    line = cli_error(monkeypatch, capsys, "run", *args)
    assert message in line


def _pingpong() -> Any:
    from acesim.workload.graph import Graph, Node

    size = 4 * MiB
    rank0 = [Node(0, "send", "send", peer=1, tag=7, size=size)]
    rank1 = [Node(0, "recv", "recv", peer=0, tag=7, size=size)]
    others = [[] for _ in range(6)]
    return Graph([rank0, rank1, *others], name="pingpong")


def test_send_receive_takes_latency_plus_size_over_bandwidth() -> None:
    from acesim.hardware.platform import Platform
    from acesim.training.executor import GraphExecutor

    cfg = torus("ideal", bandwidth=50e9, latency=1e-6)
    ex = GraphExecutor(Platform(cfg, exact=True), _pingpong()).run()
    link = 2 * 50e9  # two links per NPU in the ring dimension
    expected = 4 * MiB / link + 1e-6 + cfg.collective.endpoint_delay
    assert ex.records[1][0].end == pytest.approx(expected, rel=1e-12)


def test_send_receive_in_symmetric_mode_is_an_error() -> None:
    from acesim.hardware.platform import Platform
    from acesim.training.executor import GraphExecutor
    from acesim.workload.graph import Graph

    graph = _pingpong()
    same = Graph([graph.ranks[0]] * 8, name="pingpong")
    with pytest.raises(WorkloadError, match="point-to-point sends and receives need exact mode"):
        GraphExecutor(Platform(torus()), same)


def test_snapshot_counts_the_hbm_of_a_kernel_in_flight() -> None:
    from acesim.hardware.platform import Platform
    from acesim.training.executor import GraphExecutor
    from acesim.workload.graph import Graph, Node

    cfg = torus("ideal")
    probe = Platform(cfg)
    coll = probe.collectives.issue("all-reduce", 8 * MiB)
    probe.engine.run()
    t_coll = coll.duration
    kernel = Compute(duration=10 * t_coll, hbm_bytes=1e8)  # not memory-bound: 0.11 ms of HBM
    nodes = [
        Node(0, "k", "compute", compute=kernel, iteration=0),
        Node(1, "ar", "collective", op="all-reduce", size=8 * MiB, iteration=0),
        Node(2, "next", "collective", deps=(1,), op="all-reduce", size=MiB, iteration=1),
    ]
    ex = GraphExecutor(Platform(cfg), Graph([nodes], iterations=2)).run()
    assert ex.iteration_start[1] == pytest.approx(t_coll)
    # The kernel moves its 1e8 bytes over 10 t_coll: a tenth of them by then.
    assert ex.snapshots[1].compute_hbm_bytes == pytest.approx(1e7, rel=1e-9)
