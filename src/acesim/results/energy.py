"""The energy figures of a result: per iteration, per sample or token, average power, by part.

From the run's counters (:class:`acesim.hardware.power.Meters`) over the window the result
measures (a training run's measured iterations; an LLM run's whole run over its iterations),
the power model (:mod:`acesim.hardware.power`, which states the model and its limits) gives one
NPU's energy by component; this module puts it per iteration and per unit of work:

* ``per_iteration``: one NPU's board and its share of the switches and NICs, per iteration (J);
  ``board`` / ``fabric``: the same by component (J per iteration);
* ``idle`` / ``compute`` / ``communication``: the components grouped by what they serve (J
  per iteration; they sum to ``per_iteration``): the board's idle power; what compute kernels
  spend (their units, math and HBM bytes); the rest (collective kernels' units, reductions
  and HBM bytes, links, copy engines, ACE, switches, NICs, host copies);
* ``average_power``: the board's mean power over the window (W), against its
  ``power_limit`` (TDP): ``over_limit`` when above (the model does not throttle; see notes);
* ``per_sample`` (training graphs: the system's energy over the samples of an iteration,
  ``batch_per_npu`` per NPU) or ``per_token`` (LLM: over global batch x sequence) (J).

With several simulated NPUs (class or exact mode) the figures are means over them. A system
without ``[npu.power]`` has no energy model: its results carry ``energy = None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..config.power import NPUPowerConfig
from ..config.system import DimensionConfig
from ..hardware.platform import Platform
from ..hardware.power import Meters, energy_of, read_meters
from ..units import format_eng

__all__ = [
    "EnergyResult",
    "energy_result",
    "energy_rows",
    "energy_summary",
    "platform_energy",
    "run_energy",
    "run_windows",
    "split",
]

#: Board components of compute kernels (and every ``matrix math <dtype>``); ``idle`` is idle;
#: every other component serves communication (or host copies).
COMPUTE_PARTS = ("compute units", "vector math", "HBM (compute)")


@dataclass
class EnergyResult:
    """Energy of one NPU per iteration (J), its average power (W), and by component."""

    per_iteration: float
    board_per_iteration: float
    fabric_per_iteration: float
    idle: float
    compute: float
    communication: float
    average_power: float
    power_limit: float
    over_limit: bool
    board: dict[str, float] = field(default_factory=dict)
    fabric: dict[str, float] = field(default_factory=dict)
    per_sample: float | None = None
    per_token: float | None = None
    notes: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, float | bool | None]:
        """Flat scalars for tables and databases (``energy_`` prefixed)."""
        return {
            "energy_per_iteration": self.per_iteration,
            "energy_board": self.board_per_iteration,
            "energy_fabric": self.fabric_per_iteration,
            "energy_idle": self.idle,
            "energy_compute": self.compute,
            "energy_communication": self.communication,
            "energy_per_sample": self.per_sample,
            "energy_per_token": self.per_token,
            "average_power": self.average_power,
            "power_limit": self.power_limit,
            "over_power_limit": self.over_limit,
        }


def split(components: dict[str, float]) -> tuple[float, float, float]:
    """``(idle, compute, communication)`` sums of ``components`` (see the module)."""
    idle = compute = communication = 0.0
    for name, joules in components.items():
        if name == "idle":
            idle += joules
        elif name in COMPUTE_PARTS or name.startswith("matrix math"):
            compute += joules
        else:
            communication += joules
    return idle, compute, communication


def energy_result(
    windows: Sequence[Meters],
    powers: Sequence[NPUPowerConfig],
    dimensions: Sequence[DimensionConfig],
    iterations: int,
) -> EnergyResult:
    """The mean over simulated NPUs (``windows[i]`` counted on NPU ``i`` of coefficients
    ``powers[i]``) of their energy, per iteration of ``iterations`` in the window."""
    energies = [energy_of(w, p, dimensions) for w, p in zip(windows, powers, strict=True)]
    scale = 1.0 / (len(energies) * iterations)
    board = _mean([e.board for e in energies], scale)
    fabric = _mean([e.fabric for e in energies], scale)
    idle, compute, communication = split({**board, **fabric})
    power = sum(e.average_power for e in energies) / len(energies)
    limit = min(e.tdp for e in energies)
    notes = sorted({note for e in energies for note in e.notes if "power limit" not in note})
    over = [e for e in energies if e.over_limit]
    if over:
        worst = max(over, key=lambda e: e.average_power)
        notes.append(worst.notes[-1])
    board_total, fabric_total = sum(board.values()), sum(fabric.values())
    return EnergyResult(
        per_iteration=board_total + fabric_total,
        board_per_iteration=board_total,
        fabric_per_iteration=fabric_total,
        idle=idle,
        compute=compute,
        communication=communication,
        average_power=power,
        power_limit=limit,
        over_limit=bool(over),
        board=board,
        fabric=fabric,
        notes=notes,
    )


def _mean(parts: list[dict[str, float]], scale: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for name, joules in part.items():
            out[name] = out.get(name, 0.0) + joules * scale
    return out


def run_energy(
    platform: Platform, iterations: int, added: Mapping[int, Meters] | None = None
) -> EnergyResult | None:
    """The energy of a whole run on ``platform`` (every simulated NPU's counters from the
    start, now at its end, with what ``added`` holds for it: a composed run's passes
    simulated alone) per iteration of ``iterations``; None without ``[npu.power]``."""
    windows = run_windows(platform, added)
    return None if windows is None else platform_energy(platform, windows, iterations)


def run_windows(
    platform: Platform, added: Mapping[int, Meters] | None = None
) -> list[Meters] | None:
    """Every simulated NPU's counters of a whole run on ``platform``, with what ``added``
    holds for it (:func:`run_energy`'s), or None where an NPU has no ``[npu.power]``."""
    if any(npu.config.power is None for npu in platform.npus):
        return None
    windows = [read_meters(platform, i) for i in range(len(platform.npus))]
    if added:
        windows = [w.plus(added[i]) if i in added else w for i, w in enumerate(windows)]
    return windows


def platform_energy(platform: Platform, windows: Sequence[Meters], iterations: int) -> EnergyResult:
    """:func:`energy_result` of ``windows`` counted on ``platform``'s NPUs (each with its
    ``[npu.power]``; :func:`run_windows`) over ``iterations`` iterations."""
    powers = [npu.config.power for npu in platform.npus]
    dims = platform.system.network.dimensions
    return energy_result(windows, [p for p in powers if p is not None], dims, iterations)


def energy_rows(energy: EnergyResult | None) -> list[tuple[str, str]]:
    """Table rows of ``energy`` (the same rows for every result, so that results of one
    system line up in a comparison)."""
    if energy is None:
        return [("energy", "no power model ([npu.power])")]
    rows = [
        ("energy per iteration (GPU)", format_eng(energy.per_iteration, "J")),
        ("  idle/compute/comm", _shares(energy)),
        ("  switches and NICs", format_eng(energy.fabric_per_iteration, "J")),
    ]
    if energy.per_sample is not None:
        rows.append(("energy per sample", format_eng(energy.per_sample, "J")))
    if energy.per_token is not None:
        rows.append(("energy per token", format_eng(energy.per_token, "J")))
    over = " OVER" if energy.over_limit else ""
    rows.append(
        ("average power (GPU)", f"{energy.average_power:.0f} of {energy.power_limit:.0f} W{over}")
    )
    missing = [note.split(":")[0] for note in energy.notes if "no power table" in note]
    rows.append(("  not counted", ", ".join(missing) or "-"))
    return rows


def _shares(energy: EnergyResult) -> str:
    total = energy.per_iteration
    if total <= 0:
        return "-"
    parts = (energy.idle, energy.compute, energy.communication)
    return " / ".join(f"{100 * p / total:.0f}%" for p in parts)


def energy_summary(energy: EnergyResult | None) -> dict[str, float | bool | None] | None:
    """The figures a study's summary keeps of ``energy`` (J per iteration and GPU, W)."""
    if energy is None:
        return None
    return {
        "per_iteration": energy.per_iteration,
        "idle": energy.idle,
        "compute": energy.compute,
        "communication": energy.communication,
        "fabric": energy.fabric_per_iteration,
        "per_sample": energy.per_sample,
        "per_token": energy.per_token,
        "average_power": energy.average_power,
        "over_limit": energy.over_limit,
    }
