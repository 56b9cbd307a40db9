"""Validator factories for numeric configuration fields, and the field types built from them.

One set of rules for every number of every document (system, endpoint settings, run options).
A factory returns a *check*: a callable that takes the value (already parsed: a unit string is
SI by now) and returns it, or raises :class:`ValueError` stating the rule and the value::

    positive("B/s")(0.0)       ValueError: must be positive, got 0 B/s
    at_least(1)(-4)            ValueError: must be at least 1, got -4
    in_range(0, 1, lo_open=True)(1.5)
                               ValueError: must be in (0, 1], got 1.5

The config error machinery (:mod:`acesim.config.errors`) prefixes the field's dotted path:
``network.dimensions[0].link_bandwidth: must be positive, got 0 B/s``. Checks attach to fields
with pydantic's ``AfterValidator`` (``Annotated[float, AfterValidator(positive())]``); the types
at the bottom of this module do that for every rule the documents use, and a settings model of
a new endpoint kind should use them too. Combine checks with :func:`all_of`.

Finite numbers only. Every check rejects nan, and +/-inf unless it is made with
``allow_inf=True``; no field of acesim's documents allows inf (none needs "unbounded": an
optional field uses None for that). A non-finite value is reported the same way by every rule
and every type, ``must be a finite number, got nan`` (the words of the unit parser for
``"1e999 GB/s"``, so a physical field and a plain number say the same); only a finite value is
compared with the rule's bounds.

Booleans are not numbers: pydantic's lax mode would read ``size = true`` as 1, the types here
refuse it (``must be a whole number, got True``). Counts are bounded (:data:`MAX_COUNT`,
:data:`MAX_NPUS`) so that a huge integer is an error rather than an overflow later on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator

from ..errors import short_repr
from ..precision import DTYPES, PRECISIONS
from ..registry import Registry
from .errors import FieldRuleError
from .quantities import (
    Bytes,
    BytesPerSecond,
    FlopsPerSecond,
    JoulesPerByte,
    JoulesPerFlop,
    Seconds,
    Watts,
)

__all__ = [
    "MAX_COUNT",
    "MAX_NPUS",
    "MAX_DIMENSION_SIZE",
    "DimensionSize",
    "Check",
    "show_number",
    "finite",
    "positive",
    "non_negative",
    "at_least",
    "at_most",
    "in_range",
    "all_of",
    "whole_number",
    "real_number",
    "PositiveInt",
    "NonNegativeInt",
    "NpuCount",
    "PositiveFloat",
    "NonNegativeFloat",
    "Fraction01",
    "PositiveFraction",
    "ProperFraction",
    "PositiveBytes",
    "PositiveBytesPerSecond",
    "NonNegativeSeconds",
    "PositiveFlopsPerSecond",
    "PositiveWatts",
    "NonNegativeWatts",
    "NonNegativeJoulesPerByte",
    "NonNegativeJoulesPerFlop",
]

N = TypeVar("N", int, float)

#: Largest count a document may give (units, links, chunks, iterations, batch ...): 2**53, above
#: which an integer is no longer exact as a float (counts are multiplied by rates and sizes).
MAX_COUNT = 2**53

#: Largest number of NPUs, per dimension and in all: 2**32 (about 4.3e9). The largest training
#: machines hold on the order of 1e5 accelerators, so this leaves four orders of magnitude of
#: headroom while every rank stays a 32-bit number and every product of an NPU count with a
#: size or a rate stays far from float overflow; a larger count is a typo, never a machine.
MAX_NPUS = 2**32

#: Largest size of one network dimension: 2**20 (about 1e6). An algorithm plans a step per
#: member of a dimension (a ring's ``p - 1``, a chain's ``pieces + p - 2``, an all-to-all's
#: ``p - 1`` messages of distinct sizes), so a dimension of 2**31 would need hundreds of GB
#: before time starts (a MemoryError, not an answer); 2**20 keeps a phase's plan near a million
#: steps while the largest fabrics join on the order of 1e4-1e5 nodes on one dimension.
MAX_DIMENSION_SIZE = 2**20


def show_number(value: object, unit: str = "") -> str:
    """``value`` as a message shows it: ``0``, ``1.5``, ``-5e-09``, ``nan``; a finite float
    with ``unit`` appended (``0 B/s``); an integer too long to print by its length."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return short_repr(value)
    if isinstance(value, int):
        text = short_repr(value)
    else:
        text = f"{value:g}"
        if math.isfinite(value) and float(text) != value:
            text = repr(value)  # %g lost digits: 1.0000001 must not read as 1
    if unit and text[-1:].isdigit():  # a finite number, not "-inf" or "<integer of about ...>"
        text += f" {unit}"
    return text


@dataclass(frozen=True, repr=False)
class Check:
    """One numeric rule: ``test(value)`` must hold; ``phrase`` states it (``must be
    positive``). Calling the check returns the value or raises :class:`ValueError`."""

    phrase: str
    test: Callable[[float], bool]
    unit: str = ""
    allow_inf: bool = False

    def __call__(self, value: N) -> N:
        if isinstance(value, float) and not math.isfinite(value):
            if math.isnan(value) or not self.allow_inf:
                raise ValueError(f"must be a finite number, got {show_number(value)}")
        if not self.test(value):
            raise ValueError(f"{self.phrase}, got {show_number(value, self.unit)}")
        return value

    def __repr__(self) -> str:
        return f"<check: {self.phrase}{' (inf allowed)' if self.allow_inf else ''}>"


@dataclass(frozen=True, repr=False)
class _AllOf:
    checks: tuple[Callable[[Any], Any], ...]

    def __call__(self, value: N) -> N:
        for check in self.checks:
            value = check(value)
        return value

    def __repr__(self) -> str:
        return f"<all of: {', '.join(map(repr, self.checks))}>"


def _bound(value: float) -> str:
    return show_number(value)


def finite(unit: str = "") -> Check:
    """The value is a finite number (not nan, not +/-inf)."""
    return Check("must be a finite number", math.isfinite, unit)


def positive(unit: str = "", *, allow_inf: bool = False) -> Check:
    """``value > 0`` (and finite): ``must be positive, got 0 B/s``."""
    return Check("must be positive", lambda v: v > 0, unit, allow_inf)


def non_negative(unit: str = "", *, allow_inf: bool = False) -> Check:
    """``value >= 0`` (and finite): ``must not be negative, got -5e-09 s``."""
    return Check("must not be negative", lambda v: v >= 0, unit, allow_inf)


def at_least(bound: float, unit: str = "", *, allow_inf: bool = False) -> Check:
    """``value >= bound`` (and finite): ``must be at least 1, got 0``."""
    return Check(f"must be at least {_bound(bound)}", lambda v: v >= bound, unit, allow_inf)


def at_most(bound: float, unit: str = "", *, allow_inf: bool = False) -> Check:
    """``value <= bound`` (and finite): ``must be at most 4294967296, got 8589934592``."""
    return Check(f"must be at most {_bound(bound)}", lambda v: v <= bound, unit, allow_inf)


def in_range(
    lo: float,
    hi: float,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    unit: str = "",
) -> Check:
    """``lo <= value <= hi``, either end excluded with ``lo_open``/``hi_open``: ``in_range(0, 1,
    lo_open=True)`` is ``must be in (0, 1], got 1.5``. The bounds are finite, so the value is."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"in_range needs finite bounds lo <= hi, got {lo!r}, {hi!r}")
    text = f"{'(' if lo_open else '['}{_bound(lo)}, {_bound(hi)}{')' if hi_open else ']'}"

    def test(v: float) -> bool:
        above = v > lo if lo_open else v >= lo
        below = v < hi if hi_open else v <= hi
        return above and below

    return Check(f"must be in {text}", test, unit)


def all_of(*checks: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Every check in turn (the first one broken is reported)."""
    return checks[0] if len(checks) == 1 else _AllOf(tuple(checks))


_INTEGER_TEXT = re.compile(r"\s*[-+]?\d+\s*")


def _plain(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be {what}, got {value!r}")
        number = value
        if isinstance(value, str) and not _INTEGER_TEXT.fullmatch(value):
            try:
                number = float(value)
            except ValueError:
                return value  # pydantic says what is wrong with it
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(f"must be a finite number, got {show_number(value)}")
        return value

    return check


def whole_number() -> Callable[[Any], Any]:
    """Before-validator of an int field: refuse booleans (pydantic's lax mode reads ``true``
    as 1) and non-finite numbers (nan, ``"1e999"``) in the words of the other rules; the rest
    is left to pydantic's int parsing."""
    return _plain("a whole number")


def real_number() -> Callable[[Any], Any]:
    """Before-validator of a float field: refuse booleans, and report a text that reads as a
    non-finite number (``"1e999"``) as given, not as the inf it would become."""
    return _plain("a number")


# -- field types -----------------------------------------------------------------------------
# Plain numbers (no unit).

#: a count of at least 1 (units, links, chunks, iterations, batch ...), at most MAX_COUNT
PositiveInt = Annotated[
    int, BeforeValidator(whole_number()), AfterValidator(all_of(at_least(1), at_most(MAX_COUNT)))
]
#: a count of at least 0 (warm-up iterations), at most MAX_COUNT
NonNegativeInt = Annotated[
    int,
    BeforeValidator(whole_number()),
    AfterValidator(all_of(non_negative(), at_most(MAX_COUNT))),
]
#: a number of NPUs (a dimension's size, a network's size): 1 to MAX_NPUS
NpuCount = Annotated[
    int, BeforeValidator(whole_number()), AfterValidator(all_of(at_least(1), at_most(MAX_NPUS)))
]
#: the size of one network dimension: 1 to MAX_DIMENSION_SIZE
DimensionSize = Annotated[
    int,
    BeforeValidator(whole_number()),
    AfterValidator(all_of(at_least(1), at_most(MAX_DIMENSION_SIZE))),
]
#: a finite number above 0 (weights, bytes per byte)
PositiveFloat = Annotated[float, BeforeValidator(real_number()), AfterValidator(positive())]
#: a finite number of at least 0
NonNegativeFloat = Annotated[float, BeforeValidator(real_number()), AfterValidator(non_negative())]
#: a fraction in [0, 1]
Fraction01 = Annotated[float, BeforeValidator(real_number()), AfterValidator(in_range(0, 1))]
#: a fraction in (0, 1] (an efficiency)
PositiveFraction = Annotated[
    float, BeforeValidator(real_number()), AfterValidator(in_range(0, 1, lo_open=True))
]
#: a fraction in (0, 1) (a share that leaves something to the other side)
ProperFraction = Annotated[
    float,
    BeforeValidator(real_number()),
    AfterValidator(in_range(0, 1, lo_open=True, hi_open=True)),
]

# Physical quantities: a unit string or a number in SI base units, parsed by acesim.units (which
# already refuses booleans and non-finite results); the rule's message names the base unit.

#: bytes, above 0
PositiveBytes = Annotated[Bytes, AfterValidator(positive("B"))]
#: bytes per second, above 0
PositiveBytesPerSecond = Annotated[BytesPerSecond, AfterValidator(positive("B/s"))]
#: seconds, at least 0
NonNegativeSeconds = Annotated[Seconds, AfterValidator(non_negative("s"))]
#: FLOP per second, above 0
PositiveFlopsPerSecond = Annotated[FlopsPerSecond, AfterValidator(positive("FLOP/s"))]
#: watts, above 0
PositiveWatts = Annotated[Watts, AfterValidator(positive("W"))]
#: watts, at least 0
NonNegativeWatts = Annotated[Watts, AfterValidator(non_negative("W"))]
#: joules per byte, at least 0
NonNegativeJoulesPerByte = Annotated[JoulesPerByte, AfterValidator(non_negative("J/B"))]
#: joules per FLOP, at least 0
NonNegativeJoulesPerFlop = Annotated[JoulesPerFlop, AfterValidator(non_negative("J/FLOP"))]


def registered(registry: Registry[Any]) -> Callable[[str | None], str | None]:
    """A check that a name (or None) is registered in ``registry``: the registry's own rule
    and did-you-mean hint otherwise."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in registry:
            err = registry.unknown(value)
            raise FieldRuleError("", err.rule, value, hint=err.hint)
        return value

    return check


PrecisionName = Annotated[str | None, AfterValidator(registered(PRECISIONS))]
"""A training precision's name (:data:`acesim.precision.PRECISIONS`), or None."""


def dtype_table(what: str) -> Callable[[dict[str, float]], dict[str, float]]:
    """A validator of a table keyed by dtype (``acesim.precision.DTYPES``): at least one
    entry (``must list at least one dtype's <what>``), every key a known dtype."""

    def check(value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError(f"must list at least one dtype's {what}")
        for name in value:
            if name not in DTYPES:
                err = DTYPES.unknown(name)
                raise FieldRuleError(name, f"unknown dtype; {err.rule}", hint=err.hint)
        return value

    return check
