"""One run of collectives issued together on a platform, and every figure it leaves: what the
tests comparing a collective fast path with the general step path (folds, the mirror path)
compare, bit for bit."""

from __future__ import annotations

from acesim.config import SystemConfig
from acesim.hardware.kernels import Stream
from acesim.hardware.platform import Platform


def run_figures(
    system: SystemConfig, work: list[tuple[str, float]], kernel_at: float | None = None
) -> dict[str, object]:
    """Issue ``work`` ((op, bytes) pairs) together, and a memory-bound kernel on every NPU at
    ``kernel_at`` s; every figure the run leaves (instants, byte counts, resource integrals and
    peaks, events)."""
    platform = Platform(system)
    engine = platform.engine
    colls = [platform.collectives.issue(op, size) for op, size in work]
    ended: list[float] = []
    if kernel_at is not None:

        def launch() -> None:
            for npu in platform.npus:
                npu.run_kernels(
                    [Stream(read_bytes=8e6, write_bytes=8e6)],
                    lambda: ended.append(engine.now),
                )

        engine.schedule(kernel_at, launch)
    end = engine.run()
    engine.sync()
    return {
        "end": end,
        "durations": [c.duration for c in colls],
        "sent": [c.bytes_sent for c in colls],
        "received": [c.bytes_received for c in colls],
        "per_dim": [dict(c.bytes_sent_per_dim) for c in colls],
        "kernel_end": ended,
        "used": {r.name: r.used for r in engine.resources},
        "peak": {r.name: r.peak for r in engine.resources},
        "events": engine.events_processed,
    }
