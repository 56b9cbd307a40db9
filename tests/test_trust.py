"""Results a user can trust on every input (issue 33): one regression test per item, from the
command line that showed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import cli_error
from typer.testing import CliRunner

import acesim
from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.errors import SimulationError

runner = CliRunner()


def _json(*args: str) -> dict:  # type: ignore[type-arg]
    out = runner.invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


# ---- item 2: every measured iteration contains its own work


def test_a_run_without_warmup_measures_at_least_its_compute() -> None:
    """`acesim run --npus 8 -w resnet50 --batch 2 -n 2 --warmup 0 --endpoint copy_engine`
    measured 3.68 ms of iteration with 4.37 ms of compute: the cold first iteration's window
    ended when the second started, while its own updates still ran."""
    args = ["run", "--npus", "8", "-w", "resnet50", "--batch", "2", "-n", "2"]
    result = _json(*args, "--warmup", "0", "--endpoint", "copy_engine", "--json")
    assert result["iteration_time"] >= result["compute_time"]
    assert result["iteration_time"] == pytest.approx(result["makespan"] / 2, rel=1e-12)


def test_too_few_iterations_suggest_a_warmup_that_measures_correctly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "run", "--npus", "8", "-n", "2", "--warmup", "1")
    assert "or set the warm-up to 0 (the whole run measured" in line


# ---- item 9: the Python API refuses a non-finite result


def test_simulate_collective_refuses_an_infinite_hbm_cost() -> None:
    system = resolve_system("ace-isca21").with_endpoint("baseline", gather_hbm_bytes_per_byte=1e308)
    with pytest.raises(SimulationError, match="hbm_bytes_per_npu is not finite"):
        acesim.simulate_collective(system, "all-gather", "1MiB")


def test_the_dask_docs_say_the_scheduler_must_be_trusted() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
    text = docs.read_text(encoding="utf-8")
    assert "The scheduler must be trusted" in text and "tls://" in text


# ---- item 5: every reader guarded


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--npu", "ranks=0-99999999999999999,hbm_bandwidth=3e12"], "ranks must be below"),
        (["--npu", "ranks=0-4294967295,hbm_bandwidth=3e12"], "must be ranks below 8"),
        (["--straggler", "rank=1,slowdown=" + "9" * 5000], "numbers must fit in 64 bits"),
        (["--set", "collective.chunks=" + "9" * 5000], "numbers must fit in 64 bits"),
    ],
)
def test_key_value_flags_check_ranges_and_digits_before_expanding(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    expected: str,
) -> None:
    line = cli_error(
        monkeypatch, capsys, "run", "--exact", "--npus", "8", "--endpoint", "ideal", *args
    )
    assert expected in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("null", "holds null"),
        ("[" * 100_000, "nested more than 64 levels"),
        ("[1" + "0" * 5000 + "]", "an integer of 5001 digits"),
        ("[0, NaN]", "not a number JSON allows"),
    ],
)
def test_a_placement_file_goes_through_the_guarded_reader(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str,
    expected: str,
) -> None:
    path = tmp_path / "p.json"
    path.write_text(content, encoding="utf-8")
    args = ["run", "--exact", "--npus", "8", "--endpoint", "ideal", "--placement", str(path)]
    assert expected in cli_error(monkeypatch, capsys, *args)


def test_a_placement_from_a_device_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--exact", "--npus", "8", "--endpoint", "ideal", "--placement", "/dev/zero"]
    assert "not a regular file" in cli_error(monkeypatch, capsys, *args)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["kernel", "--elements", "2**1024"], "--elements: must be at most 2**53"),
        (["kernel", "--stream", "copy", "--elements", "0.5"], "whole number of elements"),
        (["kernel", "--gemm", "4294967296x8x8"], "--gemm: dimensions must be at most 2**31"),
        (["collective", "--sizes", "1.5"], "--sizes: sizes are whole bytes"),
        (["collective", "--sizes", "1:1e300:x1.0000001"], "expands to more than 10000 sizes"),
    ],
)
def test_kernel_and_size_arguments_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    expected: str,
) -> None:
    assert expected in cli_error(monkeypatch, capsys, *args)


# ---- item 7: leniencies refused with one line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--parallel", "tp=٨"], "--parallel"),
        (["run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--global-batch", "８"], "ASCII"),
        (["run", "-n", "4_0"], "-n: write numbers without underscores"),
        (["run", "--set", "collective.chunks=4_0"], "--set: write numbers without underscores"),
        (["run", "--exact", "--npus", "8", "--npu", "ranks=true,hbm_bandwidth=3e12"], "boolean"),
        (["run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--precision", ""], "--precision"),
        (["collective", "--sizes", "٨ MiB"], "--sizes: expected a size"),
    ],
)
def test_lenient_numbers_are_refused(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    expected: str,
) -> None:
    assert expected in cli_error(monkeypatch, capsys, *args, "--endpoint", "ideal")


@pytest.mark.parametrize(
    ("name", "content"),
    [("dup.json", '{"name": "a", "name": "b"}'), ("dup.yaml", "name: a\nname: b\n")],
)
def test_duplicate_keys_in_documents_are_refused(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    content: str,
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    assert "duplicate key 'name'" in cli_error(monkeypatch, capsys, "run", "-s", str(path))


def test_results_refuse_a_negative_limit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = cli_error(monkeypatch, capsys, "results", str(tmp_path / "x.sqlite"), "-n", "-1")
    assert "--limit: must be at least 1" in line


def test_a_dry_run_marks_points_that_would_fail_at_once_and_exits_1(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(
        'name = "bad"\nkind = "collective"\n[base]\nsystem = "ace-isca21"\nop = "all-reduce"\n'
        'size = "1 MiB"\n[grid]\n"collective.algorithm" = ["nvls", "nvls_tree"]\n',
        encoding="utf-8",
    )
    out = runner.invoke(app, ["sweep", str(spec), "--dry-run"])
    assert out.exit_code == 1
    assert "2 of 2 points would fail before simulating" in out.output
    assert "yes" not in out.stdout


# ---- item 6: Chakra's standard comm_size rules acesim's group collectives; no stale ranks


def _group_trace(prefix: Path, ranks: int = 16) -> None:
    from acesim.network.group import Group, Span
    from acesim.network.topology import Topology
    from acesim.workload.chakra import write_chakra
    from acesim.workload.graph import Graph, Node

    system = resolve_system("h100-nvswitch-8", nodes=ranks // 8)
    topology = Topology(system.network, system.collective)
    group = Group((Span(0, 8),), "tp")
    node = Node(id=0, kind="collective", name="ar", op="all-gather", size=8e6, group=group)
    graph = Graph([[node] for _ in range(ranks)], name="g")
    write_chakra(graph, prefix, dim_sizes=list(system.network.shape), topology=topology)


def _edit_comm_size(path: Path, factor: int) -> None:
    from acesim.workload.chakra import attrs as A
    from acesim.workload.chakra import schema as S
    from acesim.workload.chakra.stream import iter_records, load_bytes, write_message

    records = [bytes(r) for _o, r in iter_records(load_bytes(str(path), path.read_bytes()))]
    with open(path, "wb") as out:
        write_message(out, S.GlobalMetadata.FromString(records[0]))
        for record in records[1:]:
            node = S.Node.FromString(record)
            for a in node.attr:
                if a.name == A.COMM_SIZE:
                    a.int64_val *= factor
            write_message(out, node)


def test_an_edited_comm_size_rules_a_group_collective_with_a_warning(tmp_path: Path) -> None:
    from acesim.workload.chakra import ChakraWarning, read_chakra

    _group_trace(tmp_path / "t")
    assert read_chakra(tmp_path / "t").ranks[0][0].size == 8e6  # agreeing: the exact size
    for rank in range(16):
        _edit_comm_size(tmp_path / f"t.{rank}.et", 2)
    with pytest.warns(ChakraWarning, match="16 group collectives have a comm_size that disagrees"):
        graph = read_chakra(tmp_path / "t")
    assert graph.ranks[0][0].size == 16e6  # comm_size x the group's 8 members


def test_exporting_again_removes_the_stale_ranks_of_a_larger_export(tmp_path: Path) -> None:
    _group_trace(tmp_path / "t", ranks=16)
    _group_trace(tmp_path / "t", ranks=8)
    assert sorted(p.name for p in tmp_path.glob("t.*.et")) == sorted(f"t.{r}.et" for r in range(8))


# ---- item 8: a slow NPU written into the traces runs


def test_a_slow_npu_written_into_per_rank_graphs_runs_in_exact_mode() -> None:
    """As ASTRA-sim users express a slow NPU: rank 0's compute durations x 1.3 in its own
    trace (no --straggler). The ranks stalled, each NPU admitting the collectives' chunk
    phases in its own order; the run is redone with agreed orders."""
    import dataclasses

    from acesim.runs import execute, make_case
    from acesim.training.loops import build_graph
    from acesim.workload.graph import Graph
    from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

    layers, duration = 10, 1e-4
    workload = Workload(
        "dp",
        tuple(
            Layer(
                f"l{i}",
                forward=Pass(Compute(duration=duration)),
                weight_grad=Pass(Compute(duration=duration), Comm("all-reduce", 4e7)),
            )
            for i in range(layers)
        ),
    )
    nodes = build_graph(workload, 1, "layerwise", 25 * 2**20).ranks[0]
    slow = [
        dataclasses.replace(n, compute=Compute(duration=duration * 1.3))
        if n.kind == "compute" and n.compute is not None and n.compute.duration
        else n
        for n in nodes
    ]
    graph = Graph([slow] + [nodes] * 7, name="slow", iterations=1)
    case = make_case("ace-isca21", graph, warmup=0, iterations=1, mode="exact", npus=8)
    result, execution = execute(case.with_system(case.system.with_endpoint("ideal")))
    assert result.iteration_time >= 2 * layers * duration * 1.3
    assert execution.redone >= 1


# ---- item 1: ideal is a bound on every endpoint


def test_ideal_is_at_least_as_fast_as_nvls_on_b200() -> None:
    """`acesim collective -s b200-nvswitch-8 --sizes 1KiB --endpoint nvls` was 7x faster than
    `--endpoint ideal`, which ran the ring with algorithm null."""
    args = ["collective", "-s", "b200-nvswitch-8", "--sizes", "1KiB", "--json", "--endpoint"]
    nvls = _json(*args, "nvls")["results"][0]
    ideal = _json(*args, "ideal")["results"][0]
    assert ideal["time"] <= nvls["time"] * (1 + 1e-9)
    assert ideal["algorithm"] == "nvls"


def test_ideal_takes_the_copy_engines_link_efficiency_on_gb200() -> None:
    system = resolve_system("gb200-nvl72")
    for op in ("all-gather", "all-to-all"):
        ce = acesim.simulate_collective(system, op, 64 * 2**20, endpoint="copy_engine").time
        ideal = acesim.simulate_collective(system, op, 64 * 2**20, endpoint="ideal").time
        assert ideal <= ce * (1 + 1e-9), op


# ---- item 3: more bandwidth never reports a slower collective without saying why


def test_the_collective_table_says_when_the_tuner_kept_a_slower_choice() -> None:
    out = runner.invoke(
        app,
        [
            "collective",
            "-s",
            "h100-nvswitch-8",
            "--nodes",
            "4",
            "--sizes",
            "64MiB",
            "--set",
            "network.dimensions[0].link_bandwidth=100 GB/s",
        ],
        env={"COLUMNS": "300"},
    )
    # NVLink slowed to 100 GB/s per link: the tuner predicts the hierarchical ring, and
    # NVLS_TREE, pipelined across 4 nodes, simulates faster
    assert out.exit_code == 0, out.output
    assert "nvls_tree simulates" in out.output and "kept NCCL's choice" in out.output


# ---- item 4: bounded work


def test_an_llm_global_batch_past_the_bound_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--parallel", "tp=8"]
    line = cli_error(monkeypatch, capsys, *args, "--global-batch", str(10**12))
    assert "--global-batch: makes 1000000000000 micro-batches to simulate" in line
    assert "more than the bound 4096" in line


def test_a_2_to_the_31_npu_dimension_is_refused_at_validation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch,
        capsys,
        "collective",
        "--sizes",
        "1MiB",
        "--set",
        f"network.dimensions[0].size={2**31}",
    )
    assert "network.dimensions[0].size: must be at most 1048576" in line
