"""Validation of zoo parameters: errors name the zoo entry, the field, the rule and the value."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from ...errors import WorkloadError


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a close match exists, else an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def positive_int(where: str, field: str, value: Any) -> int:
    """``value`` as an int of at least 1, or a :class:`WorkloadError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WorkloadError(
            f"must be a positive integer, got {value!r}", location=where, field=field
        )
    return value


def positive_ints(where: str, field: str, values: Any) -> tuple[int, ...]:
    """A non-empty sequence of positive ints (layer widths, table sizes)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise WorkloadError(
            f"must be a list of positive integers, got {values!r}", location=where, field=field
        )
    out = tuple(values)
    if not out:
        raise WorkloadError("must not be empty", location=where, field=field)
    for i, v in enumerate(out):
        positive_int(where, f"{field}[{i}]", v)
    return out
