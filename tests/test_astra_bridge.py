"""The bridge from ASTRA-sim: its network and system files imported as an acesim system
(`acesim import-astra`), refused by name where acesim expects its own, written beside exported
traces (`export-chakra --astra`), and traces whose ranks differ only in node ids run in
symmetric mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from clitools import cli_error
from typer.testing import CliRunner

from acesim import simulate_collective
from acesim.cli import app
from acesim.config import load_system, system_from_dict
from acesim.config.astra import import_astra
from acesim.errors import ConfigError
from acesim.network.astra import astra_files
from acesim.runs import run_system
from acesim.workload.chakra import write_chakra
from acesim.workload.graph import Graph, Node

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "astra"
#: small equivalents of ASTRA-sim's HGX-H100 example files (examples/network/analytical and
#: examples/system in astra-sim/astra-sim), shipped with acesim's examples
NETWORK = ROOT / "examples" / "astra" / "hgx_h100.network.yml"
SYSTEM = ROOT / "examples" / "astra" / "hgx_h100.system.json"
MiB = 2**20


def test_the_hgx_h100_example_imports_to_the_hand_written_system(tmp_path: Path) -> None:
    out = tmp_path / "hgx.toml"
    done = CliRunner().invoke(app, ["import-astra", str(NETWORK), str(SYSTEM), "-o", str(out)])
    assert done.exit_code == 0, done.output
    imported = load_system(out)
    by_hand = load_system(FIXTURES / "hgx_h100_by_hand.toml")
    assert imported.network.dimensions[0].link_latency == pytest.approx(1872.5e-9, rel=1e-15)
    for size in (MiB, 64 * MiB):
        ours = simulate_collective(imported, "all-reduce", size).time
        assert ours == simulate_collective(by_hand, "all-reduce", size).time
    # every mapping is stated: in the file's sources and in the table on stderr
    for field in ("network.dimensions[0].link_latency", "collective.chunks", "npu.hbm_bandwidth"):
        assert imported.sources[field].kind == "astra-sim"
    assert "two links" in imported.sources["network.dimensions[0].link_latency"].note


def test_import_without_output_prints_a_usable_file(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["import-astra", str(NETWORK), str(SYSTEM)])
    assert done.exit_code == 0, done.output
    path = tmp_path / "printed.toml"
    path.write_text(done.stdout, encoding="utf-8")
    assert load_system(path).network.shape == (8,)


@pytest.mark.parametrize("name,kind", [(NETWORK, "network"), (SYSTEM, "system")])
def test_astra_files_where_acesim_expects_its_own_are_named(
    name: Path, kind: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "collective", "-s", str(name), "--sizes", "1MiB")
    assert f"is an ASTRA-sim {kind} file" in line and "acesim import-astra" in line


def test_a_key_without_an_acesim_equivalent_is_refused_by_name() -> None:
    network = yaml.safe_load(NETWORK.read_text(encoding="utf-8"))
    system = json.loads(SYSTEM.read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match="system: boost-mode: has no acesim equivalent"):
        import_astra(network, {**system, "boost-mode": 1})
    with pytest.raises(ConfigError, match="oneRing"):
        import_astra(network, {**system, "all-reduce-implementation": ["oneRing"]})
    with pytest.raises(ConfigError, match="npus_count: must list 1 entries"):
        import_astra({**network, "npus_count": [8, 2]}, system)


def three_dimensions() -> dict[str, object]:
    return {
        "name": "three",
        "npu": {"hbm_bandwidth": "2 TB/s"},
        "network": {
            "dimensions": [
                {
                    "kind": "ring",
                    "size": 4,
                    "link_bandwidth": "100 GB/s",
                    "links_per_npu": 2,
                    "link_latency": "300 ns",
                },  # fmt: skip
                {
                    "kind": "fully_connected",
                    "size": 4,
                    "link_bandwidth": "50 GB/s",
                    "links_per_npu": 3,
                    "link_latency": "700 ns",
                },  # fmt: skip
                {
                    "kind": "switch",
                    "size": 2,
                    "link_bandwidth": "25 GB/s",
                    "link_latency": "1.5 us",
                },  # fmt: skip
            ]
        },
        "collective": {"chunks": 2, "scheduling": "lifo", "endpoint_delay": "12 ns"},
        "endpoint": {"kind": "ideal"},
    }


def test_export_then_import_is_the_same_platform() -> None:
    system = system_from_dict(three_dimensions())
    files = astra_files(system)
    assert files.network["topology"] == ["Ring", "FullyConnected", "Switch"]
    doc, _ = import_astra(files.network, files.system)
    back = system_from_dict(doc)
    for a, b in zip(system.network.dimensions, back.network.dimensions, strict=True):
        assert (a.kind, a.size) == (b.kind, b.size)
        assert a.link_bandwidth * a.links_per_npu == pytest.approx(
            b.link_bandwidth * b.links_per_npu, rel=1e-15
        )
        assert a.link_latency == pytest.approx(b.link_latency, rel=1e-15)
    for field in ("chunks", "scheduling", "endpoint_delay", "composition"):
        assert getattr(back.collective, field) == getattr(system.collective, field)
    assert back.npu.hbm_bandwidth == system.npu.hbm_bandwidth
    for op in ("all-reduce", "all-gather", "all-to-all"):
        ours = simulate_collective(system, op, MiB).time
        assert simulate_collective(back, op, MiB).time == pytest.approx(ours, rel=1e-12)


def test_export_chakra_writes_the_astra_files_beside_the_traces(tmp_path: Path) -> None:
    prefix = tmp_path / "tr" / "micro"
    args = ["export-chakra", str(prefix), "-w", str(ROOT / "examples" / "micro_allreduce.txt")]
    args += ["-s", str(FIXTURES / "hgx_h100_by_hand.toml"), "--astra"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    network = yaml.safe_load(Path(f"{prefix}.network.yml").read_text(encoding="utf-8"))
    system = json.loads(Path(f"{prefix}.system.json").read_text(encoding="utf-8"))
    assert json.loads(Path(f"{prefix}.memory.json").read_text(encoding="utf-8")) == {
        "memory-type": "NO_MEMORY_EXPANSION"
    }
    assert network == yaml.safe_load(NETWORK.read_text(encoding="utf-8"))
    assert {k: v for k, v in system.items() if k != "roofline-enabled"} == json.loads(
        SYSTEM.read_text(encoding="utf-8")
    )
    assert system["roofline-enabled"] == 0  # ASTRA-sim replays acesim's kernel times
    assert "e+" not in done.stdout and "bytes of" not in done.stdout  # sizes with units


def test_ranks_that_differ_only_in_node_ids_run_in_symmetric_mode(tmp_path: Path) -> None:
    from acesim.workload.model import Compute

    def rank(offset: int) -> list[Node]:
        return [
            Node(offset + 1, "gemm", "compute", compute=Compute(flops=1e9, hbm_bytes=1e6)),
            Node(offset + 2, "ar", "collective", deps=(offset + 1,), op="all-reduce", size=MiB),
            Node(offset + 3, "next", "compute", (offset + 2,), compute=Compute(flops=1e9)),
        ]

    graph = Graph([rank(100 * r) for r in range(8)], name="ids")
    assert graph.symmetric
    write_chakra(graph, tmp_path / "ids")
    system = FIXTURES / "hgx_h100_by_hand.toml"
    workload = str(tmp_path / "ids")
    symmetric, _ = run_system(system, workload, iterations=1, warmup=0)
    exact, _ = run_system(system, workload, iterations=1, warmup=0, mode="exact")
    assert symmetric.info.mode == "symmetric"
    assert symmetric.iteration_time == pytest.approx(exact.iteration_time, rel=1e-9)
    differing = Graph([rank(0), [*rank(0)[:2], Node(3, "other", "compute", (2,))]])
    assert not differing.symmetric


# -- --format on the bridge's commands ----------------------------------------------------------


def test_import_astra_prints_its_mapping_table_in_the_asked_format(tmp_path: Path) -> None:
    import csv

    out = tmp_path / "hgx.toml"
    args = ["import-astra", str(NETWORK), str(SYSTEM), "-o", str(out), "--format", "csv"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    rows = list(csv.reader(done.stdout.splitlines()))  # the file went to -o: the table to stdout
    assert rows[0] == ["acesim field", "value", "from", "why"]
    by_field = {r[0]: r for r in rows[1:]}
    assert by_field["network.dimensions[0].link_latency"][1:3] == [
        "1872.5 ns",
        "latency[0] = 936.25",
    ]
    assert load_system(out).network.shape == (8,)


def test_import_astra_without_output_keeps_stdout_for_the_file(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["import-astra", str(NETWORK), str(SYSTEM), "--format", "json"])
    assert done.exit_code == 0, done.output
    path = tmp_path / "printed.toml"
    path.write_text(done.stdout, encoding="utf-8")
    assert load_system(path).network.shape == (8,)
    table = json.loads(done.stderr.splitlines()[0])
    assert table["title"] == "ASTRA-sim -> acesim"
    assert ["npu.hbm_bandwidth", "3350 GB/s"] == table["rows"][-2][:2]


def test_export_chakra_prints_its_summary_in_the_asked_format(tmp_path: Path) -> None:
    prefix = tmp_path / "micro"
    args = ["export-chakra", str(prefix), "-w", str(ROOT / "examples" / "micro_allreduce.txt")]
    args += ["-s", str(FIXTURES / "hgx_h100_by_hand.toml"), "--astra", "--format", "json"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    table = json.loads(done.stdout)  # one table, one line
    assert table["columns"] == ["item", "value"]
    rows = dict(table["rows"])
    assert rows["rank files"] == f"8 ({prefix}.0.et ... {prefix}.7.et)"
    assert rows["nodes"] == "40: 8 collective, 32 compute"
    assert rows["communication (all ranks)"] == "8 MiB"
    assert rows["ASTRA-sim network file"] == f"{prefix}.network.yml"
    assert f"--workload-configuration={prefix} " in rows["ASTRA-sim options"]
    plain = CliRunner().invoke(app, [*args[:-2], "--format", "plain"])
    assert plain.stdout.splitlines()[1].split() == ["#", "item", "value"]


def test_the_bridge_commands_refuse_an_unknown_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch, capsys, "import-astra", str(NETWORK), str(SYSTEM), "--format", "x"
    )
    assert line == "error: --format: must be one of table, plain, csv, markdown, json, got 'x'"
    line = cli_error(monkeypatch, capsys, "export-chakra", "p", "--format", "yaml")
    assert line.startswith("error: --format: must be one of table, plain")
