"""Top-level entry points: simulate one collective on a system."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .config.resolve import resolve_system
from .config.system import SystemConfig
from .config.variation import Variation
from .errors import ConfigError, SimulationError, TopologyError
from .hardware.endpoints import ENDPOINT_KINDS
from .hardware.kernels import Kernel, Roofline
from .hardware.platform import Platform
from .network.collective import Collective
from .network.group import Group
from .network.ops import COLLECTIVE_OPS
from .network.tuner_check import check_choice
from .network.vectorized import run_alone
from .results.collective import CollectiveResult, bus_factor
from .results.jsonout import first_non_finite
from .training.bounds import BoundRecorder, collective_bounds
from .units import parse_quantity

__all__ = ["simulate_collective"]


def _nothing() -> None:
    """A background kernel needs no continuation."""


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
        exact: simulate every NPU instead of one representative.
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
        variation: exact mode: stragglers and degraded or failed links
            (:class:`acesim.config.variation.Variation`).
        root: a rooted operation's root (broadcast, reduce), its position in the group
            (default 0; exact mode only: symmetric mode refuses rooted operations).
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
    COLLECTIVE_OPS.get(op, "op")
    nbytes = parse_quantity(size, "size", "size")
    if nbytes < 0:
        raise ConfigError("size", "must not be negative", size)
    cfg = resolve_system(system)
    if endpoint is not None:
        ENDPOINT_KINDS.get(endpoint, "endpoint")
        cfg = cfg.with_endpoint(endpoint)
    args = (
        op,
        nbytes,
        exact,
        dims,
        group,
        compute,
        compute_kernels,
        host_copy,
        variation,
        root,
        collective_at,
    )
    kind = ENDPOINT_KINDS.get(cfg.endpoint.kind)
    if kind.role != "bound" or not bound_variants:
        result, predicted = _simulate(cfg, *args)
        if tuner_check and result.algorithm is not None and len(predicted) > 1:
            check = check_choice(predicted, result.algorithm, result.time, _forced(cfg, args))
            if check is not None:
                result = replace(result, tuner=check.to_dict())
        return result
    # the bound: every variant (another kind's algorithms and pieces at no cost), the fastest
    best: CollectiveResult | None = None
    for variant in kind.variants_of(cfg):
        result = _simulate(cfg.with_endpoint(None, **variant.changes), *args)[0]
        if best is None or result.time < best.time:
            best = result
    assert best is not None  # variants_of returns at least one
    return best


def _simulate(
    cfg: SystemConfig,
    op: str,
    nbytes: float,
    exact: bool,
    dims: tuple[int, ...] | None,
    group: Group | None,
    compute: tuple[float, float] | None,
    compute_kernels: Sequence[Kernel] | None,
    host_copy: tuple[float, str] | None,
    variation: Variation | None,
    root: int | None,
    collective_at: float,
) -> tuple[CollectiveResult, tuple[tuple[str, float], ...]]:
    """:func:`simulate_collective` of one endpoint configuration, and the tuner's predicted
    time of each candidate algorithm (empty: no choice made)."""
    platform = Platform(cfg, exact=exact, variation=variation)
    kernel_times: dict[str, float] = {}
    kernels: list[Kernel] | None = None
    if compute is not None and compute_kernels is not None:
        raise ConfigError("compute_kernels", "give either compute or compute_kernels, not both")
    if compute is not None:
        flops, hbm = compute
        if not all(math.isfinite(v) and v >= 0 for v in (flops, hbm)):
            raise ConfigError(
                "with_compute", "FLOPs and bytes must be finite and not negative", compute
            )
        kernels = [Roofline(flops, hbm)]
    elif compute_kernels is not None:
        kernels = list(compute_kernels)
        if not kernels:
            raise ConfigError("compute_kernels", "give at least one kernel", compute_kernels)
    _check_collective_at(collective_at, kernels is not None)
    if kernels is not None:
        for npu in platform.npus:
            npu.run_kernels(kernels, _nothing, tag="compute")
    copy_end: list[float] = []
    if host_copy is not None:
        copy_bytes, direction = host_copy
        for npu in platform.npus:
            npu.host_copy(copy_bytes, direction, lambda _a: copy_end.append(platform.engine.now))
    recorder = BoundRecorder()
    platform.engine.bound_listener = recorder
    fast = (
        None
        if kernels is not None or host_copy is not None
        else run_alone(platform.collectives, op, nbytes, dims=dims, group=group)
    )
    if fast is None:
        coll, end = _issue_and_run(platform, op, nbytes, dims, group, root, collective_at)
    else:
        coll = fast
        end = platform.engine.now
    time = coll.duration
    bound_by = collective_bounds(recorder, coll.issued, coll.issued + time)
    if not math.isfinite(end) or not math.isfinite(time):
        raise SimulationError(
            f"{op} of {nbytes:g} bytes on {cfg.name}: the time is not finite ({time}); check "
            "the system's latencies and bandwidths"
        )
    ranks = len(platform.npus)
    n = coll.group_size
    # A group of one NPU moves nothing: no bandwidth to report (nccl-tests prints 0 busbw).
    algbw = nbytes / time if time > 0 else 0.0
    hbm_comm = _comm_hbm_bytes(platform) / ranks
    per_dim = {
        platform.topology.dimensions[d].name: b / ranks for d, b in coll.bytes_sent_per_dim.items()
    }
    if kernels is not None:
        npu = platform.npus[0]
        tag, start, stop, alone = npu.kernel_log[0]
        solo = _collective_alone(cfg, op, nbytes, exact, dims, group, variation, root)
        kernel_times = {
            "kernel_time": stop - start,
            "kernel_time_alone": alone,
            "kernel_slowdown": (stop - start) / alone if alone > 0 else 1.0,
            "collective_time_alone": solo,
            "collective_slowdown": time / solo if solo > 0 else 1.0,
            "end_time": end,
        }
    if host_copy is not None:
        alone = _host_copy_alone(cfg, host_copy)
        copy_time = max(copy_end)
        if "collective_time_alone" in kernel_times:
            solo = kernel_times["collective_time_alone"]
        else:
            solo = _collective_alone(cfg, op, nbytes, exact, dims, group, variation, root)
        kernel_times.update(
            {
                "host_copy_time": copy_time,
                "host_copy_time_alone": alone,
                "host_copy_slowdown": copy_time / alone if alone > 0 else 1.0,
                "collective_time_alone": solo,
                "collective_slowdown": time / solo if solo > 0 else 1.0,
                "end_time": end,
            }
        )
    result = CollectiveResult(
        op=op,
        size=nbytes,
        npus=platform.topology.npus,
        time=time,
        algbw=algbw,
        busbw=algbw * bus_factor(op, n),
        endpoint=cfg.endpoint.kind,
        mode="exact" if exact else "symmetric",
        bytes_sent_per_npu=coll.bytes_sent / ranks,
        bytes_received_per_npu=coll.bytes_received / ranks,
        hbm_bytes_per_npu=hbm_comm,
        network_bandwidth=coll.bytes_sent / ranks / time if time > 0 else 0.0,
        hbm_bandwidth=hbm_comm / time if time > 0 else 0.0,
        per_dimension_bytes=per_dim,
        compute=kernel_times or None,
        system=cfg.name,
        shape=list(cfg.network.shape),
        group_size=n,
        protocol=coll.protocol.name if coll.protocol is not None else None,
        algorithm=coll.algorithm,
        comm_units=platform.npus[0].units.peak,
        bound=max(bound_by, key=lambda k: bound_by[k]) if bound_by else "",
        bound_by=bound_by,
    )
    where = first_non_finite(result.to_dict())
    if where is not None:
        raise SimulationError(
            f"{op} of {nbytes:g} bytes on {cfg.name} ({cfg.endpoint.kind}): {where} is not "
            "finite (a cost beyond what the model can represent; check the system's "
            "latencies, bandwidths and endpoint settings)"
        )
    predicted: tuple[tuple[str, float], ...] = ()
    if coll.algorithm is not None and cfg.collective.algorithm is None:
        predicted = platform.collectives.choose(op, nbytes, dims=dims, group=group)[2].predicted
    return result, predicted


def _forced(cfg: SystemConfig, args: tuple[Any, ...]) -> Callable[[str], float | None]:
    """``algorithm`` -> the collective's time with it forced (None: it cannot run)."""

    def simulate(algorithm: str) -> float | None:
        collective = cfg.collective.model_copy(update={"algorithm": algorithm})
        try:
            return _simulate(cfg.model_copy(update={"collective": collective}), *args)[0].time
        except (ConfigError, TopologyError):
            return None

    return simulate


def _check_collective_at(collective_at: float, with_kernels: bool) -> None:
    """``collective_at`` is a finite time of at least 0 s, and given only with kernels."""
    if not (math.isfinite(collective_at) and collective_at >= 0):
        raise ConfigError("collective_at", "must be a finite time of at least 0 s", collective_at)
    if collective_at > 0 and not with_kernels:
        raise ConfigError(
            "collective_at", "applies only with concurrent compute kernels", collective_at
        )


def _issue_and_run(
    platform: Platform,
    op: str,
    nbytes: float,
    dims: tuple[int, ...] | None,
    group: Group | None,
    root: int | None,
    at: float,
) -> tuple[Collective, float]:
    """Issue the collective ``at`` s from now (at once with 0) and run the platform: the
    collective and the end time, s."""
    issued: list[Collective] = []

    def issue() -> None:
        issued.append(platform.collectives.issue(op, nbytes, dims=dims, group=group, root=root))

    if at > 0:
        platform.engine.schedule(at, issue)
    else:
        issue()
    end = platform.engine.run()
    return issued[0], end


def _collective_alone(
    cfg: SystemConfig,
    op: str,
    nbytes: float,
    exact: bool,
    dims: tuple[int, ...] | None,
    group: Group | None,
    variation: Variation | None,
    root: int | None = None,
) -> float:
    platform = Platform(cfg, exact=exact, variation=variation)
    coll = platform.collectives.issue(op, nbytes, dims=dims, group=group, root=root)
    platform.engine.run()
    return coll.duration


def _host_copy_alone(cfg: SystemConfig, host_copy: tuple[float, str]) -> float:
    platform = Platform(cfg)
    ends: list[float] = []
    platform.npus[0].host_copy(*host_copy, lambda _a: ends.append(platform.engine.now))
    platform.engine.run()
    return ends[0]


def _comm_hbm_bytes(platform: Platform) -> float:
    """HBM bytes consumed by communication activities (all simulated NPUs)."""
    return sum(npu.comm_hbm_bytes for npu in platform.npus)
