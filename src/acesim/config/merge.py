"""Merging documents: how ``extends`` (a whole system, or an NPU preset) applies changes."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_documents", "leaf_paths", "touches"]


def merge_documents(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` on top: tables merge key by key (recursively), every other
    value (numbers, text, lists such as ``network.dimensions``) is replaced whole."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_documents(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def leaf_paths(changes: dict[str, Any], prefix: str) -> list[str]:
    """Dotted paths of the values ``changes`` sets under ``prefix`` (tables walked, every
    other value a leaf): ``{"kernels": {"tile": [128, 256]}}``, ``"npu"`` ->
    ``["npu.kernels.tile"]``."""
    out: list[str] = []
    stack = [(changes, prefix)]
    while stack:
        table, where = stack.pop()
        for key, value in table.items():
            path = f"{where}.{key}"
            if isinstance(value, dict) and value:
                stack.append((value, path))
            else:
                out.append(path)
    return sorted(out)


def touches(key: str, changed: list[str]) -> bool:
    """Whether dotted path ``key`` (a source's field) is at, under or above a path in
    ``changed``: a source that no longer describes the value once those paths change."""
    for path in changed:
        if key == path or key.startswith((path + ".", path + "[")) or path.startswith(key + "."):
            return True
    return False
