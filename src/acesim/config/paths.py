"""Dotted paths into configuration documents: ``network.dimensions[0].size``."""

from __future__ import annotations

import copy
import re
from typing import Any

from ..errors import ConfigError

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """``a.b[2].c`` -> ``['a', 'b', 2, 'c']`` (ConfigError if malformed)."""
    parts: list[str | int] = []
    pos = 0
    text = path.strip()
    while pos < len(text):
        if text[pos] == ".":
            pos += 1
            continue
        match = _TOKEN.match(text, pos)
        if not match:
            raise ConfigError(path, "malformed dotted path")
        name, index = match.groups()
        parts.append(int(index) if index is not None else name)
        pos = match.end()
    if not parts:
        raise ConfigError(path, "empty dotted path")
    return parts


def set_path(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with ``value`` at ``path`` (creating tables as needed).

    List indices must exist: ``network.dimensions[5]`` on a 3-dimension network is an error.
    """
    out = copy.deepcopy(doc)
    put_path(out, path, value)
    return out


def put_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """:func:`set_path` on ``doc`` itself: for a document the caller owns (one copy made for
    many changes, not one per change)."""
    parts = parse_path(path)
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                raise ConfigError(path, f"index [{part}] does not exist")
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise ConfigError(path, f"{part!r} is not inside a table")
        if part not in node:
            node[part] = [] if isinstance(nxt, int) else {}
        node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or not -len(node) <= last < len(node):
            raise ConfigError(path, f"index [{last}] does not exist")
        node[last] = value
    else:
        if not isinstance(node, dict):
            raise ConfigError(path, f"{last!r} is not inside a table")
        node[last] = value
