"""The NPU presets carry the kernel-model parameters the corpus fit rows give."""

from __future__ import annotations

import pytest

from acesim.config import single_npu_system
from acesim.errors import ConfigError
from acesim.validation.fit import fit_npu


@pytest.mark.parametrize(
    "npu", ["h100-sxm", "h200-sxm", "gb200", "v100-sxm2", "a100-sxm", "mi300x"]
)
def test_the_presets_carry_the_fitted_values(npu: str) -> None:
    kernels = single_npu_system(npu).npu.kernels
    for fit in fit_npu(npu):
        assert fit.simulated == pytest.approx(fit.measured, rel=1e-6), fit
        field, _, dtype = fit.parameter.removeprefix("npu.kernels.").partition(".")
        carried = getattr(kernels, field)
        if dtype:  # one entry of a per-dtype table
            assert isinstance(carried, dict)
            carried = carried[dtype]
        assert carried == pytest.approx(fit.value, rel=5e-4), fit  # four significant digits


ATTENTION = (
    "attention_efficiency",
    "attention_backward_efficiency",
    "attention_block_overhead",
    "attention_backward_block_overhead",
)


def test_the_h200_takes_the_h100_kernel_fits_but_fits_its_own_attention() -> None:
    """Same die: every kernel parameter but attention is the H100's (same-die transfers);
    the H200's cuDNN attention rows fit its two attention efficiencies (8k rows) and its two
    per-block overheads (2k rows)."""
    h200 = single_npu_system("h200-sxm").npu.kernels
    h100 = single_npu_system("h100-sxm").npu.kernels
    assert h200.model_copy(update={f: getattr(h100, f) for f in ATTENTION}) == h100
    fitted = {f.parameter for f in fit_npu("h200-sxm")}
    assert fitted == {f"npu.kernels.{f}" for f in ATTENTION}


def test_an_npu_without_fit_rows_says_so() -> None:
    with pytest.raises(ConfigError) as info:
        fit_npu("b200")
    assert str(info.value) == "npu: has no fit rows in the validation corpus, got 'b200'"
