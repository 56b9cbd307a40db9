"""The one guarded reader of what a user types or points at outside a system document: flag
values (``--set path=value``, ``--straggler rank=3,slowdown=1.3``, ``--npu ranks=0-3,...``,
``--parallel tp=4``), numbers given to integer and float options, and small JSON files
(``--placement``).

Every such input passes the limits the document reader has (:mod:`acesim.config.presets`:
size, nesting depth, integers within 64 bits, UTF-8 regular files only), and the rules that
keep a number what it looks like:

* digits are ASCII ``0-9``: Python reads ``"٨"`` and ``"８"`` as 8, a user who typed them
  meant something else (a typo, a pasted table);
* no underscores in numbers: TOML and Python read ``4_0`` as 40, which is more likely a typo
  for ``4.0`` or ``40`` than a wish;
* no booleans where a number is wanted (``ranks=true`` is not rank 1): checked by the fields;
* JSON objects without duplicate keys (the last one would silently win);
* ``null`` is not a value (a placement file holding ``null`` is not "no placement").

Each refusal is one :class:`~acesim.errors.ConfigError` naming the flag, the rule and the value.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import tomllib

from ..errors import ConfigError, shorten
from .files import FileProblem, read_text_file
from .presets import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_DEPTH,
    check_document_values,
    refuse_duplicates,
)

__all__ = [
    "MAX_VALUE_CHARS",
    "MAX_INT_DIGITS",
    "lenient_number_problem",
    "read_value",
    "read_json_file",
    "strict_int",
    "strict_float",
    "lenient_argument",
]

MAX_VALUE_CHARS = 10_000
"""Longest flag value (characters): a rank list or an [npu] table fits in far fewer."""

MAX_INT_DIGITS = 19
"""Most digits an integer may have (2**63 - 1 has 19): the document reader's 64-bit range."""

_UNDERSCORED = re.compile(r"[0-9]_[0-9]")
_ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_ASCII_FLOAT = re.compile(
    r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|nan|infinity)",
    re.ASCII | re.IGNORECASE,
)


def lenient_number_problem(text: str) -> str | None:
    """Why ``text`` holds a number Python or TOML would read leniently (None: it does not):
    a digit other than ASCII 0-9, or an underscore between digits."""
    for ch in text:
        if not ch.isascii() and (ch.isdigit() or ch.isnumeric()):
            return f"digits must be ASCII 0-9 (got {ch!r}, U+{ord(ch):04X})"
    if _UNDERSCORED.search(text):
        return "write numbers without underscores (4_0 is not read as 40)"
    return None


def _has_number(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int | float):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def read_value(text: str, field: str) -> Any:
    """A flag's value: a TOML value when it is one (numbers, ``true``, ``"text"``, ``[1, 2]``,
    ``{k = 1}``), else the text itself (quotes stripped): ``"3.6 TB/s"``, ``ring``, ``4-7``.
    ConfigError naming ``field`` for a value over :data:`MAX_VALUE_CHARS`, a non-ASCII digit,
    an underscore in a number, an integer beyond 64 bits or nesting beyond the documents'."""
    text = text.strip()
    if len(text) > MAX_VALUE_CHARS:
        raise ConfigError(
            field,
            f"a value may have at most {MAX_VALUE_CHARS} characters, got {len(text)}",
            shorten(text, 60),
        )
    problem = lenient_number_problem(text)
    if problem is not None:
        raise ConfigError(field, problem, text)
    try:
        value: Any = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip("'\"")
    except (ValueError, RecursionError):  # 4,300-digit integers, deep arrays
        raise ConfigError(
            field,
            f"numbers must fit in 64 bits and values nest at most {MAX_DOCUMENT_DEPTH} levels",
            shorten(text, 60),
        ) from None
    check_document_values(field, value)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _bounded_int(text: str) -> int:
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def read_json_file(path: Path, field: str, what: str = "JSON file") -> Any:
    """The JSON value in the file at ``path``, read through the document reader's limits:
    a regular UTF-8 file of at most :data:`~acesim.config.presets.MAX_DOCUMENT_BYTES` (not a
    device such as ``/dev/zero``), nesting at most ``MAX_DOCUMENT_DEPTH`` levels, integers
    within 64 bits, no ``NaN``/``Infinity``, no duplicate keys, not ``null``. ConfigError
    naming ``field`` otherwise."""
    try:
        text = read_text_file(Path(path), limit=MAX_DOCUMENT_BYTES, what=what)
    except FileProblem as exc:
        raise ConfigError(field, str(exc), str(path)) from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=refuse_duplicates,
            parse_int=_bounded_int,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as err:
        raise ConfigError(
            field, f"expected a {what} (line {err.lineno}: {err.msg})", str(path)
        ) from None
    except RecursionError:
        raise ConfigError(
            field, f"nested more than {MAX_DOCUMENT_DEPTH} levels deep", str(path)
        ) from None
    except ValueError as err:
        reason = shorten(str(err), 200)
        raise ConfigError(field, f"cannot read the {what}: {reason}", str(path)) from None
    check_document_values(f"{field} {path}", value)
    if value is None:
        raise ConfigError(field, f"the {what} holds null, not a value", str(path))
    return value


_NUMBER_LIKE = re.compile(r"[+-]?[\d_]*\.?[\d_]+(?:[eE][+-]?[\d_]+)?")  # Unicode digits too


def lenient_argument(args: list[str]) -> ConfigError | None:
    """The error for the first command-line argument that is a number Python or pydantic would
    read leniently (``８``, ``4_0``, ``--global-batch=٨``), naming its option; None if none.
    Integer and float options are converted by the CLI library, which reads those as numbers
    (``int("٨") == 8``); the command line checks its arguments here first."""
    previous = ""
    for token in args:
        flag, sep, value = token.partition("=") if token.startswith("--") else ("", "", token)
        if not sep:
            flag, value = previous, token
        if _NUMBER_LIKE.fullmatch(value):
            problem = lenient_number_problem(value)
            if problem is not None:
                return ConfigError(flag or "argument", problem, value)
        previous = token if token.startswith("-") else ""
    return None


def strict_int(value: Any) -> int:
    """An integer option's text as an int: ASCII digits only, no underscores or spaces, at
    most :data:`MAX_INT_DIGITS` digits (ValueError otherwise; click names the option)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    if not _ASCII_INT.fullmatch(text):
        problem = lenient_number_problem(text)
        raise ValueError(problem or f"{text!r} is not a whole number of ASCII digits")
    if len(text.lstrip("+-")) > MAX_INT_DIGITS:
        raise ValueError(f"at most {MAX_INT_DIGITS} digits (64 bits), got {len(text)}")
    return int(text)


def strict_float(value: Any) -> float:
    """A float option's text as a float: ASCII digits, no underscores (ValueError
    otherwise)."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return float(value)
    text = str(value)
    if len(text) > 100 or not _ASCII_FLOAT.fullmatch(text):
        problem = lenient_number_problem(text[:100])
        raise ValueError(problem or f"{shorten(text, 40)!r} is not a number")
    return float(text)
