"""Small system documents for tests (ideal endpoint unless stated)."""

from __future__ import annotations

import os
from typing import Any

from acesim.config import SystemConfig, system_from_dict
from acesim.simulate import simulate_collective


def dim(
    kind: str,
    size: int,
    bandwidth: float = 100e9,
    latency: float = 1e-6,
    links: int = 1,
    switch_reduction: bool = False,
) -> dict[str, Any]:
    """One dimension; bandwidth in B/s per link per direction, latency in s
    (``switch_reduction``: a switch that reduces, for NVLS)."""
    out: dict[str, Any] = {
        "kind": kind,
        "size": size,
        "link_bandwidth": bandwidth,
        "link_latency": latency,
        "links_per_npu": links,
    }
    if switch_reduction:
        out["switch_reduction"] = True
    return out


def make_system(
    dims: list[dict[str, Any]], endpoint: str = "ideal", **collective: Any
) -> SystemConfig:
    """A system of ``dims`` with collective settings ``collective`` (chunks=1 unless given)."""
    collective.setdefault("chunks", 1)
    return system_from_dict(
        {
            "name": "test",
            "network": {"dimensions": dims},
            "collective": collective,
            "endpoint": {"kind": endpoint},
        }
    )


def examples(n: int) -> int:
    """Hypothesis ``max_examples``: ``n`` by default (the suite stays fast), scaled by the
    environment variable ``ACESIM_EXAMPLES_SCALE`` for a thorough local run."""
    return max(1, int(n * float(os.environ.get("ACESIM_EXAMPLES_SCALE", "1"))))


def ring_allreduce_finish(joins: list[float], step_delay: float, step_time: float) -> list[float]:
    """When a one-chunk ring all-reduce finishes at each rank, from when each joins (s): step
    ``s`` completes at rank ``j`` at ``C[j][s] = max(C[j][s-1], C[j-1][s-1] + a) + u``, with
    ``a = step_delay`` (latency plus endpoint delay, s) and ``u = step_time`` (a step's bytes
    over the link bandwidth, s), over ``2 (p - 1)`` steps."""
    done = list(joins)
    for _step in range(2 * (len(joins) - 1)):
        done = [max(done[j], done[j - 1] + step_delay) + step_time for j in range(len(joins))]
    return done


def simulate_as_configured(*args: Any, **kw: Any) -> Any:
    """``simulate_collective`` on the endpoint as configured: ``ideal`` is then the free
    endpoint on the case's own (forced) algorithm and pieces, the mechanism closed-form tests
    check, not the bound over every variant that ``acesim`` reports for it."""
    kw.setdefault("bound_variants", False)
    return simulate_collective(*args, **kw)
