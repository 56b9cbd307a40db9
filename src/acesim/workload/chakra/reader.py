"""Read Chakra execution traces (per-rank ``<prefix>.<rank>.et`` files) into a :class:`Graph`.

Mapping (docs/chakra.md has the full table):

- ``COMP_NODE`` -> compute node. ``num_ops`` (FLOPs) and ``tensor_size`` (HBM bytes) give the
  roofline ``Compute(flops, hbm_bytes)``; a non-zero ``duration_micros`` gives
  ``Compute(duration=s)``, which overrides the roofline when both are present (pass
  ``roofline=True`` to keep only the roofline where ``num_ops`` is given). acesim's own
  ``acesim_kernels`` (the kernels of a pass acesim wrote, :mod:`.kernels`) gives them back
  when their totals agree with the node's (not with ``roofline=True``).
- ``COMM_COLL_NODE`` -> collective: ``comm_type`` -> op, ``comm_size`` -> size (all-gather:
  times the group size, see :mod:`.mapping`), ``involved_dim`` (bool list) -> dims (absent = all).
  ``pg_name`` other than "" or "0" is reported (acesim cannot map a rank list onto the
  network), except on collectives acesim wrote with ``acesim_group``: their communicator group
  (:class:`~acesim.network.group.Group`) and exact size come back from it.
- ``COMM_SEND_NODE``/``COMM_RECV_NODE`` -> send/recv with peer (``comm_dst``/``comm_src``), tag
  (``comm_tag``) and size (``comm_size``).
- ``data_deps`` and ``ctrl_deps`` -> deps (ASTRA-sim honours only data_deps; acesim honours both).

Skips: a node acesim cannot simulate is never dropped silently. ``INVALID_NODE`` and
``METADATA_NODE`` (no-ops in ASTRA-sim too) are always skipped; memory, storage, batch and
checkpoint nodes, unknown node types and collectives acesim lacks (gather,
scatter, barrier, ...) are skipped when ``unsupported="skip"`` (default) or raise with
``"error"``; CPU compute (``is_cpu_op`` true) follows ``cpu_ops``. A skipped node becomes a
zero-time pass-through: its dependants inherit its dependencies. Every skip is listed in
``Graph.meta["chakra.skipped_nodes"]`` ("rank:id,..."), counted in
``Graph.meta["chakra.skipped"]`` and announced by one :class:`ChakraWarning` per read.

Corrupt input raises :class:`~acesim.errors.TraceError` naming the file and the node: a
truncated varint or message, a first message that is not a GlobalMetadata, a record that is not
a Node, duplicate ids, a dependency on a missing id, a dependency cycle, a bad attribute, a
send/recv without a matching partner, collectives that differ between ranks, a rank file
missing from the set.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from google.protobuf.message import DecodeError

from ...config.files import describe_size
from ...errors import TraceError
from ...network.group import Group, group_from_json
from ...network.ops import COLLECTIVE_OPS
from ..graph import Graph, Node
from ..model import Compute
from . import attrs as A
from . import mapping, schema, stream
from .kernels import decode_kernels
from .stream import FramingError, check_wire_types, has_field, iter_records, load_bytes

__all__ = ["read_chakra", "ChakraWarning", "rank_files"]

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
_RANK_NAME = re.compile(r"(?P<stem>.+)\.(?P<rank>\d+)\.et")
_ALWAYS_SKIPPED = frozenset({schema.NODE_TYPES["INVALID_NODE"], schema.NODE_TYPES["METADATA_NODE"]})


class ChakraWarning(UserWarning):
    """Something in a Chakra trace was skipped or approximated (see the message)."""


def rank_files(source: Source, npus: int | None = None) -> list[Path]:
    """The per-rank files of ``source``: a prefix (``<prefix>.<rank>.et``), one file or a list.

    Ranks must be 0..N-1 without gaps (N = ``npus`` when given); a missing one is a
    :class:`TraceError` naming the file that should exist.
    """
    if isinstance(source, (str, os.PathLike)):
        prefix = Path(source)
        if prefix.is_file():
            if npus not in (None, 1):
                raise TraceError(f"one rank file given for {npus} NPUs", location=str(prefix))
            return [prefix]
        directory = prefix.parent
        pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.et")
        found: dict[int, Path] = {}
        if directory.is_dir():
            for entry in sorted(os.listdir(directory)):
                m = pattern.fullmatch(entry)
                if m:
                    rank = int(m.group(1))
                    if rank in found:
                        raise TraceError(
                            f"two files for rank {rank}: {found[rank].name} and {entry}",
                            location=str(directory),
                        )
                    found[rank] = directory / entry
        if not found:
            raise TraceError(
                "no Chakra trace files <prefix>.<rank>.et found", location=f"{prefix}.*.et"
            )
        n = npus if npus is not None else max(found) + 1
        for rank in range(n):
            if rank not in found:
                raise TraceError(
                    f"rank file missing from the set of {n}: {prefix}.{rank}.et "
                    f"(found ranks {_ranges(sorted(found))})",
                    location=f"{prefix}.{rank}.et",
                )
        extra = sorted(r for r in found if r >= n)
        if extra:
            raise TraceError(
                f"{len(found)} rank files for {n} NPUs (extra: {prefix}.{extra[0]}.et)",
                location=f"{prefix}.*.et",
            )
        return [found[r] for r in range(n)]

    paths = [Path(p) for p in source]
    if not paths:
        raise TraceError("no Chakra trace files given")
    if npus is not None and npus != len(paths):
        raise TraceError(f"{len(paths)} rank files given for {npus} NPUs", location=str(paths[0]))
    for i, path in enumerate(paths):
        if not path.is_file():
            raise TraceError(f"rank {i} file does not exist", location=str(path))
    matches = [_RANK_NAME.fullmatch(p.name) for p in paths]
    if (
        all(matches)
        and len({(p.parent, m.group("stem")) for p, m in zip(paths, matches, strict=True) if m})
        == 1
    ):
        # Files named like a set: their ranks must be 0..N-1, in order.
        ranks = [int(m.group("rank")) for m in matches if m]
        for i, rank in enumerate(ranks):
            if rank != i:
                stem = matches[0].group("stem") if matches[0] else ""
                missing = paths[0].parent / f"{stem}.{i}.et"
                raise TraceError(
                    f"rank file missing from the set (or out of order): expected {missing.name} "
                    f"at position {i}, got {paths[i].name}",
                    location=str(missing),
                )
    return paths


def _ranges(values: list[int]) -> str:
    parts: list[str] = []
    start = prev = values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


@dataclass
class _RankTrace:
    path: Path
    rank: int
    metadata: Any
    nodes: list[Any] = field(default_factory=list)


def _parse_file(path: Path, rank: int) -> _RankTrace:
    loc = str(path)
    limit = stream.MAX_TRACE_BYTES
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise TraceError(
                    f"rank {rank} file is {size} bytes, more than the {describe_size(limit)} "
                    "a rank file may have",
                    location=loc,
                )
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise TraceError(f"cannot read rank {rank} file: {exc.strerror}", location=loc) from exc
    buf = load_bytes(loc, raw, limit)
    if not buf:
        raise TraceError("empty file; a Chakra trace starts with a GlobalMetadata", location=loc)
    trace = _RankTrace(path, rank, schema.GlobalMetadata())
    index = 0
    last_id: int | None = None
    ids: set[int] = set()

    def where() -> str:
        after = f"after node {last_id}" if last_id is not None else "before the first node"
        return f"record {index}, {after}"

    try:
        for offset, data in iter_records(buf):
            if index == 0:
                # A Node has a varint field 3 (its type), which GlobalMetadata never has.
                if check_wire_types(data, schema.NODE_WIRE) is None and has_field(data, 3, 0):
                    node = _decode(schema.Node, data, loc, "record 0")
                    raise TraceError(
                        f"first message is a Node (node {node.id}), not a GlobalMetadata; "
                        "a Chakra trace starts with GlobalMetadata",
                        location=loc,
                    )
                problem = check_wire_types(data, schema.METADATA_WIRE)
                if problem is not None:
                    raise TraceError(
                        f"first message (byte 0) is not a GlobalMetadata: {problem}", location=loc
                    )
                trace.metadata = _decode(schema.GlobalMetadata, data, loc, "record 0")
            else:
                problem = check_wire_types(data, schema.NODE_WIRE)
                if problem is not None:
                    raise TraceError(
                        f"message at byte {offset} ({where()}) is not a Node: {problem}",
                        location=loc,
                    )
                node = _decode(schema.Node, data, loc, f"byte {offset} ({where()})")
                node_id = int(node.id)
                if node_id in ids:
                    # Reported here, not only by _check_structure: a stream of empty records
                    # (a file of zeros) would otherwise hold one node per byte in memory.
                    raise TraceError(
                        f"node id {node_id} repeats", location=loc, field=f"node {node_id}"
                    )
                ids.add(node_id)
                trace.nodes.append(node)
                last_id = node_id
            index += 1
    except FramingError as exc:
        raise TraceError(f"{exc} at byte {exc.offset} ({where()})", location=loc) from exc
    return trace


def _decode(cls: Any, data: Any, loc: str, where: str) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, ValueError) as exc:
        raise TraceError(
            f"message at {where} is not a valid {cls.DESCRIPTOR.name}: {exc}", location=loc
        ) from exc
    return msg


def _check_structure(trace: _RankTrace) -> None:
    """Duplicate ids, missing dependencies and cycles, named by file and node."""
    loc = str(trace.path)
    ids: set[int] = set()
    for node in trace.nodes:
        if node.id in ids:
            raise TraceError(f"node id {node.id} repeats", location=loc, field=f"node {node.id}")
        ids.add(node.id)
    deps: dict[int, list[int]] = {}
    for node in trace.nodes:
        ds = list(dict.fromkeys([*node.data_deps, *node.ctrl_deps]))
        for dep in ds:
            if dep not in ids:
                raise TraceError(
                    f"depends on missing node {dep}", location=loc, field=f"node {node.id}"
                )
        deps[node.id] = ds
    # Kahn's algorithm; what is left sits on or behind a cycle.
    indeg = {i: len(d) for i, d in deps.items()}
    users: dict[int, list[int]] = defaultdict(list)
    for i, ds in deps.items():
        for dep in ds:
            users[dep].append(i)
    ready = [i for i, d in indeg.items() if d == 0]
    while ready:
        i = ready.pop()
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    left = {i for i, d in indeg.items() if d > 0}
    if left:
        # Every node left has a dependency left; walking them must close a loop.
        start = next(n.id for n in trace.nodes if n.id in left)
        path = [start]
        seen = {start: 0}
        while True:
            nxt = next(d for d in deps[path[-1]] if d in left)
            if nxt in seen:
                cycle = path[seen[nxt] :] + [nxt]
                break
            seen[nxt] = len(path)
            path.append(nxt)
        chain = " -> ".join(str(c) for c in cycle)
        raise TraceError(
            f"dependency cycle: {chain} (each depends on the next)",
            location=loc,
            field=f"node {cycle[0]}",
        )


@dataclass
class _Context:
    npus: int
    dim_sizes: Sequence[int] | None
    unsupported: str
    cpu_ops: str
    roofline: bool
    skipped: list[tuple[int, int, str]] = field(default_factory=list)
    pg_names: set[str] = field(default_factory=set)
    #: (rank, node) of group collectives whose comm_size disagreed with acesim_size
    resized: list[tuple[int, int]] = field(default_factory=list)


def _exact(a: A.AttrReader, name: str, standard: int | None, scale: float = 1.0) -> float | None:
    """acesim's exact value of a field when it agrees with the standard integer field."""
    value = a.as_float(name)
    if value is None or value < 0:
        return None
    if standard is None or round(value * scale) == standard:
        return value
    return None


def _convert(trace: _RankTrace, ctx: _Context) -> list[Node | None]:
    """Each Chakra node of ``trace`` as an acesim node (None: skipped, and counted in
    ``ctx``)."""
    loc = str(trace.path)
    out: list[Node | None] = []
    for msg in trace.nodes:
        nid = int(msg.id)
        a = A.AttrReader(msg.attr, loc, f"node {nid}")
        t = int(msg.type)
        tname = mapping.NODE_TYPE_NAMES.get(t, f"node type {t}")
        if t in _ALWAYS_SKIPPED:
            ctx.skipped.append((trace.rank, nid, tname))
            out.append(None)
            continue
        labels: dict[str, Any] = {
            "layer": a.as_str(A.A_LAYER),
            "iteration": a.as_int(A.A_ITERATION, 0) or 0,
            "pass_name": a.as_str(A.A_PASS) or "",
            "blocking": a.as_bool(A.A_BLOCKING),
            "priority": a.as_int(A.A_PRIORITY),
        }
        base = {"id": nid, "name": str(msg.name), "deps": _deps(msg), **labels}
        if t == schema.NODE_TYPES["COMP_NODE"]:
            out.append(_compute_node(msg, a, ctx, trace, base))
        elif t == schema.NODE_TYPES["COMM_COLL_NODE"]:
            out.append(_collective_node(a, ctx, trace, base))
        elif t in (schema.NODE_TYPES["COMM_SEND_NODE"], schema.NODE_TYPES["COMM_RECV_NODE"]):
            send = t == schema.NODE_TYPES["COMM_SEND_NODE"]
            out.append(_p2p_node(a, ctx, trace, base, send, tname))
        else:
            _skip(ctx, loc, trace.rank, nid, tname)
            out.append(None)
    return out


def _compute_node(
    msg: Any, a: A.AttrReader, ctx: _Context, trace: _RankTrace, base: dict[str, Any]
) -> Node | None:
    """A COMP_NODE (None: a CPU op skipped as ``ctx.cpu_ops`` says)."""
    nid = base["id"]
    if a.as_bool(A.IS_CPU_OP):
        if ctx.cpu_ops == "error":
            raise TraceError(
                "CPU compute (is_cpu_op) is not modelled by acesim (read with "
                "cpu_ops='skip' or 'compute')",
                location=str(trace.path),
                field=f"node {nid}",
            )
        if ctx.cpu_ops == "skip":
            ctx.skipped.append((trace.rank, nid, "CPU COMP_NODE"))
            return None
    return Node(kind="compute", compute=_compute(msg, a, ctx), **base)


def _collective_node(
    a: A.AttrReader, ctx: _Context, trace: _RankTrace, base: dict[str, Any]
) -> Node | None:
    """A COMM_COLL_NODE (None: an operation acesim does not run, skipped)."""
    loc, nid = str(trace.path), base["id"]
    _require(a, A.COMM_TYPE, loc, nid)
    ctype = a.as_int(A.COMM_TYPE, 0) or 0
    op = mapping.COLL_NAMES.get(ctype)
    if op is None or op not in COLLECTIVE_OPS:
        cname = mapping.COMM_TYPE_NAMES.get(ctype, f"comm_type {ctype}")
        _skip(ctx, loc, trace.rank, nid, f"COMM_COLL_NODE {cname}")
        return None
    _require(a, A.COMM_SIZE, loc, nid)
    group = _group(a)
    if group is not None:  # acesim's own communicator group, and its exact size
        size = _group_size(a, op, group, ctx)
        if size is None:
            members = _members(op, group, ctx)
            if members is None:
                raise TraceError(
                    f"{op} on a group spanning a whole dimension: its comm_size "
                    f"disagrees with {A.A_SIZE}, and without dim_sizes (the network's "
                    "dimension sizes) acesim cannot size it from comm_size",
                    location=loc,
                    field=f"node {nid}",
                )
            size = float(a.as_int(A.COMM_SIZE, 0) or 0) * members
            ctx.resized.append((trace.rank, nid))
        return Node(kind="collective", op=op, size=size, group=group, **base)
    dims = _dims(a, ctx)
    pg = a.as_str(A.PG_NAME)
    if pg not in (None, "", "0"):
        ctx.pg_names.add(str(pg))
    size = _comm_size(a, op, dims, ctx)
    return Node(kind="collective", op=op, size=size, dims=dims, **base)


def _p2p_node(
    a: A.AttrReader,
    ctx: _Context,
    trace: _RankTrace,
    base: dict[str, Any],
    send: bool,
    tname: str,
) -> Node:
    """A COMM_SEND_NODE (``send``) or COMM_RECV_NODE of ``trace``'s rank."""
    loc, nid = str(trace.path), base["id"]
    src = a.as_int(A.COMM_SRC)
    dst = a.as_int(A.COMM_DST)
    me, peer, peer_attr = (src, dst, A.COMM_DST) if send else (dst, src, A.COMM_SRC)
    if me is not None and me != trace.rank:
        raise TraceError(
            f"{'send' if send else 'recv'} node of rank {trace.rank} has "
            f"{A.COMM_SRC if send else A.COMM_DST} {me}",
            location=loc,
            field=f"node {nid}",
        )
    if peer is None:
        raise TraceError(f"{tname} without {peer_attr}", location=loc, field=f"node {nid}")
    if not 0 <= peer < ctx.npus:
        raise TraceError(
            f"{peer_attr} {peer} is not a rank of this {ctx.npus}-rank trace",
            location=loc,
            field=f"node {nid}",
        )
    standard = a.as_int(A.COMM_SIZE, 0) or 0
    exact = _exact(a, A.A_SIZE, standard)
    return Node(
        kind="send" if send else "recv",
        peer=peer,
        tag=a.as_int(A.COMM_TAG, 0) or 0,
        size=exact if exact is not None else float(standard),
        **base,
    )


def _skip(ctx: _Context, loc: str, rank: int, nid: int, reason: str) -> None:
    """Record a skip, or raise when unsupported nodes are errors."""
    if ctx.unsupported == "error":
        raise TraceError(
            f"{reason} is not supported by acesim (read with unsupported='skip' to skip such "
            "nodes)",
            location=loc,
            field=f"node {nid}",
        )
    ctx.skipped.append((rank, nid, reason))


def _deps(msg: Any) -> tuple[int, ...]:
    return tuple(dict.fromkeys(int(d) for d in [*msg.data_deps, *msg.ctrl_deps]))


def _compute(msg: Any, a: A.AttrReader, ctx: _Context) -> Compute:
    num_ops = a.as_int(A.NUM_OPS)
    tensor_size = a.as_int(A.TENSOR_SIZE)
    for name, value in ((A.NUM_OPS, num_ops), (A.TENSOR_SIZE, tensor_size)):
        if value is not None and value < 0:
            raise TraceError(
                f"attribute {name!r} must not be negative, got {value}",
                location=a.location,
                field=a.node,
            )
    flops = _exact(a, A.A_FLOPS, num_ops)
    if flops is None and num_ops == 1 and (tensor_size or 0) > 0 and a.as_float(A.A_FLOPS) == 0:
        flops = 0.0  # acesim's export writes one operation on memory-only nodes (ASTRA-sim)
    hbm = _exact(a, A.A_HBM_BYTES, tensor_size)
    flops = flops if flops is not None else float(num_ops or 0)
    hbm = hbm if hbm is not None else float(tensor_size or 0)
    micros = int(msg.duration_micros)
    duration: float | None = None
    if not a.as_bool(A.A_DURATION_DERIVED) and not (ctx.roofline and num_ops is not None):
        exact = _exact(a, A.A_DURATION, micros, scale=1e6)
        if exact is not None and (micros > 0 or A.A_DURATION in a):
            duration = exact
        elif micros > 0:
            duration = micros / 1e6
    blocks = a.as_int(A.A_BLOCKS)
    text = a.as_str(A.A_KERNELS)
    if text is not None and not ctx.roofline:
        kernels = Compute(kernels=decode_kernels(text, a.location, a.node))
        if kernels.flops == flops and kernels.hbm_bytes == hbm:
            return kernels
    return Compute(flops=flops, hbm_bytes=hbm, duration=duration, blocks=blocks)


def _dims(a: A.AttrReader, ctx: _Context) -> tuple[int, ...] | None:
    flags = a.as_bools(A.INVOLVED_DIM)
    if flags is None:
        return None
    dims = tuple(i for i, f in enumerate(flags) if f)
    if not dims:
        raise TraceError(
            f"attribute {A.INVOLVED_DIM!r} selects no dimension, got {flags}",
            location=a.location,
            field=a.node,
        )
    if ctx.dim_sizes is not None and dims[-1] >= len(ctx.dim_sizes):
        raise TraceError(
            f"attribute {A.INVOLVED_DIM!r} selects dimension {dims[-1]} of a "
            f"{len(ctx.dim_sizes)}-dimensional network",
            location=a.location,
            field=a.node,
        )
    return dims


def _require(a: A.AttrReader, name: str, loc: str, nid: int) -> None:
    """A collective attribute ASTRA-sim 2.0 cannot do without (it stops on its absence)."""
    if name not in a.by_name:
        raise TraceError(
            f"a COMM_COLL_NODE needs the attribute {name!r} (ASTRA-sim 2.0 stops without it)",
            location=loc,
            field=f"node {nid}",
        )


#: Longest ``acesim_group`` text: a group is a few spans of three numbers.
_MAX_GROUP_TEXT = 10_000


def _group(a: A.AttrReader) -> Group | None:
    """The communicator group acesim wrote (``acesim_group``), or None."""
    text = a.as_str(A.A_GROUP)
    if text is None:
        return None
    if len(text) > _MAX_GROUP_TEXT:
        raise TraceError(
            f"attribute {A.A_GROUP!r} is longer than {_MAX_GROUP_TEXT} characters",
            location=a.location,
            field=a.node,
        )
    try:
        return group_from_json(json.loads(text))
    except RecursionError:
        raise TraceError(
            f"attribute {A.A_GROUP!r} is not a group: nested too deep",
            location=a.location,
            field=a.node,
        ) from None
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        raise TraceError(
            f"attribute {A.A_GROUP!r} is not a group: {err}", location=a.location, field=a.node
        ) from None


def _members(op: str, group: Group, ctx: _Context) -> int | None:
    """The factor between Chakra's ``comm_size`` and acesim's size of ``op`` on ``group``: its
    members for an all-gather (Chakra's size is each member's contribution), else 1; None when
    a span covers a whole dimension whose size ``dim_sizes`` does not give."""
    if not mapping.size_factor(op):
        return 1
    members = 1
    for span in group.spans:
        size = span.size
        if size is None and isinstance(span.dim, int) and ctx.dim_sizes is not None:
            if 0 <= span.dim < len(ctx.dim_sizes):
                size = ctx.dim_sizes[span.dim] // max(span.stride, 1)
        if size is None:
            return None
        members *= size
    return members


def _standard_size(a: A.AttrReader) -> int:
    """The node's standard Chakra ``comm_size`` (bytes; 0 when absent), refused if negative."""
    standard = a.as_int(A.COMM_SIZE, 0) or 0
    if standard < 0:
        raise TraceError(
            f"attribute {A.COMM_SIZE!r} must not be negative, got {standard}",
            location=a.location,
            field=a.node,
        )
    return standard


def _group_size(a: A.AttrReader, op: str, group: Group, ctx: _Context) -> float | None:
    """acesim's exact size of a group collective when it agrees with the standard
    ``comm_size`` (None: it does not, and the standard one is used: a trace edited with
    Chakra's own tools changes only the standard field)."""
    standard = _standard_size(a)
    exact = a.as_float(A.A_SIZE)
    if exact is None or not exact >= 0:
        return None
    members = _members(op, group, ctx)
    if members is None:  # an all-gather's group of unknown size: a whole multiple agrees
        agrees = exact == 0 if standard == 0 else exact % standard == 0
    else:
        agrees = round(exact / members) == standard
    return exact if agrees else None


def _comm_size(a: A.AttrReader, op: str, dims: tuple[int, ...] | None, ctx: _Context) -> float:
    standard = _standard_size(a)
    factor = 1
    if mapping.size_factor(op):
        group = mapping.group_size(dims, ctx.dim_sizes, ctx.npus)
        if group is None:
            raise TraceError(
                f"{op} over dims {dims} needs dim_sizes (the network's dimension sizes) to turn "
                "Chakra's per-NPU contribution into acesim's gathered size",
                location=a.location,
                field=a.node,
            )
        factor = group
    exact = a.as_float(A.A_SIZE)
    if exact is not None and exact >= 0 and round(exact / factor) == standard:
        return exact
    return float(standard * factor)


def _forward_skips(nodes: list[Node | None], trace: _RankTrace) -> list[Node]:
    """Drop skipped nodes; their dependants inherit their dependencies (transitively)."""
    skipped_deps: dict[int, tuple[int, ...]] = {}
    for msg, node in zip(trace.nodes, nodes, strict=True):
        if node is None:
            skipped_deps[int(msg.id)] = _deps(msg)
    if not skipped_deps:
        return [n for n in nodes if n is not None]
    resolved: dict[int, tuple[int, ...]] = {}

    def resolve(i: int) -> tuple[int, ...]:
        # Iterative post-order (skip chains may be long); the graph is acyclic by now.
        stack = [i]
        while stack:
            top = stack[-1]
            if top in resolved:
                stack.pop()
                continue
            pending = [d for d in skipped_deps[top] if d in skipped_deps and d not in resolved]
            if pending:
                stack.extend(pending)
                continue
            acc: list[int] = []
            for d in skipped_deps[top]:
                acc.extend(resolved[d] if d in skipped_deps else (d,))
            resolved[top] = tuple(dict.fromkeys(acc))
            stack.pop()
        return resolved[i]

    kept: list[Node] = []
    for node in nodes:
        if node is None:
            continue
        if any(d in skipped_deps for d in node.deps):
            acc: list[int] = []
            for d in node.deps:
                acc.extend(resolve(d) if d in skipped_deps else (d,))
            node.deps = tuple(dict.fromkeys(acc))
        kept.append(node)
    return kept


def _check_p2p(ranks: list[list[Node]], traces: list[_RankTrace]) -> None:
    """Every send needs a recv with the same (src, dst, tag, size) on the peer, and back."""
    sends: dict[tuple[int, int, int, float], list[tuple[int, int]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int, float], list[tuple[int, int]]] = defaultdict(list)
    for rank, nodes in enumerate(ranks):
        for n in nodes:
            if n.kind == "send" and n.peer is not None:
                sends[(rank, n.peer, n.tag, n.size)].append((rank, n.id))
            elif n.kind == "recv" and n.peer is not None:
                recvs[(n.peer, rank, n.tag, n.size)].append((rank, n.id))
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            src, dst, tag, size = key
            more, kind, other = (s, "send", dst) if len(s) > len(r) else (r, "recv", src)
            rank, nid = more[len(min(s, r, key=len))]
            raise TraceError(
                f"{kind} {'to' if kind == 'send' else 'from'} rank {other} (tag {tag}, "
                f"{size:g} bytes) has no matching {'recv' if kind == 'send' else 'send'} "
                f"on rank {other} ({len(s)} sends, {len(r)} recvs)",
                location=str(traces[rank].path),
                field=f"node {nid}",
            )


def _check_collectives(ranks: list[list[Node]], traces: list[_RankTrace], ctx: _Context) -> None:
    """Collectives over all dimensions must be issued by every rank alike (else: deadlock)."""
    if ctx.pg_names or len(ranks) < 2:
        return
    counts = [
        Counter(
            (n.op, n.size)
            for n in nodes
            if n.kind == "collective" and n.dims is None and n.group is None
        )
        for nodes in ranks
    ]
    for rank in range(1, len(ranks)):
        if counts[rank] == counts[0]:
            continue
        diff = (counts[rank] - counts[0]) or (counts[0] - counts[rank])
        bad_rank = rank if counts[rank] - counts[0] else 0
        op, size = next(iter(diff))
        nid = next(
            n.id
            for n in ranks[bad_rank]
            if n.kind == "collective"
            and n.dims is None
            and n.group is None
            and (n.op, n.size) == (op, size)
        )
        other = 0 if bad_rank == rank else rank
        raise TraceError(
            f"{op} of {size:g} bytes over all dimensions is issued {counts[bad_rank][(op, size)]} "
            f"times here but {counts[other][(op, size)]} times on rank {other}",
            location=str(traces[bad_rank].path),
            field=f"node {nid}",
        )


def read_chakra(
    source: Source,
    *,
    npus: int | None = None,
    dim_sizes: Sequence[int] | None = None,
    unsupported: Literal["skip", "error"] = "skip",
    cpu_ops: Literal["skip", "error", "compute"] = "skip",
    roofline: bool = False,
    name: str | None = None,
) -> Graph:
    """Read a Chakra trace into an execution :class:`Graph` (one rank per file).

    Args:
        source: a prefix (reads ``<prefix>.0.et`` .. ``<prefix>.<N-1>.et``), one ``.et`` file, or
            a list of files in rank order.
        npus: number of ranks expected (default: as many as the files found).
        dim_sizes: NPUs per network dimension; needed to convert all-gather sizes over a subset
            of dimensions and to check ``involved_dim``.
        unsupported: ``"skip"`` (report, default) or ``"error"`` for nodes acesim cannot
            simulate (memory, storage, collectives it lacks, unknown types).
        cpu_ops: CPU compute nodes (``is_cpu_op``): ``"skip"`` (report), ``"error"`` or
            ``"compute"`` (run them on the NPU like any compute).
        roofline: drop ``duration_micros`` of compute nodes that carry ``num_ops``, and
            acesim's kernel lists: every compute node on the roofline of its totals, as
            ASTRA-sim 2.0's roofline mode runs it.
        name: graph name (default: the one acesim wrote, else the prefix's file name).

    Raises:
        TraceError: corrupt or inconsistent input; the message names the file and node.
    """
    if unsupported not in ("skip", "error"):
        raise ValueError(f"unsupported must be 'skip' or 'error', got {unsupported!r}")
    if cpu_ops not in ("skip", "error", "compute"):
        raise ValueError(f"cpu_ops must be 'skip', 'error' or 'compute', got {cpu_ops!r}")
    paths = rank_files(source, npus)
    traces = [_parse_file(p, r) for r, p in enumerate(paths)]
    ctx = _Context(len(paths), dim_sizes, unsupported, cpu_ops, roofline)
    ranks: list[list[Node]] = []
    for trace in traces:
        _check_structure(trace)
        ranks.append(_forward_skips(_convert(trace, ctx), trace))
    _check_p2p(ranks, traces)
    _check_collectives(ranks, traces, ctx)

    graph_name, iterations, meta = _metadata(traces[0], paths[0], name)
    _report(ctx, meta, paths[0].parent / graph_name)
    return Graph(
        ranks=ranks,
        name=graph_name,
        iterations=iterations,
        meta=meta,
        npus=len(ranks) if len(ranks) > 1 else None,
    )


def _metadata(first: _RankTrace, path: Path, name: str | None) -> tuple[str, int, dict[str, str]]:
    """The graph's name (``name``, else the one acesim wrote, else the file's prefix), its
    iteration count and the metadata acesim wrote, from the first rank's trace."""
    meta: dict[str, str] = {}
    md = first.metadata
    mreader = A.AttrReader(md.attr, str(first.path), "GlobalMetadata")
    for key in mreader.by_name:
        if key.startswith(A.A_META_PREFIX):
            meta[key[len(A.A_META_PREFIX) :]] = mreader.as_str(key) or ""
    graph_name = name
    if graph_name is None:
        graph_name = mreader.as_str(A.A_GRAPH_NAME)
    if graph_name is None:
        graph_name = _RANK_NAME.sub(r"\g<stem>", path.name)
    iterations = mreader.as_int(A.A_GRAPH_ITERATIONS, 1) or 1
    meta["chakra.version"] = str(md.version)
    return graph_name, iterations, meta


def _report(ctx: _Context, meta: dict[str, str], where: Path) -> None:
    """Warn of skipped nodes, resized group collectives and process groups (``where``: the
    trace's prefix), and note them in ``meta``."""
    if ctx.skipped:
        by_reason = Counter(reason for _, _, reason in ctx.skipped)
        summary = ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items()))
        meta["chakra.skipped"] = summary
        meta["chakra.skipped_nodes"] = ",".join(f"{r}:{i}" for r, i, _ in ctx.skipped)
        first = ", ".join(f"rank {r} node {i}" for r, i, _ in ctx.skipped[:5])
        warnings.warn(
            ChakraWarning(
                f"{where}: skipped {len(ctx.skipped)} nodes acesim does "
                f"not simulate ({summary}; first: {first}); their dependants inherit their "
                "dependencies. List in Graph.meta['chakra.skipped_nodes']."
            ),
            stacklevel=3,
        )
    if ctx.resized:
        first = ", ".join(f"rank {r} node {i}" for r, i in ctx.resized[:5])
        warnings.warn(
            ChakraWarning(
                f"{len(ctx.resized)} group collectives have a comm_size that disagrees with "
                f"{A.A_SIZE} (edited with Chakra's tools?); they run with comm_size, the "
                f"standard field (first: {first})"
            ),
            stacklevel=3,
        )
    if ctx.pg_names:
        names = ", ".join(sorted(ctx.pg_names))
        meta["chakra.pg_names"] = names
        warnings.warn(
            ChakraWarning(
                f"collectives on process groups {names}: the traces do not say which ranks each "
                "group holds, so they run over the dimensions in involved_dim (all when absent)"
            ),
            stacklevel=3,
        )
