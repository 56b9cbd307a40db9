"""`acesim overlap` and simulate_collective(compute_kernels=...)."""

from __future__ import annotations

import json

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim import simulate_collective
from acesim.cli import app
from acesim.commands.common import parse_gemm
from acesim.commands.overlap import overlap
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError
from acesim.hardware.kernels import Gemm, Roofline

runner = CliRunner()
SYSTEM = "h100-nvswitch-8"
ARGS = ["overlap", "-s", SYSTEM, "--gemm", "8192x8192x8192:fp16", "--op", "all-gather"]


def test_serial_is_the_sum_of_the_times_alone() -> None:
    cfg = resolve_system(SYSTEM)
    gemm = parse_gemm("8192x8192x8192:fp16")
    for kind in ("baseline", "copy_engine", "ideal"):
        row = overlap(cfg, gemm, "all-gather", 64 * 2**20, kind)
        assert row["serial_time"] == row["gemm_time_alone"] + row["collective_time_alone"]
        alone = simulate_collective(cfg, "all-gather", 64 * 2**20, endpoint=kind).time
        assert row["collective_time_alone"] == pytest.approx(alone, rel=1e-12)
        assert row["overlapped_time"] >= max(row["gemm_time_alone"], row["collective_time_alone"])
        assert row["overlapped_time"] <= row["serial_time"] * (1 + 1e-9) or kind == "baseline"


def test_copy_engine_does_not_slow_the_gemm() -> None:
    cfg = resolve_system(SYSTEM)
    gemm = parse_gemm("8192x8192x8192:fp16")
    ce = overlap(cfg, gemm, "all-gather", 64 * 2**20, "copy_engine")
    base = overlap(cfg, gemm, "all-gather", 64 * 2**20, "baseline")
    assert ce["gemm_slowdown"] < base["gemm_slowdown"]


def test_compute_kernels_match_the_old_compute_option() -> None:
    old = simulate_collective(SYSTEM, "all-reduce", 2**24, compute=(1e12, 1e9))
    new = simulate_collective(SYSTEM, "all-reduce", 2**24, compute_kernels=[Roofline(1e12, 1e9)])
    assert old.compute == new.compute and old.time == new.time
    with pytest.raises(ConfigError, match="compute_kernels"):
        simulate_collective(
            SYSTEM, "all-reduce", 2**24, compute=(1.0, 1.0), compute_kernels=[Gemm(8, 8, 8)]
        )


def test_the_command_prints_a_table_and_json() -> None:
    out = runner.invoke(app, [*ARGS, "--size", "64MiB"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "baseline" in out.output and "copy_engine" in out.output and "serial" in out.output
    js = runner.invoke(app, [*ARGS, "--size", "64MiB", "--json"])
    assert js.exit_code == 0, js.output
    data = json.loads(js.output)
    assert data["schema"] == "acesim.overlap/1"
    for row in data["results"]:
        assert row["serial_time"] == row["gemm_time_alone"] + row["collective_time_alone"]
    assert [r["endpoint"] for r in data["results"]] == ["baseline", "copy_engine"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--gemm", "8x8x"], "--gemm"),
        (["--gemm", "8192:fp99"], "--gemm"),
        (["--op", "all-gathr"], "--op"),
        (["--size", "-1"], "--size"),
        (["--size", "lots"], "--size"),
        (["--endpoints", "baseline,copy_engin"], "--endpoints"),
        (["--endpoints", ","], "--endpoints"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(
    args: list[str],
    option: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = cli_error(monkeypatch, capsys, "overlap", *args)
    assert option in line


def test_the_default_endpoints_leave_copy_engine_out_on_mi300x_and_say_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["overlap", "-s", "mi300x-8", "--gemm", "1024x1024x1024:fp16", "--size", "1MiB"]
    js = runner.invoke(app, [*args, "--json"])
    assert js.exit_code == 0, js.output
    doc = json.loads(js.stdout)
    assert [r["endpoint"] for r in doc["results"]] == ["baseline"]
    assert "states no [endpoint.copy_engine] table" in doc["left_out"]["copy_engine"]
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert "note: copy_engine left out of the default endpoints" in table.output
    # asked for by name, it is not left out: its refusal is the error
    line = cli_error(monkeypatch, capsys, *args, "--endpoints", "baseline,copy_engine")
    assert line.startswith("error: endpoint.copy_engine: mi300x-8 (amd NPU mi300x) states no")
