"""Studies run anywhere with the same results: local processes against a Dask LocalCluster
(bit-identical), the task runner's rules, the CLI's study options, the sensitivity range
figure."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config import load_system
from acesim.errors import AcesimError, ConfigError
from acesim.studies.ace2026 import StudyCase, plan_study
from acesim.studies.reproduce import plan_reproduction
from acesim.studies.tasks import Task, run_tasks

TINY = StudyCase("tiny", "llama3-8b", 8, "tp=8", 1, seq=512, source="test")
runner = CliRunner()


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_2026_runs_are_bit_identical_locally_and_on_dask(client: Any) -> None:
    plan = plan_study(["h100-nvswitch-8"], [TINY], ["baseline", "ace"])
    tasks = [t for t in plan.tasks if t.key[3] == 0]  # the first SM split and ACE
    assert {t.key[2] for t in tasks} == {"baseline", "ace"}
    local = run_tasks(tasks, workers=2)
    remote = run_tasks(tasks, dask=client)
    here = run_tasks(tasks, workers=1)
    assert set(local) == set(remote) == set(here) == {t.key for t in tasks}
    for key in local:
        for other in (remote, here):
            assert other[key].to_dict() == local[key].to_dict(), key


def test_reproduction_runs_are_bit_identical_locally_and_on_dask(client: Any) -> None:
    tasks = plan_reproduction(
        load_system("ace-isca21"), workloads=["dlrm"], npus=[16], sram=False, hbm_targets=False
    )
    runs = [t for t in tasks if t.key[0] == "run" and t.key[4] == 0]
    runs = [t for t in runs if t.key[3] in ("baseline", "ace")]
    assert len(runs) == 2
    local = run_tasks(runs, workers=2)
    remote = run_tasks(runs, dask=client)
    for key in local:
        assert remote[key].to_dict() == local[key].to_dict(), key


def _square(x: int) -> int:
    return x * x


def test_task_runner_rules() -> None:
    tasks = [Task(("sq", i), _square, (i,)) for i in range(5)]
    ticks: list[int] = []
    assert run_tasks(tasks, workers=1, progress=lambda: ticks.append(1)) == {
        ("sq", i): i * i for i in range(5)
    }
    assert len(ticks) == 5
    with pytest.raises(ConfigError, match="same key"):
        run_tasks([tasks[0], tasks[0]], workers=1)
    with pytest.raises(ConfigError, match="--workers"):
        run_tasks(tasks, workers=0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reproduce", "ace-2026", "--workloads", "dlrm"], "--workloads"),
        (["reproduce", "ace-isca21", "--cases", "x"], "--cases"),
        (["reproduce", "ace-isca21", "--sensitivity", "drf", "--no-sensitivity"], "either"),
        (["reproduce", "ace-isca21", "--sensitivity", "nope"], "--sensitivity"),
        (["reproduce", "ace-2026", "--cases", "nope"], "--cases"),
        (["reproduce", "ace-2026", "--dask", "nowhere"], "--dask"),
        (["reproduce", "no-such-paper"], "paper"),
    ],
)
def test_cli_refuses_what_a_study_does_not_take(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = runner.invoke(app, [*args, "-o", str(tmp_path)])
    # an AcesimError: the command line prints it as one line (acesim.cli.run_cli)
    assert isinstance(result.exception, AcesimError), result.output
    assert message in str(result.exception)
    assert not (tmp_path / "summary.json").exists()


def test_a_study_of_some_variants_ranges_from_the_preset_as_shipped() -> None:
    """``--sensitivity drf,fp32``: the ranges still start from the shipped preset (an
    assumption moved is measured from it): the shipped value inside each range, and named at
    the end it sets."""
    from acesim.studies.sensitivity import FIGURES, figure_ranges

    labels = [label for label, _k, _w in FIGURES]
    shipped = dict.fromkeys(labels, 2.0)
    rows = {
        "drf": {"figures": dict.fromkeys(labels, 2.5)},
        "fp32": {"figures": {**dict.fromkeys(labels, 3.0), "GNMT avg": None}},
    }
    ranges = figure_ranges(rows, shipped)
    for label in labels:
        r = ranges[label]
        assert (r["low"], r["high"], r["shipped"]) == (
            2.0,
            2.5 if label == "GNMT avg" else 3.0,
            2.0,
        )
        assert r["low_variant"] == "shipped"
    # with the shipped variant among them (the default): the same ranges
    assert figure_ranges({**rows, "shipped": {"figures": shipped}}, shipped) == ranges


def test_sensitivity_figure_draws_every_range_against_the_paper() -> None:
    import matplotlib.pyplot as plt

    from acesim.studies.figures import sensitivity_figure

    ranges = {
        "HBM saving": {"shipped": 3.1, "low": 0.37, "high": 11.6, "paper": 3.5},
        "DLRM avg": {"shipped": 1.056, "low": 0.99, "high": 1.45, "paper": 1.13},
        "GNMT avg": None,
    }
    fig = sensitivity_figure(ranges)
    try:
        (ax,) = fig.axes
        assert ax.get_xscale() == "log"
        assert "paper" in ax.get_xlabel()
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == ["DLRM avg", "HBM saving"]  # top to bottom: the first figure on top
        legend = {t.get_text() for t in ax.get_legend().get_texts()}
        assert legend == {"range over the assumptions", "as shipped", "paper"}
        # each range is drawn as a ratio to the paper's value
        bars = [line for line in ax.get_lines() if len(line.get_xdata()) == 2]
        spans = sorted(tuple(line.get_xdata()) for line in bars)
        assert spans[0] == pytest.approx((0.37 / 3.5, 11.6 / 3.5))
        # the values in a column right of the axes (beside a bar they ran over the paper's
        # cross), with the paper's; the log axis's ticks as plain numbers
        fig.canvas.draw()
        texts = {t.get_text(): t for t in ax.texts}
        assert set(texts) == {"3.10 (0.37-11.60), paper 3.50", "1.06 (0.99-1.45), paper 1.13"}
        right = ax.get_window_extent().x1
        assert all(t.get_window_extent().x0 >= right for t in texts.values())
        ticks = [t.get_text() for t in ax.get_xticklabels(which="both") if t.get_text()]
        assert ticks and all("10^" not in t and "e-" not in t for t in ticks), ticks
    finally:
        plt.close(fig)
