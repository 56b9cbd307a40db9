"""NCCL protocols (collective.protocols): selection by predicted time, forcing, defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config.resolve import resolve_system
from acesim.config.system import CollectiveConfig, SystemConfig
from acesim.errors import ConfigError
from acesim.simulate import simulate_collective

runner = CliRunner()

#: NCCL-like ring protocols: LL half the bandwidth and the lowest latency, Simple the highest
RING = {
    "LL": {"bandwidth": 0.5, "base_latency": 1e-6, "hop_latency": 0.5e-6},
    "LL128": {"bandwidth": 120 / 128, "base_latency": 2e-6, "hop_latency": 2e-6},
    "Simple": {"bandwidth": 1.0, "base_latency": 5e-6, "hop_latency": 4e-6},
}


def with_protocols(protocol: str | None = None, **tables: object) -> SystemConfig:
    s = resolve_system("a100-nvswitch-8")
    data = {**s.collective.model_dump(), "protocols": tables, "protocol": protocol}
    return s.model_copy(update={"collective": CollectiveConfig.model_validate(data)})


def test_without_protocols_nothing_changes() -> None:
    s = resolve_system("a100-nvswitch-8")
    r = simulate_collective(s, "all-reduce", "64 MiB")
    assert r.protocol is None
    forced = s.model_copy(update={"collective": s.collective.model_copy(update={"protocol": None})})
    assert simulate_collective(forced, "all-reduce", "64 MiB").time == r.time


def test_the_fastest_protocol_is_chosen_per_size() -> None:
    s = with_protocols(ring=RING)
    small = simulate_collective(s, "all-reduce", "4 KiB")
    large = simulate_collective(s, "all-reduce", "1 GiB")
    assert small.protocol == "LL" and large.protocol == "Simple"
    for proto in ("LL", "LL128", "Simple"):
        for size, best in ((4096, small), (1 << 30, large)):
            forced = simulate_collective(with_protocols(proto, ring=RING), "all-reduce", size)
            assert forced.protocol == proto
            assert forced.time >= best.time * (1 - 1e-9)


def test_a_protocol_s_terms_are_simulated() -> None:
    ll = simulate_collective(with_protocols("LL", ring=RING), "all-reduce", "1 GiB")
    simple = simulate_collective(with_protocols("Simple", ring=RING), "all-reduce", "1 GiB")
    assert ll.time == pytest.approx(2 * simple.time, rel=0.02)  # half the bandwidth


def test_nvls_runs_simple_only() -> None:
    with pytest.raises(ValidationError, match="must be one of Simple"):
        with_protocols(nvls={"LL": RING["LL"]})


def test_forcing_an_unconfigured_protocol_is_refused() -> None:
    only = {"Simple": RING["Simple"]}
    with pytest.raises(ConfigError, match="collective.protocol"):
        simulate_collective(with_protocols("LL", ring=only), "all-reduce", "1 MiB")
    with pytest.raises(ConfigError, match="collective.protocol"):
        simulate_collective(with_protocols("LL"), "all-reduce", "1 MiB")


def test_the_cli_reports_and_forces_the_protocol() -> None:
    out = runner.invoke(
        app,
        [
            "collective",
            "-s",
            "h100-nvswitch-8",
            "--sizes",
            "1MiB",
            "--set",
            "collective.algorithms.all-reduce=nvls",
        ],
        env={"COLUMNS": "200"},
    )
    assert out.exit_code == 0, out.output
    assert "protocol" in out.output and "Simple" in out.output
    forced = runner.invoke(
        app,
        [
            "collective",
            "-s",
            "h100-nvswitch-8",
            "--sizes",
            "1MiB",
            "--proto",
            "LL",
            "--algo",
            "nvls",
        ],
    )
    assert forced.exit_code != 0  # NVLS runs Simple only
    # NCCL_PROTO=LL alone: NVLS is not a candidate, the tuner runs the ring with LL
    ring = runner.invoke(
        app,
        ["collective", "-s", "h100-nvswitch-8", "--sizes", "1MiB", "--proto", "LL", "--json"],
    )
    assert ring.exit_code == 0, ring.output
    assert '"algorithm": "ring"' in ring.output and '"protocol": "LL"' in ring.output
    bad = runner.invoke(app, ["collective", "--sizes", "1MiB", "--proto", "ll"])
    assert bad.exit_code != 0
