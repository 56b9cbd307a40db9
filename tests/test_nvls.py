"""NVLS (NVLink SHARP, in-switch reduction) all-reduce on switch dimensions."""

from __future__ import annotations

import pytest
from systems import dim, make_system

from acesim import simulate_collective
from acesim.config.resolve import resolve_system
from acesim.config.system import CollectiveConfig, SystemConfig
from acesim.errors import AcesimError
from acesim.hardware.platform import Platform
from acesim.network.algorithms import NVLS_GATHER, NVLS_REDUCE, phase_steps
from acesim.validation import validate
from acesim.validation.fit import fit_collective

MiB = 2**20
GiB = 2**30


def forcing(system: SystemConfig, algorithm: str) -> SystemConfig:
    data = {**system.collective.model_dump(), "algorithm": algorithm}
    return system.model_copy(update={"collective": CollectiveConfig.model_validate(data)})


def h100(nvls: bool = True) -> SystemConfig:
    """The preset with NVLS (or the ring) forced, as NCCL_ALGO does."""
    return forcing(resolve_system("h100-nvswitch-8"), "nvls" if nvls else "ring")


def test_nvls_sends_the_buffer_and_one_slice_up() -> None:
    p, size = 8, 64 * MiB
    steps = phase_steps("all-reduce", "nvls", p, size)
    assert [s.kind for s in steps] == [NVLS_REDUCE, NVLS_GATHER]
    sent = sum(s.message_bytes * s.message_count(p) for s in steps)
    assert sent == pytest.approx(size * (p + 1) / p)  # against the ring's 2 S (p-1)/p


def test_nvls_closed_form_on_an_ideal_switch() -> None:
    p, bw, lat, delay, size = 8, 100e9, 1e-6, 3e-6, 256 * MiB
    system = make_system(
        [dim("switch", p, bw, lat, switch_reduction=True)],
        endpoint_delay=1e-8,
        nvls_delay=delay,
        nvls_efficiency=0.5,
        algorithms={"all-reduce": "nvls"},
    )
    expected = 2 * (lat + delay) + size * (p + 1) / p / (bw * 0.5)
    assert simulate_collective(system, "all-reduce", size).time == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["ring", "fully_connected"])
def test_nvls_is_refused_off_a_switch(kind: str) -> None:
    system = make_system([dim(kind, 4)], algorithms={"all-reduce": "nvls"})
    with pytest.raises(AcesimError, match="needs a switch dimension") as info:
        Platform(system)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather", "all-to-all"])
def test_nvls_is_refused_for_other_operations(op: str) -> None:
    system = make_system([dim("switch", 8, switch_reduction=True)], algorithms={op: "nvls"})
    with pytest.raises(AcesimError, match=f"runs only all-reduce, not {op}") as info:
        Platform(system)
    assert "\n" not in str(info.value)


def test_nvls_beats_the_ring_at_1_gib_on_h100() -> None:
    nvls = simulate_collective(h100(), "all-reduce", GiB)
    ring = simulate_collective(h100(nvls=False), "all-reduce", GiB)
    assert nvls.busbw > ring.busbw


def test_nvls_holds_its_units_and_moves_each_byte_through_hbm_once_each_way() -> None:
    system = h100()
    assert system.endpoint.settings("baseline").nvls_units == 16
    platform = Platform(system)
    npu = platform.npus[0]
    endpoint = platform.endpoint
    assert endpoint.hbm_bytes_per_network_byte(NVLS_REDUCE) == 2.0
    assert endpoint.hbm_bytes_per_network_byte(NVLS_GATHER) == 0.0
    platform.collectives.issue("all-reduce", 64 * MiB)
    platform.engine.run()
    assert npu.units.peak == 16
    result = simulate_collective(system, "all-reduce", 64 * MiB)
    # one read and one write of the buffer; no reduction FLOPs on the SMs
    assert result.hbm_bytes_per_npu == pytest.approx(2 * 64 * MiB)


def test_nvls_units_differ_from_comm_units() -> None:
    system = h100()
    data = system.model_dump()
    data["endpoint"]["baseline"]["nvls_units"] = 24
    platform = Platform(SystemConfig.model_validate(data))
    platform.collectives.issue("all-reduce", 16 * MiB)
    platform.engine.run()
    assert platform.npus[0].units.peak == 24


@pytest.mark.parametrize(
    "preset", ["a100-nvswitch-8", "h100-nvswitch-8", "h200-nvswitch-8", "gb200-nvl72"]
)
def test_the_presets_carry_their_fitted_collective_values(preset: str) -> None:
    from acesim.config import load_system
    from acesim.config.paths import parse_path

    carried_doc = load_system(preset).model_dump()
    for fit in fit_collective(preset):
        assert fit.simulated == pytest.approx(fit.measured, rel=1e-6), fit
        carried: object = carried_doc
        for key in parse_path(fit.parameter):
            assert isinstance(carried, dict | list)
            carried = carried[key]  # type: ignore[index]
        assert carried == pytest.approx(fit.value, rel=5e-4), fit


@pytest.mark.usefixtures("shipped_rows_once")  # the shipped rows once a process (conftest)
def test_the_nvls_rows_are_live() -> None:
    report = validate(["collectives"], quick=True)
    rows = {r.case.id: r for f in report.families for r in f.results}
    nvls = [r for i, r in rows.items() if i.startswith("h100x8-nvls-allreduce-")]
    assert len(nvls) == 13
    assert all(r.status == "ok" for r in nvls), [r.note for r in nvls]
    assert sorted(r.case.id for r in nvls if r.case.fit) == [
        "h100x8-nvls-allreduce-1g",
        "h100x8-nvls-allreduce-1m",
    ]


@pytest.mark.usefixtures("shipped_rows_once")  # the shipped rows once a process (conftest)
def test_the_h200_nvls_rows_are_live_and_fitted_as_the_h100_rows() -> None:
    # the same protocol as H100's: its own 1 MiB row fits the loop latency, its 1 GiB row the
    # efficiency, every other row is a test row
    report = validate(["collectives"], quick=True)
    rows = [
        r
        for f in report.families
        for r in f.results
        if r.case.id.startswith("h200x8-nvls-allreduce-")
    ]
    assert len(rows) == 13
    assert all(r.status == "ok" for r in rows), [r.note for r in rows]
    fitted = {r.case.id: list(r.case.fits) for r in rows if r.case.fit}
    assert fitted == {
        "h200x8-nvls-allreduce-1m": ["collective.nvls_loop_latency"],
        "h200x8-nvls-allreduce-1g": ["collective.nvls_efficiency"],
    }


def test_h200_has_the_h100_nvls_kernel_with_the_nccl_2_20_layout_and_its_own_fit() -> None:
    """The same NVLink4 links, NVSwitch and NVLS kernel; NCCL 2.20.5's buffer layout (its rows'
    version) against 2.18.5's, and its own fitted loop latency and efficiency."""
    from acesim.config import load_system

    h100, h200 = load_system("h100-nvswitch-8"), load_system("h200-nvswitch-8")
    assert h200.network.dimensions[0] == h100.network.dimensions[0]
    assert h200.network.dimensions[0].switch_reduction
    for name in ("nvls_stages", "nvls_chunk_bytes", "nvls_channels", "protocols", "choices"):
        assert getattr(h200.collective, name) == getattr(h100.collective, name), name
    assert (h100.collective.nvls_layout, h200.collective.nvls_layout) == ("fill_channels", "spread")
    for name in ("collective.nvls_efficiency", "collective.nvls_loop_latency"):
        assert h200.sources[name].kind == "fit", name
        assert "h200x8-nvls-allreduce-" in h200.sources[name].note, name
    assert "2.20" in h200.sources["collective.nvls_layout"].note
    assert "2.18" in h100.sources["collective.nvls_layout"].note


def test_nvls_is_refused_on_a_switch_that_does_not_reduce() -> None:
    system = make_system([dim("switch", 8)], algorithms={"all-reduce": "nvls"})
    with pytest.raises(AcesimError, match="needs a switch that reduces") as info:
        Platform(system)
    assert "\n" not in str(info.value)


def test_switch_reduction_is_refused_off_a_switch() -> None:
    with pytest.raises(AcesimError, match="switch_reduction: applies only to a switch"):
        make_system([{**dim("ring", 4), "switch_reduction": True}])


# -- the tuner: collective.choices, collective.algorithm --------------------------------------


def _tuned(**collective: object) -> SystemConfig:
    # 8 NPUs on a reducing switch; NVLS at half the ring's bandwidth but with 2 steps of latency
    # against the ring's 14: NVLS is predicted faster for small sizes, the ring for large.
    return make_system(
        [dim("switch", 8, 100e9, 5e-6, switch_reduction=True)],
        endpoint_delay=0.0,
        nvls_efficiency=0.3,
        chunks=1,
        choices={"all-reduce": ["ring", "nvls"]},
        **collective,
    )


def test_the_tuner_picks_the_fastest_predicted_algorithm_per_size() -> None:
    small = simulate_collective(_tuned(), "all-reduce", 64 * 1024)
    large = simulate_collective(_tuned(), "all-reduce", GiB)
    assert small.algorithm == "nvls"
    assert large.algorithm == "ring"
    for size in (64 * 1024, GiB):
        for name in ("ring", "nvls"):
            forced = simulate_collective(_tuned(algorithm=name), "all-reduce", size)
            assert forced.algorithm == name
        chosen = simulate_collective(_tuned(), "all-reduce", size)
        others = [
            simulate_collective(_tuned(algorithm=n), "all-reduce", size).time
            for n in ("ring", "nvls")
        ]
        assert chosen.time == min(others)


def test_a_forced_algorithm_that_cannot_run_is_an_error() -> None:
    system = make_system(
        [dim("switch", 8)], choices={"all-reduce": ["ring", "nvls"]}, algorithm="nvls"
    )
    with pytest.raises(AcesimError, match="collective.algorithm: nvls cannot run all-reduce"):
        simulate_collective(system, "all-reduce", GiB)


def test_choices_name_known_operations_and_algorithms() -> None:
    with pytest.raises(AcesimError, match="choices.all-reduce.1"):
        make_system([dim("switch", 8)], choices={"all-reduce": ["ring", "warp"]})
    with pytest.raises(AcesimError, match="must list at least one algorithm"):
        make_system([dim("switch", 8)], choices={"all-reduce": []})


def test_the_collective_table_shows_algorithm_protocol_and_sms() -> None:
    from typer.testing import CliRunner

    from acesim.cli import app

    env = {"COLUMNS": "200"}
    args = ["collective", "-s", "h100-nvswitch-8", "--sizes", "1GiB"]
    out = CliRunner().invoke(app, args, env=env).output
    assert "nvls" in out and "Simple" in out and "SMs" in out
    ring = (
        CliRunner()
        .invoke(app, [*args, "--algo", "ring", "--channels", "24", "--json"], env=env)
        .output
    )
    assert '"algorithm": "ring"' in ring and '"comm_units": 24' in ring


def test_channels_are_the_sms_a_collective_holds() -> None:
    for channels in (4, 24):
        system = resolve_system(
            "h100-nvswitch-8",
            overrides={
                "collective.algorithm": "ring",
                "endpoint.baseline.comm_units": channels,
            },
        )
        assert simulate_collective(system, "all-reduce", 64 * MiB).comm_units == channels


# -- NVLS loops: NCCL's chunk rule and the per-loop synchronisation ---------------------------


@pytest.mark.parametrize(
    "size, chunk",
    [
        (4 * MiB, 16384),  # < 2 x 128 x 32 KiB = 8 MiB
        (8 * MiB, 32768),
        (63 * MiB, 32768),  # < 8 x 128 x 64 KiB = 64 MiB
        (64 * MiB, 65536),
        (GiB - 1, 65536),  # < 64 x 128 x 128 KiB = 1 GiB
        (GiB, 131072),
        (8 * GiB, 131072),
    ],
)
def test_nvls_chunks_follow_nccls_rule(size: float, chunk: int) -> None:
    from acesim.network.plan import nvls_chunk

    # 16 channels x 8 heads = 128 concurrent chunks, as NCCL 2.18's enqueue.cc
    assert nvls_chunk(CollectiveConfig(), size, 8) == chunk


def test_each_nvls_loop_adds_its_latency() -> None:
    # An ideal switch: the time with a loop latency is the time without it plus loops x it,
    # loops = ceil(S / (16 channels x 8 heads x chunk)).
    p, bw = 8, 100e9
    delay = 2e-6

    def time(size: float, loop: float) -> float:
        system = make_system(
            [dim("switch", p, bw, 0.0, switch_reduction=True)],
            endpoint_delay=0.0,
            algorithms={"all-reduce": "nvls"},
            nvls_loop_latency=loop,
        )
        return simulate_collective(system, "all-reduce", size).time

    for size, loops in ((MiB, 1), (16 * MiB, 4), (256 * MiB, 32), (GiB, 64)):
        assert time(size, delay) - time(size, 0.0) == pytest.approx(loops * delay, rel=1e-9)


def test_a_forced_algorithm_that_cannot_run_names_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clitools import cli_error

    line = cli_error(
        monkeypatch,
        capsys,
        "collective",
        "-s",
        "a100-nvswitch-8",
        "--algo",
        "nvls",
        "--sizes",
        "1GiB",
    )
    assert line == "error: --algo: nvls cannot run all-reduce on any dimension of this group"


def test_nvls_units_are_checked_wherever_nvls_can_run() -> None:
    # h100-nvswitch-8 offers NVLS through collective.choices (not collective.algorithms): the
    # NVLS kernel's units must still leave the compute kernel some
    with pytest.raises(AcesimError, match="endpoint.baseline.nvls_units: must be fewer than"):
        resolve_system("h100-nvswitch-8", overrides={"endpoint.baseline.nvls_units": 132})
    # a100's switch does not reduce: NVLS never runs there, nothing to check
    resolve_system("a100-nvswitch-8", overrides={"endpoint.baseline.nvls_units": 108})


def test_nvls_pipeline_of_loops() -> None:
    # collective.nvls_stages: an NVLS all-reduce of L loops takes (L + stages - 1) stages, a
    # stage the loop latency plus one channel's bytes of a loop at 1/16 of the NVLS bandwidth
    # (acesim.network.plan.nvls_pipeline_latency): every buffer from one full channel (8 heads
    # x 16 KiB) to one full loop (16 channels) takes the same time.
    s = resolve_system("h100-nvswitch-8", overrides={"collective.algorithm": "nvls"})
    c = s.collective
    assert c.nvls_stages == 3 and c.nvls_efficiency is not None
    d = s.network.dimensions[0]
    per_byte = (8 + 1) / 8 / (d.links_per_npu * d.link_bandwidth * c.nvls_efficiency)
    link = 2 * d.link_latency  # the two NVLS steps (hop latency 0, NCCL's)
    times = [simulate_collective(s, "all-reduce", size).time for size in ("256 KiB", "2 MiB")]
    stage = c.nvls_loop_latency + 8 * 16384 * c.nvls_channels * per_byte
    assert times == pytest.approx([link + 3 * stage] * 2, rel=1e-9)
    # 1 GiB: 64 loops of 128 KiB chunks, 66 stages
    big = simulate_collective(s, "all-reduce", "1 GiB").time
    stage = c.nvls_loop_latency + 8 * 131072 * c.nvls_channels * per_byte
    assert big == pytest.approx(link + 66 * stage, rel=1e-9)


def _ideal_nvls(layout: str, loop: float) -> SystemConfig:
    """8 NPUs on an ideal reducing switch (no link latency), NVLS with a 3-stage pipeline."""
    return make_system(
        [dim("switch", 8, 100e9, 0.0, switch_reduction=True)],
        endpoint_delay=0.0,
        algorithms={"all-reduce": "nvls"},
        nvls_loop_latency=loop,
        nvls_stages=3,
        nvls_layout=layout,
    )


@pytest.mark.parametrize(
    ("size", "held"),
    [
        (1024, 1024),  # below one 4 KiB share: one channel holds it all
        (20 * 1024, 4096),  # 20 KiB / 16 = 1.25 KiB, rounded up to 4 KiB: five channels
        (64 * 1024, 4096),  # a 4 KiB share on each of the 16 channels
        (MiB, 65536),  # 64 KiB per channel, half a loop of 8 heads x 16 KiB
    ],
)
def test_the_spread_layout_pipeline_in_closed_form(size: int, held: int) -> None:
    # NCCL 2.20's layout (collective.nvls_layout = "spread"): every channel a 4 KiB-aligned
    # sixteenth of the buffer; one loop (below 16 x 8 x 16 KiB), so the three stages each pay
    # the loop latency and the busiest channel's bytes at 1/16 of the NVLS bandwidth, and the
    # collective takes 3 stages (the transfer's time is part of it)
    loop = 5e-6
    per_byte = (8 + 1) / 8 / 100e9
    expected = 3 * (loop + held * 16 * per_byte)
    spread = simulate_collective(_ideal_nvls("spread", loop), "all-reduce", size).time
    assert spread == pytest.approx(expected, rel=1e-9)
    # NCCL 2.18's layout fills channel 0's eight 16 KiB slots first
    filled = simulate_collective(_ideal_nvls("fill_channels", loop), "all-reduce", size).time
    assert filled == pytest.approx(3 * (loop + min(size, 8 * 16384) * 16 * per_byte), rel=1e-9)


@pytest.mark.parametrize("size", [2 * MiB, 16 * MiB, GiB + 4096])
def test_the_layouts_agree_from_one_full_loop_up(size: int) -> None:
    # the busiest channel's loops and loop bytes are the same once the channels are full
    times = [
        simulate_collective(_ideal_nvls(layout, 5e-6), "all-reduce", size).time
        for layout in ("fill_channels", "spread")
    ]
    assert times[1] == pytest.approx(times[0], rel=1e-12)


def test_a_bad_nvls_layout_is_one_line_naming_the_field() -> None:
    with pytest.raises(AcesimError) as info:
        resolve_system("h100-nvswitch-8", overrides={"collective.nvls_layout": "even"})
    assert str(info.value) == (
        "h100-nvswitch-8: collective.nvls_layout: input should be 'fill_channels' or 'spread', "
        "got 'even'"
    )


def test_the_fit_script_fits_the_h200_nvls_values_on_its_own_rows() -> None:
    # scripts/fit_presets.py finds h200-nvswitch-8 among the presets with collective fit rows,
    # the H200 1 MiB and 1 GiB rows; the values it prints (fit_collective on them) are the ones
    # the preset carries (test_the_presets_carry_their_fitted_collective_values)
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "fit_presets.py"
    spec = importlib.util.spec_from_file_location("fit_presets", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    _, systems = script.presets_with_fit_rows()
    assert "h200-nvswitch-8" in systems
    from acesim.validation import load_corpus
    from acesim.validation.fit import COLLECTIVE_FITS, fit_rows

    rows = fit_rows(load_corpus(), "h200-nvswitch-8", COLLECTIVE_FITS)
    assert sorted((p, c.id) for c, p in rows) == [
        ("collective.nvls_efficiency", "h200x8-nvls-allreduce-1g"),
        ("collective.nvls_loop_latency", "h200x8-nvls-allreduce-1m"),
    ]


def test_the_spread_layout_is_one_nodes_nvls_only() -> None:
    # NCCL 2.20 queues NVLS over nodes apart (addCollnetCollToPlan) and its kernel's multi-node
    # branch addresses channels as 2.18's: the load-reduce phase of nvls_tree keeps channel 0
    # first under spread, one node's NVLS all-reduce phase takes the 4 KiB-aligned share
    from acesim.network.plan import Phase, nvls_channel_loop
    from acesim.network.repeats import Repeats

    spread = CollectiveConfig(nvls_layout="spread")
    none = Repeats()  # a phase's steps are Repeats (checked at run time where compiled)
    node = Phase(dim=0, op="all-reduce", algorithm="nvls", data_bytes=0.0, steps=none, size=8)
    tree = Phase(
        dim=0, op="reduce-scatter", algorithm="nvls_tree", data_bytes=0.0, steps=none, size=8
    )
    assert nvls_channel_loop(spread, node, 64 * 1024) == (1, 4096)
    assert nvls_channel_loop(spread, tree, 64 * 1024) == (1, 64 * 1024)
    assert nvls_channel_loop(CollectiveConfig(), node, 64 * 1024) == (1, 64 * 1024)
