"""Presets: `extends`, `acesim presets show`, and the single-node resize warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config.presets import load_system, merge_documents, preset_names, system_document
from acesim.errors import ConfigError

runner = CliRunner()


def test_extends_merges_tables_and_replaces_other_values(tmp_path: Path) -> None:
    child = tmp_path / "mine.toml"
    child.write_text(
        'extends = "h100-nvswitch-8"\nname = "mine"\n[npu]\nhbm_bandwidth = "5 TB/s"\n',
        encoding="utf-8",
    )
    mine = load_system(child)
    h100 = load_system("h100-nvswitch-8")
    assert mine.name == "mine" and mine.npu.hbm_bandwidth == 5e12
    assert mine.npu.compute_units == h100.npu.compute_units  # kept from the parent
    assert mine.network == h100.network
    # Lists are replaced whole, tables merge key by key.
    merged = merge_documents({"a": {"x": 1, "y": [1, 2]}}, {"a": {"y": [3]}, "b": 2})
    assert merged == {"a": {"x": 1, "y": [3]}, "b": 2}


def test_the_h200_preset_is_the_h100_with_its_memory() -> None:
    h100, h200 = load_system("h100-nvswitch-8"), load_system("h200-nvswitch-8")
    assert h200.npu.hbm_bandwidth == 4.8e12 and h100.npu.hbm_bandwidth == 3.35e12
    assert h200.npu.compute_units == h100.npu.compute_units == 132
    assert h200.network == h100.network
    # the collective settings too, but for NVLS as NCCL 2.20.5 runs it (the H200 rows' version):
    # its buffer layout and the values fitted on the H200 rows
    nvls = {"nvls_layout", "nvls_efficiency", "nvls_loop_latency"}
    a, b = h100.collective.model_dump(), h200.collective.model_dump()
    differ = {k for k in a if a[k] != b[k]}
    assert differ == nvls
    assert h200.sources["npu.hbm_bandwidth"].note.startswith("H200")
    assert "network.dimensions[0].link_bandwidth" in h200.sources  # inherited


def test_extends_relative_to_the_file_and_cycles_refused(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text(
        json.dumps({"network": {"dimensions": [{"size": 4, "link_bandwidth": "10 GB/s"}]}}),
        encoding="utf-8",
    )
    (tmp_path / "child.toml").write_text('extends = "base.json"\nname = "c"\n', encoding="utf-8")
    assert load_system(tmp_path / "child.toml").network.total_npus == 4
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n', encoding="utf-8")
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="extends: the chain extends itself"):
        system_document(tmp_path / "a.toml")
    (tmp_path / "bad.toml").write_text("extends = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="extends: must name a preset or a system file"):
        system_document(tmp_path / "bad.toml")


def test_presets_show_prints_the_resolved_document_with_sources() -> None:
    out = runner.invoke(
        app,
        ["presets", "show", "h200-nvswitch-8", "--set", "npu.hbm_bandwidth=5 TB/s"],
        env={"COLUMNS": "200"},
    )
    assert out.exit_code == 0, out.output
    assert "hbm_bandwidth: 5 TB/s" in out.output
    assert "compute_units: 132" in out.output  # merged from h100-nvswitch-8
    assert "extends" not in out.output.split("sources")[0]
    assert "H200 SXM datasheet" in out.output
    listing = runner.invoke(app, ["presets"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0 and "h100-nvswitch-8" in listing.output


def test_resizing_a_single_node_preset_warns(capsys: pytest.CaptureFixture[str]) -> None:
    from acesim.commands.cases import cli_case

    # (ResNet-50's default FP32 has no matrix peak on the H100 preset: run it in AMP.)
    cli_case("h100-nvswitch-8", "resnet50", npus=16, precision="amp_bf16")
    err = capsys.readouterr().err
    assert "h100-nvswitch-8 is one switch of 8 NPUs" in err and "not 2 nodes" in err


@pytest.mark.parametrize(
    ("alias", "preset"),
    [
        ("dgx-h100", "h100-nvswitch-8"),
        ("dgx-b200", "b200-nvswitch-8"),
        ("dgx-a100", "a100-nvswitch-8"),
    ],
)
def test_dgx_names_stand_for_the_node_presets(alias: str, preset: str) -> None:
    from acesim.config.resolve import resolve_system

    assert resolve_system(alias) == resolve_system(preset)
    assert resolve_system(alias, nodes=2).network.total_npus == 16


def test_presets_show_redirected_to_a_file_is_a_usable_system_file(tmp_path: Path) -> None:
    """`presets show NAME > f.yaml`: whole YAML lines at any terminal width, the sources in the
    document, nothing else on stdout; the file loads as the system it shows."""
    args = ["presets", "show", "h100-nvswitch-8", "--set", "npu.hbm_bandwidth=4 TB/s"]
    out = runner.invoke(app, [*args, "--nodes", "2"], env={"COLUMNS": "40"})
    assert out.exit_code == 0, out.output
    path = tmp_path / "shown.yaml"
    path.write_text(out.stdout, encoding="utf-8")
    shown = load_system(path)
    from acesim.config.resolve import resolve_system

    same = resolve_system("h100-nvswitch-8", overrides={"npu.hbm_bandwidth": "4 TB/s"}, nodes=2)
    assert shown == same
    assert shown.sources["npu.hbm_bandwidth"].kind == "override"


@pytest.mark.parametrize("name", preset_names())
def test_every_system_preset_sources_its_collective_queue(name: str) -> None:
    """How collectives queue at a GPU (chunks, chunks in flight per dimension, their order)
    decides which waits behind which: every shipped system says where its values come from
    (the GPU nodes' are assumptions, and say what they leave out)."""
    sources = load_system(name).sources
    for field in ("chunks", "active_chunks_per_dimension", "scheduling"):
        source = sources[f"collective.{field}"]
        assert source.kind in ("assumption", "astra-sim") and source.note, field
