"""Host-device copies on the copy engines over the host link (issue 13): alone they run at the
host link's rate; beside copy-engine collectives they share the engines, beside SM collectives
they do not."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config.resolve import derive, resolve_system
from acesim.errors import ConfigError
from acesim.hardware.platform import Platform
from acesim.simulate import simulate_collective

GiB = 2**30
MiB = 2**20
SYSTEM = "h100-nvswitch-8"


def test_a_copy_alone_runs_at_the_slower_of_the_host_link_and_the_engines() -> None:
    system = resolve_system(SYSTEM)
    link = system.npu.host_link_bandwidth
    assert link == pytest.approx(64e9)  # PCIe Gen5 x16, one direction (datasheet)
    platform = Platform(system)
    done: list[float] = []
    platform.npus[0].host_copy(GiB, "d2h", lambda _a: done.append(platform.engine.now))
    platform.engine.run()
    assert done == [pytest.approx(GiB / link, rel=1e-12)]
    # one HBM byte per byte, not counted as communication
    assert platform.npus[0].host_hbm_bytes == GiB
    assert platform.npus[0].comm_hbm_bytes == pytest.approx(0.0, abs=1e-3)


def test_copy_engine_collectives_share_the_engines_with_a_host_copy_sm_ones_do_not() -> None:
    copy = (GiB, "h2d")
    size = 256 * MiB
    # without NCCL's local copy (which, on H100, sets a copy-engine all-gather's time) the peer
    # copies run at the engines' rate, which the host copy then takes a share of
    peers_only = resolve_system(
        SYSTEM, overrides={"endpoint.copy_engine.local_copy_bandwidth": None}
    )
    ce = simulate_collective(peers_only, "all-gather", size, endpoint="copy_engine", host_copy=copy)
    sm = simulate_collective(SYSTEM, "all-gather", size, endpoint="baseline", host_copy=copy)
    assert ce.compute is not None and sm.compute is not None
    assert ce.compute["collective_slowdown"] > 1.001 and ce.compute["host_copy_slowdown"] > 1.001
    # SM kernels do not touch the engines; the copy's HBM traffic does not bind
    assert sm.compute["collective_slowdown"] == pytest.approx(1.0, rel=1e-9)
    assert sm.compute["host_copy_slowdown"] == pytest.approx(1.0, rel=1e-9)
    # a host copy never changes what the collective itself moves through HBM
    alone = simulate_collective(peers_only, "all-gather", 256 * MiB, endpoint="copy_engine")
    assert ce.hbm_bytes_per_npu == pytest.approx(alone.hbm_bytes_per_npu, rel=1e-9)


def test_a_system_without_a_host_link_refuses_host_copies_by_name() -> None:
    # every shipped NPU has its datasheet's host link: one without (a system file's own NPU)
    linkless = derive(resolve_system("mi300x-8"), {"npu.host_link_bandwidth": None})
    with pytest.raises(ConfigError) as err:
        simulate_collective(linkless, "all-gather", MiB, host_copy=(MiB, "h2d"))
    assert err.value.field == "npu.host_link_bandwidth"


def test_overlap_reports_the_host_copy() -> None:
    out = CliRunner().invoke(
        app,
        ["overlap", "-s", SYSTEM, "--endpoints", "sm,copy_engine", "--host-copy", "256MiB"],
        env={"COLUMNS": "250"},
    )
    assert out.exit_code == 0, out.output
    assert "copy slowdown" in out.output and "host copy alone" in out.output
