"""acesim's kernel list of a compute node, kept beside Chakra's totals.

ASTRA-sim 2.0 knows a compute node by its totals only (``num_ops``, ``tensor_size``: its
roofline), so the writer sums a pass's kernels into them. So that acesim reads back what it
wrote, the node also carries ``acesim_kernels`` (ignored by ASTRA-sim): the kernels as compact
JSON, ``{"k": [[kind, {field: value}], ...], "o": [index, ...]}`` — each distinct kernel once
(``k``), then the order they run in (``o``; a recurrent layer repeats two kernels many times);
an algorithm choice is ``["choice", {"name": ..., "options": [[kernel, ...], ...]}]``.
The reader uses it only when its totals agree with the node's FLOPs and bytes (a tool that
edited ``num_ops`` wins).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...errors import AcesimError, TraceError
from ...hardware.kernels import Attention, Choice, Fixed, Gemm, Kernel, Roofline, Stream

__all__ = ["encode_kernels", "decode_kernels"]

_KINDS: dict[str, type[Any]] = {
    "gemm": Gemm,
    "attention": Attention,
    "stream": Stream,
    "roofline": Roofline,
    "fixed": Fixed,
}
_NAMES = {cls: name for name, cls in _KINDS.items()}


def encode_kernels(kernels: tuple[Kernel, ...]) -> str:
    """The JSON text of ``kernels`` (see the module docstring)."""
    table: dict[Kernel, int] = {}
    order = []
    for k in kernels:
        order.append(table.setdefault(k, len(table)))
    specs = [_spec(k) for k in table]
    return json.dumps({"k": specs, "o": order}, separators=(",", ":"))


def _spec(k: Kernel) -> list[Any]:
    if isinstance(k, Choice):  # options are lists of [kind, fields], as the top level
        return ["choice", {"name": k.name, "options": [[_spec(x) for x in o] for o in k.options]}]
    return [_NAMES[type(k)], dataclasses.asdict(k)]


def _kernel(kind: str, fields: dict[str, Any]) -> Kernel:
    if kind == "choice":
        options = tuple(tuple(_kernel(*x) for x in o) for o in fields["options"])
        return Choice(options, name=fields["name"])  # type: ignore[arg-type]
    kernel: Kernel = _KINDS[kind](**fields)
    return kernel


def decode_kernels(text: str, location: str, node: str) -> tuple[Kernel, ...]:
    """The kernels of ``text``; TraceError naming the file and node when it is not such JSON."""
    try:
        data = json.loads(text)
        specs, order = data["k"], data["o"]
        table = []
        for kind, fields in specs:
            table.append(_kernel(kind, fields))
        for i in order:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(table):
                raise IndexError(f"kernel index {i!r} of {len(table)}")
        return tuple(table[i] for i in order)
    except (ValueError, KeyError, TypeError, IndexError, AcesimError) as exc:
        raise TraceError(
            f"attribute 'acesim_kernels' is not a kernel list ({type(exc).__name__}: {exc})",
            location=location,
            field=node,
        ) from None
