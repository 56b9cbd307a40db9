"""--format table|plain|csv|markdown|json on every command that prints a table (one layout,
acesim.commands.show): the same cells in every format, numbers never cut, nccl-tests style one
line a size for `collective`; `acesim kinds models`; the note when a substrate has nothing to
do."""

from __future__ import annotations

import csv
import io
import json

import pytest
from clitools import cli_error, cli_json, cli_stdout
from typer.testing import CliRunner

from acesim.cli import app

SIZES = ("collective", "-s", "h100-nvswitch-8", "--sizes", "8B:64KiB:x64")


def _csv(*args: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(cli_stdout(*args, "--format", "csv"))))


def test_collective_plain_is_one_line_a_size_under_comment_headers() -> None:
    out = cli_stdout(*SIZES, "--format", "plain").splitlines()
    comments = [line for line in out if line.startswith("#")]
    rows = [line for line in out if not line.startswith("#")]
    assert len(comments) == 2 and "busbw (GB/s)" in comments[1]
    assert [r.split()[0:2] for r in rows] == [["8", "B"], ["512", "B"], ["32", "KiB"]]
    cells = _csv(*SIZES)
    assert cells[0][:2] == ["size", "time"] and len(cells) == 1 + len(rows)
    for row, line in zip(cells[1:], rows, strict=True):
        assert all(cell in line for cell in row)  # the same cells as the CSV, whole


@pytest.mark.parametrize("columns", ["60", "200"])
def test_the_table_never_cuts_a_cell_at_any_terminal_width(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    table = CliRunner().invoke(app, [*SIZES]).stdout
    lines = [line for line in table.splitlines() if line.strip()]
    for row in _csv(*SIZES)[1:]:
        assert any(all(cell in line for cell in row) for line in lines), (row, table)
    assert "…" not in table


def test_markdown_and_json_hold_the_same_cells() -> None:
    markdown = cli_stdout("kinds", "loops", "--format", "markdown")
    assert markdown.startswith("**training loops") and "|---" in markdown.replace(":", "")
    (line,) = cli_stdout("kinds", "loops", "--format", "json").splitlines()
    doc = json.loads(line)
    assert doc["columns"] == ["name", "what it does"]
    assert [r[0] for r in doc["rows"]] == [r[0] for r in _csv("kinds", "loops")[1:]]
    for name, _what in doc["rows"]:
        assert f"| {name} |" in markdown


def test_json_format_of_a_run_command_is_its_result_document() -> None:
    by_format = cli_json(*SIZES[:4], "1MiB", "--format", "json")
    assert by_format == cli_json(*SIZES[:4], "1MiB", "--json")
    assert by_format["schema"] == "acesim.collective/1"


def test_an_unknown_format_is_refused_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "kinds", "--format", "xml")
    assert "--format" in line and "csv" in line and "'xml'" in line


def test_kinds_lists_the_llm_models_and_the_zoo() -> None:
    rows = {r[0]: r for r in _csv("kinds", "models")[1:]}
    assert rows["llama3-70b"][1] == "LLM" and rows["llama3-70b"][2] == "70.6 B"
    assert rows["resnet50"][1] == "training graph (zoo)"
    assert rows["gpt-oss-120b"][6] == "128 (top 4)"


def test_nvls_with_no_all_reduce_to_offload_says_so() -> None:
    # one node, tp=8 with sequence parallelism, dp 1: all-gathers and reduce-scatters only
    llm = ("run", "-w", "llama3-8b", "-s", "h100-nvswitch-8", "--parallel", "tp=8,sp=1")
    small = ("--global-batch", "1", "--seq", "512")
    out = CliRunner().invoke(app, [*llm, *small, "--endpoint", "nvls"])
    assert out.exit_code == 0, out.output
    assert "nvls has nothing to do in this run" in out.stderr
    assert "all-gather, reduce-scatter" in out.stderr
    no_sp = CliRunner().invoke(app, [*llm[:-1], "tp=8,sp=0", *small, "--endpoint", "nvls"])
    assert no_sp.exit_code == 0 and "nothing to do" not in no_sp.stderr  # TP all-reduces
