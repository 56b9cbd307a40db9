"""Rank placement (exact mode, ``run.placement``, ``--placement``): the permutation's errors,
nothing changes for one graph with whole-platform collectives, and a two-rank group or a
send placed on neighbours or across the outer dimension takes the time of the same
collective or message run directly on those NPUs.

Platform: 4 NPUs behind a switch (dimension 0, 100 GB/s) x 2 (dimension 1, 25 GB/s), so NPU
``c0 + 4 * c1``; the ideal endpoint, one chunk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import cli_error, cli_json_stderr, iteration_time
from systems import dim, make_system

from acesim.config.system import SystemConfig
from acesim.errors import ConfigError
from acesim.hardware.kernels import Roofline
from acesim.hardware.platform import Platform
from acesim.network.group import Group, Span
from acesim.runs import run_system
from acesim.workload.graph import Graph, Node
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload
from acesim.workload.placement import place_graph

MiB = 2**20
BW0, BW1, LAT, DELAY = 100e9, 25e9, 1e-6, 10e-9
SHUFFLED = [3, 6, 0, 5, 7, 1, 4, 2]
ACROSS = [0, 4, 1, 5, 2, 6, 3, 7]  # rank pairs (2i, 2i+1) on NPUs (i, i+4): dimension 1


def system() -> SystemConfig:
    return make_system(
        [dim("switch", 4, BW0, LAT), dim("switch", 2, BW1, LAT)], chunks=1, endpoint_delay=DELAY
    )


def data_parallel() -> Workload:
    kernel = Roofline(flops=2.5e10, dtype="fp32")
    return Workload(
        "dp",
        tuple(
            Layer(
                f"l{i}",
                forward=Pass(Compute(kernels=(kernel,))),
                weight_grad=Pass(Compute(kernels=(kernel,)), Comm("all-reduce", 8 * MiB)),
            )
            for i in range(2)
        ),
    )


def pair_graph(group: Group) -> Graph:
    """Every rank all-reduces 8 MiB over ``group`` (one list for every rank)."""
    node = Node(0, "ar", "collective", op="all-reduce", size=8 * MiB, group=group)
    return Graph([[node]], name="pairs")


def send_graph(dst: int) -> Graph:
    """Rank 0 sends 4 MiB to rank ``dst``; the others idle."""
    ranks: list[list[Node]] = [[] for _ in range(8)]
    ranks[0] = [Node(0, "send", "send", peer=dst, tag=1, size=4 * MiB)]
    ranks[dst] = [Node(0, "recv", "recv", peer=0, tag=1, size=4 * MiB)]
    return Graph(ranks, name="send")


def exact(workload: object, **options: object) -> float:
    result, _ = run_system(system(), workload, mode="exact", **options)  # type: ignore[arg-type]
    return result.iteration_time


@pytest.mark.parametrize(
    ("placement", "rule"),
    [
        ([0, 1, 2], "must place every one of the platform's 8 NPUs once"),
        ([0, 1, 2, 3, 4, 5, 6, 6], "must be a permutation (each NPU once), 6 repeats"),
        ([0, 1, 2, 3, 4, 5, 6, 8], "must list NPU positions 0..7"),
        ([0, 1, 2, 3, 4, 5, 6, -7], "must list NPU positions >= 0"),
        ([0, 1, 2, 3, 4, 5, 6, 7.0], "must list integer NPU positions, got 7.0"),
        ([0, 1, 2, 3, 4, 5, 6, "7"], "must list integer NPU positions, got '7'"),
        ("0 1", "must be a list of NPU positions"),
    ],
)
def test_a_placement_that_is_no_permutation_is_a_one_line_error(
    placement: object, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        run_system(system(), data_parallel(), iterations=1, warmup=0, mode="exact",
                   placement=placement)  # fmt: skip
    message = str(info.value)
    assert message.startswith("run.placement: ") and rule in message
    assert "\n" not in message


def test_a_placement_asked_in_symmetric_mode_runs_exact_and_says_so() -> None:
    placed, _ = run_system(system(), data_parallel(), placement=SHUFFLED)
    asked, _ = run_system(system(), data_parallel(), mode="exact", placement=SHUFFLED)
    assert placed.mode == "exact" and "a placement" in placed.mode_note
    assert placed.iteration_time == asked.iteration_time


@pytest.mark.parametrize("placement", [list(range(8)), SHUFFLED])
def test_one_graph_with_whole_platform_collectives_is_bit_identical_placed(
    placement: list[int],
) -> None:
    plain, _ = run_system(system(), data_parallel(), mode="exact")
    placed, _ = run_system(system(), data_parallel(), mode="exact", placement=placement)
    assert placed.iteration_time == plain.iteration_time
    assert placed.makespan == plain.makespan
    assert placed.exposed_comm == plain.exposed_comm
    graph = Graph([[Node(0, "ar", "collective", op="all-reduce", size=MiB)]])
    assert place_graph(graph, placement, Platform(system(), exact=True).topology) is graph


def test_a_pair_group_placed_on_neighbours_or_across_takes_the_direct_groups_time() -> None:
    pairs = pair_graph(Group((Span(0, 2),), "pair"))  # ranks {0,1}, {2,3}, ... on dimension 0
    inner = exact(pairs)
    neighbours = exact(pairs, placement=[1, 0, 3, 2, 5, 4, 7, 6])  # each pair stays together
    across = exact(pairs, placement=ACROSS)
    direct = exact(pair_graph(Group((Span(1),), "pair")))  # the pairs of dimension 1 directly
    assert neighbours == inner
    assert across == direct
    # two members: one reduce-scatter and one all-gather step of half the buffer each
    assert inner == pytest.approx(2 * (4 * MiB / BW0 + LAT + DELAY), rel=1e-9)
    assert across == pytest.approx(2 * (4 * MiB / BW1 + LAT + DELAY), rel=1e-9)


def test_a_send_to_a_neighbour_or_across_takes_the_direct_messages_time() -> None:
    neighbour = exact(send_graph(1))
    across = exact(send_graph(1), placement=[0, 4, 2, 3, 1, 5, 6, 7])
    assert across == exact(send_graph(4))
    assert neighbour == pytest.approx(4 * MiB / BW0 + LAT + DELAY, rel=1e-9)
    assert across == pytest.approx(4 * MiB / BW1 + LAT + DELAY, rel=1e-9)


def test_a_placement_that_splits_a_group_is_a_one_line_error() -> None:
    pairs = pair_graph(Group((Span(0, 2),), "pair"))
    with pytest.raises(ConfigError) as info:
        exact(pairs, placement=[0, 5, 1, 4, 2, 6, 3, 7])  # ranks 0, 1 on NPUs 0 and 5
    message = str(info.value)
    assert message.startswith("run.placement: splits group 'pair'")
    assert "NPUs [0, 5]" in message and "cannot express" in message and "\n" not in message


def test_cli_placement_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ResNet-50, not GNMT: the flag's path (parsing, the switch to exact mode and its note,
    # the per-rank platform) is the same for any zoo graph, and its exact run is ~8x cheaper
    base = ["run", "--endpoint", "ideal", "--npus", "8", "-n", "1", "--warmup", "0"]
    base += ["-w", "resnet50"]
    base += ["--set", "collective.chunks=1", "--loop", "no_overlap", "--json"]

    def iteration(*flags: str) -> float:
        return iteration_time(*base, "--exact", *flags)

    good = tmp_path / "placement.json"
    good.write_text(json.dumps(SHUFFLED[::-1]))
    assert iteration("--placement", str(good)) == iteration()
    short = tmp_path / "short.json"
    short.write_text("[0, 1]")
    error = cli_error(monkeypatch, capsys, *base, "--exact", "--placement", str(short))
    assert error.startswith("error: --placement: must place every one of the platform's 8 NPUs")
    bad = tmp_path / "bad.json"
    bad.write_text("0 1 2")
    error = cli_error(monkeypatch, capsys, *base, "--exact", "--placement", str(bad))
    assert "--placement: expected a JSON list of NPU positions" in error
    switched, stderr = cli_json_stderr(*base, "--placement", str(good))
    assert switched["info"]["mode"] == "exact" and "a placement" in stderr
