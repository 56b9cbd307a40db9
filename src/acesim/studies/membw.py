"""The paper's memory-bandwidth analysis: HBM traffic per network byte, baseline vs ACE.

For each network size (paper-style 3D tori: the local dimension kept, the rest split evenly),
one collective is simulated per endpoint with HBM bandwidth made ample, so that the figures are
the endpoints' own byte accounting and not a rate effect:

* ``ratio`` = HBM bytes / network bytes sent, per NPU;
* the HBM bandwidth needed to drive a network bandwidth ``X`` is then ``ratio * X``.

Then, with the system's real network, the HBM bandwidth each endpoint needs to reach a target
fraction (default 95%) of the network bandwidth it reaches with ample HBM is found by bisection
over simulated runs: this is where chunking, SRAM capacity, latency and phase overlap make the
simulated need depart from the accounting. ``network_bandwidth`` reports what the ideal
endpoint reaches on the same network, ``baseline_network_bandwidth`` and
``ace_network_bandwidth`` what each endpoint reaches with ample HBM (the baseline may be bound
by its compute units).

**At equal network bandwidth** (the paper's claim: ACE needs less HBM bandwidth "to drive the
same network bandwidth"): each endpoint is given enough of its own resources (its kind's
``ample`` settings: every compute unit but one for the baseline's kernels; DMA and ALUs of any
rate and SRAMs of 16, 64 and 256 MiB for ACE, the best of them used, since a larger SRAM cuts
a chunk into larger pieces that pipeline less) that only HBM and the network can bind it, and
the HBM bandwidth each needs to drive the *same* network bandwidth, ``target`` of the least of
what the ideal endpoint and the two endpoints (each so equipped, with ample HBM) reach -- a
bandwidth both can drive -- is found by bisection over simulated runs. ``equal_saving`` =
baseline's need / ACE's: the simulated saving; the accounting ``saving`` is its consistency
check (the two agree when nothing but average HBM bytes per network byte separates the
endpoints; they part where one step kind draws more than the average, or a pipeline stage
waits on another).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..config.resolve import resolve_system
from ..config.system import SystemConfig
from ..hardware.endpoints import ENDPOINT_KINDS
from ..results.collective import CollectiveResult
from ..results.figure_file import save_figure
from ..simulate import simulate_collective
from .dedup import ExactMemo

#: HBM bandwidth used to make memory never bind when measuring byte ratios, B/s.
AMPLE_HBM = 1e18
#: The collectives this process simulated, by what determines them: the bisections of one
#: network size retrace each other's steps across targets, and a sensitivity variant's
#: analysis repeats every run whose inputs it does not change (ACE's ample settings replace
#: its DMA rate, so ``dma_half`` changes none of ACE's runs; ``static_hbm`` none of ACE's,
#: ``store_and_forward`` none of the baseline's): each is simulated once. (Looked up from the
#: system with the endpoint's changes applied, :func:`_changed`; a derived system's
#: validation reads every kind's settings and is not counted as a read.)
MEMO = ExactMemo()


def _simulate(
    system: SystemConfig,
    shape: Sequence[int],
    hbm: float,
    endpoint: str,
    op: str,
    size: float,
    changes: dict[str, object] | None = None,
) -> CollectiveResult:
    """``simulate_collective(_with(system, shape, hbm, endpoint, changes), op, size)``, each
    distinct simulation once (:data:`MEMO`), looked up before the system is derived: from
    the system with the endpoint's ``changes`` applied (:func:`_changed`), so that settings
    the changes replace (ACE's ample DMA rate) are not in the look-up."""
    base = _changed(system, endpoint, changes)
    how = (tuple(shape), hbm, endpoint)
    result: CollectiveResult = MEMO.call_derived(
        base,
        how,
        lambda: _with(base, shape, hbm, endpoint),
        simulate_collective,
        op,
        size,
    )
    return result


#: :func:`_changed`'s systems, by the system's identity, endpoint and changes (the system kept
#: with its changed copy, so the identity stays its own); a few analyses' worth
_CHANGED: dict[tuple[int, str, tuple[tuple[str, object], ...]], tuple[SystemConfig, SystemConfig]]
_CHANGED = {}


def _changed(
    system: SystemConfig, endpoint: str, changes: dict[str, object] | None
) -> SystemConfig:
    """``system`` with endpoint ``endpoint`` and its settings ``changes`` (one object per
    system, endpoint and changes: the memo writes each base's form once)."""
    key = (id(system), endpoint, tuple(sorted((changes or {}).items())))
    known = _CHANGED.get(key)
    if known is not None and known[0] is system:
        return known[1]
    if len(_CHANGED) >= 64:
        _CHANGED.clear()
    changed = system.with_endpoint(endpoint, **(changes or {}))
    _CHANGED[key] = (system, changed)
    return changed


@dataclass
class MembwRow:
    """One network size. Bandwidths in B/s."""

    npus: int
    shape: list[int]
    baseline_ratio: float
    ace_ratio: float
    saving: float
    network_bandwidth: float
    baseline_network_bandwidth: float
    ace_network_bandwidth: float
    baseline_needed_hbm: float | None
    ace_needed_hbm: float | None
    target: float = 0.95
    #: the network bandwidth both endpoints are asked to drive (target x the least of what the
    #: ideal endpoint and each amply equipped endpoint reach), B/s
    equal_network_bandwidth: float | None = None
    #: the HBM bandwidth each needs for it with ample resources of its own, B/s
    baseline_equal_hbm: float | None = None
    ace_equal_hbm: float | None = None
    #: baseline_equal_hbm / ace_equal_hbm: the simulated saving at equal network bandwidth
    equal_saving: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _with(
    system: SystemConfig,
    shape: Sequence[int],
    hbm: float,
    endpoint: str,
    changes: dict[str, object] | None = None,
) -> SystemConfig:
    """``system`` resized to ``shape``, with ``hbm`` B/s of HBM and endpoint ``endpoint``
    (with its settings ``changes``)."""
    resized = resolve_system(system, shape=shape, overrides={"npu.hbm_bandwidth": hbm})
    return resized.with_endpoint(endpoint, **(changes or {}))


def _offers(system: SystemConfig, endpoint: str) -> list[dict[str, object]]:
    kind = ENDPOINT_KINDS.get(endpoint)
    return kind.ample(system) if kind.ample is not None else [{}]


def _ceiling(
    system: SystemConfig, shape: Sequence[int], endpoint: str, op: str, size: float
) -> float:
    """The network bandwidth (B/s) ``endpoint`` drives with ample HBM and ample resources of
    its own (the best of its kind's ample settings)."""
    return max(
        _simulate(system, shape, AMPLE_HBM, endpoint, op, size, c).network_bandwidth
        for c in _offers(system, endpoint)
    )


def _equal_need(
    system: SystemConfig,
    shape: Sequence[int],
    endpoint: str,
    op: str,
    size: float,
    bandwidth: float,
) -> float:
    """The HBM bandwidth (B/s) ``endpoint`` needs to drive ``bandwidth`` (B/s) with ample
    resources of its own: the least over its kind's ample settings (module)."""
    return min(
        _needed_hbm(system, shape, endpoint, op, size, 1.0, bandwidth, changes)
        for changes in _offers(system, endpoint)
    )


def _needed_hbm(
    system: SystemConfig,
    shape: Sequence[int],
    endpoint: str,
    op: str,
    size: float,
    target: float,
    ideal_bw: float,
    changes: dict[str, object] | None = None,
) -> float:
    """Smallest HBM bandwidth (B/s) at which ``endpoint`` (with its settings ``changes``)
    reaches ``target * ideal_bw`` (B/s): doubling from 1 GB/s, then bisection. A bandwidth
    that cannot reach it (:func:`_cannot_reach`) is not simulated: the search takes the same
    steps, so the result is the same."""
    goal = target * ideal_bw
    per_byte = _hbm_per_network_byte(system, shape, endpoint, op, size, changes)
    lo, hi = 1e9, 1e9
    while hi <= 1e16:
        if not _cannot_reach(hi, per_byte, goal):
            r = _simulate(system, shape, hi, endpoint, op, size, changes)
            if r.network_bandwidth >= goal:
                break
        lo, hi = hi, hi * 2
    for _ in range(30):
        if hi / lo < 1.005:
            break
        mid = (lo * hi) ** 0.5
        if _cannot_reach(mid, per_byte, goal):
            lo = mid
            continue
        r = _simulate(system, shape, mid, endpoint, op, size, changes)
        if r.network_bandwidth >= goal:
            hi = mid
        else:
            lo = mid
    return hi


#: The relative margin of :func:`_cannot_reach`: the HBM bytes per network byte are the
#: endpoint's per-message accounting, the same at every HBM bandwidth but for the order of
#: their float additions (measured within 2.2e-9 across the reproduction's analyses)
_REACH_MARGIN = 1e-6


def _hbm_per_network_byte(
    system: SystemConfig,
    shape: Sequence[int],
    endpoint: str,
    op: str,
    size: float,
    changes: dict[str, object] | None,
) -> float:
    """HBM bytes per network byte sent (B/B) of ``endpoint``'s collective, from its run with
    ample HBM (0 where it sends or reads nothing: then nothing is ruled out)."""
    r = _simulate(system, shape, AMPLE_HBM, endpoint, op, size, changes)
    if not (r.bytes_sent_per_npu > 0 and r.hbm_bytes_per_npu > 0):
        return 0.0
    return r.hbm_bytes_per_npu / r.bytes_sent_per_npu


def _cannot_reach(hbm: float, per_byte: float, goal: float) -> bool:
    """Whether a collective that moves ``per_byte`` HBM bytes per network byte, all of them
    through HBM of ``hbm`` B/s at most (the NPU's capacity is ``hbm x hbm_efficiency``,
    shared or partitioned), is bound below ``goal`` B/s of network bandwidth: its network
    bandwidth (bytes sent / time) is at most ``hbm / per_byte``."""
    return per_byte > 0 and hbm / per_byte * (1 + _REACH_MARGIN) < goal


def membw_analysis(
    system: SystemConfig,
    *,
    npus: Sequence[int] = (16, 32, 64, 128, 256, 512, 1024),
    op: str = "all-reduce",
    size: float = 64 * 2**20,
    target: float = 0.95,
    simulate_need: bool = True,
    equal_bandwidth: bool = True,
    progress: Callable[[], Any] | None = None,
) -> list[MembwRow]:
    """Rows of the analysis for each NPU count (see module docstring)."""
    from ..config.resolve import shape_for

    doc = system.model_dump(mode="python")
    rows = []
    for n in npus:
        shape = shape_for(doc, n)
        ratios = {}
        ample = {}
        for endpoint in ("baseline", "ace"):
            r = _simulate(system, shape, AMPLE_HBM, endpoint, op, size)
            ratios[endpoint] = r.hbm_bytes_per_npu / r.bytes_sent_per_npu
            ample[endpoint] = r.network_bandwidth
        ideal = _simulate(system, shape, AMPLE_HBM, "ideal", op, size)
        need_b = need_a = None
        equal_bw = equal_b = equal_a = None
        if equal_bandwidth:
            reach = min(
                [ideal.network_bandwidth]
                + [_ceiling(system, shape, k, op, size) for k in ("baseline", "ace")]
            )
            equal_bw = target * reach
            equal_b = _equal_need(system, shape, "baseline", op, size, equal_bw)
            equal_a = _equal_need(system, shape, "ace", op, size, equal_bw)
        if simulate_need:
            need_b = _needed_hbm(system, shape, "baseline", op, size, target, ample["baseline"])
            need_a = _needed_hbm(system, shape, "ace", op, size, target, ample["ace"])
        rows.append(
            MembwRow(
                npus=n,
                shape=list(shape),
                baseline_ratio=ratios["baseline"],
                ace_ratio=ratios["ace"],
                saving=ratios["baseline"] / ratios["ace"],
                network_bandwidth=ideal.network_bandwidth,
                baseline_network_bandwidth=ample["baseline"],
                ace_network_bandwidth=ample["ace"],
                baseline_needed_hbm=need_b,
                ace_needed_hbm=need_a,
                target=target,
                equal_network_bandwidth=equal_bw,
                baseline_equal_hbm=equal_b,
                ace_equal_hbm=equal_a,
                equal_saving=equal_b / equal_a if equal_b and equal_a else None,
            )
        )
        if progress is not None:
            progress()
    return rows


def plot_membw(rows: list[MembwRow], path: str, title: str = "") -> None:
    """Write :func:`membw_figure` to ``path`` (PNG, SVG or PDF by suffix)."""
    import matplotlib.pyplot as plt

    fig = membw_figure(rows, title)
    save_figure(fig, path, dpi=150)
    plt.close(fig)


def membw_figure(rows: list[MembwRow], title: str = "") -> Any:
    """HBM bandwidth needed against network bandwidth driven, baseline vs ACE: the simulated
    need first, the byte accounting as its reference.

    * Filled markers joined per endpoint, each labelled with its NPU count: the simulated
      need at *equal* network bandwidth (``equal_network_bandwidth``; the HBM saving is the
      ratio of the two), the result the figure is for.
    * Hollow markers: the simulated need to reach ``target`` of each endpoint's own bandwidth.
    * Lines: the byte accounting (HBM bytes per network byte x network bandwidth). Sizes whose
      ratio is the same (to 0.1%) share one line, so no line hides under another; an endpoint
      whose ratio changes with the size is drawn as the band between its extremes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import finish, gbps_axis

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    reached = [r.baseline_network_bandwidth for r in rows] + [r.ace_network_bandwidth for r in rows]
    equal = [r.equal_network_bandwidth for r in rows if r.equal_network_bandwidth is not None]
    top = max(reached + equal)
    net = [top * k / 20 for k in range(0, 23)]
    styles = (("baseline", "tab:red", "x", "baseline"), ("ACE", "tab:blue", "o", "ace"))
    for name, color, _, key in styles:
        _accounting(ax, rows, net, name, color, key)
    for name, color, marker, key in styles:
        _simulated(ax, rows, name, color, marker, key)
    gbps_axis(ax.xaxis, "network bandwidth driven per NPU")
    gbps_axis(ax.yaxis, "HBM bandwidth needed")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    finish(fig, ax, title or "HBM bandwidth needed to drive the network")
    return fig


def _accounting(
    ax: Any, rows: list[MembwRow], net: list[float], name: str, color: str, key: str
) -> None:
    """The byte accounting of one endpoint: one line per distinct ratio, or a band."""
    ratios = sorted({round(getattr(r, f"{key}_ratio"), 3) for r in rows})
    if len(ratios) == 1:
        ax.plot(
            net,
            [ratios[0] * x for x in net],
            color=color,
            lw=1,
            ls="--",
            label=f"{name} accounting, {ratios[0]:.2f} B/B",
        )
        return
    lo, hi = ratios[0], ratios[-1]
    ax.fill_between(
        net,
        [lo * x for x in net],
        [hi * x for x in net],
        color=color,
        alpha=0.15,
        lw=0,
        label=f"{name} accounting, {lo:.2f}-{hi:.2f} B/B",
    )


def _simulated(ax: Any, rows: list[MembwRow], name: str, color: str, marker: str, key: str) -> None:
    """The simulated needs of one endpoint: at equal network bandwidth (filled, joined,
    labelled with NPU counts) and at its own bandwidth (hollow)."""
    pts = [
        (r.equal_network_bandwidth, getattr(r, f"{key}_equal_hbm"), r.npus)
        for r in rows
        if r.equal_network_bandwidth is not None and getattr(r, f"{key}_equal_hbm") is not None
    ]
    if pts:
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            color=color,
            marker=marker,
            ms=7,
            lw=1.2,
            label=f"{name} simulated, at equal network bw",
            zorder=4,
        )
        labels: dict[tuple[float, float], list[str]] = {}
        for x, y, npus in pts:  # one label for sizes that need the same (to 0.1%)
            spot = next((k for k in labels if _close(k, (x, y))), (x, y))
            labels.setdefault(spot, []).append(str(npus))
        for i, ((x, y), names) in enumerate(labels.items()):
            ax.annotate(  # alternately above and below: neighbouring sizes sit close
                ", ".join(names),
                (x, y),
                textcoords="offset points",
                xytext=(6, 4) if i % 2 == 0 else (6, -11),
                fontsize=7,
                color=color,
            )
    own = [
        (r.target * getattr(r, f"{key}_network_bandwidth"), getattr(r, f"{key}_needed_hbm"))
        for r in rows
        if getattr(r, f"{key}_needed_hbm") is not None
    ]
    if own:
        ax.scatter(
            [p[0] for p in own],
            [p[1] for p in own],
            edgecolors=color,
            facecolors="none",
            marker="s",
            s=22,
            label=f"{name} simulated, at {100 * rows[0].target:.0f}% of its own bw",
            zorder=3,
        )


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(abs(u - v) <= 1e-3 * max(abs(u), abs(v), 1.0) for u, v in zip(a, b, strict=True))
