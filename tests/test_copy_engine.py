"""The ``copy_engine`` endpoint: copies on DMA engines (zero SMs), a setup per copy step, SM
fallback for reduce steps."""

from __future__ import annotations

import pytest

from acesim import simulate_collective
from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError
from acesim.hardware.endpoints import ENDPOINT_KINDS, CopyEngineEndpoint, CopyEngineSettings
from acesim.hardware.endpoints.baseline import BaselineSettings
from acesim.hardware.endpoints.copy_engine import unstated_facts
from acesim.hardware.platform import Platform
from acesim.network.algorithms import NVLS_REDUCE, REDUCE
from acesim.network.group import Group, Span
from acesim.plan import plan
from acesim.validation import validate
from acesim.validation.comm_limits import channel_hbm_bandwidth

SYSTEM = "h100-nvswitch-8"
MiB = 2**20


def _platform(**overrides: object) -> Platform:
    sets = {f"endpoint.copy_engine.{k}": v for k, v in overrides.items()}
    cfg = resolve_system(SYSTEM, overrides=sets)
    return Platform(cfg.with_endpoint("copy_engine"))


def test_the_kind_is_registered_with_its_preset_settings() -> None:
    assert "copy_engine" in ENDPOINT_KINDS
    cfg = resolve_system(SYSTEM)
    ce = cfg.endpoint.of(CopyEngineSettings)
    assert ce.engines == 4 and ce.engine_bandwidth == pytest.approx(98.98e9)
    assert ce.link_efficiency == pytest.approx(0.8889)
    assert ce.local_copy_bandwidth == pytest.approx(40.52e9)
    # the rule of its [sources] note: the baseline's NCCL channel count runs the fallback
    assert ce.fallback_units == cfg.endpoint.of(BaselineSettings).comm_units == 24


def test_an_all_gather_takes_zero_sms() -> None:
    platform = _platform()
    coll = platform.collectives.issue("all-gather", 64 * MiB)
    platform.engine.run()
    platform.engine.sync()
    assert coll.duration > 0
    endpoint = platform.endpoint
    assert isinstance(endpoint, CopyEngineEndpoint)
    assert endpoint.copy_steps > 0 and endpoint.reduce_steps == 0
    for npu in platform.npus:
        assert npu.units.held_time == 0.0 and npu.units.peak == 0


def test_an_all_reduce_holds_fallback_units_only_during_reduce_steps() -> None:
    # the ring forced (NCCL_ALGO=Ring): its reduce steps fall back to SM kernels (the tuner
    # would pick NVLS on this node; tests/test_offload.py covers that path)
    cfg = resolve_system(SYSTEM, overrides={"collective.algorithm": "ring"})
    platform = Platform(cfg.with_endpoint("copy_engine"))
    log: list[tuple[float, float]] = []
    pool = platform.npus[0].units
    pool.observe(lambda p: log.append((platform.engine.now, p.held)))
    platform.collectives.phase_log = []
    coll = platform.collectives.issue("all-reduce", 64 * MiB)
    platform.engine.run()
    platform.engine.sync()
    endpoint = platform.endpoint
    assert isinstance(endpoint, CopyEngineEndpoint)
    assert endpoint.reduce_steps > 0 and endpoint.copy_steps > 0
    units = endpoint.cfg.fallback_units
    assert pool.peak == units and pool.held == 0.0
    # held for part of the collective only (the reduce-scatter half), never the whole of it
    assert 0 < pool.held_time < units * coll.duration
    assert max(h for _, h in log) == units


def test_the_setup_latency_shows_at_small_sizes() -> None:
    small = 4096
    with_setup = simulate_collective(SYSTEM, "all-gather", small, endpoint="copy_engine").time
    cfg = resolve_system(SYSTEM, overrides={"endpoint.copy_engine.setup": 0.0})
    without = simulate_collective(cfg, "all-gather", small, endpoint="copy_engine").time
    steps = 1  # a direct all-gather on 8 GPUs: one step of 7 copies
    setup = resolve_system(SYSTEM).endpoint.of(CopyEngineSettings).setup
    assert with_setup - without == pytest.approx(steps * setup, rel=1e-6)
    assert with_setup / without > 1.2  # the setup is a large part of a small collective
    big = 1 << 30
    t_big = simulate_collective(SYSTEM, "all-gather", big, endpoint="copy_engine").time
    t_big0 = simulate_collective(cfg, "all-gather", big, endpoint="copy_engine").time
    assert t_big / t_big0 < 1.01


@pytest.mark.parametrize("op", ["all-gather", "all-reduce", "all-to-all", "reduce-scatter"])
@pytest.mark.parametrize("size", [4096, 64 * MiB])
def test_ideal_is_at_least_as_fast(op: str, size: float) -> None:
    ce = simulate_collective(SYSTEM, op, size, endpoint="copy_engine").time
    system = resolve_system(SYSTEM)
    # the bound in its best variant (searched by simulate_collective): its own algorithms, or
    # a kind's (the copy engine's direct all-gather pays one latency where the ring pays seven)
    ideal = simulate_collective(system, op, size, endpoint="ideal").time
    assert ideal <= ce * (1 + 1e-9)


def test_copies_charge_hbm_read_and_write() -> None:
    no_local = {"endpoint.copy_engine.local_copy_bandwidth": None}
    cfg = resolve_system(SYSTEM, overrides=no_local)
    result = simulate_collective(cfg, "all-gather", 64 * MiB, endpoint="copy_engine")
    assert result.hbm_bytes_per_npu == pytest.approx(2 * result.bytes_sent_per_npu, rel=1e-9)
    read = {**no_local, "endpoint.copy_engine.write_hbm_bytes_per_byte": 0}
    cfg = resolve_system(SYSTEM, overrides=read)
    read_only = simulate_collective(cfg, "all-gather", 64 * MiB, endpoint="copy_engine")
    assert read_only.hbm_bytes_per_npu == pytest.approx(read_only.bytes_sent_per_npu, rel=1e-9)


def test_the_local_copy_of_a_batch_sets_the_time_when_it_is_the_slowest() -> None:
    # an 8-GPU all-to-all of 64 MiB: one batch of 7 peer copies of 8 MiB and the GPU's own
    # 8 MiB copied locally at 10 GB/s (far slower than the peer copies on the links): the
    # step ends when the local copy does, setup + 8 MiB / 10 GB/s, by hand
    local = {"endpoint.copy_engine.local_copy_bandwidth": 10e9}
    cfg = resolve_system(SYSTEM, overrides=local)
    result = simulate_collective(cfg, "all-to-all", 64 * MiB, endpoint="copy_engine")
    setup = cfg.endpoint.of(CopyEngineSettings).setup
    assert result.time == pytest.approx(setup + 8 * MiB / 10e9, rel=1e-9)
    # the local copy reads and writes the GPU's HBM and sends nothing on the links
    assert result.bytes_sent_per_npu == pytest.approx(7 * 8 * MiB, rel=1e-12)
    assert result.hbm_bytes_per_npu == pytest.approx(2 * 8 * 8 * MiB, rel=1e-9)
    # without the setting the batch is its peer copies alone: faster, 7/8 of the HBM bytes
    none = resolve_system(SYSTEM, overrides={"endpoint.copy_engine.local_copy_bandwidth": None})
    alone = simulate_collective(none, "all-to-all", 64 * MiB, endpoint="copy_engine")
    assert alone.time < result.time / 3
    assert alone.hbm_bytes_per_npu == pytest.approx(2 * 7 * 8 * MiB, rel=1e-9)


def test_a_single_peer_copy_runs_at_the_slower_of_the_engines_and_the_links() -> None:
    # one copy GPU 0 -> GPU 1 (a broadcast of one piece over two GPUs): no local copy (not a
    # direct step); with engines far faster than the links, its time moves with
    # 1 / link_efficiency alone; with slow engines, with 1 / engine_bandwidth alone (by hand)
    pair = Group((Span(0, 2),))
    nbytes = 200e6
    links = 18 * 25e9  # NVLink4 per direction, B/s

    def copy_time(efficiency: float, per_engine: float) -> float:
        sets = {
            "collective.chain_piece_bytes": nbytes,
            "endpoint.copy_engine.link_efficiency": efficiency,
            "endpoint.copy_engine.engine_bandwidth": per_engine,
        }
        cfg = resolve_system(SYSTEM, overrides=sets)
        result = simulate_collective(
            cfg, "broadcast", nbytes, endpoint="copy_engine", group=pair, tuner_check=False
        )
        return result.time

    fast = 1e13  # four engines of 10 TB/s: the links bind
    expected = nbytes / links * (1 / 0.6 - 1 / 0.9)
    assert copy_time(0.6, fast) - copy_time(0.9, fast) == pytest.approx(expected, rel=1e-6)
    slow = nbytes / (4 * 50e9) - nbytes / (4 * 80e9)  # four engines of 50 or 80 GB/s bind
    assert copy_time(0.9, 50e9) - copy_time(0.9, 80e9) == pytest.approx(slow, rel=1e-6)


def test_an_all_gather_leaves_a_compute_bound_kernel_alone() -> None:
    # compute-bound kernel (no HBM bytes): copy engines take no SM, so it is not slowed
    flops = 1e-3 * 989.5e12
    result = simulate_collective(
        SYSTEM, "all-gather", 64 * MiB, endpoint="copy_engine", compute=(flops, 0.0)
    )
    assert result.compute is not None
    assert result.compute["kernel_slowdown"] == pytest.approx(1.0, rel=1e-9)
    base = simulate_collective(
        SYSTEM, "all-gather", 64 * MiB, endpoint="baseline", compute=(flops, 0.0)
    )
    assert base.compute is not None and base.compute["kernel_slowdown"] > 1.0


def _issue_limit(platform: Platform, kind: str) -> float:
    """Capacity (B/s) of the loads-in-flight resource rank 0's ``kind`` steps draw on."""
    demand = platform.endpoint.message_demand(0, kind)
    hbm = platform.npus[0].hbm_comm
    (issue,) = [r for r in demand if r.name.endswith(".hbm") and r is not hbm]
    return issue.capacity


def test_the_reduce_fallback_keeps_the_sm_endpoints_loads_in_flight_per_channel() -> None:
    """NCCL runs no reduction on copy engines (src/ce_coll.cc ncclCeImplemented): a reduce is
    its SM kernel, so the fallback's units are NCCL channels with the SM endpoint's figure
    (acesim.validation.comm_limits), not the NPU's compute-kernel figure."""
    platform = _platform()
    system = platform.system
    channel = system.endpoint.of(BaselineSettings, "baseline").unit_hbm_bandwidth
    assert channel is not None
    # 64 KiB in flight / 600 ns (the preset states it to 4 digits)
    assert channel == pytest.approx(channel_hbm_bandwidth("h100-sxm"), rel=1e-3)
    assert system.npu.kernels.unit_hbm_bandwidth != pytest.approx(channel)  # 55 GB/s per SM
    ce = system.endpoint.of(CopyEngineSettings)
    assert _issue_limit(platform, REDUCE) == pytest.approx(ce.fallback_units * channel)
    assert _issue_limit(platform, NVLS_REDUCE) == pytest.approx(ce.nvls_units * channel)
    # the SM endpoint's reduce kernel, per unit it holds: the same figure
    baseline = Platform(system.with_endpoint("baseline"))
    comm_units = system.endpoint.of(BaselineSettings, "baseline").comm_units
    assert _issue_limit(baseline, REDUCE) / comm_units == pytest.approx(
        _issue_limit(platform, REDUCE) / ce.fallback_units
    )


def test_a_reduce_scatter_on_the_fallback_runs_as_the_sm_endpoints_when_the_limit_binds() -> None:
    """With the SM endpoint's per-channel figure low enough to bind, a reduce-scatter (reduce
    steps only) on 8 fallback units runs at 8 x that figure of payload, the busbw of the SM
    endpoint on 8 channels, bound by the fallback's HBM issue."""
    sets = {
        "collective.algorithm": "ring",
        "endpoint.baseline.comm_units": 8,
        "endpoint.baseline.unit_hbm_bandwidth": "20 GB/s",
        "endpoint.copy_engine.fallback_units": 8,
    }
    system = resolve_system(SYSTEM, overrides=sets)
    size = 1 << 30
    sm = simulate_collective(system, "reduce-scatter", size, endpoint="baseline")
    ce = simulate_collective(system, "reduce-scatter", size, endpoint="copy_engine")
    assert sm.bound == "comm-unit HBM issue" and ce.bound == "SM fallback HBM issue"
    assert ce.busbw == pytest.approx(8 * 20e9, rel=0.01)  # by hand: 8 channels x 20 GB/s
    assert ce.busbw == pytest.approx(sm.busbw, rel=1e-6)


def test_fallback_units_must_be_fewer_than_the_npu_units() -> None:
    with pytest.raises(ConfigError, match="endpoint.copy_engine.fallback_units: must be fewer"):
        resolve_system(SYSTEM, overrides={"endpoint.copy_engine.fallback_units": 132})


def test_the_all_to_all_pair_is_live_and_the_fit_row_matches() -> None:
    report = validate(["offload"], quick=True)
    rows = {r.case.id: r for r in report.family("offload").results}
    ce = rows["h100x4-alltoall-524mb-ce"]
    assert ce.status == "ok" and ce.case.fit
    assert ce.error is not None and abs(ce.error) < 0.01
    sm = rows["h100x4-alltoall-524mb-sm"]
    assert sm.status == "ok" and not sm.case.fit
    assert sm.error is not None and abs(sm.error) < 0.10
    # the single-copy rows: one fits the engines' payload fraction, the other tests it; the
    # NCCL 2.28.3 run of the all-to-all tests the local-copy fit
    unidir, bidir = rows["h100x2-p2p-ce-write-unidir"], rows["h100x2-p2p-ce-write-bidir"]
    assert unidir.case.fit and unidir.error is not None and abs(unidir.error) < 0.01
    assert not bidir.case.fit and bidir.error is not None and abs(bidir.error) < 0.05
    again = rows["h100x4-alltoall-524mb-ce-nccl2283"]
    assert not again.case.fit and again.error is not None and abs(again.error) < 0.01


def test_the_fallback_drives_the_sm_endpoints_unit_bandwidth_unless_it_states_its_own() -> None:
    # one definition: the fallback and NVLS kernels are the library's SM kernel
    cfg = resolve_system(SYSTEM)
    assert cfg.endpoint.of(CopyEngineSettings).fallback_unit_bandwidth is None
    endpoint = _platform().endpoint
    assert isinstance(endpoint, CopyEngineEndpoint)
    assert endpoint.unit_bandwidth == cfg.endpoint.of(BaselineSettings).unit_bandwidth == 40e9
    moved = resolve_system(SYSTEM, overrides={"endpoint.baseline.unit_bandwidth": "30 GB/s"})
    follows = Platform(moved.with_endpoint("copy_engine")).endpoint
    assert isinstance(follows, CopyEngineEndpoint) and follows.unit_bandwidth == 30e9
    own = _platform(fallback_unit_bandwidth="50 GB/s").endpoint
    assert isinstance(own, CopyEngineEndpoint) and own.unit_bandwidth == 50e9


def test_another_vendors_npu_is_refused_the_nvidia_copy_engine_defaults() -> None:
    # mi300x-8 states no [endpoint.copy_engine] table: one line naming the table and the rule
    with pytest.raises(ConfigError) as err:
        simulate_collective("mi300x-8", "all-gather", MiB, endpoint="copy_engine")
    message = str(err.value)
    assert message.startswith("endpoint.copy_engine: mi300x-8 (amd NPU mi300x) states no ")
    assert "[endpoint.copy_engine] table" in message and "nvidia copy engines'" in message
    assert "\n" not in message


def test_a_stated_copy_engine_fact_lifts_the_refusal() -> None:
    cfg = resolve_system("mi300x-8", overrides={"endpoint.copy_engine.engines": 8})
    assert simulate_collective(cfg, "all-gather", MiB, endpoint="copy_engine").time > 0


def test_nvidia_npus_without_a_table_keep_the_defaults() -> None:
    # b200-nvswitch-8 states no table either, but the defaults are its vendor's engines
    assert unstated_facts(resolve_system("b200-nvswitch-8")) is None
    assert (
        simulate_collective("b200-nvswitch-8", "all-gather", MiB, endpoint="copy_engine").time > 0
    )


def test_plan_refuses_the_copy_engine_on_mi300x_before_it_searches() -> None:
    with pytest.raises(ConfigError, match="endpoint.copy_engine: mi300x-8"):
        plan(
            resolve_system("mi300x-8"),
            "llama3-8b",
            global_batch=16,
            endpoints=["sm", "copy_engine"],
        )
