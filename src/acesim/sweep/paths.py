"""Dotted paths of sweep axes, checked against the configuration schema before anything runs.

A path such as ``network.dimensions[0].size`` is parsed by :func:`acesim.config.paths.parse_path`
(one grammar for overrides and sweeps). :func:`check_path` walks the pydantic models
(:class:`~acesim.config.system.SystemConfig`, ``WorkloadConfig``, ``RunOptions``) so that a typo
(``npu.hbm_bandwdth``) is a structural error with a did-you-mean hint, not a failed point.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel

from ..config.paths import parse_path
from ..errors import ConfigError

__all__ = ["parse_path", "check_path", "get_path", "set_in_place"]


def _arms(annotation: Any) -> list[Any]:
    """The alternatives of a union (``X | None``), or the annotation itself."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return _arms(typing.get_args(annotation)[0])
    return [annotation]


def _step(annotation: Any, part: str | int) -> list[Any]:
    """The annotations reachable from ``annotation`` by one path step (empty: no such step)."""
    found: list[Any] = []
    for arm in _arms(annotation):
        origin = typing.get_origin(arm)
        if isinstance(part, int):
            if origin in (list, tuple) or arm in (list, tuple):
                args = typing.get_args(arm)
                found.append(args[0] if args else Any)
            elif arm is Any:
                found.append(Any)
        elif isinstance(arm, type) and issubclass(arm, BaseModel):
            if part in arm.model_fields:
                found.append(arm.model_fields[part].annotation)
            else:
                # Tables whose keys are registered names (endpoint kinds) say their schema.
                section = getattr(arm, "section_model", None)
                model = section(part) if callable(section) else None
                if model is not None:
                    found.append(model)
        elif origin is dict or arm is dict:
            args = typing.get_args(arm)
            found.append(args[1] if len(args) == 2 else Any)
        elif arm is Any:
            found.append(Any)
    return found


def check_path(
    model: type[BaseModel],
    parts: list[str | int],
    field: str,
    value: Any = None,
    prefix: str = "",
) -> None:
    """Raise ConfigError unless ``parts`` names a field (or a table/list item) of ``model``.

    ``field`` names the axis in the message (``[grid] npu.hbm_bandwdth``), ``value`` is shown as
    the offending value; ``prefix`` is the part of the path the caller consumed (``workload``).
    """
    current: list[Any] = [model]
    walked = prefix
    for part in parts:
        nxt = [a for c in current for a in _step(c, part)]
        if not nxt:
            models = [
                a
                for c in current
                for a in _arms(c)
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            where = walked or "the top level"
            if isinstance(part, int):
                raise ConfigError(field, f"{where} is not a list, cannot index [{part}]", value)
            known = sorted({f for m in models for f in _keys(m)})
            close = difflib.get_close_matches(part, known, n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else ("known keys: " + ", ".join(known) if known else None)
            )
            raise ConfigError(
                field, f"unknown path: {part!r} is not a key of {where}", value, hint=hint
            )
        current = nxt
        walked += f"[{part}]" if isinstance(part, int) else ("." if walked else "") + part


def get_path(doc: Any, parts: list[str | int]) -> Any:
    """The value at ``parts`` in ``doc`` (KeyError/IndexError/TypeError when absent)."""
    node = doc
    for part in parts:
        node = node[part]
    return node


def set_in_place(doc: dict[str, Any], field: str, parts: list[str | int], value: Any) -> None:
    """Set ``value`` at ``parts`` inside ``doc`` (tables are created, list items must exist)."""
    node: Any = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(part, int):
            if not isinstance(node, list) or not 0 <= part < len(node):
                size = len(node) if isinstance(node, list) else 0
                raise ConfigError(
                    field, f"index [{part}] does not exist (the list has {size} items)", value
                )
        elif not isinstance(node, dict):
            raise ConfigError(field, f"{part!r} is not inside a table", value)
        if last:
            node[part] = value
            return
        if isinstance(part, str) and part not in node:
            node[part] = [] if isinstance(parts[i + 1], int) else {}
        node = node[part]


def _keys(model: type[BaseModel]) -> list[str]:
    """The keys a table of ``model`` accepts (fields, and registered section names)."""
    keys = list(model.model_fields)
    names = getattr(model, "section_names", None)
    if callable(names):
        keys.extend(names())
    return keys
