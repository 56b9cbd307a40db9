"""Communicator groups: slices and strided members of a dimension, their rules, groups running
at once, and groups in training workloads.

Conventions as in ``test_collectives``: ``S`` bytes (nccl-tests), a dimension's egress ``B`` (one
link, protocol efficiency 1), every message pays ``a = link_latency + endpoint_delay``. A ring
all-reduce on ``p`` members takes ``2(p-1)(a + S/(pB))``, a ring all-gather ``(p-1)(a + S/(pB))``.
"""

from __future__ import annotations

from typing import Any

import pytest
from systems import dim, make_system

from acesim import simulate_collective
from acesim.config import SystemConfig
from acesim.errors import TopologyError
from acesim.hardware.platform import Platform
from acesim.network.group import Axis, Group, Span, resolve
from acesim.network.topology import Topology
from acesim.runs import run_system
from acesim.training.loops import build_graph
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

MiB = 2**20
REL = 1e-9  # floating-point slack only

BW, LAT, DELAY = 100e9, 1e-6, 10e-9  # make_system's endpoint_delay default is 10 ns
A = LAT + DELAY
S = 16 * MiB


def ring_all_reduce(p: int, size: float = S, a: float = A, bw: float = BW) -> float:
    return 2 * (p - 1) * (a + size / p / bw)


def ring_all_gather(p: int, size: float = S, a: float = A, bw: float = BW) -> float:
    return (p - 1) * (a + size / p / bw)


def switch8(**collective: Any) -> SystemConfig:
    return make_system([dim("switch", 8, BW, LAT)], **collective)


HALF = Group((Span(0, 4),), "tp")  # ranks 0-3 and 4-7
PAIRS = Group((Span(0, 2, stride=4),), "dp")  # ranks {c, c+4}


# -- a slice of a switch dimension: the closed form of the group's own size -------------------


@pytest.mark.parametrize(("group", "p"), [(HALF, 4), (PAIRS, 2)])
def test_group_all_reduce_on_a_switch_slice_is_a_ring_of_its_members(group: Group, p: int) -> None:
    times = []
    for exact in (False, True):
        r = simulate_collective(switch8(), "all-reduce", S, group=group, exact=exact)
        assert r.time == pytest.approx(ring_all_reduce(p), rel=REL)
        assert r.algbw == pytest.approx(S / r.time, rel=1e-12)
        # busbw counts the group's members, not the dimension's 8
        assert r.busbw == pytest.approx(r.algbw * 2 * (p - 1) / p, rel=1e-12)
        assert r.bytes_sent_per_npu == pytest.approx(2 * S * (p - 1) / p, rel=1e-12)
        assert r.per_dimension_bytes == {"local": pytest.approx(2 * S * (p - 1) / p, rel=1e-12)}
        times.append(r.time)
    assert times[0] == pytest.approx(times[1], rel=REL)


def test_a_dimension_named_in_a_span_is_the_same_group() -> None:
    by_name = simulate_collective(switch8(), "all-reduce", S, group=Group((Span("local", 4),)))
    by_index = simulate_collective(switch8(), "all-reduce", S, group=HALF)
    assert by_name.time == by_index.time == pytest.approx(ring_all_reduce(4), rel=REL)


def test_whole_dimension_group_equals_dims() -> None:
    system = make_system([dim("switch", 4, BW, LAT), dim("ring", 2, BW / 2, 2 * LAT)])
    whole = simulate_collective(system, "all-reduce", S, group=Group.whole((1,)))
    dims = simulate_collective(system, "all-reduce", S, dims=(1,))
    assert (
        whole.time
        == dims.time
        == pytest.approx(ring_all_reduce(2, a=2 * LAT + DELAY, bw=BW / 2), rel=REL)
    )


# -- which ranks are members ------------------------------------------------------------------


def test_axis_positions_and_members_of_an_aligned_block() -> None:
    axis = Axis(0, 4)
    for c in range(8):
        assert axis.position(c) == c % 4
        block = c // 4 * 4
        assert {axis.coordinate(c, j) for j in range(4)} == set(range(block, block + 4))
        assert axis.coordinate(c, axis.position(c)) == c


def test_axis_positions_and_members_of_a_strided_group() -> None:
    axis = Axis(0, 2, stride=4)
    for c in range(8):
        assert axis.position(c) == c // 4
        partner = c + 4 if c < 4 else c - 4
        assert {axis.coordinate(c, j) for j in range(2)} == {c, partner}


def test_strided_members_inside_blocks() -> None:
    # 2 members 2 apart tile 8 coordinates as {0,2}, {1,3}, {4,6}, {5,7}.
    axis = Axis(0, 2, stride=2)
    groups = {frozenset(axis.coordinate(c, j) for j in range(2)) for c in range(8)}
    assert groups == {frozenset(g) for g in ({0, 2}, {1, 3}, {4, 6}, {5, 7})}


def _topology(system: SystemConfig) -> Topology:
    return Topology(system.network, system.collective)


def test_resolve_maps_spans_onto_axes() -> None:
    topo = _topology(make_system([dim("switch", 8), dim("ring", 4), dim("switch", 2)]))
    assert resolve(topo, HALF) == (Axis(0, 4, 1),)
    assert resolve(topo, PAIRS) == (Axis(0, 2, 4),)
    # None: every dimension whole; indices: whole dimensions; sorted by dimension
    assert resolve(topo, None) == (Axis(0, 8), Axis(1, 4), Axis(2, 2))
    assert resolve(topo, [2, 0]) == (Axis(0, 8), Axis(2, 2))
    assert resolve(topo, Group((Span("horizontal"), Span(0, stride=2)))) == (
        Axis(0, 4, 2),
        Axis(2, 2),
    )
    # spans of one member are dropped (the rank alone on that dimension)
    assert resolve(topo, Group((Span(0, 1), Span(1)))) == (Axis(1, 4),)


def test_exact_mode_ranks_wait_only_for_their_own_members() -> None:
    """Ranks of one half join late: only that half finishes late (by exactly the delay)."""
    late_by = 1e-3
    platform = Platform(switch8(), exact=True)
    rt = platform.collectives
    coll = rt.issue("all-reduce", S, group=HALF, ranks=[0, 1, 2, 3])
    for r in (4, 5, 6, 7):
        platform.engine.schedule(late_by, rt.join, coll, r)
    platform.engine.run()
    t = ring_all_reduce(4)
    for r in range(4):
        assert coll.rank_finished[r] == pytest.approx(t, rel=REL)
    for r in range(4, 8):
        assert coll.rank_finished[r] == pytest.approx(late_by + t, rel=REL)
    assert coll.bytes_sent_per_dim == {0: pytest.approx(8 * 2 * S * 3 / 4, rel=1e-12)}


def test_exact_mode_strided_partner_is_four_apart() -> None:
    """Rank 5 joins late: only its partner 1 (= 5 - 4) is held up.

    Two ring steps between 1 and 5, u = (S/2)/B per message: 5 sends its steps at D and D+u;
    1's step 0 completes when 5's first message lands (D+u+a), so 1 finishes at D+2u+a, and 5
    when 1's second message lands, D+2u+2a = D + T.
    """
    late_by = 1e-3
    platform = Platform(switch8(), exact=True)
    rt = platform.collectives
    coll = rt.issue("all-reduce", S, group=PAIRS, ranks=[r for r in range(8) if r != 5])
    platform.engine.schedule(late_by, rt.join, coll, 5)
    platform.engine.run()
    t = ring_all_reduce(2)
    for r in (0, 2, 3, 4, 6, 7):
        assert coll.rank_finished[r] == pytest.approx(t, rel=REL)
    assert coll.rank_finished[1] == pytest.approx(late_by + t - A, rel=REL)
    assert coll.rank_finished[5] == pytest.approx(late_by + t, rel=REL)


# -- rules ------------------------------------------------------------------------------------


def test_a_slice_of_a_ring_is_rejected_naming_the_dimension_and_the_rule() -> None:
    system = make_system([dim("switch", 2), dim("ring", 8)])
    with pytest.raises(
        TopologyError,
        match=r"collective group 'tp': a group on ring dimension 'vertical' must span the "
        r"whole ring \(8\), got 4 members",
    ):
        simulate_collective(system, "all-reduce", S, group=Group((Span(1, 4),), "tp"))
    with pytest.raises(TopologyError, match="ring dimension 'vertical' must span the whole ring"):
        simulate_collective(system, "all-reduce", S, group=Group((Span(1, stride=2),)))
    # the whole ring is fine
    whole = simulate_collective(system, "all-reduce", S, group=Group((Span(1, 8),)))
    assert whole.time == pytest.approx(ring_all_reduce(8), rel=REL)


@pytest.mark.parametrize(
    ("span", "members"),
    [
        (Span(0, 3), "3 members 1 apart"),
        (Span(0, 4, stride=4), "4 members 4 apart"),
        (Span(0, 2, stride=3), "2 members 3 apart"),
    ],
)
def test_size_times_stride_must_divide_the_dimension(span: Span, members: str) -> None:
    with pytest.raises(
        TopologyError,
        match=f"{members} do not tile dimension 'local' of 8 \\(size x stride must divide it\\)",
    ):
        simulate_collective(switch8(), "all-reduce", S, group=Group((span,)))


def test_a_dimension_spanned_twice_is_rejected() -> None:
    with pytest.raises(TopologyError, match="dimension 0 is spanned twice"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span(0, 2), Span(0, 2))))
    with pytest.raises(TopologyError, match="dimension 0 is spanned twice"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span(0), Span("local"))))


def test_unknown_dimensions_are_rejected() -> None:
    with pytest.raises(TopologyError, match=r"no dimension named 'vertical' \(dimensions: local\)"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span("vertical"),)))
    with pytest.raises(TopologyError, match=r"dimension 1 does not exist \(topology has 1\)"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span(1),)))


def test_bad_sizes_and_strides_are_rejected() -> None:
    with pytest.raises(TopologyError, match="stride on 'local' must be at least 1, got 0"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span(0, 2, stride=0),)))
    with pytest.raises(TopologyError, match="size on 'local' must be at least 1, got 0"):
        simulate_collective(switch8(), "all-reduce", S, group=Group((Span(0, 0),)))


def test_group_and_dims_together_are_rejected() -> None:
    platform = Platform(switch8())
    with pytest.raises(TopologyError, match="either a group or dims, not both"):
        platform.collectives.issue("all-reduce", S, dims=(0,), group=HALF)


# -- groups running at once share the egress of the dimensions they use ----------------------


@pytest.mark.parametrize("exact", [False, True])
def test_two_groups_on_one_dimension_share_its_egress(exact: bool) -> None:
    # Both run at once (two active chunks per dimension); every step sends one message of each
    # at B/2: the bandwidth term doubles, the latency term does not.
    platform = Platform(switch8(active_chunks_per_dimension=2), exact=exact)
    first = platform.collectives.issue("all-gather", S, group=HALF)
    second = platform.collectives.issue("all-gather", S, group=Group((Span(0, 4),)))
    platform.engine.run()
    shared = 3 * (A + 2 * S / 4 / BW)
    assert first.duration == pytest.approx(shared, rel=REL)
    assert second.duration == pytest.approx(shared, rel=REL)
    alone = Platform(switch8(), exact=exact)
    one = alone.collectives.issue("all-gather", S, group=HALF)
    alone.engine.run()
    assert one.duration == pytest.approx(ring_all_gather(4), rel=REL)
    assert first.duration - one.duration == pytest.approx(3 * S / 4 / BW, rel=REL)


@pytest.mark.parametrize("exact", [False, True])
def test_groups_on_different_dimensions_do_not_slow_each_other(exact: bool) -> None:
    system = make_system([dim("switch", 4, BW, LAT), dim("switch", 2, BW / 4, 3 * LAT)])
    platform = Platform(system, exact=exact)
    inner = platform.collectives.issue("all-gather", S, group=Group((Span(0),)))
    outer = platform.collectives.issue("all-gather", S, group=Group((Span(1),)))
    platform.engine.run()
    assert inner.duration == pytest.approx(ring_all_gather(4), rel=REL)
    assert outer.duration == pytest.approx(
        ring_all_gather(2, a=3 * LAT + DELAY, bw=BW / 4), rel=REL
    )


# -- groups and several collectives per pass in training -------------------------------------


def _by_name(ex: Any) -> dict[tuple[int, str], Any]:
    return {(r.node.iteration, r.node.name): r for r in ex.records[0].values()}


def test_a_pass_with_two_collectives_issues_both_and_the_next_compute_waits_for_both() -> None:
    inner_bw, outer_bw, outer_lat = BW, BW / 4, 3 * LAT
    system = make_system([dim("switch", 4, inner_bw, LAT), dim("switch", 2, outer_bw, outer_lat)])
    c = Compute(duration=50e-6)
    s_ar, s_ag = 8 * MiB, 2 * MiB
    l0 = Layer(
        "l0",
        forward=Pass(c, (Comm("all-reduce", s_ar, dims=(0,)), Comm("all-gather", s_ag, dims=(1,)))),
        input_grad=Pass(c),
        weight_grad=Pass(c),
    )
    l1 = Layer(
        "l1",
        forward=Pass(c),
        input_grad=Pass(c),
        weight_grad=Pass(
            c, (Comm("all-reduce", 4 * s_ar, group=HALF), Comm("reduce-scatter", s_ag, dims=(1,)))
        ),
    )
    _result, ex = run_system(system, Workload("two", (l0, l1)), iterations=3)
    rec = _by_name(ex)
    ar_alone = ring_all_reduce(4, s_ar)
    ag_alone = ring_all_gather(2, s_ag, a=outer_lat + DELAY, bw=outer_bw)
    assert ar_alone > ag_alone  # so that waiting for both is waiting for the all-reduce
    for it in range(3):
        fwd = rec[(it, "l0.fwd")]
        ar = rec[(it, "l0.fwd.all-reduce#0")]
        ag = rec[(it, "l0.fwd.all-gather#1")]
        assert ar.start == ag.start == fwd.end
        nxt = rec[(it, "l1.fwd")]
        assert nxt.start >= max(ar.end, ag.end)
        if it == 0:  # nothing else in flight: each runs on its own dimension as if alone
            assert ar.end - ar.start == pytest.approx(ar_alone, rel=REL)
            assert ag.end - ag.start == pytest.approx(ag_alone, rel=REL)
            assert nxt.start == ar.end > ag.end
        # the weight-gradient pass: both issued after its compute, neither blocks the next
        # compute, the next iteration's forward of the layer waits for both
        wg = rec[(it, "l1.wg")]
        wg_ar = rec[(it, "l1.wg.all-reduce#0")]
        wg_rs = rec[(it, "l1.wg.reduce-scatter#1")]
        assert wg_ar.start == wg_rs.start == wg.end == rec[(it, "l1.ig")].start
        if it < 2:
            later = rec[(it + 1, "l1.fwd")]
            assert later.start >= max(wg_ar.end, wg_rs.end)
            deps = {ex.records[0][d].node.name for d in later.node.deps}
            assert {"l1.wg.all-reduce#0", "l1.wg.reduce-scatter#1"} <= deps
            assert later.start == max(ex.records[0][d].end for d in later.node.deps)


@pytest.mark.parametrize("mode", ["symmetric", "exact"])
def test_a_group_collective_in_a_workload_takes_its_time_alone(mode: str) -> None:
    size = 8 * MiB
    c = Compute(duration=20e-6)
    layer = Layer(
        "tp",
        forward=Pass(c),
        input_grad=Pass(c),
        weight_grad=Pass(c, Comm("all-reduce", size, group=HALF)),
    )
    _result, ex = run_system(switch8(), Workload("tp", (layer,)), iterations=3, mode=mode)
    alone = simulate_collective(switch8(), "all-reduce", size, group=HALF)
    assert alone.time == pytest.approx(ring_all_reduce(4, size), rel=REL)
    for ranks in ex.records:
        for r in ranks.values():
            if r.node.kind == "collective":
                assert r.end - r.start == pytest.approx(alone.time, rel=REL)
    collectives = [r for r in ex.records[0].values() if r.node.kind == "collective"]
    assert len(collectives) == 3
    for coll in ex.collectives:
        assert coll.group_size == 4


def test_bucketing_never_merges_gradients_of_different_communicators() -> None:
    """Regression: layers 2-3 all-reduce over dimension 0 only, layers 0-1 over everything; a
    32 MiB bucket must not carry layer 2-3's gradients over the whole network (it did: one
    bucket of 32 MiB with layer 0's dims)."""
    c = Compute(duration=1e-6)
    layers = tuple(
        Layer(
            f"l{i}",
            forward=Pass(c),
            input_grad=Pass(c),
            weight_grad=Pass(c, Comm("all-reduce", 8 * MiB, dims=(0,) if i >= 2 else None)),
        )
        for i in range(4)
    )
    workload = Workload("mixed", layers)
    graph = build_graph(workload, iterations=1, loop="bucketed", bucket_size=32 * MiB)
    buckets = [(n.name, n.size, n.dims) for n in graph.ranks[0] if n.kind == "collective"]
    assert buckets == [
        ("bucket.2.all-reduce", 16 * MiB, (0,)),
        ("bucket.0.all-reduce", 16 * MiB, None),
    ]
    # the same communicator throughout: one bucket, as before
    same = Workload(
        "same", tuple(Layer(f"s{i}", weight_grad=layers[0].weight_grad) for i in range(4))
    )
    graph = build_graph(same, iterations=1, loop="bucketed", bucket_size=32 * MiB)
    assert [(n.size, n.dims) for n in graph.ranks[0] if n.kind == "collective"] == [
        (32 * MiB, None)
    ]
    system = make_system([dim("switch", 4, BW, LAT), dim("switch", 2, BW, LAT)])
    _result, ex = run_system(system, workload, iterations=3, loop="bucketed", bucket_size=32 * MiB)
    sent = {c.label: c.bytes_sent_per_dim for c in ex.collectives if c.label}
    assert set(sent["bucket.2.all-reduce"]) == {0}
