"""Reader and writer for the ASTRA-sim 1.0 text workload format.

The format (ASTRA-sim 1.0, ``Workload::initialize_workload``; SimAI's AICB writes a relative)::

    DATA                                  line 1: training loop, then loop-specific arguments
    54                                    line 2: number of layers
    conv1  -1  13003 NONE 0  12864 NONE 0  32291 ALLREDUCE 37632  3229
    ...                                   one line per layer

A layer line has 12 whitespace-separated columns: name; a reserved "dependency" integer (always
-1 in the published files, unused by ASTRA-sim 1.0); three triples for the forward,
input-gradient and weight-gradient passes, each (compute time in cycles, collective type,
collective size in bytes per NPU); and the weight-update delay in cycles. ``HYBRID_CUSTOMIZED``
files add a 13th column, the layer's own parallelism (``DATA``, ``MODEL``, ...). Collective
types are ``NONE``, ``ALLREDUCE``, ``ALLGATHER``, ``ALLTOALL`` and ``REDUCESCATTER``.

Line 1 arguments: ``HYBRID_DLRM <i>`` gives the index of the last bottom-MLP layer;
``HYBRID_TRANSFORMER model_parallel_NPU_group: <n>`` the model-parallel group size, and
``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` adds ``checkpoints: <k> <layers...>
checkpoint_initiates: <k> <layers...>``.

Where we are stricter than ASTRA-sim 1.0 (its C++ reads tokens with ``>>`` and never checks):

- one layer per line (ASTRA-sim would accept a layer split over lines); blank lines are skipped,
  tabs and spaces are interchangeable, runs of them are one separator, CR-LF is accepted;
- the declared layer count must equal the number of layer lines (ASTRA-sim ignores extra lines
  and reads garbage for missing ones);
- an unknown collective type is an error (ASTRA-sim silently treats it as ``NONE``), so is
  ``NONE`` with a non-zero size (ASTRA-sim ignores the size), and so is ASTRA-sim's combined
  ``ALLREDUCEALLTOALL``, which acesim's collectives do not include;
- times and sizes must be non-negative integers of at most 64 bits (:data:`MAX_INTEGER`; a
  bigger one overflows the conversion to seconds or bytes); layer names must be unique within a
  workload (the published ``Transformer_HybridParallel.txt`` repeats ``layernorm2``; the raw parser
  :func:`parse_astra_workload` accepts that, :func:`read_astra_workload` does not).

Conversion to :class:`~acesim.workload.model.Workload` (:func:`read_astra_workload`):

- compute times are cycles of a clock, ``clock_hz`` (default 1 GHz, ASTRA-sim 1.0's tick of
  1 ns), and become fixed ``Compute.duration`` seconds; the update delay becomes
  ``Layer.update_time``; sizes stay bytes;
- the network dimensions each collective spans follow ASTRA-sim 1.0's
  ``decode_involved_dimensions``: for ``DATA``, ``MICRO`` and ``HYBRID_DLRM`` the weight-gradient
  collective spans every dimension (``dims=None``) and forward / input-gradient collectives span
  none (``dims=()``: ASTRA-sim creates them inactive and they finish at once, moving no bytes);
  the first layer of a ``HYBRID_DLRM`` workload (the embedding, whose all-to-alls are the point)
  spans every dimension in all three passes;
- supported training loops: ``DATA`` -> ``data``, ``HYBRID_DLRM`` -> ``hybrid_dlrm`` (with
  ``bottom_layers`` = the index on line 1), ``MICRO`` -> ``micro``. The other loops
  (``MODEL``, ``HYBRID_DATA_MODEL``, ``HYBRID_MODEL_DATA``, ``HYBRID_TRANSFORMER[_FWD_IN_BCKWD]``,
  ``HYBRID_CUSTOMIZED``, ``HYBRID_DLRM_ENHANCED``, ``DISTRIBUTED_INFERENCE``) block on forward
  and input-gradient collectives, split the network at a topology-dependent dimension or
  recompute checkpoints; acesim's training loops do not model that yet, so they are rejected
  with a :class:`~acesim.errors.WorkloadError` rather than run under the wrong semantics. The raw
  parser still reads them.
- parameter counts, batch size, precision and optimizer are not in the format: ``params``
  stays 0, ``batch_per_npu``, ``precision`` and ``optimizer`` None.

:func:`write_astra_workload` is the inverse for workloads whose compute is given as fixed
durations (rounded to whole cycles).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..config.files import FileProblem, read_text_file
from ..errors import WorkloadError, short_repr
from .model import Comm, Compute, Layer, Pass, Workload

__all__ = [
    "AstraFile",
    "AstraLayer",
    "AstraPass",
    "DEFAULT_CLOCK_HZ",
    "MAX_INTEGER",
    "MAX_WORKLOAD_BYTES",
    "KNOWN_LOOPS",
    "SUPPORTED_LOOPS",
    "COMM_TYPES",
    "parse_astra_workload",
    "read_astra_workload",
    "write_astra_workload",
]

DEFAULT_CLOCK_HZ = 1e9
"""ASTRA-sim 1.0 counts compute in cycles of a 1 GHz clock (one tick = 1 ns)."""

MAX_WORKLOAD_BYTES = 64 * 2**20
"""Largest workload file read (64 MiB); the published ones are a few KiB."""

MAX_INTEGER = 2**63 - 1
"""Largest time or size in a workload file: a 64-bit integer (ASTRA-sim reads them into 64-bit
or smaller C++ integers). Larger values overflow the conversion to floats (309 digits) or Python's
4,300-digit limit on reading integers."""
_MAX_DIGITS = len(str(MAX_INTEGER))

#: Training loops ASTRA-sim 1.0's ``decode_parallelsim`` knows.
KNOWN_LOOPS = (
    "DATA",
    "MICRO",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_CUSTOMIZED",
    "DISTRIBUTED_INFERENCE",
)

#: Loops :func:`read_astra_workload` converts, and the acesim parallelism each becomes.
SUPPORTED_LOOPS = {"DATA": "data", "HYBRID_DLRM": "hybrid_dlrm", "MICRO": "micro"}
_LOOP_OF_PARALLELISM = {v: k for k, v in SUPPORTED_LOOPS.items()}

#: Collective types of the format and the acesim op each becomes (``None``: no collective).
COMM_TYPES: dict[str, str | None] = {
    "NONE": None,
    "ALLREDUCE": "all-reduce",
    "ALLGATHER": "all-gather",
    "ALLTOALL": "all-to-all",
    "REDUCESCATTER": "reduce-scatter",
}
_TYPE_OF_OP = {op: t for t, op in COMM_TYPES.items() if op is not None}

_PASSES = (("fwd", "forward"), ("ig", "input_grad"), ("wg", "weight_grad"))
_COLUMNS = 12
_COLUMN_HELP = (
    "name, dependency, then compute cycles, comm type, comm size for each of forward, "
    "input-gradient and weight-gradient, then update cycles"
)
_INT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class AstraPass:
    """One pass of a layer line: compute cycles, collective type (``NONE``...), size in bytes."""

    compute_cycles: int
    comm_type: str
    comm_size: int


@dataclass(frozen=True)
class AstraLayer:
    """One layer line as written; ``line`` is its 1-based line number in the file."""

    name: str
    dependency: int
    fwd: AstraPass
    ig: AstraPass
    wg: AstraPass
    update_cycles: int
    parallelism: str | None
    line: int


@dataclass(frozen=True)
class AstraFile:
    """A parsed ASTRA-sim 1.0 workload file, not yet interpreted.

    Attributes:
        path: the file read.
        loop: the training-loop keyword of line 1 (``DATA``, ``HYBRID_DLRM``, ...).
        header_args: the remaining tokens of line 1, verbatim.
        last_bottom_layer: for ``HYBRID_DLRM[_ENHANCED]``, the index of the last bottom layer.
        model_parallel_group: for ``HYBRID_TRANSFORMER*``, the model-parallel NPU group size.
        layers: the layer lines, in order.
        header_line: the line number of line 1's content (blank lines before it are skipped).
    """

    path: Path
    loop: str
    header_args: tuple[str, ...]
    last_bottom_layer: int | None
    model_parallel_group: int | None
    layers: tuple[AstraLayer, ...]
    header_line: int = 1


class _Where:
    """Builds errors located at ``file:line``."""

    def __init__(self, path: Path):
        self.path = path

    def error(self, line: int, field: str | None, message: str) -> WorkloadError:
        return WorkloadError(message, location=f"{self.path}:{line}", field=field)

    def integer(self, token: str, line: int, field: str, *, minimum: int | None = 0) -> int:
        if not _INT.fullmatch(token):
            raise self.error(line, field, f"must be an integer, got {short_repr(token)}")
        digits = token.lstrip("+-").lstrip("0")
        if len(digits) > _MAX_DIGITS or int(digits or "0") > MAX_INTEGER:
            shown = token if len(token) <= 40 else f"{token[:20]}... ({len(digits)} digits)"
            raise self.error(
                line, field, f"must fit in 64 bits (at most {MAX_INTEGER}), got {shown}"
            )
        value = int(token)
        if minimum is not None and value < minimum:
            rule = "must not be negative" if minimum == 0 else f"must be at least {minimum}"
            raise self.error(line, field, f"{rule}, got {value}")
        return value


def _read_lines(path: Path) -> list[tuple[int, str]]:
    """Non-blank lines of ``path`` with their 1-based numbers."""
    try:
        text = read_text_file(path, limit=MAX_WORKLOAD_BYTES, what="text workload file")
    except FileProblem as exc:
        message = str(exc)
        if message == "file does not exist":
            message = "no such workload file"
        raise WorkloadError(message, location=str(path)) from None
    return [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _parse_header(where: _Where, lineno: int, tokens: list[str]) -> tuple[int | None, int | None]:
    loop, args = tokens[0], tokens[1:]
    if loop not in KNOWN_LOOPS:
        raise where.error(
            lineno,
            "training loop",
            f"unknown training loop {short_repr(loop)} (known: {', '.join(KNOWN_LOOPS)})",
        )
    last_bottom: int | None = None
    group: int | None = None
    if loop in ("DATA", "MICRO") and args:
        raise where.error(
            lineno, "training loop", f"{loop} takes no arguments, got {short_repr(' '.join(args))}"
        )
    if loop in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        if not args:
            raise where.error(
                lineno,
                "last bottom layer",
                f"{loop} needs the index of the last bottom-MLP layer after it",
            )
        if len(args) > 1:
            raise where.error(
                lineno,
                "training loop",
                f"{loop} takes one argument (the last bottom layer), "
                f"got {short_repr(' '.join(args))}",
            )
        last_bottom = where.integer(args[0], lineno, "last bottom layer")
    if loop.startswith("HYBRID_TRANSFORMER"):
        key = "model_parallel_NPU_group:"
        if len(args) < 2 or args[0] != key:
            raise where.error(
                lineno, "model_parallel_NPU_group", f"{loop} needs '{key} <n>' after it"
            )
        group = where.integer(args[1], lineno, "model_parallel_NPU_group", minimum=1)
    return last_bottom, group


def _parse_layer(where: _Where, lineno: int, line: str, customized: bool) -> AstraLayer:
    tokens = line.split()
    expected = _COLUMNS + (1 if customized else 0)
    if len(tokens) == expected - 1 and _INT.fullmatch(tokens[0]):
        # The columns shifted left by one and start with the dependency: the name is missing.
        raise where.error(
            lineno, "name", f"layer has no name (the line starts with {short_repr(tokens[0])})"
        )
    if len(tokens) != expected:
        extra = ", then the layer's parallelism" if customized else ""
        raise where.error(
            lineno,
            "columns",
            f"expected {expected} whitespace-separated columns ({_COLUMN_HELP}{extra}), "
            f"got {len(tokens)}",
        )
    name = tokens[0]
    dependency = where.integer(tokens[1], lineno, "dependency", minimum=None)
    passes: list[AstraPass] = []
    for k, (short, _) in enumerate(_PASSES):
        cycles_tok, type_tok, size_tok = tokens[2 + 3 * k : 5 + 3 * k]
        cycles = where.integer(cycles_tok, lineno, f"{short}_compute_time")
        if type_tok not in COMM_TYPES:
            hint = (
                "; ASTRA-sim's combined ALLREDUCEALLTOALL is not supported"
                if type_tok == "ALLREDUCEALLTOALL"
                else ""
            )
            raise where.error(
                lineno,
                f"{short}_comm_type",
                f"unknown collective type {short_repr(type_tok)} "
                f"(expected one of {', '.join(COMM_TYPES)}){hint}",
            )
        size = where.integer(size_tok, lineno, f"{short}_comm_size")
        if type_tok == "NONE" and size != 0:
            raise where.error(
                lineno, f"{short}_comm_size", f"must be 0 when the comm type is NONE, got {size}"
            )
        passes.append(AstraPass(cycles, type_tok, size))
    update = where.integer(tokens[11], lineno, "wg_update_time")
    parallelism: str | None = None
    if customized:
        parallelism = tokens[12]
        if parallelism not in KNOWN_LOOPS:
            raise where.error(
                lineno,
                "layer parallelism",
                f"unknown parallelism {short_repr(parallelism)} (known: {', '.join(KNOWN_LOOPS)})",
            )
    return AstraLayer(
        name, dependency, passes[0], passes[1], passes[2], update, parallelism, lineno
    )


def parse_astra_workload(path: str | os.PathLike[str]) -> AstraFile:
    """Parse an ASTRA-sim 1.0 text workload file without interpreting it.

    Reads every training loop ASTRA-sim 1.0 knows (see :data:`KNOWN_LOOPS`).

    Raises:
        WorkloadError: naming ``file:line`` and the field, for an empty file, an unknown
            training loop, a bad header argument, a non-integer or negative number, a wrong
            column count, a layer with no name, an unknown collective type or a layer count
            that disagrees with the layer lines.
    """
    path = Path(path)
    where = _Where(path)
    lines = _read_lines(path)
    if not lines:
        raise where.error(1, "training loop", "the file is empty; expected the training loop")
    head_no, head = lines[0]
    header_tokens = head.split()
    loop = header_tokens[0]
    last_bottom, group = _parse_header(where, head_no, header_tokens)
    if len(lines) < 2:
        raise where.error(head_no + 1, "layer count", "missing; expected the number of layers")
    count_no, count_line = lines[1]
    count_tokens = count_line.split()
    if len(count_tokens) != 1:
        raise where.error(
            count_no, "layer count", f"expected one integer, got {short_repr(count_line.strip())}"
        )
    declared = where.integer(count_tokens[0], count_no, "layer count", minimum=1)
    body = lines[2:]
    if len(body) != declared:
        if len(body) > declared:
            first_extra = body[declared][0]
            detail = f"{len(body)} layer lines follow (the first extra one is line {first_extra})"
        else:
            detail = f"only {len(body)} layer lines follow"
        raise where.error(count_no, "layer count", f"declares {declared} layers but {detail}")
    customized = loop == "HYBRID_CUSTOMIZED"
    layers = tuple(_parse_layer(where, no, text, customized) for no, text in body)
    return AstraFile(
        path=path,
        loop=loop,
        header_args=tuple(header_tokens[1:]),
        last_bottom_layer=last_bottom,
        model_parallel_group=group,
        layers=layers,
        header_line=head_no,
    )


def _check_clock(clock_hz: float) -> None:
    if not (isinstance(clock_hz, (int, float)) and math.isfinite(clock_hz) and clock_hz > 0):
        raise WorkloadError(
            f"must be a positive finite frequency in Hz, got {clock_hz!r}", field="clock_hz"
        )


def _involved_dims(loop: str, layer_index: int, pass_short: str) -> tuple[int, ...] | None:
    """Dimensions a collective spans (``None`` = all), as ``decode_involved_dimensions``."""
    if loop == "HYBRID_DLRM" and layer_index == 0:
        return None  # the embedding layer: ParallelismPolicy::All
    return None if pass_short == "wg" else ()


def read_astra_workload(
    path: str | os.PathLike[str], *, clock_hz: float = DEFAULT_CLOCK_HZ
) -> Workload:
    """Read an ASTRA-sim 1.0 text workload file as a :class:`Workload`.

    Args:
        path: the ``.txt`` file.
        clock_hz: the clock whose cycles the file counts (Hz); ASTRA-sim 1.0 uses 1 GHz.

    Raises:
        WorkloadError: everything :func:`parse_astra_workload` raises, plus a training loop
            acesim cannot run (see :data:`SUPPORTED_LOOPS`), a repeated layer name and a
            ``HYBRID_DLRM`` bottom-layer index outside the layers.
    """
    _check_clock(clock_hz)
    parsed = parse_astra_workload(path)
    where = _Where(parsed.path)
    head_line = parsed.header_line
    if parsed.loop not in SUPPORTED_LOOPS:
        raise where.error(
            head_line,
            "training loop",
            f"training loop {parsed.loop} is not supported "
            f"(supported: {', '.join(SUPPORTED_LOOPS)}); acesim has no training loop with "
            "its semantics yet (blocking model-parallel collectives, a topology-dependent "
            "dimension split, per-layer policies or checkpoints; docs/workloads.md, "
            "'ASTRA-sim 1.0 text workloads')",
        )
    n = len(parsed.layers)
    bottom = parsed.last_bottom_layer
    if bottom is not None and bottom >= n:
        raise where.error(
            head_line,
            "last bottom layer",
            f"must be a layer index below {n}, got {bottom}",
        )
    seen: dict[str, int] = {}
    layers: list[Layer] = []
    for index, raw in enumerate(parsed.layers):
        if raw.name in seen:
            raise where.error(
                raw.line,
                "name",
                f"layer name {short_repr(raw.name)} repeats (first on line {seen[raw.name]})",
            )
        seen[raw.name] = raw.line
        passes: dict[str, Pass] = {}
        for short, attr in _PASSES:
            p: AstraPass = getattr(raw, short)
            op = COMM_TYPES[p.comm_type]
            comm = (
                None
                if op is None
                else Comm(op, float(p.comm_size), _involved_dims(parsed.loop, index, short))
            )
            passes[attr] = Pass(
                Compute(duration=p.compute_cycles / clock_hz), () if comm is None else (comm,)
            )
        layers.append(
            Layer(
                name=raw.name,
                forward=passes["forward"],
                input_grad=passes["input_grad"],
                weight_grad=passes["weight_grad"],
                update_time=raw.update_cycles / clock_hz,
            )
        )
    parallelism = SUPPORTED_LOOPS[parsed.loop]
    return Workload(
        name=parsed.path.stem,
        layers=tuple(layers),
        parallelism=parallelism,  # type: ignore[arg-type]
        bottom_layers=bottom,
        description=f"ASTRA-sim 1.0 {parsed.loop} workload, {n} layers",
        source=str(parsed.path),
        precision=None,
    )


def _cycles(value: float, clock_hz: float) -> int:
    return int(round(value * clock_hz))


def write_astra_workload(
    workload: Workload, path: str | os.PathLike[str], *, clock_hz: float = DEFAULT_CLOCK_HZ
) -> None:
    """Write ``workload`` in the ASTRA-sim 1.0 text format (tab-separated, LF line ends).

    Compute must be given as durations; they are rounded to whole cycles of ``clock_hz``.

    Raises:
        WorkloadError: a pass with roofline compute (FLOPs or HBM bytes) but no duration, a
            parallelism the format cannot express, a layer name with whitespace, or a
            collective whose dimensions differ from those the training loop implies.
    """
    _check_clock(clock_hz)
    loop, header = _astra_header(workload)
    rows = [header, str(len(workload.layers))]
    for index, layer in enumerate(workload.layers):
        rows.append(_astra_row(workload, index, layer, loop, clock_hz))
    Path(path).write_text("\n".join(rows) + "\n", encoding="utf-8")


def _astra_header(workload: Workload) -> tuple[str, str]:
    """The training loop of ``workload``'s parallelism and the file's first line (the loop;
    for HYBRID_DLRM, with the last bottom layer)."""
    loop = _LOOP_OF_PARALLELISM.get(workload.parallelism)
    if loop is None:
        raise WorkloadError(
            f"parallelism {workload.parallelism!r} has no ASTRA-sim 1.0 training loop "
            f"(writable: {', '.join(_LOOP_OF_PARALLELISM)})",
            location=workload.name,
            field="parallelism",
        )
    if loop != "HYBRID_DLRM":
        return loop, loop
    if workload.bottom_layers is None:
        raise WorkloadError(
            "a hybrid_dlrm workload needs bottom_layers",
            location=workload.name,
            field="bottom_layers",
        )
    return loop, f"{loop}\t{workload.bottom_layers}"


def _astra_row(workload: Workload, index: int, layer: Layer, loop: str, clock_hz: float) -> str:
    """Layer ``index``'s line: its name, each pass's columns, its update time in cycles."""
    if not layer.name or any(c.isspace() for c in layer.name):
        raise WorkloadError(
            f"must be non-empty and free of whitespace to be written, got {layer.name!r}",
            location=workload.name,
            field=f"layers[{index}].name",
        )
    cols: list[str] = [layer.name, "-1"]
    for short, attr in _PASSES:
        want = _involved_dims(loop, index, short)
        cols += _pass_columns(
            workload, f"{layer.name}.{attr}", getattr(layer, attr), loop, want, clock_hz
        )
    if not layer.update.empty:
        raise WorkloadError(
            "has optimizer kernels but no update_time; the ASTRA-sim 1.0 format needs a fixed time",
            location=workload.name,
            field=f"{layer.name}.update",
        )
    cols.append(str(_cycles(layer.update_time, clock_hz)))
    return "\t".join(cols)


def _pass_columns(
    workload: Workload,
    field: str,
    p: Pass,
    loop: str,
    want: tuple[int, ...] | None,
    clock_hz: float,
) -> list[str]:
    """A pass's three columns: compute cycles, collective type, collective bytes; refuses
    compute without a duration and a collective over other dimensions than ``want`` (those
    the training loop implies there)."""
    c = p.compute
    if c.duration is None:
        if not c.empty:
            raise WorkloadError(
                "has roofline compute (FLOPs/HBM bytes) but no duration; the "
                "ASTRA-sim 1.0 format needs fixed times",
                location=workload.name,
                field=f"{field}.compute",
            )
        cycles = 0
    else:
        cycles = _cycles(c.duration, clock_hz)
    if p.comm is None:
        return [str(cycles), "NONE", "0"]
    if p.comm.dims != want:
        raise WorkloadError(
            f"spans dimensions {p.comm.dims}, but a {loop} workload implies {want} "
            "here (None = all)",
            location=workload.name,
            field=f"{field}.comm.dims",
        )
    size = p.comm.size
    if size != int(size):
        raise WorkloadError(
            f"must be a whole number of bytes, got {size}",
            location=workload.name,
            field=f"{field}.comm.size",
        )
    return [str(cycles), _TYPE_OF_OP[p.comm.op], str(int(size))]
