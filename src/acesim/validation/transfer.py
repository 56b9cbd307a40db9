"""Transfer rules: where a fitted parameter's value comes from on a system that has no fit row
of its own for it.

A fitted parameter (``kind = "fit"`` in a preset's ``[sources]``) is fitted on that preset's
corpus rows. Every other preset that needs the parameter takes it by the first rule of
:data:`RULES` that has something to draw on, applied to the fits of *other* systems only (a
system never draws on itself). The candidates are the fits of the same parameter (the same
dotted path; for one dtype's entry of a per-dtype table, ``npu.kernels.gemm_efficiency.fp16``,
the fits of that entry, else, under the same rule, the fits of the scalar, which their NPUs
apply to every dtype: kinship before dtype):

1. ``same-die``: the mean of the fits on systems whose NPU is the same die (:data:`LINEAGE`).
   The same die has the same SMs, tensor cores, memory controllers and NVLink generation, and
   every shipped system built on one die has the same switch generation, so a fitted
   efficiency or latency of the die's kernels, memory or links is the die's. For the switch's
   NVLS efficiency this is the same-switch-generation rule (B200 HGX and GB200 NVL72: NVLink5;
   H100 and H200: NVLink4); public 8-GPU Blackwell NVLS figures lie near the Hopper fits, so
   what separates the NVL72 is its 72 ranks, carried by the switch incast loss, which no other
   system fits (docs/validation.md, "Why the NVL72 rows miss held out").
2. ``same-vendor``: the mean of the fits on the same vendor's NPUs. Another generation's value
   is an estimate; no generation is nearer than another by any measure the corpus has, so
   none is preferred.
3. ``any-vendor``: the mean of every other system's fit (no fit of the vendor's).
4. ``datasheet``: no other system fits the parameter: the system schema's default, the value
   with nothing fitted (:func:`acesim.validation.fit.datasheet_value`: every kernel at its
   roofline, no latency, no protocol loss), so the system runs on its datasheet alone.

Fused attention's efficiencies (``npu.kernels.attention_efficiency`` and
``attention_backward_efficiency``) are carried by the same rules as fractions of the NPU's
matrix peak (what :mod:`acesim.hardware.kernel_model` multiplies them by). Their counted FLOPs
are the tensor-core products of the kernel's matmuls (two forward, five backward); what the
kernel loses against the peak is the softmax between them (exponentials on the special-function
units, rescaling on the FP32 units) and the pipeline that hides it, set by the ratio of those
units' throughput and the clocks to the tensor cores'. The same die has the same ratio, so a
same-die fit carries whole (H100 and H200: the GH100 die; the H200's faster HBM does not bind
attention at thousands of tokens). Another generation moves the ratio (FlashAttention-3,
arXiv:2407.08608: the H100 has 989 TFLOP/s of FP16 matmul and 3.9 TFLOP/s of exponentials; each
generation's kernels are rewritten around it), so its fraction is an estimate: the same
vendor's mean, as for every other efficiency. Not used: scaling by the ratio to the NPU's GEMM
efficiency, whose fits are of other dtypes and another library (cuBLASLt FP8/FP16 GEMMs), so the
ratio would carry two libraries' losses for one. A fit also carries its library's version
(cuDNN 9.1.1 in the H100's rows, 9.19.1 in the H200's), which no rule tells apart from the die.
The per-block overheads (``attention_block_overhead``, ``attention_backward_block_overhead``)
are carried in iterations of the block's main loop: pipeline fill and drain last a few
iterations whatever an iteration's time (the H200's and GB200's recent cuDNN fits agree in
iterations across two generations, 3.3 and 3.8 forward, 10.5 and 10.1 backward, where in
seconds they differ twofold); the H100's cuDNN 9.1.1 rows fit far less (0.5 and 5.0).

The presets carry what these rules give on the shipped corpus (``kind = "transfer"``, the note
naming the rule; a test checks the values); ``acesim validate --transfer`` applies the same
rules with the system under test's own rows withheld (:mod:`.loso`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from ..config.lineage import LINEAGE, Lineage
from ..config.npus import npu_preset_names
from ..config.presets import npu_preset_of
from .fit import datasheet_value

__all__ = [
    "LINEAGE",
    "RULES",
    "Lineage",
    "Rule",
    "Transfer",
    "lineage_of",
    "transfer",
    "unit_of",
]


@dataclass(frozen=True)
class Rule:
    """One transfer rule: its name (as preset notes cite it) and why it holds."""

    name: str
    reason: str


#: The rules, in the order they are tried (the module docstring states each).
RULES: tuple[Rule, ...] = (
    Rule(
        "same-die",
        "the same die has the same SMs, memory controllers and NVLink generation: its fitted "
        "efficiencies and latencies carry over",
    ),
    Rule(
        "same-vendor",
        "another generation of the same vendor: the mean of its fits, no generation preferred",
    ),
    Rule("any-vendor", "no fit of the vendor's: the mean of every other system's fit"),
    Rule("datasheet", "no other system fits it: the schema's default, the datasheet alone"),
)
_RULE = {r.name: r for r in RULES}


@dataclass(frozen=True)
class Transfer:
    """The value a rule gives ``parameter`` on ``preset``: ``value`` (None: the field's
    unset value, e.g. ``nvls_efficiency`` falling back to ``protocol_efficiency``), the rule,
    and the presets whose fits it drew on."""

    preset: str
    parameter: str
    value: float | None
    rule: Rule
    drawn_from: tuple[str, ...]


@lru_cache(maxsize=256)
def unit_of(preset: str) -> str:
    """The system a preset belongs to, for leaving one out: its NPU preset (an NPU preset
    itself; a system preset the NPU preset it extends); the preset itself when its NPU is
    written out in full."""
    if preset in npu_preset_names():
        return preset
    try:
        npu = npu_preset_of(preset)
    except Exception:  # a system file that does not read: its own unit (the caller reports it)
        return preset
    return npu if npu is not None else preset


def lineage_of(preset: str) -> Lineage | None:
    """The lineage of a preset's NPU (None: not in :data:`LINEAGE`)."""
    return LINEAGE.get(unit_of(preset))


def _candidates(
    preset: str, parameter: str, fits: Mapping[tuple[str, str], float]
) -> list[dict[str, float]]:
    """Fits of ``parameter`` on other systems, by preset: for one dtype's entry of a table, the
    fits of that entry, then the fits of the scalar (tried in that order within each rule)."""
    own = unit_of(preset)
    keys = [parameter]
    if parameter.startswith("npu.kernels.") and parameter.count(".") == 3:
        keys.append(parameter.rsplit(".", 1)[0])
    return [{p: v for (p, k), v in fits.items() if k == key and unit_of(p) != own} for key in keys]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _kin(rule: str, mine: Lineage | None, other: Lineage | None) -> bool:
    """``other`` counts for ``rule`` from a system of lineage ``mine``."""
    if rule == "any-vendor":
        return True
    if mine is None or other is None or other.vendor != mine.vendor:
        return False
    return rule == "same-vendor" or other.die == mine.die


def transfer(preset: str, parameter: str, fits: Mapping[tuple[str, str], float]) -> Transfer:
    """The value of ``parameter`` on ``preset`` by the first rule of :data:`RULES` with
    something to draw on, from ``fits`` ((preset, parameter) -> fitted value)."""
    mine = lineage_of(preset)
    for rule in ("same-die", "same-vendor", "any-vendor"):
        for found in _candidates(preset, parameter, fits):
            group = {p: v for p, v in found.items() if _kin(rule, mine, lineage_of(p))}
            if group:
                drawn = tuple(sorted(group))
                value = _mean([group[p] for p in drawn])
                return Transfer(preset, parameter, value, _RULE[rule], drawn)
    return Transfer(preset, parameter, datasheet_value(parameter), _RULE["datasheet"], ())
