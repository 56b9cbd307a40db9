"""Varint-length-delimited protobuf streams, the framing of Chakra ``.et`` files.

A file is a sequence of records ``varint(len) || message bytes``; Chakra writes a GlobalMetadata
first, then one Node per record. The decoder never loops without consuming input and checks
every length against what is left, so a corrupt file ends in a :class:`~acesim.errors.TraceError`
rather than a hang or a huge allocation. Gzipped files (Chakra's tools accept them) are
decompressed first, to at most :data:`MAX_TRACE_BYTES` (deflate expands up to about 1,000 times:
a 2 MiB file can hold 2 GiB of zeros), and a file larger than that is not read.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from ...config.files import describe_size
from ...errors import TraceError

MAX_TRACE_BYTES = 2**30
"""Largest rank file (1 GiB), as stored and after gunzipping. Chakra traces of real training
steps are tens of MiB per rank; the reader holds every node in memory, several times the
trace's size, so a bigger one would exhaust memory rather than be simulated."""

_MAX_VARINT_BYTES = 10  # a 64-bit varint never needs more
_GZIP_MAGIC = b"\x1f\x8b"
_GUNZIP_CHUNK = 2**24


class FramingError(Exception):
    """Raised by the decoder with a description and the byte offset; the reader adds context."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128 varint of ``value`` (>= 0)."""
    if value < 0:
        raise ValueError(f"varint must not be negative, got {value}")
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a varint at ``pos``; return (value, position after it).

    Raises :class:`FramingError` when the input ends inside the varint or it is longer than
    ten bytes.
    """
    stop = len(buf) if end is None else end
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= stop:
            raise FramingError("truncated varint", start)
        if pos - start >= _MAX_VARINT_BYTES:
            raise FramingError("varint longer than 10 bytes", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def write_message(out: BinaryIO, message: object) -> int:
    """Append one length-prefixed message; return the bytes written."""
    data: bytes = message.SerializeToString()  # type: ignore[attr-defined]
    prefix = encode_varint(len(data))
    out.write(prefix)
    out.write(data)
    return len(prefix) + len(data)


def load_bytes(path_name: str, raw: bytes, limit: int | None = None) -> bytes | bytearray:
    """The file's bytes, gunzipped when they start with the gzip magic number.

    Raises :class:`TraceError` when ``raw`` or its decompressed content is larger than
    ``limit`` bytes (default :data:`MAX_TRACE_BYTES`; decompression stops there) or the gzip
    data is corrupt.
    """
    limit = MAX_TRACE_BYTES if limit is None else limit
    if len(raw) > limit:
        raise TraceError(
            f"file is {len(raw)} bytes, more than the {describe_size(limit)} a rank file may have",
            location=path_name,
        )
    if raw[:2] != _GZIP_MAGIC:
        return raw
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw), mode="rb") as stream:
            while True:
                chunk = stream.read(min(_GUNZIP_CHUNK, limit + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:
                    raise TraceError(
                        f"gzip data expands to more than the {describe_size(limit)} a rank file "
                        f"may have ({len(raw)} bytes compressed); refusing to decompress further",
                        location=path_name,
                    )
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt gzip data: {exc}", location=path_name) from exc
    return out


def iter_records(buf: bytes | bytearray) -> Iterator[tuple[int, memoryview]]:
    """Yield (offset of the record, message bytes) for each record of a framed stream.

    Raises :class:`FramingError` on a truncated length prefix or a message shorter than its
    prefix says.
    """
    view = memoryview(buf)
    pos = 0
    n = len(buf)
    while pos < n:
        start = pos
        length, pos = decode_varint(view, pos)
        if length > n - pos:
            raise FramingError(
                f"truncated message: length prefix says {length} bytes, {n - pos} left", start
            )
        yield start, view[pos : pos + length]
        pos += length


def _skip_value(data: bytes | memoryview, pos: int, wire: int) -> int | None:
    """The position after a field's value of wire type ``wire`` starting at ``pos`` (None for
    a wire type Chakra never writes: groups, 3 and 4, and the undefined 6 and 7)."""
    if wire == 0:
        return decode_varint(data, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        length, pos = decode_varint(data, pos)
        return pos + length
    if wire == 5:
        return pos + 4
    return None


def has_field(data: bytes | memoryview, number: int, wire: int) -> bool:
    """True when a well-formed message has top-level field ``number`` with wire type ``wire``."""
    pos = 0
    n = len(data)
    try:
        while pos < n:
            key, pos = decode_varint(data, pos)
            if (key >> 3, key & 7) == (number, wire):
                return True
            after = _skip_value(data, pos, key & 7)
            if after is None:
                return False
            pos = after
    except FramingError:
        return False
    return False


def check_wire_types(data: bytes | memoryview, allowed: dict[int, frozenset[int]]) -> str | None:
    """Scan a message's top-level fields; return a description of the first problem or None.

    A field number in ``allowed`` must use one of its wire types; other numbers are accepted
    (newer schema versions) as long as they are well formed. Groups (wire types 3, 4) are
    rejected: Chakra never uses them.
    """
    pos = 0
    n = len(data)
    try:
        while pos < n:
            key, pos = decode_varint(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0:
                return "field number 0"
            if number in allowed and wire not in allowed[number]:
                return f"field {number} has wire type {wire}"
            after = _skip_value(data, pos, wire)
            if after is None:
                return f"field {number} has unsupported wire type {wire}"
            pos = after
            if pos > n:
                return f"field {number} runs past the end of the message"
    except FramingError as exc:
        return f"{exc} inside the message"
    return None
