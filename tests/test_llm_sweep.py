"""Sweeps over the parallel configuration of an LLM run (issue 14): one row per point, the
configurations that do not divide or fit recorded as refused with their reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acesim.errors import ConfigError
from acesim.sweep import load_results, load_spec, run_sweep


def _spec(**grid: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "llm-parallel",
        "kind": "llm",
        "base": {
            "system": "h100-nvswitch-8",
            "model": "llama3-8b",
            "global_batch": 2,
            "seq": 512,
            "nodes": 1,
        },
    }
    if grid:
        spec["grid"] = grid
    else:  # the global batch advanced with the configuration (DP 1, 1, 1 and 8)
        spec["zip"] = {
            "parallel": ["tp=8", "tp=2,pp=4", "tp=3", "tp=1,zero=0"],
            "global_batch": [2, 2, 2, 8],
        }
    return spec


def test_a_parallel_axis_runs_the_configurations_that_fit_and_records_the_rest(
    tmp_path: Path,
) -> None:
    db = tmp_path / "llm.sqlite"
    summary = run_sweep(_spec(), db, workers=0)
    # the two that do not divide or fit are refused (an answer, with its reason), not failed
    assert (summary.points, summary.ok, summary.refused, summary.failed) == (4, 2, 2, 0)
    df = load_results(db).set_index("parallel")
    ok = df[df["status"] == "ok"]
    assert set(ok.index) == {"tp=8", "tp=2,pp=4"}
    assert (ok["iteration_time"] > 0).all()
    assert (ok["mode"] == "composed").all()  # the default: composed
    assert ok.loc["tp=2,pp=4", "npus"] == 8
    assert ok.loc["tp=2,pp=4", "parallel_resolved"].startswith("tp=2,pp=4,cp=1")
    assert "dp=1," in ok.loc["tp=2,pp=4", "parallel_resolved"]  # dp=auto, resolved
    assert set(df[df["status"] == "refused"].index) == {"tp=3", "tp=1,zero=0"}
    refused = df.loc["tp=3", "error"]
    assert "parallel.tp" in refused and "attention heads" in refused
    assert "npu.hbm_capacity" in df.loc["tp=1,zero=0", "error"]
    assert "more than the 80 GiB" in df.loc["tp=1,zero=0", "error"]


def test_llm_spec_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="base.workload"):
        load_spec({"kind": "llm", "base": {"workload": {"name": "x"}}})
    bad = _spec(mode=["fast", "class"], parallel=["tp=8"])
    points = load_spec(bad).points()
    assert points[0].error is not None and "mode" in points[0].error
    assert points[1].ok
    no_model = load_spec(
        {"kind": "llm", "base": {"system": "h100-nvswitch-8"}, "grid": {"parallel": ["tp=8"]}}
    ).points()
    assert no_model[0].error is not None and "model" in no_model[0].error


def test_the_example_llm_sweep_resolves() -> None:
    spec = load_spec(Path(__file__).resolve().parents[1] / "examples" / "sweep_llm_parallel.toml")
    points = spec.points()
    assert spec.kind == "llm" and len(points) == 6
    assert [p.ok for p in points] == [True] * 5 + [False]


def test_refused_points_do_not_fail_the_sweep_command(tmp_path: Path) -> None:
    """A configuration that does not divide or fit is the sweep's answer for that point: the
    command exits 0, counting it apart from failures, and the metrics carry units."""
    import json

    from typer.testing import CliRunner

    from acesim.cli import app
    from acesim.sweep.store import read_units

    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec(parallel=["tp=8", "tp=3"])), encoding="utf-8")
    db = tmp_path / "s.sqlite"
    out = CliRunner().invoke(app, ["sweep", str(spec), "--db", str(db), "-j", "0"])
    assert out.exit_code == 0, out.output
    assert "1 ok, 1 refused, 0 failed" in out.stdout
    assert "point 1 refused" in out.output and "attention heads" in out.output
    units = read_units(db)
    assert units["mfu"] == "1" and units["tokens_per_s_per_gpu"] == "tokens/s"
    assert units["memory.total"] == "B" and units["exposed.tp"] == "s"
    assert units["bubble_time"] == "s" and units["hbm_capacity"] == "B"
    shown = CliRunner().invoke(app, ["results", str(db)])
    assert "1 refused, 0 failed" in " ".join(shown.stdout.split())
    assert "e+" not in shown.stdout  # numbers with units, not raw floats
