"""The collective endpoint protocol: what executes the local part of collectives at an NPU.

The collective runtime (:mod:`acesim.network.collective`) asks the endpoint, at every level of a
collective, what that level costs at a rank:

* per collective: ``collective_started`` / ``collective_finished`` (hold compute units for the
  whole collective, as NCCL's persistent kernels do; told the algorithms of its phases, since
  an NVLS kernel holds a different number of units than a ring kernel, and the units of a
  collective that brings its own SM budget: DeepEP's expert-parallel kernels);
* per chunk: ``chunk_begin`` / ``chunk_end`` (stage the chunk through an SRAM, read it from HBM
  once and write the result once) and ``max_chunk_bytes`` (split chunks that do not fit);
* per phase: ``phase_begin`` (a chunk is about to enter a phase, or has left its last: a
  streaming engine moves it between SRAM partitions, one per phase);
* per step: ``step_begin`` / ``step_end`` (hold compute units, or wait for a setup latency,
  while one step of one chunk runs: a reduction on SMs beside a copy engine, an NVLS step);
  and ``shape_phases``, once per collective: how the endpoint issues the planned steps (a copy
  engine splits a direct step into waves of copies, or issues it as one batch in a common
  peer order);
* per network byte: ``link_efficiency`` (the payload fraction of the links for its messages,
  where it is not the collective protocol's), ``message_demand`` (HBM bytes, engine ALU/DMA
  throughput, comm-unit throughput consumed per byte sent; ``budget_demand`` for a collective
  on an SM budget of its own, where it differs), and how messages share HBM:
  ``hbm_parallelism`` (the memory-level parallelism, in compute units, of the kernel or engine
  that moves them, under ``npu.hbm_arbitration = "mlp"``) or ``message_weight`` (a
  dominant-resource-fair weight).

And, for the energy model (:mod:`acesim.hardware.power`), ``meters``: the engine resources whose
``used`` integrals count the endpoint's own work at a rank (reduction FLOPs of its kernels, an
engine's ALU and DMA bytes). Counting changes no timing: they are resources its messages demand
anyway.

The base class costs nothing: it is the ``ideal`` endpoint. Endpoint kinds live in
:mod:`acesim.hardware.endpoints` and are registered there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from types import MappingProxyType

from ..engine import Resource
from .algorithms import ALLTOALL, GATHER, REDUCE
from .plan import Phase

__all__ = [
    "ACE_ALU",
    "ACE_DMA",
    "Endpoint",
    "METERS",
    "REDUCTION_FLOPS",
    "SM_FREE_STEP_KINDS",
    "SM_WAIT",
]

#: What an endpoint's meters count (:meth:`Endpoint.meters`): FLOPs of its collective kernels'
#: reductions on the FP32 vector units; bytes an offload engine's ALUs reduced; bytes its DMA
#: moved between HBM and its SRAM.
REDUCTION_FLOPS = "reduction_flops"
ACE_ALU = "ace_alu"
ACE_DMA = "ace_dma"
METERS = (REDUCTION_FLOPS, ACE_ALU, ACE_DMA)

#: what binds communication while its kernel waits for units a compute kernel's blocks hold
#: (:meth:`Endpoint.kernel_units`; the bound listeners hear it as a message's bound)
SM_WAIT = "SMs held by a compute kernel's blocks"

#: The step kinds an engine that is not an SM kernel runs: point-to-point reduce, gather and
#: all-to-all steps (not the switch's multimem load-reduce and multicast store).
SM_FREE_STEP_KINDS = frozenset({REDUCE, GATHER, ALLTOALL})


class Endpoint:
    """What executes the local part of collectives. The default costs nothing."""

    name = "ideal"
    #: max-min weight of this endpoint's message activities against compute kernels
    message_weight = 1.0
    #: the step kinds it can run (None: every kind); the tuner offers only algorithms whose
    #: steps it can run (a copy engine or ACE cannot issue NVLS multimem operations)
    step_kinds: frozenset[str] | None = None
    #: per operation, the algorithm this endpoint runs wherever it can (the ``nvls`` kind's
    #: in-switch all-reduce); the tuner chooses for the others
    preferred_algorithms: Mapping[str, str] = MappingProxyType({})

    def hbm_parallelism(self, rank: int) -> tuple[Resource, float] | None:
        """The HBM resource the rank's messages draw on and the memory-level parallelism (in
        compute units' worth of requests in flight) they share it with, under MLP
        arbitration; None: each message weighs ``message_weight`` by dominant share."""
        return None

    def demand_epoch(self) -> int:
        """A number that changes whenever :meth:`message_demand` may answer differently for a
        rank and kind than before (the collective runtime keeps each message demand it made
        until then); the base class's demands never change."""
        return 0

    def message_demand(self, rank: int, kind: str) -> dict[Resource, float]:
        """Resources consumed per network byte sent in a step of ``kind`` at ``rank``
        (``kind``: a step kind of :mod:`acesim.network.algorithms`)."""
        return {}

    def budget_demand(self, rank: int, kind: str, units: int) -> dict[Resource, float] | None:
        """As :meth:`message_demand`, for a collective whose kernels hold ``units`` compute
        units of their own (an SM budget); None: the same as :meth:`message_demand` (an
        endpoint whose collectives are no compute kernels)."""
        return None

    def collective_message_demand(
        self, rank: int, kind: str, units: int | None = None
    ) -> dict[Resource, float]:
        """Per network byte, what a message of a collective (on ``units``, if it has a
        budget) consumes (:meth:`message_demand`, :meth:`budget_demand`)."""
        if units is not None:
            budget = self.budget_demand(rank, kind, units)
            if budget is not None:
                return budget
        return self.message_demand(rank, kind)

    def local_copy_demand(self, rank: int, kind: str) -> dict[Resource, float] | None:
        """Resources consumed per byte of the local copy a direct (``all``) step of ``kind``
        makes at ``rank`` beside its messages: the NPU's own piece copied within its memory
        (a copy-engine library puts it in the same batch as the peer copies, and the step
        ends when it is done too); None: the step makes no local copy (the default)."""
        return None

    def link_efficiency(self, kind: str) -> float | None:
        """The payload fraction of the links for this endpoint's messages in a step of
        ``kind`` (a DMA engine's writes carry no collective protocol's overhead); None: the
        dimension's own (``efficiency``, or ``collective.protocol_efficiency``). A property
        of the endpoint: the collective runtime asks once per kind."""
        return None

    def shape_phases(self, phases: Sequence[Phase]) -> list[Phase]:
        """The phases as this endpoint issues them (default: as planned). Called once per
        collective, after the algorithm and protocol are chosen."""
        return list(phases)

    def step_begin(
        self, rank: int, kind: str, proceed: Callable[[], None], messages: int = 1
    ) -> None:
        """A step of ``kind`` sending ``messages`` messages is about to send at ``rank``; call
        ``proceed`` when it may (after a setup latency, or once the compute units it needs are
        held)."""
        proceed()

    def step_end(self, rank: int, kind: str) -> None:
        """The step of ``kind`` that ``step_begin`` admitted has completed at ``rank``."""

    def chunk_begin(
        self, rank: int, in_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        """A chunk enters the collective at ``rank``: ``in_bytes`` of input, at most
        ``footprint`` bytes live at once. Call ``proceed`` when it may start its phases."""
        proceed()

    def chunk_end(
        self, rank: int, out_bytes: float, footprint: float, proceed: Callable[[], None]
    ) -> None:
        """A chunk left its last phase at ``rank`` with ``out_bytes`` of result; call
        ``proceed`` once it is stored."""
        proceed()

    def phase_begin(
        self,
        rank: int,
        chunk: Hashable,
        index: int,
        phases: Sequence[Phase],
        io: tuple[float, float, float],
        proceed: Callable[[], None],
    ) -> None:
        """``chunk`` (the same key in all its calls) is about to enter ``phases[index]`` at
        ``rank``, or, with ``index == len(phases)``, has left its last phase (``chunk_end``
        follows). ``io``: the chunk's (input, output, footprint) bytes. Call ``proceed`` when
        it may go on (before it queues for the phase's dimension)."""
        proceed()

    def max_chunk_bytes(self) -> float | None:
        """Largest chunk the endpoint handles at once (bytes); larger chunks are split."""
        return None

    def collective_started(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> None:
        """A collective whose phases run ``algorithms`` (its kernels on ``units`` compute
        units of their own, if given) became active at ``rank``."""

    def collective_finished(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> None:
        """A collective whose phases run ``algorithms`` finished at ``rank``."""

    def meters(self, rank: int) -> Mapping[str, Sequence[Resource]]:
        """The resources whose ``used`` integrals count this endpoint's work at ``rank``, by
        what they count (one of :data:`METERS`); the base class does no work of its own."""
        return {}

    def kernel_units(
        self, rank: int, algorithms: frozenset[str] = frozenset(), units: int | None = None
    ) -> tuple[int, str] | None:
        """The compute units a collective's kernel (arguments as :meth:`collective_started`'s)
        takes from ``rank``'s pool while it is active there, and how it gets them while a
        compute kernel's blocks hold them (``fifo``, ``priority`` or ``immediate``: an NPU's
        ``sm_wait``); None: it takes none as it starts (none at all, or held for the run)."""
        return None

    def start_delay(self, rank: int) -> float:
        """How long the collective that just started at ``rank`` (``collective_started``)
        waits before its chunks may start, s: an SM kernel's wait for the compute units a
        running compute kernel's blocks hold (0: none)."""
        return 0.0
