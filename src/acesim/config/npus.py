"""NPU presets: one accelerator's ``[npu]`` table and where its values come from.

A preset is ``presets/npus/<name>.toml``: a one-line ``description``, an ``[npu]`` table and a
``[sources]`` table whose keys are ``npu.*`` paths. A system document starts from one with
``[npu] extends = "<name>"``; :func:`extend_npu` resolves it:

* the preset's ``[npu]`` table is the base and the document's other ``[npu]`` keys change it
  (tables such as ``matrix_flops`` or ``kernels`` merge key by key, every other value is
  replaced, as top-level ``extends`` does);
* the preset's sources carry over, except those of values the document changes (a datasheet
  note about a value no longer used would be wrong); the document's own sources win.

Each preset also runs alone (:func:`single_npu_document`, the system name ``<name>-single``):
one NPU on a network of one NPU, which carries nothing, for kernel microbenchmarks and
validation against single-GPU measurements.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import tomllib
from pydantic import ValidationError

from ..errors import ConfigError
from .errors import config_error_from
from .merge import leaf_paths, merge_documents, touches
from .system import NPUConfig, Source

__all__ = [
    "NpuPreset",
    "SINGLE_SUFFIX",
    "npu_preset_names",
    "npu_preset_document",
    "load_npu_preset",
    "extend_npu",
    "single_npu_name",
    "single_npu_document",
]

#: ``<npu preset>-single`` names the system of that NPU alone (:func:`single_npu_document`).
SINGLE_SUFFIX = "-single"

_KEYS = ("description", "npu", "sources")


def _npu_dir() -> Any:
    return resources.files("acesim.config").joinpath("presets", "npus")


def npu_preset_names() -> list[str]:
    """Names of the NPU presets shipped with acesim, sorted."""
    return sorted(p.name[: -len(".toml")] for p in _npu_dir().iterdir() if p.name.endswith(".toml"))


def npu_preset_document(name: str, field: str = "npu.extends") -> dict[str, Any]:
    """The raw document of NPU preset ``name`` (ConfigError naming ``field`` when unknown)."""
    names = npu_preset_names()
    if not isinstance(name, str) or name not in names:
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "known: " + ", ".join(names)
        raise ConfigError(field, "unknown NPU preset", name, hint=hint)
    text = _npu_dir().joinpath(name + ".toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@dataclass(frozen=True)
class NpuPreset:
    """A validated NPU preset: its name, description, NPU and the sources of its values."""

    name: str
    description: str
    npu: NPUConfig
    sources: dict[str, Source]


def load_npu_preset(name: str) -> NpuPreset:
    """NPU preset ``name``, validated (ConfigError naming the preset and the field)."""
    doc = npu_preset_document(name, "npu preset")
    extra = sorted(set(doc) - set(_KEYS))
    if extra:
        known = "known keys: " + ", ".join(_KEYS)
        raise ConfigError(f"{name}: {extra[0]}", "unknown key", hint=known)
    try:
        npu = NPUConfig.model_validate(doc.get("npu", {}))
    except ValidationError as exc:
        raise config_error_from(exc, NPUConfig, f"{name}: npu") from None
    sources: dict[str, Source] = {}
    for key, value in (doc.get("sources") or {}).items():
        if not key.startswith("npu."):
            raise ConfigError(f"{name}: sources.{key}", "an NPU preset sources npu.* fields only")
        try:
            sources[key] = Source.model_validate(value)
        except ValidationError as exc:
            raise config_error_from(exc, Source, f"{name}: sources.{key}") from None
    return NpuPreset(name, str(doc.get("description", "")), npu, sources)


def extend_npu(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a system document) with ``[npu] extends`` resolved (module docstring); the
    document itself when its ``[npu]`` extends nothing."""
    npu = doc.get("npu")
    if not isinstance(npu, dict) or "extends" not in npu:
        return doc
    changes = {k: v for k, v in npu.items() if k != "extends"}
    parent = npu["extends"]
    if not isinstance(parent, str) or not parent:
        raise ConfigError("npu.extends", "must name an NPU preset", parent)
    preset = npu_preset_document(parent)
    out = dict(doc)
    out["npu"] = merge_documents(preset.get("npu", {}), changes)
    own = doc.get("sources", {})
    if isinstance(own, dict):  # anything else is reported when the document is validated
        changed = leaf_paths(changes, "npu")
        inherited = preset.get("sources", {})
        kept = {k: v for k, v in inherited.items() if not touches(k, changed)}
        out["sources"] = {**kept, **own}
    return out


def single_npu_name(name: str) -> str | None:
    """The NPU preset of a ``<npu>-single`` system name (None when ``name`` is not one)."""
    if name.endswith(SINGLE_SUFFIX) and name[: -len(SINGLE_SUFFIX)] in npu_preset_names():
        return name[: -len(SINGLE_SUFFIX)]
    return None


def single_npu_document(name: str) -> dict[str, Any]:
    """The system document of NPU preset ``name`` alone: ``<name>-single``, one NPU whose
    network is one dimension of size 1 (no peer: no collective sends a byte)."""
    npu_preset_document(name, "npu preset")  # an unknown name is an error here
    note = (
        "one NPU: a dimension of size 1 has no peer, so no collective sends a byte over it; "
        "the schema needs a positive link bandwidth and 1 B/s is a placeholder that would make "
        "any traffic glaringly slow (do not resize this system; start from a node preset)"
    )
    return {
        "name": name + SINGLE_SUFFIX,
        "description": f"One {name} alone, on a network of one NPU that carries nothing "
        "(kernel microbenchmarks, validation).",
        "npu": {"extends": name},
        "network": {
            "dimensions": [
                {"name": "single", "kind": "switch", "size": 1, "link_bandwidth": "1 B/s"}
            ]
        },
        "sources": {"network.dimensions[0].link_bandwidth": {"kind": "assumption", "note": note}},
    }
