"""Running the `acesim` console script inside a test."""

from __future__ import annotations

import sys

import pytest

from acesim.cli import main


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
