"""Results a user can trust on every input (issue 33): one regression test per item, from the
command line that showed it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import acesim
from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.errors import SimulationError

from clitools import cli_error

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
    system = resolve_system("ace-isca21").with_endpoint(
        "baseline", gather_hbm_bytes_per_byte=1e308
    )
    with pytest.raises(SimulationError, match="hbm_bytes_per_npu is not finite"):
        acesim.simulate_collective(system, "all-gather", "1MiB")


def test_the_dask_docs_say_the_scheduler_must_be_trusted() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
    text = docs.read_text(encoding="utf-8")
    assert "The scheduler must be trusted" in text and "tls://" in text
