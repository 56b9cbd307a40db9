"""ASTRA-sim 2.0's configuration files, read as acesim system documents (``acesim
import-astra``), and recognised where acesim expects its own.

ASTRA-sim describes a platform in two files: the analytical backend's network file (YAML, or
JSON with the same keys) and a system file (JSON). :func:`import_astra` turns the pair into one
acesim system document, every value converted once to acesim's units and every mapping stated
(:class:`Mapping`: the acesim field, the ASTRA-sim key and value, why). The conventions, read
from ASTRA-sim's behaviour (and measured against its runs: tests/test_collectives.py):

* network ``bandwidth`` is GB/s per link and direction with GB = 2^30 bytes (the analytical
  backend converts GB/s to bytes/ns with ``2^30 / 1e9``): ``link_bandwidth = "<x> GiB/s"``;
* network ``latency`` is ns per link: a ``Ring`` or ``FullyConnected`` message crosses one
  link, a ``Switch`` message two (NPU to switch, switch to NPU), so a switch dimension's
  ``link_latency`` (acesim's latency per message) is twice the file's;
* a ``FullyConnected`` dimension of ``n`` NPUs has ``n - 1`` links at each NPU; acesim pools
  their bandwidth as the NPU's egress capacity (a ring step may use all of it, ASTRA-sim's uses
  one link): ``links_per_npu = n - 1``;
* the system's times are cycles of 1 GHz (ns); ``local-mem-bw`` is GB/s with GB = 10^9
  (``Sys.cc``) and becomes ``npu.hbm_bandwidth``; ``peak-perf`` is TFLOP/s and becomes the NPU's
  one matrix peak (``fp16``: a roofline compute node without a dtype runs at the NPU's fastest
  listed dtype) when ``roofline-enabled`` is 1;
* ``collective-optimization``: ``localBWAware`` (reduce-scatter down the dimensions, all-reduce
  on the last, all-gather back) is acesim's ``hierarchical`` composition, ``baseline`` (a
  whole all-reduce on each dimension in turn) its ``per_dimension`` one;
* the endpoint is acesim's ``ideal`` one (collectives charge no compute units or HBM; ASTRA-sim
  charges each reduction ``3 m / local-mem-bw``, which no acesim endpoint does as such).

A key with no acesim equivalent is an error naming it, unless its value changes nothing
(``boost-mode = 0``). Files in ASTRA-sim's formats given where acesim expects a system document
are recognised by their keys (:func:`astra_format`) and refused with a pointer to ``acesim
import-astra``, rather than with "unknown key".
"""

from __future__ import annotations

import json
from collections.abc import Mapping as MappingType
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = [
    "ASTRA_ALGORITHMS",
    "ASTRA_TOPOLOGIES",
    "Mapping",
    "astra_format",
    "import_astra",
    "read_astra_files",
    "refuse_astra_format",
    "system_toml",
]

#: ASTRA-sim network topology names -> acesim dimension kinds.
ASTRA_TOPOLOGIES = {"Ring": "ring", "Switch": "switch", "FullyConnected": "fully_connected"}
#: ASTRA-sim collective implementation names -> acesim per-dimension algorithms.
ASTRA_ALGORITHMS = {
    "ring": "ring",
    "direct": "direct",
    "halvingDoubling": "halving_doubling",
    "doubleBinaryTree": "double_binary_tree",
}
#: ASTRA-sim system keys naming a collective's implementation -> acesim operations.
_IMPLEMENTATION_KEYS = {
    "all-reduce-implementation": "all-reduce",
    "all-gather-implementation": "all-gather",
    "reduce-scatter-implementation": "reduce-scatter",
    "all-to-all-implementation": "all-to-all",
}
_NETWORK_KEYS = frozenset({"topology", "npus_count", "bandwidth", "latency"})
_NETWORK_V1_KEYS = frozenset(
    {"topology-name", "dimensions-count", "links-count", "link-latency", "link-bandwidth"}
)
_SYSTEM_KEYS = frozenset(
    {
        "scheduling-policy",
        "endpoint-delay",
        "active-chunks-per-dimension",
        "preferred-dataset-splits",
        "collective-optimization",
        "local-mem-bw",
        "boost-mode",
        "roofline-enabled",
        "peak-perf",
        "intra-dimension-scheduling",
        "inter-dimension-scheduling",
        *_IMPLEMENTATION_KEYS,
    }
)
_MEMORY_KEYS = frozenset({"memory-type"})
#: Keys whose value changes nothing in acesim's model when it is this one.
_NEUTRAL = {
    "boost-mode": 0,
    "intra-dimension-scheduling": "FIFO",
    "inter-dimension-scheduling": "baseline",
}
GIB = 2**30


@dataclass(frozen=True)
class Mapping:
    """One value of the acesim document and where it came from (ASTRA-sim key and value)."""

    field: str
    value: Any
    astra: str
    note: str


def astra_format(doc: MappingType[str, Any]) -> str | None:
    """Which ASTRA-sim file ``doc`` is (``"network"``, ``"system"``, ``"remote memory"``), by
    its keys; None when it is not one (two or more of a format's own keys, or its only key)."""
    keys = set(doc)
    if len(keys & _NETWORK_KEYS) >= 2 or len(keys & _NETWORK_V1_KEYS) >= 2:
        return "network"
    if len(keys & _SYSTEM_KEYS) >= 2:
        return "system"
    if keys and keys <= _MEMORY_KEYS:
        return "remote memory"
    return None


def refuse_astra_format(doc: MappingType[str, Any], where: str) -> None:
    """ConfigError naming ASTRA-sim's format when ``doc`` (read from ``where``) is in one."""
    kind = astra_format(doc)
    if kind is None:
        return
    raise ConfigError(
        where,
        f"is an ASTRA-sim {kind} file, not an acesim system document",
        hint="convert ASTRA-sim's network and system files into one acesim system file with "
        "`acesim import-astra NETWORK.yml SYSTEM.json -o system.toml`; docs/chakra.md",
    )


def _list(doc: MappingType[str, Any], key: str, where: str, n: int | None) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list) or not value:
        raise ConfigError(
            f"{where}: {key}", "must be a non-empty list, one entry a dimension", value
        )
    if n is not None and len(value) != n:
        raise ConfigError(
            f"{where}: {key}", f"must list {n} entries (one per dimension, as topology)", value
        )
    return value


def _number(value: Any, where: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(where, "must be a number", value)
    number = float(value)
    if not (number > 0 if positive else number >= 0) or number != number or number == float("inf"):
        raise ConfigError(where, "must be a finite number above 0" if positive else ">= 0", value)
    return number


def _network(doc: MappingType[str, Any], where: str) -> tuple[list[dict[str, Any]], list[Mapping]]:
    if set(doc) & _NETWORK_V1_KEYS:
        raise ConfigError(
            where,
            "is an ASTRA-sim 1.0 network file (topology-name, links-count, ...); import-astra "
            "reads ASTRA-sim 2.0's analytical network file (topology, npus_count, bandwidth, "
            "latency)",
        )
    unknown = sorted(set(doc) - _NETWORK_KEYS)
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]}", "has no acesim equivalent", doc[unknown[0]])
    topology = _list(doc, "topology", where, None)
    n = len(topology)
    sizes = _list(doc, "npus_count", where, n)
    bandwidths = _list(doc, "bandwidth", where, n)
    latencies = _list(doc, "latency", where, n)
    dims: list[dict[str, Any]] = []
    notes: list[Mapping] = []
    for i, (topo, size, bw, lat) in enumerate(
        zip(topology, sizes, bandwidths, latencies, strict=True)
    ):
        kind = ASTRA_TOPOLOGIES.get(topo) if isinstance(topo, str) else None
        if kind is None:
            raise ConfigError(
                f"{where}: topology[{i}]", f"must be one of {', '.join(ASTRA_TOPOLOGIES)}", topo
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"{where}: npus_count[{i}]", "must be a whole number >= 1", size)
        gib = _number(bw, f"{where}: bandwidth[{i}]")
        ns = _number(lat, f"{where}: latency[{i}]", positive=False)
        path = f"network.dimensions[{i}]"
        links = size - 1 if kind == "fully_connected" and size > 1 else 1
        hops = 2 if kind == "switch" else 1
        dim = {
            "kind": kind,
            "size": size,
            "link_bandwidth": f"{_text(gib)} GiB/s",
            "link_latency": f"{_text(ns * hops)} ns",
            "links_per_npu": links,
        }
        dims.append(dim)
        notes += [
            Mapping(f"{path}.kind", kind, f"topology[{i}] = {topo}", "the dimension's shape"),
            Mapping(f"{path}.size", size, f"npus_count[{i}] = {size}", "NPUs along it"),
            Mapping(
                f"{path}.link_bandwidth",
                dim["link_bandwidth"],
                f"bandwidth[{i}] = {bw}",
                "GB/s per link and direction, ASTRA-sim's GB = 2^30 bytes",
            ),
            Mapping(
                f"{path}.link_latency",
                dim["link_latency"],
                f"latency[{i}] = {lat}",
                "ns per link; a switch message crosses two links (NPU-switch-NPU)"
                if hops == 2
                else "ns per link; a message crosses one",
            ),
            Mapping(
                f"{path}.links_per_npu",
                links,
                f"topology[{i}] = {topo}",
                f"a fully connected NPU has one link to each of its {size - 1} peers; acesim "
                "pools their bandwidth as its egress"
                if kind == "fully_connected"
                else "one link a direction",
            ),
        ]
    return dims, notes


def _implementations(value: Any, where: str, n: int) -> list[str]:
    items = value.split("_") if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ConfigError(where, "must list one implementation per dimension", value)
    out = []
    for item in items:
        algo = ASTRA_ALGORITHMS.get(item) if isinstance(item, str) else None
        if algo is None:
            raise ConfigError(
                where,
                f"has no acesim equivalent (acesim runs {', '.join(ASTRA_ALGORITHMS)} per "
                "dimension)",
                item,
            )
        out.append(algo)
    if len(out) == 1 and n > 1:
        out = out * n
    if len(out) != n:
        raise ConfigError(where, f"must list {n} implementations (one per dimension)", value)
    return out


def _system(
    doc: MappingType[str, Any], where: str, n: int
) -> tuple[dict[str, Any], dict[str, Any], list[Mapping]]:
    collective: dict[str, Any] = {}
    npu: dict[str, Any] = {}
    notes: list[Mapping] = []

    def note(field: str, value: Any, key: str, why: str) -> None:
        notes.append(Mapping(field, value, f"{key} = {json.dumps(doc[key])}", why))

    for key, value in doc.items():
        at = f"{where}: {key}"
        if key == "scheduling-policy":
            if value not in ("LIFO", "FIFO"):
                raise ConfigError(at, "must be LIFO or FIFO", value)
            collective["scheduling"] = value.lower()
            note("collective.scheduling", collective["scheduling"], key, "order of waiting chunks")
        elif key == "endpoint-delay":
            collective["endpoint_delay"] = f"{_text(_number(value, at, positive=False))} ns"
            note("collective.endpoint_delay", collective["endpoint_delay"], key, "cycles at 1 GHz")
        elif key == "active-chunks-per-dimension":
            collective["active_chunks_per_dimension"] = _count(value, at)
            note("collective.active_chunks_per_dimension", value, key, "the same cap")
        elif key == "preferred-dataset-splits":
            collective["chunks"] = _count(value, at)
            note("collective.chunks", value, key, "chunks a collective is split into")
        elif key in _IMPLEMENTATION_KEYS:
            op = _IMPLEMENTATION_KEYS[key]
            algos = _implementations(value, at, n)
            collective.setdefault("algorithms", {})[op] = algos
            note(f"collective.algorithms.{op}", algos, key, "one algorithm per dimension")
        elif key == "collective-optimization":
            comp = {"localBWAware": "hierarchical", "baseline": "per_dimension"}.get(value)
            if comp is None:
                raise ConfigError(at, "must be localBWAware or baseline", value)
            collective["composition"] = comp
            note(
                "collective.composition",
                comp,
                key,
                "localBWAware: reduce-scatter down the dimensions, all-reduce on the last, "
                "all-gather back; baseline: a whole all-reduce on each dimension in turn",
            )
        elif key == "local-mem-bw":
            npu["hbm_bandwidth"] = f"{_text(_number(value, at))} GB/s"
            note("npu.hbm_bandwidth", npu["hbm_bandwidth"], key, "GB/s, GB = 10^9 bytes")
        elif key in ("roofline-enabled", "peak-perf"):
            continue  # below, together
        elif key in _NEUTRAL:
            if value != _NEUTRAL[key]:
                raise ConfigError(at, "has no acesim equivalent but its neutral value", value)
        else:
            raise ConfigError(at, "has no acesim equivalent", value)
    roofline = doc.get("roofline-enabled", 0)
    if roofline not in (0, 1, False, True):
        raise ConfigError(f"{where}: roofline-enabled", "must be 0 or 1", roofline)
    if roofline:
        if "peak-perf" not in doc:
            raise ConfigError(f"{where}: peak-perf", "must be given with roofline-enabled = 1")
        peak = _number(doc["peak-perf"], f"{where}: peak-perf")
        npu["matrix_flops"] = {"fp16": f"{_text(peak)} TFLOP/s"}
        note(
            "npu.matrix_flops.fp16",
            npu["matrix_flops"]["fp16"],
            "peak-perf",
            "TFLOP/s; the NPU's one matrix peak, at which roofline compute nodes run",
        )
    return collective, npu, notes


def _text(number: float) -> str:
    """A number as written into a quantity, exactly (``400``, ``372.5290298461914``)."""
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(where, "must be a whole number >= 1", value)
    return value


def import_astra(
    network: MappingType[str, Any],
    system: MappingType[str, Any],
    *,
    name: str = "astra-sim",
    network_where: str = "network",
    system_where: str = "system",
) -> tuple[dict[str, Any], list[Mapping]]:
    """The acesim system document of an ASTRA-sim network file and system file (module
    docstring), and every mapping made; ConfigError naming the file and key for anything
    without an acesim equivalent."""
    if astra_format(network) != "network":
        raise ConfigError(
            network_where, "is not an ASTRA-sim network file (topology, npus_count, ...)"
        )
    if astra_format(system) != "system":
        raise ConfigError(system_where, "is not an ASTRA-sim system file (scheduling-policy, ...)")
    dims, notes = _network(network, network_where)
    collective, npu, more = _system(system, system_where, len(dims))
    notes += more
    for i, dim in enumerate(dims):
        dim["name"] = f"dim{i}"
    doc: dict[str, Any] = {
        "name": name,
        "description": f"imported from ASTRA-sim ({network_where}, {system_where})",
    }
    if npu:
        doc["npu"] = npu
    doc["network"] = {"dimensions": dims}
    doc["collective"] = collective
    doc["endpoint"] = {"kind": "ideal"}
    notes.append(
        Mapping(
            "endpoint.kind",
            "ideal",
            "(no key)",
            "collectives charge no compute units or HBM; ASTRA-sim's reduction charge (3 m / "
            "local-mem-bw) has no acesim equivalent",
        )
    )
    doc["sources"] = {m.field: {"kind": "astra-sim", "note": f"{m.astra}: {m.note}"} for m in notes}
    return doc, notes


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise ConfigError("value", "cannot be written to TOML", value)  # pragma: no cover


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def system_toml(doc: MappingType[str, Any], header: str = "") -> str:
    """``doc`` (a system document of tables, lists of tables and values) as TOML text."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    tables: list[tuple[str, MappingType[str, Any]]] = []
    for key, value in doc.items():
        if isinstance(value, MappingType):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_toml_value(value)}")
    for name, table in tables:
        _table(lines, name, table)
    return "\n".join(lines) + "\n"


def _table(lines: list[str], name: str, table: MappingType[str, Any]) -> None:
    lines += ["", f"[{name}]"]
    nested: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, MappingType) and name != "sources":
            nested.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, MappingType) for v in value):
            nested.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_toml_value(value)}")
    for key, value in nested:
        if isinstance(value, list):
            for item in value:
                lines += ["", f"[[{name}.{_key(key)}]]"]
                lines += [f"{_key(k)} = {_toml_value(v)}" for k, v in item.items()]
        else:
            _table(lines, f"{name}.{_key(key)}", value)


def read_astra_files(network: Path, system: Path) -> tuple[dict[str, Any], list[Mapping]]:
    """:func:`import_astra` of two files (YAML or JSON, read as acesim reads documents); the
    system is named after the network file."""
    from .presets import read_document

    return import_astra(
        read_document(network),
        read_document(system),
        name=Path(network).stem.removesuffix(".network"),
        network_where=str(network),
        system_where=str(system),
    )
