"""Bare numbers for dimensioned fields: refused where implausible, unless forced.

A physical field takes a unit string (``"900 GB/s"``) or a bare number in SI base units
(B, B/s, s, FLOP/s). A bare number far outside anything the field could hold is almost always
a unit left out: ``hbm_bandwidth = 900`` meant 900 GB/s and runs at 900 B/s (a 95-hour
iteration); ``link_latency = 500`` meant 500 ns and runs at 500 s. Such a number is refused on
one line naming the field, the rule and the value, with the unit it probably meant; ``force``
(``--force`` on the command line, ``force = true`` in a sweep spec, ``force=True`` in Python)
accepts it as written. Numbers with a unit are taken as written: the unit says what was meant.

The rules (:data:`RULES`), per quantity kind; a bare number is implausible when it is

* a rate (B/s) below 1 MB/s: no memory, link or DMA engine is that slow;
* a size (B) below 1 KiB: no memory, buffer or chunk that small;
* a time (s) above 1 s: every time in a system document is a latency or delay (ns to us);
* a compute rate (FLOP/s) below 1 GFLOP/s: no accelerator peak is that low.

Zero and negative numbers are left to the fields' own rules (``must be positive``). Checked
where people write numbers: system files and tables (every leaf), ``--set`` overrides and sweep
axes (each value at its path); documents acesim writes itself are not checked again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..errors import ConfigError
from ..units import Kind
from .paths import parse_path
from .quantities import quantity_kind_at

__all__ = ["RULES", "Rule", "check_document", "check_value", "FORCE_HINT"]

#: How to accept an implausible bare number anyway.
FORCE_HINT = "--force (force=True, or force = true in a sweep spec)"


@dataclass(frozen=True)
class Rule:
    """A bare number of a quantity kind is implausible when ``implausible(value)``."""

    unit: str
    phrase: str
    implausible: Callable[[float], bool]
    suggest: Callable[[str], str]


RULES: dict[Kind, Rule] = {
    "rate": Rule(
        "B/s",
        "a bare number is in B/s and below 1 MB/s is implausible for a bandwidth",
        lambda v: 0 < v < 1e6,
        lambda n: f"'{n} GB/s'",
    ),
    "size": Rule(
        "B",
        "a bare number is in bytes and below 1 KiB is implausible for a size",
        lambda v: 0 < v < 1024,
        lambda n: f"'{n} MiB' or '{n} KiB'",
    ),
    "time": Rule(
        "s",
        "a bare number is in seconds and above 1 s is implausible for a latency or delay",
        lambda v: v > 1,
        lambda n: f"'{n} us' or '{n} ns'",
    ),
    "flop_rate": Rule(
        "FLOP/s",
        "a bare number is in FLOP/s and below 1 GFLOP/s is implausible for a compute rate",
        lambda v: 0 < v < 1e9,
        lambda n: f"'{n} TFLOP/s'",
    ),
}

_BARE = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")


def _bare_number(value: Any) -> float | None:
    """``value`` as a finite number when it is one without a unit (``600``, ``"600"``), else
    None (a non-finite or huge number is the field's own rules' to report)."""
    if isinstance(value, bool):
        return None
    if not isinstance(value, int | float) and not (isinstance(value, str) and _BARE.match(value)):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError):
        return None
    return number if math.isfinite(number) else None


def check_value(model: type[BaseModel], path: str, value: Any, where: str = "") -> None:
    """Raise :class:`ConfigError` when ``value`` (set at dotted ``path`` of a ``model``
    document) is, or holds, a bare number implausible for its field (module docstring)."""
    try:
        parts = parse_path(path)
    except ConfigError:
        return  # the document's own validation names a malformed path
    for sub, leaf in _leaves(value, list(parts)):
        _check_leaf(model, sub, leaf, where)


def check_document(model: type[BaseModel], doc: Mapping[str, Any], where: str = "") -> None:
    """:func:`check_value` for every leaf of ``doc`` (its ``sources`` notes aside)."""
    for key, value in doc.items():
        if key == "sources":
            continue
        for parts, leaf in _leaves(value, [key]):
            _check_leaf(model, parts, leaf, where)


def _leaves(value: Any, parts: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    stack: list[tuple[list[str | int], Any]] = [(parts, value)]
    seen = 0
    while stack and seen < 100_000:  # documents are bounded; so is this walk
        here, node = stack.pop()
        seen += 1
        if isinstance(node, Mapping):
            stack.extend(([*here, str(k)], v) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend(([*here, i], v) for i, v in enumerate(node))
        else:
            yield here, node


def _check_leaf(model: type[BaseModel], parts: list[str | int], value: Any, where: str) -> None:
    number = _bare_number(value)
    if number is None:
        return
    kind = quantity_kind_at(model, parts)
    rule = RULES.get(kind) if kind is not None else None
    if rule is None or not rule.implausible(number):
        return
    text = value.strip() if isinstance(value, str) else f"{number:g}"
    path = _show_path(parts)
    raise ConfigError(
        f"{where}: {path}" if where else path,
        rule.phrase,
        value,
        hint=f"did you mean {rule.suggest(text)}? write the unit, or pass {FORCE_HINT} to run "
        f"it as {text} {rule.unit}",
    )


def _show_path(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
