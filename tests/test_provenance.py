"""Results record how they were made: the system's document, its extends chain, its NPU
preset and every override, in titles, JSON ``info``, trace metadata and the reproduction
report; an override replaces the source of the value it changes."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from acesim.cli import app
from acesim.config import load_system
from acesim.config.resolve import derive, resolve_system
from acesim.studies.reproduce import reproduce

ONE = ["-s", "mi300x-single", "--endpoint", "ideal", "-n", "1", "--warmup", "0"]


def test_overrides_are_recorded_on_the_resolved_system() -> None:
    system = resolve_system("ace-isca21", overrides={"endpoint.ace.sram": "16 MiB"})
    made = system.provenance
    assert made.origin == "ace-isca21"
    assert made.npu == "v100-sxm2"
    assert made.overrides == ("endpoint.ace.sram=16 MiB",)
    # the source of the changed value says what the run used, and what it replaced
    source = system.sources["endpoint.ace.sram"]
    assert source.kind == "override"
    assert "16 MiB" in source.note and "it was assumption" in source.note
    # a derived variant, and a second resolution, keep it (overrides accumulate)
    assert system.with_endpoint("baseline").provenance == made
    again = resolve_system(system, overrides={"collective.chunks": 8})
    assert again.provenance.overrides == ("endpoint.ace.sram=16 MiB", "collective.chunks=8")
    assert again.sources["collective.chunks"].kind == "override"
    assert load_system("ace-isca21").provenance.overrides == ()


def test_a_derived_system_keeps_provenance_and_sources_and_is_not_an_override() -> None:
    # derive is acesim turning a knob (a study's variant, a fit's trial, a forced algorithm):
    # the system it came from is what results echo, not a user's --set
    system = resolve_system("ace-isca21", overrides={"endpoint.ace.sram": "16 MiB"})
    derived = derive(system, {"npu.hbm_arbitration": "drf", "collective.chunks": 8})
    assert derived.npu.hbm_arbitration == "drf" and derived.collective.chunks == 8
    assert derived.provenance == system.provenance
    assert derived.sources == system.sources
    assert system.npu.hbm_arbitration != "drf"  # the original is left as it was
    assert derive(system, {}) == system


def test_the_extends_chain_is_recorded(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('extends = "h100-nvswitch-8"\n[npu]\nhbm_bandwidth = "4 TB/s"\n')
    mine = tmp_path / "mine.toml"
    mine.write_text('extends = "base.toml"\nname = "mine"\n')
    made = load_system(mine).provenance
    assert made.origin == str(mine)
    assert made.extends == ("base.toml", "h100-nvswitch-8")
    assert made.npu == "h100-sxm"
    assert made.describe() == "extends base.toml -> h100-nvswitch-8"


def test_run_json_and_title_show_each_override(tmp_path: Path) -> None:
    sets = ["--set", "npu.hbm_bandwidth=4 TB/s", "--set", "npu.kernels.latency=2 us"]
    trace = tmp_path / "t.json"
    out = CliRunner().invoke(app, ["run", *ONE, *sets, "--json", "--trace", str(trace)])
    assert out.exit_code == 0, out.output
    info = json.loads(out.stdout)["info"]
    assert info["provenance"]["overrides"] == [
        "npu.hbm_bandwidth=4 TB/s",
        "npu.kernels.latency=2 us",
    ]
    assert info["provenance"]["origin"] == "mi300x-single"
    meta = json.loads(trace.read_text(encoding="utf-8"))["metadata"]
    assert meta["provenance"] == info["provenance"]
    table = CliRunner().invoke(app, ["run", *ONE, *sets])
    assert table.exit_code == 0, table.output
    assert "mi300x-single (set npu.hbm_bandwidth=4 TB/s, npu.kernels.latency=2 us)" in " ".join(
        table.stdout.split()
    )


def test_collective_results_and_titles_show_overrides() -> None:
    args = [
        "collective",
        "-s",
        "h100-nvswitch-8",
        "--sizes",
        "1MiB",
        "--set",
        "collective.chunks=2",
    ]
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.stdout)["results"]
    assert result["provenance"]["overrides"] == ["collective.chunks=2"]
    table = CliRunner().invoke(app, args)
    assert "h100-nvswitch-8 (set collective.chunks=2)" in " ".join(table.stdout.split())


def test_reproduction_report_shows_an_override_in_its_assumptions(tmp_path: Path) -> None:
    system = resolve_system("ace-isca21", overrides={"endpoint.ace.sram": "16 MiB"})
    summary = reproduce(
        system,
        tmp_path,
        workloads=["dlrm"],
        npus=[16],
        workers=1,
        figures=False,
        sram=False,
        hbm_targets=False,
    )
    assert summary["provenance"]["overrides"] == ["endpoint.ace.sram=16 MiB"]
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    head, _, table = report.partition("## Assumptions")
    assert "`endpoint.ace.sram=16 MiB`" in head
    (row,) = [line for line in table.splitlines() if line.startswith("| `endpoint.ace.sram`")]
    assert "| override |" in row and "16 MiB" in row and "4 MiB" in row


def test_reproduce_assumptions_prints_the_table(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        app, ["reproduce", "ace-isca21", "--assumptions", "--set", "endpoint.ace.sram=16 MiB"]
    )
    assert out.exit_code == 0, out.output
    assert "OptionInfo" not in out.output
    assert "override" in out.stdout and "16 MiB" in out.stdout
