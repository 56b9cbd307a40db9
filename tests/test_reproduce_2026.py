"""The 2026 study (`acesim reproduce ace-2026`) on a tiny case: its structure, the substrates
that cannot run reported with the reason, the orderings, the report and figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import acesim
from acesim.config.resolve import resolve_system
from acesim.studies.ace2026 import (
    CASES,
    ENDPOINTS,
    SYSTEMS,
    StudyCase,
    applicability,
    find_cases,
    study_2026,
)
from acesim.studies.figures2026 import FIGURES

#: Llama3 8B on one node with TP8 and short sequences: a second or so per run.
TINY = StudyCase("tiny", "llama3-8b", 8, "tp=8", 1, seq=512, source="test")


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("ace2026")
    summary = study_2026(out, cases=[TINY], workers=2)
    return summary, out


def test_every_system_and_substrate_is_reported(study: tuple[dict[str, Any], Path]) -> None:
    summary, out = study
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["schema"] == "acesim.study-2026/1"
    assert on_disk["results"][0]["endpoints"]["ace"] == summary["results"][0]["endpoints"]["ace"]
    assert summary["systems"] == list(SYSTEMS)
    assert summary["endpoints"] == list(ENDPOINTS)
    assert [(r["system"], r["case"]) for r in summary["results"]] == [(s, "tiny") for s in SYSTEMS]
    for row in summary["results"]:
        assert row["applicable"]
        assert set(row["endpoints"]) == set(ENDPOINTS)
        system = resolve_system(row["system"])
        # the best SM configuration is the fastest of every split the preset lists
        splits = system.endpoint.settings("baseline").splits  # type: ignore[attr-defined]
        assert len(row["sm_variants"]) == len(splits)
        sm = row["endpoints"]["baseline"]
        assert sm["iteration_time"] == min(row["sm_variants"].values())
        assert sm["speedup"] == 1.0 and sm["verdict"] == "ties"
        for kind, out_ in row["endpoints"].items():
            if not out_["applicable"]:
                assert out_["reason"], kind
                continue
            assert out_["speedup"] == pytest.approx(sm["iteration_time"] / out_["iteration_time"])
            # what bound it: the iteration's seconds by label, and the communication's bound
            assert out_["bound"] == next(iter(out_["bound_by"]))
            assert out_["comm_bound"], kind
            assert sum(out_["bound_by"].values()) == pytest.approx(out_["iteration_time"])
            assert out_["why"]


def test_the_study_is_the_shared_comparison_of_acesim_compare(
    study: tuple[dict[str, Any], Path],
) -> None:
    """The study compares substrates with the code `acesim run --endpoints` and
    `acesim.compare` use: the same case gives the same best SM configuration and figures."""
    summary, _ = study
    row = next(r for r in summary["results"] if r["system"] == "h100-nvswitch-8")
    comp = acesim.compare(
        "h100-nvswitch-8",
        "llama3-8b",
        parallel="tp=8",
        global_batch=1,
        seq=512,
        endpoints=["sm", "ideal"],
    )
    assert row["sm_variants"] == {r.variant: r.iteration_time for r in comp.baselines}
    for kind in ("baseline", "ideal"):
        assert comp.best(kind).iteration_time == row["endpoints"][kind]["iteration_time"]
        assert comp.speedup(kind) == row["endpoints"][kind]["speedup"]
        assert comp.best(kind).bound_by == row["endpoints"][kind]["bound_by"]


def test_substrates_a_preset_does_not_calibrate_are_not_applicable_with_the_reason(
    study: tuple[dict[str, Any], Path],
) -> None:
    summary, _ = study
    b200 = next(r for r in summary["results"] if r["system"] == "b200-nvswitch-8")
    assert "[endpoint.copy_engine]" in b200["endpoints"]["copy_engine"]["reason"]
    assert "collective.choices" in b200["endpoints"]["nvls"]["reason"]
    listed = {(n["system"], n["kind"]) for n in summary["not_applicable"]}
    assert listed == {("b200-nvswitch-8", "copy_engine"), ("b200-nvswitch-8", "nvls")}
    h100 = next(r for r in summary["results"] if r["system"] == "h100-nvswitch-8")
    assert all(e["applicable"] for e in h100["endpoints"].values())
    # a system without a reducing switch: nvls is refused by its own rule
    why = applicability(resolve_system("ace-isca21"), "nvls")
    assert why is not None and "switch that reduces" in why


def test_the_ideal_endpoint_bounds_every_substrate(study: tuple[dict[str, Any], Path]) -> None:
    summary, _ = study
    assert summary["ideal_beaten"] == []
    for row in summary["results"]:
        ideal = row["endpoints"]["ideal"]["iteration_time"]
        for out in row["endpoints"].values():
            if out["applicable"]:
                assert ideal <= out["iteration_time"]
    # wins and the headline agree with the per-case verdicts
    for kind, wins in summary["wins"].items():
        head = summary["headline"][kind]
        assert len(wins) == head["beats"]
        assert head["beats"] + head["ties"] + head["loses"] == head["runs"]


def test_report_and_figures(study: tuple[dict[str, Any], Path]) -> None:
    summary, out = study
    report = (out / "report.md").read_text()
    for heading in (
        "## Where each substrate beats the best SM configuration",
        "## Why, case by case",
        "## Not applicable",
        "## h100-nvswitch-8",
        "## b200-nvswitch-8",
    ):
        assert heading in report
    assert "| b200-nvswitch-8 | tiny | copy_engine |" in report
    # every substrate's energy per iteration side by side, from each run's energy figures
    assert "## Energy per iteration" in report
    for row in summary["results"]:
        for substrate in row["endpoints"].values():
            if substrate["applicable"]:
                energy = substrate["energy"]
                assert energy["per_token"] > 0 and energy["average_power"] > 0
    for name in FIGURES:
        assert (out / f"{name}.png").stat().st_size > 0
        assert (out / f"{name}.svg").stat().st_size > 0


def test_the_figures_legends_name_every_substrate_in_its_colour(
    study: tuple[dict[str, Any], Path],
) -> None:
    """The B200 has no copy-engine or NVLS fit: its panel, the last, draws no bar of theirs,
    and a legend read off that panel gave them the default colour (or, for the iteration's
    parts first drawn on the H100 panel, no legend at all)."""
    from matplotlib.colors import to_rgba

    from acesim.studies.figures2026 import KIND_COLORS, PART_COLORS, figures

    summary, _ = study
    drawn = figures(summary)
    try:
        (legend,) = [ax.get_legend() for ax in drawn["speedup"].axes if ax.get_legend()]
        entries = {
            t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
        }
        assert list(entries) == list(ENDPOINTS)
        for kind, handle in entries.items():
            assert handle.get_facecolor() == to_rgba(KIND_COLORS[kind]), kind
        (legend,) = [ax.get_legend() for ax in drawn["exposed"].axes if ax.get_legend()]
        texts = [t.get_text() for t in legend.get_texts()]
        assert texts[:2] == ["compute", "bubble"] and set(texts[: -len(ENDPOINTS)]) <= set(
            PART_COLORS
        )
        assert texts[-len(ENDPOINTS) :] == [f"{kind} (outline)" for kind in ENDPOINTS]
    finally:
        import matplotlib.pyplot as plt

        for fig in drawn.values():
            plt.close(fig)


def test_case_list_is_one_place_and_checked() -> None:
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names)
    assert find_cases(None) == [c for c in CASES if c.default]
    assert len(find_cases(None)) >= 3
    assert find_cases([names[0], TINY]) == [CASES[0], TINY]
    from acesim.errors import ConfigError

    with pytest.raises(ConfigError, match="--cases"):
        find_cases(["no-such-case"])
