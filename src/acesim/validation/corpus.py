"""The validation corpus: public measurements of real hardware, one TOML file per family.

A family file (``corpus/<family>.toml``, package data) states its error budget and lists its
cases. A case names the system it ran on, what it ran (``[cases.run]``, one of the kinds of
:data:`RUN_KINDS`), the measured figure and its unit, where the figure comes from, and whether
the row was used to fit a parameter (``fit``; fit rows prove nothing about fidelity and are left
out of the family's error). A row acesim cannot simulate yet says so (``status =
"unsupported"`` with its ``reason``) and is shown, never dropped.

A malformed file is one :class:`~acesim.errors.ConfigError` line naming the file, the case and
the field (``kernels.toml: case h100-gemm-fp8-1024: run.m: ...``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import tomllib
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from ..config.errors import FieldRuleError, config_error_from
from ..config.system import Strict
from ..errors import ConfigError, shorten
from ..hardware.endpoints import ENDPOINT_KINDS
from ..network.ops import COLLECTIVE_OPS
from ..precision import DTYPES, PRECISIONS
from ..registry import Registry
from ..units import format_size, parse_quantity

__all__ = [
    "RUN_KINDS",
    "UNITS",
    "Band",
    "Budget",
    "Case",
    "CollectiveRun",
    "Corpus",
    "AttentionRun",
    "Family",
    "GemmRun",
    "LlmRun",
    "OVERLAP_METRICS",
    "OverlapRun",
    "StreamRun",
    "TrainingRun",
    "load_corpus",
]

#: Units a measured figure may have, per run kind, and their size in SI base units
#: (FLOP/s, B/s, images/s). Rates use decimal prefixes, as the sources do.
UNITS: dict[str, dict[str, float]] = {
    "gemm": {"TFLOP/s": 1e12, "GFLOP/s": 1e9},
    "attention": {"TFLOP/s": 1e12},
    "stream": {"TB/s": 1e12, "GB/s": 1e9},
    "collective": {"GB/s": 1e9},
    "training": {"images/s": 1.0},
    "llm": {"tokens/s/GPU": 1.0},
    "overlap": {"ratio": 1.0, "ms": 1e-3},
}

#: Units of rows that are not simulated yet (no ``run``): any of the above, and LLM throughput.
OTHER_UNITS = ("tokens/s",)


def _positive_size(value: float | str) -> float:
    """A size in bytes (a number or text such as ``"64 MiB"``), positive."""
    size = parse_quantity(value, "size", "size")
    if size <= 0:
        raise FieldRuleError("", "must be a positive size", value)
    return size


def _registered(registry: Registry[Any]) -> Callable[[str], str]:
    """A field check: the value names an entry of ``registry`` (its one-line error else)."""

    def check(value: str) -> str:
        if value not in registry:
            err = registry.unknown(value)
            raise FieldRuleError("", err.rule, value, hint=err.hint)
        return value

    return check


def _dtype(value: str | None) -> str | None:
    return None if value is None else _registered(DTYPES)(value)


class GemmRun(Strict):
    """One GEMM ``[m,k] x [k,n]`` alone on the NPU; the figure is FLOPs over its time alone."""

    kind: Literal["gemm"]
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    dtype: str = Field("fp8", description="dtype of the inputs and of the math")
    out_dtype: str | None = Field(None, description="dtype of the output (None: the kernel's)")
    flops: Literal["2mnk", "mn(2k-1)"] = Field(
        "2mnk",
        description="how the benchmark counts FLOPs: 2mnk, or mn(2k-1) (superbenchmark's "
        "cublaslt_gemm); the simulated figure counts them the same way",
    )

    @field_validator("dtype", "out_dtype")
    @classmethod
    def _dtypes(cls, value: str | None) -> str | None:
        return _dtype(value)


class AttentionRun(Strict):
    """One fused attention kernel alone on the NPU over ``batch x heads`` sequences of ``seq``
    tokens (queries and keys), forward or ``backward``; the figure is FLOPs over its time,
    counted as FlashAttention's benchmarks count them (forward ``4 batch heads seq^2 d``, half
    with a causal mask; backward 2.5 times the forward)."""

    kind: Literal["attention"]
    batch: int = Field(gt=0)
    heads: int = Field(gt=0)
    seq: int = Field(gt=0, description="tokens per sequence (queries = keys)")
    head_dim: int = Field(gt=0)
    dtype: str = Field("bf16", description="dtype of Q, K, V and of the math")
    causal: bool = False
    backward: bool = False

    _dtypes = field_validator("dtype")(staticmethod(_registered(DTYPES)))


class StreamRun(Strict):
    """One STREAM kernel over arrays of ``elements`` elements (BabelStream convention: the
    figure is bytes read plus bytes written over the time)."""

    kind: Literal["stream"]
    variant: Literal["copy", "triad", "dot"]
    elements: int = Field(gt=0, description="elements per array")
    element_bytes: int = Field(8, gt=0, description="bytes per element (8: FP64)")


class CollectiveRun(Strict):
    """One collective of ``size`` bytes (nccl-tests size column) over every NPU, or over the
    first ``group`` NPUs of the innermost dimension (4 GPUs of an 8-GPU node)."""

    kind: Literal["collective"]
    op: str
    size: float | str = Field(description="bytes, or text such as '64 MiB'")
    metric: Literal["busbw", "algbw"] = "busbw"
    endpoint: str | None = Field(None, description="endpoint kind (None: the system's)")
    group: int | None = Field(
        None, gt=0, description="NPUs of the innermost dimension in the group (None: all NPUs)"
    )
    dims: list[int] | None = Field(
        None,
        description="the dimensions the collective spans, whole (e.g. [1]: one GPU per node "
        "across the scale-out); None: every dimension (not with group)",
    )
    algorithm: str | None = Field(
        None,
        description="the algorithm the measurement forced (NCCL_ALGO), forced as the system's "
        "collective.algorithm; None: the system's own (its tuner's choice)",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="system settings the measurement used, by dotted path (e.g. "
        "'endpoint.copy_engine.wave_size' = 8, 'network.dimensions[0].size' = 64), applied to "
        "the system before it is validated",
    )

    @field_validator("dims")
    @classmethod
    def _dims(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (not value or any(d < 0 for d in value)):
            raise FieldRuleError("", "must list dimension indices >= 0", value)
        return value

    @model_validator(mode="after")
    def _group_or_dims(self) -> CollectiveRun:
        if self.group is not None and self.dims is not None:
            raise FieldRuleError("dims", "give either group or dims, not both", self.dims)
        return self

    _op = field_validator("op")(staticmethod(_registered(COLLECTIVE_OPS)))

    _size = field_validator("size")(staticmethod(_positive_size))

    @property
    def nbytes(self) -> float:
        return float(self.size)


class TrainingRun(Strict):
    """Training iterations of a zoo workload, data parallel on one NPU (no collective); the
    figure is samples per second, ``batch`` over the steady-state iteration time."""

    kind: Literal["training"]
    workload: str
    batch: int = Field(gt=0, description="samples per NPU per iteration")
    precision: str = Field(description="training precision recipe (acesim.precision)")
    iterations: int = Field(3, ge=3, description="iterations simulated (the first is dropped)")

    _precision = field_validator("precision")(staticmethod(_registered(PRECISIONS)))


class LlmRun(Strict):
    """One LLM training iteration (:mod:`acesim.runs.llm`) of a model of the LLM registry
    with a Megatron parallel configuration on every GPU of the system; the figure is tokens
    per second per GPU."""

    kind: Literal["llm"]
    model: str = Field(description="a model of acesim.workload.llm.models.MODELS")
    parallel: str = Field(description="Megatron sizes as --parallel takes them (tp=4,pp=8,...)")
    global_batch: int = Field(gt=0, description="sequences per iteration")
    micro_batch: int = Field(gt=0, description="sequences per micro-batch")
    seq: int = Field(gt=0, description="tokens per sequence")
    precision: str = Field(description="training precision recipe (acesim.precision)")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="system settings the measurement used, by dotted path (e.g. "
        "'network.dimensions[0].size' = 64: 64 GPUs of a 72-GPU NVLink domain), applied to the "
        "system before it is validated",
    )
    check_memory: bool = Field(
        True,
        description="false: run the configuration the measurement ran even where acesim's "
        "memory model finds it over the HBM (the row's note says by how much and why)",
    )

    _precision = field_validator("precision")(staticmethod(_registered(PRECISIONS)))


#: What an overlap row's figure is, and its unit: the overlapped makespan over the serial
#: time (GEMM alone plus collective alone), either time, or one part's slowdown.
OVERLAP_METRICS: dict[str, str] = {
    "overlapped/serial": "ratio",
    "overlapped": "ms",
    "serial": "ms",
    "gemm_slowdown": "ratio",
    "collective_slowdown": "ratio",
}


class OverlapRun(Strict):
    """A GEMM ``[m,k] x [k,n]`` and a collective of ``size`` bytes on every NPU of the
    system, as ``acesim overlap`` runs them: each alone, serial (the sum of the two alone
    times) and overlapped (started together, or the collective ``collective_at`` after the
    GEMM's launch: the makespan). ``endpoint`` runs the overlapped pair; ``serial_endpoint``
    the serial reference (a benchmark whose serial baseline used NCCL's SM kernels while its
    overlapped run used copy engines)."""

    kind: Literal["overlap"]
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    dtype: str = Field("fp16", description="dtype of the GEMM's inputs and math")
    op: str
    size: float | str = Field(description="collective bytes (nccl-tests size column), or text")
    endpoint: str | None = Field(
        None, description="endpoint of the overlapped run (None: the system's)"
    )
    serial_endpoint: str | None = Field(
        None, description="endpoint of the serial reference's collective (None: endpoint)"
    )
    collective_at: float | str = Field(
        0.0, description="the collective issued this long after the GEMM's launch, s or text"
    )
    metric: str = Field("overlapped/serial", description="the figure: one of OVERLAP_METRICS")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="system settings the measurement used, by dotted path (as a collective row's)",
    )

    _dtypes = field_validator("dtype")(staticmethod(_registered(DTYPES)))
    _op = field_validator("op")(staticmethod(_registered(COLLECTIVE_OPS)))

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        if value not in OVERLAP_METRICS:
            raise FieldRuleError("", f"must be one of {', '.join(OVERLAP_METRICS)}", value)
        return value

    @field_validator("endpoint", "serial_endpoint")
    @classmethod
    def _endpoints(cls, value: str | None) -> str | None:
        return None if value is None else _registered(ENDPOINT_KINDS)(value)

    _size = field_validator("size")(staticmethod(_positive_size))

    @field_validator("collective_at")
    @classmethod
    def _at(cls, value: float | str) -> float:
        at = parse_quantity(value, "time", "collective_at")
        if not at >= 0:
            raise FieldRuleError("", "must be a time of at least 0 s", value)
        return at

    @property
    def nbytes(self) -> float:
        return float(self.size)

    @property
    def unit(self) -> str:
        """The unit the metric is stated in (ratio or ms)."""
        return OVERLAP_METRICS[self.metric]


Run = GemmRun | AttentionRun | StreamRun | CollectiveRun | TrainingRun | LlmRun | OverlapRun

#: Run kinds by name.
RUN_KINDS: dict[str, type[Run]] = {
    "gemm": GemmRun,
    "attention": AttentionRun,
    "stream": StreamRun,
    "collective": CollectiveRun,
    "training": TrainingRun,
    "llm": LlmRun,
    "overlap": OverlapRun,
}

#: Kinds that run on one NPU: their ``system`` is an NPU preset name (or a one-NPU file).
SINGLE_NPU_KINDS = ("gemm", "attention", "stream", "training")

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class Case(Strict):
    """One measured figure and how to simulate it (see the module docstring)."""

    id: str = Field(description="unique in the corpus: lower case, digits, '.', '_', '-'")
    system: str = Field(
        description="system preset name (collectives), NPU preset name (one-NPU kinds), or "
        "a system file relative to the corpus file"
    )
    nodes: int = Field(1, gt=0, description="nodes of the system the measurement used")
    run: Run | None = Field(None, description="what to simulate; only unsupported rows omit it")
    measured: float = Field(gt=0, description="the published figure, in unit")
    unit: str
    source: str = Field(min_length=1, description="document and where in it")
    setup: str = Field("", description="how the measurement was taken, for people")
    fit: bool = Field(description="the row was used to fit a parameter (not a test row)")
    fits: list[str] = Field(
        default_factory=list, description="the parameters a fit row fits (dotted paths)"
    )
    quick: bool = Field(False, description="cheap to simulate: part of `acesim validate --quick`")
    error_before_fit: float | None = Field(
        None,
        description="the row's error (simulated / measured - 1) as a prediction, before any "
        "parameter was fitted on it or on its system's other rows: recorded when it was, by the "
        "method before_fit names, and never updated",
    )
    before_fit: Literal["held-out", "entry"] | None = Field(
        None,
        description="how error_before_fit was found: held-out, the error with the row's "
        "system's own fits withheld (`acesim validate --transfer`) when it was recorded; "
        "entry, the row's error as a test row when it entered the corpus, before any fit",
    )
    status: Literal["live", "unsupported"] = "live"
    reason: str = Field("", description="why an unsupported row is not simulated")
    note: str = ""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise FieldRuleError("", "must be lower case letters, digits, '.', '_' or '-'", value)
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not value.strip():
            raise FieldRuleError("", "must name the document the figure comes from", value)
        return value

    @field_validator("run", mode="before")
    @classmethod
    def _run(cls, value: Any) -> Any:
        if value is None or isinstance(value, BaseModel):
            return value
        if not isinstance(value, dict):
            raise FieldRuleError("", "must be a table with a kind", value)
        kind = value.get("kind")
        if kind not in RUN_KINDS:
            raise FieldRuleError("kind", f"must be one of {', '.join(RUN_KINDS)}", kind)
        model = RUN_KINDS[kind]
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            err = config_error_from(exc, model)
            raise FieldRuleError(err.field, err.rule, err.value, hint=err.hint) from None

    @model_validator(mode="after")
    def _rules(self) -> Case:
        if self.status == "unsupported":
            if not self.reason.strip():
                raise FieldRuleError("reason", "must say why an unsupported row is not simulated")
            if self.fit:
                raise FieldRuleError("fit", "an unsupported row cannot have been fit", self.fit)
        elif self.run is None:
            raise FieldRuleError("run", "a live row must say what to simulate ([cases.run])")
        elif self.reason:
            raise FieldRuleError("reason", "only unsupported rows give a reason", self.reason)
        if (self.error_before_fit is None) != (self.before_fit is None):
            raise FieldRuleError(
                "before_fit", "error_before_fit and before_fit are given together", self.before_fit
            )
        if self.error_before_fit is not None and not (
            math.isfinite(self.error_before_fit) and self.error_before_fit > -1
        ):
            raise FieldRuleError(
                "error_before_fit", "must be a finite error above -1", self.error_before_fit
            )
        if self.fit and not self.fits:
            raise FieldRuleError("fits", "a fit row must name the parameters it fits")
        if not self.fit and self.fits:
            raise FieldRuleError("fits", "only fit rows (fit = true) fit parameters", self.fits)
        if self.run is not None and self.run.kind in SINGLE_NPU_KINDS and self.nodes != 1:
            raise FieldRuleError("nodes", f"a {self.run.kind} row runs on one NPU", self.nodes)
        if isinstance(self.run, OverlapRun) and self.unit != self.run.unit:
            raise FieldRuleError(
                "unit", f"must be {self.run.unit} for the metric {self.run.metric}", self.unit
            )
        units = UNITS[self.run.kind] if self.run is not None else _all_units()
        if self.unit not in units:
            what = f"a {self.run.kind} row" if self.run is not None else "a row"
            raise FieldRuleError("unit", f"must be one of {', '.join(units)} for {what}", self.unit)
        return self

    @property
    def kind(self) -> str:
        """The run kind (``gemm`` ...), or ``-`` for a row without a run."""
        return self.run.kind if self.run is not None else "-"

    @property
    def scale(self) -> float:
        """The unit in SI base units (TFLOP/s: 1e12)."""
        return UNITS[self.run.kind][self.unit] if self.run is not None else 1.0


def _all_units() -> list[str]:
    seen = [u for units in UNITS.values() for u in units]
    return list(dict.fromkeys([*seen, *OTHER_UNITS]))


class Band(Strict):
    """A budget on the test rows of a size range (collective rows: their size)."""

    statistic: Literal["mean", "max"] = Field(
        description="mean: the mean |error| over the band's test rows; max: every one"
    )
    limit: float = Field(gt=0, description="largest |simulated / measured - 1| allowed")
    min_size: float | str | None = Field(None, description="rows of at least this size")
    below_size: float | str | None = Field(None, description="rows smaller than this size")

    @field_validator("min_size", "below_size")
    @classmethod
    def _size(cls, value: float | str | None) -> float | None:
        if value is None:
            return None
        size = parse_quantity(value, "size", "size")
        if size <= 0:
            raise FieldRuleError("", "must be a positive size", value)
        return size

    def holds(self, case: Case) -> bool:
        """The case is a sized row within the band."""
        size = getattr(case.run, "size", None)
        if not isinstance(size, float):
            return False
        low = self.min_size if isinstance(self.min_size, float) else 0.0
        high = self.below_size if isinstance(self.below_size, float) else math.inf
        return low <= size < high

    @property
    def label(self) -> str:
        parts = []
        if isinstance(self.min_size, float):
            parts.append(f">= {format_size(self.min_size)}")
        if isinstance(self.below_size, float):
            parts.append(f"< {format_size(self.below_size)}")
        return " and ".join(parts) or "all sizes"


class Budget(Strict):
    """The error a family's test rows may have: their ``mean`` or ``max`` |error|, over all
    of them and, where ``bands`` are given, over each band's rows too."""

    statistic: Literal["mean", "max"] = Field(
        description="mean: the mean |error| over the test rows; max: every test row"
    )
    limit: float = Field(gt=0, description="largest |simulated / measured - 1| allowed")
    bands: list[Band] = Field(
        default_factory=list, description="budgets per size range, each also to be met"
    )


class FamilyDocument(Strict):
    """The top level of a family file."""

    family: str
    title: str
    description: str = ""
    order: int = Field(100, description="where the family comes in reports (then by name)")
    budget: Budget
    gating: bool = Field(
        True,
        description="over budget fails `acesim validate` (false: reported as over budget, "
        "with gating_note saying why it does not fail the run)",
    )
    gating_note: str = Field("", description="why the family does not gate (with gating false)")
    transfer_target: Budget | None = Field(
        None,
        description="the error its rows should have with their system's own fits withheld "
        "(`acesim validate --transfer`): reported against, never gating; None: reported only",
    )
    cases: list[Any] = Field(default_factory=list)

    @model_validator(mode="after")
    def _note(self) -> FamilyDocument:
        if not self.gating and not self.gating_note.strip():
            raise FieldRuleError("gating_note", "must say why a family does not gate", "")
        return self


@dataclass(frozen=True)
class Family:
    """A family loaded from ``origin`` (system files of its cases are relative to ``base``)."""

    name: str
    title: str
    description: str
    order: int
    budget: Budget
    cases: tuple[Case, ...]
    origin: str
    base: Path | None
    gating: bool = True
    gating_note: str = ""
    transfer_target: Budget | None = None


@dataclass(frozen=True)
class Corpus:
    """Every family, in report order (``order``, then name)."""

    families: dict[str, Family]
    origin: str

    def names(self) -> list[str]:
        return list(self.families)

    def select(self, names: list[str] | None) -> list[Family]:
        """The families named (in corpus order); ConfigError naming ``--family`` otherwise."""
        if not names:
            return list(self.families.values())
        for name in names:
            if name not in self.families:
                raise ConfigError(
                    "--family", f"unknown family; the corpus has {', '.join(self.families)}", name
                )
        return [f for n, f in self.families.items() if n in names]

    def rows(self, ids: Iterable[str]) -> frozenset[str]:
        """``ids`` checked against the corpus's rows; ConfigError naming ``--row`` (with the
        nearest id) for one it does not have."""
        ids = list(ids)  # read twice: checked, then kept
        known = [c.id for f in self.families.values() for c in f.cases]
        for row in ids:
            if row not in known:
                near = difflib.get_close_matches(row, known, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ConfigError(
                    "--row", f"unknown row{hint}; `acesim validate --json` lists them", row
                )
        return frozenset(ids)


def _package_dir() -> Traversable:
    return resources.files("acesim.validation").joinpath("corpus")


def _family(name: str, text: str, base: Path | None) -> Family:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(name, f"cannot parse: {shorten(str(exc), 300)}") from None
    try:
        doc = FamilyDocument.model_validate(data)
    except ValidationError as exc:
        err = config_error_from(exc, FamilyDocument)
        raise ConfigError(f"{name}: {err.field}", err.rule, err.value, hint=err.hint) from None
    stem = name.rsplit("/", 1)[-1].removesuffix(".toml")
    if doc.family != stem:
        raise ConfigError(f"{name}: family", f"must be the file's name {stem!r}", doc.family)
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.cases):
        label = raw.get("id") if isinstance(raw, dict) else None
        where = (
            f"{name}: case {label}" if isinstance(label, str) and label else f"{name}: cases[{i}]"
        )
        try:
            case = Case.model_validate(raw)
        except ValidationError as exc:
            err = config_error_from(exc, Case)
            raise ConfigError(f"{where}: {err.field}", err.rule, err.value, hint=err.hint) from None
        if case.id in seen:
            raise ConfigError(f"{where}: id", "must be unique in the family", case.id)
        seen.add(case.id)
        cases.append(case)
    return Family(
        doc.family,
        doc.title,
        doc.description,
        doc.order,
        doc.budget,
        tuple(cases),
        name,
        base,
        doc.gating,
        doc.gating_note,
        doc.transfer_target,
    )


def load_corpus(directory: str | Path | None = None) -> Corpus:
    """The corpus shipped with acesim, or the ``*.toml`` family files of ``directory``.

    Raises :class:`~acesim.errors.ConfigError` (one line: file, case, field) for a malformed
    file, a case id used twice in the corpus, or a directory without family files.
    """
    files: list[tuple[str, str, Path | None]] = []
    if directory is None:
        for entry in sorted(_package_dir().iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml"):
                files.append((entry.name, entry.read_text(encoding="utf-8"), None))
        origin = "acesim.validation/corpus"
    else:
        folder = Path(directory)
        if not folder.is_dir():
            raise ConfigError("--corpus", "must be a folder of family .toml files", str(folder))
        for path in sorted(folder.glob("*.toml")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(str(path), f"cannot read: {exc}") from None
            files.append((str(path), text, folder))
        origin = str(folder)
    if not files:
        raise ConfigError("--corpus", "holds no family .toml files", origin)
    families: dict[str, Family] = {}
    owner: dict[str, str] = {}
    for name, text, base in files:
        family = _family(name, text, base)
        for case in family.cases:
            if case.id in owner:
                raise ConfigError(
                    f"{name}: case {case.id}: id", f"must be unique, {owner[case.id]} has it too"
                )
            owner[case.id] = name
        families[family.name] = family
    ordered = sorted(families.values(), key=lambda f: (f.order, f.name))
    return Corpus({f.name: f for f in ordered}, origin)
