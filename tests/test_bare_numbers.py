"""A bare number where a unit was meant: refused where implausible for the field (a bandwidth
below 1 MB/s, a size below 1 KiB, a latency above 1 s, a compute rate below 1 GFLOP/s) with
the unit it probably meant, in system files, --set overrides and sweep axes; accepted with
--force (force=True in Python, force = true in a sweep spec)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config import load_system
from acesim.config.plausible import RULES
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError

ONE = ["-s", "mi300x-single", "--endpoint", "ideal", "-n", "1", "--warmup", "0"]


@pytest.mark.parametrize(
    "path,value,suggestion",
    [
        ("endpoint.ace.dma_bandwidth", 600, "'600 GB/s'"),
        ("npu.hbm_bandwidth", "900", "'900 GB/s'"),
        ("endpoint.ace.sram", 16, "'16 MiB'"),
        ("network.dimensions[0].link_latency", 500, "'500 us'"),
        ("npu.matrix_flops.fp16", 125, "'125 TFLOP/s'"),
    ],
)
def test_an_implausible_bare_override_is_refused_with_the_unit_meant(
    path: str, value: object, suggestion: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_system("ace-isca21", overrides={path: value})
    message = str(info.value)
    assert message.startswith(f"{path}: a bare number is in ")
    assert f"got {value!r}" in message and suggestion in message and "--force" in message
    assert "\n" not in message
    forced = resolve_system("ace-isca21", overrides={path: value}, force=True)
    assert forced.provenance.overrides == (f"{path}={value}",)


def test_numbers_with_units_and_plausible_bare_numbers_are_taken_as_written() -> None:
    cfg = resolve_system(
        "ace-isca21",
        overrides={
            "endpoint.ace.dma_bandwidth": "600 B/s",  # odd, but the unit says it was meant
            "npu.hbm_bandwidth": 9e11,
            "network.dimensions[0].link_latency": 5e-7,
        },
    )
    assert cfg.endpoint.settings("ace").dma_bandwidth == 600  # type: ignore[attr-defined]
    assert cfg.npu.hbm_bandwidth == 9e11


def test_rules_cover_the_bandwidth_size_time_and_compute_rate_kinds() -> None:
    assert set(RULES) == {"rate", "size", "time", "flop_rate"}


def test_a_system_file_with_a_bare_bandwidth_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('extends = "h100-nvswitch-8"\n[npu]\nhbm_bandwidth = 3350\n')
    with pytest.raises(ConfigError) as info:
        load_system(path)
    assert str(info.value).startswith(f"{path}: npu.hbm_bandwidth: a bare number is in B/s")
    assert load_system(path, force=True).npu.hbm_bandwidth == 3350


def test_the_cli_refuses_on_one_line_and_runs_with_force(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "run", *ONE, "--set", "npu.kernels.latency=2")
    assert "npu.kernels.latency: a bare number is in seconds and above 1 s" in line
    assert "'2 us' or '2 ns'" in line
    out = CliRunner().invoke(app, ["run", *ONE, "--set", "npu.kernels.latency=2", "--force"])
    assert out.exit_code == 0, out.output
    assert "min" in out.stdout or " h" in out.stdout  # a 2 s launch latency per kernel


def test_a_sweep_axis_of_bare_bandwidths_is_refused_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'kind = "collective"\n[base]\nsystem = "h100-nvswitch-8"\nsize = "1 MiB"\n'
        '[grid]\n"npu.hbm_bandwidth" = [450, 900, 1800]\n'
    )
    db = tmp_path / "r.sqlite"
    line = cli_error(monkeypatch, capsys, "sweep", str(spec), "--db", str(db))
    assert "npu.hbm_bandwidth" in line and "'450 GB/s'" in line
    assert not db.exists()
    spec.write_text("force = true\n" + spec.read_text())
    out = CliRunner().invoke(app, ["sweep", str(spec), "--db", str(db), "--workers", "1"])
    assert out.exit_code == 0, out.output


def test_the_python_api_takes_force_where_it_resolves_a_system() -> None:
    from acesim.runs.case import make_case

    table = {
        "npu": {"hbm_bandwidth": 900},  # meant 900 GB/s
        "network": {"dimensions": [{"kind": "ring", "size": 4, "link_bandwidth": "50 GB/s"}]},
    }
    with pytest.raises(ConfigError, match="npu.hbm_bandwidth: a bare number is in B/s"):
        make_case(table, "resnet50", precision="fp32")
    case = make_case(table, "resnet50", precision="fp32", force=True)
    assert case.system.npu.hbm_bandwidth == 900
