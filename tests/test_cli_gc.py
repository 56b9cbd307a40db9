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


def test_every_run_kind_keeps_the_collector_paused_through_its_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import acesim.runs.collective as collective_run
    import acesim.runs.training as training_run
    from acesim import simulate_collective
    from acesim.runs.single import run

    seen: list[tuple[str, bool]] = []

    def watched(name: str, module: object, attr: str) -> None:
        inner = getattr(module, attr)

        def call(*args: object, **kwargs: object) -> object:
            seen.append((name, gc.isenabled()))
            return inner(*args, **kwargs)

        monkeypatch.setattr(module, attr, call)

    watched("training summary", training_run, "summarize")
    watched("collective bounds", collective_run, "collective_bounds")
    run("ace-isca21", "resnet50", npus=16, endpoint="ideal", iterations=3)
    simulate_collective("ace-isca21", "all-reduce", "1 MiB", exact=True)
    assert {name for name, _ in seen} == {"training summary", "collective bounds"}
    assert not any(enabled for _, enabled in seen)
    assert gc.isenabled()


def _freeze_count() -> int:
    return gc.get_freeze_count()


def test_a_pool_worker_freezes_what_exists_when_it_starts() -> None:
    from acesim.processes import process_pool

    with process_pool(1) as pool:
        assert pool.submit(_freeze_count).result() > 0
