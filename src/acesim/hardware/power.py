"""The energy of a run: what each NPU, link, switch and NIC spent, from what the run did.

Model
-----
The simulation keeps counters of everything it moved and computed (:class:`Meters`, read from
the engine's resource integrals and the NPU's own counters; reading them changes no timing).
Over a window of ``T`` seconds, one NPU's board spends (coefficients: ``[npu.power]``,
:class:`acesim.config.power.NPUPowerConfig`; each preset's ``[sources]`` says where each
value comes from, or why it is assumed)

* ``idle x T``: the board with nothing running (clocks up, memory refreshed, links trained);
* ``unit_active`` per compute unit per second it runs a kernel: the unit-s of compute kernels
  (the units they occupy: a kernel of fewer blocks than free units occupies its blocks') and
  the unit-s collective kernels hold (SM collectives: the comm units, while held);
* ``matrix_flop_energy[dtype]`` per FLOP of matrix math in that dtype, ``vector_flop_energy``
  per FP32 FLOP on the vector units (memory-bound kernels' math, collective kernels'
  reductions);
* ``hbm_energy`` per HBM byte, split by cause: compute kernels, communication (collective
  kernels, DMA engines, ACE), host-device copies;
* ``link_energy`` (the dimension's ``power`` table) per wire byte the NPU sends on a
  dimension whose ports are on the board (NVLink, a torus link): both ends of the link. An
  NPU of the collectives modelled receives as many bytes as it sends, so charging each sent
  byte both ends (its transmitter and, for the equal bytes it receives, its receiver) is
  each port's own energy;
* ``copy_engine_energy`` per byte its DMA copy engines move, ``host_link_energy`` per byte
  over the host link: host copies' bytes and, on a network dimension that models the GPU-NIC
  PCIe path (``pcie_bandwidth``), the GPUDirect RDMA bytes the NIC reads from and writes to
  the GPU, which cross the GPU's own PCIe link to its switch (a link apart from the NIC's,
  whose crossing ``nic_energy`` counts);
* an ACE endpoint: ``ace_static x T``, ``ace_alu_energy`` per byte its ALUs reduce and
  ``ace_sram_energy`` per SRAM byte accessed: its DMA bytes (each written into or read out of
  SRAM once), two per network byte sent (read from SRAM to send, and for the equal bytes
  received, written into SRAM) and three per reduced byte (two operands read, the sum
  written).

The fabric, per NPU (the dimension's ``power`` table, :class:`acesim.config.power
.LinkPowerConfig`): a switch dimension's switches ``switch_static x T`` (their power over the
NPUs they serve) plus, per byte the NPU sends through them, ``link_energy`` (the switch's two
ports a byte crosses) and ``switch_energy`` (its core); a dimension of NICs ``nic_static x
T`` per NIC the NPU has (``links_per_npu / npus_per_link``) plus, per byte sent, both ends'
``link_energy`` and ``2 x nic_energy`` (its NIC's transmit and, for the bytes it receives,
its receive). Where NICs carry a dimension, its link PHYs are theirs, not the board's.

Average power is the board's energy over ``T``. A run whose average board power exceeds the
NPU's ``tdp`` says so (:attr:`Energy.over_limit`): real NPUs clock down there, which this
model does not (no throttling model: its times are those at full clock).

Limits (the energies are the model's, from sourced or assumed coefficients; none is fitted
to a power measurement): on-chip traffic (L2, shared memory) is in the per-FLOP energies, not
counted per byte; an idle link's or switch port's power is in ``idle`` / ``switch_static``;
link bytes are the link capacity messages consumed (protocol overhead included, and the
incast loss model's extra weight too); a message crossing a leaf/spine fabric is charged one
switch; host copies still running at the end of a window count as communication HBM bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..config.power import LinkPowerConfig, NPUPowerConfig
from ..config.system import DimensionConfig
from ..network.endpoint import ACE_ALU, ACE_DMA, METERS, REDUCTION_FLOPS
from .kernel_model import VECTOR
from .platform import Platform

__all__ = ["Energy", "Meters", "energy_of", "read_meters"]


@dataclass
class Meters:
    """Cumulative counters of one simulated NPU (s, FLOP, unit-s, bytes).

    Attributes:
        time: the instant (s).
        flops: compute kernels' FLOPs by what they ran on (a matrix dtype, ``vector``).
        compute_unit_s: unit-s of compute units running compute kernels.
        comm_unit_s: unit-s of compute units held by collective kernels.
        hbm_compute, hbm_comm, hbm_host: HBM bytes of compute kernels, communication,
            host-device copies.
        sent: wire bytes sent, per network dimension: what messages took of its egress
            (payload capacity) over the dimension's payload efficiency.
        copy_engine: bytes the DMA copy engines moved.
        host_link: bytes over the host link, both directions.
        endpoint: the endpoint's meters (:data:`acesim.network.endpoint.METERS`).
    """

    time: float
    flops: dict[str, float]
    compute_unit_s: float
    comm_unit_s: float
    hbm_compute: float
    hbm_comm: float
    hbm_host: float
    sent: list[float]
    copy_engine: float
    host_link: float
    endpoint: dict[str, float] = field(default_factory=dict)

    def plus(self, other: Meters) -> Meters:
        """These counters with ``other``'s counted too (what ``other`` counted elsewhere: a
        composed run's passes, :mod:`acesim.training.compose`); the instant stays this one."""
        return Meters(
            time=self.time,
            flops=_summed(self.flops, other.flops),
            compute_unit_s=self.compute_unit_s + other.compute_unit_s,
            comm_unit_s=self.comm_unit_s + other.comm_unit_s,
            hbm_compute=self.hbm_compute + other.hbm_compute,
            hbm_comm=self.hbm_comm + other.hbm_comm,
            hbm_host=self.hbm_host + other.hbm_host,
            sent=[a + b for a, b in zip(self.sent, other.sent, strict=True)],
            copy_engine=self.copy_engine + other.copy_engine,
            host_link=self.host_link + other.host_link,
            endpoint=_summed(self.endpoint, other.endpoint),
        )

    def copy(self) -> Meters:
        """These counters, in containers of their own (:meth:`add` to it leaves this one)."""
        return replace(
            self, flops=dict(self.flops), sent=list(self.sent), endpoint=dict(self.endpoint)
        )

    def add(self, other: Meters) -> None:
        """Count ``other``'s counters too, in place: what :meth:`plus` returns, the same
        floats (many passes' counters added one after another without a Meters each)."""
        _add(self.flops, other.flops)
        self.compute_unit_s += other.compute_unit_s
        self.comm_unit_s += other.comm_unit_s
        self.hbm_compute += other.hbm_compute
        self.hbm_comm += other.hbm_comm
        self.hbm_host += other.hbm_host
        sent = self.sent
        if len(sent) != len(other.sent):
            raise ValueError("meters of different networks")
        for i, b in enumerate(other.sent):
            sent[i] += b
        self.copy_engine += other.copy_engine
        self.host_link += other.host_link
        _add(self.endpoint, other.endpoint)

    def since(self, earlier: Meters) -> Meters:
        """What was counted from ``earlier`` to this instant."""
        return Meters(
            time=self.time - earlier.time,
            flops={k: v - earlier.flops.get(k, 0.0) for k, v in self.flops.items()},
            compute_unit_s=self.compute_unit_s - earlier.compute_unit_s,
            comm_unit_s=self.comm_unit_s - earlier.comm_unit_s,
            hbm_compute=self.hbm_compute - earlier.hbm_compute,
            hbm_comm=self.hbm_comm - earlier.hbm_comm,
            hbm_host=self.hbm_host - earlier.hbm_host,
            sent=[a - b for a, b in zip(self.sent, earlier.sent, strict=True)],
            copy_engine=self.copy_engine - earlier.copy_engine,
            host_link=self.host_link - earlier.host_link,
            endpoint={k: v - earlier.endpoint.get(k, 0.0) for k, v in self.endpoint.items()},
        )


def _summed(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Counters by name summed (``a``'s names first, in order, then ``b``'s new ones)."""
    keys = [*a, *(k for k in b if k not in a)]
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in keys}


def _add(a: dict[str, float], b: dict[str, float]) -> None:
    """``a`` made :func:`_summed` of ``a`` and ``b``, in place (the same names in the same
    order, the same floats)."""
    if a.keys() == b.keys():  # (each sum on its own: the order of the names is a's)
        for k, v in b.items():
            a[k] += v
        return
    for k in [*a, *(k for k in b if k not in a)]:
        a[k] = a.get(k, 0.0) + b.get(k, 0.0)


def read_meters(platform: Platform, index: int = 0) -> Meters:
    """The counters of simulated NPU ``index`` now (brings the engine's integrals up to now;
    changes nothing the simulation decides)."""
    engine = platform.engine
    engine.sync()
    npu = platform.npus[index]
    hbm_used = sum(r.used for r in npu.hbm_resources)
    # what the resource integrates weighs compute kernels' writes 1 + write_penalty (a time
    # cost); their bytes are counted on their own, and the rest is communication's bytes
    compute = npu.compute_hbm_bytes_now()
    host = npu.host_hbm_bytes
    comm = max(hbm_used - npu.compute_hbm_demand_now() - host, 0.0)
    meters = platform.endpoint.meters(index)
    egress = platform.collectives.egress[index]
    return Meters(
        time=engine.now,
        flops=npu.flops_by_math_now(),
        compute_unit_s=npu.compute_unit_seconds_now(),
        comm_unit_s=npu.units.held_time,
        hbm_compute=compute,
        hbm_comm=comm if comm > 1e-9 * max(hbm_used, 1.0) else 0.0,
        hbm_host=host,
        sent=[
            r.used / d.efficiency for r, d in zip(egress, platform.topology.dimensions, strict=True)
        ],
        copy_engine=npu.copy_engines.used if npu.copy_engines is not None else 0.0,
        host_link=sum(r.used for r in npu.host_links.values()),
        endpoint={k: sum(r.used for r in meters[k]) for k in METERS if k in meters},
    )


@dataclass
class Energy:
    """One NPU's energy over a window (J), by component, and what it says about power.

    Attributes:
        seconds: the window (s).
        board: energy of the NPU's board by component (J).
        fabric: its share of the switches and NICs by component (J).
        tdp: the NPU's power limit (W).
        notes: what was not counted, and a power limit exceeded.
    """

    seconds: float
    board: dict[str, float]
    fabric: dict[str, float]
    tdp: float
    notes: list[str] = field(default_factory=list)

    @property
    def board_energy(self) -> float:
        """The board's energy (J)."""
        return sum(self.board.values())

    @property
    def fabric_energy(self) -> float:
        """Its share of the switches' and NICs' energy (J)."""
        return sum(self.fabric.values())

    @property
    def total(self) -> float:
        """Board and fabric share (J)."""
        return self.board_energy + self.fabric_energy

    @property
    def average_power(self) -> float:
        """The board's average power over the window (W)."""
        return self.board_energy / self.seconds if self.seconds > 0 else 0.0

    @property
    def over_limit(self) -> bool:
        """The board's average power exceeds its power limit (TDP)."""
        return self.average_power > self.tdp


def energy_of(
    window: Meters, power: NPUPowerConfig, dimensions: Sequence[DimensionConfig]
) -> Energy:
    """One NPU's :class:`Energy` over ``window`` (counters of the window: :meth:`Meters.since`)
    with the NPU's coefficients ``power`` and the network's ``dimensions`` (their ``power``
    tables). An ACE endpoint (its meters among the window's) pays its static power whether
    busy or not."""
    seconds = window.time
    board = _board(window, power)
    if ACE_ALU in window.endpoint:
        _ace(board, window, power)
    fabric: dict[str, float] = {}
    notes: list[str] = []
    for index, dim in enumerate(dimensions):
        sent = window.sent[index] if index < len(window.sent) else 0.0
        _dimension(board, fabric, notes, dim, index, sent, seconds)
    energy = Energy(seconds=seconds, board=board, fabric=fabric, tdp=power.tdp, notes=notes)
    if energy.over_limit:
        energy.notes.append(
            f"average board power {energy.average_power:.0f} W exceeds the NPU's power limit "
            f"{power.tdp:.0f} W: the NPU would clock down (not modelled: times are at full "
            "clock)"
        )
    return energy


def _board(window: Meters, power: NPUPowerConfig) -> dict[str, float]:
    """The board's components but ACE's and the links'."""
    board = {
        "idle": power.idle * window.time,
        "compute units": power.unit_active * window.compute_unit_s,
    }
    for math, flops in sorted(window.flops.items()):
        if not math or flops == 0:
            continue  # measured kernels: no FLOPs
        if math == VECTOR:
            board["vector math"] = power.vector_flop_energy * flops
        else:
            board[f"matrix math {math}"] = power.matrix_flop_energy[math] * flops
    board["HBM (compute)"] = power.hbm_energy * window.hbm_compute
    board["HBM (communication)"] = power.hbm_energy * window.hbm_comm
    if window.hbm_host:
        board["HBM (host copies)"] = power.hbm_energy * window.hbm_host
    if window.comm_unit_s:
        board["comm units"] = power.unit_active * window.comm_unit_s
    reductions = window.endpoint.get(REDUCTION_FLOPS, 0.0)
    if reductions:
        board["collective reductions"] = power.vector_flop_energy * reductions
    if window.copy_engine:
        board["copy engines"] = power.copy_engine_energy * window.copy_engine
    if window.host_link:
        board["host link"] = power.host_link_energy * window.host_link
    return board


def _ace(board: dict[str, float], window: Meters, power: NPUPowerConfig) -> None:
    """ACE's static power, ALU and SRAM (see the module docstring)."""
    alu = window.endpoint.get(ACE_ALU, 0.0)
    sram = window.endpoint.get(ACE_DMA, 0.0) + 2 * sum(window.sent) + 3 * alu
    board["ACE static"] = power.ace_static * window.time
    board["ACE SRAM"] = power.ace_sram_energy * sram
    board["ACE ALU"] = power.ace_alu_energy * alu


def _dimension(
    board: dict[str, float],
    fabric: dict[str, float],
    notes: list[str],
    dim: DimensionConfig,
    index: int,
    sent: float,
    seconds: float,
) -> None:
    """One dimension's links, switches and NICs (see the module docstring)."""
    name = dim.name or f"dimension {index}"
    table: LinkPowerConfig | None = dim.power
    if table is None:
        if sent > 0:
            notes.append(f"{name}: no power table; its links, switches and NICs not counted")
        return
    links = table.link_energy * sent
    if table.nic_static is not None and table.nic_energy is not None:
        nics = dim.links_per_npu / dim.npus_per_link
        fabric[f"NIC {name}"] = (
            table.nic_static * nics * seconds + links + 2 * table.nic_energy * sent
        )
    else:
        board[f"links {name}"] = links
    if table.switch_static is not None and table.switch_energy is not None:
        fabric[f"switch {name}"] = (
            table.switch_static * seconds + (table.link_energy + table.switch_energy) * sent
        )
