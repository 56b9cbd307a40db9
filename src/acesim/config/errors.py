"""Turn pydantic validation errors into acesim :class:`ConfigError` with did-you-mean hints."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, UnitError


class FieldRuleError(ValueError):
    """Raised by a model-level validator about one of its fields (path relative to the model)."""

    def __init__(self, field: str, rule: str):
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


# pydantic puts the union member it tried into the error location ("literal['ring',...]",
# "list[literal[...]]"); it is not part of the document's path.
# A dict key that fails validation gets a "[key]" element.
_UNION_TAG = re.compile(
    r"^((literal|list|dict|tuple|set|frozenset|function-\w+|nullable)\[.*\]|\[key\])$"
)


def dotted(loc: tuple[Any, ...], prefix: str = "") -> str:
    """``('network', 'dimensions', 0, 'size')`` -> ``network.dimensions[0].size``."""
    out = prefix
    for part in loc:
        if isinstance(part, str) and _UNION_TAG.match(part):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the last element of ``loc``."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        annotation = fields[part].annotation
        current = _unwrap_model(annotation)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    return None


def config_error_from(
    exc: ValidationError, model: type[BaseModel], prefix: str = ""
) -> ConfigError:
    """The first problem in ``exc`` as a one-line :class:`ConfigError`."""
    errors = exc.errors()
    # A misspelt key also makes the intended key "missing": report the unknown key (with its
    # did-you-mean), which is the cause, before anything else.
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    err = unknown[0] if unknown else errors[0]
    tags = [i for i, p in enumerate(err["loc"]) if isinstance(p, str) and _UNION_TAG.match(p)]
    if tags:
        # A union: report the member that got furthest into the input (a list's bad item
        # rather than "not a literal").
        base = tuple(err["loc"][: tags[0]])
        same = [e for e in errors if tuple(e["loc"][: len(base)]) == base]
        err = max(same, key=lambda e: len(e["loc"]))
    loc = tuple(err["loc"])
    field = dotted(loc, prefix)
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, UnitError):
        return UnitError(field, ctx_error.rule, ctx_error.value)
    if isinstance(ctx_error, ConfigError):
        return ConfigError(field, ctx_error.rule, ctx_error.value, hint=ctx_error.hint)
    if isinstance(ctx_error, FieldRuleError):
        return ConfigError(dotted(loc + (ctx_error.field,), prefix), ctx_error.rule)
    if err["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        hint = None
        if owner is not None:
            known = list(owner.model_fields)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(known)
        return ConfigError(field, "unknown key", None, hint=hint)
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    value = err.get("input")
    if isinstance(value, (dict, list)) or err["type"] == "value_error":
        value = None  # our own rules state the value in the message
    return ConfigError(field, message.lower() if message[:1].isupper() else message, value)
