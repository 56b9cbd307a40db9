"""The model zoo against published figures, its own invariants and its error messages.

Tolerances are stated per test. Published figures appear here as the sources state them; the
zoo computes its own from layer shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acesim.errors import ConfigError, WorkloadError
from acesim.hardware.kernels import Attention, Choice, Gemm, Kernel, Roofline, Stream
from acesim.workload import Workload
from acesim.workload.model import Layer
from acesim.workload.zoo import load_zoo, zoo_names, zoo_options
from acesim.workload.zoo.costs import SOFTMAX_FLOPS
from acesim.workload.zoo.dlrm import CRITEO_TB_ROWS, interaction_features
from acesim.workload.zoo.resnet50 import conv_specs

REFERENCE = (
    Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "astra-sim-1.0-workloads"
)


def passes(w: Workload, name: str) -> float:
    return sum(getattr(layer, name).compute.flops for layer in w.layers)


def canonical(ks: tuple[Kernel, ...]) -> list[Kernel]:
    """The kernels with each algorithm choice as its first (canonical: direct) option."""
    return [x for k in ks for x in (k.options[0] if isinstance(k, Choice) else (k,))]


def kernels(w: Workload) -> list[Kernel]:
    return [k for c in w.computes() for k in canonical(c.kernels)]


def matrix_flops(w: Workload) -> float:
    return sum(k.flops for k in kernels(w) if isinstance(k, (Gemm, Attention)))


def gemm_bytes(w: Workload) -> float:
    return sum(k.read_bytes + k.write_bytes for k in kernels(w) if isinstance(k, Gemm))


def layer(w: Workload, name: str) -> Layer:
    return next(x for x in w.layers if x.name == name)


def shape(g: Kernel) -> tuple[float, float, float]:
    assert isinstance(g, Gemm)
    return (g.m, g.n, g.k)


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
    assert w.name == name and w.batch_per_npu and w.precision and w.optimizer
    for x in w.layers:
        assert x.forward.compute.flops >= 0 and x.forward.compute.hbm_bytes > 0
        for c in (x.forward.compute, x.input_grad.compute, x.weight_grad.compute):
            # kernels a framework launches, never a summed roofline; tiling is the NPU's job
            # (or a choice between such sequences: Winograd for FP32 3x3 convolutions)
            assert all(isinstance(k, (Gemm, Attention, Stream, Choice)) for k in c.kernels)
            assert c.blocks is None and c.duration is None


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
    w = load_zoo("resnet50", precision="fp32")
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
        (479, 1024, 1024, 512, 256, 1)
    )
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
        "Embedding",
        "ALLTOALL",
        "ALLTOALL",
        "NONE",
    )
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
    """Narayanan et al. SC'21: forward = 24 B s L h^2 (1 + s/(6h) + V/(12 L h)). Its attention
    term (s/(6h)) counts the full s x s scores; the causal FlashAttention kernel the zoo's GPT
    runs computes half of them (it skips the masked blocks), so that term is halved here.
    Unfused attention computes all of them: the formula as published."""
    b, s, layers, h, v = 2, 1024, 24, 1024, 50257
    w = load_zoo("gpt", batch_per_npu=b)
    causal = 24 * b * s * layers * h * h * (1 + s / (12 * h) + v / (12 * layers * h))
    assert w.forward_flops() == pytest.approx(causal, rel=0.02)
    full = 24 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    unfused = load_zoo("gpt", batch_per_npu=b, flash_attention=False)
    assert unfused.forward_flops() == pytest.approx(full, rel=0.02)


def test_gpt_tied_head_gradient_travels_with_the_embedding():
    w = load_zoo("gpt", precision="bf16")
    emb, head = w.layers[0], w.layers[-1]
    assert emb.params == (50257 + 1024) * 1024
    assert head.params == 2 * 1024  # the final LayerNorm only: the projection is tied
    assert head.weight_grad.compute.flops > 0
    assert w.total_comm_bytes("all-reduce") == 2 * w.params


def test_gpt_attention_is_one_fused_causal_kernel_each_way():
    w = load_zoo("gpt", batch_per_npu=2)
    attn = w.layers[1]
    fwd = [k for k in attn.forward.compute.kernels if isinstance(k, Attention)]
    bwd = [
        k
        for k in attn.input_grad.compute.kernels + attn.weight_grad.compute.kernels
        if isinstance(k, Attention)
    ]
    assert len(fwd) == 1 and len(bwd) == 1
    assert (fwd[0].heads, fwd[0].q_len, fwd[0].kv_len, fwd[0].head_dim) == (2 * 16, 1024, 1024, 64)
    assert fwd[0].causal and not fwd[0].backward and bwd[0].backward
    assert fwd[0].dtype == "bf16"


def test_gpt_unfused_attention_moves_more_bytes_and_computes_the_masked_half():
    fused, unfused = load_zoo("gpt"), load_zoo("gpt", flash_attention=False)
    a, b = fused.layers[1].forward.compute, unfused.layers[1].forward.compute
    probs = 8 * 16 * 1024 * 1024  # b heads s^2
    # the masked halves of Q K^T and P V (2 probs d FLOPs each), and the softmax's FLOPs
    assert b.flops - a.flops == pytest.approx(2 * probs * 64 + SOFTMAX_FLOPS * probs, rel=1e-12)
    assert b.hbm_bytes > a.hbm_bytes + 2 * probs * 2  # the scores and probabilities, BF16


# --- invariants over the zoo ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resnet50", "gnmt", "gpt"])
def test_fp32_data_parallel_layers_allreduce_4_bytes_per_param(name):
    w = load_zoo(name, precision="fp32")
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
    """Forward FLOPs and all matrix FLOPs are proportional to the batch. The other passes
    hold a few kernels that are not (zero-filling an embedding gradient, GPT's tied-weight
    gradient accumulation: work per parameter), hence the looser bound on them."""
    one = load_zoo(name, batch_per_npu=2)
    two = load_zoo(name, batch_per_npu=4)
    assert two.forward_flops() == pytest.approx(2 * one.forward_flops(), rel=1e-12)
    assert matrix_flops(two) == pytest.approx(2 * matrix_flops(one), rel=1e-12)
    for p in ("input_grad", "weight_grad"):
        assert passes(two, p) == pytest.approx(2 * passes(one, p), rel=1e-4)
    assert two.params == one.params
    assert two.total_comm_bytes("all-reduce") == one.total_comm_bytes("all-reduce")
    assert two.total_comm_bytes("all-to-all") == 2 * one.total_comm_bytes("all-to-all")


@pytest.mark.parametrize("name", ["dlrm", "gnmt", "gpt", "resnet50"])
def test_bf16_halves_gemm_and_gradient_bytes_not_flops(name):
    full = load_zoo(name, batch_per_npu=2, precision="fp32")
    half = load_zoo(name, batch_per_npu=2, precision="bf16")
    assert half.forward_flops() == full.forward_flops()
    assert half.total_comm_bytes() * 2 == full.total_comm_bytes()
    assert gemm_bytes(half) * 2 == pytest.approx(gemm_bytes(full), rel=1e-12)
    assert {k.dtype for k in kernels(half) if isinstance(k, Gemm)} == {"bf16"}
    # FP32 statistics and master weights keep the total above half
    assert 0.5 < half.iteration_hbm_bytes() / full.iteration_hbm_bytes() < 0.75


@pytest.mark.parametrize(
    ("precision", "math", "out"),
    [
        ("fp32", "fp32", "fp32"),
        ("tf32", "tf32", "fp32"),
        ("amp_fp16", "fp16", "fp16"),
        ("bf16", "bf16", "bf16"),
        ("fp8", "fp8", "bf16"),
    ],
)
def test_gemms_compute_in_the_math_dtype_and_write_activations(precision, math, out):
    w = load_zoo("resnet50", batch_per_npu=2, precision=precision)
    gemms = [k for k in kernels(w) if isinstance(k, Gemm)]
    assert {g.dtype for g in gemms} == {math} and {g.out_dtype for g in gemms} == {out}
    assert w.matrix_dtypes() == [math]


def test_amp_casts_fp32_weights_forward_and_fp16_gradients_back():
    """PyTorch AMP: autocast casts each FP32 weight to FP16 before its GEMM (read 4 B, write
    2 B per weight); the weight-gradient GEMM writes FP16 and a cast makes the FP32 gradient."""
    amp = layer(load_zoo("resnet50", batch_per_npu=2, precision="amp_fp16"), "layer_64_1_conv2")
    fp32 = layer(load_zoo("resnet50", batch_per_npu=2, precision="fp32"), "layer_64_1_conv2")
    weights = 64 * 64 * 9
    (cast,) = [k for k in amp.forward.compute.kernels if k.name.endswith(".cast")]
    assert isinstance(cast, Stream)
    assert (cast.read_bytes, cast.write_bytes) == (4 * weights, 2 * weights)
    (back,) = [k for k in amp.weight_grad.compute.kernels if k.name.endswith(".grad_cast")]
    assert (back.read_bytes, back.write_bytes) == (2 * weights, 4 * weights)
    assert not [k for k in fp32.forward.compute.kernels if k.name.endswith("cast")]


# --- kernels ----------------------------------------------------------------------------------


def test_resnet50_kernel_counts_per_pass():
    """(forward, input-gradient, weight-gradient, update) kernels per layer, FP32:
    conv -> BN statistics, BN apply -> ReLU [-> residual add first]; backward ReLU, BN's
    reduction and input gradient, the conv's weight gradient; the conv's data gradient alone in
    the input-gradient pass; one optimizer kernel. Block outputs add their two gradients
    (grad_sum) first in backward, except the last block's."""
    w = load_zoo("resnet50", precision="fp32")
    counts = {
        x.name: tuple(
            len(c.kernels)
            for c in (x.forward.compute, x.input_grad.compute, x.weight_grad.compute, x.update)
        )
        for x in w.layers
    }
    assert counts["conv1"] == (5, 0, 6, 1)  # + max-pool; no image gradient
    assert counts["layer_64_1_conv4"] == (3, 1, 3, 1)  # projection shortcut: conv, BN
    assert counts["layer_64_1_conv1"] == (4, 1, 4, 1)
    assert counts["layer_64_1_conv2"] == (4, 1, 4, 1)
    assert counts["layer_64_1_conv3"] == (5, 1, 5, 1)  # + residual add, + grad_sum
    assert counts["layer_512_3_conv3"] == (5, 1, 4, 1)  # the last block: one consumer
    assert counts["fc1000"] == (3, 1, 5, 1)  # avgpool, GEMM, log-softmax
    assert sum(map(sum, counts.values())) == 565
    names = [k.name for k in layer(w, "layer_64_1_conv3").weight_grad.compute.kernels]
    assert names == ["grad_sum", "relu.bwd", "bn.bwd_reduce", "bn.bwd", "layer_64_1_conv3.wgrad"]
    amp = load_zoo("resnet50", precision="amp_fp16")
    # AMP adds a weight cast forward and a gradient cast backward to every conv and the fc
    assert sum(len(c.kernels) for c in amp.computes()) == 565 + 2 * 54


def test_resnet50_conv_gemm_shapes():
    """Implicit GEMMs. Stride 1 (layer_64_1_conv2, 3x3, 64 -> 64 at 56x56): forward
    (B*56*56, 64, 64*9), data gradient (B*56*56, 64, 64*9), weight gradient (64*9, 64,
    B*56*56). Stride 2 (layer_128_1_conv2, 3x3, 128 -> 128, 56 -> 28): a data-gradient pixel
    gathers 9/4 taps on average, so its FLOPs equal the forward's."""
    b = 32
    w = load_zoo("resnet50", batch_per_npu=b, precision="fp32")

    def gemms(name):
        x = layer(w, name)
        return [
            shape(next(k for k in canonical(c.kernels) if isinstance(k, Gemm)))
            for c in (x.forward.compute, x.input_grad.compute, x.weight_grad.compute)
        ]

    assert gemms("layer_64_1_conv2") == [
        (b * 56 * 56, 64, 576),
        (b * 56 * 56, 64, 576),
        (576, 64, b * 56 * 56),
    ]
    assert gemms("layer_128_1_conv2") == [
        (b * 28 * 28, 128, 1152),
        (b * 56 * 56, 128, 288),
        (1152, 128, b * 28 * 28),
    ]
    assert gemms("layer_128_1_conv4") == [  # 1x1/2 projection, 256 -> 512
        (b * 28 * 28, 512, 256),
        (b * 56 * 56, 256, 128),
        (256, 512, b * 28 * 28),
    ]
    fc = layer(w, "fc1000")
    fc_gemms = [
        k
        for c in (fc.forward.compute, fc.weight_grad.compute)
        for k in c.kernels
        if isinstance(k, Gemm)
    ]
    assert [shape(g) for g in fc_gemms] == [(b, 1000, 2048), (2048, 1000, b), (b, 2048, 1000)]
    # the implicit GEMM reads the input tensor, not its im2col matrix
    fwd = next(
        k
        for k in canonical(layer(w, "layer_64_1_conv2").forward.compute.kernels)
        if isinstance(k, Gemm)
    )
    assert fwd.read_bytes == 4 * (b * 56 * 56 * 64 + 64 * 576)
    for spec in conv_specs():
        if spec.name == "conv1":
            continue
        x = layer(w, spec.name)
        f, d = (
            next(k for k in canonical(c.kernels) if isinstance(k, Gemm))
            for c in (x.forward.compute, x.input_grad.compute)
        )
        assert d.flops == pytest.approx(f.flops, rel=1e-12), spec.name


def test_lstm_recurrence_is_one_gemm_and_one_cell_kernel_per_step():
    """The T steps run one after another: T recurrent GEMMs [B,H] x [H,4H] forward and T
    [B,4H] x [4H,H] backward, not one GEMM with batch=T (which would run them in parallel)."""
    b, t, h = 16, 50, 1024
    w = load_zoo("gnmt", batch_per_npu=b, src_len=t, tgt_len=t)
    enc = layer(w, "encoder_lstm_2")
    fwd = [k for k in enc.forward.compute.kernels if k.name == "lstm.h_proj"]
    assert len(fwd) == t and {shape(k) for k in fwd} == {(b, 4 * h, h)}
    assert all(isinstance(k, Gemm) and k.batch == 1 for k in fwd)
    bwd = [k for k in enc.weight_grad.compute.kernels if k.name == "lstm.h_dgrad"]
    assert len(bwd) == t and {shape(k) for k in bwd} == {(b, h, 4 * h)}
    steps = [k.name for k in enc.forward.compute.kernels if k.name.startswith("lstm.")]
    assert steps == ["lstm.x_proj"] + ["lstm.h_proj", "lstm.cell"] * t
    bidir = layer(w, "encoder_lstm_0")
    assert sum(k.name == "lstm.h_proj" for k in bidir.forward.compute.kernels) == 2 * t


def test_no_zoo_pass_is_a_summed_roofline():
    for name in zoo_names():
        assert not [k for k in kernels(load_zoo(name, batch_per_npu=2)) if isinstance(k, Roofline)]


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


def test_bad_precision_or_optimizer_names_the_field_and_the_known_names():
    with pytest.raises(ConfigError) as info:
        load_zoo("gpt", precision="bf61")
    assert str(info.value) == (
        "workload.precision: must be one of fp32, tf32, amp_fp16, amp_bf16, fp16, bf16, fp8, "
        "got 'bf61' (did you mean 'bf16'?)"
    )
    assert "\n" not in str(info.value)
    with pytest.raises(
        ConfigError,
        match=r"^workload.optimizer: must be one of sgd, "
        r"sgd_momentum, adam, got 'lamb'$",
    ):
        load_zoo("gpt", optimizer="lamb")
    with pytest.raises(ConfigError, match=r"^workload.precision: must be one of"):
        Workload("w", (Layer("x"),), precision="fp4")


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
