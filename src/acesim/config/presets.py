"""Loading system documents: shipped presets (package data) and user files (TOML/YAML/JSON)."""

from __future__ import annotations

import difflib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import tomllib
import yaml
from pydantic import ValidationError

from ..errors import ConfigError, shorten
from .astra import refuse_astra_format
from .errors import config_error_from
from .files import FileProblem, read_text_file
from .merge import merge_documents
from .npus import extend_npu, npu_preset_names, single_npu_document, single_npu_name
from .plausible import check_document
from .provenance import Provenance
from .system import ASSUMED_KINDS, SystemConfig

__all__ = [
    "DEFAULT_PRESET",
    "preset_names",
    "preset_document",
    "read_document",
    "check_document_values",
    "refuse_duplicates",
    "merge_documents",
    "system_document",
    "npu_preset_of",
    "system_from_dict",
    "load_system",
    "assumptions",
]

DEFAULT_PRESET = "ace-isca21"


def _preset_dir() -> Any:
    return resources.files("acesim.config").joinpath("presets")


def preset_names() -> list[str]:
    """Names of the presets shipped with acesim, sorted."""
    return sorted(
        p.name[: -len(".toml")] for p in _preset_dir().iterdir() if p.name.endswith(".toml")
    )


MAX_DOCUMENT_BYTES = 64 * 2**20
"""Largest system or sweep document read (64 MiB): real ones are a few KiB, and parsing
(YAML especially) holds several times the file's size in memory."""

MAX_DOCUMENT_DEPTH = 64
"""Deepest nesting of tables/lists a document may have: real ones nest fewer than ten levels,
and the parsers and validators recurse once per level (100,000 ``[`` overflow Python's stack)."""

MAX_DOCUMENT_INT = 2**63 - 1
"""Largest integer magnitude in a document: TOML's 64-bit range, which every float holds (a
bigger integer overflows when a field converts it to float; beyond 4,300 digits Python refuses
to read it at all)."""

DOCUMENT_SUFFIXES = (".toml", ".yaml", ".yml", ".json")


class _YamlRefusal(yaml.MarkedYAMLError):
    """A construct :class:`_DocumentLoader` does not accept (anchors, aliases, deep nesting)."""


class _DocumentLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses anchors and aliases and limits nesting, at compose
    time: a few hundred bytes of nested aliases ("billion laughs") expand to more memory than
    any machine has once anything walks, prints or validates the document."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _YamlRefusal(
                problem="YAML anchors and aliases (&name, *name, <<: *name) are not supported; "
                "write the values out",
                problem_mark=mark,
            )
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if self._depth >= MAX_DOCUMENT_DEPTH:
                raise _YamlRefusal(
                    problem=f"nested more than {MAX_DOCUMENT_DEPTH} levels deep",
                    problem_mark=mark,
                )
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if duplicate:
                raise _YamlRefusal(
                    problem=f"duplicate key {key!r} (the last one would silently win)",
                    problem_mark=key_node.start_mark,
                )
        return super().construct_mapping(node, deep)


def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; ValueError for a key given twice (``json.loads``
    would keep the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} (the last one would silently win)")
        out[key] = value
    return out


def _parse(text: str, suffix: str) -> Any:
    if suffix == ".toml":
        return tomllib.loads(text)
    if suffix == ".json":
        return json.loads(text, object_pairs_hook=refuse_duplicates)
    loader = _DocumentLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def check_document_values(path: Path | str, data: Any) -> None:
    """Nesting depth and integer range of a parsed document (or value), walked without
    recursion; ConfigError naming ``path`` and where in it."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if abs(value) > MAX_DOCUMENT_INT:
                raise ConfigError(
                    f"{path}: {where}" if where else str(path),
                    "integers must fit in 64 bits (at most 2**63 - 1 in magnitude)",
                    value,
                )
            continue
        if isinstance(value, (dict, list)):
            if depth >= MAX_DOCUMENT_DEPTH:
                raise ConfigError(
                    str(path), f"nested more than {MAX_DOCUMENT_DEPTH} levels deep (at {where})"
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, int) and not isinstance(value, dict):
                    sub = f"{where}[{key}]"
                else:
                    sub = f"{where}.{key}" if where else str(key)
                stack.append((item, sub, depth + 1))


def _yaml_message(exc: yaml.YAMLError) -> str:
    """One line: the problem and where it is (``line 3, column 5``)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        text = exc.problem or exc.context or "invalid YAML"
        mark = exc.problem_mark or exc.context_mark
        if mark is not None:
            text += f" (line {mark.line + 1}, column {mark.column + 1})"
        return text
    return str(exc)


def read_document(path: Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON file into a dict (errors name the file).

    Refused with a one-line :class:`ConfigError`: a missing path, a directory or other
    non-file, a file over :data:`MAX_DOCUMENT_BYTES`, text that is not UTF-8 (binary, UTF-16,
    latin-1), a syntax error, nesting deeper than :data:`MAX_DOCUMENT_DEPTH`, an integer beyond
    :data:`MAX_DOCUMENT_INT`, and YAML anchors/aliases.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix not in DOCUMENT_SUFFIXES:
            if path.is_dir():
                raise FileProblem("is a directory, expected a TOML, YAML or JSON file")
            if not path.exists():
                raise FileProblem("file does not exist")
            raise FileProblem("file must end in .toml, .yaml, .yml or .json")
        text = read_text_file(path, limit=MAX_DOCUMENT_BYTES, what="TOML, YAML or JSON file")
    except FileProblem as exc:
        raise ConfigError(str(path), str(exc)) from None
    try:
        data: Any = _parse(text, suffix)
    except _YamlRefusal as exc:
        raise ConfigError(str(path), _yaml_message(exc)) from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        message = _yaml_message(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
        first = shorten(message.strip().splitlines()[0] if message.strip() else "", 300)
        raise ConfigError(str(path), f"cannot parse: {first}") from None
    except RecursionError:
        raise ConfigError(
            str(path), f"cannot parse: nested more than {MAX_DOCUMENT_DEPTH} levels deep"
        ) from None
    except ValueError as exc:  # a 4,300-digit integer, a YAML date out of range, a duplicate key
        reason = shorten(str(exc).split(";")[0], 200)
        if "integer string conversion" in reason:
            reason = f"a number is too long ({reason})"
        raise ConfigError(str(path), f"cannot parse: {reason}") from None
    check_document_values(path, data)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "top level must be a table/mapping")
    return data


#: NVIDIA's product names for the 8-GPU NVSwitch node presets (DGX systems), accepted wherever
#: a preset is named; the system keeps the preset's own name.
PRESET_ALIASES = {
    "dgx-a100": "a100-nvswitch-8",
    "dgx-h100": "h100-nvswitch-8",
    "dgx-h200": "h200-nvswitch-8",
    "dgx-b200": "b200-nvswitch-8",
}


def preset_document(name: str) -> dict[str, Any]:
    """The raw document of a shipped preset (or of the preset an alias names)."""
    name = PRESET_ALIASES.get(name, name)
    names = preset_names()
    if name not in names:
        if name in npu_preset_names():
            hint = (
                f"{name} is an NPU preset: a system starts from it with [npu] extends = "
                f'"{name}"; it runs alone as {name}-single'
            )
        else:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see `acesim presets`"
        raise ConfigError("system", "unknown preset", name, hint=hint)
    text = _preset_dir().joinpath(name + ".toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def system_from_dict(data: dict[str, Any], origin: str = "") -> SystemConfig:
    """Validate a system document; errors are :class:`ConfigError` naming the field."""
    try:
        return SystemConfig.model_validate(data)
    except ValidationError as exc:
        err = config_error_from(exc, SystemConfig)
        if origin:
            err.args = (f"{origin}: {err.args[0]}",)
        raise err from None


#: A document may extend another this many levels deep (a chain, not a cycle).
MAX_EXTENDS_DEPTH = 8


def _raw_document(name_or_path: str | Path) -> tuple[dict[str, Any], Path | None]:
    text = str(name_or_path)
    path = Path(text)
    if path.suffix.lower() in DOCUMENT_SUFFIXES or path.exists():
        return read_document(path), path
    npu = single_npu_name(text)
    if npu is not None:
        return single_npu_document(npu), None
    return preset_document(text), None


def system_document(name_or_path: str | Path) -> dict[str, Any]:
    """The document of a preset name or a file path, with ``extends`` resolved.

    ``extends = "<preset or file>"`` at the top level makes the document a set of changes to
    another one (:func:`merge_documents`); a relative file path is relative to the extending
    file. Cycles and chains deeper than :data:`MAX_EXTENDS_DEPTH` are errors. Then
    ``[npu] extends = "<NPU preset>"`` starts the NPU from that preset
    (:func:`acesim.config.npus.extend_npu`). ``<NPU preset>-single`` names that NPU alone
    (:func:`acesim.config.npus.single_npu_document`).
    """
    return traced_document(name_or_path, force=True)[0]


def traced_document(
    name_or_path: str | Path, *, force: bool = False
) -> tuple[dict[str, Any], Provenance]:
    """:func:`system_document`, and what it was made from: the ``extends`` chain (nearest
    first) and the NPU preset (:class:`~acesim.config.provenance.Provenance`). A bare number
    implausible for its field is an error naming the document unless ``force``
    (:mod:`acesim.config.plausible`)."""
    chain: list[str] = []
    doc = _merged_document(name_or_path, (), chain)
    if not force:
        check_document(SystemConfig, doc, str(name_or_path))
    npu = doc.get("npu")
    npu_preset = npu.get("extends") if isinstance(npu, dict) else None
    try:
        doc = extend_npu(doc)
    except ConfigError as err:  # name the document, as the other errors about it do
        where = f"{name_or_path}: {err.field}"
        raise ConfigError(where, err.rule, err.value, hint=err.hint) from None
    provenance = Provenance(
        origin=str(name_or_path),
        extends=tuple(chain),
        npu=npu_preset if isinstance(npu_preset, str) else "",
    )
    return doc, provenance


def npu_preset_of(name_or_path: str | Path) -> str | None:
    """The NPU preset a system document starts its NPU from (``[npu] extends``, through any
    top-level ``extends``; an NPU preset's own name for ``<NPU preset>-single`` and for an NPU
    preset name); None when its NPU is written out in full."""
    text = str(name_or_path)
    if text in npu_preset_names():
        return text
    npu = single_npu_name(text)
    if npu is not None:
        return npu
    table = _merged_document(name_or_path, (), []).get("npu")
    parent = table.get("extends") if isinstance(table, dict) else None
    return parent if isinstance(parent, str) and parent else None


def _merged_document(
    name_or_path: str | Path, _chain: tuple[str, ...], parents: list[str]
) -> dict[str, Any]:
    doc, path = _raw_document(name_or_path)
    if path is not None:
        refuse_astra_format(doc, str(name_or_path))
    parent = doc.pop("extends", None)
    if parent is None:
        return doc
    if isinstance(parent, str):
        parents.append(parent)
    where = str(name_or_path)
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{where}: extends", "must name a preset or a system file", parent)
    target: str | Path = parent
    if path is not None and not Path(parent).is_absolute() and (path.parent / parent).exists():
        target = path.parent / parent
    key = str(Path(target).resolve()) if Path(str(target)).exists() else str(target)
    if key in _chain or len(_chain) >= MAX_EXTENDS_DEPTH:
        rule = "extends itself" if key in _chain else f"is more than {MAX_EXTENDS_DEPTH} deep"
        raise ConfigError(f"{where}: extends", f"the chain {rule}", " -> ".join((*_chain, key)))
    base = _merged_document(target, (*_chain, key), parents)
    return merge_documents(base, doc)


def load_system(name_or_path: str | Path = DEFAULT_PRESET, *, force: bool = False) -> SystemConfig:
    """A validated :class:`SystemConfig` from a preset name or a TOML/YAML/JSON file
    (``force``: accept bare numbers implausible for their fields,
    :mod:`acesim.config.plausible`)."""
    text = str(name_or_path)
    doc, provenance = traced_document(text, force=force)
    return system_from_dict(doc, origin=text).with_provenance(provenance)


def assumptions(system: SystemConfig) -> list[tuple[str, str, str]]:
    """(field, kind, note) for every sourced parameter, assumptions first."""
    rows = [(f, s.kind, s.note) for f, s in system.sources.items()]
    return sorted(rows, key=lambda r: (r[1] not in ASSUMED_KINDS, r[0]))
