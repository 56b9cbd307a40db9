"""Transfer rules and `acesim validate --transfer`: each system's rows simulated with its own
fits withheld, its parameters from the rules over the other systems' (refitted) fits."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app
from acesim.validation import load_corpus, validate_transfer
from acesim.validation.fit import datasheet_value
from acesim.validation.loso import Presets
from acesim.validation.transfer import transfer, unit_of

runner = CliRunner()

# -- the rules, on fits given by hand --------------------------------------------------------

GEMM = "npu.kernels.gemm_efficiency"


def test_the_same_die_comes_before_the_vendors_mean() -> None:
    fits = {("h100-sxm", GEMM): 0.7, ("gb200", GEMM): 0.6, ("v100-sxm2", GEMM): 0.9}
    t = transfer("h200-sxm", GEMM, fits)
    assert (t.rule.name, t.value, t.drawn_from) == ("same-die", 0.7, ("h100-sxm",))


def test_without_the_same_die_the_vendors_fits_are_averaged() -> None:
    fits = {("h100-sxm", GEMM): 0.7, ("gb200", GEMM): 0.6, ("mi300x", GEMM): 0.1}
    t = transfer("a100-sxm", GEMM, fits)
    assert t.rule.name == "same-vendor" and t.drawn_from == ("gb200", "h100-sxm")
    assert t.value == pytest.approx(0.65)


def test_another_vendor_takes_the_mean_of_every_fit() -> None:
    fits = {("h100-sxm", GEMM): 0.7, ("gb200", GEMM): 0.6}
    t = transfer("mi300x", GEMM, fits)
    assert t.rule.name == "any-vendor" and t.value == pytest.approx(0.65)


def test_a_system_never_draws_on_its_own_fits() -> None:
    """The H100 node's NVLS fit is the H100's own: holding it out leaves the H200's."""
    key = "collective.nvls_efficiency"
    fits = {("h100-nvswitch-8", key): 0.77, ("h200-nvswitch-8", key): 0.79}
    t = transfer("h100-nvswitch-8", key, fits)
    assert (t.rule.name, t.drawn_from, t.value) == ("same-die", ("h200-nvswitch-8",), 0.79)
    assert unit_of("h100-nvswitch-8") == "h100-sxm"


def test_nothing_to_draw_on_leaves_the_datasheet() -> None:
    t = transfer("a100-sxm", "npu.kernels.latency", {("a100-sxm", "npu.kernels.latency"): 1e-6})
    assert t.rule.name == "datasheet" and t.value == datasheet_value("npu.kernels.latency") == 0.0


def test_a_dtype_entry_falls_back_to_the_scalar_fits() -> None:
    fits = {("h100-sxm", GEMM): 0.7, ("v100-sxm2", f"{GEMM}.fp16"): 0.8}
    assert transfer("a100-sxm", f"{GEMM}.fp16", fits).value == 0.8
    assert transfer("a100-sxm", f"{GEMM}.fp32", fits).value == 0.7


def test_kinship_comes_before_the_dtype() -> None:
    """Another vendor's fit of the same dtype yields to the same vendor's scalar fits."""
    fits = {("h100-sxm", GEMM): 0.7, ("mi300x", f"{GEMM}.fp16"): 0.5}
    t = transfer("v100-sxm2", f"{GEMM}.fp16", fits)
    assert (t.rule.name, t.drawn_from, t.value) == ("same-vendor", ("h100-sxm",), 0.7)


ATTENTION = "npu.kernels.attention_efficiency"


def test_a_held_out_h100_takes_its_attention_from_the_h200_die_fit() -> None:
    """Attention efficiency is a fraction of the matrix peak carried by the rules: the H200's
    cuDNN fit (same GH100 die) before the other NVIDIA generations' A100 and GB200 fits."""
    fits = Presets.of(load_corpus()).shipped_fits()
    for parameter in (ATTENTION, "npu.kernels.attention_backward_efficiency"):
        t = transfer("h100-sxm", parameter, fits)
        assert (t.rule.name, t.drawn_from) == ("same-die", ("h200-sxm",))
        assert t.value == fits[("h200-sxm", parameter)]
    gb200 = transfer("gb200", ATTENTION, fits)
    assert (gb200.rule.name, gb200.drawn_from) == (
        "same-vendor",
        ("a100-sxm", "h100-sxm", "h200-sxm"),
    )


NVLS = "collective.nvls_efficiency"
INCAST = "network.dimensions[0].incast_efficiency"


def test_a_held_out_gb200_takes_the_hopper_nvls_mean_and_no_incast_loss() -> None:
    """No other NVLink5 system fits NVLS and no other system fits a switch incast loss (no
    other corpus row puts more than 8 writers on a switch port): held out, the NVL72 takes the
    H100 and H200 NVLS fits' mean (same-vendor) and the datasheet's lossless switch
    (docs/validation.md, why the NVL72 rows miss held out)."""
    fits = Presets.of(load_corpus()).shipped_fits()
    nvls = transfer("gb200-nvl72", NVLS, fits)
    assert (nvls.rule.name, nvls.drawn_from) == (
        "same-vendor",
        ("h100-nvswitch-8", "h200-nvswitch-8"),
    )
    hopper = (fits[("h100-nvswitch-8", NVLS)], fits[("h200-nvswitch-8", NVLS)])
    assert nvls.value == pytest.approx(sum(hopper) / 2)
    incast = transfer("gb200-nvl72", INCAST, fits)
    assert (incast.rule.name, incast.value, incast.drawn_from) == ("datasheet", 1.0, ())


def test_a_same_switch_generation_nvls_fit_comes_before_the_hopper_mean() -> None:
    """B200 HGX and GB200 NVL72 share the die and so NVLink5 and the NVLink5 switch: an NVLS
    fit on a B200 node, once the corpus has one, is what a held-out GB200 takes (same-die),
    before the NVLink4 Hopper fits."""
    fits = {
        ("h100-nvswitch-8", NVLS): 0.77,
        ("h200-nvswitch-8", NVLS): 0.79,
        ("b200-nvswitch-8", NVLS): 0.70,
    }
    t = transfer("gb200-nvl72", NVLS, fits)
    assert (t.rule.name, t.drawn_from, t.value) == ("same-die", ("b200-nvswitch-8",), 0.70)


# -- a corpus of two made-up systems ---------------------------------------------------------

SYSTEM = """
name = "{name}"
[npu]
name = "{name}"
compute_units = 32
matrix_flops = {{ fp32 = "10 TFLOP/s" }}
vector_flops = "10 TFLOP/s"
hbm_bandwidth = "{bw} TB/s"
[npu.kernels]
hbm_efficiency = {eff}
latency = "2 us"
[[network.dimensions]]
kind = "switch"
size = 1
link_bandwidth = "100 GB/s"
[endpoint]
kind = "ideal"
[sources]
"npu.kernels.hbm_efficiency" = {{ kind = "fit", note = "fit on row {row}" }}
"npu.kernels.latency" = {{ kind = "{latency}", note = "{latency_note}" }}
"""

ROW = """
[[cases]]
id = "{id}"
system = "systems/{system}.toml"
run = {{ kind = "stream", variant = "dot", elements = {elements} }}
measured = {measured}
unit = "TB/s"
source = "made up"
fit = {fit}
{fits}
quick = true
"""

A_BW, B_BW, LAT = 1e12, 2e12, 2e-6  # B/s, B/s, s
SMALL, MID, BIG = 100_000, 1_000_000, 1_000_000_000  # elements of the dot rows (16 B each)


def _dot(elements: int, bandwidth: float, eff: float, latency: float) -> float:
    """TB/s of a dot over two FP64 arrays: the bytes over latency + bytes / (bw x eff)."""
    nbytes = 16.0 * elements
    return nbytes / (latency + nbytes / (bandwidth * eff)) / 1e12


def _row(id: str, system: str, elements: int, measured: float, fits: str | None) -> str:
    fit = f'fits = ["npu.kernels.{fits}"]' if fits else ""
    return ROW.format(
        id=id,
        system=system,
        elements=elements,
        measured=measured,
        fit="true" if fits else "false",
        fits=fit,
    )


def _corpus(tmp_path: Path) -> Path:
    """System a fits its latency (2 us) and HBM efficiency (0.8) on its own rows; system b
    carries a's latency by a transfer rule and fits its HBM efficiency (0.6) on a row where
    that latency weighs: with a held out, b's fit moves."""
    folder = tmp_path / "corpus"
    (folder / "systems").mkdir(parents=True)
    (folder / "systems" / "a.toml").write_text(
        SYSTEM.format(
            name="a",
            bw=1,
            eff=0.8,
            row="a-big",
            latency="fit",
            latency_note="fit on row a-small",
        )
    )
    (folder / "systems" / "b.toml").write_text(
        SYSTEM.format(
            name="b",
            bw=2,
            eff=0.6,
            row="b-mid",
            latency="transfer",
            latency_note="any-vendor from systems/a.toml",
        )
    )
    rows = [
        _row("a-small", "a", SMALL, _dot(SMALL, A_BW, 0.8, LAT), "latency"),
        _row("a-big", "a", BIG, _dot(BIG, A_BW, 0.8, LAT), "hbm_efficiency"),
        _row("a-mid", "a", MID, _dot(MID, A_BW, 0.8, LAT) * 1.1, None),
        _row("b-mid", "b", MID, _dot(MID, B_BW, 0.6, LAT), "hbm_efficiency"),
    ]
    head = 'family = "tiny"\ntitle = "tiny"\nbudget = { statistic = "mean", limit = 0.5 }\n'
    head += 'transfer_target = { statistic = "mean", limit = 0.05 }\n'
    (folder / "tiny.toml").write_text(head + textwrap.dedent("".join(rows)))
    return folder


def test_a_held_out_system_runs_on_the_others_refitted_values(tmp_path: Path) -> None:
    report = validate_transfer(corpus=load_corpus(_corpus(tmp_path)))
    inside = {r.case.id: r for r in report.in_sample.families[0].results}
    out = {r.case.id: r for r in report.held_out.families[0].results}
    error = inside["a-big"].error
    assert inside["a-big"].is_fit and error is not None and abs(error) < 1e-9
    assert all(not r.is_fit and r.is_test for r in out.values())
    # a held out: b's latency (a's fit) falls to the datasheet's 0, b's HBM efficiency is
    # refitted without it (the measured TB/s over b's 2 TB/s), and a takes that
    b_eff = _dot(MID, B_BW, 0.6, LAT) * 1e12 / B_BW
    a_big = _dot(BIG, A_BW, b_eff, 0.0)
    assert out["a-big"].simulated == pytest.approx(a_big, rel=1e-6)
    assert out["a-small"].simulated == pytest.approx(_dot(SMALL, A_BW, b_eff, 0.0), rel=1e-6)
    # b held out: a's own fits, b's HBM efficiency from a's (any-vendor)
    assert out["b-mid"].simulated == pytest.approx(_dot(MID, B_BW, 0.8, LAT), rel=1e-6)
    values = {(v.system, v.parameter): (v.value, v.how) for v in report.values}
    eff_a = values[("systems/a.toml", "npu.kernels.hbm_efficiency")]
    assert eff_a[0] == pytest.approx(b_eff, rel=1e-6)
    assert eff_a[1] == "transfer any-vendor from systems/b.toml"
    assert values[("systems/a.toml", "npu.kernels.latency")] == (0.0, "transfer datasheet")


def test_each_refit_of_a_held_out_world_is_announced_before_it_runs(tmp_path: Path) -> None:
    """The refits come before a held-out system's first row (tens of CPU seconds on the
    shipped corpus): ``on_refit(unit, preset)`` names each as it starts, for a progress bar.
    With a held out, b's HBM efficiency (fitted on a row where a's latency weighs) is refitted;
    with b held out, a's fits do not depend on b: nothing is refitted."""
    heard: list[tuple[str, str]] = []
    report = validate_transfer(
        corpus=load_corpus(_corpus(tmp_path)), on_refit=lambda *a: heard.append(a)
    )
    assert [r.case.id for r in report.held_out.families[0].results][0] == "a-small"
    assert heard and {unit for unit, _ in heard} == {"systems/a.toml"}
    assert {preset for _, preset in heard} == {"systems/b.toml"}


def test_the_transfer_command_reports_both_runs_and_never_fails_on_its_target(
    tmp_path: Path,
) -> None:
    folder = _corpus(tmp_path)
    result = runner.invoke(app, ["validate", "--corpus", str(folder), "--transfer"])
    assert result.exit_code == 0, result.output
    assert "in sample: tiny: 1 test rows" in result.output
    assert "held out:  tiny: 4 test rows" in result.output
    assert "misses its target" in result.output
    data = json.loads(
        runner.invoke(app, ["validate", "--corpus", str(folder), "--transfer", "--json"]).output
    )
    assert data["schema"] == "acesim.validation.transfer/1"
    held = data["held_out"]["families"][0]
    assert held["held_out"] and held["summary"]["rows"]["test"] == 4
    assert held["summary"]["within_budget"] is False
    assert {c["id"] for c in held["cases"] if c["fit"]} == set()
    hows = {(v["system"], v["parameter"]): v["how"] for v in data["held_out_values"]}
    assert hows[("systems/b.toml", "npu.kernels.hbm_efficiency")] == (
        "transfer any-vendor from systems/a.toml"
    )


def test_an_error_before_fit_is_given_with_how_it_was_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _corpus(tmp_path)
    text = (folder / "tiny.toml").read_text()
    (folder / "tiny.toml").write_text(
        text.replace('id = "a-mid"', 'id = "a-mid"\nerror_before_fit = 0.25', 1)
    )
    error = cli_error(monkeypatch, capsys, "validate", "--corpus", str(folder))
    assert error.endswith(
        "case a-mid: before_fit: error_before_fit and before_fit are given together"
    )
    (folder / "tiny.toml").write_text(
        text.replace('id = "a-mid"', 'id = "a-mid"\nerror_before_fit = 0.25\nbefore_fit = "entry"')
    )
    result = runner.invoke(app, ["validate", "--corpus", str(folder)])
    assert result.exit_code == 0 and "+25.0%" in result.output


def test_a_row_whose_system_does_not_load_is_an_error_row_held_out_too(tmp_path: Path) -> None:
    folder = _corpus(tmp_path)
    text = (folder / "tiny.toml").read_text()
    bad = ROW.format(
        id="nowhere", system="nowhere", elements=SMALL, measured=1.0, fit="false", fits=""
    )
    (folder / "tiny.toml").write_text(text + bad)
    report = validate_transfer(corpus=load_corpus(folder))
    row = {r.case.id: r for r in report.held_out.families[0].results}["nowhere"]
    assert row.status == "error" and row.note


def test_the_held_out_figure_says_it_is_held_out(tmp_path: Path) -> None:
    from acesim.validation.plot import report_figure

    report = validate_transfer(corpus=load_corpus(_corpus(tmp_path)))
    held, inside = report_figure(report.held_out), report_figure(report.in_sample)
    assert held is not None and inside is not None
    assert [ax.get_title() for ax in held.axes] == ["tiny (held out)"]
    assert [ax.get_title() for ax in inside.axes] == ["tiny"]
