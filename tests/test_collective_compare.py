"""Endpoint kinds side by side on one collective: `acesim collective --endpoints` and
`acesim.compare(system, "all-reduce", size=...)`, the same comparison as every run kind's
(runs/compare.py: each kind in its best variant, the baseline the reference)."""

from __future__ import annotations

import json

import pytest
from clitools import cli_error
from typer.testing import CliRunner

import acesim
from acesim.cli import app
from acesim.errors import ConfigError
from acesim.hardware.endpoints import ENDPOINT_KINDS

runner = CliRunner()


def test_compare_takes_a_collective_and_keeps_each_kinds_best_variant() -> None:
    comparison = acesim.compare(
        "ace-isca21", "all-reduce", size="4 MiB", endpoints=["ace", "ideal"]
    )
    assert list(comparison.endpoints) == ["baseline", "ace", "ideal"]  # the reference first
    for kind, outcome in comparison.endpoints.items():
        # the best of the kind's variants, each the collective simulated on its own
        alone = [
            acesim.simulate_collective(
                acesim.load_system("ace-isca21").with_endpoint(kind, **v.changes),
                "all-reduce",
                "4 MiB",
            ).time
            for v in ENDPOINT_KINDS.get(kind).variants_of(acesim.load_system("ace-isca21"))
        ]
        assert outcome.best.time == min(alone), kind
    assert comparison.speedup("ace") == pytest.approx(
        comparison.best_baseline.time / comparison.endpoints["ace"].best.time
    )
    one = acesim.run("ace-isca21", "all-gather", size="1 MiB")
    assert one.time == acesim.simulate_collective("ace-isca21", "all-gather", "1 MiB").time


def test_a_collective_without_its_size_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as err:
        acesim.compare("ace-isca21", "all-reduce")
    assert err.value.field == "size"


def test_the_command_line_compares_kinds_at_each_size_as_python_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["collective", "--sizes", "1MiB,4MiB", "--endpoints", "ace,ideal"]
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["schema"] == "acesim.collective-comparison/1"
    assert [r["size"] for r in doc["results"]] == [2**20, 4 * 2**20]
    python = acesim.compare("ace-isca21", "all-reduce", size="4 MiB", endpoints=["ace", "ideal"])
    assert doc["results"][1]["endpoints"] == python.to_dict()["endpoints"]
    table = runner.invoke(app, [*args, "--format", "csv"])
    assert table.exit_code == 0, table.output
    header, *rows = [line for line in table.stdout.splitlines() if line]
    assert header.split(",")[:3] == ["size", "baseline time", "baseline busbw"]
    assert len(rows) == 2 and all(row.endswith(")") for row in rows)  # the fastest, its variant
    both = cli_error(monkeypatch, capsys, "collective", "--endpoint", "ace", "--endpoints", "ideal")
    assert both.startswith("error: --endpoints:")
    unknown = cli_error(monkeypatch, capsys, "collective", "--endpoints", "ace,foo")
    assert unknown.startswith("error: --endpoints:") and "foo" in unknown
    # a comparison always searches each kind's variants: --search with it is said, not dropped
    search = cli_error(monkeypatch, capsys, "collective", "--endpoints", "ace", "--search")
    assert search.startswith("error: --search:")
