"""Test configuration: Hypothesis runs derandomized under CI, so a landing never depends on
which random examples a run happened to draw (locally it explores new examples each run); the
shipped validation corpus's rows simulated once per test process (:func:`shipped_rows_once`);
ResNet-50's 16-NPU comparison computed once per test process (:func:`resnet50_16`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import typer
import typer.main
import typer.testing
from hypothesis import settings

import acesim
from acesim.validation import evaluate as evaluate_module

# pytest-xdist's workers inherit COLUMNS=80 from execnet; rich's consoles would then be fixed at
# 80 columns when acesim is imported, and the width a test gives the CLI (CliRunner's env) would
# be ignored. Without it they size themselves at each print, as in a single process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

# The click command typer builds from an app (every subcommand's parameters read from its
# function's signature) is built once per test process, as the console script builds it once
# per process, instead of at every CliRunner.invoke and every in-process call of the entry
# point (about 50 ms each, a fifth of a small command's time). click (typer._click) makes a
# new context for each invocation, so a command built once runs each invocation as a fresh one
# does; an app given a new command or group is built again.
_build_command = typer.main.get_command
_BUILT: dict[int, tuple[typer.Typer, tuple[int, int], Any]] = {}


def _command_once(app: typer.Typer) -> Any:
    shape = (len(app.registered_commands), len(app.registered_groups))
    built = _BUILT.get(id(app))
    if built is None or built[0] is not app or built[1] != shape:
        built = (app, shape, _build_command(app))
        _BUILT[id(app)] = built
    return built[2]


typer.main.get_command = _command_once  # Typer.__call__ (the entry point)
typer.testing._get_command = _command_once  # type: ignore[attr-defined]  # CliRunner.invoke

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: the simulated figure of each shipped-corpus row, by the row's full definition (see below)
_SHIPPED_ROWS: dict[str, tuple[float, str]] = {}


@pytest.fixture
def shipped_rows_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each row of the shipped validation corpus simulated once per test process, its figure
    shared by every test that asks for it (a full ``validate``, ``validate --quick --json``, the
    tables, the figure): the same ``simulate_case`` runs each row, and the reports, tables, JSON
    and exit status of every test are built from its figures as before. Results are
    deterministic (same inputs, bit-identical results), so a shared figure is the figure a
    second run would give. Only rows of the shipped corpus (``family.base is None``) run with
    no replaced or adjusted system are shared; a test's own corpus folder always simulates. A
    test that changes the model (a monkeypatch, an override) must not ask for it. Mark the
    module ``xdist_group`` so pytest-xdist (``--dist loadgroup``) runs its tests in one
    process."""
    simulate: Callable[..., tuple[float, str]] = evaluate_module.simulate_case

    def once(case: Any, family: Any, system: Any = None, adjust: Any = None) -> tuple[float, str]:
        if system is not None or adjust is not None or family.base is not None:
            return simulate(case, family, system, adjust)
        key = f"{family.origin}\n{case.model_dump_json()}"
        if key not in _SHIPPED_ROWS:
            _SHIPPED_ROWS[key] = simulate(case, family)
        return _SHIPPED_ROWS[key]

    monkeypatch.setattr(evaluate_module, "simulate_case", once)
    yield


@pytest.fixture(scope="session")
def resnet50_16() -> acesim.Comparison:
    """``acesim.compare("ace-isca21", "resnet50", npus=16)``: the best baseline, ACE and
    ideal at the default iteration count, computed once per test process for every test that
    reads it (its bounds, its data frames, the iteration counts it is compared with). A test
    must not change it. Mark the test ``xdist_group("resnet50_16")`` so pytest-xdist runs
    them in one process."""
    return acesim.compare("ace-isca21", "resnet50", npus=16)
