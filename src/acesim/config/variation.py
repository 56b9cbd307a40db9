"""Ranks and links that differ from the system document: stragglers, mixed NPUs, link faults.

Only exact mode simulates every NPU, so only exact mode can run a platform whose ranks differ;
symmetric mode refuses these options by name (:func:`variation_problem`).

* ``stragglers``: ``{rank, slowdown}``: every compute kernel of that rank takes ``slowdown``
  times as long as the kernel model says (a throttled clock, a slower part): its compute rate
  cap and its launch latency scale by ``1 / slowdown``; what it moves per unit of work is
  unchanged, so its HBM rate slows with it.
* ``compute_spread``: ``{spread, seed}``: every rank's slowdown is ``1 + spread * u`` with ``u``
  drawn uniformly from [0, 1) by ``numpy.random.default_rng(seed)`` (rank order); stragglers
  multiply on top. The uniform law is an assumption (a simple bounded spread), not a fit.
* ``links``: ``{dim, rank, direction, bandwidth, latency, failed}``: the links rank ``rank``
  sends on along dimension ``dim`` (``direction`` ``"+"`` or ``"-"``: only that direction of a
  bidirectional ring) get this bandwidth per link (B/s) and latency (s), or fail. How the
  network carries it is :mod:`acesim.hardware.variation`'s.
* ``npu_types``: ``{ranks, preset, <npu field>...}``: those ranks (``3``, ``"4-7"`` inclusive,
  or a list of them) are another NPU: NPU preset ``preset``'s ``[npu]`` table
  (``presets/npus/``; without one, the system's own NPU) with the other keys (dotted paths
  into the ``[npu]`` table: ``hbm_bandwidth``, ``kernels.gemm_efficiency``) changed. Their
  kernels are planned on that NPU (peaks, units, HBM, efficiencies, latency, everything the
  ``[npu]`` table holds); the network and the endpoint's settings stay the system's. Stragglers
  and a compute spread multiply on top. The endpoint's settings are checked against each type
  (``comm_units`` must leave every NPU's kernels some units), and every type shares the
  system's ``hbm_arbitration`` (the endpoint arbitrates HBM one way).
* ``placement`` (a run option beside these, :func:`check_placement`): a permutation of the
  platform's NPU positions; workload rank ``r`` runs on NPU ``placement[r]``
  (:mod:`acesim.workload.placement` maps the graph). The options above name NPU positions
  (the hardware), not workload ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError, shorten
from .errors import FieldRuleError, config_error_from
from .merge import merge_documents
from .npus import npu_preset_document
from .system import NPUConfig, Strict
from .validators import (
    MAX_NPUS,
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveBytesPerSecond,
    PositiveFloat,
)

__all__ = [
    "Straggler",
    "ComputeSpread",
    "LinkChange",
    "NpuType",
    "Variation",
    "variation_problem",
    "placement_problem",
    "check_placement",
]


class Straggler(Strict):
    """One rank whose compute kernels run ``slowdown`` times as long."""

    rank: NonNegativeInt = Field(description="the slow rank")
    slowdown: PositiveFloat = Field(description="its kernels' time multiplier (1.3: 30% slower)")


class ComputeSpread(Strict):
    """Per-rank compute slowdowns ``1 + spread * u``, ``u`` uniform in [0, 1), seeded."""

    spread: PositiveFloat = Field(description="largest extra slowdown (0.1: up to 10% slower)")
    seed: NonNegativeInt = Field(0, description="seed of numpy.random.default_rng")


class LinkChange(Strict):
    """The links a rank sends on along one dimension, degraded, re-timed or failed."""

    dim: NonNegativeInt = Field(description="dimension index (0 = innermost)")
    rank: NonNegativeInt = Field(description="the sending rank")
    direction: Literal["+", "-"] | None = Field(
        None, description="bidirectional ring only: just the links towards rank+1 or rank-1"
    )
    bandwidth: PositiveBytesPerSecond | None = Field(
        None, description="per link per direction, B/s (None: the dimension's)"
    )
    latency: NonNegativeSeconds | None = Field(
        None, description="s per message (None: the dimension's)"
    )
    failed: bool = Field(False, description="the links carry nothing")


_RANGE = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$", re.ASCII)


class NpuType(Strict):
    """Ranks that run on another NPU: a preset's, and/or with ``[npu]`` fields changed."""

    ranks: int | str | list[int | str] = Field(
        description="a rank, a range 'first-last' (inclusive) or a list of them"
    )
    preset: str | None = Field(
        None, description="NPU preset (presets/npus/) those ranks are; None: the system's NPU"
    )
    changes: dict[str, Any] = Field(
        default_factory=dict,
        description="[npu] fields changed on those ranks, by dotted path (hbm_bandwidth, "
        "kernels.gemm_efficiency); every key besides ranks and preset lands here",
    )

    @model_validator(mode="before")
    @classmethod
    def _collect_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            own = {"ranks", "preset", "changes"}
            extra = {k: v for k, v in data.items() if k not in own}
            if extra:
                data = {k: v for k, v in data.items() if k in own}
                data["changes"] = {**dict(data.get("changes") or {}), **extra}
        return data

    @field_validator("ranks", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any) -> Any:
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, bool):  # ``ranks=true`` is not rank 1
                raise FieldRuleError("", "expected a rank or a range like 4-7, not a boolean", item)
        return v

    @field_validator("ranks")
    @classmethod
    def _ranks_text(cls, v: int | str | list[int | str]) -> int | str | list[int | str]:
        for item in v if isinstance(v, list) else [v]:
            _span(item)
        if isinstance(v, list) and not v:
            raise FieldRuleError("", "must name at least one rank", v)
        return v

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                npu_preset_document(v, "preset")
            except ConfigError as err:
                raise FieldRuleError("", err.rule, v, hint=err.hint) from None
        return v

    def spans(self) -> list[tuple[int, int]]:
        """The ranks as inclusive ``(first, last)`` ranges, in the order given."""
        return [
            _span(item) for item in (self.ranks if isinstance(self.ranks, list) else [self.ranks])
        ]

    def rank_list(self) -> list[int]:
        """The ranks, in the order given (ranges expanded: check :meth:`spans` against the
        NPUs first)."""
        out: list[int] = []
        for first, last in self.spans():
            out.extend(range(first, last + 1))
        return out

    def npu_config(self, base: NPUConfig, field: str) -> NPUConfig:
        """The NPU of these ranks: the preset's (or ``base``) with the changes (ConfigError
        naming ``field``'s key: an unknown preset, an unknown or invalid NPU field)."""
        if self.preset is not None:
            doc = dict(npu_preset_document(self.preset, f"{field}.preset").get("npu", {}))
        else:
            doc = base.model_dump()
        nested: dict[str, Any] = {}
        for path, value in self.changes.items():
            keys = path.split(".")
            if not all(keys):
                raise ConfigError(f"{field}.{path}", "expected a dotted path into [npu]", value)
            table = nested
            for key in keys[:-1]:
                table = table.setdefault(key, {})
                if not isinstance(table, dict):
                    raise ConfigError(f"{field}.{path}", "changes a value twice", value)
            table[keys[-1]] = value
        try:
            return NPUConfig.model_validate(merge_documents(doc, nested))
        except ValidationError as exc:
            raise config_error_from(exc, NPUConfig, field) from None


def _span(item: int | str) -> tuple[int, int]:
    """``3`` -> (3, 3); ``"4-7"`` -> (4, 7) (FieldRuleError for anything else)."""
    if isinstance(item, bool):
        raise FieldRuleError("", "expected a rank or a range like 4-7", item)
    if isinstance(item, int):
        if item < 0:
            raise FieldRuleError("", "ranks must be >= 0", item)
        first = last = item
    else:
        match = _RANGE.match(item) if len(item) <= 100 else None
        if match is None:
            raise FieldRuleError("", "expected a rank or a range like 4-7", shorten(item, 60))
        if max(len(match.group(1)), len(match.group(2) or "")) > 10:
            raise FieldRuleError("", f"ranks must be below {MAX_NPUS} (2**32, MAX_NPUS)", item)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
    if last >= MAX_NPUS:  # checked before any range is expanded
        raise FieldRuleError("", f"ranks must be below {MAX_NPUS} (2**32, MAX_NPUS)", item)
    if last < first:
        raise FieldRuleError("", "a range's last rank must not be below its first", item)
    return first, last


def variation_problem(
    stragglers: list[Straggler],
    spread: ComputeSpread | None,
    links: list[LinkChange],
    npu_types: list[NpuType] | None = None,
) -> str | None:
    """The option that needs exact mode (None when nothing varies)."""
    if stragglers:
        return "stragglers"
    if spread is not None:
        return "compute_spread"
    if links:
        return "links"
    if npu_types:
        return "npu_types"
    return None


@dataclass(frozen=True)
class Variation:
    """Everything that makes ranks or links differ (empty: a symmetric platform)."""

    stragglers: tuple[Straggler, ...] = ()
    compute_spread: ComputeSpread | None = None
    links: tuple[LinkChange, ...] = ()
    npu_types: tuple[NpuType, ...] = ()

    def __bool__(self) -> bool:
        return (
            variation_problem(
                list(self.stragglers),
                self.compute_spread,
                list(self.links),
                list(self.npu_types),
            )
            is not None
        )

    def run_options(self) -> dict[str, Any]:
        """The run options (:class:`~acesim.config.experiment.RunOptions`) that say it."""
        return {
            "stragglers": list(self.stragglers),
            "compute_spread": self.compute_spread,
            "links": list(self.links),
            "npu_types": list(self.npu_types),
        }


def placement_problem(value: Any) -> str | None:
    """Why ``value`` is not a list of distinct NPU positions (None when it is one); the count
    and range are checked against the platform by :func:`check_placement`."""
    if not isinstance(value, list):
        return "must be a list of NPU positions (a permutation of 0..n-1)"
    seen: set[int] = set()
    for position in value:
        if isinstance(position, bool) or not isinstance(position, int):
            return f"must list integer NPU positions, got {position!r}"
        if position < 0:
            return f"must list NPU positions >= 0, got {position}"
        if position in seen:
            return f"must be a permutation (each NPU once), {position} repeats"
        seen.add(position)
    return None


def check_placement(placement: list[int] | None, npus: int, field: str = "run.placement") -> None:
    """ConfigError naming ``field`` unless ``placement`` is a permutation of ``0..npus-1``
    (None: no placement)."""
    if placement is None:
        return
    problem = placement_problem(placement)
    if problem is not None:
        raise ConfigError(field, problem, placement)
    if len(placement) != npus:
        raise ConfigError(
            field,
            f"must place every one of the platform's {npus} NPUs once (a permutation of "
            f"0..{npus - 1}), got {len(placement)} positions",
        )
    high = max(placement)
    if high >= npus:
        raise ConfigError(
            field, f"must list NPU positions 0..{npus - 1} (the platform's {npus} NPUs)", high
        )
