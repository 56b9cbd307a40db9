"""The command line freezes the import-time objects out of the garbage collector; the library
leaves the collector alone."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

import acesim.cli as cli


def test_the_cli_freezes_the_imports_before_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(cli, "run_cli", lambda app: calls.append("run"))
    cli.main()
    assert calls == ["freeze", "run"]


def test_importing_the_library_leaves_the_collector_alone() -> None:
    code = "import gc, acesim, acesim.runs; print(gc.get_freeze_count(), gc.isenabled())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"]
    assert gc.isenabled()
