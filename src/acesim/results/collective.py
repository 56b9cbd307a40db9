"""The figures of one simulated collective (nccl-tests conventions).

``algbw = size / time``; ``busbw = algbw * factor`` with factor ``2(n-1)/n`` for all-reduce and
``(n-1)/n`` for reduce-scatter, all-gather and all-to-all, ``n`` the NPUs in the group.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ..network.ops import COLLECTIVE_OPS
from ..units import format_rate, format_size, format_time
from ..version import __version__
from .protocol import Table, system_title, without

#: Inputs echoed by a collective's result: configuration, not figures (sweep rows leave them
#: out).
_ECHO = ("op", "size", "endpoint", "mode", "provenance")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``n`` NPUs (the op's registry entry)."""
    return COLLECTIVE_OPS.get(op, "op").bus_factor(n)


@dataclass(frozen=True)
class CollectiveResult:
    """One collective's outcome (the :class:`~acesim.results.protocol.Result` protocol).
    Times in s, sizes in bytes, bandwidths in B/s."""

    kind: ClassVar[str] = "collective"
    gains: ClassVar[dict[str, str]] = {}

    op: str
    size: float
    npus: int
    time: float
    algbw: float
    busbw: float
    endpoint: str
    mode: str
    bytes_sent_per_npu: float
    bytes_received_per_npu: float
    hbm_bytes_per_npu: float
    network_bandwidth: float
    hbm_bandwidth: float
    per_dimension_bytes: dict[str, float] = field(default_factory=dict)
    compute: dict[str, float] | None = None
    system: str = ""
    shape: list[int] = field(default_factory=list)
    group_size: int = 0
    #: the NCCL protocol the collective ran (None: the system configures no protocols)
    protocol: str | None = None
    #: the algorithm the tuner chose among collective.choices (None: no choice configured)
    algorithm: str | None = None
    #: the most compute units (SMs: NCCL channels, one thread block each) the collective held
    #: at once on NPU 0, as simulated
    comm_units: float = 0.0
    #: what bound NPU 0's part of the collective, second by second (labels of
    #: :func:`acesim.training.bounds.collective_bounds`: a link, HBM, ACE DMA, ACE SRAM, copy
    #: engines, comm units, latency and waiting); ``bound`` is the largest
    bound: str = ""
    bound_by: dict[str, float] = field(default_factory=dict)
    #: where the tuner chose one algorithm and another candidate simulates faster: both, and
    #: a note (:func:`acesim.network.tuner_check.check_choice`); None otherwise
    tuner: dict[str, Any] | None = None
    #: how the system was made (:meth:`acesim.config.provenance.Provenance.to_dict`)
    provenance: dict[str, Any] = field(default_factory=dict)
    version: str = __version__
    #: the strategy's reason (:func:`acesim.training.strategy.mode_note`; "" when none)
    mode_note: str = ""
    variant: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def figure(self) -> float:
        """The figure of merit: the collective's time (s)."""
        return self.time

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind
        return data

    def case(self) -> dict[str, Any]:
        """What the run was (operation, size, system, group, mode)."""
        data = asdict(self)
        keys = ("op", "size", "system", "shape", "npus", "group_size", "mode", "version")
        return {k: data[k] for k in keys}

    def metrics(self) -> dict[str, Any]:
        """The figures as a sweep row (the point's own inputs left out)."""
        return without(asdict(self), _ECHO)

    def describe(self) -> str:
        return (
            f"{self.op} of {format_size(self.size)} on "
            f"{system_title(self.system, self.provenance)}: {self.npus} NPUs, group "
            f"of {self.group_size}, {self.mode}"
        )

    def rows(self) -> list[tuple[str, str]]:
        """The headline figures as (metric, text) rows."""
        busy = self.bound_by.get(self.bound, 0.0) / self.time if self.time > 0 else 0.0
        return [
            ("time", format_time(self.time)),
            ("algbw", format_rate(self.algbw)),
            ("busbw", format_rate(self.busbw)),
            ("net bw", format_rate(self.network_bandwidth)),
            ("HBM bw (comm)", format_rate(self.hbm_bandwidth)),
            ("algorithm", self.algorithm or "-"),
            ("protocol", self.protocol or "-"),
            ("SMs", f"{self.comm_units:g}"),
            ("bound by", f"{self.bound} ({100 * busy:.0f}%)" if self.bound else "-"),
        ]

    def tables(self) -> list[Table]:
        return []

    def footnotes(self) -> list[str]:
        return [self.mode_note] if self.mode_note else []

    def to_pandas(self) -> Any:
        """One row (per-dimension bytes and compute figures as ``name.key`` columns)."""
        import pandas as pd

        return pd.json_normalize(self.to_dict(), sep=".")
