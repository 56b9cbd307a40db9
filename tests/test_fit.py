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


# -- the root finding every fit runs on -------------------------------------------------------


def test_a_fit_s_root_is_found_in_few_simulations_to_its_tolerance() -> None:
    """Each try of a fit is a simulation (an LLM row's: seconds): Brent's method finds a
    smooth figure's root in a handful of tries where bisection to the same tolerance takes 40."""
    from acesim.validation import fit

    tries: list[float] = []

    def error(x: float) -> float:
        tries.append(x)
        return 1.0 / (0.1 + x) - 1.0 / 0.8  # a throughput against a measured one: root 0.7

    root = fit._root(error, 0.2, 1.0, "test", tol=1e-12)
    assert root == pytest.approx(0.7, rel=1e-11)
    assert len(tries) <= 15


def test_a_figure_with_steps_still_gives_a_root_within_its_tolerance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A simulated figure can move in steps (a wave more, a chunk more): the root is where the
    sign changes; and where Brent's method does not converge the fit bisects (always does)."""
    from acesim.validation import fit

    def step(x: float) -> float:
        return -1.0 if x < 0.3 else 1.0

    assert fit._root(step, 0.0, 1.0, "test", tol=1e-9) == pytest.approx(0.3, rel=1e-8)

    def stalled(*args: object, **kwargs: object) -> float:
        raise RuntimeError("Failed to converge after 200 iterations")

    monkeypatch.setattr(fit, "brentq", stalled)
    assert fit._root(step, 0.0, 1.0, "test", tol=1e-9) == pytest.approx(0.3, rel=1e-8)
    # no sign change in the range: refused, or (clamp) the end nearer a root
    with pytest.raises(ConfigError, match="out of reach"):
        fit._root(lambda x: x - 2.0, 0.5, 1.0, "case x: p", tol=1e-9)
    assert fit._root(lambda x: x - 2.0, 0.5, 1.0, "case x: p", clamp=True, tol=1e-9) == 1.0
