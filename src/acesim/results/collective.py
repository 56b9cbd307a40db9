"""The figures of one simulated collective (nccl-tests conventions).

``algbw = size / time``; ``busbw = algbw * factor`` with factor ``2(n-1)/n`` for all-reduce and
``(n-1)/n`` for reduce-scatter, all-gather and all-to-all, ``n`` the NPUs in the group.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..network.ops import COLLECTIVE_OPS
from ..version import __version__


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``n`` NPUs (the op's registry entry)."""
    return COLLECTIVE_OPS.get(op, "op").bus_factor(n)


@dataclass(frozen=True)
class CollectiveResult:
    """One collective's outcome. Times in s, sizes in bytes, bandwidths in B/s."""

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_pandas(self) -> Any:
        """One row (per-dimension bytes and compute figures as ``name.key`` columns)."""
        import pandas as pd

        return pd.json_normalize(self.to_dict(), sep=".")
