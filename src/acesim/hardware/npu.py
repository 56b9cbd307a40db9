"""The NPU: compute units and HBM, shared by compute kernels and collectives.

Model
-----
* A compute kernel is planned by :mod:`acesim.hardware.kernel_model` (tiles, waves, achievable
  fractions of the peaks, latency). It waits its latency, then runs as one fluid activity of
  work 1.0 demanding ``hbm_demand`` of HBM capacity per unit of work, its rate capped by its
  compute on the units it may use (``1 / (waves(u) * block time)``) and by what those units can
  draw from HBM (``u * unit_hbm_bandwidth``). Alone, it therefore takes its planned time.
* A pass of several kernels runs them one after another (one compute stream).
* HBM is one resource of the sustained capacity ``hbm_bandwidth * hbm_efficiency``. With
  ``npu.hbm_arbitration = "mlp"`` (default) it is shared in proportion to memory-level
  parallelism: the compute kernel weighs the units it runs on; collective kernels the units
  they hold, engines their equivalent (see the endpoints). With ``"drf"`` it is shared by
  dominant-resource fairness with weights 1 (and the endpoint's ``hbm_weight``). An endpoint
  may partition it instead (:meth:`NPU.partition_hbm`: communication owns a share of the
  bandwidth, compute the rest).
* Compute units are a space-shared pool (:class:`acesim.engine.Pool`): collective kernels hold
  units (for a whole collective or for one step, the endpoint decides; see
  :mod:`acesim.hardware.endpoints`), and the compute kernel runs on the units nobody holds; its
  rate cap (and weight) follow the free units whenever they change, waves included.

Compute kernels on one NPU run one at a time (one compute stream); the training loop ensures
that.

Host-device copies (:meth:`NPU.host_copy`) run on the NPU's DMA copy engines (one resource of
``engines x engine_bandwidth`` of ``[endpoint.copy_engine]``, attached by the platform whatever
the endpoint kind: the hardware has them) over the host link of its direction
(``npu.host_link_bandwidth`` each way), and read (device to host) or write (host to device)
one HBM byte per byte. A copy-engine endpoint's collectives draw on the same engines, so the
two share them; SM collectives do not.

A straggler (exact mode, :mod:`acesim.config.variation`) has a ``slowdown``: the compute time of
every block of its kernels is multiplied by it (a slower clock); launch latency (the host's) and
what a kernel moves are not, so a memory-bound kernel slows only as far as compute becomes its
bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..config.system import NPUConfig
from ..engine import Activity, Engine, Pool, Resource
from ..engine.fluid import solo_rate
from ..errors import ConfigError, SimulationError
from .kernel_fold import FoldedKernel, KernelFold, folded_kernels
from .kernel_model import KernelPlan, expand, plan_kernel
from .kernels import Choice, Kernel, nameless

#: Directions of host-device copies.
HOST_DIRECTIONS = ("h2d", "d2h")


class SharedPlans:
    """Kernel plans, algorithm choices and times alone that NPUs of one configuration share."""

    __slots__ = ("plans", "chosen", "alone", "caps", "rates", "passes", "known", "nameless")

    def __init__(self) -> None:
        #: a plan's rate cap on some free units, by (id of the plan, units): plans live as
        #: long as the platform (they are kept in ``plans`` or an NPU's own dict)
        self.caps: dict[tuple[int, int], float] = {}
        #: a plan's rate alone on some free units and HBM capacity, by (id of the plan,
        #: units, capacity B/s): :meth:`NPU.solo_kernel_rate`, kept like ``caps``
        self.rates: dict[tuple[int, int, float], float] = {}
        #: a kept pass's folded kernels (None: not foldable) by (id of its plans, units,
        #: capacity B/s): :meth:`NPU._folded`, kept like ``caps``
        self.passes: dict[tuple[int, int, float], list[FoldedKernel] | None] = {}
        self.plans: dict[Kernel, KernelPlan] = {}
        self.chosen: dict[tuple[Kernel, ...], list[Kernel]] = {}
        self.alone: dict[tuple[Kernel, ...], float] = {}
        #: by the identity of a kernel sequence (kept, so its id is not reused): its plans and
        #: time alone (a graph's nodes of one step share one sequence: no hashing of kernels)
        self.known: dict[int, tuple[Sequence[Kernel], list[KernelPlan], float]] = {}
        #: plans by their kernel without its name (:func:`~.kernels.nameless`): a plan
        #: depends on its kernel's name only in its own name (a model's layers' kernels are
        #: alike but for their names: each planned once)
        self.nameless: dict[tuple[Any, ...], KernelPlan] = {}

    def for_a_run(self) -> SharedPlans:
        """Plans for one more run of NPUs of this configuration: these plans, choices, times
        alone and sequences (each a function of the configuration and the kernels), and rate
        caps of its own (keyed by the identity of plans, some of which, a straggler's,
        live only as long as its run). The sequences are forgotten beyond
        :data:`KNOWN_LIMIT` (they are kept, so that their ids are not reused)."""
        run = SharedPlans()
        if len(self.known) > KNOWN_LIMIT:
            self.known.clear()
        run.plans, run.chosen, run.alone = self.plans, self.chosen, self.alone
        run.known, run.nameless = self.known, self.nameless
        return run


#: the kernel sequences :meth:`SharedPlans.for_a_run` keeps across runs, at most (a graph of
#: this many steps' worth; beyond, they are forgotten and planned again by value)
KNOWN_LIMIT = 100_000


class NPU:
    """One simulated NPU.

    Args:
        engine: the event kernel.
        rank: simulated rank index.
        config: NPU parameters.
        shared: plans of NPUs with the same ``config``, shared by those that run at its
            speed (exact mode: one kernel model evaluation per kernel, not one per NPU).
    """

    def __init__(
        self,
        engine: Engine,
        rank: int,
        config: NPUConfig,
        shared: SharedPlans | None = None,
    ):
        self.engine = engine
        self.rank = rank
        self.config = config
        self.hbm = engine.add_resource(f"npu{rank}.hbm", self.hbm_rate)
        self.hbm_compute = self.hbm
        self.hbm_comm = self.hbm
        #: compute units; collective kernels hold some, the compute kernel runs on the rest
        self.units = engine.add_pool(f"npu{rank}.units", config.compute_units)
        self._watcher = _UnitsWatcher(self)
        self.units.observe(self._watcher)
        self.units_for_compute = config.compute_units
        self.kernel: Activity | None = None
        self._plan: KernelPlan | None = None
        #: when the running compute kernel started computing (its blocks dispatched), s
        self._kernel_since = 0.0
        self._shared = shared if shared is not None else SharedPlans()
        self._plans: dict[Kernel, KernelPlan] = self._shared.plans
        self._chosen: dict[tuple[Kernel, ...], list[Kernel]] = self._shared.chosen
        self._alone: dict[tuple[Kernel, ...], float] = self._shared.alone
        #: the plans and time alone of a kernel sequence, by its identity (shared likewise)
        self._known: dict[int, tuple[Sequence[Kernel], list[KernelPlan], float]] = (
            self._shared.known
        )
        self._busy = False
        self._pass_start = 0.0
        #: the kernel sequence running (:meth:`run_kernels`): its plans, what to call at its
        #: end, its tag, what the bound listener hears it as, its start (s) and time alone
        #: (s); and the index of its kernel launched last
        self._sequence: tuple[list[KernelPlan], Callable[[], Any], Any, str | None, float, float]
        self._sequence = _IDLE
        self._index = 0
        #: fold each pass's kernels while nothing else uses this NPU's compute HBM
        #: (:mod:`.kernel_fold`; the platform sets it where collectives charge NPUs nothing)
        self.fold_kernels = False
        #: the pass folded now (None: none)
        self._fold: KernelFold | None = None
        self.compute_busy = 0.0  # s of kernel time so far
        self.compute_hbm_bytes = 0.0  # HBM bytes moved by compute kernels so far
        #: HBM capacity finished compute kernels consumed so far (B: their bytes, writes
        #: weighed 1 + write_penalty): what they took of the HBM resources' ``used``
        self.compute_hbm_demand = 0.0
        #: FLOPs of finished compute kernels so far, by what they ran on (KernelPlan.math)
        self.flops_by_math: dict[str, float] = {}
        #: unit-s of compute units running compute kernels so far (a kernel of fewer blocks
        #: than free units occupies its blocks' units); the running kernel's since _unit_since
        self.compute_unit_seconds = 0.0
        self._active_units = 0
        self._unit_since = 0.0
        self.kernel_log: list[tuple[Any, float, float, float]] = []  # tag, start, end, alone
        #: compute-time multiplier of this NPU's kernels (1.0: as the kernel model plans)
        self.slowdown = 1.0
        #: the DMA copy engines (B/s of copies; the platform attaches them)
        self.copy_engines: Resource | None = None
        #: the host link, per direction (none without ``npu.host_link_bandwidth``)
        self.host_links: dict[str, Resource] = {}
        if config.host_link_bandwidth is not None:
            for direction in HOST_DIRECTIONS:
                self.host_links[direction] = engine.add_resource(
                    f"npu{rank}.host_link.{direction}", config.host_link_bandwidth
                )
        self.host_hbm_bytes = 0.0  # HBM bytes moved by host-device copies so far
        #: this NPU's share of host memory bandwidth (made by the first CPU step)
        self.host_memory: Resource | None = None

    def host_copy(
        self,
        nbytes: float,
        direction: str,
        on_done: Callable[[Activity], Any],
        *,
        tag: Any = None,
    ) -> Activity:
        """Copy ``nbytes`` (bytes) between host and device (``direction``: ``h2d`` or ``d2h``)
        on the copy engines over the host link; ``on_done(activity)`` when done."""
        if direction not in HOST_DIRECTIONS:
            raise ConfigError(
                "host_copy.direction", f"must be one of {', '.join(HOST_DIRECTIONS)}", direction
            )
        if not (nbytes >= 0) or nbytes == float("inf"):
            raise ConfigError("host_copy.bytes", "must be a finite number >= 0", nbytes)
        if not self.host_links:
            raise ConfigError(
                "npu.host_link_bandwidth",
                f"must be set for host-device copies ({self.config.name} has no host link)",
                None,
            )
        demand = {self.host_links[direction]: 1.0, self.hbm_comm: 1.0}
        if self.copy_engines is not None:
            demand[self.copy_engines] = 1.0

        def done(act: Activity) -> None:
            self.host_hbm_bytes += act.work
            on_done(act)

        return self.engine.start(nbytes, demand, done, tag=tag)

    def host_step(
        self, nbytes: float, on_done: Callable[[Activity], Any], *, tag: Any = None
    ) -> Activity:
        """A CPU step streaming ``nbytes`` (bytes) through host memory at this NPU's share of
        it (``npu.host_memory_bandwidth``, B/s): the offloaded optimizer's update, bound by
        host memory bandwidth (an assumption: a CPU optimizer slower than its memory is not
        modelled). The resource is made on first use, so runs without it are unchanged."""
        if not (nbytes >= 0) or nbytes == float("inf"):
            raise ConfigError("host_step.bytes", "must be a finite number >= 0", nbytes)
        rate = self.config.host_memory_bandwidth
        if rate is None:
            raise ConfigError(
                "npu.host_memory_bandwidth",
                f"must be set for CPU optimizer steps ({self.config.name} has none)",
                None,
            )
        if self.host_memory is None:
            self.host_memory = self.engine.add_resource(f"npu{self.rank}.host_memory", rate)
        return self.engine.start(nbytes, {self.host_memory: 1.0}, on_done, tag=tag)

    def set_slowdown(self, slowdown: float) -> None:
        """Make this NPU's kernels compute ``slowdown`` times as long (> 0; before the run)."""
        if not (slowdown > 0) or slowdown == float("inf"):
            raise SimulationError(f"npu{self.rank}: slowdown must be positive, got {slowdown}")
        self.slowdown = float(slowdown)
        if slowdown != 1.0:  # its own plans from now on
            self._plans = {}
            self._alone = {}
            self._known = {}

    @property
    def hbm_rate(self) -> float:
        """Sustained HBM capacity (B/s): the datasheet bandwidth times ``hbm_efficiency``."""
        return self.config.hbm_bandwidth * self.config.kernels.hbm_efficiency

    def partition_hbm(self, comm_share: float) -> None:
        """Split HBM statically (before the run): communication owns ``comm_share`` (0..1) of
        the bandwidth, compute kernels the rest."""
        if self.hbm_comm is not self.hbm_compute:
            raise SimulationError(f"npu{self.rank}: HBM is already partitioned")
        if not 0 < comm_share < 1:
            raise SimulationError(f"npu{self.rank}: HBM share must be in (0, 1), got {comm_share}")
        bw = self.hbm_rate
        self.engine.set_capacity(self.hbm, bw * (1 - comm_share))
        self.hbm_compute = self.hbm
        self.hbm_comm = self.engine.add_resource(f"npu{self.rank}.hbm.comm", bw * comm_share)

    @property
    def comm_hbm_bytes(self) -> float:
        """HBM bytes of communication so far: everything that is neither a compute kernel's
        (its bytes with their writes' turnaround penalty, which the kernel causes) nor a
        finished host-device copy."""
        return (
            sum(r.used for r in self.hbm_resources) - self.compute_hbm_demand - self.host_hbm_bytes
        )

    @property
    def hbm_resources(self) -> list[Resource]:
        return [self.hbm] if self.hbm is self.hbm_comm else [self.hbm_compute, self.hbm_comm]

    def plan(self, kernel: Kernel) -> KernelPlan:
        """The kernel's plan on this NPU (cached per kernel)."""
        plan = self._plans.get(kernel)
        if plan is None:
            plan = self._planned(kernel)
            if self.slowdown != 1.0:
                plan = replace(plan, block_seconds=plan.block_seconds * self.slowdown)
            self._plans[kernel] = plan
        return plan

    def _planned(self, kernel: Kernel) -> KernelPlan:
        """``plan_kernel(self.config, kernel)``: a plan made for a kernel alike but for its
        name, renamed, where there is one (:attr:`SharedPlans.nameless`)."""
        if isinstance(kernel, Choice):  # planned as its chosen option, named so
            return plan_kernel(self.config, kernel)
        known = self._shared.nameless
        key = nameless(kernel)
        plan = known.get(key)
        if plan is None:
            plan = known[key] = plan_kernel(self.config, kernel)
        elif plan.name != kernel.name:
            plan = _renamed(plan, kernel.name)
        return plan

    def chosen(self, kernels: Sequence[Kernel]) -> list[Kernel]:
        """``kernels`` with each algorithm choice resolved on this NPU (cached)."""
        key = tuple(kernels)
        out = self._chosen.get(key)
        if out is None:
            out = self._chosen[key] = expand(self.config, kernels)
        return out

    def _plans_of(self, kernels: Sequence[Kernel]) -> tuple[list[KernelPlan], float]:
        """The plans of ``kernels`` (their choices resolved) and their time alone (s), cached
        by the identity of a tuple (immutable: a compute node's)."""
        known = self._known.get(id(kernels))
        if known is not None and known[0] is kernels:
            return known[1], known[2]
        plans = [self.plan(k) for k in self.chosen(kernels)]
        key = tuple(kernels)
        alone = self._alone.get(key)
        if alone is None:
            alone = self._alone[key] = sum(p.time_alone for p in plans)
        if type(kernels) is tuple:
            self._known[id(kernels)] = (kernels, plans, alone)
        return plans, alone

    def kernels_time_alone(self, kernels: Sequence[Kernel]) -> float:
        """Time (s) of ``kernels`` one after another on the whole NPU with nothing else."""
        return self._plans_of(kernels)[1]

    def run_kernels(
        self,
        kernels: Sequence[Kernel],
        on_done: Callable[[], Any],
        *,
        tag: Any = None,
        track: bool | str = False,
    ) -> None:
        """Run ``kernels`` one after another on the compute stream, then call ``on_done``;
        ``track``: report what binds each to the engine's bound listener (True: as
        ``kernel``; a string: as that kind)."""
        if self._busy:
            raise SimulationError(f"npu{self.rank}: a compute kernel is already running")
        self._busy = True
        plans, alone = self._plans_of(kernels)
        start = self.engine.now
        self._pass_start = start
        kind = "kernel" if track is True else track or None
        self._sequence = (plans, on_done, tag, kind, start, alone)
        if self.fold_kernels and kind is None and plans:
            units = self.units_for_compute
            folded = self._folded(plans, units, type(kernels) is tuple)
            if folded is not None:
                fold = KernelFold(self, folded, units)
                if fold.begin():
                    self._fold = fold
                    return
        self._run_next(0)

    def record_kernels(
        self,
        kernels: Sequence[Kernel],
        start: float,
        end: float,
        unit_seconds: float,
        *,
        tag: Any = None,
    ) -> None:
        """Count ``kernels``, run one after another from ``start`` to ``end`` (s) on this
        NPU's units (``unit_seconds`` of them occupied, unit-s) as another model timed them
        (exact mode's per-rank backend, :mod:`acesim.network.rank_streams`): what
        :meth:`run_kernels` counts as they run. Their HBM demand is charged to the compute
        HBM's integral, each kernel's whole work times its amount."""
        if self._busy:
            raise SimulationError(f"npu{self.rank}: a compute kernel is already running")
        plans, alone = self._plans_of(kernels)
        flops = self.flops_by_math
        for plan in plans:
            self.compute_hbm_bytes += 1.0 * plan.hbm_bytes
            self.compute_hbm_demand += 1.0 * plan.hbm_demand
            flops[plan.math] = flops.get(plan.math, 0.0) + 1.0 * plan.flops
            demand = self.kernel_inputs(plan, self.units_for_compute)[0]
            for res, amount in demand.items():
                res.used += amount
        self.compute_unit_seconds += unit_seconds
        self.compute_busy += end - start
        self.kernel_log.append((tag, start, end, alone))

    def _folded(self, plans: list[KernelPlan], units: int, kept: bool) -> list[FoldedKernel] | None:
        """:func:`~.kernel_fold.folded_kernels` of ``plans``, remembered where the plans are
        ``kept`` (a tuple of kernels' plans, kept for the run: their identity stands for
        them) by their identity, the units and the HBM capacity."""
        if not kept:
            return folded_kernels(self, plans, units)
        key = (id(plans), units, self.hbm_compute.capacity)
        passes = self._shared.passes
        if key in passes:
            return passes[key]
        folded = passes[key] = folded_kernels(self, plans, units)
        return folded

    def _run_next(self, index: int) -> None:
        """Launch the running sequence's kernel ``index`` (after its latency), or end the
        sequence (:meth:`run_kernels`) after its last. (The sequence is the NPU's state, not
        closures: one runs at a time.)"""
        plans, on_done, tag, _kind, start, alone = self._sequence
        if index == len(plans):
            self._sequence = _IDLE  # (holding its end would hold the run: a cycle)
            self._busy = False
            now = self.engine.now
            self.compute_busy += now - start
            self.kernel_log.append((tag, start, now, alone))
            on_done()
            return
        plan = plans[index]
        self._index = index
        if plan.latency > 0:
            self.engine.call(plan.latency, self._launch, plan)
        else:
            self._launch(plan)

    def _launch(self, plan: KernelPlan) -> None:
        _plans, _on_done, tag, kind, _start, _alone = self._sequence
        units = self.units_for_compute
        demand, basis, weight, cap = self.kernel_inputs(plan, units)
        self._plan = plan
        now = self.engine.now
        self._unit_since = now
        self._active_units = _occupied(plan, units)
        self._kernel_since = now
        self.kernel = self.engine.start(
            1.0, demand, self._kernel_done, cap=cap, weight=weight, basis=basis, tag=tag, track=kind
        )

    def _kernel_done(self, act: Activity) -> None:
        """The running kernel (its plan ``_plan``) finished: count it, run the next."""
        plan = self._plan
        assert plan is not None  # set at its launch
        self._count_units(0)
        self.kernel = None
        self._plan = None
        self.compute_hbm_bytes += act.work * plan.hbm_bytes
        self.compute_hbm_demand += act.work * plan.hbm_demand
        flops = self.flops_by_math
        flops[plan.math] = flops.get(plan.math, 0.0) + act.work * plan.flops
        self._run_next(self._index + 1)

    def _rate_cap(self, plan: KernelPlan, units: int) -> float:
        """``plan.rate_cap(units)``, computed once per plan and unit count."""
        caps = self._shared.caps
        key = (id(plan), units)
        cap = caps.get(key)
        if cap is None:
            cap = caps[key] = plan.rate_cap(units)
        return cap

    def kernel_inputs(
        self, plan: KernelPlan, units: int
    ) -> tuple[dict[Resource, float], Resource | None, float, float]:
        """The activity of kernel ``plan`` on ``units`` free units: its demand (HBM capacity
        per unit of work, B, cleaned as :meth:`Engine.start` cleans it), the resource its
        weight is a share of (None: its dominant one), its weight and its rate cap (work/s)."""
        amount = plan.hbm_demand
        demand = {self.hbm_compute: float(amount)} if amount > 1e-300 else {}
        mlp = self.config.hbm_arbitration == "mlp"
        basis = self.hbm_compute if mlp and demand else None
        weight = max(units, 1) if mlp else 1.0
        return demand, basis, weight, self._rate_cap(plan, units)

    def solo_kernel_rate(self, plan: KernelPlan, units: int) -> float:
        """The rate (work/s) the fluid allocation gives kernel ``plan`` on ``units`` free units
        alone on this NPU's compute HBM (:func:`~acesim.engine.fluid.solo_rate`), remembered
        by plan, units and the resource's capacity."""
        rates = self._shared.rates
        key = (id(plan), units, self.hbm_compute.capacity)
        rate = rates.get(key)
        if rate is None:
            demand, basis, weight, cap = self.kernel_inputs(plan, units)
            probe = Activity(1.0, demand, cap, weight, None, None, 0)
            probe.basis = basis
            rate = rates[key] = solo_rate(probe)
        return rate

    def occupied(self, plan: KernelPlan, units: int) -> int:
        """Compute units kernel ``plan`` occupies on ``units`` free ones."""
        return _occupied(plan, units)

    def _units_changed(self, pool: Pool) -> None:
        """The units free for compute changed (collective kernels took or returned some)."""
        units = int(round(pool.free))
        if units == self.units_for_compute:
            return
        if self._fold is not None:  # the running pass as the event path has it, first
            self._fold.release()
        self.units_for_compute = units
        if self.kernel is not None and self._plan is not None:
            self._count_units(_occupied(self._plan, units))
            self.engine.set_cap(self.kernel, self._rate_cap(self._plan, units))
            if self.config.hbm_arbitration == "mlp":
                self.engine.set_weight(self.kernel, max(units, 1))

    def close(self) -> None:
        """The run has ended: the units' pool lets this NPU go (:class:`_UnitsWatcher`);
        its figures stay readable. A kernel sequence a stopped run left running is dropped
        (its end, a callable of the run's, would hold the run: a cycle)."""
        self._watcher.npu = None
        self._sequence = _IDLE
        if self._fold is not None:
            self.engine.unclaim([self.hbm_compute])
            self._fold = None

    def _count_units(self, active: int) -> None:
        """Add the running kernel's unit-s up to now; from now on it occupies ``active``."""
        now = self.engine.now
        self.compute_unit_seconds += self._active_units * (now - self._unit_since)
        self._unit_since = now
        self._active_units = active

    def sm_wait(self, units: int, launch: str) -> float:
        """How long a communication kernel that wants ``units`` compute units waits for them,
        s, launched now while the compute stream's kernel holds the free units in its blocks
        (module docstring, SM scheduling; ``launch`` as ``endpoint.baseline.launch``):

        * ``fifo`` (streams of one priority): the block scheduler dispatches the running
          kernel's pending blocks first, so the communication kernel's blocks start at its
          last wave when that wave leaves ``units`` idle, else when the kernel ends;
        * ``priority`` (a higher-priority stream): at the end of the running wave (blocks are
          not preempted);
        * ``immediate``: never (the units are taken at once, the running blocks' work moving
          to the units left).

        No wait where no kernel runs, where it started this very instant (launched after the
        communication kernel, as a program that issues a collective and then its next
        kernels does), or where its work spreads evenly over the units (short blocks,
        ``blocks`` None). The kernel's rate now is taken to hold until then."""
        if self._fold is not None:  # the running kernel as the event path has it, first
            self._fold.release()
        plan, kernel = self._plan, self.kernel
        if launch == "immediate" or plan is None or kernel is None or plan.blocks is None:
            return 0.0
        if self.engine.now <= self._kernel_since or kernel.rate <= 0:
            return 0.0
        held = max(1, self.units_for_compute)
        waves = plan.waves(held)
        done = self.engine.work_done(kernel)
        wave = min(int(done * waves), waves - 1)  # the wave running now
        if launch == "priority":
            target = (wave + 1) / waves
        else:
            idle = held - (plan.blocks - (waves - 1) * held)  # units the last wave leaves
            target = (waves - 1) / waves if idle >= units else 1.0
        return max(0.0, (target - done) / kernel.rate)

    def mirror(self, other: NPU) -> None:
        """Take ``other``'s compute record: its kernel log, busy time, compute HBM bytes and
        HBM integrals (after a run in which this NPU's kernels ran exactly as ``other``'s:
        exact mode's replicated ranks, :class:`acesim.training.executor.GraphExecutor`)."""
        if self._busy or other._busy:
            raise SimulationError(f"npu{self.rank}: cannot mirror a running compute stream")
        self.compute_busy = other.compute_busy
        self.compute_hbm_bytes = other.compute_hbm_bytes
        self.flops_by_math = dict(other.flops_by_math)
        self.compute_hbm_demand = other.compute_hbm_demand
        self.compute_unit_seconds = other.compute_unit_seconds
        self.kernel_log = list(other.kernel_log)
        for source, target in zip(other.hbm_resources, self.hbm_resources, strict=True):
            self.engine.mirror_resource(source, target)

    def busy_time(self) -> float:
        """Seconds of compute-stream time so far, the running pass included."""
        running = self.engine.now - self._pass_start if self._busy else 0.0
        return self.compute_busy + running

    def compute_hbm_bytes_now(self) -> float:
        """HBM bytes moved by compute kernels so far, the running kernel's in proportion to
        its work done (call after ``engine.sync()``)."""
        if self.kernel is None or self._plan is None:
            return self.compute_hbm_bytes
        return self.compute_hbm_bytes + self.engine.work_done(self.kernel) * self._plan.hbm_bytes

    def compute_hbm_demand_now(self) -> float:
        """HBM capacity consumed by compute kernels so far (B, writes weighed), the running
        kernel's in proportion to its work done (call after ``engine.sync()``)."""
        if self.kernel is None or self._plan is None:
            return self.compute_hbm_demand
        return self.compute_hbm_demand + self.engine.work_done(self.kernel) * self._plan.hbm_demand

    def flops_by_math_now(self) -> dict[str, float]:
        """FLOPs of compute kernels so far by what they ran on, the running kernel's in
        proportion to its work done (call after ``engine.sync()``)."""
        out = dict(self.flops_by_math)
        if self.kernel is not None and self._plan is not None:
            math = self._plan.math
            out[math] = out.get(math, 0.0) + self.engine.work_done(self.kernel) * self._plan.flops
        return out

    def compute_unit_seconds_now(self) -> float:
        """Unit-s of compute units running compute kernels so far, the running kernel's
        included."""
        running = (
            self._active_units * (self.engine.now - self._unit_since)
            if self.kernel is not None
            else 0.0
        )
        return self.compute_unit_seconds + running


class _UnitsWatcher:
    """What an NPU's pool of compute units calls when its free amount changes:
    ``npu._units_changed``, until :meth:`NPU.close` lets the NPU go. The pool holds the
    watcher and the watcher the NPU, a cycle: closed at the run's end, the run's platform is
    freed by reference counting, not by the cyclic collector. (A plain object, not a weak
    reference: the NPU's class is compiled where the event path is, and a compiled class
    cannot be referenced weakly.)"""

    def __init__(self, npu: NPU) -> None:
        self.npu: NPU | None = npu

    def __call__(self, pool: Pool) -> None:
        npu = self.npu
        if npu is not None:
            npu._units_changed(pool)


def _nothing() -> None:
    """What an NPU's empty kernel sequence calls at its end (none has run)."""


#: an NPU's kernel sequence when none runs (:meth:`NPU.run_kernels`)
_IDLE: tuple[list[KernelPlan], Callable[[], Any], Any, str | None, float, float] = (
    [],
    _nothing,
    None,
    None,
    0.0,
    0.0,
)


def _renamed(plan: KernelPlan, name: str) -> KernelPlan:
    """``KernelPlan(**{**plan.__dict__, "name": name})``, its fields copied at once (a
    frozen plan's fields, made and checked with it: a fifth of the construction's cost)."""
    renamed: KernelPlan = object.__new__(KernelPlan)
    fields = renamed.__dict__
    fields.update(plan.__dict__)
    fields["name"] = name
    return renamed


def _occupied(plan: KernelPlan, units: int) -> int:
    """Compute units a kernel occupies on ``units`` free ones: all of them, or its blocks'
    when it has fewer blocks (a partial last wave counts as full)."""
    return min(units, plan.blocks) if plan.blocks is not None else units
