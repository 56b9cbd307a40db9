"""Resolving a system once: a preset name, a file, a table or a :class:`SystemConfig`, with
dotted-path overrides, a scale-out to several nodes (:mod:`acesim.config.scaleout`) or a network
resize applied, validated into one :class:`SystemConfig`.

Every entry point (the CLI, the Python API, sweeps, reproduce) resolves systems here, and every
endpoint variant of a resolved system is derived with :meth:`SystemConfig.with_endpoint`. Code
that turns a knob of a resolved system (a study's variant, a fit's trial value, a forced
algorithm) derives it with :func:`derive`: validated as a document is, recorded as the system
it came from (no override in its provenance or ``[sources]``).

Resizing keeps the first (local) dimension and splits the rest of the NPUs evenly over the
other dimensions (prime factors, largest first, onto the currently smallest one), as the ACE
paper's tori grow.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .npus import extend_npu
from .paths import put_path
from .plausible import check_document, check_value
from .presets import system_from_dict, traced_document
from .provenance import Provenance, override_sources
from .scaleout import scale_out
from .system import SystemConfig

__all__ = ["resolve_system", "derive", "check_sizing", "shape_for", "resize"]


def shape_for(system_doc: Mapping[str, Any], npus: int, field: str = "--npus") -> list[int]:
    """Dimension sizes for ``npus`` NPUs (see module docstring); ConfigError naming ``field``
    when ``npus`` is not a multiple of the local dimension's size."""
    dims = system_doc.get("network", {}).get("dimensions", [])
    if not dims:
        raise ConfigError("network.dimensions", "must list at least one dimension")
    if not isinstance(npus, int) or isinstance(npus, bool) or npus < 1:
        raise ConfigError(field, "must be a whole number of at least 1", npus)
    if len(dims) == 1:
        return [npus]
    local = int(dims[0].get("size", 1))
    if npus % local:
        raise ConfigError(field, f"must be a multiple of the local dimension size {local}", npus)
    rest = npus // local
    sizes = [1] * (len(dims) - 1)
    factors = []
    n, p = rest, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    for f in sorted(factors, reverse=True):
        i = sizes.index(min(sizes))
        sizes[i] *= f
    return [local] + sorted(sizes)


def resize(doc: dict[str, Any], shape: Sequence[int], field: str = "run.shape") -> dict[str, Any]:
    """A copy of the system document with its dimension sizes set to ``shape``."""
    out = copy.deepcopy(doc)
    _resize_in_place(out, shape, field)
    return out


def _resize_in_place(doc: dict[str, Any], shape: Sequence[int], field: str = "run.shape") -> None:
    """:func:`resize` on a document the caller owns."""
    dims = doc.get("network", {}).get("dimensions", [])
    if len(shape) != len(dims):
        raise ConfigError(
            field, f"must give one size per network dimension ({len(dims)})", list(shape)
        )
    for i, size in enumerate(shape):
        put_path(doc, f"network.dimensions[{i}].size", size)
    doc.get("network", {}).pop("npus", None)


def check_sizing(npus: Any, shape: Any, nodes: Any, prefix: str = "") -> None:
    """At most one way to size a system: ``npus``, ``shape`` or ``nodes``; ConfigError naming
    the option (``prefix``: "--" for the command line's flags)."""
    if shape is not None and npus is not None:
        raise ConfigError(
            f"{prefix}npus", f"give either {prefix}npus or {prefix}shape, not both", npus
        )
    if nodes is not None and (shape is not None or npus is not None):
        other = f"{prefix}npus" if npus is not None else f"{prefix}shape"
        raise ConfigError(
            f"{prefix}nodes",
            f"give either {prefix}nodes or {other}, not both ({prefix}nodes keeps the node's "
            "shape)",
            nodes,
        )


def resolve_system(
    system: SystemConfig | str | Path | Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | None = None,
    shape: Sequence[int] | None = None,
    npus: int | None = None,
    nodes: int | None = None,
    force: bool = False,
) -> SystemConfig:
    """The validated system: ``system`` (a SystemConfig, preset name, file path or table) with
    ``overrides`` (dotted path -> value) applied, then scaled out to ``nodes`` nodes (its
    ``[scale_out]`` dimension appended) or resized to ``shape`` or to ``npus``.

    A table may start its NPU from a preset (``[npu] extends``) as files do. A bare number
    implausible for its field (a bandwidth below 1 MB/s, :mod:`acesim.config.plausible`) in
    a file, a table or an override is an error unless ``force``. The result records how it was
    made (``system.provenance``).
    """
    check_sizing(npus, shape, nodes)
    plain = not overrides and shape is None and npus is None and nodes is None
    if isinstance(system, SystemConfig) and plain:
        return system
    origin = ""
    if isinstance(system, SystemConfig):
        doc: dict[str, Any] = system.model_dump(mode="python")  # a new document: ours
        provenance = system.provenance
    elif isinstance(system, Mapping):
        npu = system.get("npu")
        npu_preset = npu.get("extends") if isinstance(npu, Mapping) else None
        if not force:
            check_document(SystemConfig, system)
        doc = copy.deepcopy(extend_npu(dict(system)))  # the caller's tables left alone
        provenance = Provenance(npu=npu_preset if isinstance(npu_preset, str) else "")
    else:
        origin = str(system)
        doc, provenance = traced_document(system, force=force)
        doc = copy.deepcopy(doc)
    for path, value in (overrides or {}).items():
        if not force:
            check_value(SystemConfig, path, value)
        put_path(doc, path, value)
        if isinstance(doc.get("sources", {}), Mapping):
            doc["sources"] = override_sources(doc.get("sources", {}), path, value, origin)
    provenance = provenance.with_overrides(overrides or {})
    if nodes is not None:
        doc = scale_out(doc, nodes)
    if npus is not None:
        shape = shape_for(doc, npus, "npus")
    if shape is not None:
        _resize_in_place(doc, shape)
    return system_from_dict(doc, origin=origin).with_provenance(provenance)


def derive(system: SystemConfig, changes: Mapping[str, Any]) -> SystemConfig:
    """``system`` with ``changes`` (dotted path -> value, as ``--set`` takes them:
    ``{"collective.algorithm": "ring", "npu.kernels.tile_m": 128}``) set, validated as a
    document read from a file is: a bad value is a ConfigError naming the field, the rule and
    the value, and every rule across fields (endpoint settings against the NPU, algorithms
    against the network) is checked again.

    For changes acesim makes itself (a study's variant, a fit's trial value, a forced
    algorithm): the result keeps ``system``'s provenance and ``[sources]``, where a user's
    ``--set`` (:func:`resolve_system`'s ``overrides``) is recorded in both; and its bare
    numbers are SI values, not checked for plausibility (:mod:`acesim.config.plausible`).
    """
    doc: dict[str, Any] = system.model_dump(mode="python")  # a new document: ours
    for path, value in changes.items():
        put_path(doc, path, value)
    return system_from_dict(doc).with_provenance(system.provenance)
