"""The unit of every metric acesim reports (what a stored number is in).

``s``, ``B``, ``B/s``, ``FLOP/s``, ``tokens/s``, ``J``, ``W``; ``1`` for a dimensionless
fraction (a utilisation, MFU, 0..1); ``x`` for a ratio (a slowdown, a speedup); ``units`` for
compute units; ``""`` for text and counts. Sweep databases record them per column, tables print
them, plots label axes with them.
"""

from __future__ import annotations

__all__ = ["metric_unit"]

_EXACT: dict[str, str] = {
    # training runs (acesim.results.run)
    "iteration_time": "s",
    "compute_time": "s",
    "compute_time_alone": "s",
    "compute_slowdown": "x",
    "exposed_comm": "s",
    "comm_time": "s",
    "net_util_mean": "1",
    "net_util_effective": "1",
    "hbm_bw_compute": "B/s",
    "hbm_bw_comm": "B/s",
    "comm_units_held": "units",
    "makespan": "s",
    "speedup": "x",
    # energy (acesim.results.energy)
    "average_power": "W",
    "power_limit": "W",
    "over_power_limit": "",
    "energy.average_power": "W",
    "energy.power_limit": "W",
    "energy.over_limit": "",
    "energy.notes": "",
    # collectives (acesim.results.collective)
    "size": "B",
    "time": "s",
    "algbw": "B/s",
    "busbw": "B/s",
    "bytes_sent_per_npu": "B",
    "bytes_received_per_npu": "B",
    "hbm_bytes_per_npu": "B",
    "network_bandwidth": "B/s",
    "hbm_bandwidth": "B/s",
    "npus": "",
    "group_size": "",
    "compute.kernel_time": "s",
    "compute.kernel_time_alone": "s",
    "compute.kernel_slowdown": "x",
    "compute.collective_time_alone": "s",
    "compute.collective_slowdown": "x",
    "compute.end_time": "s",
    # LLM runs (acesim.results.llm)
    "tokens_per_s_per_gpu": "tokens/s",
    "mfu": "1",
    "bubble_time": "s",
    "bubble_fraction": "1",
    "hbm_capacity": "B",
    "micro_batches": "",
    "memory_stage": "",
    "iterations": "",
    # sweep bookkeeping
    "wall_time": "s",
}
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("net_util_", "1"),
    ("energy_", "J"),
    ("energy.", "J"),
    ("per_dimension_bytes.", "B"),
    ("exposed.", "s"),
    ("memory.", "B"),
    ("run.", ""),
)


def metric_unit(name: str) -> str:
    """The unit of metric ``name`` (``""`` when it is text, a count or unknown)."""
    if name.startswith("result."):
        name = name[len("result.") :]
    if name in _EXACT:
        return _EXACT[name]
    for prefix, unit in _PREFIXES:
        if name.startswith(prefix):
            return unit
    return ""
