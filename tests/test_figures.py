"""Every figure acesim draws explains itself: labelled axes with units, the legend outside the
data (inspected on the matplotlib objects)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from acesim.config import load_system  # noqa: E402
from acesim.runs.compare import run_jobs  # noqa: E402
from acesim.studies.figures import FIGURES, figures  # noqa: E402
from acesim.studies.membw import membw_analysis  # noqa: E402
from acesim.studies.reproduce import collect, plan_cases  # noqa: E402

#: the module's shared runs (module fixtures) made once: its tests in one worker
pytestmark = pytest.mark.xdist_group("figures")

UNIT = re.compile(r"\((x|%|B/s|s|MiB|B|units[^)]*)\)")


@pytest.fixture(scope="module")
def drawn() -> dict[str, Any]:
    system = load_system("ace-isca21")
    # without the SRAM sweep's runs: collect() leaves them out of the cases, and the figures
    # read SRAM rows only from the summary (none here), so they drew nothing either way
    jobs = plan_cases(system, workloads=["resnet50", "dlrm"], npus=[16], sram=False)
    cases = collect(run_jobs(jobs, workers=1))
    membw = membw_analysis(system, npus=[16, 32])
    summary = {
        "paper": {"speedup_avg": {"resnet50": 1.41}},
        "sram_sensitivity": [],
    }
    out = figures(cases, membw, summary)
    yield out
    for fig in out.values():
        plt.close(fig)


def test_every_figure_is_drawn(drawn: dict[str, Any]) -> None:
    assert tuple(drawn) == FIGURES


@pytest.mark.parametrize("name", FIGURES)
def test_axes_are_labelled_with_units(drawn: dict[str, Any], name: str) -> None:
    for ax in drawn[name].axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert label, f"{name}: an axis has no label"
        assert UNIT.search(ax.get_ylabel()), f"{name}: no unit in {ax.get_ylabel()!r}"
        if name in ("membw", "sram", "splits"):
            assert UNIT.search(ax.get_xlabel()), f"{name}: no unit in {ax.get_xlabel()!r}"
        assert ax.get_title(), f"{name}: no title"


@pytest.mark.parametrize("name", FIGURES)
def test_legends_sit_outside_the_data(drawn: dict[str, Any], name: str) -> None:
    fig = drawn[name]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        area = ax.get_window_extent(renderer)
        assert box.y1 <= area.y0 + 1, f"{name}: the legend overlaps the plot area"


def test_membw_draws_the_simulated_need_and_hides_no_line(drawn: dict[str, Any]) -> None:
    (ax,) = drawn["membw"].axes
    labels = ax.get_legend_handles_labels()[1]
    for name in ("baseline", "ACE"):
        # the result: the need at equal network bandwidth, one point per network size
        (line,) = [ln for ln in ax.get_lines() if ln.get_label().startswith(f"{name} simulated")]
        assert "equal network bw" in line.get_label() and len(line.get_xdata()) == 2
        assert any(label.startswith(f"{name} simulated, at 95%") for label in labels)
        assert any(label.startswith(f"{name} accounting") for label in labels)
    drawn_lines = [(tuple(ln.get_xdata()), tuple(ln.get_ydata())) for ln in ax.get_lines()]
    assert len(set(drawn_lines)) == len(drawn_lines)  # no line drawn over an identical one


def test_reproduce_writes_png_and_svg(tmp_path: Path, drawn: dict[str, Any]) -> None:
    for name, fig in drawn.items():
        fig.savefig(tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 0
