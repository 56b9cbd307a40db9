"""NPU presets (datasheet peaks, `[npu] extends`), node presets built on them, `--nodes` and the
single-NPU system."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim import simulate_collective
from acesim.cli import app
from acesim.config import (
    load_npu_preset,
    load_system,
    npu_preset_names,
    preset_names,
    single_npu_system,
)
from acesim.config.resolve import resolve_system
from acesim.config.system import KernelModelConfig
from acesim.errors import ConfigError
from acesim.runs.case import make_case

runner = CliRunner()
T = 1e12

NPU_PRESETS = ["a100-sxm", "b200", "gb200", "h100-sxm", "h200-sxm", "mi300x", "v100-sxm2"]


def test_the_npu_presets_are_the_seven_accelerators() -> None:
    assert npu_preset_names() == NPU_PRESETS
    assert not set(NPU_PRESETS) & set(preset_names())  # one name, one kind of preset


@pytest.mark.parametrize("name", NPU_PRESETS)
def test_every_npu_preset_loads_with_a_source_for_every_value(name: str) -> None:
    preset = load_npu_preset(name)
    assert preset.description and preset.npu.name
    for field in ("compute_units", "matrix_flops", "vector_flops", "hbm_bandwidth"):
        assert preset.sources[f"npu.{field}"].kind in ("datasheet", "public-measurement")
    for field in ("hbm_capacity", *(f"kernels.{k}" for k in KernelModelConfig.model_fields)):
        assert f"npu.{field}" in preset.sources
    # The kernel model's parameters are fitted on the corpus fit rows (kind "fit") or carried
    # from another NPU's fit by a transfer rule (tests/test_fit.py checks the fitted values,
    # tests/test_fit_labels.py the labels and the transfers).
    kernels = preset.npu.kernels
    for field in ("gemm_efficiency", "hbm_efficiency", "write_penalty", "latency"):
        assert preset.sources[f"npu.kernels.{field}"].kind in ("fit", "transfer"), field
    gemm = kernels.gemm_efficiency
    assert all(0 < e < 1 for e in (gemm.values() if isinstance(gemm, dict) else [gemm]))
    assert 0 < kernels.hbm_efficiency < 1
    assert kernels.tile and kernels.unit_hbm_bandwidth == 55e9
    # Every datasheet figure cites its document; everything else says why it is assumed.
    for key, source in preset.sources.items():
        assert key.startswith("npu.") and source.note


@pytest.mark.parametrize(
    ("name", "units", "peaks", "vector", "hbm"),
    [
        ("v100-sxm2", 80, {"fp16": 125, "fp32": 15.7, "fp64": 7.8}, 15.7, 900e9),
        (
            "a100-sxm",
            108,
            {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
            19.5,
            2039e9,
        ),
        (
            "h100-sxm",
            132,
            {"fp64": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979},
            67,
            3.35e12,
        ),
        ("h200-sxm", 132, {"bf16": 989.5, "fp8": 1979}, 67, 4.8e12),
        ("b200", 148, {"fp64": 37, "tf32": 1100, "bf16": 2250, "fp8": 4500}, 75, 7.7e12),
        ("gb200", 152, {"fp64": 40, "tf32": 1250, "bf16": 2500, "fp8": 5000}, 80, 8e12),
        (
            "mi300x",
            304,
            {"fp64": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
            163.4,
            5.3e12,
        ),
    ],
)
def test_the_peaks_are_the_dense_datasheet_figures(
    name: str, units: int, peaks: dict[str, float], vector: float, hbm: float
) -> None:
    npu = load_npu_preset(name).npu
    assert npu.compute_units == units
    for dtype, tflops in peaks.items():
        assert npu.matrix_peak(dtype) == pytest.approx(tflops * T)
    assert npu.vector_flops == pytest.approx(vector * T)
    assert npu.hbm_bandwidth == pytest.approx(hbm)


def test_what_a_part_cannot_do_is_not_listed() -> None:
    v100 = load_npu_preset("v100-sxm2").npu
    assert set(v100.matrix_flops) == {"fp64", "fp32", "fp16"}  # Volta: FP16 tensor cores only
    assert "fp8" not in load_npu_preset("a100-sxm").npu.matrix_flops
    with pytest.raises(ConfigError, match="lists no bf16 matrix peak"):
        v100.matrix_peak("bf16")
    h100, h200 = load_npu_preset("h100-sxm").npu, load_npu_preset("h200-sxm").npu
    assert h200.matrix_flops == h100.matrix_flops and h200.compute_units == h100.compute_units


def test_a_system_extending_an_npu_preset_changes_fields_and_keeps_sources(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\n'
        '[npu]\nextends = "h100-sxm"\nhbm_bandwidth = "4 TB/s"\n'
        'matrix_flops = { fp8 = "2000 TFLOP/s" }\n'
        '[[network.dimensions]]\nsize = 4\nlink_bandwidth = "25 GB/s"\n'
        '[sources]\n"npu.hbm_bandwidth" = { kind = "assumption", note = "what if" }\n',
        encoding="utf-8",
    )
    mine, h100 = load_system(path), load_npu_preset("h100-sxm")
    assert mine.npu.hbm_bandwidth == 4e12 and mine.npu.compute_units == 132
    assert mine.npu.matrix_peak("fp8") == 2000 * T
    assert mine.npu.matrix_peak("bf16") == 989.5 * T  # tables merge key by key
    assert mine.npu.kernels == h100.npu.kernels
    assert mine.sources["npu.hbm_bandwidth"].note == "what if"  # its own source wins
    assert mine.sources["npu.compute_units"] == h100.sources["npu.compute_units"]
    # A changed value without a source of its own loses the preset's note about the old one.
    assert "npu.matrix_flops" not in mine.sources


def test_the_node_presets_use_the_npu_presets() -> None:
    for node, npu in (
        ("a100-nvswitch-8", "a100-sxm"),
        ("h100-nvswitch-8", "h100-sxm"),
        ("h200-nvswitch-8", "h200-sxm"),
        ("b200-nvswitch-8", "b200"),
        ("gb200-nvl72", "gb200"),
        ("mi300x-8", "mi300x"),
    ):
        system, preset = load_system(node), load_npu_preset(npu)
        # the GPU's figures are the NPU preset's; the host memory behind it is the node's (a
        # DGX's CPUs and DDR, GB200's Grace in the superchip's own preset), with its source
        host = system.npu.host_memory_bandwidth
        assert (
            system.npu.model_copy(
                update={"host_memory_bandwidth": preset.npu.host_memory_bandwidth}
            )
            == preset.npu
        ), node
        if host != preset.npu.host_memory_bandwidth:
            assert host is not None and "npu.host_memory_bandwidth" in system.sources, node
        assert system.sources["npu.matrix_flops"] == preset.sources["npu.matrix_flops"]
        assert system.scale_out is not None and system.scale_out.link_bandwidth > 0
    b200, nvl72, mi300x = (load_system(n) for n in ("b200-nvswitch-8", "gb200-nvl72", "mi300x-8"))
    assert [(d.links_per_npu, d.link_bandwidth) for d in b200.network.dimensions] == [(18, 50e9)]
    assert nvl72.network.total_npus == 72 and nvl72.network.dimensions[0].kind == "switch"
    dim = mi300x.network.dimensions[0]
    assert (dim.kind, dim.size, dim.links_per_npu, dim.link_bandwidth) == (
        "fully_connected",
        8,
        7,
        64e9,
    )


def test_an_unknown_npu_preset_is_one_line_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[npu]\nextends = "h100"\n[[network.dimensions]]\nsize = 2\nlink_bandwidth = 1e9\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_system(path)
    assert str(info.value) == (
        f"{path}: npu.extends: unknown NPU preset, got 'h100' (did you mean 'h100-sxm'?)"
    )
    with pytest.raises(ConfigError, match="h100-sxm is an NPU preset"):
        load_system("h100-sxm")


# -- --nodes ------------------------------------------------------------------------------------


def test_nodes_appends_the_scale_out_dimension() -> None:
    system = resolve_system("h100-nvswitch-8", nodes=4)
    assert system.network.total_npus == 32 and system.network.shape == (8, 4)
    last = system.network.dimensions[-1]
    assert (last.name, last.kind, last.link_bandwidth, last.links_per_npu) == (
        "scaleout",
        "switch",
        50e9,
        1,
    )
    assert system.sources["network.dimensions[1].link_bandwidth"].kind == "datasheet"
    assert resolve_system("h100-nvswitch-8", nodes=1) == load_system("h100-nvswitch-8")
    case = make_case("a100-nvswitch-8", "resnet50", nodes=2)
    assert case.system.network.shape == (8, 2) and case.options.nodes == 2
    assert resolve_system("a100-nvswitch-8", nodes=2).network.dimensions[1].link_bandwidth == 25e9


@pytest.mark.parametrize(
    ("system", "kwargs", "message"),
    [
        ("h100-nvswitch-8", {"nodes": 0}, "nodes: must be a whole number of at least 1, got 0"),
        (
            "ace-isca21",
            {"nodes": 2},
            "nodes: needs a [scale_out] table in the system (how its nodes are joined); "
            "ace-isca21 has none, got 2",
        ),
        (
            "h100-nvswitch-8",
            {"nodes": 2, "npus": 16},
            "nodes: give either nodes or npus, not both (nodes keeps the node's shape), got 2",
        ),
    ],
)
def test_bad_nodes_are_one_line_errors(system: str, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_system(system, **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_a_bad_scale_out_value_names_its_field() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_system("h100-nvswitch-8", overrides={"scale_out.link_bandwidth": -1}, nodes=2)
    assert str(info.value) == "scale_out.link_bandwidth: must be positive, got -1 B/s"
    with pytest.raises(ConfigError, match="scale_out.link_bandwith: unknown key"):
        resolve_system("h100-nvswitch-8", overrides={"scale_out.link_bandwith": "1 GB/s"})


def test_a_table_may_extend_an_npu_preset() -> None:
    table = {
        "npu": {"extends": "b200", "compute_units": 100},
        "network": {"dimensions": [{"size": 2, "link_bandwidth": 1e9}]},
    }
    system = resolve_system(table)
    assert system.npu.name == "B200-HGX-180GB" and system.npu.compute_units == 100
    assert "npu.compute_units" not in system.sources and "npu.hbm_bandwidth" in system.sources


def test_a_scaled_out_system_is_not_scaled_out_again() -> None:
    twice = resolve_system("h100-nvswitch-8", nodes=2)
    with pytest.raises(ConfigError, match="already has a dimension named 'scaleout'"):
        resolve_system(twice, nodes=2)


def test_acesim_collective_runs_on_two_nodes() -> None:
    out = runner.invoke(
        app,
        ["collective", "--system", "h100-nvswitch-8", "--nodes", "2", "--sizes", "64MiB"],
        env={"COLUMNS": "200"},
    )
    assert out.exit_code == 0, out.output
    assert "16 NPUs" in out.output


def test_acesim_run_on_nodes_and_its_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = runner.invoke(
        app,
        [
            "run",
            "-s",
            "b200-nvswitch-8",
            "--nodes",
            "2",
            "-n",
            "1",
            "--warmup",
            "0",
            "--endpoint",
            "ideal",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert '"npus": 16' in out.output
    assert cli_error(monkeypatch, capsys, "run", "--nodes", "0") == (
        "error: --nodes: must be at least 1, got 0"
    )
    assert cli_error(monkeypatch, capsys, "collective", "--nodes", "2") == (
        "error: --nodes: needs a [scale_out] table in the system (how its nodes are joined); "
        "ace-isca21 has none, got 2"
    )
    assert cli_error(
        monkeypatch, capsys, "run", "-s", "h100-nvswitch-8", "--nodes", "2", "--npus", "16"
    ).startswith("error: --nodes: give either --nodes or --npus, not both")


# -- one NPU alone ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NPU_PRESETS)
def test_single_npu_system_is_one_npu_that_sends_nothing(name: str) -> None:
    system = single_npu_system(name)
    assert system.name == f"{name}-single" and system.network.total_npus == 1
    assert system.npu == load_npu_preset(name).npu
    assert simulate_collective(system, "all-reduce", 1 << 20).time == 0.0
    assert load_system(f"{name}-single") == system  # the same system by name


def test_single_npu_system_of_an_unknown_preset() -> None:
    with pytest.raises(ConfigError, match=r"npu preset: unknown NPU preset, got 'h300'"):
        single_npu_system("h300")


def test_presets_lists_and_shows_npu_presets() -> None:
    listing = runner.invoke(app, ["presets"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0, listing.output
    assert "NPU presets" in listing.output
    for name in NPU_PRESETS:
        assert name in listing.output
    shown = runner.invoke(app, ["presets", "show", "mi300x"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "compute_units: 304" in shown.output and "AMD Instinct MI300X datasheet" in shown.output
    nodes = runner.invoke(
        app, ["presets", "show", "h100-nvswitch-8", "--nodes", "4"], env={"COLUMNS": "200"}
    )
    assert nodes.exit_code == 0, nodes.output
    assert "name: scaleout" in nodes.output and "size: 4" in nodes.output
