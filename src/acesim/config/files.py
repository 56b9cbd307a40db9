"""Reading a user's text file (a system or sweep document, an ASTRA-sim workload) safely.

:func:`read_text_file` refuses what would otherwise end in a traceback, a hang or a huge
allocation: a missing path, a directory, a FIFO or device (reading one can block forever), a
file larger than the caller's limit, a binary file, UTF-16/UTF-32 text and text in another
8-bit encoding (latin-1). Each refusal is a :class:`FileProblem` whose message says what is
wrong; the caller turns it into its own error naming the file (``ConfigError`` for documents,
``WorkloadError`` for workloads).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["FileProblem", "read_text_file", "describe_size"]

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
_UTF8_BOM = b"\xef\xbb\xbf"


class FileProblem(Exception):
    """Why a file cannot be read as text (the message does not repeat the file name)."""


def describe_size(n: int) -> str:
    """``67108864`` -> ``64 MiB`` (whole binary units when exact, else bytes)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def regular_file(path: Path, what: str = "text file") -> os.stat_result | None:
    """``path``'s status when it is a regular file, None when it does not exist.

    Raises:
        FileProblem: it cannot be read, is a directory, or is not a regular file (a pipe, a
            device: reading one could block); ``what`` names what was expected.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileProblem(f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise FileProblem(f"is a directory, expected a {what}")
    if not stat.S_ISREG(info.st_mode):
        raise FileProblem(f"is not a regular file (a pipe or device), expected a {what}")
    return info


def read_text_file(path: Path, *, limit: int, what: str = "text file") -> str:
    """The UTF-8 text of ``path`` (a leading UTF-8 byte-order mark is dropped).

    Raises:
        FileProblem: the path is missing, not a regular file, over ``limit`` bytes, unreadable,
            binary, or not UTF-8.
    """
    info = regular_file(path, what)
    if info is None:
        raise FileProblem("file does not exist")
    if info.st_size > limit:
        raise FileProblem(
            f"is {info.st_size} bytes, more than the {describe_size(limit)} a {what} may have"
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)  # the file may have grown since stat()
    except OSError as exc:
        raise FileProblem(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FileProblem(f"is more than the {describe_size(limit)} a {what} may have")
    return decode_text(data, what)


def decode_text(data: bytes, what: str = "text file") -> str:
    """``data`` as UTF-8 text, or a :class:`FileProblem` saying what the bytes look like."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise FileProblem(
                f"not a {what} ({encoding} text: it starts with a {encoding} byte-order mark); "
                "save it as UTF-8"
            )
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise FileProblem(
            f"not a {what} (a NUL byte at offset {nul}, line {line}: binary data, or "
            "UTF-16/UTF-32 text without a byte-order mark)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileProblem(
            f"not a {what} (not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}: {exc.reason}); save it as UTF-8 (is it latin-1?)"
        ) from None
