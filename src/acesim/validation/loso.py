"""Leave one system out: the parameters a system gets when none of its own rows is fitted.

A *system* here is everything measured on one NPU (:func:`.transfer.unit_of`: the NPU preset,
and every system preset built on it), so holding out H100 withholds the H100 kernel fits and
the H100 node's collective fits alike. Its *world* (:func:`held_out_world`) is what every
fitted parameter is with that system's rows gone:

* every other preset's fitted parameters are fitted again on its own fit rows
  (:func:`.fit.fit_preset`), its other parameters as this world gives them (a fit on GB200
  rows that used the H100 HBM efficiency now uses whatever the GB200 gets without the H100);
* every parameter of the held-out system that was fitted on its rows, and every parameter a
  preset carries by a transfer rule (``kind = "transfer"``), is what the rules of
  :mod:`.transfer` give from those refitted values;
* the two steps repeat until no fitted value moves (a part in 10^6): fits feed transfers,
  which feed other fits.

The held-out system's rows are then simulated with its world applied
(:meth:`World.adjust`), by the same evaluation as the in-sample run.

Fits are cached per preset and per the values its fit rows depend on (to four significant
digits, as presets carry them), seeded with the presets' own values: a preset whose inputs
this world leaves as they are is not fitted again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config.system import SystemConfig
from ..errors import AcesimError
from .corpus import Case, Corpus, Family
from .evaluate import system_of
from .fit import FIT_RANGES, fit_preset, value_at, with_value
from .transfer import Transfer, transfer, unit_of

__all__ = [
    "Key",
    "Presets",
    "World",
    "held_out_world",
    "in_sample_world",
    "new_cache",
    "refit_world",
]

#: (preset, dotted parameter path): a parameter of one preset. Kernel-model parameters
#: (``npu.*``) belong to the NPU preset, every other one to the system preset.
Key = tuple[str, str]

_ROUNDS = 8


def owner(preset: str, parameter: str) -> str:
    """The preset a parameter of ``preset``'s systems belongs to (see :data:`Key`)."""
    return unit_of(preset) if parameter.startswith("npu.") else preset


def fittable(parameter: str) -> bool:
    """A parameter :mod:`.fit` can fit (one dtype's entry of a table included)."""
    if parameter in FIT_RANGES:
        return True
    return parameter.count(".") == 3 and parameter.rsplit(".", 1)[0] in FIT_RANGES


@dataclass
class Presets:
    """The corpus's presets: which parameters each fits (on which rows) and carries by a
    transfer rule, and their shipped values."""

    corpus: Corpus
    fitted: dict[Key, tuple[str, ...]] = field(default_factory=dict)
    transferred: list[Key] = field(default_factory=list)
    shipped: dict[Key, float | None] = field(default_factory=dict)
    _systems: dict[str, SystemConfig] = field(default_factory=dict)

    @classmethod
    def of(cls, corpus: Corpus) -> Presets:
        """Read the fit rows and the sources of every preset a live row names."""
        out = cls(corpus)
        rows: dict[Key, list[str]] = {}
        for family in corpus.families.values():
            for case in family.cases:
                if case.status != "live":
                    continue
                try:
                    system = out._system(case, family)
                except AcesimError:  # the row reports it (status error)
                    continue
                for parameter in case.fits:
                    rows.setdefault((case.system, parameter), []).append(case.id)
                for path, source in system.sources.items():
                    if source.kind == "transfer" and fittable(path):
                        key = (owner(case.system, path), path)
                        if key not in out.transferred:
                            out.transferred.append(key)
                            out.shipped[key] = value_at(system, path)
        for key, ids in rows.items():
            out.fitted[key] = tuple(ids)
            out.shipped[key] = value_at(out._systems[key[0]], key[1])
        return out

    def _system(self, case: Case, family: Family) -> SystemConfig:
        if case.system not in self._systems:
            self._systems[case.system] = system_of(case, family)
        return self._systems[case.system]

    def fit_presets(self) -> list[str]:
        """Presets with fit rows, NPU presets first."""
        names = sorted({p for p, _ in self.fitted})
        return sorted(names, key=lambda p: (unit_of(p) != p, p))

    def shipped_fits(self) -> dict[Key, float]:
        return {k: v for k, v in self.shipped.items() if k in self.fitted and v is not None}


@dataclass(frozen=True)
class World:
    """Every fitted or transferred parameter's value with ``held_out``'s rows withheld
    (None: in sample), and how each got it."""

    held_out: str | None
    values: dict[Key, float | None]
    how: dict[Key, str]
    rounds: int = 0

    def adjust(self, preset: str) -> Callable[[SystemConfig], SystemConfig]:
        """Set this world's values on a system of ``preset`` (its own parameters and its NPU
        preset's)."""
        mine = {k: v for k, v in self.values.items() if k[0] in (preset, unit_of(preset))}
        return _setter(mine)

    def of_system(self, unit: str) -> dict[Key, tuple[float | None, str]]:
        """The values and origins of the parameters of one system's presets."""
        return {k: (v, self.how[k]) for k, v in self.values.items() if unit_of(k[0]) == unit}


def _setter(values: Mapping[Key, float | None]) -> Callable[[SystemConfig], SystemConfig]:
    def adjust(system: SystemConfig) -> SystemConfig:
        for (_, parameter), value in sorted(values.items()):
            system = with_value(system, parameter, value)
        return system

    return adjust


def _sig(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def _described(t: Transfer) -> str:
    drawn = f" from {', '.join(t.drawn_from)}" if t.drawn_from else ""
    return f"transfer {t.rule.name}{drawn}"


class _Fits:
    """Fits per (preset, inputs), seeded with the shipped values (see the module)."""

    def __init__(self, presets: Presets):
        self.presets = presets
        self.cache: dict[tuple[str, tuple[tuple[Key, float | None], ...]], dict[Key, float]] = {}
        #: called with a preset's name before it is fitted (not when its fit is cached): a
        #: held-out world refits many presets, tens of CPU seconds before any row is simulated
        self.on_fit: Callable[[str], Any] | None = None

    def inputs(self, preset: str, world: Mapping[Key, float | None]) -> dict[Key, float | None]:
        own = {k for k in self.presets.fitted if k[0] == preset}
        mine = (preset, unit_of(preset))
        return {k: v for k, v in world.items() if k[0] in mine and k not in own}

    def get(self, preset: str, inputs: Mapping[Key, float | None]) -> dict[Key, float]:
        key = (preset, tuple(sorted((k, _sig(v)) for k, v in inputs.items())))
        if key not in self.cache:
            if self.on_fit is not None:
                self.on_fit(preset)
            fits = fit_preset(preset, self.presets.corpus, adjust=_setter(inputs))
            self.cache[key] = {(preset, f.parameter): f.value for f in fits}
        return self.cache[key]

    def seed(self, world: Mapping[Key, float | None], fits: Mapping[Key, float]) -> None:
        for preset in self.presets.fit_presets():
            inputs = self.inputs(preset, world)
            key = (preset, tuple(sorted((k, _sig(v)) for k, v in inputs.items())))
            self.cache[key] = {k: v for k, v in fits.items() if k[0] == preset}


def _transfers(
    targets: Iterable[Key], fits: Mapping[Key, float]
) -> tuple[dict[Key, float | None], dict[Key, str]]:
    values: dict[Key, float | None] = dict(fits)
    how = {k: f"fit on {k[0]}'s rows" for k in fits}
    for preset, parameter in targets:
        t = transfer(preset, parameter, fits)
        values[(preset, parameter)] = t.value
        how[(preset, parameter)] = _described(t)
    return values, how


def in_sample_world(presets: Presets) -> World:
    """The shipped fits, with every transferred parameter as the rules give it from them."""
    values, how = _transfers(presets.transferred, presets.shipped_fits())
    return World(None, values, how)


def _moved(old: Mapping[Key, float], new: Mapping[Key, float]) -> bool:
    if old.keys() != new.keys():
        return True
    return any(not math.isclose(old[k], new[k], rel_tol=1e-6, abs_tol=1e-15) for k in new)


def held_out_world(unit: str, presets: Presets, cache: _Fits | None = None) -> World:
    """The world of the system ``unit`` (an NPU preset, :func:`.transfer.unit_of`) with its
    own rows withheld (see the module)."""
    if cache is None:
        cache = _Fits(presets)
        shipped = in_sample_world(presets)
        cache.seed(shipped.values, presets.shipped_fits())
    fits = {k: v for k, v in presets.shipped_fits().items() if unit_of(k[0]) != unit}
    own = [k for k in presets.fitted if unit_of(k[0]) == unit]
    targets = list(dict.fromkeys([*presets.transferred, *own]))
    others = [p for p in presets.fit_presets() if unit_of(p) != unit]
    rounds = 0
    while True:
        values, how = _transfers(targets, fits)
        rounds += 1
        new: dict[Key, float] = {}
        for preset in others:
            new.update(cache.get(preset, cache.inputs(preset, values)))
        if not _moved(fits, new) or rounds >= _ROUNDS:
            fits = new
            break
        fits = new
    values, how = _transfers(targets, fits)
    return World(unit, values, how, rounds)


def new_cache(presets: Presets) -> _Fits:
    """A fit cache seeded with the shipped values, shared by several worlds."""
    cache = _Fits(presets)
    cache.seed(in_sample_world(presets).values, presets.shipped_fits())
    return cache


def refit_world(presets: Presets) -> World:
    """Every fit computed again from the corpus (nothing seeded from the presets, nothing
    held out) and every transfer from those fits, to a fixed point: the values the presets
    should carry (``scripts/fit_presets.py --transfers``)."""
    return held_out_world("", presets, _Fits(presets))
