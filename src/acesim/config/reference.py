"""The system-file reference (docs/system-file.md), generated from the pydantic models.

:func:`system_file_reference` walks :class:`~acesim.config.system.SystemConfig` and every
registered endpoint kind's settings and writes one table per section: key, type (with the unit
physical fields take), default and description. ``scripts/gen_system_doc.py`` writes the file;
a test fails when the file and the models disagree, so the reference cannot drift.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .endpoint import ENDPOINT_SETTINGS
from .npus import load_npu_preset, npu_preset_names
from .system import SystemConfig

__all__ = ["system_file_reference"]

#: Unit accepted by each physical quantity kind (acesim.units).
_UNITS = {
    "size": "bytes: '4 MiB', '1 GB', or a number of bytes",
    "rate": "bytes/s: '900 GB/s', '400 Gb/s', or a number of B/s",
    "time": "seconds: '1.5 us', '200 ns', or a number of s",
    "flop_rate": "FLOP/s: '125 TFLOP/s', or a number",
    "flops": "FLOP: '4.1 GFLOP', or a number",
    "power": "watts: '700 W', '1.2 kW', or a number of W",
    "energy_per_byte": "joules per byte: '24 pJ/B', '3.9 pJ/bit', or a number of J/B",
    "energy_per_flop": "joules per FLOP: '0.33 pJ/FLOP', or a number of J/FLOP",
}

_SECTIONS: list[tuple[str, str]] = [
    ("npu", "The accelerator: compute units, their peak rate, HBM."),
    (
        "npu.power",
        "The NPU's power model (optional; docs/energy.md): its limit, idle power and the "
        "energy of each FLOP and byte.",
    ),
    ("network", "The network: a list of dimensions (`[[network.dimensions]]`)."),
    ("network.dimensions[]", "One network dimension, as seen from an NPU."),
    (
        "network.dimensions[].power",
        "A dimension's power (optional; docs/energy.md): its links' PHYs, its switches or its "
        "NICs (`[scale_out.power]` the same for the scale-out dimension).",
    ),
    (
        "scale_out",
        "How several nodes of this system are joined (optional): `--nodes N` (`nodes = N`, "
        "`run.nodes`) appends this dimension, of size N, after the node's own.",
    ),
    ("collective", "How collectives are decomposed and scheduled."),
    (
        "host",
        "The host thread that issues each GPU's launches (acesim.training.host): charged where "
        "the framework synchronises the host with the GPU; both figures unset: not modelled.",
    ),
    ("endpoint", "Which collective endpoint runs collectives (`kind`), and each kind's table."),
    ("reproduction", "What `acesim reproduce` runs on this system (optional)."),
]


def _quantity_kind(info: FieldInfo) -> str | None:
    for meta in info.metadata:
        func = getattr(meta, "func", None)
        kind = getattr(func, "acesim_kind", None)
        if kind is not None:
            return str(kind)
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Union or origin is types.UnionType:
        parts = [_type_name(a) for a in args if a is not type(None)]
        text = " or ".join(parts)
        return text + (" (optional)" if type(None) in args else "")
    if origin is typing.Literal:
        return " / ".join(repr(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type_name(args[1])}" if len(args) == 2 else "table"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"table ({annotation.__name__})"
        return {"int": "integer", "float": "number", "str": "text", "bool": "true/false"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return "(see below)" if info.annotation and "BaseModel" in str(info.annotation) else "-"
    value = info.default
    if value is PydanticUndefined:
        return "**required**"
    if value is None:
        return "none"
    return f"`{value!r}`" if not isinstance(value, float) else f"`{value:g}`"


def _field_rows(model: type[BaseModel]) -> list[str]:
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        kind = _quantity_kind(info)
        kind_text = f"quantity ({_UNITS[kind]})" if kind in _UNITS else _type_name(info.annotation)
        description = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {kind_text} | {_default(info)} | {description} |")
    return rows


def _model_at(path: str) -> type[BaseModel]:
    model: Any = SystemConfig
    for part in path.split("."):
        key = part.rstrip("[]")
        annotation = model.model_fields[key].annotation
        if part.endswith("[]"):
            annotation = typing.get_args(annotation)[0]
        while typing.get_origin(annotation) in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        model = annotation
    return typing.cast(type[BaseModel], model)


#: Dtypes shown in the NPU preset table.
_PEAK_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")


def _npu_preset_rows() -> list[str]:
    """The table of shipped NPU presets (dense matrix peaks, from the preset files)."""
    head = "| preset | NPU | units | " + " | ".join(_PEAK_DTYPES) + " | vector | HBM | capacity |"
    rows = [
        "## NPU presets",
        "",
        '`[npu] extends = "<preset>"`; dense matrix peaks (no sparsity) in TFLOP/s of the whole',
        "NPU, `-` where the NPU has no such math; `acesim presets show <preset>` prints one with",
        "the source of each value.",
        "",
        head,
        "|---" * (6 + len(_PEAK_DTYPES)) + "|",
    ]
    for name in npu_preset_names():
        npu = load_npu_preset(name).npu
        peaks = [
            f"{npu.matrix_flops[d] / 1e12:g}" if d in npu.matrix_flops else "-"
            for d in _PEAK_DTYPES
        ]
        rows.append(
            f"| `{name}` | {npu.name} | {npu.compute_units} | "
            + " | ".join(peaks)
            + f" | {npu.vector_flops / 1e12:g} | {npu.hbm_bandwidth / 1e12:g} TB/s"
            + f" | {npu.hbm_capacity / 2**30:g} GiB |"
        )
    return rows


def system_file_reference() -> str:
    """The Markdown text of docs/system-file.md (see module docstring)."""
    lines = [
        "# The system file",
        "",
        "<!-- Generated by scripts/gen_system_doc.py from the pydantic models; do not edit by",
        "hand: tests/test_system_doc.py fails when this file is stale. -->",
        "",
        "A system is a TOML, YAML or JSON document (or a shipped preset: `acesim presets`).",
        "Physical quantities take a unit string or a number in SI base units; unknown keys are",
        "errors with a did-you-mean hint; every number must be finite. Change one field without",
        "a file: `--set dotted.path=value` on any command that takes a system.",
        "",
        "A bare number far outside what its field could hold is taken for a unit left out and",
        "refused, naming the field and the unit it probably meant: a bandwidth below 1 MB/s",
        "(`hbm_bandwidth = 900` is 900 B/s), a size below 1 KiB, a latency or delay above 1 s, a",
        "compute rate below 1 GFLOP/s. `--force` (`force=True` in `resolve_system`,",
        "`load_system`, `acesim.run`; `force = true` in a sweep spec) takes it as written.",
        "",
        '`extends = "<preset or file>"` at the top makes a document a set of changes to',
        "another one: tables merge key by key, every other value (lists such as",
        "`network.dimensions` included) is replaced whole; `acesim presets show NAME` prints",
        "the result.",
        "",
        '`[npu] extends = "<NPU preset>"` starts the NPU from a shipped NPU preset (below):',
        "the other `[npu]` keys change it (tables such as `matrix_flops` and `kernels` merge",
        "key by key), and the preset's `[sources]` carry over except for the values changed.",
        "Each NPU preset also runs alone as the system `<name>-single` (one NPU, a network of",
        "one NPU that carries nothing; `acesim.config.single_npu_system` in Python).",
        "",
        "A node preset scales out: `--nodes N` (on `acesim run`, `collective`, `export-chakra`,",
        "`assumptions`, `presets show`; `nodes=N` in `resolve_system`, `run.nodes` in",
        "experiments and sweeps) appends the `[scale_out]` dimension with size N, so",
        "`h100-nvswitch-8` on 4 nodes is an 8x4 network of 32 NPUs. The collective settings",
        "(`endpoint_delay`, `chunks`, and `protocol_efficiency` where a dimension sets no",
        "`efficiency` of its own) apply to every dimension, the scale-out one included.",
        "",
        "## Top level",
        "",
        *_field_rows(SystemConfig),
    ]
    for path, text in _SECTIONS:
        lines += ["", f"## `[{path}]`", "", text, "", *_field_rows(_model_at(path))]
    for name, schema in ENDPOINT_SETTINGS.items():
        doc = (schema.settings.__doc__ or "").strip().splitlines()[0]
        lines += ["", f"## `[endpoint.{name}]`", "", doc, "", *_field_rows(schema.settings)]
    lines += ["", *_npu_preset_rows()]
    lines += [
        "",
        "## `[sources]`",
        "",
        "A table from a dotted field path to `{ kind = ..., note = ... }`, where `kind` is",
        "`paper`, `datasheet`, `astra-sim`, `public-measurement`, `fit`, `transfer` or",
        "`assumption`: where the value comes from (`acesim assumptions` lists them with their",
        "values). `fit`: fitted on the preset's own validation rows, which the note names;",
        "`transfer`: another preset's fit carried here by the transfer rule the note names",
        "(docs/validation.md); a transfer counts as an assumption in every output. An override",
        "(`--set`, `overrides=`) replaces the source of the value it changes with one of kind",
        "`override` that names the new value and what the source had said; every result records",
        "how its system was made (`info.provenance`: the document, its `extends` chain, the NPU",
        "preset, each override).",
        "",
    ]
    return "\n".join(lines)
