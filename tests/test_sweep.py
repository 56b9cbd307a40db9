"""Design-space sweeps: spec expansion, validation, local/Dask execution, SQLite rows, resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import acesim
from acesim.errors import ConfigError, SweepError
from acesim.sweep import config_hash, load_results, load_spec, run_sweep
from acesim.sweep.store import ResultStore, read_table

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

METRICS = ["time", "algbw", "busbw", "network_bandwidth", "hbm_bandwidth", "hbm_bytes_per_npu"]


def small_spec(**extra: Any) -> dict[str, Any]:
    """8 fast collective points: 2 endpoints x 2 HBM bandwidths x 2 torus sizes."""
    spec: dict[str, Any] = {
        "name": "small",
        "kind": "collective",
        "base": {"system": "ace-isca21", "op": "all-reduce", "size": "16 MiB"},
        "grid": {
            "endpoint.kind": ["baseline", "ace"],
            "npu.hbm_bandwidth": ["450 GB/s", "1.6 TB/s"],
        },
        "zip": {"network.dimensions[1].size": [2, 4], "network.dimensions[2].size": [2, 4]},
    }
    spec.update(extra)
    return spec


def metric_rows(db: Path) -> dict[str, dict[str, Any]]:
    df = load_results(db)
    assert (df["status"] == "ok").all(), df["error"].tolist()
    return {row["hash"]: {m: row[m] for m in METRICS} for _, row in df.iterrows()}


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- spec ------------------------------------------------------------------------------------


def test_grid_times_zip_expands_in_order_with_last_axis_fastest() -> None:
    spec = load_spec(small_spec())
    combos = spec.combinations()
    assert len(spec) == len(combos) == 8
    assert combos[0] == {
        "endpoint.kind": "baseline",
        "npu.hbm_bandwidth": "450 GB/s",
        "network.dimensions[1].size": 2,
        "network.dimensions[2].size": 2,
    }
    assert combos[1]["network.dimensions[1].size"] == 4  # zip moves in lockstep, fastest
    assert combos[1]["network.dimensions[2].size"] == 4
    assert combos[-1]["endpoint.kind"] == "ace"


def test_toml_nested_keys_and_quoted_index_paths_are_both_axes(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path / "nested.toml",
        """
kind = "collective"
[base]
size = "1 MiB"
[grid]
npu.hbm_bandwidth = ["900 GB/s", "1.6 TB/s"]
"network.dimensions[0].size" = [2, 4]
""",
    )
    spec = load_spec(path)
    assert spec.name == "nested"
    assert [a.path for a in spec.axes] == ["npu.hbm_bandwidth", "network.dimensions[0].size"]
    points = spec.points()
    assert all(p.ok for p in points)
    assert points[0].columns == {"npu.hbm_bandwidth": 900e9, "network.dimensions[0].size": 2}


def test_hash_is_of_the_resolved_config_not_its_spelling() -> None:
    a = load_spec(small_spec()).points()[0]
    spelled = small_spec()
    spelled["grid"]["npu.hbm_bandwidth"] = [450e9, 1.6e12]
    b = load_spec(spelled).points()[0]
    assert a.hash == b.hash == config_hash(a.config)
    assert len(a.hash) == 64


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"npu.hbm_bandwdth": ["900 GB/s"]}, "did you mean 'hbm_bandwidth'"),
        ({"network.dimensions.size": [2]}, "network.dimensions"),
        ({"npu[0].compute_units": [2]}, "not a list"),
        ({"system.npu.compute_units": [2]}, "without the 'system.' prefix"),
        ({"workload.name": ["resnet50"]}, "'workload' is not a key"),
        ({"npu.hbm_bandwidth": "900 GB/s"}, "must be a list"),
        ({"npu.hbm_bandwidth": []}, "at least one value"),
    ],
)
def test_structural_errors_are_rejected_before_anything_runs(
    tmp_path: Path, grid: dict[str, Any], message: str
) -> None:
    db = tmp_path / "never.sqlite"
    with pytest.raises(ConfigError) as info:
        run_sweep(small_spec(grid=grid), db, workers=0)
    assert message in str(info.value)
    path = next(iter(grid))
    assert path in str(info.value)
    assert not db.exists()


def test_unequal_zip_lengths_and_unknown_spec_keys_are_rejected() -> None:
    with pytest.raises(ConfigError, match="equal lengths"):
        load_spec(small_spec(zip={"npu.compute_units": [8, 16], "npu.name": ["a"]}))
    with pytest.raises(ConfigError, match="did you mean 'grid'"):
        load_spec({"kind": "collective", "gird": {}})
    with pytest.raises(ConfigError, match="base.sise"):
        load_spec({"kind": "collective", "base": {"sise": 1}})


def test_run_spec_paths_are_checked_against_workload_and_run_options() -> None:
    spec = load_spec(EXAMPLES / "sweep_ace_vs_baseline.toml")
    assert spec.kind == "run" and len(spec) == 18
    assert all(p.ok for p in spec.points())
    with pytest.raises(ConfigError, match="did you mean 'iterations'"):
        load_spec({"kind": "run", "grid": {"run.iteration": [1, 2]}})
    points = load_spec({"kind": "run", "grid": {"run.iterations": [3, 0]}}).points()
    assert points[0].ok and not points[1].ok
    assert "run.iterations" in (points[1].error or "")


# --- execution and the database --------------------------------------------------------------


def test_local_processes_write_one_row_per_point_with_swept_columns(tmp_path: Path) -> None:
    db = tmp_path / "local.sqlite"
    summary = run_sweep(small_spec(), db, workers=2)
    assert (summary.points, summary.ran, summary.ok, summary.failed) == (8, 8, 8, 0)
    df = load_results(db)
    assert len(df) == 8 and df["hash"].is_unique
    assert sorted(df["npu.hbm_bandwidth"].unique()) == [450e9, 1.6e12]
    assert set(df["endpoint.kind"]) == {"baseline", "ace"}
    assert (df["version"] == __import__("acesim").__version__).all()
    assert (df["wall_time"] > 0).all()
    assert (df["busbw"] > 0).all()
    expected = {p.hash for p in load_spec(small_spec()).points()}
    assert set(df["hash"]) == expected
    again = run_sweep(small_spec(), db, workers=2)
    assert (again.skipped, again.ran) == (8, 0)


def test_dask_local_cluster_and_local_processes_give_identical_metrics(tmp_path: Path) -> None:
    run_sweep(small_spec(), tmp_path / "procs.sqlite", workers=2)
    run_sweep(small_spec(), tmp_path / "dask.sqlite", workers=2, dask="local")
    local = metric_rows(tmp_path / "procs.sqlite")
    dask = metric_rows(tmp_path / "dask.sqlite")
    assert len(local) == 8
    assert dask == local


def test_existing_dask_scheduler_address_runs_the_same_points(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        summary = run_sweep(small_spec(), tmp_path / "tcp.sqlite", dask=cluster.scheduler_address)
    assert summary.ok == 8
    run_sweep(small_spec(), tmp_path / "inline.sqlite", workers=0)
    assert metric_rows(tmp_path / "tcp.sqlite") == metric_rows(tmp_path / "inline.sqlite")


def test_unreachable_scheduler_is_a_sweep_error(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="--dask"):
        run_sweep(small_spec(), tmp_path / "x.sqlite", dask="somewhere")


def test_bad_value_in_one_cell_records_its_error_and_finishes_the_rest(tmp_path: Path) -> None:
    spec = small_spec(
        grid={
            "endpoint.kind": ["baseline", "ace"],
            "npu.hbm_bandwidth": ["900 GB/s", "-1 GB/s", "1.6 TB/s"],
        },
        zip={},
    )
    db = tmp_path / "bad.sqlite"
    summary = run_sweep(spec, db, workers=2)
    assert (summary.points, summary.ok, summary.refused, summary.failed) == (6, 4, 2, 0)
    df = load_results(db)
    bad = df[df["status"] == "refused"]
    assert len(bad) == 2 and set(bad["npu.hbm_bandwidth"]) == {"-1 GB/s"}
    assert all("npu.hbm_bandwidth" in e and "must be positive" in e for e in bad["error"])
    assert bad["busbw"].isna().all()
    assert (df[df["status"] == "ok"]["busbw"] > 0).all()
    with pytest.raises(ConfigError, match="npu.hbm_bandwidth"):
        run_sweep(spec, tmp_path / "strict.sqlite", strict=True)


def test_point_the_platform_rejects_is_invalid_before_anything_runs(tmp_path: Path) -> None:
    spec = small_spec(
        grid={"collective.algorithms.all-reduce": ["ring", "direct"]},  # direct needs a switch
        zip={},
    )
    points = load_spec(spec).points()
    assert [p.ok for p in points] == [True, False]
    assert "collective.algorithms.all-reduce: algorithm 'direct' needs a fully_connected" in (
        points[1].error or ""
    )


def test_point_failing_at_run_time_is_recorded_and_retried_on_request(tmp_path: Path) -> None:
    # Without splitting or spilling, a 16 MiB chunk does not fit ACE's 4 MiB SRAM: an error
    # only the run finds (when the chunk arrives).
    spec = small_spec(
        base={
            "system": "ace-isca21",
            "op": "all-reduce",
            "size": "64 MiB",
            "overrides": {
                "endpoint.kind": "ace",
                "endpoint.ace.mode": "store_and_forward",
                "endpoint.ace.allow_spill": False,
            },
        },
        grid={"endpoint.ace.split_chunks": [True, False]},
        zip={},
    )
    db = tmp_path / "runtime.sqlite"
    summary = run_sweep(spec, db, workers=0)
    assert (summary.ok, summary.failed) == (1, 1)
    df = load_results(db)
    error = df.loc[df["endpoint.ace.split_chunks"] == 0, "error"].item()
    assert error.startswith("ConfigError") and "endpoint.ace.sram" in error
    assert run_sweep(spec, db, workers=0).ran == 0
    assert run_sweep(spec, db, workers=0, retry_errors=True).ran == 1
    assert len(load_results(db)) == 2


def test_every_point_invalid_rejects_the_spec(tmp_path: Path) -> None:
    spec = small_spec(base={"system": "no-such-preset", "size": "1 MiB"})
    with pytest.raises(ConfigError, match="every point invalid"):
        run_sweep(spec, tmp_path / "x.sqlite", workers=0)


def test_metric_named_like_a_swept_column_is_stored_as_result_column(tmp_path: Path) -> None:
    db = tmp_path / "rename.sqlite"
    with ResultStore(db) as store:
        outcome = {"status": "ok", "metrics": {"endpoint": "ace", "status": "x", "t": 1.5}}
        store.write(
            hash="h1", sweep="s", point=0, kind="run", axes={"endpoint": "ace"}, outcome=outcome,
            config="{}",
        )  # fmt: skip
        store.write(
            hash="h2", sweep="s", point=1, kind="run", axes={"endpoint": "ideal"},
            outcome={"status": "ok", "metrics": {"t": 2.5, "new_metric": 7}}, config="{}",
        )  # fmt: skip
    names, rows, roles = read_table(db)
    assert roles == {
        "endpoint": "axis",
        "result.endpoint": "metric",
        "result.status": "metric",
        "t": "metric",
        "new_metric": "metric",
    }
    df = load_results(db)
    assert list(df["endpoint"]) == ["ace", "ideal"]
    assert list(df["t"]) == [1.5, 2.5]
    assert df["new_metric"].isna().tolist() == [True, False]  # columns appear as metrics do


def test_missing_results_database_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="does not exist"):
        load_results(tmp_path / "nope.sqlite")


# --- kill and resume -------------------------------------------------------------------------


def _rows(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM points").fetchone()[0])
    except sqlite3.Error:
        return 0


def _wait_gone(group: int, timeout: float = 10.0) -> None:
    """Wait until no live process of process group ``group`` is left (Linux: read from /proc;
    elsewhere a moment): a killed process still in a system call ends it first."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        time.sleep(0.5)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = False
        for stat in proc_dir.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            if fields[0] != "Z" and int(fields[2]) == group:  # state, then ppid, pgrp
                live = True
                break
        if not live:
            return
        time.sleep(0.02)


def test_sweep_killed_mid_run_resumes_with_every_point_exactly_once(tmp_path: Path) -> None:
    # 36 exact-mode points (every NPU simulated) on 32 NPUs (the torus at 4x4x2), about 0.2 CPU
    # s each: slow enough to kill mid-run (the last 30 take seconds on two workers), half the
    # cost of the preset's 64.
    spec_path = write_toml(
        tmp_path / "slow.toml",
        """
name = "slow"
kind = "collective"
[base]
system = "ace-isca21"
op = "all-reduce"
size = "8 MiB"
exact = true
[grid]
"endpoint.kind" = ["baseline", "ace", "ideal"]
"npu.hbm_bandwidth" = ["300 GB/s", "600 GB/s", "900 GB/s", "1.2 TB/s", "2.4 TB/s", "4.8 TB/s"]
"collective.chunks" = [2, 4]
"network.dimensions[2].size" = [2]
""",
    )
    db = tmp_path / "slow.sqlite"
    cmd = [sys.executable, "-m", "acesim.cli", "sweep", str(spec_path), "--db", str(db), "-j", "2"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 30
    try:
        while _rows(db) < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker processes, mid-write
        proc.wait()
        _wait_gone(proc.pid)  # a worker may still be finishing the write it was in
    before = load_results(db)
    assert 6 <= len(before) < 36, "the sweep should have been killed mid-run"
    summary = run_sweep(spec_path, db, workers=2)
    assert summary.skipped == len(before)
    assert summary.ran == 36 - len(before)
    after = load_results(db)
    expected = {p.hash for p in load_spec(spec_path).points()}
    assert len(after) == 36 and set(after["hash"]) == expected
    assert (after["status"] == "ok").all()
    kept = after.set_index("hash").loc[before["hash"], "finished_at"]
    assert list(kept) == list(before["finished_at"])  # finished points were not run again


# --- CLI -------------------------------------------------------------------------------------


def test_cli_sweep_results_csv_and_plot(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from acesim.cli import app

    runner = CliRunner()
    db = tmp_path / "cli.sqlite"
    spec = EXAMPLES / "sweep_collective_hbm.toml"
    out = runner.invoke(app, ["sweep", str(spec), "--db", str(db), "-j", "0"])
    assert out.exit_code == 0, out.output
    assert "24 ok, 0 refused, 0 failed" in out.output
    out = runner.invoke(app, ["results", str(db), "-c", "endpoint.kind,busbw", "-n", "3"])
    assert out.exit_code == 0 and "busbw" in out.output
    csv_path = tmp_path / "out.csv"
    out = runner.invoke(app, ["results", str(db), "--csv", str(csv_path)])
    assert out.exit_code == 0
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 25 and "npu.hbm_bandwidth" in lines[0]
    png = tmp_path / "fig.png"
    args = ["plot", str(db), "--x", "npu.hbm_bandwidth", "--y", "busbw", "--hue", "endpoint.kind"]
    out = runner.invoke(app, args + ["-o", str(png), "--where", "network.dimensions[1].size=4"])
    assert out.exit_code == 0, out.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "2 lines" in out.output


def test_cli_rejects_unknown_path_with_status_2(tmp_path: Path) -> None:
    spec = write_toml(
        tmp_path / "typo.toml",
        'kind = "collective"\n[base]\nsize = "1 MiB"\n[grid]\n"npu.hbm_bandwdth" = [1e9]\n',
    )
    proc = subprocess.run(
        [sys.executable, "-m", "acesim.cli", "sweep", str(spec), "--db", str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "npu.hbm_bandwdth" in proc.stderr and "hbm_bandwidth" in proc.stderr
    assert not (tmp_path / "t.db").exists()


# --- run points (acesim.runs.run_point) ------------------------------------------------


def test_run_points_record_training_metrics(tmp_path: Path) -> None:
    spec = {
        "name": "runs",
        "kind": "run",
        "base": {
            "system": "ace-isca21",
            "workload": {"name": "resnet50"},
            "run": {"iterations": 1, "warmup": 0},
        },
        "grid": {"endpoint.kind": ["baseline", "ace", "best_baseline"]},
        "zip": {"network.dimensions[1].size": [2], "network.dimensions[2].size": [2]},
    }
    db = tmp_path / "runs.sqlite"
    summary = run_sweep(spec, db, workers=2)
    assert summary.ok == 3, summary.errors
    df = load_results(db)
    assert (df["iteration_time"] > 0).all()
    assert set(df["endpoint.kind"]) == {"baseline", "ace", "best_baseline"}
    # Every row says what it was run with.
    assert set(df["run.batch_per_npu"]) == {2} and set(df["run.shape"]) == {"4x2x2"}
    assert set(df["run.warmup"]) == {0} and set(df["run.measured"]) == {1}
    assert set(df["run.version"]) == {acesim.__version__}
    # best_baseline searched every split: it is the fastest baseline, never slower than the
    # preset's own split, and the row names the split that won.
    by_kind = df.set_index("endpoint.kind")
    best, preset = (by_kind.loc[k, "iteration_time"] for k in ("best_baseline", "baseline"))
    assert best <= preset
    assert by_kind.loc["best_baseline", "run.variant"].endswith("units")


def test_a_sweep_with_a_failed_point_exits_non_zero_and_keeps_the_rows(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from acesim.cli import app

    spec = tmp_path / "fails.json"
    spec.write_text(
        json.dumps(
            small_spec(
                base={
                    "system": "ace-isca21",
                    "op": "all-reduce",
                    "size": "64 MiB",
                    "overrides": {
                        "endpoint.kind": "ace",
                        "endpoint.ace.mode": "store_and_forward",
                        "endpoint.ace.allow_spill": False,
                    },
                },
                grid={"endpoint.ace.split_chunks": [True, False]},
                zip={},
            )
        ),
        encoding="utf-8",
    )
    db = tmp_path / "fails.sqlite"
    out = CliRunner().invoke(app, ["sweep", str(spec), "--db", str(db), "-j", "0"])
    assert out.exit_code == 1, out.output
    assert len(load_results(db)) == 2  # both rows are kept


def test_a_workload_typo_is_invalid_before_anything_runs() -> None:
    points = load_spec({"kind": "run", "base": {"workload": {"name": "resnet"}}}).points()
    assert not points[0].ok
    assert "workload.name: is not a zoo model" in (points[0].error or "")
    assert "did you mean 'resnet50'?" in (points[0].error or "")


def test_units_are_recorded_printed_and_plotted(tmp_path: Path) -> None:
    import sqlite3

    from typer.testing import CliRunner

    from acesim.cli import app
    from acesim.sweep.plot import _draw
    from acesim.sweep.store import read_units

    db = tmp_path / "u.sqlite"
    run_sweep(small_spec(), db, workers=0)
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT name, unit FROM columns").fetchall())
    assert stored["npu.hbm_bandwidth"] == "B/s" and stored["busbw"] == "B/s"
    assert stored["time"] == "s" and stored["network.dimensions[1].size"] == ""
    assert read_units(db)["wall_time"] == "s"
    frame = load_results(db)
    assert frame.attrs["units"]["busbw"] == "B/s"
    out = CliRunner().invoke(
        app, ["results", str(db), "-c", "npu.hbm_bandwidth,busbw,time"], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    assert "busbw (B/s)" in out.output and "GB/s" in out.output and "e+" not in out.output
    ok = frame[frame["status"] == "ok"]
    fig = _draw(ok, "npu.hbm_bandwidth", "busbw", ["endpoint.kind"], units=read_units(db),
                logx=False, logy=False)  # fmt: skip
    (ax,) = fig.axes
    assert ax.get_xlabel() == "npu.hbm_bandwidth (B/s)" and ax.get_ylabel() == "busbw (B/s)"
    legend = ax.get_legend()
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0 + 1  # below the data
    markers = {line.get_marker() for line in ax.get_lines()}
    assert len(markers) == len(ax.get_lines())  # overlapping lines stay distinguishable


def test_a_version_1_database_is_upgraded_with_units(tmp_path: Path) -> None:
    import sqlite3

    from acesim.sweep.store import SCHEMA, ResultStore

    db = tmp_path / "old.sqlite"
    run_sweep(small_spec(), db, workers=0)
    with sqlite3.connect(db) as conn:  # make it look like an acesim.sweep/1 database
        conn.execute("CREATE TABLE c2 (name TEXT PRIMARY KEY, role TEXT NOT NULL, position INT)")
        conn.execute("INSERT INTO c2 SELECT name, role, position FROM columns")
        conn.execute("DROP TABLE columns")
        conn.execute("ALTER TABLE c2 RENAME TO columns")
        conn.execute("UPDATE meta SET value = 'acesim.sweep/1' WHERE key = 'schema'")
    assert load_results(db).attrs["units"]["busbw"] == "B/s"  # read without writing
    with ResultStore(db):
        pass
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == SCHEMA
        assert dict(conn.execute("SELECT name, unit FROM columns"))["busbw"] == "B/s"


def test_run_sweep_works_from_a_script_without_a_main_guard(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "plain.py"
    db = tmp_path / "plain.sqlite"
    script.write_text(
        "import acesim\n"
        f"summary = acesim.run_sweep({str(EXAMPLES / 'sweep_collective_hbm.toml')!r}, "
        f"{str(db)!r}, workers=2)\n"
        "print('ran', summary.ran)\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    assert "ran 24" in proc.stdout
    assert len(load_results(db)) == 24


def test_best_of_an_alias_searches_the_kind_it_stands_for() -> None:
    from acesim.sweep.spec import _best_of

    raw: dict[str, Any] = {"system": {"endpoint": {"kind": "best_sm"}}}
    assert _best_of(raw)
    assert raw["system"]["endpoint"]["kind"] == "baseline"
    unknown: dict[str, Any] = {"system": {"endpoint": {"kind": "best_nope"}}}
    assert not _best_of(unknown)


@pytest.mark.parametrize("spelt", ["best_baseline", "best-baseline", "best_sm"])
def test_best_of_a_kind_is_accepted_as_written_and_stays_a_search(spelt: str) -> None:
    spec = {"kind": "run", "base": {"workload": {"name": "resnet50"}}}
    (point,) = load_spec({**spec, "grid": {"endpoint.kind": [spelt]}}).points()
    assert point.ok and point.config["run"]["search"] is True
    assert point.columns["endpoint.kind"] == "best_" + spelt[5:]


@pytest.mark.parametrize("typo", ["best_basline", "bestbaseline", "best baseline"])
def test_a_misspelt_best_of_is_refused_suggesting_the_search_not_the_kind(typo: str) -> None:
    spec = {"kind": "run", "base": {"workload": {"name": "resnet50"}}}
    (point,) = load_spec({**spec, "grid": {"endpoint.kind": [typo]}}).points()
    assert not point.ok
    assert "did you mean 'best_baseline'?" in (point.error or "")
    assert "did you mean 'baseline'" not in (point.error or "")


def test_dask_features_without_dask_say_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from clitools import cli_error

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    spec = EXAMPLES / "sweep_collective_hbm.toml"
    db = tmp_path / "d.sqlite"
    line = cli_error(monkeypatch, capsys, "sweep", str(spec), "--db", str(db), "--dask", "local")
    assert "Dask is not installed" in line and "pip install 'acesim[dask]'" in line
    assert not db.exists()
    line = cli_error(monkeypatch, capsys, "reproduce", "ace-isca21", "--dask", "local")
    assert "pip install 'acesim[dask]'" in line


def test_plot_handles_text_axes_units_and_quantities_in_where(tmp_path: Path) -> None:
    """A text x axis is categorical (one tick at each point, labelled), legends show numbers
    with units, the best point is marked and labelled, --where takes a quantity with a unit."""
    from acesim.sweep.plot import _draw, _where
    from acesim.sweep.store import read_units

    spec = small_spec(
        grid={"endpoint.kind": ["baseline", "ace", "ideal"], "npu.hbm_bandwidth": ["150 GB/s"]},
        zip={},
    )
    db = tmp_path / "cat.sqlite"
    run_sweep(spec, db, workers=0)
    units = read_units(db)
    frame = load_results(db)
    ok = frame[frame["status"] == "ok"]
    fig = _draw(ok, "endpoint.kind", "busbw", ["npu.hbm_bandwidth"], units=units,
                logx=False, logy=False)  # fmt: skip
    (ax,) = fig.axes
    assert list(ax.get_xticks()) == [0, 1, 2]  # at the points, not between them
    assert [t.get_text() for t in ax.get_xticklabels()] == ["baseline", "ace", "ideal"]
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["npu.hbm_bandwidth=150 GB/s"]  # not 150000000000.0
    best = ok.loc[ok["busbw"].idxmax(), "endpoint.kind"]
    notes = [c.get_text() for c in ax.texts]
    assert any(
        n.startswith("best: ") and f"endpoint.kind={best}" in n and "B/s" in n for n in notes
    )
    assert len(_where(ok, ["npu.hbm_bandwidth=150 GB/s"], units)) == 3
    assert len(_where(ok, ["npu.hbm_bandwidth=150e9"], units)) == 3
    assert len(_where(ok, ["npu.hbm_bandwidth=900 GB/s"], units)) == 0
    with pytest.raises(ConfigError, match="--where: expected a quantity in B/s"):
        _where(ok, ["npu.hbm_bandwidth=150 GB"], units)


def test_a_copy_engine_point_on_mi300x_records_the_refusal_and_the_rest_run() -> None:
    # the point's document is flattened: the rule reads the NPU preset from the system named
    spec = {
        "kind": "collective",
        "base": {"system": "mi300x-8", "op": "all-gather", "size": "1 MiB"},
        "grid": {"endpoint.kind": ["baseline", "copy_engine", "best_copy_engine"]},
    }
    points = load_spec(spec).points()
    assert points[0].ok and not points[1].ok and not points[2].ok
    for point in points[1:]:
        assert (point.error or "").startswith("endpoint.copy_engine: mi300x-8 (amd NPU mi300x)")
    stated = {**spec, "base": {**spec["base"], "overrides": {"endpoint.copy_engine.engines": 8}}}
    assert all(p.ok for p in load_spec(stated).points())
    on_h100 = {**spec, "base": {**spec["base"], "system": "h100-nvswitch-8"}}
    assert all(p.ok for p in load_spec(on_h100).points())
