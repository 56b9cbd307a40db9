"""Turn pydantic validation errors into acesim :class:`ConfigError` with did-you-mean hints."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, UnitError


class FieldRuleError(ValueError):
    """Raised by a validator about one of its fields (``field`` is the path relative to the
    model; empty for the validated field itself), with the rule, the value and a hint."""

    def __init__(
        self,
        field: str,
        rule: str,
        value: Any = None,
        *,
        hint: str | None = None,
        unit: bool = False,
    ):
        self.field = field
        self.rule = rule
        self.value = value
        self.hint = hint
        self.unit = unit
        super().__init__(f"{field}: {rule}" if field else rule)

    @classmethod
    def nested(cls, prefix: str, error: ConfigError) -> FieldRuleError:
        """``error`` (about a field of a nested document) re-rooted under ``prefix``."""
        field = f"{prefix}.{error.field}" if error.field else prefix
        return cls(
            field, error.rule, error.value, hint=error.hint, unit=isinstance(error, UnitError)
        )


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
        where = dotted(loc + (ctx_error.field,) if ctx_error.field else loc, prefix)
        cls = UnitError if ctx_error.unit else ConfigError
        return cls(where, ctx_error.rule, ctx_error.value, hint=ctx_error.hint)
    if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
        # a tagged union's entry (``kind = "llm"``): name the tag's key, not pydantic's words
        ctx = err.get("ctx") or {}
        key = str(ctx.get("discriminator", "kind")).strip("'")
        where = dotted(loc + (key,), prefix)
        if err["type"] == "union_tag_not_found":
            return ConfigError(where, "required: it says which kind of entry this is", None)
        expected = str(ctx.get("expected_tags", "")).replace("'", "")
        return ConfigError(where, f"must be one of {expected}", ctx.get("tag"))
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
