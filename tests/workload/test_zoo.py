"""The model zoo against published figures, its own invariants and its error messages.

Tolerances are stated per test. Published figures appear here as the sources state them; the
zoo computes its own from layer shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acesim.errors import WorkloadError
from acesim.workload import Workload
from acesim.workload.zoo import load_zoo, zoo_names, zoo_options
from acesim.workload.zoo.dlrm import CRITEO_TB_ROWS, interaction_features
from acesim.workload.zoo.resnet50 import conv_specs

REFERENCE = (Path(__file__).resolve().parents[2].parent / "shared" / "reference"
             / "astra-sim-1.0-workloads")


def passes(w: Workload, name: str) -> float:
    return sum(getattr(layer, name).compute.flops for layer in w.layers)


def lstm_params(inputs: int, hidden: int) -> int:
    """PyTorch nn.LSTM, one direction: W_ih, W_hh, b_ih, b_hh."""
    return 4 * hidden * (inputs + hidden) + 8 * hidden


def read_reference(name: str) -> list[list[str]]:
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"reference workloads not available at {REFERENCE}")
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip()]


# --- the registry -----------------------------------------------------------------------------


def test_zoo_lists_the_four_models():
    assert zoo_names() == ["dlrm", "gnmt", "gpt", "resnet50"]


@pytest.mark.parametrize("name", ["dlrm", "gnmt", "gpt", "resnet50"])
def test_every_model_builds_with_positive_compute_and_named_batch(name):
    w = load_zoo(name)
    assert w.name == name and w.batch_per_npu and w.dtype_bytes
    for layer in w.layers:
        assert layer.forward.compute.flops >= 0 and layer.forward.compute.hbm_bytes > 0
        for p in (layer.forward, layer.input_grad, layer.weight_grad):
            assert p.compute.blocks is None or p.compute.blocks >= 1


# --- ResNet-50 --------------------------------------------------------------------------------

# torchvision ResNet50_Weights.IMAGENET1K_V1 metadata: num_params and _ops (GMAC, shown as
# "GFLOPS" in its docs); the acceptance figure is "about 4.1 GMAC per image".
RESNET50_PARAMS = 25_557_032
RESNET50_GMAC = 4.1e9
TORCHVISION_GMAC = 4.089e9


def test_resnet50_params_match_published_count_within_1_percent():
    assert load_zoo("resnet50").params == pytest.approx(RESNET50_PARAMS, rel=0.01)


def test_resnet50_conv_and_fc_macs_match_4_1_gmac_within_5_percent():
    fc_macs = 2048 * 1000
    macs = sum(spec.macs for spec in conv_specs()) + fc_macs
    assert macs == pytest.approx(RESNET50_GMAC, rel=0.05)
    assert macs == pytest.approx(TORCHVISION_GMAC, rel=1e-3)


def test_resnet50_forward_flops_per_image_are_twice_4_1_gmac_within_5_percent():
    # includes batch-norm, ReLU, pooling and loss FLOPs, about 1% on top of the convs
    w = load_zoo("resnet50", batch_per_npu=8)
    assert w.forward_flops() / 8 == pytest.approx(2 * RESNET50_GMAC, rel=0.05)


def test_resnet50_has_54_layers_and_no_image_gradient():
    w = load_zoo("resnet50")
    assert len(w.layers) == 54 and w.parallelism == "data"
    assert w.layers[0].name == "conv1" and w.layers[0].input_grad.compute.empty
    assert w.layers[-1].name == "fc1000"


def test_resnet50_allreduce_vs_astra_sim_reference():
    """ASTRA-sim 1.0's Resnet50_DataParallel.txt all-reduces 102,011,648 bytes: FP32 conv and fc
    *weights* only. The zoo also all-reduces the batch-norm gammas/betas (folded into each conv)
    and the fc bias, which real data-parallel training reduces too; so the zoo is larger by
    exactly 4 bytes x (2 per conv output channel + 1000). Layer names and order match."""
    rows = read_reference("Resnet50_DataParallel.txt")
    assert rows[0][0] == "DATA"
    ref = {row[0]: int(row[10]) for row in rows[2:]}
    assert sum(ref.values()) == 102_011_648
    w = load_zoo("resnet50", dtype_bytes=4)
    assert [layer.name for layer in w.layers] == [row[0] for row in rows[2:]]
    specs = {spec.name: spec for spec in conv_specs()}
    for layer in w.layers:
        assert layer.weight_grad.comm is not None
        extra = 2 * specs[layer.name].c_out if layer.name in specs else 1000  # BN or fc bias
        assert layer.weight_grad.comm.size - 4 * extra == ref[layer.name], layer.name
    bn_params = sum(2 * spec.c_out for spec in conv_specs())
    assert w.total_comm_bytes("all-reduce") - 102_011_648 == 4 * (bn_params + 1000)


# --- GNMT -------------------------------------------------------------------------------------

MLPERF_GNMT_PARAMS = 160_671_297  # NVIDIA MLPerf GNMT code: "MLPerf GNMT has 160671297 parameters"


def test_gnmt_4_layer_params_match_mlperf_figure_within_0_1_percent():
    assert load_zoo("gnmt", layers=4).params == pytest.approx(MLPERF_GNMT_PARAMS, rel=1e-3)


def test_gnmt_8_layer_adds_four_lstm_layers_to_each_side():
    h = 1024
    extra = 4 * lstm_params(h, h) + 4 * lstm_params(2 * h, h)
    assert load_zoo("gnmt").params - load_zoo("gnmt", layers=4).params == extra
    assert zoo_options("gnmt")["layers"] == 8


def test_gnmt_forward_flops_are_two_per_weight_per_token_plus_attention_within_5_percent():
    """Independent estimate: each weight is a multiply-add per token that uses it (encoder
    weights over source tokens, decoder-side weights over target tokens), plus the attention's
    score and context products over target x source x hidden. Pointwise work is the gap."""
    b, s, t, h, v = 16, 50, 50, 1024, 32320
    w = load_zoo("gnmt", batch_per_npu=b)
    by_name = {layer.name: layer.params for layer in w.layers}
    enc = sum(p for n, p in by_name.items() if n.startswith("encoder_"))
    dec = sum(p for n, p in by_name.items() if n.startswith("decoder_")) + by_name["classifier"]
    projections = 2 * b * h * h * (s + t)  # keys over source, queries over target tokens
    score_and_context = 2 * (2 * b * t * s * h)  # one multiply-add each per (t, s, unit)
    estimate = 2 * b * (s * enc + t * dec) + projections + score_and_context
    assert w.forward_flops() == pytest.approx(estimate, rel=0.05)
    assert by_name["classifier"] == h * v + v


# --- DLRM -------------------------------------------------------------------------------------


def mlp_params(widths: tuple[int, ...]) -> int:
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))


def test_dlrm_params_are_the_mlperf_tables_and_mlps():
    """MLPerf DLRM (Criteo Terabyte, --max-ind-range=40000000): 26 tables x 128, bottom MLP
    13-512-256-128, top MLP 479-1024-1024-512-256-1 (479 from the reference's ln_top)."""
    w = load_zoo("dlrm")
    assert len(CRITEO_TB_ROWS) == 26
    assert interaction_features(26, 128) == 479
    emb = w.layers[0]
    assert emb.name == "embedding" and emb.params == sum(CRITEO_TB_ROWS) * 128
    assert w.params == emb.params + mlp_params((13, 512, 256, 128)) + mlp_params(
        (479, 1024, 1024, 512, 256, 1))
    assert w.params == pytest.approx(24.04e9, rel=0.01)  # about 96 GB of FP32 tables


def test_dlrm_is_hybrid_with_embedding_all_to_all_and_mlp_allreduce():
    b = 2048
    w = load_zoo("dlrm", batch_per_npu=b)
    assert w.parallelism == "hybrid_dlrm"
    assert w.layers[w.bottom_layers].name == "bottom_mlp_2"
    assert w.layers[w.bottom_layers + 1].name == "interaction"
    emb = w.layers[0]
    a2a = b * 26 * 128 * 4
    assert emb.forward.comm is not None and emb.forward.comm.op == "all-to-all"
    assert emb.forward.comm.size == a2a
    assert emb.input_grad.comm is not None and emb.input_grad.comm.op == "all-to-all"
    assert emb.input_grad.comm.size == a2a
    assert emb.weight_grad.comm is None  # model parallel: the tables are not all-reduced
    for layer in w.layers[1:]:
        if layer.params:
            assert layer.weight_grad.comm is not None
            assert layer.weight_grad.comm.op == "all-reduce"
            assert layer.weight_grad.comm.size == 4 * layer.params
        else:
            assert layer.weight_grad.comm is None


def test_dlrm_follows_astra_sim_hybrid_dlrm_layout():
    """Same convention as DLRM_HybridParallel.txt: embedding first with an all-to-all in forward
    and input-gradient and none in weight-gradient; MLP layers all-reduce."""
    rows = read_reference("DLRM_HybridParallel.txt")
    assert rows[0][0] == "HYBRID_DLRM"
    ref_emb = rows[2]
    assert (ref_emb[0], ref_emb[3], ref_emb[6], ref_emb[9]) == (
        "Embedding", "ALLTOALL", "ALLTOALL", "NONE")
    assert all(row[9] == "ALLREDUCE" for row in rows[3:])
    assert rows[int(rows[0][1]) + 2][0].startswith("MLP_Bottom")  # last bottom layer index
    w = load_zoo("dlrm")
    assert w.layers[0].name == "embedding" and w.layers[w.bottom_layers].name.startswith("bottom")


def test_dlrm_forward_flops_are_two_per_mlp_weight_per_sample_within_2_percent():
    b = 256
    w = load_zoo("dlrm", batch_per_npu=b)
    mlp = w.params - w.layers[0].params
    interaction = 2 * 27 * 27 * 128
    assert w.forward_flops() == pytest.approx(b * (2 * mlp + interaction), rel=0.02)


def test_dlrm_max_rows_caps_tables():
    w = load_zoo("dlrm", max_rows=1000)
    assert w.layers[0].params == sum(min(r, 1000) for r in CRITEO_TB_ROWS) * 128


# --- GPT --------------------------------------------------------------------------------------


def test_gpt_params_match_12_l_h2_plus_vocab_h_within_1_percent():
    layers, h, v = 24, 1024, 50257
    w = load_zoo("gpt")
    assert w.params == pytest.approx(12 * layers * h * h + v * h, rel=0.01)
    small = load_zoo("gpt", layers=12, hidden=768, heads=12)  # GPT-2 small, 124M
    assert small.params == pytest.approx(12 * 12 * 768**2 + v * 768, rel=0.01)


def test_gpt_forward_flops_match_megatron_formula_within_2_percent():
    """Narayanan et al. SC'21: forward = 24 B s L h^2 (1 + s/(6h) + V/(12 L h))."""
    b, s, layers, h, v = 2, 1024, 24, 1024, 50257
    w = load_zoo("gpt", batch_per_npu=b)
    expected = 24 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    assert w.forward_flops() == pytest.approx(expected, rel=0.02)


def test_gpt_tied_head_gradient_travels_with_the_embedding():
    w = load_zoo("gpt", dtype_bytes=2)
    emb, head = w.layers[0], w.layers[-1]
    assert emb.params == (50257 + 1024) * 1024
    assert head.params == 2 * 1024  # the final LayerNorm only: the projection is tied
    assert head.weight_grad.compute.flops > 0
    assert w.total_comm_bytes("all-reduce") == 2 * w.params


def test_gpt_unfused_attention_moves_more_bytes_for_the_same_flops():
    fused, unfused = load_zoo("gpt"), load_zoo("gpt", flash_attention=False)
    a, b = fused.layers[1].forward.compute, unfused.layers[1].forward.compute
    assert a.flops == b.flops and b.hbm_bytes > a.hbm_bytes


# --- invariants over the zoo ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resnet50", "gnmt", "gpt"])
def test_fp32_data_parallel_layers_allreduce_4_bytes_per_param(name):
    w = load_zoo(name, dtype_bytes=4)
    for layer in w.layers:
        comm = layer.weight_grad.comm
        if layer.params:
            assert comm is not None and comm.op == "all-reduce"
            assert comm.size == 4 * layer.params, layer.name
        else:
            assert comm is None, layer.name
        assert layer.forward.comm is None and layer.input_grad.comm is None
    assert w.total_comm_bytes() == 4 * w.params


@pytest.mark.parametrize("name", ["dlrm", "gnmt", "gpt", "resnet50"])
def test_flops_scale_with_batch_and_params_do_not(name):
    one = load_zoo(name, batch_per_npu=2)
    two = load_zoo(name, batch_per_npu=4)
    for p in ("forward", "input_grad", "weight_grad"):
        assert passes(two, p) == pytest.approx(2 * passes(one, p), rel=1e-12)
    assert two.params == one.params
    assert two.total_comm_bytes("all-reduce") == one.total_comm_bytes("all-reduce")
    assert two.total_comm_bytes("all-to-all") == 2 * one.total_comm_bytes("all-to-all")


@pytest.mark.parametrize("name", ["dlrm", "gnmt", "gpt", "resnet50"])
def test_half_precision_halves_bytes_not_flops(name):
    full = load_zoo(name, batch_per_npu=2, dtype_bytes=4)
    half = load_zoo(name, batch_per_npu=2, dtype_bytes=2)
    assert half.forward_flops() == full.forward_flops()
    assert half.total_comm_bytes() * 2 == full.total_comm_bytes()
    hbm = [sum(x.forward.compute.hbm_bytes for x in w.layers) for w in (full, half)]
    assert hbm[1] * 2 == pytest.approx(hbm[0])


# --- errors -----------------------------------------------------------------------------------


def test_unknown_name_suggests_the_closest():
    with pytest.raises(WorkloadError, match=r"'resnet-50'.*did you mean 'resnet50'\?"):
        load_zoo("resnet-50")
    with pytest.raises(WorkloadError, match="dlrm, gnmt, gpt, resnet50"):
        load_zoo("bert")


@pytest.mark.parametrize("bad", [0, -32, 2.5, True])
def test_bad_batch_names_the_field(bad):
    with pytest.raises(WorkloadError, match=r"zoo:resnet50: batch_per_npu: must be a positive"):
        load_zoo("resnet50", batch_per_npu=bad)


def test_bad_dtype_names_the_field():
    with pytest.raises(WorkloadError, match=r"dtype_bytes: must be 1, 2, 4 or 8.*got 3"):
        load_zoo("gpt", dtype_bytes=3)


def test_bad_options_name_the_option():
    with pytest.raises(WorkloadError, match=r"layer: unknown option \(did you mean 'layers'\?\)"):
        load_zoo("gnmt", layer=4)
    with pytest.raises(WorkloadError, match=r"hidden: must be a positive integer, got -1"):
        load_zoo("gpt", hidden=-1)
    with pytest.raises(WorkloadError, match=r"top_mlp\[1\]: must be a positive integer"):
        load_zoo("dlrm", top_mlp=[1024, 0])
    with pytest.raises(WorkloadError, match=r"heads: hidden \(1024\) must be a multiple"):
        load_zoo("gpt", heads=7)
    with pytest.raises(WorkloadError, match=r"bottom_mlp: .*embedding_dim \(128\)"):
        load_zoo("dlrm", bottom_mlp=(512, 256, 64))
    with pytest.raises(WorkloadError, match=r"layers: GNMT needs at least 2"):
        load_zoo("gnmt", layers=1)
