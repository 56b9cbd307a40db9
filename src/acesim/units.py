"""Physical quantities written by people, parsed once to SI base units.

Conventions (stated once, used everywhere):

* sizes are bytes. Binary prefixes are explicit (``KiB`` = 2**10, ``MiB``, ``GiB``, ``TiB``);
  decimal prefixes are decimal (``KB`` = 1e3, ``MB``, ``GB``, ``TB``). ``B`` is one byte.
* rates are bytes per second with *decimal* prefixes (``1 GB/s`` = 1e9 B/s, as datasheets and
  nccl-tests use); ``GiB/s`` is accepted and is binary. Bit rates, the way links and NICs are
  sold, are accepted and divided by 8: ``400 Gb/s``, ``400 Gbit/s``, ``400 Gbps`` = 50 GB/s (a
  lower-case ``b`` is a bit, an upper-case ``B`` a byte).
* times are seconds: ``s``, ``ms``, ``us`` (or ``µs``, the micro sign, or ``μs``, the Greek
  mu), ``ns``, ``ps``.
* compute rates are FLOP per second: ``TFLOP/s``, ``TFLOPS``, ``GFLOP/s`` ...
* power is watts (``700 W``, ``1.2 kW``, ``500 mW``); energy per byte moved is joules per byte
  (``24 pJ/B``), or per bit the way links and memories are quoted (``3 pJ/bit`` = 24 pJ/B);
  energy per operation is joules per FLOP (``0.33 pJ/FLOP``). These take the small decimal
  prefixes too (``m``, ``u``, ``n``, ``p``, ``f``).
* plain numbers (int/float) are taken as already in base units.

Range syntax for sweeps of sizes: ``1KiB:1GiB`` (powers of two between the bounds) or
``1KiB:1GiB:x4`` (multiply by 4 each step).
"""

from __future__ import annotations

import math
import re
from typing import Literal

from .errors import UnitError

Kind = Literal[
    "size", "rate", "time", "flop_rate", "flops", "power", "energy_per_byte", "energy_per_flop"
]

_DEC = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
#: decimal prefixes below one, for power and energies (``pJ/bit``, ``mW``)
_SMALL = {"m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "\u03bc": 1e-6, "n": 1e-9, "p": 1e-12, "f": 1e-15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_TIME = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek small letter mu
    "ns": 1e-9,
    "ps": 1e-12,
    "min": 60.0,
}

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
# ASCII digits only: Python's float() reads "٨" and "８" as 8
_PATTERN = re.compile(r"^\s*" + _NUMBER + r"\s*([A-Za-z\u00b5\u03bc/]*)\s*$", re.ASCII)

#: longer quantity text is refused before it is parsed (no quantity needs more)
_MAX_TEXT = 200

_EXAMPLES = {
    "size": "'4 MiB', '1 GB', '512 B'",
    "rate": "'25 GB/s', '1.6 TB/s', '400 Gb/s'",
    "time": "'500 ns', '1.5 us', '2 ms'",
    "flop_rate": "'125 TFLOP/s', '19.5 TFLOPS'",
    "flops": "'4.1 GFLOP', '1e9'",
    "power": "'700 W', '1.2 kW', '500 mW'",
    "energy_per_byte": "'24 pJ/B', '3.9 pJ/bit'",
    "energy_per_flop": "'0.33 pJ/FLOP', '1e-12'",
}


def _prefix(text: str, allow_binary: bool) -> float | None:
    if text in _DEC:
        return _DEC[text]
    if allow_binary and text in _BIN:
        return _BIN[text]
    return None


def _scale(unit: str, kind: Kind) -> float | None:
    if kind == "time":
        return _TIME.get(unit)
    if kind == "size":
        if unit.endswith("B") and not unit.endswith("/s"):
            return _prefix(unit[:-1], allow_binary=True)
        return None
    if kind == "rate":
        for suffix in ("B/s", "Bps"):
            if unit.endswith(suffix):
                return _prefix(unit[: -len(suffix)], allow_binary=True)
        for suffix in ("bit/s", "b/s", "bps"):
            if unit.endswith(suffix):
                scale = _prefix(unit[: -len(suffix)], allow_binary=True)
                return None if scale is None else scale / 8
        return None
    if kind == "flop_rate":
        for suffix in ("FLOP/s", "FLOPS", "flop/s", "FLOPs/s"):
            if unit.endswith(suffix):
                return _prefix(unit[: -len(suffix)], allow_binary=False)
        return None
    if kind == "flops":
        for suffix in ("FLOP", "FLOPs", "flop"):
            if unit.endswith(suffix):
                return _prefix(unit[: -len(suffix)], allow_binary=False)
        return None
    return _energy_scale(unit, kind)


def _small_prefix(text: str) -> float | None:
    """A decimal prefix, below one included (``p``, ``n``, ``m``: energies and power)."""
    return _SMALL[text] if text in _SMALL else _prefix(text, allow_binary=False)


def _energy_scale(unit: str, kind: Kind) -> float | None:
    """Scales of power (``W``), energy per byte (``J/B``, ``J/bit`` x 8) and per FLOP."""
    units: dict[str, tuple[tuple[str, float], ...]] = {
        "power": (("W", 1.0),),
        "energy_per_byte": (("J/B", 1.0), ("J/byte", 1.0), ("J/bit", 8.0), ("J/b", 8.0)),
        "energy_per_flop": (("J/FLOP", 1.0), ("J/flop", 1.0)),
    }
    for suffix, factor in units.get(kind, ()):
        if unit.endswith(suffix):
            scale = _small_prefix(unit[: -len(suffix)])
            return None if scale is None else scale * factor
    return None


def parse_quantity(value: object, kind: Kind, field: str = "value") -> float:
    """Parse ``value`` ("900 GB/s", "4 MiB", 1e9 ...) to SI base units of ``kind``.

    Raises :class:`UnitError` naming ``field`` when the text is malformed or too long, the unit
    unknown or of another kind (a rate where a size is expected), or the result is not a finite
    float: for every input (``nan``, ``"inf"``, ``"1e999"``, ``"1e308 TB/s"``, an integer
    beyond the float range).
    """
    if isinstance(value, bool):
        raise UnitError(field, f"expected a {kind} such as {_EXAMPLES[kind]}", value)
    if isinstance(value, (int, float)):
        return _finite(value, 1.0, field, value)
    if not isinstance(value, str):
        raise UnitError(field, f"expected a {kind} such as {_EXAMPLES[kind]}", value)
    if len(value) > _MAX_TEXT:
        raise UnitError(field, f"must be at most {_MAX_TEXT} characters long", value)
    match = _PATTERN.match(value)
    if not match:
        raise UnitError(field, f"expected a {kind} such as {_EXAMPLES[kind]}", value)
    number_text, unit = match.groups()
    scale = 1.0 if unit == "" else _scale(unit, kind)
    if scale is None:
        raise UnitError(
            field, f"unknown {kind} unit {unit!r}; use one like {_EXAMPLES[kind]}", value
        )
    return _finite(float(number_text), scale, field, value)


def _finite(number: float, scale: float, field: str, value: object) -> float:
    """``number * scale`` as a float, a UnitError unless it is finite (an int too large for a
    float, nan, inf, or a product that overflows)."""
    try:
        result = float(number) * scale
    except OverflowError:  # an int beyond the float range
        raise UnitError(field, "must be a finite number", value) from None
    if not math.isfinite(result):
        raise UnitError(field, "must be a finite number", value)
    return result


#: most sizes one size list or range may expand to
MAX_SIZES = 10_000


def _whole_bytes(size: float, field: str, text: str) -> float:
    if size <= 0:
        raise UnitError(field, "sizes must be positive", text)
    if size != math.floor(size):
        raise UnitError(field, "sizes are whole bytes (no half a byte)", text)
    return size


def parse_size_range(text: str, field: str = "sizes") -> list[int]:
    """Expand ``"1KiB:1GiB"`` (x2 steps) or ``"1KiB:1GiB:x4"`` or ``"4MiB"`` or ``"1MiB,8MiB"``
    (whole bytes; at most :data:`MAX_SIZES` sizes)."""
    if len(text) > MAX_SIZES * 20:
        raise UnitError(field, f"must be at most {MAX_SIZES * 20} characters long", text[:60])
    if "," in text:
        sizes: list[int] = []
        for part in text.split(","):
            sizes.extend(parse_size_range(part.strip(), field))
            if len(sizes) > MAX_SIZES:
                raise UnitError(field, f"expands to more than {MAX_SIZES} sizes", text[:60])
        return sizes
    parts = text.split(":")
    if len(parts) == 1:
        return [int(_whole_bytes(parse_quantity(parts[0], "size", field), field, text))]
    if len(parts) not in (2, 3):
        raise UnitError(field, "expected MIN:MAX or MIN:MAX:xFACTOR", text)
    low = parse_quantity(parts[0], "size", field)
    high = parse_quantity(parts[1], "size", field)
    factor = 2.0
    if len(parts) == 3:
        step = parts[2].strip().lstrip("x*")
        if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", step, re.ASCII):
            raise UnitError(field, "step must look like x2 or x4", text)
        factor = float(step)
    _whole_bytes(low, field, text)
    _whole_bytes(high, field, text)
    if high < low:
        raise UnitError(field, "MAX must not be below MIN", text)
    if factor <= 1.0:
        raise UnitError(field, "step factor must be above 1", text)
    if math.log(high / low) / math.log(factor) > MAX_SIZES:
        raise UnitError(field, f"expands to more than {MAX_SIZES} sizes", text)
    out = []
    size = low
    while size <= high * (1 + 1e-12):
        out.append(int(round(size)))
        size *= factor
    return out


def format_size(num_bytes: float) -> str:
    """Human text for a size in bytes using binary prefixes ("64 MiB")."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value} TiB"  # pragma: no cover


#: Durations of this many seconds and more print in minutes or hours, never with k/M prefixes
#: (``1.08 Ms`` reads as milliseconds).
LONG_SECONDS = 1000.0


def _long_time(seconds: float) -> str:
    """A duration of :data:`LONG_SECONDS` or more in minutes (below an hour) or hours."""
    if abs(seconds) < 3600:
        return f"{seconds / 60:.3g} min"
    hours = seconds / 3600
    return f"{hours:.3g} h" if abs(hours) < 1000 else f"{hours:,.0f} h"


def format_time(seconds: float) -> str:
    """Human text for a duration in seconds ("12.3 us"; from 1,000 s on in minutes or hours:
    "16.7 min", "94.8 h")."""
    if math.isfinite(seconds) and abs(seconds) >= LONG_SECONDS:
        return _long_time(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds} s"  # pragma: no cover


def format_rate(bytes_per_second: float) -> str:
    """Human text for a rate in B/s with decimal prefixes ("231 GB/s")."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(bytes_per_second) >= scale:
            return f"{bytes_per_second / scale:.3g} {unit}"
    return f"{bytes_per_second:.3g} B/s"


#: The SI unit symbol of each quantity kind (what a stored number of that kind is in).
UNIT_OF_KIND: dict[str, str] = {
    "size": "B",
    "rate": "B/s",
    "time": "s",
    "flop_rate": "FLOP/s",
    "flops": "FLOP",
    "power": "W",
    "energy_per_byte": "J/B",
    "energy_per_flop": "J/FLOP",
}

_ENG = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"),
        (1e-9, "n"), (1e-12, "p"))  # fmt: skip


def format_eng(value: float, unit: str, digits: int = 3) -> str:
    """``value`` (in ``unit``) with an engineering prefix: ``2.25e11, "B/s"`` -> ``225 GB/s``;
    durations of 1,000 s and more in minutes or hours (:func:`format_time`).

    Dimensionless units (``""``, ``"1"``, ``"x"``) print the number alone (``x`` appended
    for ratios); bytes use decimal prefixes here, as rates do (``format_size`` for binary)."""
    if not math.isfinite(value):
        return str(value)
    if unit in ("", "1"):
        return f"{value:.{digits}g}"
    if unit == "x":
        return f"{value:.{digits}g}x"
    magnitude = abs(value)
    if unit == "s" and magnitude >= LONG_SECONDS:
        return _long_time(value)
    if magnitude == 0:
        return f"0 {unit}"
    for scale, prefix in _ENG:
        if magnitude >= scale or scale == 1e-12:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"  # pragma: no cover


def column_scale(values: list[float], unit: str) -> tuple[float, str]:
    """One engineering prefix for a whole table column (the largest value's): ``(scale,
    "GB/s")``, so that a column never mixes MB/s and GB/s (nccl-tests prints one unit)."""
    finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
    top = max(finite, default=1.0)
    if unit == "s" and top >= LONG_SECONDS:  # minutes or hours, never ks or Ms
        return (60.0, "min") if top < 3600 else (3600.0, "h")
    for scale, prefix in _ENG:
        if top >= scale or scale == 1e-12:
            return scale, f"{prefix}{unit}"
    return 1.0, unit  # pragma: no cover
