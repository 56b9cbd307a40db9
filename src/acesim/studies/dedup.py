"""Simulations a study plans twice, run once: exact reuse of a task's result.

A sensitivity variant moves one assumption of the system, and many of a reproduction's runs
never look at it: ACE's DMA bandwidth (``dma_half``) cannot change a baseline run, the
baseline's HBM partition (``static_hbm``) cannot change an ACE run. Such a run is the same
simulation as the main reproduction's, and its result is the same, bit for bit.

Which inputs a task depends on is *recorded*, not assumed: every endpoint kind's settings are
read through :meth:`acesim.config.endpoint.EndpointConfig.settings`, and :func:`traced_call`
runs a task inside :func:`acesim.config.endpoint.settings_reads`, which notes the kinds whose
settings it read. Everything else in its arguments (the NPU, the network, the collective
settings, the reproduction table, the workload, the run options, the system's name, sources and
provenance that results echo, the selected endpoint kind) counts whole. Two tasks with the same
function are the same simulation when their arguments are equal in everything but the settings
of kinds the first one never read (:func:`canonical`): the second would read exactly the same
values in the same order (by induction over its steps: every value read so far is equal), so it
would compute exactly the same result. A value :func:`canonical` cannot compare (an object it
does not know) makes a task unique: reuse is only ever skipped, never guessed.

:func:`reuse_plan` resolves the copies before the later tasks run, so a copied task is not run at
all; its result is the earlier task's object (results are not mutated after a run).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from ..config.endpoint import settings_reads
from ..config.system import SystemConfig
from .tasks import Task

__all__ = ["Traced", "traced_call", "traced", "canonical", "reuse_plan"]


@dataclass(frozen=True)
class Traced:
    """A task's result and the endpoint kinds whose settings it read."""

    value: Any
    kinds: frozenset[str]


def traced_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Traced:
    """``fn(*args)`` and the endpoint kinds whose settings it read (a task's function)."""
    with settings_reads() as kinds:
        value = fn(*args)
    return Traced(value, frozenset(kinds))


def traced(tasks: Iterable[Task]) -> list[Task]:
    """The same tasks, each returning a :class:`Traced`."""
    return [Task(t.key, traced_call, (t.fn, t.args)) for t in tasks]


class _Opaque(Exception):
    """A value :func:`canonical` cannot compare exactly."""


class _Memo:
    """The canonical forms already built in one :func:`reuse_plan`, by object and read set
    (cases share their workload, variants their systems' parts); holds the objects, so that
    their ids stay theirs."""

    def __init__(self) -> None:
        self.forms: dict[tuple[int, frozenset[str]], tuple[Any, Hashable]] = {}
        self.active = False


_MEMO = _Memo()


def _system(system: SystemConfig, kinds: frozenset[str]) -> Hashable:
    parts = system.__dict__.items()
    fields = tuple((name, _canon(value, kinds)) for name, value in parts if name != "endpoint")
    endpoint = system.endpoint
    tables = endpoint.__pydantic_extra__ or {}
    read = tuple((kind, _canon(tables.get(kind), kinds)) for kind in sorted(kinds))
    return (
        "SystemConfig",
        fields,
        _canon(system.__pydantic_extra__, kinds),
        _canon(endpoint.__dict__, kinds),
        read,
        _canon(system.provenance.to_dict(), kinds),
    )


def _model(value: BaseModel, kinds: frozenset[str]) -> Hashable:
    return (
        type(value).__module__,
        type(value).__qualname__,
        _canon(value.__dict__, kinds),
        _canon(value.__pydantic_extra__, kinds),
        _canon(value.__pydantic_private__, kinds),
    )


def _structure(value: Any, kinds: frozenset[str]) -> Hashable:
    """The canonical form of a pydantic model or a dataclass instance."""
    if isinstance(value, SystemConfig):
        return _system(value, kinds)
    if isinstance(value, BaseModel):
        return _model(value, kinds)
    fields = dataclasses.fields(value)
    return (
        type(value).__module__,
        type(value).__qualname__,
        tuple((f.name, _canon(getattr(value, f.name), kinds)) for f in fields),
    )


def _canon(value: Any, kinds: frozenset[str]) -> Hashable:
    """The hashable, type-exact form of ``value`` (see :func:`canonical`)."""
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", value.hex())  # exact: 1 and 1.0, 0.0 and -0.0 stay apart
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        memo = (id(value), kinds)
        known = _MEMO.forms.get(memo)
        if known is None:
            known = (value, _structure(value, kinds))
            _MEMO.forms[memo] = known
        return known[1]
    if isinstance(value, Mapping):
        items = tuple((_canon(k, kinds), _canon(v, kinds)) for k, v in value.items())
        return (type(value).__name__, items)  # in order: stricter than dict equality
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canon(v, kinds) for v in value))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, frozenset(_canon(v, kinds) for v in value))
    if isinstance(value, enum.Enum):
        return (type(value).__module__, type(value).__qualname__, value.name)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if callable(value) and hasattr(value, "__module__") and hasattr(value, "__qualname__"):
        return ("callable", value.__module__, value.__qualname__)
    raise _Opaque(type(value).__qualname__)


def canonical(fn: Callable[..., Any], args: tuple[Any, ...], kinds: frozenset[str]) -> Hashable:
    """What determines ``fn(*args)`` given that it reads the settings of ``kinds`` only: equal
    for two calls that compute the same result (module docstring); None when some argument
    cannot be compared exactly (the call is then never reused)."""
    owner = not _MEMO.active
    _MEMO.active = True
    try:
        return (_canon(fn, kinds), _canon(args, kinds))
    except _Opaque:
        return None
    finally:
        if owner:
            _MEMO.active = False
            _MEMO.forms.clear()


def reuse_plan(
    done: Sequence[Task], reads: Mapping[Hashable, frozenset[str]], later: Sequence[Task]
) -> dict[Hashable, Hashable]:
    """For each task of ``later`` that is the same simulation as one of ``done`` (whose runs
    read the endpoint settings ``reads[key]``), its key -> that task's key."""
    _MEMO.active = True
    try:
        return _reuse_plan(done, reads, later)
    finally:
        _MEMO.active = False
        _MEMO.forms.clear()


def _reuse_plan(
    done: Sequence[Task], reads: Mapping[Hashable, frozenset[str]], later: Sequence[Task]
) -> dict[Hashable, Hashable]:
    by_reads: dict[frozenset[str], dict[Hashable, Hashable]] = {}
    for task in done:
        kinds = reads[task.key]
        found = canonical(task.fn, task.args, kinds)
        if found is not None:
            by_reads.setdefault(kinds, {}).setdefault(found, task.key)
    copies: dict[Hashable, Hashable] = {}
    for task in later:
        for kinds, known in by_reads.items():
            found = canonical(task.fn, task.args, kinds)
            if found is not None and found in known:
                copies[task.key] = known[found]
                break
    return copies
