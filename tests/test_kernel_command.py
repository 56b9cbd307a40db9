"""`acesim kernel`: one kernel's time on a system's NPU, and what bounds it."""

from __future__ import annotations

import json

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app

runner = CliRunner()


def test_a_gemm_and_a_stream_kernel_report_time_rates_bound_and_waves() -> None:
    result = runner.invoke(
        app,
        [
            "kernel",
            "-s",
            "h100-sxm-single",
            "--gemm",
            "8192",
            "--dtype",
            "fp8",
            "--stream",
            "dot",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["schema"] == "acesim.kernel/1" and payload["npu"] == "H100-SXM5-80GB"
    gemm, dot = payload["kernels"]
    assert gemm["bound"] == "compute" and gemm["blocks"] == 2048 and gemm["waves"] == 16
    assert gemm["flop_rate"] == pytest.approx(2 * 8192**3 / gemm["time"])
    assert dot["bound"] == "memory" and dot["flop_rate"] < 1e13


def test_the_table_says_how_each_kernel_was_tiled() -> None:
    result = runner.invoke(app, ["kernel", "-s", "v100-sxm2-single", "--gemm", "1024x512x256"])
    assert result.exit_code == 0, result.output
    assert "128x128" in result.stdout and "V100" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gemm", "12x"], "error: --gemm: expected MxNxK[:dtype] (positive integers), got '12x'"),
        (["--stream", "foo"], "error: --stream: must be one of copy, scale, add, triad, dot"),
        ([], "error: --gemm/--stream: give at least one kernel"),
        (["--gemm", "64", "--dtype", "fp4"], "error: --dtype: must be one of fp64"),
        (
            ["-s", "v100-sxm2-single", "--gemm", "64", "--dtype", "bf16"],
            "error: npu.matrix_flops.bf16: this NPU (V100-SXM2-32GB) lists no bf16",
        ),
    ],
)
def test_bad_input_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    line = cli_error(monkeypatch, capsys, "kernel", *args)
    assert line.startswith(message), line
