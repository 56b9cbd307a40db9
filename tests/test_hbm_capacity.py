"""A case whose per-NPU footprint exceeds HBM is refused before it runs, naming the sizes."""

from __future__ import annotations

import pytest
from clitools import cli_error

from acesim.errors import ConfigError
from acesim.runs import make_case
from acesim.runs.memory import check_footprint
from acesim.workload.zoo import load_zoo


def test_a_model_that_does_not_fit_is_refused_with_the_sizes_named() -> None:
    with pytest.raises(ConfigError) as info:
        make_case("v100-sxm2-single", "resnet50", batch_per_npu=1024, precision="fp32")
    assert str(info.value) == (
        "npu.hbm_capacity: resnet50 at 1024 per NPU (fp32) needs 82.22 GiB per NPU (weights "
        "97.49 MiB, gradients 97.49 MiB, optimizer 97.49 MiB, activations 81.93 GiB), more "
        "than the 32 GiB of HBM; use a smaller batch or an NPU with more memory"
    )


def test_the_same_model_at_its_recipe_batch_fits() -> None:
    case = make_case("v100-sxm2-single", "resnet50", batch_per_npu=112, precision="fp32")
    sizes = check_footprint(case.workload, case.system)  # type: ignore[arg-type]
    assert sizes is not None and sizes["total"] < case.system.npu.hbm_capacity
    assert sizes["weights"] == 25_557_032 * 4


def test_half_precision_activations_take_about_half_the_bytes() -> None:
    full = load_zoo("resnet50", batch_per_npu=64, precision="fp32")
    half = load_zoo("resnet50", batch_per_npu=64, precision="amp_fp16")
    ratio = sum(x.activation_bytes for x in half.layers) / sum(
        x.activation_bytes for x in full.layers
    )
    assert 0.5 <= ratio < 0.55  # FP16 tensors, a few FP32 statistics and masks


def test_the_cli_prints_the_refusal_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch,
        capsys,
        "run",
        "-s",
        "v100-sxm2-single",
        "-w",
        "resnet50",
        "--batch",
        "1024",
        "--precision",
        "fp32",
        "--endpoint",
        "ideal",
    )
    assert line.startswith("error: npu.hbm_capacity: resnet50 at 1024 per NPU (fp32) needs")
