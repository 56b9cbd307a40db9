"""Exceptions raised by acesim.

Every error a user can cause derives from :class:`AcesimError`; the CLI prints it as one or two
lines and exits with status 2 (a traceback only with ``--debug``)::

    AcesimError
    ├── ConfigError          a system/run/sweep configuration or preset is invalid
    │   └── UnitError        a physical quantity could not be parsed ("25 GB/z")
    ├── TopologyError        the network cannot exist (sizes, bandwidths, algorithm vs shape)
    ├── WorkloadError        a workload file or zoo request is invalid
    │   └── TraceError       a Chakra execution trace is corrupt or inconsistent
    ├── SimulationError      the model reached an impossible state (deadlock, lost work)
    └── SweepError           a design-space sweep cannot run

Messages follow the attrs convention: they name the field (a dotted path), the rule that was
broken and the offending value. The value is shown by :func:`short_repr`: at most
:data:`MAX_SHOWN_VALUE` characters, computed without expanding a huge or deeply nested value
first, so an error about a 60 MB string or a billion-element list stays one short line.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = [
    "AcesimError",
    "ConfigError",
    "UnitError",
    "TopologyError",
    "WorkloadError",
    "TraceError",
    "SimulationError",
    "SweepError",
]


MAX_SHOWN_VALUE = 200
"""Most characters of a user's value that an error message shows (then ``...``)."""

_LOG10_2 = 0.30102999566398120


class _Repr(reprlib.Repr):
    """reprlib with small limits; big integers are described, never converted to decimal
    (CPython refuses to convert more than 4,300 digits, and converting is quadratic)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:  # about 60 digits
            digits = int(x.bit_length() * _LOG10_2) + 1
            return f"<{'negative ' if x < 0 else ''}integer of about {digits} digits>"
        return super().repr_int(x, level)


_REPR = _Repr()
_REPR.maxlevel = 3
_REPR.maxtuple = _REPR.maxlist = _REPR.maxarray = 8
_REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 6
_REPR.maxstring = _REPR.maxother = MAX_SHOWN_VALUE
_REPR.maxlong = 60


def short_repr(value: Any, limit: int = MAX_SHOWN_VALUE) -> str:
    """``repr(value)`` cut to ``limit`` characters (ending in ``...``); containers show their
    first items and three levels only, so the cost does not grow with the value's size."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__ must not replace the error being reported
        text = f"<{type(value).__name__}>"
    return shorten(text, limit)


def shorten(text: str, limit: int = MAX_SHOWN_VALUE) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


class AcesimError(Exception):
    """Base class of every error acesim raises on purpose."""


class ConfigError(AcesimError):
    """A configuration value breaks a rule.

    ``field`` is the dotted path of the value (``network.dimensions[0].link_bandwidth``),
    ``rule`` what it must satisfy and ``value`` what was given.
    """

    def __init__(self, field: str, rule: str, value: Any = None, *, hint: str | None = None):
        self.field = field
        self.rule = rule
        self.value = value
        self.hint = hint
        message = f"{shorten(field, 2 * MAX_SHOWN_VALUE)}: {rule}" if field else rule
        if value is not None:
            message += f", got {short_repr(value)}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class UnitError(ConfigError, ValueError):
    """A physical quantity has a missing, unknown or wrong-kind unit.

    Also a :class:`ValueError`, so that pydantic validators wrap it in their validation error
    and the configuration loader can report it with the field's full dotted path.
    """


class TopologyError(AcesimError):
    """The network described cannot exist or cannot run the requested collective."""


class WorkloadError(AcesimError):
    """A workload description is invalid; ``location`` is ``file:line`` or a zoo name."""

    def __init__(self, message: str, *, location: str | None = None, field: str | None = None):
        self.location = location
        self.field = field
        prefix = ""
        if location:
            prefix += f"{location}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)


class TraceError(WorkloadError):
    """A Chakra execution trace is corrupt (bad varint, wrong message, cycle, missing node)."""


class SimulationError(AcesimError):
    """The simulation reached a state the model forbids (a deadlock, work never finishing)."""


class SweepError(AcesimError):
    """A sweep specification or its execution backend is unusable."""
