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
broken and the offending value.
"""

from __future__ import annotations

import math
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


#: a value's text in a message is cut to this many characters (file paths stay whole)
SHOWN_LIMIT = 300


def shown(value: Any) -> str:
    """``repr(value)`` for a one-line message: an integer too long to print (Python refuses
    to turn one of more than 4300 digits into text) is described by its length, and a long
    text is cut with its length stated."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        digits = int(math.log10(abs(value))) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    try:
        text = repr(value)
    except ValueError:  # a container holding an integer too long to print
        return f"a {type(value).__name__} too large to print"
    if len(text) > SHOWN_LIMIT:
        text = f"{text[:60]}... ({len(text)} characters)"
    return text


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
        message = f"{field}: {rule}" if field else rule
        if value is not None:
            message += f", got {shown(value)}"
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
