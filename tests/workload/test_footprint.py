"""Optimizer steps as kernels, and the HBM footprint of the zoo's workloads."""

from __future__ import annotations

import pytest

from acesim.errors import ConfigError, WorkloadError
from acesim.hardware.kernels import Fixed, Stream
from acesim.training.loops import build_graph
from acesim.workload.footprint import footprint
from acesim.workload.model import Compute, Layer, Workload
from acesim.workload.optimizer import (
    state_bytes_per_param,
    update_bytes_per_param,
    update_kernel,
)
from acesim.workload.zoo import load_zoo

RESNET50_PARAMS = 25_557_032

# --- bytes per parameter of an optimizer step (the rule of acesim.workload.optimizer) ---------


def test_sgd_momentum_fp32_moves_20_bytes_per_parameter():
    # read weight, gradient, momentum (3 x 4 B); write weight, momentum (2 x 4 B)
    assert update_bytes_per_param("sgd_momentum", "fp32") == (12.0, 8.0)


def test_adam_in_bf16_with_fp32_master_weights_moves_28_bytes_per_parameter():
    # read the BF16 gradient (2) and the FP32 master weight, m, v (3 x 4);
    # write the master weight, m, v (3 x 4) and the BF16 working copy (2)
    assert update_bytes_per_param("adam", "bf16") == (2 + 4 * 3, 4 * 3 + 2)


@pytest.mark.parametrize(
    ("optimizer", "precision", "read", "write"),
    [
        ("sgd", "fp32", 8, 4),
        ("adam", "fp32", 16, 12),
        ("adam", "amp_fp16", 16, 12),  # AMP keeps FP32 parameters: no master copy
        ("sgd_momentum", "fp16", 2 + 8, 8 + 2),
        ("adam", "fp8", 2 + 12, 12 + 2),
    ],
)
def test_update_bytes_follow_the_precision(optimizer, precision, read, write):
    assert update_bytes_per_param(optimizer, precision) == (read, write)
    k = update_kernel(optimizer, precision, 1000)
    assert isinstance(k, Stream) and (k.read_bytes, k.write_bytes) == (1000 * read, 1000 * write)
    assert k.name == optimizer and k.flops > 0


def test_optimizer_state_includes_master_weights():
    assert state_bytes_per_param("sgd_momentum", "fp32") == 4
    assert state_bytes_per_param("adam", "fp32") == 8
    assert state_bytes_per_param("adam", "bf16") == 12  # m, v and the FP32 master weights
    assert state_bytes_per_param("sgd", "fp32") == 0
    assert state_bytes_per_param(None, "bf16") == 4  # the master copy alone


def test_unknown_optimizer_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"^optimizer: must be one of sgd, sgd_momentum, adam"):
        update_kernel("adagrad", "fp32", 10)


# --- the zoo's update kernels and the loop --------------------------------------------------


def test_every_resnet50_layer_updates_its_parameters_with_sgd_momentum():
    w = load_zoo("resnet50", precision="fp32")
    assert w.optimizer == "sgd_momentum"
    for layer in w.layers:
        (k,) = layer.update.kernels
        assert isinstance(k, Stream)
        assert k.read_bytes + k.write_bytes == 20 * layer.params, layer.name
        assert layer.update_time == 0
    total = sum(layer.update.hbm_bytes for layer in w.layers)
    assert total == 20 * RESNET50_PARAMS


def test_gpt_updates_with_adam_and_fp32_master_weights():
    w = load_zoo("gpt", layers=2)
    assert (w.optimizer, w.precision) == ("adam", "bf16")
    assert sum(layer.update.hbm_bytes for layer in w.layers) == 28 * w.params


def test_dlrm_tables_update_in_place_in_their_weight_gradient_pass():
    w = load_zoo("dlrm", max_rows=1000)
    emb = w.layers[0]
    assert emb.update.empty and [k.name for k in emb.weight_grad.compute.kernels] == [
        "embedding.sparse_sgd"
    ]
    assert all(not layer.update.empty for layer in w.layers[1:] if layer.params)


def test_the_loop_runs_update_kernels_after_the_gradient_all_reduce():
    w = load_zoo("resnet50", batch_per_npu=2)
    (nodes,) = build_graph(w, 1).ranks
    by_name = {n.name: n for n in nodes}
    update = by_name["fc1000.update"]
    assert update.compute == layer_named(w, "fc1000").update
    assert update.pass_name == "update"
    (dep,) = update.deps
    assert nodes[dep].kind == "collective" and nodes[dep].op == "all-reduce"


def layer_named(w: Workload, name: str) -> Layer:
    return next(x for x in w.layers if x.name == name)


def test_update_time_still_gives_a_fixed_kernel_and_not_both():
    layer = Layer("x", update_time=2e-6)
    assert layer.update_compute.kernels == (Fixed(2e-6),)
    assert Layer("y").update_compute.empty
    with pytest.raises(WorkloadError, match="give update kernels or update_time, not both"):
        Layer("z", update_time=1e-6, update=Compute(kernels=(Stream(8.0),)))


# --- footprint ------------------------------------------------------------------------------


def test_resnet50_fp32_footprint():
    b = 32
    w = load_zoo("resnet50", batch_per_npu=b, precision="fp32")
    f = footprint(w)
    assert f["weights"] == 4 * RESNET50_PARAMS
    assert f["gradients"] == 4 * RESNET50_PARAMS
    assert f["optimizer"] == 4 * RESNET50_PARAMS  # one momentum buffer
    assert f["total"] == pytest.approx(sum(v for k, v in f.items() if k != "total"))
    # Activations: the saved tensors of 53 convs (about 2 output-sized FP32 tensors each, plus
    # the image); between 50 and 150 MB an image (PyTorch measures about 90 MB at FP32).
    assert 50e6 < f["activations"] / b < 150e6
    double = footprint(load_zoo("resnet50", batch_per_npu=2 * b, precision="fp32"))
    # (batch-norm statistics, per channel, do not grow with the batch)
    assert double["activations"] == pytest.approx(2 * f["activations"], rel=1e-3)
    assert double["weights"] == f["weights"]


def test_amp_halves_activations_but_keeps_fp32_weights():
    fp32 = footprint(load_zoo("resnet50", precision="fp32"))
    amp = footprint(load_zoo("resnet50", precision="amp_fp16"))
    assert amp["weights"] == fp32["weights"] and amp["gradients"] == fp32["gradients"]
    # FP16 activations, int64 max-pool indices either way, plus the FP16 weight copies
    # autocast keeps for backward (batch-norm statistics stay FP32: under 0.1%)
    indices = 8 * 32 * 64 * 56 * 56
    assert amp["activations"] == pytest.approx(
        (fp32["activations"] - indices) / 2
        + indices
        + 2 * (RESNET50_PARAMS - bn_and_bias_params()),
        rel=1e-3,
    )


def bn_and_bias_params() -> int:
    from acesim.workload.zoo.resnet50 import conv_specs

    return sum(2 * spec.c_out for spec in conv_specs()) + 1000


def test_gpt_bf16_footprint_keeps_master_weights_and_moments():
    w = load_zoo("gpt")
    f = footprint(w)
    assert f["weights"] == 2 * w.params and f["gradients"] == 2 * w.params
    assert f["optimizer"] == 12 * w.params  # FP32 master, m, v
    # Korthikanti et al. (MLSys 2023): 34 s b h bytes a layer without the attention scores;
    # the zoo adds the logits and leaves out dropout masks: within 20%.
    s, b, h, layers = 1024, 8, 1024, 24
    assert f["activations"] == pytest.approx(34 * s * b * h * layers, rel=0.2)


def test_dlrm_tables_are_spread_over_the_npus_and_their_gradient_is_sparse():
    w = load_zoo("dlrm")
    tables = w.layers[0].params
    mlp = w.params - tables
    one, many = footprint(w), footprint(w, npus=64)
    assert one["weights"] == 4 * w.params
    assert many["weights"] == pytest.approx(4 * (tables / 64 + mlp))
    sparse = 2048 * 26 * 128 * 4
    assert many["gradients"] == pytest.approx(4 * mlp + sparse)
    assert many["optimizer"] == 0  # plain SGD


def test_footprint_of_a_file_workload_and_bad_npus():
    w = Workload("file", (Layer("x", activation_bytes=10.0),), precision=None)
    assert footprint(w)["total"] == 10.0
    with pytest.raises(WorkloadError, match="npus: must be a positive integer"):
        footprint(w, npus=0)
    with pytest.raises(WorkloadError, match="has parameters but no precision"):
        footprint(Workload("file", (Layer("x", params=3),), precision=None))
