"""ASTRA-sim 1.0 text workloads: the published reference files, round trips and bad input."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from acesim.errors import WorkloadError
from acesim.workload.astra import (
    AstraPass,
    parse_astra_workload,
    read_astra_workload,
    write_astra_workload,
)
from acesim.workload.loader import load_workload
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload


def _reference_dir() -> Path:
    shared = os.environ.get("ACESIM_SHARED")
    base = Path(shared) if shared else Path(__file__).resolve().parents[3] / "shared"
    return base / "reference" / "astra-sim-1.0-workloads"


REFERENCE = _reference_dir()

# file -> (training loop on line 1, declared layers)
EXPECTED = {
    "DLRM_HybridParallel.txt": ("HYBRID_DLRM", 8),
    "MLP_HybridParallel_Data_Model.txt": ("HYBRID_DATA_MODEL", 6),
    "MLP_HybridParallel_Model_Data.txt": ("HYBRID_MODEL_DATA", 6),
    "MLP_ModelParallel.txt": ("MODEL", 6),
    "Resnet50_DataParallel.txt": ("DATA", 54),
    "Transformer_HybridParallel.txt": ("HYBRID_TRANSFORMER", 57),
    "Transformer_HybridParallel_Fwd_In_Bckwd.txt": ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", 21),
    "microAllReduce.txt": ("MICRO", 1),
    "microAllToAll.txt": ("MICRO", 1),
    "sample_per_layer_parallel_HybridCustomized.txt": ("HYBRID_CUSTOMIZED", 6),
}
SUPPORTED = [
    name for name, (loop, _) in EXPECTED.items() if loop in ("DATA", "HYBRID_DLRM", "MICRO")
]
UNSUPPORTED = [name for name in EXPECTED if name not in SUPPORTED]

needs_reference = pytest.mark.skipif(
    not REFERENCE.is_dir(),
    reason=f"ASTRA-sim 1.0 reference workloads not found at {REFERENCE} (set ACESIM_SHARED)",
)


def ref(name: str) -> Path:
    return REFERENCE / name


# --- the reference files ---------------------------------------------------------------------


@needs_reference
def test_reference_folder_holds_exactly_the_expected_files() -> None:
    assert sorted(p.name for p in REFERENCE.glob("*.txt")) == sorted(EXPECTED)


@needs_reference
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_reference_file_parses_with_its_declared_layer_count(name: str) -> None:
    loop, count = EXPECTED[name]
    parsed = parse_astra_workload(ref(name))
    assert parsed.loop == loop
    assert len(parsed.layers) == count
    assert all(layer.dependency == -1 for layer in parsed.layers)


@needs_reference
@pytest.mark.parametrize("name", SUPPORTED)
def test_supported_reference_files_read_as_workloads(name: str) -> None:
    w = read_astra_workload(ref(name))
    assert len(w.layers) == EXPECTED[name][1]
    assert w.name == Path(name).stem


@needs_reference
@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_training_loops_are_rejected_naming_the_loop(name: str) -> None:
    loop = EXPECTED[name][0]
    with pytest.raises(WorkloadError) as info:
        read_astra_workload(ref(name))
    message = str(info.value)
    assert message.startswith(
        f"{ref(name)}:1: training loop: training loop {loop} is not supported "
        "(supported: DATA, HYBRID_DLRM, MICRO)"
    )
    assert info.value.field == "training loop"


@needs_reference
def test_resnet50_all_reduces_102011648_bytes_of_weight_gradients() -> None:
    w = read_astra_workload(ref("Resnet50_DataParallel.txt"))
    assert w.parallelism == "data"
    assert w.bottom_layers is None
    assert w.total_comm_bytes("all-reduce") == 102_011_648
    assert w.total_comm_bytes() == 102_011_648
    for layer in w.layers:
        assert layer.forward.comm is None and layer.input_grad.comm is None
        assert layer.weight_grad.comm is not None
        assert layer.weight_grad.comm.op == "all-reduce"
        assert layer.weight_grad.comm.dims is None  # all dimensions
    conv1 = w.layers[0]
    assert conv1.name == "conv1"
    assert conv1.forward.compute == Compute(duration=13003e-9)
    assert conv1.input_grad.compute.duration == pytest.approx(12864e-9)
    assert conv1.weight_grad.compute.duration == pytest.approx(32291e-9)
    assert conv1.weight_grad.comm == Comm("all-reduce", 37632, None)
    assert conv1.update_time == pytest.approx(3229e-9)


@needs_reference
def test_dlrm_bottom_layers_and_embedding_all_to_alls() -> None:
    w = read_astra_workload(ref("DLRM_HybridParallel.txt"))
    assert w.parallelism == "hybrid_dlrm"
    assert w.bottom_layers == 4
    assert w.layers[w.bottom_layers].name == "MLP_Bottom_3"
    emb = w.layers[0]
    assert emb.name == "Embedding"
    # The embedding layer spans every dimension in all passes (ParallelismPolicy::All).
    assert emb.forward.comm == Comm("all-to-all", 98304, None)
    assert emb.input_grad.comm == Comm("all-to-all", 98304, None)
    assert emb.weight_grad.comm is None
    assert w.total_comm_bytes("all-to-all") == 2 * 98304
    mlps = w.layers[1:]
    assert [layer.name for layer in mlps] == [
        *(f"MLP_Bottom_{i}" for i in range(4)),
        *(f"MLP_Top_{i}" for i in range(3)),
    ]
    for layer in mlps:
        assert layer.forward.comm is None and layer.input_grad.comm is None
        assert layer.weight_grad.comm is not None
        assert layer.weight_grad.comm.op == "all-reduce"
        assert layer.weight_grad.comm.dims is None
    assert [layer.weight_grad.comm.size for layer in mlps if layer.weight_grad.comm] == [
        13312,
        524288,
        524288,
        16384,
        1064960,
        524288,
        524288,
    ]


@needs_reference
@pytest.mark.parametrize(
    ("name", "op"), [("microAllReduce.txt", "all-reduce"), ("microAllToAll.txt", "all-to-all")]
)
def test_micro_files_hold_one_weight_gradient_collective_of_1_MiB(name: str, op: str) -> None:
    w = read_astra_workload(ref(name))
    assert w.parallelism == "micro"
    (layer,) = w.layers
    assert layer.name == "conv1"
    assert layer.weight_grad.comm == Comm(op, 1_048_576, None)
    assert layer.forward.comm is None and layer.input_grad.comm is None
    for p in (layer.forward, layer.input_grad, layer.weight_grad):
        assert p.compute.duration == pytest.approx(5e-9)
    assert layer.update_time == pytest.approx(5e-9)


@needs_reference
def test_hybrid_customized_keeps_each_layers_parallelism_column() -> None:
    parsed = parse_astra_workload(ref("sample_per_layer_parallel_HybridCustomized.txt"))
    assert [layer.parallelism for layer in parsed.layers] == [
        "HYBRID_DATA_MODEL",
        "HYBRID_MODEL_DATA",
        "DATA",
        "MODEL",
        "MODEL",
        "HYBRID_MODEL_DATA",
    ]
    assert parsed.layers[1].ig == AstraPass(7488, "REDUCESCATTER", 65536)


@needs_reference
def test_transformer_headers_carry_the_model_parallel_group() -> None:
    plain = parse_astra_workload(ref("Transformer_HybridParallel.txt"))
    assert plain.model_parallel_group == 4
    fib = parse_astra_workload(ref("Transformer_HybridParallel_Fwd_In_Bckwd.txt"))
    assert fib.model_parallel_group == 4
    assert fib.header_args[2:] == (
        "checkpoints:",
        "2",
        "2",
        "11",
        "checkpoint_initiates:",
        "2",
        "19",
        "10",
    )


@needs_reference
@pytest.mark.parametrize("name", SUPPORTED)
def test_write_then_read_round_trips_and_reproduces_the_file(name: str, tmp_path: Path) -> None:
    original = read_astra_workload(ref(name))
    out = tmp_path / name
    write_astra_workload(original, out)
    again = read_astra_workload(out)
    assert again.layers == original.layers
    assert (again.name, again.parallelism, again.bottom_layers) == (
        original.name,
        original.parallelism,
        original.bottom_layers,
    )

    # Token for token the same as the published file (whitespace and line ends aside).
    def tokens(p: Path) -> list[list[str]]:
        return [line.split() for line in p.read_text().splitlines() if line.strip()]

    assert tokens(out) == tokens(ref(name))


# --- format details --------------------------------------------------------------------------

ROW = "conv1\t-1\t100\tNONE\t0\t200\tNONE\t0\t300\tALLREDUCE\t4096\t50"


def write(tmp_path: Path, *lines: str, name: str = "w.txt", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes(end.join(lines).encode() + end.encode())
    return path


def test_spaces_tabs_crlf_and_blank_lines_are_accepted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "DATA\t\t\t",
        "",
        "2\t\t",
        "a  -1 100 NONE 0   200 NONE 0 300  ALLREDUCE 4096 50",
        "",
        "  b\t-1\t\t1\tNONE\t\t0\t2\tNONE\t0\t3\tREDUCESCATTER\t8\t0  ",
        end="\r\n",
    )
    w = read_astra_workload(path)
    assert [layer.name for layer in w.layers] == ["a", "b"]
    assert w.layers[1].weight_grad.comm == Comm("reduce-scatter", 8, None)


def test_clock_converts_cycles_to_seconds(tmp_path: Path) -> None:
    path = write(tmp_path, "DATA", "1", ROW)
    w = read_astra_workload(path, clock_hz=2e9)
    layer = w.layers[0]
    assert layer.forward.compute.duration == pytest.approx(50e-9)
    assert layer.weight_grad.compute.duration == pytest.approx(150e-9)
    assert layer.update_time == pytest.approx(25e-9)
    out = tmp_path / "out.txt"
    write_astra_workload(w, out, clock_hz=2e9)
    assert out.read_text().splitlines()[2].split() == ROW.split()


def test_forward_collectives_of_a_data_workload_span_no_dimension(tmp_path: Path) -> None:
    # ASTRA-sim 1.0 issues them over no dimension (an inactive data set that moves no bytes).
    path = write(tmp_path, "DATA", "1", "l -1 1 ALLGATHER 64 1 ALLTOALL 32 1 ALLREDUCE 16 0")
    layer = read_astra_workload(path).layers[0]
    assert layer.forward.comm == Comm("all-gather", 64, ())
    assert layer.input_grad.comm == Comm("all-to-all", 32, ())
    assert layer.weight_grad.comm == Comm("all-reduce", 16, None)


# --- bad input: every error names the file, the line and the field ----------------------------


def error_of(path: Path, **kwargs: float) -> str:
    with pytest.raises(WorkloadError) as info:
        read_astra_workload(path, **kwargs)
    return str(info.value)


BAD_CASES = {
    "wrong column count": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 4096"],
        3,
        "columns",
        "expected 12 whitespace-separated columns (name, dependency, then compute cycles, "
        "comm type, comm size for each of forward, input-gradient and weight-gradient, then "
        "update cycles), got 11",
    ),
    "unknown collective type": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 BROADCAST 8 300 ALLREDUCE 4096 50"],
        3,
        "ig_comm_type",
        "unknown collective type 'BROADCAST' "
        "(expected one of NONE, ALLREDUCE, ALLGATHER, ALLTOALL, REDUCESCATTER)",
    ),
    "combined ALLREDUCEALLTOALL": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCEALLTOALL 4096 50"],
        3,
        "wg_comm_type",
        "unknown collective type 'ALLREDUCEALLTOALL' "
        "(expected one of NONE, ALLREDUCE, ALLGATHER, ALLTOALL, REDUCESCATTER); "
        "ASTRA-sim's combined ALLREDUCEALLTOALL is not supported",
    ),
    "lower-case collective type": (
        ["DATA", "1", "conv1 -1 100 allreduce 8 200 NONE 0 300 NONE 0 50"],
        3,
        "fwd_comm_type",
        "unknown collective type 'allreduce' "
        "(expected one of NONE, ALLREDUCE, ALLGATHER, ALLTOALL, REDUCESCATTER)",
    ),
    "negative compute time": (
        ["DATA", "2", ROW, "conv2 -1 100 NONE 0 -200 NONE 0 300 ALLREDUCE 4096 50"],
        4,
        "ig_compute_time",
        "must not be negative, got -200",
    ),
    "negative size": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE -4096 50"],
        3,
        "wg_comm_size",
        "must not be negative, got -4096",
    ),
    "negative update time": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 4096 -1"],
        3,
        "wg_update_time",
        "must not be negative, got -1",
    ),
    "layer with no name": (
        ["DATA", "1", "\t-1\t100\tNONE\t0\t200\tNONE\t0\t300\tALLREDUCE\t4096\t50"],
        3,
        "name",
        "layer has no name (the line starts with '-1')",
    ),
    "non-integer time": (
        ["DATA", "1", "conv1 -1 100.5 NONE 0 200 NONE 0 300 ALLREDUCE 4096 50"],
        3,
        "fwd_compute_time",
        "must be an integer, got '100.5'",
    ),
    "non-integer size": (
        ["DATA", "1", "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 4KiB 50"],
        3,
        "wg_comm_size",
        "must be an integer, got '4KiB'",
    ),
    "non-integer dependency": (
        ["DATA", "1", "conv1 x 100 NONE 0 200 NONE 0 300 ALLREDUCE 4096 50"],
        3,
        "dependency",
        "must be an integer, got 'x'",
    ),
    "non-integer layer count": (
        ["DATA", "two", ROW],
        2,
        "layer count",
        "must be an integer, got 'two'",
    ),
    "zero layer count": (["DATA", "0"], 2, "layer count", "must be at least 1, got 0"),
    "layer count above the lines": (
        ["DATA", "3", ROW, ROW.replace("conv1", "conv2")],
        2,
        "layer count",
        "declares 3 layers but only 2 layer lines follow",
    ),
    "layer count below the lines": (
        ["DATA", "1", ROW, ROW.replace("conv1", "conv2")],
        2,
        "layer count",
        "declares 1 layers but 2 layer lines follow (the first extra one is line 4)",
    ),
    "missing layer count": (
        ["DATA"],
        2,
        "layer count",
        "missing; expected the number of layers",
    ),
    "unknown loop type": (
        ["PIPELINE", "1", ROW],
        1,
        "training loop",
        "unknown training loop 'PIPELINE' (known: DATA, MICRO, HYBRID_DLRM, "
        "HYBRID_DLRM_ENHANCED, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER, "
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_CUSTOMIZED, DISTRIBUTED_INFERENCE)",
    ),
    "DATA with an argument": (
        ["DATA 4", "1", ROW],
        1,
        "training loop",
        "DATA takes no arguments, got '4'",
    ),
    "HYBRID_DLRM without its bottom layer": (
        ["HYBRID_DLRM", "1", ROW],
        1,
        "last bottom layer",
        "HYBRID_DLRM needs the index of the last bottom-MLP layer after it",
    ),
    "HYBRID_DLRM bottom layer not an integer": (
        ["HYBRID_DLRM\tfour", "1", ROW],
        1,
        "last bottom layer",
        "must be an integer, got 'four'",
    ),
    "HYBRID_DLRM bottom layer beyond the layers": (
        ["HYBRID_DLRM 1", "1", ROW],
        1,
        "last bottom layer",
        "must be a layer index below 1, got 1",
    ),
    "NONE with a size": (
        ["DATA", "1", "conv1 -1 100 NONE 64 200 NONE 0 300 ALLREDUCE 4096 50"],
        3,
        "fwd_comm_size",
        "must be 0 when the comm type is NONE, got 64",
    ),
    "repeated layer name": (
        ["DATA", "2", ROW, ROW],
        4,
        "name",
        "layer name 'conv1' repeats (first on line 3)",
    ),
    "unknown per-layer parallelism": (
        ["HYBRID_CUSTOMIZED", "1", ROW + "\tPIPELINE"],
        3,
        "layer parallelism",
        "unknown parallelism 'PIPELINE' (known: DATA, MICRO, HYBRID_DLRM, HYBRID_DLRM_ENHANCED, "
        "MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER, "
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_CUSTOMIZED, DISTRIBUTED_INFERENCE)",
    ),
    "transformer without its group": (
        ["HYBRID_TRANSFORMER", "1", ROW],
        1,
        "model_parallel_NPU_group",
        "HYBRID_TRANSFORMER needs 'model_parallel_NPU_group: <n>' after it",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_error_names_file_line_and_field(case: str, tmp_path: Path) -> None:
    lines, line, field, message = BAD_CASES[case]
    path = write(tmp_path, *lines, name="bad_workload.txt")
    with pytest.raises(WorkloadError) as info:
        read_astra_workload(path)
    assert str(info.value) == f"{path}:{line}: {field}: {message}"
    assert "bad_workload.txt" in str(info.value)
    assert info.value.location == f"{path}:{line}"
    assert info.value.field == field


@pytest.mark.parametrize("content", [b"", b"\n\n  \t\r\n"])
def test_empty_file_is_an_error_at_line_1(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    assert error_of(path) == (
        f"{path}:1: training loop: the file is empty; expected the training loop"
    )


def test_missing_file_is_a_workload_error(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.txt"
    assert error_of(path) == f"{path}: no such workload file"


def test_binary_file_is_a_workload_error(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(b"DATA\n\xff\xfe\n")
    assert error_of(path).startswith(f"{path}: not a text workload file (not UTF-8")


@pytest.mark.parametrize("clock", [0.0, -1e9, float("nan"), float("inf")])
def test_clock_must_be_positive_and_finite(clock: float, tmp_path: Path) -> None:
    path = write(tmp_path, "DATA", "1", ROW)
    assert error_of(path, clock_hz=clock).startswith("clock_hz: must be a positive finite")


# --- the writer's refusals ---------------------------------------------------------------------


def _workload(*layers: Layer, **kwargs: object) -> Workload:
    return Workload(name="w", layers=layers, **kwargs)  # type: ignore[arg-type]


def write_error(w: Workload, tmp_path: Path) -> str:
    with pytest.raises(WorkloadError) as info:
        write_astra_workload(w, tmp_path / "out.txt")
    return str(info.value)


def test_writer_rejects_roofline_compute_without_a_duration(tmp_path: Path) -> None:
    w = _workload(Layer("fc", forward=Pass(Compute(flops=1e9, hbm_bytes=1e6))))
    assert write_error(w, tmp_path) == (
        "w: fc.forward.compute: has roofline compute (FLOPs/HBM bytes) but no duration; "
        "the ASTRA-sim 1.0 format needs fixed times"
    )


def test_writer_writes_empty_compute_as_zero_cycles(tmp_path: Path) -> None:
    w = _workload(Layer("fc", weight_grad=Pass(comms=(Comm("all-reduce", 8),))))
    write_astra_workload(w, tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == (
        "DATA\n1\nfc\t-1\t0\tNONE\t0\t0\tNONE\t0\t0\tALLREDUCE\t8\t0\n"
    )


def test_writer_rejects_dimensions_the_format_cannot_express(tmp_path: Path) -> None:
    w = _workload(
        Layer("fc", weight_grad=Pass(Compute(duration=1e-6), (Comm("all-reduce", 8, (0,)),)))
    )
    assert write_error(w, tmp_path) == (
        "w: fc.weight_grad.comm.dims: spans dimensions (0,), but a DATA workload implies None "
        "here (None = all)"
    )


def test_writer_rejects_names_with_whitespace(tmp_path: Path) -> None:
    w = _workload(Layer("conv 1"))
    assert write_error(w, tmp_path) == (
        "w: layers[0].name: must be non-empty and free of whitespace to be written, got 'conv 1'"
    )


def test_writer_needs_bottom_layers_for_hybrid_dlrm(tmp_path: Path) -> None:
    w = _workload(Layer("emb"), parallelism="hybrid_dlrm")
    assert (
        write_error(w, tmp_path) == "w: bottom_layers: a hybrid_dlrm workload needs bottom_layers"
    )


# --- load_workload -----------------------------------------------------------------------------


def test_load_workload_reads_a_txt_file(tmp_path: Path) -> None:
    path = write(tmp_path, "MICRO", "1", ROW)
    w = load_workload(str(path))
    assert w.parallelism == "micro"
    assert load_workload(path).layers == w.layers  # a PathLike works too


def test_load_workload_reports_a_missing_txt_file(tmp_path: Path) -> None:
    path = tmp_path / "typo.txt"
    with pytest.raises(WorkloadError, match="no such workload file"):
        load_workload(str(path))


@pytest.mark.parametrize(("option", "value"), [("batch_per_npu", 32), ("precision", "bf16")])
def test_load_workload_rejects_zoo_options_for_files(
    option: str, value: int | str, tmp_path: Path
) -> None:
    path = write(tmp_path, "DATA", "1", ROW)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path), **{option: value})
    assert str(info.value) == (
        f"{path}: {option}: applies to zoo models only; a workload file fixes its own compute "
        f"times and sizes, got {value!r}"
    )


def test_load_workload_points_chakra_traces_elsewhere() -> None:
    with pytest.raises(WorkloadError, match=r"trace\.0\.et: Chakra execution traces"):
        load_workload("trace.0.et")


def test_load_workload_passes_names_and_options_to_the_zoo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, int | None, str | None]] = []
    sentinel = _workload(Layer("x"))

    def load_zoo(name: str, *, batch_per_npu: int | None = None, precision: str | None = None):
        calls.append((name, batch_per_npu, precision))
        return sentinel

    fake = types.ModuleType("acesim.workload.zoo")
    fake.load_zoo = load_zoo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "acesim.workload.zoo", fake)
    assert load_workload("resnet50", batch_per_npu=32, precision="bf16") is sentinel
    assert calls == [("resnet50", 32, "bf16")]


def test_load_workload_without_a_zoo_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "acesim.workload.zoo", None)  # import fails
    with pytest.raises(WorkloadError) as info:
        load_workload("resnet50")
    assert str(info.value) == (
        "resnet50: not a workload file, and the model zoo is not available in this installation"
    )


def test_load_workload_treats_a_name_with_a_separator_as_a_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such workload file"):
        load_workload(str(tmp_path / "workloads" / "resnet"))
