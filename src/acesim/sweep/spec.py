"""Sweep specifications: a base point plus axes, expanded into fully resolved points.

A spec (TOML, or the same structure as a dict) has::

    name = "collective-hbm"          # optional, default: the file name
    kind = "collective"              # or "run", or "llm"
    force = false                    # true: accept bare numbers implausible for their fields
    [base]                           # one point: a collective, or an experiment document
    system = "ace-isca21"
    op = "all-reduce"
    size = "64 MiB"
    [grid]                           # cartesian product of every list
    "endpoint.kind" = ["baseline", "ace"]
    "npu.hbm_bandwidth" = ["900 GB/s", "1.6 TB/s"]
    [zip]                            # lists of equal length, advanced in lockstep
    "network.dimensions[0].size" = [2, 4]
    "network.dimensions[1].size" = [2, 4]

Paths: ``workload.*`` and ``run.*`` (run points), ``op``, ``size``, ``exact``, ``dims``,
``compute`` (collective points) and ``model``, ``parallel``, ``global_batch``, ``micro_batch``,
``seq``, ``precision``, ``nodes``, ``mode`` (LLM points: the arguments of ``acesim run`` for an
LLM model; ``parallel = ["tp=8,pp=4", "tp=4,pp=8"]`` sweeps the parallel configuration)
address the point; ``system`` swaps the whole system (a preset
name, a file or an inline table); ``endpoint = "ace"`` is shorthand for ``endpoint.kind``; every
other path addresses the system document.

Errors are split in two (see docs/sweeps.md):

* *structural* — the spec cannot be read, a key or path does not exist in the schema, an axis is
  not a non-empty list, zip lists differ in length, a bare number is implausible for its system
  field (``npu.hbm_bandwidth = [450, 900]``: B/s, a unit left out; :mod:`acesim.config.
  plausible`; ``force = true`` takes them as written): :class:`ConfigError` before anything
  runs;
* *a value* that fails validation for one point (``npu.hbm_bandwidth = "-1 GB/s"``, a list index
  that one swept system lacks): that point is never run; it is recorded in the database with the
  :class:`ConfigError` naming the path and value, and every other point runs. An LLM point's
  case is resolved up front, so a parallel configuration that does not divide the model or the
  GPUs, or does not fit in HBM, is such a point: recorded as refused with its reason. When
  *every* point is invalid the spec is rejected as a whole, and ``strict=True`` rejects it on
  the first.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError

from ..config.errors import config_error_from
from ..config.experiment import RunOptions, WorkloadConfig
from ..config.plausible import check_document, check_value
from ..config.presets import (
    DEFAULT_PRESET,
    npu_preset_of,
    read_document,
    system_from_dict,
    traced_document,
)
from ..config.system import SystemConfig
from ..errors import ConfigError, TopologyError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.endpoints.copy_engine import facts_refusal
from ..hardware.platform import elaborate
from ..runs.kinds import RUN_KINDS
from ..runs.point import BEST_PREFIX
from .paths import check_path, get_path, parse_path, set_in_place

__all__ = ["Axis", "Point", "SweepSpec", "load_spec", "config_hash", "canonical_json"]

Kind = Literal["collective", "run", "llm"]
#: The most points one spec may expand to (each is resolved and hashed up front).
MAX_POINTS = 1_000_000
Target = Literal["system", "system_ref", "endpoint", "param", "workload", "run"]

SPEC_KEYS = ("name", "description", "kind", "force", "base", "grid", "zip")
#: The base keys of every kind's points; each kind adds its own (RunKind.point_params).
SYSTEM_KEYS = ("system", "overrides", "endpoint")
#: The training kind's point tables (an experiment document's).
TABLES = ("workload", "run")


def _params(kind: str) -> tuple[str, ...]:
    """The point inputs of run kind ``kind`` (sweep kinds: collective, run, llm)."""
    return RUN_KINDS.get(kind, "kind").point_params


def canonical_json(doc: Any) -> str:
    """Key-sorted, whitespace-free JSON: the same document always gives the same text."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_hash(config: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a resolved point configuration (64 hex digits)."""
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Axis:
    """One swept path and its values; axes of one zip group share ``group``."""

    path: str
    parts: tuple[str | int, ...]
    target: Target
    values: tuple[Any, ...]
    group: str


@dataclass
class Point:
    """One resolved point of a sweep.

    ``config`` is what a worker executes (system document resolved and normalised to SI units,
    without its ``sources`` table); ``hash`` is :func:`config_hash` of it. An invalid point has
    ``error`` set and ``config`` holding the raw (unvalidated) resolution, hashed the same way.
    ``columns`` are the values stored in the swept columns: the resolved value at each path
    (numbers in SI base units) when the point is valid, the value as written otherwise.
    """

    index: int
    values: dict[str, Any]
    config: dict[str, Any]
    hash: str
    columns: dict[str, Any]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class SweepSpec:
    """A parsed, structurally checked sweep specification."""

    name: str
    kind: Kind
    base: dict[str, Any]
    grid: list[Axis] = field(default_factory=list)
    zips: list[list[Axis]] = field(default_factory=list)
    description: str = ""
    base_dir: Path = field(default_factory=Path.cwd)
    #: accept bare numbers implausible for their fields (``force = true``;
    #: :mod:`acesim.config.plausible`)
    force: bool = False

    @property
    def axes(self) -> list[Axis]:
        """Every axis: grid axes in spec order, then the zip groups."""
        return self.grid + [a for group in self.zips for a in group]

    def __len__(self) -> int:
        count = 1
        for axis in self.grid:
            count *= len(axis.values)
        for group in self.zips:
            count *= len(group[0].values)
        return count

    def combinations(self) -> list[dict[str, Any]]:
        """Every point's {path: value as written}, the last axis varying fastest."""
        dims: list[list[list[tuple[str, Any]]]] = [
            [[(a.path, v)] for v in a.values] for a in self.grid
        ]
        for group in self.zips:
            dims.append(
                [[(a.path, a.values[i]) for a in group] for i in range(len(group[0].values))]
            )
        return [dict(kv for cell in combo for kv in cell) for combo in itertools.product(*dims)]

    def check_bare_numbers(self) -> None:
        """ConfigError (before anything runs) for a bare number implausible for its system
        field in ``base.overrides`` or an axis, unless ``force``
        (:mod:`acesim.config.plausible`)."""
        if self.force:
            return
        for path, value in self.base.get("overrides", {}).items():
            check_value(SystemConfig, path, value, "base.overrides")
        for axis in self.axes:
            if axis.target == "system":
                for value in axis.values:
                    check_value(SystemConfig, axis.path, value, f"[{axis.group}]")

    def points(self) -> list[Point]:
        """Every point, resolved and validated (invalid ones carry their error)."""
        self.check_bare_numbers()
        resolver = _Resolver(self)
        return [resolver.point(i, values) for i, values in enumerate(self.combinations())]


# ---------------------------------------------------------------------------------------------
# parsing


def load_spec(spec: SweepSpec | dict[str, Any] | str | Path) -> SweepSpec:
    """A :class:`SweepSpec` from a TOML/YAML/JSON file, a spec dict, or itself.

    Raises ConfigError (naming the key or path) for every structural problem.
    """
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, name="sweep", base_dir=Path.cwd())
    path = Path(spec)
    doc = read_document(path)
    return parse_spec(doc, name=path.stem, base_dir=path.resolve().parent)


def parse_spec(
    doc: dict[str, Any], *, name: str = "sweep", base_dir: Path | None = None
) -> SweepSpec:
    """Check a spec document's structure and build a :class:`SweepSpec`."""
    _known_keys(doc, SPEC_KEYS, "")
    kind = doc.get("kind", "collective")
    if not isinstance(kind, str) or kind not in ("collective", "run", "llm"):
        raise ConfigError("kind", "must be 'collective', 'run' or 'llm'", kind)
    base = doc.get("base", {})
    if not isinstance(base, dict):
        raise ConfigError("base", "must be a table", base)
    base = copy.deepcopy(base)
    _known_keys(base, SYSTEM_KEYS + _params(kind), "base")
    overrides = base.get("overrides", {})
    if not isinstance(overrides, dict):
        raise ConfigError("base.overrides", "must be a table of dotted paths", overrides)
    for path, value in overrides.items():
        check_path(SystemConfig, parse_path(path), f"base.overrides.{path}", value)
    spec_name = doc.get("name", name)
    if not isinstance(spec_name, str) or not spec_name:
        raise ConfigError("name", "must be a non-empty string", spec_name)
    description = doc.get("description", "")
    force = doc.get("force", False)
    if not isinstance(force, bool):
        raise ConfigError("force", "must be true or false", force)
    grid_doc = doc.get("grid", {})
    if not isinstance(grid_doc, dict):
        raise ConfigError("grid", "must be a table of path = [values]", grid_doc)
    grid = [_axis(kind, p, v, "grid", "grid") for p, v in _flatten(grid_doc, "grid")]
    zip_doc = doc.get("zip", [])
    groups = [zip_doc] if isinstance(zip_doc, dict) else zip_doc
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ConfigError("zip", "must be a table (or an array of tables) of path = [values]")
    zips: list[list[Axis]] = []
    for i, group_doc in enumerate(groups):
        label = "zip" if isinstance(zip_doc, dict) else f"zip[{i}]"
        group = [_axis(kind, p, v, label, label) for p, v in _flatten(group_doc, label)]
        if not group:
            continue
        lengths = {a.path: len(a.values) for a in group}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{p}: {n}" for p, n in lengths.items())
            raise ConfigError(label, f"lists must have equal lengths, got {shown}")
        zips.append(group)
    count = 1
    for axis in grid:
        count *= len(axis.values)
    for group in zips:
        count *= len(group[0].values)
    if count > MAX_POINTS:
        raise ConfigError(
            "grid", f"the spec expands to {count:,} points, more than {MAX_POINTS:,}; split it"
        )
    seen: set[str] = set()
    for axis in grid + [a for g in zips for a in g]:
        if axis.path in seen:
            raise ConfigError(f"[{axis.group}] {axis.path}", "path is swept twice")
        seen.add(axis.path)
    return SweepSpec(
        name=spec_name,
        kind=cast(Kind, kind),
        base=base,
        grid=grid,
        zips=zips,
        description=str(description),
        base_dir=base_dir or Path.cwd(),
        force=force,
    )


def _known_keys(doc: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    import difflib

    for key in doc:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(known)
            raise ConfigError(f"{where}.{key}" if where else key, "unknown key", hint=hint)


def _flatten(doc: dict[str, Any], where: str, prefix: str = "") -> list[tuple[str, Any]]:
    """``{"npu": {"hbm_bandwidth": [..]}}`` -> ``[("npu.hbm_bandwidth", [..])]``."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.extend(_flatten(value, where, path))
        else:
            out.append((path, value))
    return out


def _axis(kind: str, path: str, values: Any, where: str, group: str) -> Axis:
    label = f"[{where}] {path}"
    if not isinstance(values, list):
        raise ConfigError(label, "must be a list of values", values)
    if not values:
        raise ConfigError(label, "must list at least one value", values)
    parts = parse_path(path)
    head = parts[0]
    target: Target
    if head == "system":
        if len(parts) > 1:
            raise ConfigError(
                label,
                "unknown path: address system fields without the 'system.' prefix",
                hint=f"write {path[len('system.') :]!r}",
            )
        target = "system_ref"
    elif head == "overrides":
        raise ConfigError(label, "unknown path: sweep system fields directly, not 'overrides'")
    elif head == "endpoint" and len(parts) == 1 and all(isinstance(v, str) for v in values):
        target = "endpoint"
    elif kind == "run" and head in TABLES:
        model: type[BaseModel] = WorkloadConfig if head == "workload" else RunOptions
        check_path(model, parts[1:], label, values, prefix=str(head))
        target = "workload" if head == "workload" else "run"
    elif head in _params(kind):
        if len(parts) > 1:
            raise ConfigError(label, f"unknown path: {head!r} has no fields", values)
        target = "param"
    else:
        check_path(SystemConfig, parts, label, values)
        target = "system"
    return Axis(path, tuple(parts), target, tuple(values), group)


# ---------------------------------------------------------------------------------------------
# resolution


def _normalize(model: type[BaseModel], doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    try:
        return model.model_validate(doc).model_dump(mode="json")
    except ValidationError as exc:
        raise config_error_from(exc, model, prefix) from None


class _Resolver:
    """Turns one combination of axis values into a :class:`Point` (system documents cached)."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self._systems: dict[str, dict[str, Any]] = {}

    def system_doc(self, ref: Any) -> dict[str, Any]:
        if isinstance(ref, dict):
            if not self.spec.force:
                check_document(SystemConfig, ref, "system")
            return copy.deepcopy(ref)
        if not isinstance(ref, str):
            raise ConfigError("system", "must be a preset name, a file path or a table", ref)
        if ref not in self._systems:
            local = self.spec.base_dir / ref
            target: str | Path = local if not Path(ref).is_absolute() and local.exists() else ref
            self._systems[ref] = traced_document(target, force=self.spec.force)[0]
        return copy.deepcopy(self._systems[ref])

    def point(self, index: int, values: dict[str, Any]) -> Point:
        spec = self.spec
        base = spec.base
        axes = spec.axes
        raw: dict[str, Any] = {"kind": spec.kind}
        try:
            ref = values.get("system", base.get("system", DEFAULT_PRESET))
            raw["system"] = ref if isinstance(ref, dict) else {"$ref": ref}
            system = self.system_doc(ref)
            raw["system"] = system
            for path, value in base.get("overrides", {}).items():
                set_in_place(system, f"base.overrides.{path}", parse_path(path), value)
            if "endpoint" in base:
                set_in_place(system, "base.endpoint", ["endpoint", "kind"], base["endpoint"])
            if spec.kind == "run":
                raw.update({t: copy.deepcopy(base.get(t, {})) for t in TABLES})
            else:
                raw.update({k: base[k] for k in _params(spec.kind) if k in base})
            for axis in axes:
                value = copy.deepcopy(values[axis.path])
                if axis.target == "system":
                    set_in_place(system, axis.path, list(axis.parts), value)
                elif axis.target == "endpoint":
                    set_in_place(system, axis.path, ["endpoint", "kind"], value)
                elif axis.target == "param":
                    raw[axis.path] = value
                elif axis.target in ("workload", "run"):
                    set_in_place(raw[axis.target], axis.path, list(axis.parts[1:]), value)
            _check_copy_engine_facts(ref, system)
            config = self.validate(raw)
        except (ConfigError, TopologyError) as exc:
            columns = {a.path: _column_value(values[a.path]) for a in axes}
            return Point(index, values, raw, config_hash(raw), columns, error=str(exc))
        columns = {a.path: self.column(a, values[a.path], config) for a in axes}
        return Point(index, values, config, config_hash(config), columns)

    def validate(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The normalised configuration of a raw point (its run kind's ``point_config``;
        ConfigError naming path and value). ``best_<kind>`` searches the kind's variants:
        a training point's ``run.search``, another kind's ``search``."""
        search = _best_of(raw)
        if search and self.spec.kind == "run":
            raw["run"] = {**raw["run"], "search": True}
        config = system_from_dict(raw["system"])
        elaborate(config)
        system = config.model_dump(mode="json", exclude={"sources"})
        out = RUN_KINDS.get(self.spec.kind).point_config(config, system, raw)
        if search and self.spec.kind != "run":
            out["search"] = True
        return out

    def column(self, axis: Axis, value: Any, config: dict[str, Any]) -> Any:
        """The swept column's value: resolved (SI) at the path, else the value as written."""
        if isinstance(value, str) and value.startswith((BEST_PREFIX, "best-")):
            # best_<kind>: the search, not the kind it resolved to
            return BEST_PREFIX + value[len(BEST_PREFIX) :]
        try:
            if axis.target == "system":
                return _column_value(get_path(config["system"], list(axis.parts)))
            if axis.target in ("workload", "run"):
                return _column_value(get_path(config[axis.target], list(axis.parts[1:])))
            if axis.target == "param":
                return _column_value(config[axis.path])
        except (KeyError, IndexError, TypeError):
            pass
        return _column_value(value)


def _column_value(value: Any) -> Any:
    """A value SQLite stores as is (numbers, text, booleans as 0/1), else its JSON text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return canonical_json(value)


def _check_copy_engine_facts(ref: Any, system: dict[str, Any]) -> None:
    """ConfigError when a point runs ``copy_engine`` (or searches it) on a system document of
    another vendor's NPU that states no ``[endpoint.copy_engine]`` table (the kind's rule,
    :func:`~acesim.hardware.endpoints.copy_engine.facts_refusal`): a point's document is
    flattened, so its NPU preset is read from the system it names."""
    endpoint = system.get("endpoint")
    if not isinstance(endpoint, dict):
        return
    kind = str(endpoint.get("kind", ""))
    for prefix in (BEST_PREFIX, "best-"):
        kind = kind.removeprefix(prefix)
    if kind not in ENDPOINT_KINDS or ENDPOINT_KINDS.canonical(kind) != "copy_engine":
        return
    if isinstance(ref, dict):
        npu = ref.get("npu")
        preset = npu.get("extends") if isinstance(npu, dict) else None
    else:
        preset = npu_preset_of(ref)
    stated = bool(endpoint.get("copy_engine"))
    refusal = facts_refusal(str(system.get("name", "")), preset or "", stated)
    if refusal is not None:
        raise ConfigError("endpoint.copy_engine", refusal)


def _best_of(raw: dict[str, Any]) -> bool:
    """Turn ``endpoint.kind = "best_<kind>"`` into ``<kind>`` (in place); True if it was."""
    endpoint = raw.get("system", {}).get("endpoint")
    kind = endpoint.get("kind") if isinstance(endpoint, dict) else None
    if not isinstance(kind, str) or not kind.startswith((BEST_PREFIX, "best-")):
        return False
    name = kind[len(BEST_PREFIX) :]  # best-<kind> is best_<kind> spelt with a hyphen
    if name not in ENDPOINT_KINDS and name not in ENDPOINT_KINDS.aliases_all():
        return False  # the system validation reports the unknown kind
    endpoint["kind"] = ENDPOINT_KINDS.canonical(name)
    return True
