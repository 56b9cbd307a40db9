"""`acesim validate` and acesim.validation: the corpus of public measurements, its evaluation
and the command's tables, JSON and exit status."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tomllib
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app
from acesim.errors import ConfigError
from acesim.runs import make_case, run_case
from acesim.validation import evaluate as evaluate_module
from acesim.validation import load_corpus, validate

runner = CliRunner()

# one process (pytest-xdist --dist loadgroup) for this module: the tests marked
# usefixtures("shipped_rows_once") share the shipped corpus's simulated rows (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("validate")
SHARED_ROWS = pytest.mark.usefixtures("shipped_rows_once")

FAMILIES = ["kernels", "collectives", "end_to_end", "multinode", "llm", "offload", "overlap"]

FIT_ROWS = {
    "h100-stream-copy": ["npu.kernels.write_penalty"],
    "h100-stream-dot": ["npu.kernels.hbm_efficiency"],
    "h100-gemm-fp8-1024": ["npu.kernels.latency"],
    "h100-gemm-fp8-16384": ["npu.kernels.gemm_efficiency"],
    "h100-attention-bf16-fwd-causal-8k": ["npu.kernels.attention_efficiency"],
    "h100-attention-bf16-bwd-8k": ["npu.kernels.attention_backward_efficiency"],
    "h200-attention-bf16-fwd-causal-8k": ["npu.kernels.attention_efficiency"],
    "h200-attention-bf16-bwd-causal-8k": ["npu.kernels.attention_backward_efficiency"],
    "gb200-attention-bf16-fwd-causal-8k": ["npu.kernels.attention_efficiency"],
    "gb200-attention-bf16-bwd-causal-8k": ["npu.kernels.attention_backward_efficiency"],
    "a100-attention-fp16-fwd-8k": ["npu.kernels.attention_efficiency"],
    "a100-attention-fp16-bwd-8k": ["npu.kernels.attention_backward_efficiency"],
    "h100-attention-bf16-fwd-causal-2k": ["npu.kernels.attention_block_overhead"],
    "h100-attention-bf16-bwd-2k": ["npu.kernels.attention_backward_block_overhead"],
    "h200-attention-bf16-fwd-causal-2k": ["npu.kernels.attention_block_overhead"],
    "h200-attention-bf16-bwd-causal-2k": ["npu.kernels.attention_backward_block_overhead"],
    "gb200-attention-bf16-fwd-causal-2k": ["npu.kernels.attention_block_overhead"],
    "gb200-attention-bf16-bwd-causal-2k": ["npu.kernels.attention_backward_block_overhead"],
    "gb200-gemm-fp8-16384": ["npu.kernels.gemm_efficiency"],
    "v100-gemm-fp32-8192": ["npu.kernels.gemm_efficiency.fp32"],
    "v100-gemm-fp16-8192": ["npu.kernels.gemm_efficiency.fp16"],
    "a100-stream-copy": ["npu.kernels.write_penalty"],
    "a100-stream-dot": ["npu.kernels.hbm_efficiency"],
    "a100-gemm-fp16-1024": ["npu.kernels.latency"],
    "a100-gemm-fp16-16384": ["npu.kernels.gemm_efficiency"],
    "mi300x-gemm-fp16-maf": ["npu.kernels.gemm_efficiency.fp16"],
    "mi300x-gemm-bf16-maf": ["npu.kernels.gemm_efficiency.bf16"],
    "mi300x-gemm-fp8-maf": ["npu.kernels.gemm_efficiency.fp8"],
    "a100x8-allreduce-64mib": ["collective.endpoint_delay"],
    "a100x8-allreduce-1gib": ["collective.protocol_efficiency"],
    "h100x4-alltoall-524mb-ce": ["endpoint.copy_engine.local_copy_bandwidth"],
    "h100x2-p2p-ce-write-unidir": ["endpoint.copy_engine.engine_bandwidth"],
    "h100x8-nvls-allreduce-1m": ["collective.nvls_loop_latency"],
    "h100x8-nvls-allreduce-1g": ["collective.nvls_efficiency"],
    "h200x8-nvls-allreduce-1m": ["collective.nvls_loop_latency"],
    "h200x8-nvls-allreduce-1g": ["collective.nvls_efficiency"],
    "gb200x4-ring-allreduce-1g": ["collective.protocol_efficiency"],
    "gb200-nvl72-allreduce-1g": ["collective.nvls_efficiency"],
    "gb200-nvl64-ce-allgather-32mb-batch": ["endpoint.copy_engine.command_setup"],
    "gb200-nvl64-ce-allgather-32mb-waves": ["endpoint.copy_engine.setup"],
    "gb200-nvl64-ce-allgather-512mb-batch": ["network.dimensions[0].incast_efficiency"],
    "gb200-nvl64-ce-allgather-512mb-waves": ["endpoint.copy_engine.engine_bandwidth"],
    # the host thread's ops per launch (issue 32, acesim.training.host)
    "mbridge-dgxh100-gpt-oss-120b-bf16": ["host.ops_per_launch"],
    "mbridge-dgxgb200-gpt-oss-120b-bf16": ["host.ops_per_launch"],
}


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# -- the shipped corpus ----------------------------------------------------------------------


def test_the_corpus_loads_with_sources_figures_and_fit_flags() -> None:
    corpus = load_corpus()
    assert corpus.names() == FAMILIES
    cases = [c for f in corpus.families.values() for c in f.cases]
    assert len({c.id for c in cases}) == len(cases)
    for case in cases:
        assert case.source.strip() and case.measured > 0 and case.unit
        assert isinstance(case.fit, bool)
        if case.status == "unsupported":
            assert case.reason and not case.fit
        else:
            assert case.run is not None
    assert {c.id: c.fits for c in cases if c.fit} == FIT_ROWS
    for family in corpus.families.values():
        assert family.budget.limit > 0
    budgets = {n: (f.budget.statistic, f.budget.limit) for n, f in corpus.families.items()}
    assert budgets["kernels"] == ("mean", 0.10)
    assert budgets["end_to_end"] == ("max", 0.15)
    assert budgets["collectives"] == ("mean", 0.15)
    assert budgets["multinode"] == ("mean", 0.15)
    bands = corpus.families["collectives"].budget.bands
    assert [(b.label, b.limit) for b in bands] == [(">= 16 MiB", 0.05), ("< 16 MiB", 0.15)]


def test_the_corpus_rows_say_what_they_run() -> None:
    corpus = load_corpus()
    kernels = corpus.families["kernels"].cases
    assert all(c.quick and c.kind in ("gemm", "attention", "stream") for c in kernels)
    assert {c.system for c in kernels} == {
        "h100-sxm",
        "h200-sxm",
        "gb200",
        "v100-sxm2",
        "a100-sxm",
        "mi300x",
    }
    assert all(c.quick for c in corpus.families["collectives"].cases)
    rn50 = {c.id: c.run for c in corpus.families["end_to_end"].cases if c.status == "live"}
    assert {k: (r.kind, r.batch, r.precision) for k, r in rn50.items()} == {  # type: ignore[union-attr]
        "rn50-v100-fp32": ("training", 112, "fp32"),
        "rn50-v100-amp": ("training", 256, "amp_fp16"),
    }
    live = [c for c in corpus.families["end_to_end"].cases if c.status == "live"]
    assert not any(c.quick for c in live)  # training rows are not quick
    llm = corpus.families["llm"]
    # not gating while its H100 70B row is over budget (test_the_shipped_model_is_within_...)
    assert not llm.gating and "issue 32" in llm.gating_note
    assert all(c.kind == "llm" for c in llm.cases if c.status == "live")
    # class mode: one GPU per pipeline stage, seconds a row
    assert all(c.quick for c in llm.cases if c.status == "live")
    live_offload = {c.id for c in corpus.families["offload"].cases if c.status == "live"}
    gb200 = {
        f"gb200-nvl64-ce-allgather-{mb}mb-{how}"
        for mb in (32, 64, 128, 256, 512)
        for how in ("batch", "waves")
    }
    h100 = {
        "h100x4-alltoall-524mb-sm",
        "h100x4-alltoall-524mb-ce",
        "h100x4-alltoall-524mb-ce-nccl2283",
        "h100x2-p2p-ce-write-unidir",
        "h100x2-p2p-ce-write-bidir",
    }
    assert live_offload == h100 | gb200


@SHARED_ROWS
def test_the_a100_rows_are_live_and_match_their_fit() -> None:
    report = validate(["collectives"], quick=True)
    rows = {r.case.id: r for r in report.family("collectives").results}
    for case_id in ("a100x8-allreduce-64mib", "a100x8-allreduce-1gib"):
        row = rows[case_id]
        assert row.status == "ok" and row.case.fit
        assert row.error is not None and abs(row.error) < 0.02  # the rows it was fitted to
    assert rows["h100x8-nvls-allreduce-1g"].status == "ok"
    assert rows["gb200-nvl72-allreduce-1g"].status == "ok"
    assert rows["gb200x4-ring-allreduce-1g"].status == "ok"


def test_every_live_row_records_its_error_before_fit() -> None:
    """Predictions are kept apart from fits: each row says what the model predicted for it
    before any fit on it or on its system's other rows (docs/validation.md)."""
    for family in load_corpus().families.values():
        for case in family.cases:
            if case.status == "live":
                assert case.error_before_fit is not None, case.id
                assert case.before_fit in ("held-out", "entry"), case.id


# -- malformed corpus files ------------------------------------------------------------------

GOOD_CASE = """
[[cases]]
id = "tiny-copy"
system = "systems/one.toml"
run = { kind = "stream", variant = "copy", elements = 1000000 }
measured = 1.0
unit = "TB/s"
source = "a test"
fit = false
quick = true
"""

ONE_NPU = """
name = "one"
[npu]
name = "tiny"
compute_units = 32
matrix_flops = { fp8 = "100 TFLOP/s", bf16 = "50 TFLOP/s", fp32 = "10 TFLOP/s" }
vector_flops = "10 TFLOP/s"
hbm_bandwidth = "1 TB/s"
[[network.dimensions]]
kind = "switch"
size = 1
link_bandwidth = "100 GB/s"
"""

ONE_NPU += """
[endpoint]
kind = "ideal"
"""
EIGHT_NPUS = ONE_NPU.replace("size = 1", "size = 8").replace('name = "one"', 'name = "eight"')


def _corpus(tmp_path: Path, body: str, *, name: str = "tiny", budget: str = "") -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir(exist_ok=True)
    (folder / "systems").mkdir(exist_ok=True)  # system files beside the family files
    (folder / "systems" / "one.toml").write_text(ONE_NPU)
    (folder / "systems" / "eight.toml").write_text(EIGHT_NPUS)
    head = f'family = "{name}"\ntitle = "tiny"\n'
    head += budget or 'budget = { statistic = "mean", limit = 0.10 }\n'
    (folder / f"{name}.toml").write_text(head + textwrap.dedent(body))
    return folder


@pytest.mark.parametrize(
    "change, expected",
    [
        (("elements = 1000000", "elements = -1"), r"case tiny-copy: run\.elements: "),
        (('variant = "copy"', 'variant = "cpy"'), r"case tiny-copy: run\.variant: "),
        (('kind = "stream"', 'kind = "stram"'), r"case tiny-copy: run\.kind: must be one of"),
        (('source = "a test"\n', ""), r"case tiny-copy: source: field required"),
        (("fit = false\n", ""), r"case tiny-copy: fit: field required"),
        (("fit = false", "fit = true"), r"case tiny-copy: fits: a fit row must name"),
        (('unit = "TB/s"', 'unit = "TFLOP/s"'), r"case tiny-copy: unit: must be one of TB/s"),
        (("quick = true", "quik = true"), r"case tiny-copy: quik: unknown key \(did you mean"),
        (("measured = 1.0", "measured = 0"), r"case tiny-copy: measured: "),
        (('id = "tiny-copy"', 'id = "Tiny Copy"'), r"case Tiny Copy: id: must be lower case"),
        (("quick = true", 'status = "unsupported"'), r"case tiny-copy: reason: must say why"),
    ],
)
def test_a_malformed_case_is_one_line_naming_file_case_and_field(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    body = GOOD_CASE.replace(*change)
    assert body != GOOD_CASE
    folder = _corpus(tmp_path, body)
    with pytest.raises(ConfigError, match=r"tiny\.toml: " + expected) as info:
        load_corpus(folder)
    assert "\n" not in str(info.value)


def test_malformed_files_and_duplicate_ids_are_one_line(tmp_path: Path) -> None:
    folder = _corpus(tmp_path, GOOD_CASE + GOOD_CASE)
    with pytest.raises(ConfigError, match="case tiny-copy: id: must be unique"):
        load_corpus(folder)
    (folder / "tiny.toml").write_text("family = [")
    with pytest.raises(ConfigError, match=r"tiny\.toml: cannot parse"):
        load_corpus(folder)
    (folder / "tiny.toml").write_text(
        'family = "other"\ntitle = "t"\nbudget = { statistic = "mean", limit = 0.1 }\n'
    )
    with pytest.raises(ConfigError, match=r"tiny\.toml: family: must be the file's name"):
        load_corpus(folder)
    (folder / "tiny.toml").write_text(
        'family = "tiny"\ntitle = "t"\nbudget = { statistic = "median", limit = 0.1 }\n'
    )
    with pytest.raises(ConfigError, match=r"tiny\.toml: budget\.statistic"):
        load_corpus(folder)
    with pytest.raises(ConfigError, match="--corpus: must be a folder"):
        load_corpus(tmp_path / "nowhere")


# -- evaluation ------------------------------------------------------------------------------


def test_a_stream_row_on_an_ideal_npu_moves_bytes_at_the_hbm_bandwidth(tmp_path: Path) -> None:
    # An ideal NPU (no kernel efficiencies): copy moves 2N elements at exactly 1 TB/s.
    report = validate(corpus=_corpus(tmp_path, GOOD_CASE))
    (row,) = report.family("tiny").results
    assert row.status == "ok" and row.note == "memory"
    assert row.simulated == pytest.approx(1.0)
    assert row.error == pytest.approx(0.0, abs=1e-12)
    assert report.within_budget


def test_a_gemm_row_counts_flops_as_the_benchmark_does(tmp_path: Path) -> None:
    body = ""
    for flops in ("2mnk", "mn(2k-1)"):
        tag = "a" if flops == "2mnk" else "b"
        body += f"""
[[cases]]
id = "gemm-{tag}"
system = "systems/one.toml"
run = {{ kind = "gemm", m = 4096, n = 4096, k = 4096, dtype = "fp8", flops = "{flops}" }}
measured = 100
unit = "TFLOP/s"
source = "a test"
fit = false
"""
    rows = {r.case.id: r for r in validate(corpus=_corpus(tmp_path, body)).family("tiny").results}
    assert rows["gemm-a"].status == "ok" and rows["gemm-a"].note.startswith("compute")
    assert rows["gemm-a"].simulated == pytest.approx(100.0)  # the ideal NPU's FP8 peak
    assert rows["gemm-b"].simulated == pytest.approx(100.0 * (2 * 4096 - 1) / (2 * 4096))


def test_a_row_that_cannot_be_evaluated_is_an_error_row_not_a_crash(tmp_path: Path) -> None:
    body = (
        GOOD_CASE
        + """
[[cases]]
id = "no-such-system"
system = "no-such-preset"
run = { kind = "collective", op = "all-reduce", size = "1 MiB" }
measured = 100
unit = "GB/s"
source = "a test"
fit = false
quick = true

[[cases]]
id = "no-such-npu"
system = "no-such-npu"
run = { kind = "gemm", m = 64, n = 64, k = 64 }
measured = 1
unit = "TFLOP/s"
source = "a test"
fit = false

[[cases]]
id = "too-many-npus"
system = "systems/eight.toml"
run = { kind = "training", workload = "resnet50", batch = 2, precision = "fp32" }
measured = 1
unit = "images/s"
source = "a test"
fit = false
"""
    )
    report = validate(corpus=_corpus(tmp_path, body))
    rows = {r.case.id: r for r in report.family("tiny").results}
    assert rows["tiny-copy"].status == "ok"
    for case_id in ("no-such-system", "no-such-npu", "too-many-npus"):
        assert rows[case_id].status == "error" and rows[case_id].simulated is None
        assert "\n" not in rows[case_id].note
    assert "unknown preset" in rows["no-such-system"].note
    assert "runs on one NPU; this system has 8" in rows["too-many-npus"].note
    fam = report.family("tiny")
    assert fam.counts["error"] == 3 and fam.counts["test"] == 1
    assert report.within_budget  # error rows are shown, they are not judged


TRAINING_CASE = """
[[cases]]
id = "tiny-rn50"
system = "systems/one.toml"
run = { kind = "training", workload = "resnet50", batch = 4, precision = "fp32" }
measured = 100
unit = "images/s"
source = "a test"
fit = false
"""


def test_a_training_row_is_images_per_second_of_a_one_npu_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _corpus(tmp_path, TRAINING_CASE)
    if "precision" not in inspect.signature(make_case).parameters:
        # This acesim's workloads take no precision recipe yet: the row says so.
        (row,) = validate(corpus=folder).family("tiny").results
        assert row.status == "error" and "run.precision" in row.note

        def with_precision(system: Any, workload: Any, *, precision: str, **kw: Any) -> Any:
            return make_case(system, workload, **kw)

        monkeypatch.setattr(evaluate_module, "make_case", with_precision)
    (row,) = validate(corpus=folder).family("tiny").results
    assert row.status == "ok", row.note
    system = load_system_file(folder / "systems" / "one.toml")
    result, _ = run_case(make_case(system, "resnet50", batch_per_npu=4, iterations=3))
    assert row.simulated == pytest.approx(4 / result.iteration_time)
    # Not a quick row: --quick leaves it out.
    (skipped,) = validate(corpus=folder, quick=True).family("tiny").results
    assert skipped.status == "skipped" and skipped.simulated is None


def load_system_file(path: Path) -> Any:
    from acesim.config.resolve import resolve_system

    return resolve_system(path)


# -- the command -----------------------------------------------------------------------------


@SHARED_ROWS
def test_validate_quick_json_has_every_family() -> None:
    out = runner.invoke(app, ["validate", "--quick", "--json"])
    # 0: the collectives family is over its budget (its NVLS rows are live, see
    # test_the_shipped_model_is_within_every_live_familys_budget) but does not gate
    assert out.exit_code == 0, out.output
    data = _strict_json(out.stdout)
    assert data["schema"] == "acesim.validation/1" and data["quick"] is True
    assert [f["family"] for f in data["families"]] == FAMILIES
    rows = {c["id"]: c for f in data["families"] for c in f["cases"]}
    assert rows["a100x8-allreduce-1gib"]["status"] == "ok"
    assert rows["a100x8-allreduce-1gib"]["fit"] is True
    assert rows["rn50-v100-fp32"]["status"] == "skipped"
    for fam in data["families"]:
        assert set(fam["summary"]) == {
            "mean_abs_error",
            "max_abs_error",
            "within_budget",
            "gating",
            "gating_note",
            "bands",
            "rows",
        }
    collectives = next(f for f in data["families"] if f["family"] == "collectives")
    assert collectives["summary"]["within_budget"] is True
    assert collectives["summary"]["gating"] is True


@SHARED_ROWS
def test_validate_tables_and_family_selection() -> None:
    out = runner.invoke(
        app, ["validate", "--quick", "--family", "collectives,offload"], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    assert "a100x8-allreduce-64mib" in out.output and "h100x4-alltoall-524mb-ce" in out.output
    assert "h100x8-nvls-allreduce-16m" in out.output
    assert "h100-gemm-fp8-1024" not in out.output
    assert "collectives: 39 test rows" in out.output
    assert "17 unsupported" in out.output  # offload: sections 2-3 of validation.md
    again = runner.invoke(app, ["validate", "--quick", "-f", "offload", "-f", "collectives"])
    assert again.exit_code == 0 and "a100x8-allreduce-64mib" in again.output


def test_validate_unknown_family_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "validate", "--family", "kernels,kernals")
    assert "--family: unknown family; the corpus has kernels, collectives, end_to_end" in line
    assert "'kernals'" in line


def test_validate_malformed_corpus_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _corpus(tmp_path, GOOD_CASE.replace("elements = 1000000", "elements = 0"))
    line = cli_error(monkeypatch, capsys, "validate", "--corpus", str(folder))
    assert "tiny.toml: case tiny-copy: run.elements:" in line


def test_validate_exits_1_when_a_family_is_over_its_budget(tmp_path: Path) -> None:
    # The ideal NPU copies at 1 TB/s: measured 1.0 is within budget, 0.5 is +100% off.
    within = _corpus(tmp_path, GOOD_CASE)
    ok = runner.invoke(app, ["validate", "--corpus", str(within), "--json"])
    assert ok.exit_code == 0, ok.output
    assert _strict_json(ok.stdout)["within_budget"] is True
    over = _corpus(tmp_path, GOOD_CASE.replace("measured = 1.0", "measured = 0.5"))
    bad = runner.invoke(app, ["validate", "--corpus", str(over)], env={"COLUMNS": "200"})
    assert bad.exit_code == 1, bad.output
    assert "OVER BUDGET" in bad.output and "+100.0%" in bad.output
    data = _strict_json(runner.invoke(app, ["validate", "--corpus", str(over), "--json"]).stdout)
    (fam,) = data["families"]
    assert fam["summary"]["within_budget"] is False
    assert fam["summary"]["mean_abs_error"] == pytest.approx(1.0)
    # A fit row off by as much proves nothing and fails nothing.
    fit = GOOD_CASE.replace("measured = 1.0", "measured = 0.5").replace(
        "fit = false", 'fit = true\nfits = ["npu.hbm_bandwidth"]'
    )
    fitted = runner.invoke(app, ["validate", "--corpus", str(_corpus(tmp_path, fit))])
    assert fitted.exit_code == 0, fitted.output


COLLECTIVE_CASE = """
[[cases]]
id = "tiny-ar-SIZE"
system = "systems/eight.toml"
run = { kind = "collective", op = "all-reduce", size = "SIZE" }
measured = MEASURED
unit = "GB/s"
source = "a test"
fit = false
quick = true
"""

BANDS = """budget = { statistic = "mean", limit = 0.5, bands = [
  { statistic = "mean", limit = 0.05, min_size = "16 MiB" },
  { statistic = "max", limit = 0.5, below_size = "16 MiB" },
] }
"""


def _collective_rows(sizes_and_factors: list[tuple[str, float]]) -> str:
    from acesim import simulate_collective
    from acesim.config.resolve import resolve_system

    system = resolve_system(tomllib.loads(EIGHT_NPUS))
    body = ""
    for size, factor in sizes_and_factors:
        busbw = simulate_collective(system, "all-reduce", size).busbw / 1e9
        case = COLLECTIVE_CASE.replace("tiny-ar-SIZE", f"tiny-ar-{size.replace(' ', '').lower()}")
        body += case.replace("SIZE", size).replace("MEASURED", repr(busbw * factor))
    return body


def test_a_budget_band_judges_the_rows_of_its_sizes(tmp_path: Path) -> None:
    # Simulated / measured: 1 MiB row 10% off (inside the < 16 MiB band's max 50%), 64 MiB row
    # exact: the >= 16 MiB band's mean is 0; the overall mean 5% is inside 50%.
    body = _collective_rows([("1 MiB", 1 / 1.1), ("64 MiB", 1.0)])
    ok = runner.invoke(
        app, ["validate", "--corpus", str(_corpus(tmp_path, body, budget=BANDS)), "--json"]
    )
    assert ok.exit_code == 0, ok.output
    (fam,) = _strict_json(ok.stdout)["families"]
    bands = fam["summary"]["bands"]
    assert [b["rows"] for b in bands] == [1, 1]
    assert bands[0]["judged"] == pytest.approx(0.0, abs=1e-12)
    assert bands[1]["judged"] == pytest.approx(0.1)
    # The 64 MiB row 10% off breaks the >= 16 MiB band (5%) though the overall mean is 10%.
    body = _collective_rows([("1 MiB", 1.0), ("64 MiB", 1 / 1.1)])
    bad = runner.invoke(
        app,
        ["validate", "--corpus", str(_corpus(tmp_path, body, budget=BANDS))],
        env={"COLUMNS": "250"},
    )
    assert bad.exit_code == 1, bad.output
    assert ">= 16 MiB: mean 10.0% (limit 5%)" in bad.output


def test_a_family_that_does_not_gate_is_reported_over_budget_but_passes(
    tmp_path: Path,
) -> None:
    over = GOOD_CASE.replace("measured = 1.0", "measured = 0.5")
    budget = 'budget = { statistic = "mean", limit = 0.10 }\ngating = false\n'
    folder = _corpus(tmp_path, over, budget=budget + 'gating_note = "a known gap"\n')
    out = runner.invoke(app, ["validate", "--corpus", str(folder)], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    assert "OVER BUDGET (not gating: a known gap)" in out.output
    with pytest.raises(ConfigError, match="gating_note: must say why"):
        load_corpus(_corpus(tmp_path, over, budget=budget))


def test_unsupported_rows_never_fail_the_command(tmp_path: Path) -> None:
    body = """
[[cases]]
id = "later"
system = "systems/one.toml"
measured = 1
unit = "GB/s"
source = "a test"
fit = false
status = "unsupported"
reason = "not modelled yet"
"""
    out = runner.invoke(
        app, ["validate", "--corpus", str(_corpus(tmp_path, body))], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    assert "unsupported" in out.output and "not modelled yet" in out.output


#: the llm family's budget (max |error|), as the corpus states it
LLM_BUDGET = 0.15


@SHARED_ROWS
def test_the_shipped_model_is_within_every_live_familys_budget() -> None:
    # The acceptance of the kernel and memory model: every family whose test rows are simulated
    # meets its stated budget (kernels: mean <= 10%; end_to_end: each ResNet-50 row on the V100
    # within 15%), with no parameter fitted on a test row.
    from acesim.validation import validate

    # llm included: each Megatron-Bridge row within 15% of its measured throughput (issue 14)
    report = validate(list(FAMILIES))
    judged = {f.name: f for f in report.families if f.within_budget is not None}
    assert {"kernels", "end_to_end", "collectives", "llm", "offload"} <= set(judged)
    # collectives: issue 12's bands (>= 16 MiB mean <= 5%, below <= 15%), and it gates
    assert judged["collectives"].family.gating
    for family in judged.values():
        if family.family.gating:
            assert family.within_budget, (family.name, family.test_errors)
    # llm: over its 15% budget since issue 32, not gating while its cost is
    # found (the corpus's gating_note); every other row within the budget
    llm = judged["llm"]
    assert not llm.family.gating and llm.within_budget is False
    over = {
        r.case.id
        for r in llm.results
        if r.is_test and r.error is not None and abs(r.error) > LLM_BUDGET
    }
    # the GPT-OSS 120B rows (issues 29, 32), 53-74% fast with no host modelled, are within it
    # since the host model (acesim.training.host): the 25.11 H100 row is its fit row, the
    # 26.02 H100 and GB200 rows test rows; the 26.02 DGX B200 row (EP 64 across 8 nodes),
    # entered as a test row this issue, runs 27% fast (its corpus note: the missing time);
    # the Llama 3.1 405B rows (25.11, DGX H100 and DGX B200), test rows since issue 27's
    # benchmark recipe was checked against them, run 30% and 19% fast
    assert over == {
        "mbridge-dgxh100-llama3-70b-fp8",
        "mbridge-dgxb200-gpt-oss-120b-bf16",
        "mbridge-dgxh100-llama31-405b-fp8",
        "mbridge-dgxb200-llama31-405b-fp8",
        # the 25.11 GB200 Llama3 8B row, a test row since issue 27: +17% (its note)
        "mbridge-dgxgb200-llama3-8b-fp8",
        # the 26.02 rows of three 25.11 configurations (stop 48): the 405B and 70B H100 rows
        # with larger batches, +27% and +15.2%; the GB200 70B row's, measured 6.3% below the
        # 25.11 figure, +15.7%
        "mbridge-dgxh100-llama31-405b-fp8-gbs1536",
        "mbridge-dgxh100-llama3-70b-fp8-gbs256",
        "mbridge-dgxgb200-llama3-70b-fp8-2602",
        # the 26.02 GB200 405B row (256 GPUs in 4 racks, TP4 PP16 VP4): +17.3%
        "mbridge-dgxgb200-llama31-405b-fp8",
    }
    # multinode (issue 32): predictions of clusters the model was never fitted on, judged
    # against their budget and reported, not gating (docs/validation.md says which miss, why)
    assert "multinode" in judged and not judged["multinode"].family.gating
    # overlap (issue 32): test rows entered as predictions, reported against their budget, not
    # gating while the H100 copy-engine row misses (docs/validation.md, "Overlap")
    assert "overlap" in judged and not judged["overlap"].family.gating


@SHARED_ROWS
def test_the_figure_plots_the_simulated_rows(tmp_path: Path) -> None:
    plot = tmp_path / "validation.png"
    families = ["-f", "kernels,offload"]
    result = runner.invoke(app, ["validate", "--quick", *families, "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.stat().st_size > 0


def test_a_panel_within_one_decade_still_labels_its_axis(tmp_path: Path) -> None:
    """A log axis shows its decades; rows measured within one decade (one system's GEMMs, a
    single row) have none on the axis: the panel labels a few plain ticks instead."""
    from acesim.validation.plot import report_figure

    one = GOOD_CASE.replace("measured = 1.0", "measured = 1.3")  # no decade near
    other = GOOD_CASE.replace('"tiny-copy"', '"tiny-other"').replace(
        "measured = 1.0", "measured = 1.7"
    )
    for index, body in enumerate((one, one + other)):
        (tmp_path / str(index)).mkdir()
        report = validate(corpus=load_corpus(_corpus(tmp_path / str(index), body)))
        fig = report_figure(report)
        assert fig is not None
        fig.canvas.draw()
        (ax,) = fig.axes
        low, high = ax.get_xlim()
        shown = [t for t in ax.xaxis.get_majorticklabels() if t.get_text()]
        assert [t for t in shown if low <= t.get_position()[0] <= high], body
        assert ax.get_title() == "tiny"


def test_the_figure_puts_three_panels_a_row(tmp_path: Path) -> None:
    """The whole corpus's seven families in one row made a figure 29 inches wide: at most
    three panels a row, the unused places of the last row left empty."""
    from acesim.validation.plot import report_figure

    for name in ("tiny", "tinier", "tiniest", "tiniestest"):
        folder = _corpus(tmp_path, GOOD_CASE.replace('"tiny-copy"', f'"{name}-copy"'), name=name)
    report = validate(corpus=load_corpus(folder))
    fig = report_figure(report)
    assert fig is not None
    assert len(fig.axes) == 4
    assert tuple(fig.get_size_inches()) == pytest.approx((3 * 4.2, 2 * 3.6))
    assert sorted(ax.get_title() for ax in fig.axes) == ["tinier", "tiniest", "tiniestest", "tiny"]


def test_the_figure_needs_an_image_suffix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = cli_error(monkeypatch, capsys, "validate", "--quick", "--plot", str(tmp_path / "v.txt"))
    assert line.startswith("error: --plot:")


def test_row_runs_only_the_rows_named_and_names_an_unknown_one(tmp_path: Path) -> None:
    """``--row``: the rows asked for, each family judged on them; a family with none of them
    left out; an unknown id is a one-line error with the nearest id."""
    other = GOOD_CASE.replace('"tiny-copy"', '"tiny-other"').replace(
        "measured = 1.0", "measured = 0.5"
    )
    folder = _corpus(tmp_path, GOOD_CASE + other)
    runner = CliRunner()
    args = ["validate", "--corpus", str(folder), "--json"]
    both = _strict_json(runner.invoke(app, args).stdout)
    one = _strict_json(runner.invoke(app, [*args, "--row", "tiny-copy"]).stdout)
    (family,) = one["families"]
    assert [r["id"] for r in family["cases"]] == ["tiny-copy"]
    assert len(both["families"][0]["cases"]) == 2
    bad = runner.invoke(app, ["validate", "--corpus", str(folder), "--row", "tiny-cop"])
    assert bad.exit_code != 0
    assert "--row: unknown row (did you mean 'tiny-copy'?)" in str(bad.exception)
    _corpus(tmp_path, GOOD_CASE.replace('"tiny-copy"', '"second-copy"'), name="second")
    elsewhere = runner.invoke(
        app, ["validate", "--corpus", str(folder), "--row", "tiny-copy", "--family", "second"]
    )
    assert "--row: none of these rows is in the families" in str(elsewhere.exception)


def test_row_leaves_the_budgets_out_of_the_exit_status(tmp_path: Path) -> None:
    """A budget judges a family's every test row: one row over it, run alone with ``--row``,
    is reported over budget but does not fail the command (the whole family does)."""
    folder = _corpus(tmp_path, GOOD_CASE.replace("measured = 1.0", "measured = 0.5"))
    runner = CliRunner()
    assert runner.invoke(app, ["validate", "--corpus", str(folder)]).exit_code == 1
    alone = runner.invoke(app, ["validate", "--corpus", str(folder), "--row", "tiny-copy"])
    assert alone.exit_code == 0, alone.output
