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
would compute exactly the same result. An argument :func:`canonical` cannot write down (a
lambda) makes a task unique: reuse is only ever skipped, never guessed.

:func:`reuse_plan` resolves the copies before the later tasks run, so a copied task is not run at
all; its result is the earlier task's object (results are not mutated after a run).
:class:`ExactMemo` does the same for calls inside one process (the HBM analysis's collectives,
many of them the same simulation across targets and variants).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.endpoint import note_reads, settings_reads
from ..config.system import SystemConfig
from ..workload.model import Workload
from .tasks import Task

__all__ = ["Traced", "traced_call", "traced", "canonical", "reuse_plan", "ExactMemo"]


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


def _system_form(*parts: Any) -> None:  # pragma: no cover - never called
    """What a system pickles as in a canonical form (the form is compared, never loaded)."""


def _written_form(kind: str, written: bytes) -> None:  # pragma: no cover - never called
    """What a system or a workload pickles as: its own form's bytes (compared, never loaded)."""


#: the forms of the systems and workloads one :func:`reuse_plan` has written, by the object's
#: id (the object kept, so that its id is not reused while it is a key) and the read set (None
#: for a workload, whose form does not depend on it)
Forms = dict[tuple[int, frozenset[str] | None], tuple[Any, bytes]]


class _Canonical(pickle.Pickler):
    """Pickles a call with each :class:`SystemConfig` in it as everything but the endpoint
    settings of kinds outside ``kinds``: its other fields, the selected kind, the read kinds'
    tables, its provenance. Each system and each workload (immutable) is written as the bytes
    of its own form, which ``forms`` (where given) keeps: a workload or system that many calls
    share is pickled once, not once per call."""

    def __init__(
        self,
        stream: io.BytesIO,
        kinds: frozenset[str],
        forms: Forms | None = None,
        own: Any = None,
    ) -> None:
        super().__init__(stream, protocol=pickle.HIGHEST_PROTOCOL)
        self.kinds = kinds
        self.forms = forms
        #: the object whose own form this pickler writes (pickled as it is, not as a form)
        self.own = own

    def reducer_override(self, obj: Any) -> Any:
        if obj is self.own:
            return NotImplemented
        if isinstance(obj, SystemConfig):
            return _written_form, ("system", self._form(obj, self.kinds, _system_parts))
        if isinstance(obj, Workload):
            return _written_form, ("workload", self._form(obj, None, None))
        return NotImplemented

    def _form(
        self, obj: Any, kinds: frozenset[str] | None, parts: Callable[..., Any] | None
    ) -> bytes:
        key = (id(obj), kinds)
        if self.forms is not None:
            kept = self.forms.get(key)
            if kept is not None and kept[0] is obj:
                return kept[1]
        stream = io.BytesIO()
        if parts is None:
            _Canonical(stream, self.kinds, self.forms, own=obj).dump(obj)
        else:
            _Canonical(stream, self.kinds, self.forms).dump(parts(obj, self.kinds))
        written = stream.getvalue()
        if self.forms is not None:
            self.forms[key] = (obj, written)
        return written


def _system_parts(obj: SystemConfig, kinds: frozenset[str]) -> tuple[Any, ...]:
    """What a system's form holds: its fields but the endpoint, its extra fields, the selected
    kind, the tables of the kinds in ``kinds``, its provenance."""
    fields = {name: value for name, value in obj.__dict__.items() if name != "endpoint"}
    tables = obj.endpoint.__pydantic_extra__ or {}
    read = [(kind, tables.get(kind)) for kind in sorted(kinds)]
    parts = (fields, obj.__pydantic_extra__, obj.endpoint.__dict__, read)
    return (_system_form, *parts, obj.provenance.to_dict())


def canonical(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kinds: frozenset[str],
    forms: Forms | None = None,
) -> Hashable:
    """What determines ``fn(*args)`` given that it reads the settings of ``kinds`` only: equal
    for two calls that compute the same result (module docstring); None when the call cannot
    be written down exactly (it is then never reused). ``forms``: the systems' and workloads'
    forms written so far, kept across the calls of one comparison (:class:`_Canonical`).

    The form is the call pickled (:class:`_Canonical`): equal bytes load as equal objects of
    equal types (``1`` and ``1.0``, ``0.0`` and ``-0.0`` stay apart), so two calls with equal
    forms read equal values. The converse need not hold (a set's order, an object shared in
    one call and copied in the other): a missed reuse, never a wrong one."""
    stream = io.BytesIO()
    try:
        _Canonical(stream, kinds, forms).dump((fn, args))
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return stream.getvalue()


def reuse_plan(
    done: Sequence[Task], reads: Mapping[Hashable, frozenset[str]], later: Sequence[Task]
) -> dict[Hashable, Hashable]:
    """For each task of ``later`` that is the same simulation as one of ``done`` (whose runs
    read the endpoint settings ``reads[key]``), its key -> that task's key."""
    by_reads: dict[frozenset[str], dict[Hashable, Hashable]] = {}
    forms: Forms = {}
    for task in done:
        kinds = reads[task.key]
        found = canonical(task.fn, task.args, kinds, forms)
        if found is not None:
            by_reads.setdefault(kinds, {}).setdefault(found, task.key)
    copies: dict[Hashable, Hashable] = {}
    for task in later:
        for kinds, known in by_reads.items():
            found = canonical(task.fn, task.args, kinds, forms)
            if found is not None and found in known:
                copies[task.key] = known[found]
                break
    return copies


class ExactMemo:
    """Results of calls by what determines them (:func:`canonical` under the read set each
    computed call recorded): a call equal to an earlier one in everything it read returns that
    call's result object (callers must not mutate it), and counts its reads as made (an
    enclosing :func:`traced_call` sees them). At most ``limit`` results are kept (the oldest
    read set's are dropped first).

    :meth:`call_derived` does the same for a call on a system derived from a base system,
    looked up without deriving it: by the base's form, written once per base and read set,
    and how it is derived."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.known: dict[frozenset[str], dict[Hashable, Any]] = {}
        self.hits = 0
        self.misses = 0
        #: the forms of the base systems :meth:`call_derived` was given (:data:`Forms`)
        self._forms: Forms = {}

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or the result of an earlier call that is the same computation."""
        for kinds, results in self.known.items():
            found = canonical(fn, args, kinds)
            if found is not None and found in results:
                self.hits += 1
                note_reads(kinds)
                return results[found]
        self.misses += 1
        done = traced_call(fn, args)
        note_reads(done.kinds)
        self._keep(done.kinds, canonical(fn, args, done.kinds), done.value)
        return done.value

    def call_derived(
        self,
        base: SystemConfig,
        how: Hashable,
        derive: Callable[[], SystemConfig],
        fn: Callable[..., Any],
        *args: Any,
    ) -> Any:
        """``fn(derive(), *args)``, where ``derive()`` makes a system from ``base`` as ``how``
        says (picklable; with ``base``, it must fix the derived system: bases equal in
        everything a call reads, derived the same way, give derived systems equal in
        everything it reads), or the result of an earlier such call that is the same
        computation: :meth:`call`'s, but the look-up pickles ``how`` and the arguments
        only, not the derived system (the base's form is written once per read set), and
        derives nothing. The reads of ``derive()`` count as the call's."""
        for kinds, results in self.known.items():
            found = self._derived_form(base, how, fn, args, kinds)
            if found is not None and found in results:
                self.hits += 1
                note_reads(kinds)
                return results[found]
        self.misses += 1
        with settings_reads() as reads:
            value = fn(derive(), *args)
        read = frozenset(reads)
        note_reads(read)
        self._keep(read, self._derived_form(base, how, fn, args, read), value)
        return value

    def _derived_form(
        self,
        base: SystemConfig,
        how: Hashable,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kinds: frozenset[str],
    ) -> Hashable:
        """The look-up key of :meth:`call_derived` under the read set ``kinds`` (None: it
        cannot be written down): the call on the base, written with the base's form kept."""
        if len(self._forms) >= _FORMS:
            self._forms.clear()
        return canonical(fn, ("derived", base, how, args), kinds, self._forms)

    def _keep(self, kinds: frozenset[str], key: Hashable, value: Any) -> None:
        """Remember ``value`` under ``key`` for calls that read ``kinds`` (the oldest read
        set's results dropped first beyond :attr:`limit`)."""
        if key is None:
            return
        if sum(len(r) for r in self.known.values()) >= self.limit:
            self.known.pop(next(iter(self.known)))
        self.known.setdefault(kinds, {})[key] = value


#: the base systems' forms :class:`ExactMemo` keeps at most (then forgotten, written again)
_FORMS = 64
