"""The command line freezes the import-time objects out of the garbage collector; the library
leaves the collector enabled, pausing it only while a run runs (:mod:`acesim.engine.collector`)."""

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


def test_a_run_pauses_the_collector_and_enables_it_after() -> None:
    from acesim.engine.collector import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outermost block enables it again
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # disabled before: left disabled
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed run")
    assert gc.isenabled()
