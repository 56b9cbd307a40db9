"""One GEMM and one collective on an NPU: each alone, back to back (serial) and overlapped
(the makespan), and what each slows the other by -- the model behind ``acesim overlap`` and
the validation corpus's overlap rows. Assumptions are those of
:func:`~acesim.runs.collective.simulate_collective` with concurrent kernels: the GEMM runs on
the compute stream from time 0 and the collective is issued ``collective_at`` s later."""

from __future__ import annotations

from typing import Any

from ..hardware.kernels import Gemm
from .collective import simulate_collective

__all__ = ["overlap"]


def overlap(
    cfg: Any,
    gemm: Gemm,
    op: str,
    size: float,
    endpoint: str,
    host_copy: tuple[float, str] | None = None,
    collective_at: float = 0.0,
    *,
    tuner_check: bool = True,
) -> dict[str, Any]:
    """The GEMM and the collective on ``cfg`` with ``endpoint`` (and optionally a host-device
    copy ``(bytes, direction)`` on the copy engines): each alone, serial (their sum) and
    overlapped (all started together, or the collective ``collective_at`` seconds after the
    GEMM: the makespan), and each one's slowdown (the collective's from its issue): times in
    s, ``size`` in bytes. ``tuner_check``: as :func:`~acesim.runs.collective.simulate_collective`'s
    (False skips simulating the tuner's other candidates, which changes no figure here)."""
    cfg.npu.require_matrix(gemm.dtype, "--gemm")
    result = simulate_collective(
        cfg,
        op,
        size,
        endpoint=endpoint,
        compute_kernels=[gemm],
        host_copy=host_copy,
        collective_at=collective_at,
        tuner_check=tuner_check,
    )
    info = result.compute
    assert info is not None
    gemm_alone = info["kernel_time_alone"]
    coll_alone = info["collective_time_alone"]
    row: dict[str, Any] = {
        "endpoint": endpoint,
        "gemm_time_alone": gemm_alone,
        "collective_time_alone": coll_alone,
        "serial_time": gemm_alone + coll_alone,
        "overlapped_time": info["end_time"],
        "gemm_time": info["kernel_time"],
        "collective_time": result.time,
        "gemm_slowdown": info["kernel_slowdown"],
        "collective_slowdown": info["collective_slowdown"],
    }
    if host_copy is not None:
        row["serial_time"] += info["host_copy_time_alone"]
        row["overlapped_time"] = max(row["overlapped_time"], info["host_copy_time"])
        for key in ("host_copy_time_alone", "host_copy_time", "host_copy_slowdown"):
            row[key] = info[key]
    return row
