"""Collectives against closed forms, against ASTRA-sim 2.0, and their invariants.

Conventions (acesim's, see ``acesim.network.algorithms``): ``S`` is the nccl-tests size (the
whole buffer of an all-reduce, the input of a reduce-scatter, the output of an all-gather, the
send buffer of an all-to-all). A dimension of ``p`` NPUs gives each NPU an egress bandwidth
``B = link_bandwidth * links_per_npu * protocol_efficiency`` and every message pays
``a = link_latency + collective.endpoint_delay``. Endpoint ``ideal``, one chunk unless stated.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from systems import dim, examples, make_system

from acesim import simulate_collective
from acesim.config import SystemConfig, load_system
from acesim.hardware.platform import Platform
from acesim.network.trees import tree_sends

MiB = 2**20
GiB = 2**30
REL = 1e-9  # floating-point slack only: the model must hit these closed forms exactly


def run(system: SystemConfig, op: str, size: float, **kw: object) -> float:
    kw.setdefault("bound_variants", False)  # the free endpoint as configured: closed forms
    return simulate_collective(system, op, size, **kw).time  # type: ignore[arg-type]


# -- one dimension: closed forms ---------------------------------------------------------------


@pytest.mark.parametrize("p", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("links", [1, 2])
def test_ring_allreduce_matches_closed_form(p: int, links: int) -> None:
    bw, lat, delay, eff, size = 50e9, 700e-9, 20e-9, 0.8, 64 * MiB
    system = make_system(
        [dim("ring", p, bw, lat, links)], endpoint_delay=delay, protocol_efficiency=eff
    )
    B, a = bw * links * eff, lat + delay
    assert run(system, "all-reduce", size) == pytest.approx(
        2 * (p - 1) * (a + size / (p * B)), rel=REL
    )


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather"])
@pytest.mark.parametrize("p", [2, 5, 8])
def test_ring_reduce_scatter_and_all_gather_match_closed_form(op: str, p: int) -> None:
    system = make_system([dim("ring", p, 25e9, 500e-9)], endpoint_delay=10e-9)
    B, a, size = 25e9, 510e-9, 8 * MiB
    assert run(system, op, size) == pytest.approx((p - 1) * (a + size / (p * B)), rel=REL)


@pytest.mark.parametrize("kind", ["switch", "fully_connected"])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_direct_collectives_match_closed_form(kind: str, p: int) -> None:
    """Direct: one step of p-1 messages of S/p sharing the egress (two for all-reduce)."""
    algos = {op: "direct" for op in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")}
    system = make_system([dim(kind, p, 25e9, 1e-6, links=4)], algorithms=algos)
    B, a, size = 100e9, 1e-6 + 10e-9, 16 * MiB
    one_step = a + (p - 1) * size / (p * B)
    assert run(system, "all-reduce", size) == pytest.approx(2 * one_step, rel=REL)
    for op in ("reduce-scatter", "all-gather", "all-to-all"):
        assert run(system, op, size) == pytest.approx(one_step, rel=REL)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_halving_doubling_matches_closed_form(p: int) -> None:
    algos = {
        "all-reduce": "halving_doubling",
        "reduce-scatter": "halving_doubling",
        "all-gather": "halving_doubling",
    }
    system = make_system([dim("switch", p, 50e9, 2e-6)], algorithms=algos)
    B, a, size = 50e9, 2e-6 + 10e-9, 32 * MiB
    levels = int(math.log2(p))
    half = sum(a + size / 2 ** (k + 1) / B for k in range(levels))
    assert run(system, "all-reduce", size) == pytest.approx(2 * half, rel=REL)
    assert run(system, "reduce-scatter", size) == pytest.approx(half, rel=REL)
    assert run(system, "all-gather", size) == pytest.approx(half, rel=REL)


@pytest.mark.parametrize(
    ("kind", "p"), [("switch", 8), ("switch", 16), ("fully_connected", 6), ("ring", 5)]
)
def test_double_binary_tree_matches_its_documented_cost(kind: str, p: int) -> None:
    """algorithms.py: 2 ceil(log2 p) levels that together send what NCCL's busiest rank of its
    double binary tree sends (trees.tree_sends: u S up, d S down), 2 ceil(log2 p) a +
    (u + d) S / B; from four ranks u = d = 1 (a rank with two children in one tree and a
    parent in both)."""
    algos = {"all-reduce": "double_binary_tree"}
    system = make_system([dim(kind, p, 40e9, 3e-6)], algorithms=algos)
    B, a, size = 40e9, 3e-6 + 10e-9, 4 * MiB
    up, down = tree_sends(p)
    assert (up, down) == (1.0, 1.0)
    expected = 2 * math.ceil(math.log2(p)) * a + (up + down) * size / B
    assert run(system, "all-reduce", size) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("chunks", [2, 4, 16])
def test_chunks_on_one_dimension_with_one_active_run_back_to_back(chunks: int) -> None:
    p, B, a, size = 8, 50e9, 1e-6 + 10e-9, 64 * MiB
    system = make_system([dim("ring", p, B, 1e-6)], chunks=chunks)
    per_chunk = 2 * (p - 1) * (a + size / chunks / (p * B))
    assert run(system, "all-reduce", size) == pytest.approx(chunks * per_chunk, rel=REL)


# -- hierarchical composition on the 4x4x4 torus -----------------------------------------------


def _torus(**collective: object) -> SystemConfig:
    system = load_system("ace-isca21").model_copy(deep=True)
    system.endpoint.kind = "ideal"
    system.collective.chunks = 1
    for key, value in collective.items():
        setattr(system.collective, key, value)
    return system


def test_hierarchical_allreduce_on_4x4x4_torus_is_the_sum_of_its_phases() -> None:
    system = _torus()
    dims = system.network.dimensions
    assert [d.size for d in dims] == [4, 4, 4]
    a = [d.link_latency + system.collective.endpoint_delay for d in dims]
    B = [d.link_bandwidth * d.links_per_npu * system.collective.protocol_efficiency for d in dims]
    S = 64 * MiB

    def ring(steps: int, piece: float, d: int) -> float:
        return steps * (a[d] + piece / B[d])

    closed = (
        ring(3, S / 4, 0)  # reduce-scatter on local: S -> S/4
        + ring(3, S / 16, 1)  # reduce-scatter on vertical: S/4 -> S/16
        + ring(6, S / 64, 2)  # all-reduce on horizontal of S/16
        + ring(3, S / 16, 1)  # all-gather on vertical: S/16 -> S/4
        + ring(3, S / 4, 0)  # all-gather on local: S/4 -> S
    )
    total = run(system, "all-reduce", S)
    assert total == pytest.approx(closed, rel=REL)
    # The same phases simulated one by one as collectives on a single dimension.
    phases = [
        ("reduce-scatter", S, (0,)),
        ("reduce-scatter", S / 4, (1,)),
        ("all-reduce", S / 16, (2,)),
        ("all-gather", S / 4, (1,)),
        ("all-gather", S, (0,)),
    ]
    separate = sum(run(system, op, size, dims=d) for op, size, d in phases)
    assert total == pytest.approx(separate, rel=REL)


def test_per_dimension_allreduce_is_a_full_allreduce_on_each_dimension() -> None:
    system = _torus(composition="per_dimension")
    dims = system.network.dimensions
    delay, eff = system.collective.endpoint_delay, system.collective.protocol_efficiency
    S = 8 * MiB
    expected = sum(
        2
        * (d.size - 1)
        * (d.link_latency + delay + S / (d.size * d.link_bandwidth * d.links_per_npu * eff))
        for d in dims
    )
    assert run(system, "all-reduce", S) == pytest.approx(expected, rel=REL)


def test_hierarchical_reduce_scatter_and_all_gather_shrink_and_grow_the_data() -> None:
    system = _torus()
    dims = system.network.dimensions
    a = [d.link_latency + system.collective.endpoint_delay for d in dims]
    B = [d.link_bandwidth * d.links_per_npu * system.collective.protocol_efficiency for d in dims]
    S = 16 * MiB
    expected = 3 * (a[0] + S / 4 / B[0]) + 3 * (a[1] + S / 16 / B[1]) + 3 * (a[2] + S / 64 / B[2])
    assert run(system, "reduce-scatter", S) == pytest.approx(expected, rel=REL)
    assert run(system, "all-gather", S) == pytest.approx(expected, rel=REL)


# -- bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_all_to_all_sends_s_times_p_minus_1_over_p_per_npu(p: int, exact: bool) -> None:
    system = make_system([dim("switch", p)])
    S = 3 * MiB
    result = simulate_collective(system, "all-to-all", S, exact=exact)
    assert result.bytes_sent_per_npu == pytest.approx(S * (p - 1) / p, rel=1e-12)
    assert result.bytes_received_per_npu == pytest.approx(S * (p - 1) / p, rel=1e-12)


def test_ring_all_to_all_forwards_so_each_link_carries_s_times_p_minus_1_over_2() -> None:
    p, S = 8, 8 * MiB
    result = simulate_collective(make_system([dim("ring", p)]), "all-to-all", S, exact=True)
    assert result.bytes_sent_per_npu == pytest.approx(S * (p - 1) / 2, rel=1e-12)


def test_ring_allreduce_sends_2_s_times_p_minus_1_over_p_per_npu() -> None:
    p, S = 8, 8 * MiB
    result = simulate_collective(make_system([dim("ring", p)], chunks=4), "all-reduce", S)
    assert result.bytes_sent_per_npu == pytest.approx(2 * S * (p - 1) / p, rel=1e-12)
    assert result.busbw == pytest.approx(result.algbw * 2 * (p - 1) / p, rel=1e-12)


# -- ASTRA-sim 2.0 on identical inputs ---------------------------------------------------------
#
# ASTRA-sim 2.0's analytical backend (our runs, docs/performance.md): one ring dimension,
# 50 GB/s per link per direction with GB = 2**30 (so "50 GiB/s" here), 500 ns latency,
# endpoint delay 10 ns, ring algorithm, active chunks per dimension 1, LIFO. Its conventions
# differ from acesim's in three documented ways, which we convert away rather than tune around:
#   * it charges each reduce step 3*floor(m / local_mem_bw) ns (local_mem_bw 1600 GB/s, GB =
#     1e9); acesim's ideal endpoint charges nothing, so that term is subtracted;
#   * it pays one endpoint delay more per chunk than it has steps (2N-1 for all-reduce, N for
#     reduce-scatter and all-gather); acesim pays it once per step, so one E per chunk is
#     subtracted;
#   * it floors each step to whole ns: acesim may be above it by less than 1 ns per step, which
#     is the stated tolerance (and acesim must never be below it).
# Its all-gather size is each NPU's contribution; acesim's is the output (x N).
# Not compared: all-to-all (ASTRA-sim pays the link latency on every forwarded hop of a
# direct-style exchange on the ring, N(N-1)/2 latencies per chunk against acesim's N-1
# pipelined ring steps: a different latency model, not a unit conversion) and any case with more
# than one active chunk (its backend gives every concurrent message the full link bandwidth).
ASTRA_RUNS = [
    # op, N, ASTRA-sim size, chunks, ASTRA-sim time (ns)
    ("all-reduce", 4, MiB, 4, 43_000),
    ("all-reduce", 8, MiB, 4, 64_440),
    ("all-reduce", 16, MiB, 4, 99_640),
    ("reduce-scatter", 8, MiB, 4, 33_080),
    ("all-gather", 8, MiB, 4, 151_016),
    ("all-reduce", 8, 64 * MiB, 4, 2_326_112),
    ("all-reduce", 64, GiB, 4, 41_613_556),
    ("all-reduce", 8, MiB, 1, 43_025),
    ("all-reduce", 8, MiB, 16, 150_128),
]


@pytest.mark.parametrize(("op", "n", "astra_size", "chunks", "astra_ns"), ASTRA_RUNS)
def test_agrees_with_astra_sim_2_after_converting_conventions(
    op: str, n: int, astra_size: int, chunks: int, astra_ns: int
) -> None:
    system = make_system(
        [dim("ring", n, "50 GiB/s", "500 ns")],  # type: ignore[arg-type]
        chunks=chunks,
        active_chunks_per_dimension=1,
        scheduling="lifo",
        endpoint_delay="10 ns",
    )
    size = astra_size * n if op == "all-gather" else astra_size
    m = astra_size / (chunks * n) if op != "all-gather" else astra_size / chunks
    reduce_steps = {"all-reduce": n - 1, "reduce-scatter": n - 1, "all-gather": 0}[op]
    steps = {"all-reduce": 2 * (n - 1), "reduce-scatter": n - 1, "all-gather": n - 1}[op]
    reduction_ns = 3 * math.floor(m / 1600.0)  # m bytes at 1600e9 B/s, in whole ns
    converted = astra_ns - chunks * (reduce_steps * reduction_ns + 10)
    ours = run(system, op, size) * 1e9
    slack = 1e-6  # ns of floating-point rounding
    assert -slack <= ours - converted < chunks * steps * 1.0 + slack


# -- the A100 preset against nccl-tests ------------------------------------------------------


@pytest.mark.parametrize(("size", "published"), [(GiB, 231e9), (64 * MiB, 207e9)])
def test_a100_nvswitch_allreduce_busbw_matches_nccl_tests(size: int, published: float) -> None:
    result = simulate_collective("a100-nvswitch-8", "all-reduce", size)
    assert result.busbw == pytest.approx(published, rel=0.05)


# -- properties on random small symmetric topologies ------------------------------------------

OPS = ["all-reduce", "reduce-scatter", "all-gather", "all-to-all"]


def _valid_algorithms(op: str, kind: str, size: int) -> list[str]:
    algos = ["ring"]
    if kind != "ring" or size <= 3:
        algos.append("direct")
    if size & (size - 1) == 0 and (kind != "ring" or size <= 2):
        algos.append("halving_doubling")
    if op == "all-reduce":
        algos.append("double_binary_tree")
    return algos


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[SystemConfig, list[tuple[str, float]]]:
    """A small symmetric system and one or two collectives issued together."""
    n_dims = draw(st.integers(1, 3))
    dims = [
        dim(
            draw(st.sampled_from(["ring", "fully_connected", "switch"])),
            draw(st.integers(2, 4)),
            draw(st.sampled_from([10e9, 25e9, 100e9])),
            draw(st.sampled_from([0.0, 100e-9, 1e-6])),
            draw(st.sampled_from([1, 2])),
        )
        for _ in range(n_dims)
    ]
    ops = draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=2))
    algorithms = {
        op: [draw(st.sampled_from(_valid_algorithms(op, d["kind"], d["size"]))) for d in dims]
        for op in set(ops)
    }
    system = make_system(
        dims,
        algorithms=algorithms,
        composition=draw(st.sampled_from(["hierarchical", "per_dimension"])),
        chunks=draw(st.integers(1, 4)),
        active_chunks_per_dimension=draw(st.integers(1, 2)),
        scheduling=draw(st.sampled_from(["fifo", "lifo"])),
        endpoint_delay=draw(st.sampled_from([0.0, 10e-9])),
    )
    sizes = [draw(st.sampled_from([4096.0, 1e6, 3 * MiB])) for _ in ops]
    return system, list(zip(ops, sizes, strict=True))


def _simulate(system: SystemConfig, work: list[tuple[str, float]], exact: bool) -> list[tuple]:
    platform = Platform(system, exact=exact)
    colls = [platform.collectives.issue(op, size) for op, size in work]
    platform.engine.run()
    ranks = len(platform.npus)
    return [
        (c.duration, c.bytes_sent / ranks, c.bytes_received / ranks, c.rank_finished) for c in colls
    ]


@settings(max_examples=examples(40), deadline=None)
@given(scenarios())
def test_symmetric_and_exact_modes_agree(scenario: tuple) -> None:
    system, work = scenario
    symmetric = _simulate(system, work, exact=False)
    exact = _simulate(system, work, exact=True)
    for (t_sym, sent_sym, recv_sym, _), (t_ex, sent_ex, recv_ex, finished) in zip(
        symmetric, exact, strict=True
    ):
        assert t_ex == pytest.approx(t_sym, rel=REL)
        assert sent_ex == pytest.approx(sent_sym, rel=REL)
        assert recv_ex == pytest.approx(recv_sym, rel=REL)
        # every NPU of the exact run finishes when the representative does
        assert max(finished.values()) == pytest.approx(min(finished.values()), rel=REL)


@settings(max_examples=examples(40), deadline=None)
@given(scenarios(), st.booleans())
def test_bytes_sent_equal_bytes_received(scenario: tuple, exact: bool) -> None:
    system, work = scenario
    for _t, sent, received, _f in _simulate(system, work, exact=exact):
        assert sent == pytest.approx(received, rel=1e-12)
        assert sent > 0


@settings(max_examples=examples(60), deadline=None)
@given(scenarios(), st.data())
def test_more_bandwidth_is_never_slower(scenario: tuple, data: st.DataObject) -> None:
    system, work = scenario
    op, size = work[0]
    faster = system.model_copy(deep=True)
    which = data.draw(st.integers(0, len(faster.network.dimensions) - 1))
    factor = data.draw(st.sampled_from([1.5, 2.0, 8.0]))
    faster.network.dimensions[which].link_bandwidth *= factor
    assume(faster.network.dimensions[which].size > 1)
    # Chunks that share a dimension (active_chunks_per_dimension > 1) share its bandwidth, and
    # fair sharing can make a faster link slower overall (a list-scheduling anomaly; see
    # test_sharing_chunks_can_make_a_faster_link_slower): the property holds where one chunk
    # at a time runs on a dimension.
    assume(system.collective.chunks == 1 or system.collective.active_chunks_per_dimension == 1)
    assert run(faster, op, size) <= run(system, op, size) * (1 + REL)


def test_sharing_chunks_can_make_a_faster_link_slower() -> None:
    # Found by hypothesis: 2x2x2 rings, 3 chunks, 2 active per dimension. With dimension 2 50%
    # faster, chunks 1-2 come back from it to dimension 1's all-gather while chunk 3 is still in
    # its reduce-scatter there; sharing dimension 1 fairly delays chunk 3, the last to finish.
    def system(bandwidth: float) -> SystemConfig:
        return make_system(
            [
                dim("ring", 2, 1e10, 0.0),
                dim("ring", 2, 1e10, 1e-7),
                dim("ring", 2, bandwidth, 0.0, 2),
            ],
            algorithms={"all-reduce": ["ring", "ring", "ring"]},
            chunks=3,
            active_chunks_per_dimension=2,
            endpoint_delay=0.0,
        )

    slow = simulate_collective(system(1e10), "all-reduce", 4096.0).time
    fast = simulate_collective(system(1.5e10), "all-reduce", 4096.0).time
    assert fast > slow


@settings(max_examples=examples(20), deadline=None)
@given(scenarios(), st.booleans())
def test_a_repeated_run_is_bit_identical(scenario: tuple, exact: bool) -> None:
    system, work = scenario
    assert _simulate(system, work, exact) == _simulate(system, work, exact)
    op, size = work[0]
    first = simulate_collective(system, op, size, exact=exact).to_dict()
    assert simulate_collective(system, op, size, exact=exact).to_dict() == first
