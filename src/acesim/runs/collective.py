"""The collective run kind: one collective on a system (nccl-tests style), optionally beside
concurrent compute kernels or a host copy.

:func:`execute_collective` lets :func:`~acesim.training.strategy.decide` choose the strategy
(a rooted collective or variation in symmetric mode runs in exact mode, and says so), runs
the collective (alone in exact mode on the lockstep backend where it applies, else on the
event path, the result saying why) and reports its figures
(:class:`~acesim.results.collective.CollectiveResult`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ..config.experiment import RunOptions
from ..config.resolve import derive, resolve_system
from ..config.system import SystemConfig, defaults
from ..config.variation import Variation
from ..engine.collector import collector_paused
from ..errors import ConfigError, SimulationError, TopologyError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.kernels import Kernel, Roofline
from ..hardware.platform import Platform
from ..hardware.strategy import Strategy
from ..network import rank_fluid
from ..network.collective import Collective
from ..network.group import Group
from ..network.ops import COLLECTIVE_OPS
from ..network.tuner_check import check_choice
from ..network.vectorized import (
    TIMING,
    Conflict,
    backend_problem,
    endpoint_problem,
    latency_bound,
    run_alone,
)
from ..results.collective import CollectiveResult, bus_factor
from ..results.jsonout import first_non_finite
from ..results.protocol import scalar_settings
from ..training.bounds import BoundRecorder, collective_bounds
from ..training.strategy import decide, mode_note
from ..units import parse_quantity
from ..workload.graph import Graph, Node
from .beside import CONCURRENT, run_beside
from .case import run_options
from .estimate import Estimate, cost_name
from .how import How

__all__ = ["CollectiveCase", "make_collective_case", "execute_collective", "simulate_collective"]


@dataclass(frozen=True)
class CollectiveCase:
    """One collective, resolved: ``size`` bytes per NPU (nccl-tests convention) of ``op`` on
    ``system`` over ``dims`` or ``group`` (None: every dimension), with concurrent ``kernels``
    (run one after another on each simulated NPU's compute stream) or a ``host_copy``
    ``(bytes, "h2d"|"d2h")``, and a rooted operation's ``root``."""

    kind: ClassVar[str] = "collective"

    system: SystemConfig
    op: str
    size: float
    options: RunOptions = field(default_factory=defaults(RunOptions))
    dims: tuple[int, ...] | None = None
    group: Group | None = None
    kernels: tuple[Kernel, ...] | None = None
    host_copy: tuple[float, str] | None = None
    root: int | None = None
    #: where the tuner chose among ``collective.choices``, also simulate the other candidates
    #: and say in the result's ``tuner`` when one is faster (:mod:`acesim.network.tuner_check`)
    tuner_check: bool = True
    #: with ``kernels``, the collective is issued this long after them, s (0: at once)
    collective_at: float = 0.0

    def with_system(self, system: SystemConfig) -> CollectiveCase:
        """The same case on another system (an endpoint variant)."""
        return replace(self, system=system)

    def with_options(self, **changes: Any) -> CollectiveCase:
        """The same case with some run options changed (validated)."""
        return replace(self, options=run_options(self.options, **changes))


def _kernels(
    compute: tuple[float, float] | None, compute_kernels: Sequence[Kernel] | None
) -> tuple[Kernel, ...] | None:
    if compute is not None and compute_kernels is not None:
        raise ConfigError("compute_kernels", "give either compute or compute_kernels, not both")
    if compute is not None:
        flops, hbm = compute
        if not all(math.isfinite(v) and v >= 0 for v in (flops, hbm)):
            raise ConfigError(
                "with_compute", "FLOPs and bytes must be finite and not negative", compute
            )
        return (Roofline(flops, hbm),)
    if compute_kernels is not None:
        if not compute_kernels:
            raise ConfigError("compute_kernels", "give at least one kernel", compute_kernels)
        return tuple(compute_kernels)
    return None


def make_collective_case(
    system: SystemConfig | str | Path | Mapping[str, Any],
    op: str,
    size: float | str,
    options: RunOptions | Mapping[str, Any] | None = None,
    *,
    endpoint: str | None = None,
    dims: Sequence[int] | None = None,
    group: Group | None = None,
    compute: tuple[float, float] | None = None,
    compute_kernels: Sequence[Kernel] | None = None,
    host_copy: tuple[float, str] | None = None,
    root: int | None = None,
    tuner_check: bool = True,
    collective_at: float = 0.0,
    **option_changes: Any,
) -> CollectiveCase:
    """Resolve a collective case (arguments as :func:`simulate_collective`'s; the options'
    ``shape``, ``npus`` and ``nodes`` resize the system as for a training case; ConfigErrors
    name the field at fault)."""
    COLLECTIVE_OPS.get(op, "op")
    nbytes = parse_quantity(size, "size", "size")
    if nbytes < 0:
        raise ConfigError("size", "must not be negative", size)
    opts = run_options(options, **option_changes)
    if opts.stop != "end":
        raise ConfigError(
            "run.stop",
            "applies to training graphs (a collective alone has no measured window: it runs "
            "to its end)",
            opts.stop,
        )
    cfg = resolve_system(system, shape=opts.shape, npus=opts.npus, nodes=opts.nodes)
    if endpoint is not None:
        cfg = cfg.with_endpoint(ENDPOINT_KINDS.check(endpoint, "endpoint"))
    kernels = _kernels(compute, compute_kernels)
    _check_collective_at(collective_at, kernels is not None)
    return CollectiveCase(
        cfg,
        op,
        nbytes,
        opts,
        tuple(dims) if dims else None,
        group,
        kernels,
        host_copy,
        root,
        tuner_check,
        collective_at,
    )


def _check_collective_at(collective_at: float, with_kernels: bool) -> None:
    """``collective_at`` is a finite time of at least 0 s, and given only with kernels."""
    if not (math.isfinite(collective_at) and collective_at >= 0):
        raise ConfigError("collective_at", "must be a finite time of at least 0 s", collective_at)
    if collective_at > 0 and not with_kernels:
        raise ConfigError(
            "collective_at", "applies only with concurrent compute kernels", collective_at
        )


def simulate_collective(
    system: SystemConfig | str | Path,
    op: str,
    size: float | str,
    *,
    exact: bool = False,
    endpoint: str | None = None,
    dims: tuple[int, ...] | None = None,
    group: Group | None = None,
    compute: tuple[float, float] | None = None,
    compute_kernels: Sequence[Kernel] | None = None,
    host_copy: tuple[float, str] | None = None,
    variation: Variation | None = None,
    root: int | None = None,
    tuner_check: bool = True,
    bound_variants: bool = True,
    collective_at: float = 0.0,
) -> CollectiveResult:
    """Simulate one collective of ``size`` bytes (nccl-tests convention) on ``system``.

    Args:
        system: a :class:`SystemConfig`, a preset name or a config file path.
        op: a registered operation (``all-reduce``, ``reduce-scatter``, ``all-gather``,
            ``all-to-all``, ``broadcast``, ``reduce``, ``sendrecv``).
        size: bytes, or text such as ``"64 MiB"``.
        exact: simulate every NPU instead of one representative (a rooted operation or
            ``variation`` runs in exact mode anyway, and the result's ``mode_note`` says so).
        endpoint: override the system's endpoint kind (a registered kind). The bound kind
            (``ideal``) is run in every one of its variants and the fastest is returned.
        dims: dimensions the collective spans (default: all).
        group: or a communicator group (:class:`acesim.network.Group`), e.g. half a node.
        compute: optional concurrent compute kernel ``(FLOPs, HBM bytes)`` started with the
            collective; the result's ``compute`` reports both slowdowns.
        compute_kernels: or the concurrent kernels themselves (``[Gemm(...)]``), run one after
            another on the compute stream from the collective's start (not with ``compute``).
        host_copy: optional concurrent host-device copy ``(bytes, "h2d" or "d2h")`` on every
            simulated NPU, started with the collective on the copy engines; the result's
            ``compute`` reports its time with and without the collective.
        variation: stragglers and degraded or failed links, NPU types
            (:class:`acesim.config.variation.Variation`; exact mode).
        root: a rooted operation's root (broadcast, reduce), its position in the group
            (default 0).
        tuner_check: where the tuner chose among ``collective.choices``, also simulate the
            other candidates; if one is faster, the result's ``tuner`` says so (NCCL's choice
            is kept, as NCCL would: :mod:`acesim.network.tuner_check`).
        bound_variants: False runs the bound kind (``ideal``) as configured only (the free
            endpoint on the system's own choices: what closed-form checks of an algorithm's
            cost want), not its best variant; then it bounds no other kind.
        collective_at: with concurrent compute kernels, issue the collective this long after
            they are launched, s (0: launched before their blocks are dispatched; later: its
            SM kernel may wait for the units their blocks hold, ``endpoint.baseline.launch``);
            its time and slowdown are counted from its issue.
    """
    changes = _mode_options(exact, variation)
    case = make_collective_case(
        system,
        op,
        size,
        endpoint=endpoint,
        dims=dims,
        group=group,
        compute=compute,
        compute_kernels=compute_kernels,
        host_copy=host_copy,
        root=root,
        tuner_check=tuner_check,
        collective_at=collective_at,
        **changes,
    )
    if ENDPOINT_KINDS.get(case.system.endpoint.kind).role != "bound" or not bound_variants:
        return _collective(case, tuner_check)
    return _bound(case)


def _mode_options(exact: bool, variation: Variation | None) -> dict[str, Any]:
    """Run options of :func:`simulate_collective`'s ``exact`` and ``variation``."""
    changes: dict[str, Any] = {"mode": "exact" if exact else "symmetric"}
    if variation:
        changes.update(variation.run_options())
    return changes


#: How far (relative) a variant's lower bound must exceed the fastest time so far for the
#: variant to be skipped: far above the rounding of the bound and of the simulated times.
_BOUND_MARGIN = 1e-6


def _bound(case: CollectiveCase) -> CollectiveResult:
    """The bound kind's result: every variant (another kind's algorithms and pieces at no
    cost) run, the fastest kept (ties: the first listed). A variant that cannot finish
    before the fastest so far (:func:`_lower_bound`) is not run: it would not be kept."""
    best: CollectiveResult | None = None
    for v in ENDPOINT_KINDS.get(case.system.endpoint.kind).variants_of(case.system):
        variant = case.with_system(case.system.with_endpoint(None, **v.changes))
        if best is not None and _lower_bound(variant) * (1 - _BOUND_MARGIN) > best.time:
            continue
        result = _collective(variant)
        if best is None or result.time < best.time:
            best = result
    assert best is not None  # variants_of returns at least one
    return best


def _lower_bound(case: CollectiveCase) -> float:
    """A time (s) the case's collective cannot finish before (0 where none is known: beside
    concurrent kernels or copies, or steps :func:`~acesim.network.vectorized.latency_bound`
    does not bound); the tuner's choice made as the run would (its errors raised)."""
    if case.kernels is not None or case.host_copy is not None:
        return 0.0
    runtime = Platform(case.system, _strategy(case)).collectives
    _axes, chunks, choice = runtime.choose(case.op, case.size, dims=case.dims, group=case.group)
    return latency_bound(runtime, choice.phases, chunks, choice.protocol)


def _nothing() -> None:
    """A background kernel needs no continuation."""


def _strategy(case: CollectiveCase) -> Strategy:
    """The case's strategy (:func:`~acesim.training.strategy.decide` on a graph of the one
    collective)."""
    node = Node(0, case.op, "collective", op=case.op, size=case.size, dims=case.dims)
    graph = Graph([[replace(node, group=case.group)]])
    opts = case.options
    strategy, _graph = decide(
        case.system,
        lambda _r: graph,
        requested=opts.mode,
        variation=opts.variation,
        computes=case.kernels is not None,
    )
    return strategy


def execute_collective(case: CollectiveCase, how: How = How()) -> tuple[CollectiveResult, None]:
    """Simulate the case (module docstring) as ``how`` says; the result (no execution: a
    collective run has no graph). ``how.trace`` is refused (traces show training runs); its
    estimate counts the collective's messages, every simulated NPU's; progress does not apply.
    The bound kind skips the tuner check (its variants search the algorithms)."""
    if how.trace:
        raise ConfigError("--trace", "shows training runs, not one collective", True)
    check = case.tuner_check and ENDPOINT_KINDS.get(case.system.endpoint.kind).role != "bound"
    return _collective(case, check, how.variant, how.on_estimate), None


def _collective(
    case: CollectiveCase,
    check: bool = False,
    variant: str = "",
    on_estimate: Callable[[Estimate], Any] | None = None,
) -> CollectiveResult:
    """The case's result; with ``check``, the tuner's choice checked against the other
    candidates (:func:`~acesim.network.tuner_check.check_choice`)."""
    result, predicted = _simulate(case, variant, on_estimate)
    if check and result.algorithm is not None and len(predicted) > 1:
        checked = check_choice(predicted, result.algorithm, result.time, _forced(case))
        if checked is not None:
            result = replace(result, tuner=checked.to_dict())
    return result


def _forced(case: CollectiveCase) -> Callable[[str], float | None]:
    """``algorithm`` -> the collective's time with it forced (None: it cannot run)."""

    def simulate(algorithm: str) -> float | None:
        try:
            forced = derive(case.system, {"collective.algorithm": algorithm})
            return _simulate(case.with_system(forced), "")[0].time
        except (ConfigError, TopologyError):
            return None

    return simulate


@collector_paused()
def _simulate(
    case: CollectiveCase, variant: str, on_estimate: Callable[[Estimate], Any] | None = None
) -> tuple[CollectiveResult, tuple[tuple[str, float], ...]]:
    """One simulation of the case, and the tuner's predicted time of each candidate
    algorithm (empty: no choice made); ``on_estimate`` told its cost before it runs."""
    strategy = _strategy(case)
    cfg = case.system
    platform, recorder = _prepared(case, strategy)
    if on_estimate is not None:
        on_estimate(_estimate(case, strategy, platform))
    fast = _fast(case, platform)
    copy_end: list[float] = []
    if isinstance(fast, str):
        _start_concurrent(case, platform, copy_end)
        coll, end = _issue_and_run(case, platform)
    else:
        coll, end = fast, platform.engine.now
    platform.close()  # freed now, not by the collector (Platform.close)
    time = coll.duration
    if not math.isfinite(end) or not math.isfinite(time):
        raise SimulationError(
            f"{case.op} of {case.size:g} bytes on {cfg.name}: the time is not finite ({time}); "
            "check the system's latencies and bandwidths"
        )
    bound_by = collective_bounds(recorder, coll.issued, coll.issued + time)
    note = mode_note(strategy)
    if strategy.exact and isinstance(fast, str):
        why = f"the collective ran on the event path ({fast})"
        note = f"{note}; {why}" if note else why
    ranks = len(platform.npus)
    n = coll.group_size
    # A group of one NPU moves nothing: no bandwidth to report (nccl-tests prints 0 busbw).
    algbw = case.size / time if time > 0 else 0.0
    hbm_comm = sum(npu.comm_hbm_bytes for npu in platform.npus) / ranks
    dims = platform.topology.dimensions
    result = CollectiveResult(
        op=case.op,
        size=case.size,
        npus=platform.topology.npus,
        time=time,
        algbw=algbw,
        busbw=algbw * bus_factor(case.op, n),
        endpoint=cfg.endpoint.kind,
        mode=strategy.mode,
        bytes_sent_per_npu=coll.bytes_sent / ranks,
        bytes_received_per_npu=coll.bytes_received / ranks,
        hbm_bytes_per_npu=hbm_comm,
        network_bandwidth=coll.bytes_sent / ranks / time if time > 0 else 0.0,
        hbm_bandwidth=hbm_comm / time if time > 0 else 0.0,
        per_dimension_bytes={dims[d].name: b / ranks for d, b in coll.bytes_sent_per_dim.items()},
        compute=_concurrent(case, strategy, platform, time, end, copy_end) or None,
        system=cfg.name,
        shape=list(cfg.network.shape),
        group_size=n,
        protocol=coll.protocol.name if coll.protocol is not None else None,
        algorithm=coll.algorithm,
        comm_units=platform.npus[0].units.peak,
        bound=max(bound_by, key=lambda k: bound_by[k]) if bound_by else "",
        bound_by=bound_by,
        mode_note=note,
        variant=variant or ENDPOINT_KINDS.get(cfg.endpoint.kind).label,
        settings=scalar_settings(cfg.endpoint.settings()),
        provenance=cfg.provenance.to_dict(),
    )
    _check_finite(case, result)
    predicted: tuple[tuple[str, float], ...] = ()
    if coll.algorithm is not None and cfg.collective.algorithm is None:
        predicted = platform.collectives.choose(
            case.op, case.size, dims=case.dims, group=case.group
        )[2].predicted
    return result, predicted


def _estimate(case: CollectiveCase, strategy: Strategy, platform: Platform) -> Estimate:
    """What the case's simulation will cost (:mod:`acesim.runs.estimate`): its messages (every
    rank's) at the constants of the path it takes."""
    rt = platform.collectives
    per_rank = rt.messages_per_rank(case.op, case.size, dims=case.dims, group=case.group)
    cost = cost_name("collective", strategy.mode)
    if (
        case.host_copy is None
        and (case.kernels is not None or backend_problem(rt) is not None)
        and rank_fluid.applies(rt, case.op, case.size, dims=case.dims, group=case.group)
    ):
        cost = "collective per-rank"  # every rank at once (network/rank_fluid.py)
    kernels = len(case.kernels or ()) * len(platform.npus)
    # beside kernels or a host copy, the collective runs again alone (its slowdown)
    runs = 1 if case.kernels is None and case.host_copy is None else 2
    return Estimate(runs * per_rank * len(platform.npus), kernels, 0, cost)


def _fast(case: CollectiveCase, platform: Platform) -> Collective | str:
    """The case's collective on a backend without message events where one applies: alone,
    the lockstep backend or else the per-rank one; beside compute kernels, the per-rank one
    (:mod:`.beside`); else why the event path runs it (nothing started)."""
    if case.host_copy is not None:
        return CONCURRENT
    if case.kernels is not None:
        try:
            return run_beside(
                platform,
                case.op,
                case.size,
                case.kernels,
                at=case.collective_at,
                dims=case.dims,
                group=case.group,
            )
        except rank_fluid.TableFull:
            return rank_fluid.TableFull.reason
        except Conflict:
            return TIMING
    fast = run_alone(platform.collectives, case.op, case.size, dims=case.dims, group=case.group)
    return _per_rank(case, platform, fast) if isinstance(fast, str) else fast


def _per_rank(case: CollectiveCase, platform: Platform, why: str) -> Collective | str:
    """The lone collective on the per-rank backend (:mod:`acesim.network.rank_fluid`), where
    the lockstep one said ``why`` not; else why the event path runs it: the per-rank
    backend's reason where the lockstep one's was the endpoint (which only the per-rank one
    can take), else the lockstep one's."""
    try:
        done = rank_fluid.run_alone(
            platform.collectives, case.op, case.size, dims=case.dims, group=case.group
        )
    except rank_fluid.TableFull:
        return rank_fluid.TableFull.reason
    except Conflict:
        return TIMING
    if not isinstance(done, str):
        return done
    endpoint = endpoint_problem(platform.collectives.endpoint)
    return done if why == endpoint and done != "the per-rank backend is off" else why


def _prepared(case: CollectiveCase, strategy: Strategy) -> tuple[Platform, BoundRecorder]:
    """The case's platform and a bound recorder listening to it."""
    platform = Platform(case.system, strategy)
    recorder = BoundRecorder()
    platform.engine.add_bound_listener(recorder)
    return platform, recorder


def _start_concurrent(case: CollectiveCase, platform: Platform, copy_end: list[float]) -> None:
    """Start the case's concurrent kernels and host copies on the event path; the host
    copies' end times go to ``copy_end`` (s)."""
    if case.kernels is not None:
        for npu in platform.npus:
            npu.run_kernels(list(case.kernels), _nothing, tag="compute")
    if case.host_copy is not None:
        for npu in platform.npus:
            npu.host_copy(*case.host_copy, lambda _a: copy_end.append(platform.engine.now))


def _check_finite(case: CollectiveCase, result: CollectiveResult) -> None:
    """SimulationError naming the first non-finite figure of ``result``."""
    where = first_non_finite(result.to_dict())
    if where is not None:
        cfg = case.system
        raise SimulationError(
            f"{case.op} of {case.size:g} bytes on {cfg.name} ({cfg.endpoint.kind}): {where} is "
            "not finite (a cost beyond what the model can represent; check the system's "
            "latencies, bandwidths and endpoint settings)"
        )


def _issue_and_run(case: CollectiveCase, platform: Platform) -> tuple[Collective, float]:
    """Issue the case's collective ``case.collective_at`` s from now (at once with 0) and run
    the platform: the collective and the end time, s."""
    issued: list[Collective] = []

    def issue() -> None:
        issued.append(
            platform.collectives.issue(
                case.op, case.size, dims=case.dims, group=case.group, root=case.root
            )
        )

    if case.collective_at > 0:
        platform.engine.schedule(case.collective_at, issue)
    else:
        issue()
    end = platform.engine.run()
    return issued[0], end


def _concurrent(
    case: CollectiveCase,
    strategy: Strategy,
    platform: Platform,
    time: float,
    end: float,
    copy_end: list[float],
) -> dict[str, float]:
    """The concurrent kernels' and host copy's figures, each with and without the
    collective (s; slowdowns as ratios)."""
    out: dict[str, float] = {}
    if case.kernels is None and case.host_copy is None:
        return out
    solo = _collective_alone(case, strategy)
    if case.kernels is not None:
        _tag, start, stop, alone = platform.npus[0].kernel_log[0]
        out.update(
            kernel_time=stop - start,
            kernel_time_alone=alone,
            kernel_slowdown=(stop - start) / alone if alone > 0 else 1.0,
        )
    if case.host_copy is not None:
        alone = _host_copy_alone(case.system, case.host_copy)
        copy_time = max(copy_end)
        out.update(
            host_copy_time=copy_time,
            host_copy_time_alone=alone,
            host_copy_slowdown=copy_time / alone if alone > 0 else 1.0,
        )
    out.update(
        collective_time_alone=solo,
        collective_slowdown=time / solo if solo > 0 else 1.0,
        end_time=end,
    )
    return out


def _collective_alone(case: CollectiveCase, strategy: Strategy) -> float:
    """The case's collective alone (s): on a backend without message events where one
    applies, as a lone case runs it."""
    platform = Platform(case.system, strategy)
    lone = replace(case, kernels=None, host_copy=None)
    fast = _fast(lone, platform) if case.root is None else "rooted"
    if isinstance(fast, str):
        fast = platform.collectives.issue(
            case.op, case.size, dims=case.dims, group=case.group, root=case.root
        )
        platform.engine.run()
    platform.close()
    return fast.duration


def _host_copy_alone(cfg: SystemConfig, host_copy: tuple[float, str]) -> float:
    platform = Platform(cfg)
    ends: list[float] = []
    platform.npus[0].host_copy(*host_copy, lambda _a: ends.append(platform.engine.now))
    platform.engine.run()
    return ends[0]


#: Sweep points' collective inputs (the arguments of :func:`simulate_collective`).
POINT_PARAMS = ("op", "size", "exact", "dims", "compute")


def collective_point_config(
    system: SystemConfig, system_doc: dict[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    """The normalised configuration of a collective sweep point (:data:`POINT_PARAMS`;
    ConfigError naming the parameter)."""
    op = raw.get("op", "all-reduce")
    COLLECTIVE_OPS.get(op, "op")
    if "size" not in raw:
        raise ConfigError("size", "is required for collective points (base.size or an axis)")
    size = parse_quantity(raw["size"], "size", "size")
    if size < 0:
        raise ConfigError("size", "must not be negative", raw["size"])
    exact = raw.get("exact", False)
    if not isinstance(exact, bool):
        raise ConfigError("exact", "must be true or false", exact)
    ndims = len(system.network.dimensions)
    dims = raw.get("dims")
    if dims is not None and (
        not isinstance(dims, list)
        or not dims
        or not all(isinstance(d, int) and 0 <= d < ndims for d in dims)
    ):
        raise ConfigError("dims", f"must be a list of dimension indices 0..{ndims - 1}", dims)
    compute = raw.get("compute")
    if compute is not None:
        if (
            not isinstance(compute, list)
            or len(compute) != 2
            or not all(isinstance(c, int | float) and c >= 0 for c in compute)
        ):
            raise ConfigError("compute", "must be [FLOPs, HBM bytes], both >= 0", compute)
        compute = [float(c) for c in compute]
    config = {"kind": "collective", "system": system_doc, "op": op, "size": size}
    config.update(exact=exact, dims=dims, compute=compute)
    return config


def collective_point_case(config: Mapping[str, Any]) -> CollectiveCase:
    """The case of a collective sweep point (:func:`collective_point_config`'s)."""
    from ..config.presets import system_from_dict

    dims, compute = config.get("dims"), config.get("compute")
    return make_collective_case(
        system_from_dict(config["system"]),
        config["op"],
        config["size"],
        mode="exact" if config.get("exact") else "symmetric",
        dims=tuple(dims) if dims else None,
        compute=(compute[0], compute[1]) if compute else None,
        search=bool(config.get("search", False)),
    )
