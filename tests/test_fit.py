"""The NPU presets carry the kernel-model parameters the corpus fit rows give."""

from __future__ import annotations

import pytest

from acesim.config import single_npu_system
from acesim.errors import ConfigError
from acesim.validation.fit import fit_npu


@pytest.mark.parametrize("npu", ["h100-sxm", "gb200", "v100-sxm2", "a100-sxm", "mi300x"])
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


def test_the_h200_uses_the_h100_fit_and_has_no_fit_rows_of_its_own() -> None:
    assert single_npu_system("h200-sxm").npu.kernels == single_npu_system("h100-sxm").npu.kernels
    with pytest.raises(ConfigError) as info:
        fit_npu("h200-sxm")
    assert str(info.value) == "npu: has no fit rows in the validation corpus, got 'h200-sxm'"
