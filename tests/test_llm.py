"""LLM models, Megatron parallel configurations, chunk kernels, memory and the CLI (issue 14)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clitools import cli_error
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError, TopologyError, WorkloadError
from acesim.hardware.kernels import Gemm
from acesim.network.group import Span
from acesim.precision import PRECISIONS
from acesim.runs.llm import make_llm, make_llm_case
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.models import MODELS, TransformerConfig, model_flops
from acesim.workload.llm.parallel import ParallelConfig, flat_group, parse_parallel, placement

runner = CliRunner()

# Published parameter counts: Llama 3 (Meta's model cards: 8.03B, 70.6B, 405B, the released
# checkpoints' exact totals), GPT-3 175B (Brown et al. 2020), gpt-oss-120b (OpenAI's model card,
# table 1: 116.83B in all), DeepSeek-V3 (its report) and Qwen3 (its report and model cards).
PUBLISHED = {
    "llama3-8b": (8.030e9, 0.001),
    "llama3-70b": (70.554e9, 0.001),
    "llama3-405b": (405.85e9, 0.001),
    "gpt3-175b": (175e9, 0.005),
    "gpt-oss-120b": (116.83e9, 0.001),
    "deepseek-v3": (671e9, 0.001),
    # Qwen3's model cards and technical report: 30.5 B and 235 B in all (rounded: 0.2%)
    "qwen3-30b-a3b": (30.5e9, 0.002),
    "qwen3-235b-a22b": (235e9, 0.002),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_match_the_model_cards(name: str) -> None:
    expected, tolerance = PUBLISHED[name]
    model = MODELS.get(name)
    assert abs(model.params / expected - 1) < tolerance, model.params
    assert model.source


def test_every_preset_names_its_source() -> None:
    assert set(MODELS.names()) >= set(PUBLISHED)
    assert all(m.source for _, m in MODELS.items())
    moe = MODELS.get("deepseek-v3")
    assert moe.experts == 256 and moe.top_k == 8 and moe.shared_experts == 1
    assert moe.mla and moe.active_params == pytest.approx(37e9, rel=0.02)


def test_model_flops_is_megatrons_formula_for_gpt3() -> None:
    # Narayanan et al. SC'21 eq. 3 without recomputation: 72 B s l h^2 (1 + s/6h + V/12hl).
    m = MODELS.get("gpt3-175b")
    b, s, n, h, v = 1536, 2048, m.layers, m.hidden, m.vocab
    expected = 72 * b * s * n * h * h * (1 + s / (6 * h) + v / (12 * h * n))
    assert model_flops(m, b, s) == pytest.approx(expected, rel=1e-12)


def test_a_bad_model_shape_is_a_named_error() -> None:
    with pytest.raises(WorkloadError, match="kv_heads"):
        TransformerConfig("x", layers=2, hidden=64, heads=8, kv_heads=3, ffn=128, vocab=10, seq=8)
    with pytest.raises(WorkloadError, match="top_k"):
        TransformerConfig(
            "x",
            layers=2,
            hidden=64,
            heads=8,
            ffn=128,
            vocab=10,
            seq=8,
            experts=4,
            top_k=5,
            expert_ffn=32,
        )


def test_parse_parallel_and_defaults() -> None:
    p = parse_parallel("tp=4,pp=8,vpp=5", global_batch=128, micro_batch=1, seq=8192)
    assert (p.tp, p.pp, p.vpp, p.cp, p.ep, p.dp) == (4, 8, 5, 1, 1, None)
    assert p.sp and p.zero == 1 and p.recompute == "none"  # Megatron-Bridge recipe defaults
    assert p.data_parallel(64) == 2 and p.micro_batches(2) == 64
    q = parse_parallel(
        "tp=2,sp=0,zero=0,recompute=full,dp=auto", global_batch=8, micro_batch=2, seq=128
    )
    assert not q.sp and q.zero == 0 and q.recompute == "full"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("tp=4,xx=2", "^parallel: expected key=value"),
        ("tp=four", "^parallel: tp must be a whole number"),
        ("tp=4,tp=2", "tp is given twice"),
        ("tp=0", "^parallel.tp: must be a whole number of at least 1"),
        ("cp=2,seq=x", "expected key=value"),
        ("zero=2", "or 3 \\(FSDP\\)"),
        ("recompute=some", "none, selective or full"),
    ],
)
def test_bad_parallel_text_is_a_one_line_error(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_parallel(text, global_batch=8, micro_batch=1, seq=128)


def test_parallel_sizes_must_fit_the_model_and_the_npus() -> None:
    model = MODELS.get("llama3-8b")
    with pytest.raises(ConfigError, match="key/value heads"):
        ParallelConfig(tp=16).check_model(model)
    with pytest.raises(ConfigError, match="must divide the 32 layers"):
        ParallelConfig(pp=3).check_model(model)
    with pytest.raises(ConfigError, match="does not divide the 64 NPUs"):
        ParallelConfig(tp=3).data_parallel(64)
    with pytest.raises(ConfigError, match="multiple of micro_batch x dp"):
        ParallelConfig(global_batch=10, micro_batch=4).micro_batches(2)


def test_placement_puts_tp_inside_the_node_then_dp_then_pp() -> None:
    place = placement(ParallelConfig(tp=4, pp=8, vpp=5), (8, 8))
    assert place.dp == 2
    assert place.tp_group is not None and place.tp_group.spans == (Span(0, 4, 1),)
    assert place.dp_group is not None and place.dp_group.spans == (Span(0, 2, 4),)
    assert [place.stage(r) for r in (0, 7, 8, 63)] == [0, 0, 1, 7]
    assert place.peer_stage(5, 3) == 29
    wide = placement(ParallelConfig(tp=2, pp=4), (8, 8))  # DP spans the node and two nodes
    assert wide.dp_group is not None
    assert wide.dp_group.spans == (Span(0, 4, 2), Span(1, 2, 1))


def test_a_group_that_is_not_a_slice_of_the_network_is_refused() -> None:
    with pytest.raises(TopologyError, match="tp group"):
        flat_group((8, 8), 3, 1, "tp")


def _gemms(steps: tuple[object, ...]) -> list[Gemm]:
    return [k for st in steps for k in st.kernels if isinstance(k, Gemm)]  # type: ignore[attr-defined]


def test_a_layers_gemms_are_its_shapes_split_over_tp() -> None:
    m = MODELS.get("llama3-8b")
    p = PRECISIONS.get("bf16")
    b, s, t = 1, 4096, 4
    group = flat_group((8,), 4, 1, "tp")
    work = chunk_work(m, p, range(1), micro_batch=b, seq=s, tp=t, sp=False, tp_group=group)
    T, h = b * s, m.hidden
    per_token = h * (m.q_width + 2 * m.kv_width) + m.q_width * h + 3 * h * m.ffn
    fwd = sum(g.flops for g in _gemms(work.forward))
    assert fwd * t == pytest.approx(2 * T * per_token, rel=1e-12)
    assert sum(g.flops for g in _gemms(work.backward)) == pytest.approx(2 * fwd, rel=1e-12)
    ops = [st.comm.op for st in work.forward if st.comm is not None]
    assert ops == ["all-reduce", "all-reduce"]
    assert [st.comm.op for st in work.backward if st.comm is not None] == ["all-reduce"] * 2
    sp = chunk_work(m, p, range(1), micro_batch=b, seq=s, tp=t, sp=True, tp_group=group)
    fwd_ops = [st.comm.op for st in sp.forward if st.comm is not None]
    assert fwd_ops == ["all-gather", "reduce-scatter"] * 2
    assert sp.saved < work.saved  # norms and residual inputs are kept sharded
    full = chunk_work(
        m, p, range(1), micro_batch=b, seq=s, tp=t, sp=True, recompute="full", tp_group=group
    )
    assert full.saved == T // t * h * p.activation_bytes  # only the layer's input
    assert len(_gemms(full.backward)) == len(_gemms(sp.backward)) + len(_gemms(sp.forward))


def test_llama3_70b_without_model_parallelism_does_not_fit_an_80gb_gpu() -> None:
    with pytest.raises(ConfigError) as info:
        make_llm_case(
            "h100-nvswitch-8",
            "llama3-70b",
            ParallelConfig(global_batch=8, seq=8192),
            nodes=1,
            precision="bf16",
        )
    message = str(info.value)
    assert message.startswith("npu.hbm_capacity: llama3-70b with tp=1,pp=1")
    assert "per GPU" in message and "more than the 80 GiB of HBM" in message
    for term in ("weights", "gradients", "optimizer", "activations"):
        assert term in message
    assert "dominate" in message


def test_acesim_run_llm_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    base = ["run", "-w", "llama3-8b", "-s", "h100-nvswitch-8", "--parallel", "tp=8"]
    base += ["--global-batch", "1", "--seq", "512"]
    out = runner.invoke(app, [*base, "--endpoint", "baseline", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["schema"] == "acesim.llm/1" and data["npus"] == 8 and data["kind"] == "llm"
    assert data["parallel"].startswith("tp=8,pp=1")
    assert set(data["exposed"]) == {"tp", "cp", "ep", "pp", "dp"}
    assert data["exposed"]["tp"] > 0 and data["memory"]["total"] > 0
    assert data["tokens_per_s_per_gpu"] == pytest.approx(512 / (data["iteration_time"] * 8))
    table = runner.invoke(app, [*base, "--endpoint", "baseline"])
    assert table.exit_code == 0, table.output
    assert "tokens/s/GPU" in table.output and "pipeline bubble" in table.output
    # --endpoints compares kinds as for any run: the baseline's SM splits searched, the best
    # kept, the same comparison document as a training graph's
    both = runner.invoke(app, [*base, "--endpoints", "sm,ideal", "--json"])
    assert both.exit_code == 0, both.output
    comp = json.loads(both.stdout)
    assert comp["schema"] == "acesim.comparison/2" and comp["kind"] == "llm"
    assert list(comp["endpoints"]) == ["baseline", "ideal"]
    splits = resolve_system("h100-nvswitch-8").endpoint.settings("baseline").splits  # type: ignore[attr-defined]
    tried = comp["endpoints"]["baseline"]["tried"]
    assert len(tried) == len(splits)
    best = comp["endpoints"]["baseline"]["best"]
    assert best["iteration_time"] == min(r["iteration_time"] for r in tried)
    assert comp["endpoints"]["ideal"]["best"]["iteration_time"] <= best["iteration_time"]
    assert comp["endpoints"]["ideal"]["speedup"] >= 1.0


def test_acesim_run_llm_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    base = [
        "run",
        "-w",
        "llama3-8b",
        "-s",
        "h100-nvswitch-8",
        "--parallel",
        "tp=2,pp=2",
        "--global-batch",
        "2",
        "--seq",
        "512",
        "--endpoint",
        "baseline",
        "--json",
    ]
    runs = {}
    for name, extra in (
        ("default", []),
        ("class", ["--full"]),
        ("exact", ["--exact"]),
        ("slow", ["--straggler", "rank=3,slowdown=1.5"]),
    ):
        out = runner.invoke(app, [*base, *extra])
        assert out.exit_code == 0, out.output
        runs[name] = json.loads(out.stdout)
    assert (runs["class"]["mode"], runs["exact"]["mode"]) == ("class", "exact")
    assert runs["class"]["mode_note"] == ""
    # by default the iteration is composed from its distinct passes, and says so
    assert runs["default"]["mode"] == "composed"
    assert "distinct pipeline passes simulated alone" in runs["default"]["mode_note"]
    assert runs["default"]["iteration_time"] == pytest.approx(
        runs["class"]["iteration_time"], rel=1e-3
    )
    # asked for, exact mode says which collectives ran on the event path and why
    assert "collectives on the event path" in runs["exact"]["mode_note"]
    assert runs["class"]["iteration_time"] == pytest.approx(
        runs["exact"]["iteration_time"], rel=1e-9
    )
    assert runs["slow"]["mode"] == "exact" and "stragglers" in runs["slow"]["mode_note"]
    assert runs["slow"]["iteration_time"] > runs["exact"]["iteration_time"]


def test_acesim_run_llm_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch,
        capsys,
        "run",
        "-w",
        "llama3-8b",
        "-s",
        "h100-nvswitch-8",
        "--parallel",
        "tp=8,qq=1",
    )
    assert "--parallel: expected key=value" in line
    line = cli_error(
        monkeypatch,
        capsys,
        "run",
        "-w",
        "llama3-8b",
        "-s",
        "h100-nvswitch-8",
        "--parallel",
        "tp=8",
        "--global-batch",
        "3",
        "--micro-batch",
        "2",
    )
    assert "--global-batch" in line and "multiple of micro_batch" in line
    line = cli_error(
        monkeypatch,
        capsys,
        "run",
        "-w",
        "llama3-8b",
        "-s",
        "h100-nvswitch-8",
        "--parallel",
        "tp=8",
        "--straggler",
        "rank=1,slowdown=-2",
    )
    assert "--straggler" in line and "slowdown" in line


def test_context_parallelism_splits_the_sequence_and_gathers_kv() -> None:
    from acesim.hardware.kernels import Attention

    tiny = TransformerConfig(
        "tiny", layers=2, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=4096
    )
    case = make_llm_case(
        "h100-nvswitch-8", tiny, ParallelConfig(tp=2, cp=2, global_batch=2, seq=4096), nodes=1
    )
    place = case.place
    assert (place.dp, place.grad_ranks) == (2, 4)
    assert place.cp_group is not None and place.cp_group.spans == (Span(0, 2, 2),)
    assert place.dp_group is not None and place.dp_group.spans == (Span(0, 4, 2),)
    work = case.stages[0][0]
    attn = [k for st in work.forward for k in st.kernels if isinstance(k, Attention)]
    assert {(a.q_len, a.kv_len) for a in attn} == {(2048, 4096)}
    cp = [st for st in work.forward if st.kind == "cp"]
    kv_bytes = 4096 * 2 * tiny.kv_width / 2 * 2  # all s keys and values, per TP rank, bf16
    assert [(st.comm.op, st.comm.size) for st in cp] == [("all-gather", kv_bytes)] * 2
    assert {st.comm.group for st in cp} == {place.cp_group}
    with pytest.raises(ConfigError, match="multiple of 2 x cp"):
        ParallelConfig(tp=2, cp=2, seq=4098)


def test_grad_fp32_sets_the_gradient_buffer_and_the_dp_reduction() -> None:
    tiny = TransformerConfig("tiny", layers=2, hidden=512, heads=8, ffn=1024, vocab=8000, seq=256)
    cases = {
        fp32: make_llm_case(
            "h100-nvswitch-8",
            tiny,
            ParallelConfig(global_batch=8, seq=256, grad_fp32=fp32),
            nodes=1,
        )
        for fp32 in (None, True, False)
    }
    params = sum(c.params for c in cases[None].stages[0])
    assert cases[None].memory["gradients"] == 4 * params  # bf16 params: FP32 main gradients
    assert cases[True].memory["gradients"] == 4 * params
    assert cases[False].memory["gradients"] == 2 * params
    from acesim.runs.llm import llm_graph

    sizes = {n.size for n in llm_graph(cases[False]).ranks[0] if n.name.startswith("dp.reduce")}
    assert sizes == {2 * params}


def test_an_llm_corpus_row_is_tokens_per_second_per_gpu(tmp_path: Any) -> None:
    from acesim.runs.llm import run_llm
    from acesim.validation import validate

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "tiny.toml").write_text(
        'family = "tiny"\ntitle = "tiny"\nbudget = { statistic = "max", limit = 0.15 }\n'
        "[[cases]]\n"
        'id = "llm-row"\nsystem = "h100-nvswitch-8"\n'
        'run = { kind = "llm", model = "llama3-8b", parallel = "tp=8", global_batch = 1, '
        'micro_batch = 1, seq = 512, precision = "bf16" }\n'
        'measured = 1000\nunit = "tokens/s/GPU"\nsource = "a test"\nfit = false\n'
    )
    (row,) = validate(corpus=folder).family("tiny").results
    assert row.status == "ok", row.note
    par = parse_parallel("tp=8", global_batch=1, micro_batch=1, seq=512)
    result, _ = run_llm(make_llm_case("h100-nvswitch-8", "llama3-8b", par))
    assert row.simulated == pytest.approx(result.tokens_per_s_per_gpu)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--micro-batch", "0"), "--micro-batch: must be a whole number of at least 1"),
        (("--seq", "-5"), "--seq: must be a whole number of at least 1"),
        (("--recompute", "bogus"), "--recompute: must be none, selective or full"),
        (("-s", "a100-nvswitch-8", "--precision", "fp8"), "--precision: runs its matrix math"),
        (("--parallel", "tp=8,sp=0,tp_overlap=1"), "needs sequence parallelism"),
        (("-w", "llama3-9b"), "did you mean 'llama3-8b'"),
    ],
)
def test_bad_llm_flags_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    expected: str,
) -> None:
    base = ["run", "-w", "llama3-8b", "-s", "h100-nvswitch-8", "--parallel", "tp=8"]
    assert expected in cli_error(monkeypatch, capsys, *base, *args)


@pytest.mark.parametrize(
    "args", [("--batch", "4"), ("-n", "2"), ("--npus", "16"), ("--loop", "bucketed")]
)
def test_data_parallel_flags_are_refused_for_llm_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    line = cli_error(
        monkeypatch,
        capsys,
        "run",
        "-w",
        "llama3-8b",
        "-s",
        "h100-nvswitch-8",
        "--parallel",
        "tp=8",
        *args,
    )
    assert "does not apply to LLM runs" in line


@pytest.mark.parametrize(
    ("parallel", "expected"),
    [
        ("tp=1", 8),  # dp 8: a micro-batch a replica
        ("tp=2,pp=2", 2),  # 1F1B runs one micro-batch a pipeline
        ("pp=2,vpp=2", 8),  # interleaving: a multiple of the 2 stages, dp 4
        ("tp=2,pp=2,schedule=dualpipe", 8),  # even and at least 2 pp = 4 a pipeline, dp 2
    ],
)
def test_without_a_global_batch_the_smallest_the_configuration_runs_is_taken(
    parallel: str, expected: int
) -> None:
    def case(**batch: int) -> int:
        made = make_llm("h100-nvswitch-8", "llama3-8b", parallel=parallel, seq=1024, **batch)
        return made.parallel.global_batch

    assert case() == expected  # before, one micro-batch: refused wherever dp > 1
    assert case(micro_batch=2) == 2 * expected
    assert case(global_batch=16) == 16


def test_a_run_with_tp_overlap_says_the_overlap_is_likely_optimistic() -> None:
    """The validation rows that ran TP overlap are fast in acesim (docs/validation.md): a run
    that overlaps TP communication says so; one that does not, or has no TP, does not."""
    from acesim.runs.llm import TP_OVERLAP_NOTE, run_llm

    def notes(parallel: str) -> list[str]:
        par = parse_parallel(parallel, global_batch=1, micro_batch=1, seq=512)
        result, _ = run_llm(make_llm_case("h100-nvswitch-8", "llama3-8b", par))
        return list(result.notes)

    assert TP_OVERLAP_NOTE in notes("tp=8,tp_overlap=1")
    assert TP_OVERLAP_NOTE not in notes("tp=8")
