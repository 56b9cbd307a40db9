"""The per-rank backend beside compute kernels (acesim.network.rank_streams, acesim.runs.
beside) against the event simulation: a collective and each NPU's kernels, ranks made to
differ."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from systems import dim, examples
from test_rank_fluid import NETWORKS, PROTOCOLS, _close, with_and_without

import acesim.network.rank_fluid as rank_fluid
from acesim import simulate_collective
from acesim.config import SystemConfig, system_from_dict
from acesim.config.variation import LinkChange, NpuType, Straggler, Variation
from acesim.hardware.kernels import Gemm, Kernel, Roofline, Stream
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy
from acesim.runs.beside import run_beside

MiB = 2**20

KERNELS: list[Kernel] = [
    Gemm(4096, 4096, 4096, dtype="fp32"),  # compute-bound, many blocks in waves
    Gemm(8192, 1024, 512, dtype="fp32", name="thin"),
    Roofline(2e12, 2e9),  # work spread over any units
    Roofline(1e11, 5e9, blocks=200),  # memory-bound, blocks
    Stream(4e9, 1e9),
    Roofline(5e12, 0.0),  # no HBM: apart from the messages
]


def _system(
    dims: list[dict[str, Any]], endpoint: str, baseline: dict[str, Any], **collective: Any
) -> SystemConfig:
    return system_from_dict(
        {
            "name": "test",
            "network": {"dimensions": dims},
            "collective": collective,
            "endpoint": {"kind": endpoint, "baseline": baseline},
        }
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[SystemConfig, str, float, Variation, list[Kernel], float]:
    dims = draw(st.sampled_from(NETWORKS))
    op = draw(st.sampled_from(["all-reduce", "reduce-scatter", "all-gather"]))
    endpoint = draw(st.sampled_from(["baseline", "baseline", "baseline", "ideal"]))
    baseline = {
        "launch": draw(st.sampled_from(["fifo", "fifo", "priority", "immediate"])),
        "unit_policy": draw(st.sampled_from(["while_active", "while_active", "reserved"])),
        "comm_units": draw(st.sampled_from([2, 8, 24])),
    }
    system = _system(
        dims,
        endpoint,
        baseline,
        chunks=draw(st.integers(1, 4)),
        scheduling=draw(st.sampled_from(["fifo", "lifo"])),
        algorithms={op: "ring"},
        protocols=draw(st.sampled_from([{}, {"ring": PROTOCOLS}])),
    )
    npus = math.prod(d["size"] for d in dims)
    which = draw(st.sampled_from(["link", "straggler", "npu"]))
    if which == "link":
        dimension = draw(st.integers(0, len(dims) - 1))
        variation = Variation(
            links=(
                LinkChange(
                    dim=dimension,
                    rank=draw(st.integers(0, npus - 1)),
                    bandwidth=dims[dimension]["link_bandwidth"] * 0.25,
                ),
            )
        )
    elif which == "straggler":
        rank = draw(st.integers(0, npus - 1))
        slowdown = draw(st.sampled_from([1.3, 2.0]))
        variation = Variation(stragglers=(Straggler(rank=rank, slowdown=slowdown),))
    else:
        first = draw(st.integers(1, npus - 1))
        hbm = system.npu.hbm_bandwidth * draw(st.sampled_from([0.25, 0.5]))
        variation = Variation(
            npu_types=(
                NpuType.model_validate({"ranks": f"{first}-{npus - 1}", "hbm_bandwidth": hbm}),
            )
        )
    kernels = draw(st.lists(st.sampled_from(KERNELS), min_size=1, max_size=3))
    size = draw(st.sampled_from([4096.0, 3 * MiB + 1.0, 64 * MiB]))
    at = draw(st.sampled_from([0.0, 0.0, 20e-6, 1e-3]))
    return system, op, size, variation, kernels, at


def _run(
    system: SystemConfig,
    op: str,
    size: float,
    variation: Variation,
    kernels: list[Kernel],
    at: float,
) -> dict[str, Any]:
    data: dict[str, Any] = simulate_collective(
        system,
        op,
        size,
        exact=True,
        variation=variation,
        compute_kernels=kernels,
        collective_at=at,
    ).to_dict()
    return data


@settings(max_examples=examples(40), deadline=None)
@given(cases())
@example(
    (
        _system(NETWORKS[1], "baseline", {"launch": "fifo"}, chunks=4),
        "all-reduce",
        64 * MiB,
        Variation(stragglers=(Straggler(rank=5, slowdown=1.5),)),
        [KERNELS[0], KERNELS[3]],
        20e-6,
    )
)
def test_beside_kernels_the_per_rank_backend_gives_the_event_simulations_figures(
    case: tuple,
) -> None:
    fast, events = with_and_without(_run, *case)
    note = fast.pop("mode_note")
    assert "concurrent kernels share the NPUs" in events.pop("mode_note")
    # it ran, or met a tie the event order decides; the ideal endpoint's variants include
    # algorithms whose steps it does not take (its search keeps the fastest)
    allowed = ["timing needs the event order"]
    if case[0].endpoint.kind == "ideal":
        allowed.append("steps other than ring steps")
    assert "event path" not in note or any(why in note for why in allowed), note
    # communication's HBM bytes are the HBM integral less the kernels' demand on it: the
    # event path integrates the kernels' demand too (rounding of about 1e-16 of it per
    # change), here each kernel's is counted whole; 1e-12 of it allowed
    npu = Platform(case[0]).npus[0]
    demand = sum(npu.plan(k).hbm_demand for k in npu.chosen(case[4]))
    time = events["time"]
    for key, scale in (("hbm_bytes_per_npu", 1.0), ("hbm_bandwidth", 1 / time if time else 0)):
        a, b = fast.pop(key), events.pop(key)
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12 * demand * scale), (key, a, b)
    _close(fast, events)


def test_beside_kernels_the_npus_keep_what_the_event_path_leaves() -> None:
    """The NPUs' records after the per-rank backend: the kernel log, busy time, bytes,
    FLOPs, unit-seconds and the units the collective held, as the event path leaves them."""
    system = _system(NETWORKS[1], "baseline", {"launch": "fifo"}, chunks=4)
    slow = Variation(stragglers=(Straggler(rank=5, slowdown=1.5),))
    kernels = [KERNELS[0], KERNELS[3]]
    platforms = []
    for enabled in (True, False):
        platform = Platform(system, Strategy.every_npu(slow))
        rank_fluid.ENABLED = enabled
        try:
            done = run_beside(platform, "all-reduce", 64 * MiB, kernels, at=20e-6)
        finally:
            rank_fluid.ENABLED = True
        if isinstance(done, str):  # the event path, as runs.collective runs it
            assert not enabled and done == "concurrent kernels share the NPUs"
            for npu in platform.npus:
                npu.run_kernels(list(kernels), lambda: None, tag="compute")
            platform.engine.schedule(
                20e-6, lambda p=platform: p.collectives.issue("all-reduce", 64 * MiB)
            )
            platform.engine.run()
        else:
            assert platform.engine.events_processed == 0
        platforms.append(platform)
    fast, events = platforms
    assert fast.engine.now == events.engine.now
    for a, b in zip(fast.npus, events.npus, strict=True):
        assert a.kernel_log == b.kernel_log
        assert a.compute_busy == b.compute_busy
        assert a.compute_hbm_bytes == b.compute_hbm_bytes
        assert a.flops_by_math == b.flops_by_math
        assert math.isclose(a.compute_unit_seconds, b.compute_unit_seconds, rel_tol=1e-9)
        assert math.isclose(a.comm_hbm_bytes, b.comm_hbm_bytes, rel_tol=1e-9)
        assert a.units.peak == b.units.peak and a.units.held == b.units.held == 0
        b.units.sync()
        assert math.isclose(a.units.held_time, b.units.held_time, rel_tol=1e-9)


def test_beside_a_host_copy_or_without_variation_the_event_path_runs() -> None:
    system = _system([dim("ring", 4, 100e9, 1e-6)], "baseline", {})
    plain = simulate_collective(
        system, "all-reduce", 64 * MiB, exact=True, compute_kernels=[KERNELS[2]]
    )
    assert "concurrent kernels share the NPUs" in plain.mode_note
    slow = Variation(links=(LinkChange(dim=0, rank=1, bandwidth=25e9),))
    hosted = system.model_copy(
        update={"npu": system.npu.model_copy(update={"host_link_bandwidth": 64e9})}
    )
    copy = simulate_collective(
        hosted, "all-reduce", 64 * MiB, exact=True, variation=slow, host_copy=(1e9, "h2d")
    )
    assert "concurrent kernels share the NPUs" in copy.mode_note
