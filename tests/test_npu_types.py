"""Mixed NPU types in one platform (exact mode, ``run.npu_types``, ``--npu``): against the
kernel model's own times, the straggler equivalence, the CLI flag and the errors.

Ring model of the hand computation (one chunk, ideal endpoint) as in tests/test_variation.py:
step ``s`` completes at rank ``j`` at ``C[j][s] = max(C[j][s-1], C[j-1][s-1] + a) + u``.
"""

from __future__ import annotations

import json

import pytest
import systems
from clitools import cli_error, cli_json_stderr, iteration_time
from systems import dim, make_system
from typer.testing import CliRunner

import acesim.network.vectorized as vectorized
from acesim import simulate_collective
from acesim.cli import app
from acesim.config.experiment import RunOptions
from acesim.config.npus import load_npu_preset
from acesim.config.system import NPUConfig, SystemConfig
from acesim.config.variation import NpuType, Variation
from acesim.errors import ConfigError
from acesim.hardware.kernel_model import plan_kernel
from acesim.hardware.kernels import Roofline
from acesim.hardware.platform import Platform
from acesim.hardware.strategy import Strategy
from acesim.runs import run_system
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

MiB = 2**20
P, BW, LAT, DELAY, GRAD = 8, 50e9, 1e-6, 10e-9, 8 * MiB
KERNEL = Roofline(flops=2.5e11, dtype="fp32")  # compute only: ~2 ms on the default NPU
HALF = "62.1 TFLOP/s"  # half the default NPU's fp32 peaks (124.2 TFLOP/s)
SLOW = {"ranks": "4-7", "matrix_flops.fp32": HALF, "vector_flops": HALF}


def ring8(**kw: object) -> SystemConfig:
    return make_system([dim("ring", P, BW, LAT)], chunks=1, endpoint_delay=DELAY, **kw)


def data_parallel(layers: int) -> Workload:
    """``layers`` layers of one KERNEL forward and one KERNEL weight gradient, each gradient
    all-reduced (GRAD bytes)."""
    return Workload(
        "dp",
        tuple(
            Layer(
                f"l{i}",
                forward=Pass(Compute(kernels=(KERNEL,))),
                weight_grad=Pass(Compute(kernels=(KERNEL,)), Comm("all-reduce", GRAD)),
            )
            for i in range(layers)
        ),
    )


def ring_allreduce_finish(joins: list[float]) -> list[float]:
    return systems.ring_allreduce_finish(joins, LAT + DELAY, GRAD / P / BW)


def slow_npu() -> NPUConfig:
    return NpuType.model_validate(SLOW).npu_config(NPUConfig(), "test")


def test_a_one_layer_iteration_with_half_the_ranks_slower_is_the_kernel_models_time() -> None:
    """Each rank computes two kernels on its own NPU (the kernel model's time alone), then
    the all-reduce waits for the slow half."""
    result, execution = run_system(
        ring8(), data_parallel(1), iterations=1, warmup=0, mode="exact", npu_types=[SLOW]
    )
    fast = plan_kernel(NPUConfig(), KERNEL).time_alone
    slow = plan_kernel(slow_npu(), KERNEL).time_alone
    assert slow > 1.9 * fast  # the peak halved; the launch latency is not
    joins = [2 * (slow if r >= 4 else fast) for r in range(P)]
    assert result.iteration_time == pytest.approx(max(ring_allreduce_finish(joins)), rel=1e-12)
    assert not execution.replicated
    assert execution.event_collectives == 0  # computed without message events
    npus = execution.platform.npus
    assert [n.config.vector_flops for n in npus] == [124.2e12] * 4 + [62.1e12] * 4
    # one kernel plan per NPU type
    assert npus[4]._shared is npus[7]._shared and npus[0]._shared is not npus[4]._shared


@pytest.mark.parametrize("loop", ["layerwise", "no_overlap"])
def test_slower_npus_equal_stragglers_slowed_by_the_models_kernel_ratio(loop: str) -> None:
    """A straggler's slowdown multiplies each block's compute time; an NPU with half the
    peaks has the block time the kernel model gives it: with that ratio as the stragglers'
    slowdown, three data-parallel iterations take the same time (1e-9)."""
    ratio = plan_kernel(slow_npu(), KERNEL).block_seconds / (
        plan_kernel(NPUConfig(), KERNEL).block_seconds
    )
    assert ratio == pytest.approx(2.0, rel=1e-12)

    def run(**kw: object) -> float:
        result, _ = run_system(
            ring8(), data_parallel(3), iterations=3, warmup=1, loop=loop, mode="exact", **kw
        )
        return result.iteration_time

    mixed = run(npu_types=[SLOW])
    stragglers = run(stragglers=[{"rank": r, "slowdown": ratio} for r in range(4, 8)])
    assert mixed == pytest.approx(stragglers, rel=1e-9)
    assert mixed > run()
    vectorized.ENABLED = False  # the event simulation of every message agrees
    try:
        assert run(npu_types=[SLOW]) == pytest.approx(mixed, rel=1e-9)
    finally:
        vectorized.ENABLED = True


def test_an_experiment_document_takes_npu_types() -> None:
    """The document form (``[[run.npu_types]]``): extra keys are [npu] fields by dotted
    path, or a ``changes`` table of them."""
    one = {"ranks": "4-7", "changes": {"matrix_flops": {"fp32": HALF}, "vector_flops": HALF}}
    run = {"mode": "exact", "iterations": 1, "warmup": 0}
    options = RunOptions.model_validate({**run, "npu_types": [one]})
    flat = RunOptions.model_validate({**run, "npu_types": [SLOW]})
    assert options.variation.npu_types[0].npu_config(NPUConfig(), "x") == slow_npu()
    assert flat.variation == Variation(npu_types=(NpuType.model_validate(SLOW),))
    # in symmetric mode the run switches to exact mode (acesim.training.strategy)
    assert RunOptions.model_validate({"npu_types": [SLOW]}).variation == flat.variation


def test_a_preset_type_plans_its_kernels_on_the_preset() -> None:
    """Ranks 0-3 are A100s (their kernels planned on the preset), the others the system's."""
    a100 = load_npu_preset("a100-sxm").npu
    result, execution = run_system(
        ring8(),
        data_parallel(1),
        iterations=1,
        warmup=0,
        mode="exact",
        npu_types=[{"ranks": "0-3", "preset": "a100-sxm"}],
    )
    npus = execution.platform.npus
    assert [n.config.name for n in npus] == ["A100-SXM4-80GB"] * 4 + ["npu"] * 4
    first = min(execution.records[0])  # rank 0's first node: the first forward kernel
    record = execution.records[0][first]
    assert record.end - record.start == pytest.approx(plan_kernel(a100, KERNEL).time_alone)
    record = execution.records[5][first]
    assert record.end - record.start == pytest.approx(plan_kernel(NPUConfig(), KERNEL).time_alone)


def test_a_changed_field_on_a_preset_and_a_list_of_ranks() -> None:
    variation = Variation(
        npu_types=(
            NpuType.model_validate(
                {"ranks": [1, "5-6"], "preset": "h100-sxm", "hbm_bandwidth": "2 TB/s"}
            ),
        )
    )
    platform = Platform(ring8(), Strategy.every_npu(variation))
    changed = [n.rank for n in platform.npus if n.config.hbm_bandwidth == 2e12]
    assert changed == [1, 5, 6]
    assert platform.npus[5].hbm_rate == 2e12 * platform.npus[5].config.kernels.hbm_efficiency


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"ranks": "6-8"}, r"run\.npu_types\[0\]\.ranks: must be ranks below 8"),
        ({"ranks": "2-1"}, r"ranks.*last rank must not be below its first"),
        ({"ranks": "x"}, r"ranks.*expected a rank or a range"),
        ({"ranks": 1, "preset": "a100"}, r"preset.*unknown NPU preset.*a100-sxm"),
        ({"ranks": 1, "hbm_bandwith": "2 TB/s"}, r"run\.npu_types\[0\]\.hbm_bandwith: unknown"),
        ({"ranks": 1, "hbm_bandwidth": -1}, r"run\.npu_types\[0\]\.hbm_bandwidth"),
        ({"ranks": 1, "hbm_arbitration": "drf"}, r"hbm_arbitration: must be the system's"),
    ],
)
def test_bad_npu_types_are_one_line_errors_naming_the_entry(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        run_system(ring8(), data_parallel(1), iterations=1, warmup=0, mode="exact",
                   npu_types=[entry])  # fmt: skip
    assert "\n" not in str(err.value)


def test_a_rank_in_two_types_is_refused_and_symmetric_mode_switches() -> None:
    with pytest.raises(ConfigError, match=r"npu_types\[1\]\.ranks: rank 3 is already in .*\[0\]"):
        run_system(ring8(), data_parallel(1), iterations=1, warmup=0, mode="exact",
                   npu_types=[{"ranks": "0-3"}, {"ranks": "3-4"}])  # fmt: skip
    switched, _ = run_system(ring8(), data_parallel(1), iterations=1, warmup=0, npu_types=[SLOW])
    assert switched.mode == "exact" and "NPU types" in switched.mode_note


def test_the_endpoints_settings_are_checked_on_each_npu_type() -> None:
    """The baseline holds comm_units; an NPU type with fewer units is an error naming it."""
    system = make_system([dim("ring", P, BW, LAT)], endpoint="baseline", chunks=1)
    units = system.endpoint.settings("baseline").comm_units  # type: ignore[attr-defined]
    variation = Variation(npu_types=(NpuType(ranks=2, changes={"compute_units": units}),))
    with pytest.raises(ConfigError, match=r"run\.npu_types\[0\]: endpoint\.baseline\.comm_units"):
        Platform(system, Strategy.every_npu(variation))


def test_cli_npu_flag_on_run_and_collective(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ResNet-50, not GNMT: the flag's path (parsing, the switch to exact mode and its note,
    # the per-rank platform) is the same for any zoo graph, and its exact run is ~8x cheaper
    base = ["run", "--endpoint", "ideal", "--npus", "8", "-n", "1", "--warmup", "0"]
    base += ["-w", "resnet50"]
    base += ["--set", "collective.chunks=1", "--loop", "no_overlap", "--json"]

    def iteration(*flags: str) -> float:
        return iteration_time(*base, "--exact", *flags)

    slower = iteration("--npu", "ranks=4-7,hbm_bandwidth='450 GB/s'")  # half the system's
    assert slower > iteration()
    switched, stderr = cli_json_stderr(*base, "--npu", "ranks=4-7,hbm_bandwidth='450 GB/s'")
    assert switched["iteration_time"] == slower and "NPU types" in stderr
    unknown = cli_error(monkeypatch, capsys, *base, "--exact", "--npu", "ranks=1,preset=tpu")
    assert "unknown NPU preset" in unknown and "tpu" in unknown
    coll = ["collective", "--sizes", "1MiB", "--endpoint", "baseline", "--json"]
    fine = CliRunner().invoke(app, [*coll, "--exact", "--npu", "ranks=0-1,preset=a100-sxm"])
    assert fine.exit_code == 0, fine.output
    switched, stderr = cli_json_stderr(*coll, "--npu", "ranks=0-1,preset=a100-sxm")
    times = [r["time"] for r in json.loads(fine.stdout)["results"]]
    assert [r["time"] for r in switched["results"]] == times and "NPU types" in stderr


def test_a_collective_with_the_ideal_endpoint_is_the_same_on_any_npu() -> None:
    """The network stays the system's: an endpoint that charges the NPUs nothing moves
    bytes in the same time whatever the NPUs are."""
    variation = Variation(npu_types=(NpuType(ranks="0-3", preset="a100-sxm"),))
    mixed = simulate_collective(ring8(), "all-reduce", 8 * MiB, exact=True, variation=variation)
    assert mixed.time == simulate_collective(ring8(), "all-reduce", 8 * MiB, exact=True).time


@pytest.mark.parametrize("endpoint", ["baseline", "ace", "copy_engine"])
def test_a_type_that_changes_nothing_changes_no_time(endpoint: str) -> None:
    """An entry without a preset or changes is the system's NPU again: with an endpoint that
    charges the NPUs (units, HBM, engines), a collective takes exactly exact mode's time."""
    system = make_system([dim("switch", 4, BW, LAT)], endpoint=endpoint, chunks=2)
    variation = Variation(npu_types=(NpuType(ranks="1-2"),))
    plain = simulate_collective(system, "all-reduce", 8 * MiB, exact=True)
    same = simulate_collective(system, "all-reduce", 8 * MiB, exact=True, variation=variation)
    assert same.time == plain.time


def test_the_baselines_collectives_draw_on_each_npus_own_hbm() -> None:
    """One rank's HBM far slower than the links: its SM kernels' HBM traffic paces the
    all-reduce (the network is unchanged)."""
    system = make_system([dim("switch", 4, BW, LAT)], endpoint="baseline", chunks=2)
    variation = Variation(npu_types=(NpuType(ranks=1, changes={"hbm_bandwidth": "10 GB/s"}),))
    plain = simulate_collective(system, "all-reduce", 8 * MiB, exact=True)
    slow = simulate_collective(system, "all-reduce", 8 * MiB, exact=True, variation=variation)
    assert slow.time > 2 * plain.time
