"""Output paths are checked before any work: a one-line error naming the option, exit status 2.

Every command that writes a file (run --output/--trace, membw --plot, results --csv,
plot --output) rejects a missing or unwritable folder, an existing directory and a wrong
suffix before it simulates, reads or plots anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clitools import cli_error

from acesim.commands.common import IMAGE_SUFFIXES, check_output_path
from acesim.errors import ConfigError


def _forbid(monkeypatch: pytest.MonkeyPatch, target: str, name: str) -> None:
    """Make ``target.name`` fail the test if anything calls it."""

    def called(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{target}.{name} was called before the output path was checked")

    monkeypatch.setattr(f"{target}.{name}", called)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """No simulation, analysis, database read or plot may start."""
    for name in ("cli_case", "run_case", "run_jobs"):
        _forbid(monkeypatch, "acesim.commands.run", name)
    _forbid(monkeypatch, "acesim.runs.case", "make_case")
    _forbid(monkeypatch, "acesim.studies.membw", "membw_analysis")
    _forbid(monkeypatch, "acesim.config.resolve", "resolve_system")
    _forbid(monkeypatch, "acesim.sweep.store", "read_table")
    _forbid(monkeypatch, "acesim.sweep.plot", "plot_results")


CASES = [
    # (argv after the tmp folder is substituted for {tmp}, option, words in the message)
    (
        ["run", "--endpoint", "ace", "--trace", "{tmp}/x/missing/dir/t.json"],
        "--trace",
        ["folder does not exist", "x/missing/dir"],
    ),
    (["run", "--trace", "{tmp}/t.txt"], "--trace", [".json"]),
    (["run", "--endpoint", "ace", "--trace", "{tmp}/d.json"], "--trace", ["is a directory"]),
    (["run", "-o", "{tmp}/missing/r.json"], "--output", ["folder does not exist", "missing"]),
    (["run", "--output", "{tmp}/r.yaml"], "--output", [".json"]),
    (["run", "--output", "{tmp}/d.json"], "--output", ["is a directory"]),
    (["membw", "--plot", "{tmp}/missing/m.png"], "--plot", ["folder does not exist"]),
    (["membw", "--plot", "{tmp}/m.bmpx"], "--plot", [".png", ".svg", ".pdf"]),
    (
        ["results", "{tmp}/db.sqlite", "--csv", "{tmp}/missing/x.csv"],
        "--csv",
        ["folder does not exist"],
    ),
    (["results", "{tmp}/db.sqlite", "--csv", "{tmp}/x.tsv"], "--csv", [".csv"]),
    (
        ["plot", "{tmp}/db.sqlite", "--x", "a", "--y", "b", "-o", "{tmp}/missing/x.png"],
        "--output",
        ["folder does not exist"],
    ),
    (
        ["plot", "{tmp}/db.sqlite", "--x", "a", "--y", "b", "-o", "{tmp}/x.bmpx"],
        "--output",
        [".png", ".svg", ".pdf"],
    ),
    (
        ["plot", "{tmp}/db.sqlite", "--x", "a", "--y", "b", "--output", "{tmp}"],
        "--output",
        ["is a directory"],
    ),
    (["run", "-o", "{tmp}"], "--output", ["is a directory"]),
]


@pytest.mark.parametrize(
    ("argv", "option", "words"), CASES, ids=[f"{c[0][0]}{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_bad_output_path_is_a_one_line_error_before_any_work(
    argv: list[str],
    option: str,
    words: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_work: None,
) -> None:
    (tmp_path / "d.json").mkdir()
    line = cli_error(monkeypatch, capsys, *(a.format(tmp=tmp_path) for a in argv))
    assert f"error: {option}: " in line
    for word in words:
        assert word in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json"]  # nothing was written


def test_run_trace_into_missing_folder_never_simulates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def simulate(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the simulation ran before --trace was checked")

    monkeypatch.setattr("acesim.runs.run_system", simulate)
    target = tmp_path / "x" / "missing" / "dir" / "t.json"
    line = cli_error(monkeypatch, capsys, "run", "--endpoint", "ace", "--trace", str(target))
    assert line == (f"error: --trace: folder does not exist: {target.parent}, got {str(target)!r}")


def test_real_entry_point_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "t.json"
    proc = subprocess.run(
        [sys.executable, "-m", "acesim.cli", "run", "--endpoint", "ace", "--trace", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --trace: folder does not exist")


def test_check_output_path_accepts_a_writable_file(tmp_path: Path) -> None:
    assert check_output_path(tmp_path / "a.json", "--output", (".json",)) == tmp_path / "a.json"
    assert check_output_path(tmp_path / "fig.PNG", "--plot", IMAGE_SUFFIXES) == tmp_path / "fig.PNG"
    assert check_output_path(tmp_path / "anything", "--x") == tmp_path / "anything"
    (tmp_path / "old.csv").write_text("x")
    assert check_output_path(tmp_path / "old.csv", "--csv", (".csv",)) == tmp_path / "old.csv"


def test_check_output_path_rejects_an_unwritable_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests may run as root, for whom every folder is writable: fake the permission check.
    monkeypatch.setattr("acesim.commands.common.os.access", lambda *a, **k: False)
    with pytest.raises(ConfigError) as info:
        check_output_path(tmp_path / "a.json", "--output", (".json",))
    assert info.value.field == "--output"
    assert info.value.rule == f"folder is not writable: {tmp_path}"


def test_check_output_path_rejects_a_file_as_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        check_output_path(tmp_path / "file" / "a.json", "--output", (".json",))
