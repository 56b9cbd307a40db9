"""Fitting kernel-model and collective parameters on the corpus rows marked ``fit = true``.

A fit row names the parameters it fits (``fits = ["npu.kernels.gemm_efficiency"]``, or one
dtype's entry of a per-dtype table, ``npu.kernels.gemm_efficiency.fp32``). For an NPU
preset, :func:`fit_npu` solves, one parameter per row, for the value at which the simulated
figure equals the measured one, by Brent's method on the range where it changes sign
(``scipy.optimize.brentq``: each figure is monotonic in its parameter, a higher efficiency is
faster, a higher penalty or latency slower; Brent's method falls back to bisection where the
figure is not smooth, and takes a few tries where it is: a fit of a collective or an LLM row
costs a simulation a try). Parameters interact a little
(the GEMM rows move HBM bytes, the STREAM rows pay a latency), so the rows are solved in turn
until no value moves by more than a part in 10^6.

For a system preset, :func:`fit_collective` does the same for the collective parameters its
rows fit (``collective.protocol_efficiency``: the ring's large-message plateau, on a
bandwidth-bound row; ``collective.nvls_efficiency``: the large-message plateau of NVLS
all-reduce, on a bandwidth-bound row; ``collective.nvls_delay``: its per-step latency, on a
row where latency and bandwidth weigh about equally; the copy engines' bandwidth and setups
and a switch's incast efficiency), the root found on simulated collectives.

A system preset's LLM row may fit the framework's host ops per kernel launch
(``host.ops_per_launch``, :data:`HOST_FITS`; :mod:`acesim.training.host`) on its throughput,
the preset's measured per-op host time (``host.op_time``) given: :func:`fit_preset` fits it
with the rest (each try a whole LLM simulation, seconds).

The values the NPU and system presets carry are these fits, rounded to four significant
digits; a test checks that the presets still match what this module computes from the
corpus, and every other row of the corpus is a test row (docs/validation.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticUndefined
from scipy.optimize import brentq

from ..config.endpoint import EndpointConfig
from ..config.resolve import derive, resolve_system
from ..config.system import (
    CollectiveConfig,
    DimensionConfig,
    HostConfig,
    KernelModelConfig,
    ProtocolConfig,
    SystemConfig,
)
from ..errors import ConfigError
from .corpus import Case, Corpus, Family, load_corpus
from .evaluate import simulate_case, system_of

__all__ = [
    "FIT_RANGES",
    "HOST_FITS",
    "Fit",
    "datasheet_value",
    "fit_collective",
    "fit_host",
    "fit_npu",
    "fit_preset",
    "fit_rows",
    "value_at",
    "with_value",
]

#: Parameters a fit row may fit, and the range searched.
FIT_RANGES: dict[str, tuple[float, float]] = {
    "npu.kernels.gemm_efficiency": (1e-3, 1.0),
    "npu.kernels.attention_efficiency": (1e-3, 1.0),
    "npu.kernels.attention_backward_efficiency": (1e-3, 1.0),
    "npu.kernels.attention_block_overhead": (0.0, 100.0),
    "npu.kernels.attention_backward_block_overhead": (0.0, 100.0),
    "npu.kernels.hbm_efficiency": (1e-3, 1.0),
    "npu.kernels.write_penalty": (0.0, 10.0),
    "npu.kernels.latency": (0.0, 1e-3),
    "collective.protocol_efficiency": (1e-3, 1.0),
    "collective.endpoint_delay": (0.0, 1e-3),
    "collective.nvls_efficiency": (1e-3, 1.0),
    "collective.nvls_delay": (0.0, 1e-3),
    "collective.nvls_loop_latency": (0.0, 1e-3),
    "endpoint.copy_engine.engine_bandwidth": (1e9, 1e13),
    "endpoint.copy_engine.setup": (0.0, 1e-3),
    "endpoint.copy_engine.command_setup": (0.0, 1e-4),
    "endpoint.copy_engine.local_copy_bandwidth": (1e6, 1e13),
    "network.dimensions[0].incast_efficiency": (1e-3, 1.0),
    "host.ops_per_launch": (0.0, 100.0),
}
for _proto in ("LL", "LL128", "Simple"):
    for _algo in ("ring", "nvls", "double_binary_tree"):
        FIT_RANGES[f"collective.protocols.{_algo}.{_proto}.base_latency"] = (0.0, 1e-3)
        FIT_RANGES[f"collective.protocols.{_algo}.{_proto}.hop_latency"] = (0.0, 1e-3)

#: The collective parameters :func:`fit_collective` fits (the others are set by hand).
COLLECTIVE_FITS = (
    "collective.protocol_efficiency",
    "collective.endpoint_delay",
    "collective.nvls_efficiency",
    "collective.nvls_delay",
    "collective.nvls_loop_latency",
    "collective.protocols.",
    "endpoint.copy_engine.",
    "network.dimensions[",
)


#: The host parameters a system preset's LLM rows may fit (:mod:`acesim.training.host`): the
#: framework's host ops per launch, fitted on a training row's throughput (monotonic: more host
#: time per launch is slower where the host sets the pace).
HOST_FITS = ("host.ops_per_launch",)
#: How closely a host fit is solved (relative to the value): each try is an LLM simulation.
HOST_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Fit:
    """One fitted parameter: its value, the row it was fitted on, and that row's figures."""

    parameter: str
    value: float
    case: str
    measured: float
    simulated: float


def fit_rows(
    corpus: Corpus, preset: str, prefixes: tuple[str, ...] = ("npu.kernels.",)
) -> list[tuple[Case, str]]:
    """(case, parameter) of every parameter starting with one of ``prefixes`` (kernel-model
    parameters by default) fitted on the rows of ``preset``."""
    out: list[tuple[Case, str]] = []
    for family in corpus.families.values():
        for case in family.cases:
            if case.fit and case.system == preset:
                out.extend((case, p) for p in case.fits if p.startswith(prefixes))
    return out


def _range(parameter: str) -> tuple[float, float]:
    """The search range of ``parameter``; a per-dtype entry (``gemm_efficiency.fp32``) takes
    its table's."""
    base = parameter.rsplit(".", 1)[0] if parameter.count(".") == 3 else parameter
    if base not in FIT_RANGES:
        raise KeyError(parameter)
    return FIT_RANGES[base]


def _walk(data: Any, parameter: str) -> Any:
    """The value at dotted ``parameter`` (``a.b[0].c``) of a dumped document (KeyError else)."""
    for part in parameter.split("."):
        name, _, index = part.partition("[")
        data = data[name]
        if index:
            data = data[int(index.rstrip("]"))]
    return data


def value_at(system: SystemConfig, parameter: str) -> float | None:
    """The value ``system`` gives a fittable ``parameter`` (one dtype's entry of a per-dtype
    table, or the one value a scalar gives every dtype); KeyError for a path it lacks."""
    doc = system.model_dump(mode="python")
    if parameter.startswith("npu.kernels.") and parameter.count(".") == 3:
        base, dtype = parameter.rsplit(".", 1)
        table = _walk(doc, base)
        value = table[dtype] if isinstance(table, dict) else table
    else:
        value = _walk(doc, parameter)
    return None if value is None else float(value)


def datasheet_value(parameter: str) -> float | None:
    """What a fittable ``parameter`` is with nothing fitted or carried: the field's default in
    the system schema (the ideal machine for the kernel efficiencies, latencies and penalties:
    every kernel at its roofline; see each field's description). A per-dtype entry takes the
    table's scalar default."""
    if parameter.startswith("npu.kernels."):
        name = parameter.removeprefix("npu.kernels.").split(".")[0]
        return _optional(KernelModelConfig.model_validate({}).model_dump()[name])
    if parameter.startswith("collective.protocols."):
        name = parameter.rsplit(".", 1)[1]
        default = ProtocolConfig.model_fields[name].get_default()
        if default is PydanticUndefined:  # a field every protocol table states
            raise KeyError(parameter)
        return _optional(default)
    if parameter.startswith("collective."):
        name = parameter.removeprefix("collective.")
        return _optional(CollectiveConfig.model_validate({}).model_dump()[name])
    if parameter.startswith("network.dimensions["):
        name = parameter.split("].", 1)[1]
        return _optional(DimensionConfig.model_fields[name].get_default(call_default_factory=True))
    if parameter.startswith("endpoint."):
        return _optional(_walk(EndpointConfig.model_validate({}).model_dump(), parameter[9:]))
    if parameter.startswith("host."):  # None: the host not modelled
        return _optional(_walk(HostConfig.model_validate({}).model_dump(), parameter[5:]))
    raise KeyError(parameter)


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def with_value(system: SystemConfig, parameter: str, value: float | None) -> SystemConfig:
    """``system`` with a fittable ``parameter`` set to ``value`` (None: the field's None, where
    it has one, e.g. ``collective.nvls_efficiency``,
    ``endpoint.copy_engine.local_copy_bandwidth``)."""
    if value is None and parameter.startswith(("network.", "endpoint.")):
        if datasheet_value(parameter) is not None:
            raise ConfigError(parameter, "has no unset value")
        return resolve_system(system, overrides={parameter: None})
    return _with(system, parameter, value)  # type: ignore[arg-type]


def _with(system: SystemConfig, parameter: str, value: float) -> SystemConfig:
    if parameter.startswith("collective."):
        return derive(system, {parameter: value})
    if not parameter.startswith("npu.kernels."):  # endpoint settings, dimensions
        return resolve_system(system, overrides={parameter: value})
    field = parameter.removeprefix("npu.kernels.")
    if "." not in field:
        return derive(system, {parameter: value})
    # one dtype's entry of a per-dtype table (a single value for every dtype becomes a table)
    name, dtype = field.split(".")
    current = getattr(system.npu.kernels, name)
    table = dict(current) if isinstance(current, dict) else {}
    return derive(system, {f"npu.kernels.{name}": {**table, dtype: value}})


def fit_npu(npu_preset: str, corpus: Corpus | None = None, *, rounds: int = 20) -> list[Fit]:
    """Fit the kernel-model parameters of ``npu_preset`` on its fit rows (see the module)."""
    corpus = corpus if corpus is not None else load_corpus()
    rows = fit_rows(corpus, npu_preset)
    if not rows:
        raise ConfigError("npu", "has no fit rows in the validation corpus", npu_preset)
    return _fit(corpus, rows, rounds)


def fit_collective(
    system_preset: str, corpus: Corpus | None = None, *, rounds: int = 20
) -> list[Fit]:
    """Fit the collective parameters (:data:`COLLECTIVE_FITS`) of ``system_preset`` on its fit
    rows (see the module)."""
    corpus = corpus if corpus is not None else load_corpus()
    rows = fit_rows(corpus, system_preset, COLLECTIVE_FITS)
    if not rows:
        raise ConfigError(
            "system", "has no collective fit rows in the validation corpus", system_preset
        )
    return _fit(corpus, rows, rounds)


def fit_host(system_preset: str, corpus: Corpus | None = None, *, rounds: int = 20) -> list[Fit]:
    """Fit the host parameters (:data:`HOST_FITS`) of ``system_preset`` on its LLM fit rows,
    its other parameters as the preset ships them (see the module; minutes: each try is an LLM
    simulation)."""
    corpus = corpus if corpus is not None else load_corpus()
    rows = fit_rows(corpus, system_preset, HOST_FITS)
    if not rows:
        raise ConfigError("system", "has no host fit rows in the validation corpus", system_preset)
    return _fit(corpus, rows, rounds)


def fit_preset(
    preset: str,
    corpus: Corpus | None = None,
    *,
    adjust: Callable[[SystemConfig], SystemConfig] | None = None,
    rounds: int = 20,
) -> list[Fit]:
    """Fit every parameter the corpus rows of ``preset`` fit (kernel-model and collective
    parameters alike), on the preset's system changed by ``adjust`` first (the values a
    leave-one-system-out world gives its other parameters, :mod:`.loso`); [] when the preset
    has no fit rows."""
    corpus = corpus if corpus is not None else load_corpus()
    rows = fit_rows(corpus, preset, ("npu.kernels.", *COLLECTIVE_FITS, *HOST_FITS))
    return _fit(corpus, rows, rounds, adjust) if rows else []


def _fit(
    corpus: Corpus,
    rows: list[tuple[Case, str]],
    rounds: int,
    adjust: Callable[[SystemConfig], SystemConfig] | None = None,
) -> list[Fit]:
    families = {c.id: f for f in corpus.families.values() for c in f.cases}
    system = system_of(rows[0][0], families[rows[0][0].id])
    if adjust is not None:
        system = adjust(system)
    values: dict[str, float] = {}
    for _ in range(rounds):
        moved = 0.0
        for case, parameter in rows:
            try:
                low, high = _range(parameter)
            except KeyError:
                raise ConfigError(
                    f"case {case.id}: fits", "is not a fittable parameter", parameter
                ) from None
            family = families[case.id]
            own = _row_system(case, family, system, values, adjust)

            def error(
                value: float,
                case: Case = case,
                parameter: str = parameter,
                family: Family = family,
                base: SystemConfig = own,
            ) -> float:
                simulated, _ = simulate_case(case, family, _with(base, parameter, value))
                return simulated - case.measured

            # Early rounds may start a row out of reach (another parameter still far from its
            # fit): it takes the nearer end of its range until the others have moved.
            # a host row is a whole LLM run a try: solved to a part in 10^7 (presets carry
            # four digits), not to the float's precision
            tol = HOST_TOLERANCE if parameter in HOST_FITS else 1e-12
            value = _root(error, low, high, f"case {case.id}: {parameter}", clamp=True, tol=tol)
            previous = values.get(parameter)
            moved = max(
                moved,
                math.inf if previous is None else abs(value - previous) / max(previous, 1e-30),
            )
            values[parameter] = value
            system = _with(system, parameter, value)
        if moved < 1e-6:
            break
    fits = []
    for case, parameter in rows:
        own = _row_system(case, families[case.id], system, values, adjust)
        simulated, _ = simulate_case(case, families[case.id], own)
        if not math.isclose(simulated, case.measured, rel_tol=1e-6):
            low, high = _range(parameter)
            raise ConfigError(
                f"case {case.id}: {parameter}",
                f"the measured figure is out of reach of this parameter between {low:g} and "
                f"{high:g} (simulated {simulated:.6g} at {values[parameter]:g})",
            )
        fits.append(Fit(parameter, values[parameter], case.id, case.measured, simulated))
    return fits


def _row_system(
    case: Case,
    family: Family,
    system: SystemConfig,
    values: dict[str, float],
    adjust: Callable[[SystemConfig], SystemConfig] | None,
) -> SystemConfig:
    """The system a fit row is simulated on: the preset's (``system``, every value fitted so
    far on it), or for a host row (an LLM run on its own node count) the row's own system with
    the same values."""
    if not any(p in HOST_FITS for p in case.fits):
        return system
    own = system_of(case, family)
    if adjust is not None:
        own = adjust(own)
    for parameter, value in values.items():
        own = _with(own, parameter, value)
    return own


def _root(
    error: Callable[[float], float],
    low: float,
    high: float,
    where: str,
    *,
    clamp: bool = False,
    tol: float = 1e-12,
) -> float:
    """The root of ``error`` between ``low`` and ``high`` (it changes sign there), to a part
    in ``1 / tol`` of its value (Brent's method, module); with ``clamp``, the end nearer a root
    when there is none."""
    e_low, e_high = error(low), error(high)
    if (e_low > 0) == (e_high > 0):
        if clamp:
            return low if abs(e_low) < abs(e_high) else high
        raise ConfigError(
            where,
            f"the measured figure is out of reach of this parameter between {low:g} and {high:g}",
        )
    known = {low: e_low, high: e_high}  # brentq evaluates the ends again: not simulated twice

    def remembered(value: float) -> float:
        found = known.get(value)
        return error(value) if found is None else found

    try:
        root: float = brentq(
            remembered, low, high, xtol=tol * 1e-12, rtol=max(tol, 4e-16), maxiter=200
        )
        return root
    except RuntimeError:  # not converged (a figure with steps): bisection, which always is
        pass
    for _ in range(200):
        mid = 0.5 * (low + high)
        e_mid = remembered(mid)
        if (e_mid > 0) == (e_low > 0):
            low, e_low = mid, e_mid
        else:
            high = mid
        if high - low <= tol * max(abs(high), 1e-12):
            break
    return 0.5 * (low + high)
