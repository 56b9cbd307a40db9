"""The ``[endpoint]`` table: which collective endpoint runs collectives, and every kind's
settings.

The kinds are not listed here. Each endpoint kind (``acesim.hardware.endpoints``) registers its
settings schema in :data:`ENDPOINT_SETTINGS` together with its model, so the document accepts
exactly the registered kinds: ``kind = "<name>"`` and one ``[endpoint.<name>]`` table per kind
(missing tables take the schema's defaults; a table for an unregistered kind is an error with a
did-you-mean hint). A schema may also check its settings against the rest of the system
(``comm_units`` must be fewer than the NPU's units): that check runs when the system document
is validated.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..registry import Registry
from .errors import FieldRuleError, config_error_from

__all__ = ["EndpointSchema", "ENDPOINT_SETTINGS", "EndpointConfig", "settings_reads", "note_reads"]

S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True)
class EndpointSchema:
    """The configuration side of an endpoint kind.

    Attributes:
        settings: pydantic model of the ``[endpoint.<kind>]`` table.
        check: optional ``check(settings, system)`` raising :class:`ConfigError` (field paths
            relative to the system document) when the settings do not fit the system.
    """

    settings: type[BaseModel]
    check: Callable[[Any, Any], None] | None = None


#: Endpoint kind name -> its settings schema (filled by ``acesim.hardware.endpoints``).
ENDPOINT_SETTINGS: Registry[EndpointSchema] = Registry("endpoint kind", "endpoint.kind")


def _best_hint(value: object) -> str | None:
    """For a misspelt ``best_<kind>`` (``best-baseline``, ``best_basline``): the search it
    names, never the bare kind (which would silently change what is compared)."""
    if not isinstance(value, str) or not value.lower().startswith("best"):
        return None
    rest = value[4:].lstrip("-_ ").lower()
    names = [*ENDPOINT_SETTINGS.names(), *ENDPOINT_SETTINGS.aliases_all()]
    close = difflib.get_close_matches(rest, names, n=1, cutoff=0.6)
    if not close:
        return None
    return (
        f"did you mean 'best_{close[0]}'? (the best of {close[0]}'s variants: a run sweep's "
        "endpoint.kind)"
    )


#: The kinds whose settings were read, one set per open :func:`settings_reads` (innermost last).
_SETTINGS_READS: list[set[str]] = []


@contextmanager
def settings_reads() -> Iterator[set[str]]:
    """The names of the endpoint kinds whose settings any :class:`EndpointConfig` hands out
    (:meth:`EndpointConfig.settings`, :meth:`EndpointConfig.of`) while the block runs: the
    settings tables a computation depends on (:mod:`acesim.studies.dedup`); the others it
    never saw."""
    reads: set[str] = set()
    _SETTINGS_READS.append(reads)
    try:
        yield reads
    finally:
        _SETTINGS_READS.pop()  # blocks nest: this one is the innermost


def note_reads(kinds: Iterable[str]) -> None:
    """Count ``kinds``' settings as read by every open :func:`settings_reads` (a result
    taken from a memo instead of computed: the reads its computation made)."""
    for reads in _SETTINGS_READS:
        reads.update(kinds)


class EndpointConfig(BaseModel):
    """``kind`` plus one settings table per registered endpoint kind (``endpoint.ace.sram``).

    Read a kind's settings with :meth:`of` (typed) or :meth:`settings` (by name).
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    kind: str = "ideal"

    @field_validator("kind")
    @classmethod
    def _registered(cls, value: str) -> str:
        try:
            # an alias (``sm``) stands for its kind (``baseline``)
            return ENDPOINT_SETTINGS.canonical(value)
        except ConfigError:
            err = ENDPOINT_SETTINGS.unknown(value)
            raise FieldRuleError("", err.rule, value, hint=_best_hint(value) or err.hint) from None

    @model_validator(mode="after")
    def _sections(self) -> EndpointConfig:
        extra = self.__pydantic_extra__
        if extra is None:  # pragma: no cover - extra="allow" always sets it
            return self
        for name, value in list(extra.items()):
            if name not in ENDPOINT_SETTINGS:
                err = ENDPOINT_SETTINGS.unknown(name)
                hint = err.hint or f"endpoint kinds: {ENDPOINT_SETTINGS.choices()}"
                raise FieldRuleError(name, "unknown key (not an endpoint kind)", hint=hint)
            schema = ENDPOINT_SETTINGS.get(name).settings
            if isinstance(value, schema):
                continue
            if isinstance(value, BaseModel):
                value = value.model_dump()
            try:
                extra[name] = schema.model_validate(value)
            except ValidationError as exc:
                raise FieldRuleError.nested(name, config_error_from(exc, schema)) from None
        for name, schema_entry in ENDPOINT_SETTINGS.items():
            if name not in extra:
                extra[name] = schema_entry.settings.model_validate({})
        return self

    @classmethod
    def section_model(cls, name: str) -> type[BaseModel] | None:
        """The schema of the ``[endpoint.<name>]`` table (None for no such kind); dotted-path
        checks (sweeps, ``--set``) descend through it."""
        if name in ENDPOINT_SETTINGS:
            return ENDPOINT_SETTINGS.get(name).settings
        return None

    @classmethod
    def section_names(cls) -> tuple[str, ...]:
        """The registered kinds (each has an ``[endpoint.<kind>]`` table)."""
        return ENDPOINT_SETTINGS.names()

    def settings(self, kind: str | None = None) -> BaseModel:
        """The settings of ``kind`` (default: the selected kind), the read recorded
        (:func:`settings_reads`)."""
        name = kind or self.kind
        for reads in _SETTINGS_READS:
            reads.add(name)
        return self.checked_settings(name)

    def checked_settings(self, name: str) -> BaseModel:
        """The settings of kind ``name``, the read not recorded: for the rules that check
        them against the rest of a system (:meth:`SystemConfig._endpoint_rules`), which change
        nothing, so that what a computation read is what its results depend on (a derived
        system's validation reads every kind: :meth:`acesim.studies.dedup.ExactMemo.
        call_derived`)."""
        schema = ENDPOINT_SETTINGS.get(name, "endpoint.kind").settings
        extra = self.__pydantic_extra__ or {}
        value = extra.get(name)
        if not isinstance(value, schema):
            value = schema.model_validate({})
            extra[name] = value
        return value

    def of(self, schema: type[S], kind: str | None = None) -> S:
        """The settings of the kind whose schema is ``schema`` (typed access)."""
        if kind is None:
            names = [n for n, s in ENDPOINT_SETTINGS.items() if s.settings is schema]
            if not names:
                raise ConfigError("endpoint", f"no endpoint kind has the schema {schema.__name__}")
            kind = names[0]
        value = self.settings(kind)
        if not isinstance(value, schema):
            raise ConfigError(
                f"endpoint.{kind}", f"settings are {type(value).__name__}, not {schema.__name__}"
            )
        return value
