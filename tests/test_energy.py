"""The energy model (acesim.hardware.power) and the energy figures of results."""

from __future__ import annotations

import math

import pytest

import acesim
from acesim.config import single_npu_system
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError
from acesim.hardware.kernels import Gemm
from acesim.hardware.platform import Platform
from acesim.hardware.power import energy_of, read_meters
from acesim.results.energy import energy_rows, split
from acesim.units import parse_quantity


def _alone(system_name: str, kernel: Gemm) -> tuple[Platform, float]:
    """Run ``kernel`` alone on the NPU of ``system_name``; the platform and its time (s)."""
    platform = Platform(single_npu_system(system_name))
    npu = platform.npus[0]
    npu.run_kernels([kernel], lambda: None)
    platform.engine.run()
    return platform, platform.engine.now


def test_power_and_energy_units_parse_to_watts_and_joules() -> None:
    assert parse_quantity("1.2 kW", "power") == 1200.0
    assert parse_quantity("500 mW", "power") == pytest.approx(0.5)
    assert parse_quantity("3.9 pJ/bit", "energy_per_byte") == pytest.approx(31.2e-12)
    assert parse_quantity("24 pJ/B", "energy_per_byte") == pytest.approx(24e-12)
    assert parse_quantity("0.33 pJ/FLOP", "energy_per_flop") == pytest.approx(0.33e-12)
    with pytest.raises(acesim.UnitError, match="unknown power unit"):
        parse_quantity("3 GB/s", "power")


def test_a_gemm_bound_kernel_on_h100_draws_between_idle_and_tdp() -> None:
    gemm = Gemm(8192, 8192, 8192, dtype="bf16")
    platform, seconds = _alone("h100-sxm", gemm)
    npu = platform.npus[0]
    assert npu.plan(gemm).bound == "compute"
    power = npu.config.power
    assert power is not None
    energy = energy_of(read_meters(platform), power, platform.system.network.dimensions)
    assert energy.seconds == seconds
    assert power.idle < energy.average_power < power.tdp
    assert not energy.over_limit and not energy.notes
    # the tensor cores' math is what the kernel spends most on above idle
    dynamic = {k: v for k, v in energy.board.items() if k != "idle"}
    assert max(dynamic, key=lambda k: dynamic[k]) == "matrix math bf16"


def test_a_kernel_alone_costs_each_resource_its_coefficient_times_its_count() -> None:
    # hand computation: idle x time, units x the kernel's compute time, FLOPs, HBM bytes
    gemm = Gemm(4096, 4096, 4096, dtype="fp8")
    platform, seconds = _alone("h100-sxm", gemm)
    plan = platform.npus[0].plan(gemm)
    power = platform.npus[0].config.power
    assert power is not None
    board = energy_of(read_meters(platform), power, []).board
    units = min(plan.units, plan.blocks or plan.units)
    assert board["idle"] == pytest.approx(power.idle * seconds, rel=1e-12)
    assert board["compute units"] == pytest.approx(
        power.unit_active * units * (seconds - plan.latency), rel=1e-9
    )
    assert board["matrix math fp8"] == pytest.approx(
        power.matrix_flop_energy["fp8"] * gemm.flops, rel=1e-12
    )
    assert board["HBM (compute)"] == pytest.approx(power.hbm_energy * plan.hbm_bytes, rel=1e-12)
    assert board["HBM (communication)"] == 0.0
    assert set(board) == {
        "idle",
        "compute units",
        "matrix math fp8",
        "HBM (compute)",
        "HBM (communication)",
    }


def test_the_energy_of_a_run_adds_up_by_component_role_and_resource() -> None:
    result = acesim.run("h100-nvswitch-8", "resnet50", endpoint="baseline")
    energy = result.energy
    assert energy is not None
    total = sum(energy.board.values()) + sum(energy.fabric.values())
    assert energy.per_iteration == pytest.approx(total, rel=1e-12)
    assert energy.board_per_iteration == pytest.approx(sum(energy.board.values()), rel=1e-12)
    parts = split({**energy.board, **energy.fabric})
    assert sum(parts) == pytest.approx(energy.per_iteration, rel=1e-12)
    assert parts == (energy.idle, energy.compute, energy.communication)
    # per resource: what the run's own figures say crossed it, times its coefficient
    system = resolve_system("h100-nvswitch-8")
    npu, dim = system.npu.power, system.network.dimensions[0]
    assert npu is not None and dim.power is not None
    seconds = result.iteration_time
    assert energy.board["idle"] == pytest.approx(npu.idle * seconds, rel=1e-9)
    sent = result.net_util["nvswitch"] * seconds * dim.link_bandwidth * dim.links_per_npu
    assert energy.board["links nvswitch"] == pytest.approx(dim.power.link_energy * sent, rel=1e-9)
    switch = (
        dim.power.switch_static * seconds
        + (dim.power.link_energy + (dim.power.switch_energy or 0.0)) * sent
    )
    assert energy.fabric["switch nvswitch"] == pytest.approx(switch, rel=1e-9)
    held = result.comm_units_held * seconds * npu.unit_active
    assert energy.board["comm units"] == pytest.approx(held, rel=1e-9)
    assert energy.per_sample == pytest.approx(energy.per_iteration / 32, rel=1e-12)
    assert energy.average_power == pytest.approx(energy.board_per_iteration / seconds, rel=1e-9)


@pytest.fixture(scope="module")
def isca() -> dict[str, acesim.RunResult]:
    """ResNet-50 on 8 NPUs of the ACE paper's platform, with SM kernels and with ACE."""
    return {
        kind: acesim.run("ace-isca21", "resnet50", endpoint=kind, npus=8)
        for kind in ("baseline", "ace")
    }


def test_ace_pays_its_sram_and_alus_and_holds_no_compute_units(
    isca: dict[str, acesim.RunResult],
) -> None:
    ace, sm = isca["ace"].energy, isca["baseline"].energy
    assert ace is not None and sm is not None
    assert ace.board["ACE SRAM"] > 0 and ace.board["ACE ALU"] > 0
    assert ace.board["ACE static"] > 0 and "comm units" not in ace.board
    assert sm.board["comm units"] > 0 and not any(k.startswith("ACE") for k in sm.board)
    # the same kernels, the same FLOPs: only time, communication and idle differ
    assert ace.board["matrix math fp16"] == pytest.approx(sm.board["matrix math fp16"])


def test_an_llm_result_has_energy_per_token() -> None:
    par = acesim.parse_parallel("tp=8", global_batch=4, micro_batch=1, seq=1024)
    case = acesim.make_llm_case("h100-nvswitch-8", "llama3-8b", par, precision="bf16")
    llm, _ = acesim.run_llm(case)
    energy = llm.energy
    assert energy is not None and energy.per_sample is None
    assert energy.per_token == pytest.approx(energy.per_iteration * 8 / (4 * 1024), rel=1e-12)
    assert energy.power_limit == 700.0
    idle = 70.0 * llm.iteration_time  # h100-sxm's idle power x the iteration
    assert energy.idle == pytest.approx(idle, rel=1e-9)


def test_a_run_above_its_power_limit_says_so() -> None:
    system = resolve_system("h100-sxm-single", overrides={"npu.power.tdp": "100 W"})
    gemm = Gemm(8192, 8192, 8192, dtype="bf16")
    platform = Platform(system)
    platform.npus[0].run_kernels([gemm], lambda: None)
    platform.engine.run()
    power = system.npu.power
    assert power is not None
    energy = energy_of(read_meters(platform), power, system.network.dimensions)
    assert energy.over_limit
    assert any("exceeds the NPU's power limit 100 W" in note for note in energy.notes)


def test_a_system_without_a_power_model_reports_no_energy() -> None:
    system = resolve_system("h100-nvswitch-8", overrides={"npu.power": None})
    # one iteration measured whole: whether a result has energy is decided per run, not by
    # its length
    result = acesim.run(system, "resnet50", endpoint="ideal", iterations=1, warmup=0)
    assert result.energy is None
    assert "energy_per_iteration" not in result.metrics()
    assert energy_rows(None) == [("energy", "no power model ([npu.power])")]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("npu.power.idle", "800 W", "npu.power.idle: must be below tdp (700 W)"),
        ("npu.power.hbm_energy", "-1 pJ/bit", "npu.power.hbm_energy: must not be negative"),
        ("npu.power.tdp", "3 GB/s", "unknown power unit"),
        ("npu.power.matrix_flop_energy", {"bf16": "1 pJ/FLOP"}, "no energy for fp64"),
        ("npu.power.matrix_flop_energy.fp4", "1 pJ/FLOP", "unknown dtype"),
        ("network.dimensions[0].power", {"link_energy": 1e-12}, "must be given for a switch"),
        ("network.dimensions[0].power.switch_energy", None, "switch_energy: must be given"),
    ],
)
def test_bad_power_coefficients_are_one_line_errors(
    field: str, value: object, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_system("h100-nvswitch-8", overrides={field: value})
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_switch_power_on_a_ring_dimension_is_refused() -> None:
    with pytest.raises(ConfigError, match="applies only to a switch dimension"):
        resolve_system(
            "ace-isca21",
            overrides={
                "network.dimensions[0].power.switch_static": "10 W",
                "network.dimensions[0].power.switch_energy": "1 pJ/B",
            },
        )


def test_energy_is_deterministic_and_finite(isca: dict[str, acesim.RunResult]) -> None:
    again = acesim.run("ace-isca21", "resnet50", endpoint="ace", npus=8).energy
    first = isca["ace"].energy
    assert first is not None and again == first
    assert all(math.isfinite(v) for v in [*first.board.values(), *first.fabric.values()])


def test_a_dimension_without_a_power_table_is_named_as_not_counted() -> None:
    system = resolve_system("h100-nvswitch-8", overrides={"network.dimensions[0].power": None})
    energy = acesim.run(system, "resnet50", endpoint="baseline").energy
    assert energy is not None
    assert energy.notes == ["nvswitch: no power table; its links, switches and NICs not counted"]
    assert not any("nvswitch" in name for name in [*energy.board, *energy.fabric])
    assert ("  not counted", "nvswitch") in energy_rows(energy)
