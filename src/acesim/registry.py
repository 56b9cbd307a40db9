"""Registries: one definition for each list of names (endpoint kinds, loops, collective ops,
per-dimension algorithms).

A :class:`Registry` maps a name to the object that implements it. Everything that offers a
choice to a user (CLI option help, config validation, sweeps, comparisons, docs tables) reads
the registry instead of keeping its own list, so adding a kind is one module and one
``register`` call. Names keep their registration order (built-ins first, then plug-ins), which
is the order choices are shown in.

Unknown names raise :class:`~acesim.errors.ConfigError` naming the field, the known names and
the closest match.

A registry may be *listed* (``listed=True``): it is then found by :func:`listed` under its
``what``, so that configuration documents, which sit below the layers that define the names,
can still check a name when they are validated (``collective.algorithms`` names algorithms
that :mod:`acesim.network` registers).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from .errors import ConfigError

__all__ = ["Registry", "listed"]

T = TypeVar("T")

_LISTED: dict[str, Registry[Any]] = {}


def listed(what: str) -> Registry[Any] | None:
    """The listed registry of ``what`` (None while the layer that defines it is not loaded)."""
    return _LISTED.get(what)


class Registry(Generic[T]):
    """Names -> implementations, in registration order.

    Args:
        what: what the names are, for messages ("endpoint kind").
        field: the configuration field users set a name in ("endpoint.kind").
        listed: findable by :func:`listed` under ``what``.
    """

    def __init__(self, what: str, field: str, *, listed: bool = False):
        self.what = what
        self.field = field
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        if listed:
            _LISTED[what] = self

    def register(self, name: str, item: T, *, replace: bool = False) -> T:
        """Add ``item`` under ``name``; a second registration of a name is an error unless
        ``replace`` is true. Returns ``item`` (usable as a decorator's tail)."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ConfigError(self.field, f"a {self.what} name must be a non-empty word", name)
        if name in self._items and not replace:
            raise ConfigError(self.field, f"{self.what} {name!r} is already registered")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its aliases (for tests and plug-ins that withdraw a kind)."""
        self._items.pop(name, None)
        for alias in [a for a, n in self._aliases.items() if n == name]:
            del self._aliases[alias]

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` stand for the registered ``name`` wherever a name is looked up
        (:meth:`get`, :meth:`canonical`); listings keep the one name."""
        if alias in self._items:
            raise ConfigError(self.field, f"{alias!r} is already a {self.what} name")
        self.get(name)
        self._aliases[alias] = name

    def aliases(self, name: str) -> tuple[str, ...]:
        """The aliases of ``name``."""
        return tuple(a for a, n in self._aliases.items() if n == name)

    def aliases_all(self) -> tuple[str, ...]:
        """Every alias, of every name."""
        return tuple(self._aliases)

    def canonical(self, name: str, field: str | None = None) -> str:
        """The registered name ``name`` is or stands for; ConfigError as :meth:`get`."""
        if isinstance(name, str) and name in self._aliases:
            return self._aliases[name]
        return self.check(name, field)

    def get(self, name: str, field: str | None = None) -> T:
        """The implementation of ``name`` (or of the name an alias stands for); ConfigError
        naming ``field`` (default: the registry's field) with the known names and a
        did-you-mean hint otherwise."""
        try:
            return self._items[self._aliases.get(name, name)]
        except (KeyError, TypeError):
            raise self.unknown(name, field) from None

    def unknown(self, name: object, field: str | None = None) -> ConfigError:
        """The error for a name that is not registered."""
        known = list(self._items)
        close = (
            difflib.get_close_matches(str(name), known + list(self._aliases), n=1)
            if isinstance(name, str)
            else []
        )
        hint = f"did you mean {close[0]!r}?" if close else None
        return ConfigError(
            field or self.field, f"must be one of {', '.join(known)}", name, hint=hint
        )

    def check(self, name: str, field: str | None = None) -> str:
        """``name`` if registered, else the ConfigError of :meth:`get`."""
        self.get(name, field)
        return name

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order."""
        return tuple(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def choices(self) -> str:
        """The names as a comma-separated list (for help texts)."""
        return ", ".join(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._items)})"
