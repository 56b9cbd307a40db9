"""Running the `acesim` console script inside a test."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from acesim.cli import app, main


def cli_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> str:
    """Run the console-script entry point in this process; return its one-line error (exit
    status 2, nothing on stdout, no traceback)."""
    monkeypatch.setattr(sys, "argv", ["acesim", *args])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def cli_stdout(*args: str) -> str:
    """Run ``acesim ARGS`` in this process; it must succeed. Its standard output."""
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, (
        f"acesim {' '.join(args)} exited {out.exit_code}: {out.stderr.strip()} {out.exception!r}"
    )
    return out.stdout


def cli_json(*args: str) -> Any:
    """Run ``acesim ARGS`` (which must include ``--json``) in this process; its output parsed."""
    return json.loads(cli_stdout(*args))


def cli_json_stderr(*args: str) -> tuple[Any, str]:
    """Run ``acesim ARGS`` (which must include ``--json``): its output parsed, and its stderr."""
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout), out.stderr


def iteration_time(*args: str) -> float:
    """Run ``acesim run ... --json`` with ``args`` (which must include ``--json``) and return
    the iteration time it reports (s)."""
    return float(cli_json(*args)["iteration_time"])
