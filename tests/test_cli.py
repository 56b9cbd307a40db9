"""The `acesim` command line: tables, JSON, presets, and one-line errors with exit status 2."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from clitools import cli_error, cli_json_stderr, cli_stdout
from typer.testing import CliRunner

from acesim import __version__, preset_names
from acesim.cli import app

runner = CliRunner()


def acesim(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the real entry point (as the console script does), capturing both streams."""
    return subprocess.run(
        [sys.executable, "-m", "acesim.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
    )


def test_collective_prints_an_nccl_tests_like_table() -> None:
    result = runner.invoke(
        app,
        ["collective", "--op", "all-reduce", "--sizes", "1KiB:1MiB", "--system", "a100-nvswitch-8"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for column in ("size", "time", "algbw", "busbw"):
        assert column in out
    assert "all-reduce on a100-nvswitch-8 (8 NPUs" in out
    for size in ("1 KiB", "2 KiB", "512 KiB", "1 MiB"):
        assert size in out
    assert out.count("KiB") + out.count("MiB") == 11  # 1 KiB .. 1 MiB in x2 steps


def test_collective_broadcast_prints_an_nccl_tests_table_in_exact_mode() -> None:
    result = runner.invoke(
        app,
        [
            "collective",
            "--op",
            "broadcast",
            "--sizes",
            "8B:1GiB:x64",
            "--system",
            "dgx-h100",
            "--exact",
            "--root",
            "3",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "broadcast on h100-nvswitch-8 (8 NPUs, root 3, baseline endpoint, exact)" in out
    for size in ("8 B", "512 B", "32 KiB", "2 MiB", "128 MiB"):
        assert size in out
    for column in ("algbw", "busbw", "protocol"):
        assert column in out


def test_collective_reduce_takes_forced_algo_proto_and_channels() -> None:
    result = runner.invoke(
        app,
        [
            "collective",
            "--op",
            "reduce",
            "--sizes",
            "64MiB",
            "--system",
            "dgx-h100",
            "--exact",
            "--algo",
            "ring",
            "--proto",
            "LL128",
            "--channels",
            "8",
            "--root",
            "5",
            "--format",
            "csv",
        ],
    )
    assert result.exit_code == 0, result.output
    cells = next(r for r in csv.reader(result.stdout.splitlines()) if r[0] == "64 MiB")
    assert "ring" in cells and "LL128" in cells and "8" in cells


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op", "reduce", "--exact", "--root", "8"], "error: --root: must be a whole number"),
        (["--op", "broadcast", "--exact", "--root", "-1"], "error: --root: must be a whole"),
        (["--op", "all-reduce", "--root", "1"], "error: --root: all-reduce takes no root"),
        (["--op", "sendrecv", "--algo", "ring"], "error: --algo: ring cannot run sendrecv"),
        (["--op", "broadcast", "--exact", "--algo", "nvls"], "error: --algo: nvls cannot run"),
        (["--op", "broadcst"], "error: --op: must be one of"),
        (["--op", "broadcast", "--exact", "--nodes", "2"], "error: broadcast runs on a group"),
        (["--op", "all-reduce", "--algo", "CollNetChain"], "error: --algo: must be one of"),
    ],
)
def test_collective_rooted_and_p2p_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    line = cli_error(
        monkeypatch, capsys, "collective", "--system", "dgx-h100", "--sizes", "1MiB", *args
    )
    assert line.startswith(message), line


@pytest.mark.parametrize(
    ("args", "what"),
    [(["--op", "broadcast"], "broadcast"), (["--op", "sendrecv", "--nodes", "2"], "sendrecv")],
)
def test_collectives_symmetric_mode_cannot_run_run_exact_and_say_why(
    args: list[str], what: str
) -> None:
    base = ["collective", "--system", "dgx-h100", "--sizes", "1MiB", "--json", *args]
    switched, stderr = cli_json_stderr(*base)
    asked, _ = cli_json_stderr(*base, "--exact")
    assert switched["results"][0]["mode"] == "exact" and what in stderr
    assert switched["results"][0]["time"] == asked["results"][0]["time"]


def test_collective_json_is_machine_readable() -> None:
    result = acesim(
        "collective", "--sizes", "1KiB:1MiB:x4", "--system", "a100-nvswitch-8", "--json"
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["schema"] == "acesim.collective/1"
    assert payload["system"] == "a100-nvswitch-8"
    sizes = [r["size"] for r in payload["results"]]
    assert sizes == [1024, 4096, 16384, 65536, 262144, 1048576]
    first = payload["results"][0]
    for key in ("op", "time", "algbw", "busbw", "npus", "bytes_sent_per_npu"):
        assert key in first
    assert first["npus"] == 8


def test_json_results_equal_the_python_api() -> None:
    from acesim import simulate_collective

    result = runner.invoke(
        app, ["collective", "--sizes", "64MiB", "--system", "a100-nvswitch-8", "--json"]
    )
    assert result.exit_code == 0
    row = json.loads(result.stdout)["results"][0]
    assert row == simulate_collective("a100-nvswitch-8", "all-reduce", 64 * 2**20).to_dict()


def test_presets_lists_every_shipped_preset() -> None:
    result = runner.invoke(app, ["presets"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in preset_names():
        assert name in result.stdout
    assert "(default)" in result.stdout


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["collective", "--op", "foo"], "--op: must be one of all-reduce, reduce-scatter"),
        (["collective", "--sizes=-1KiB"], "--sizes: sizes must be positive, got '-1KiB'"),
        (["collective", "--sizes", "1 KiB/s"], "--sizes: unknown size unit 'KiB/s'"),
        (
            ["collective", "--system", "a100-nvswich-8"],
            "system: unknown preset, got 'a100-nvswich-8' (did you mean 'a100-nvswitch-8'?)",
        ),
        (["collective", "--system", "missing.toml"], "missing.toml: file does not exist"),
        (["collective", "--endpoint", "magic"], "endpoint: must be one of baseline, ace, ideal"),
        (["overlap", "--host-copy", "1GiB:up"], "--host-copy: direction must be one of h2d, d2h"),
        (["overlap", "--host-copy", "0GiB"], "--host-copy: must be a positive size"),
        (["run", "--workers", "0"], "--workers: must be at least 1, got 0"),
        (["run", "--workers", "2", "--endpoint", "ideal"], "not with --endpoint, got 2"),
    ],
)
def test_errors_exit_2_with_one_line_and_no_traceback(
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the console script's entry point in this process (exit status 2, nothing on stdout, one
    # line starting "error: ", no traceback: clitools.cli_error); the real process's exit
    # status and stderr are the next test's
    line = cli_error(monkeypatch, capsys, *args)
    assert message in line


def test_config_file_errors_name_the_file_and_field(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "s.toml"
    path.write_text('[[network.dimensions]]\nkind = "ring"\nsize = 4\nlink_bandwith = "25 GB/s"\n')
    result = acesim("collective", "--system", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {path}: network.dimensions[0].link_bandwith: unknown key "
        "(did you mean 'link_bandwidth'?)"
    )


def test_debug_shows_the_traceback() -> None:
    result = acesim("--debug", "collective", "--op", "foo")
    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert "ConfigError" in result.stderr


@pytest.mark.parametrize(
    "command",
    ["run", "collective", "membw", "reproduce", "export-chakra", "presets", "kinds", "assumptions"],
)
def test_flags_show_no_value_placeholder(command: str) -> None:
    # A boolean flag takes no value: help must not suggest `--exact <bool>`.
    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    flagged = [line for line in out.output.splitlines() if "<bool>" in line]
    assert all("--help" in line for line in flagged), flagged


def test_set_changes_one_field_on_every_command_that_takes_a_system() -> None:
    runner = CliRunner()
    base = ["collective", "--sizes", "64MiB", "--json", "--endpoint", "baseline"]
    slow = runner.invoke(app, [*base, "--set", "npu.hbm_bandwidth=100 GB/s"])
    fast = runner.invoke(app, [*base, "--set", "npu.hbm_bandwidth='3.6 TB/s'"])
    assert slow.exit_code == 0 and fast.exit_code == 0, slow.output + fast.output
    t_slow = json.loads(slow.stdout)["results"][0]["time"]
    t_fast = json.loads(fast.stdout)["results"][0]["time"]
    assert t_slow > t_fast  # the baseline's HBM traffic binds at 100 GB/s
    chunks = runner.invoke(app, ["run", "--endpoint", "ideal", "--npus", "16", "--json",
                                 "--set", "collective.chunks=8"])  # fmt: skip
    assert chunks.exit_code == 0, chunks.output
    for command in (["membw", "--no-simulate", "--npus", "16"], ["assumptions"]):
        out = runner.invoke(app, [*command, "--set", "npu.hbm_bandwidth=1.2 TB/s"])
        assert out.exit_code == 0, out.output


@pytest.mark.parametrize(
    "item,message",
    [
        ("foo", "--set: expected dotted.path=value, got 'foo'"),
        ("npu.hbm_bandwdth=1", "npu.hbm_bandwdth: unknown key (did you mean 'hbm_bandwidth'?)"),
        ("npu.hbm_bandwidth=-1", "npu.hbm_bandwidth: must be positive, got -1 B/s"),
    ],
)
def test_set_errors_are_one_line(
    item: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # exit status 2, one line, no traceback: the entry point in this process (the real
    # process: test_errors_exit_2_with_one_line_and_no_traceback)
    line = cli_error(monkeypatch, capsys, "collective", "--sizes", "1MiB", "--set", item)
    assert message in line


def test_assumptions_show_values_as_written() -> None:
    out = CliRunner().invoke(app, ["assumptions", "ace-isca21"], env={"COLUMNS": "250"})
    assert out.exit_code == 0
    row = next(line for line in out.output.splitlines() if "endpoint.ace.sram" in line)
    assert "4 MiB" in row and "assumption" in row


def test_collective_table_uses_one_unit_per_column() -> None:
    out = CliRunner().invoke(
        app, ["collective", "--sizes", "1KiB:64MiB:x64"], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    assert "busbw (GB/s)" in out.output
    body = out.output.split("busbw (GB/s)")[1]
    assert "MB/s" not in body and "KB/s" not in body


@pytest.mark.parametrize(
    ("nccl_name", "algorithm"),
    [("NVLS", "nvls"), ("nvlstree", "nvls_tree"), ("Tree", "double_binary_tree")],
)
def test_collective_algo_takes_ncclalgo_names(nccl_name: str, algorithm: str) -> None:
    result = runner.invoke(
        app,
        [
            "collective",
            "--op",
            "all-reduce",
            "--sizes",
            "64MiB",
            "--system",
            "dgx-h100",
            "--nodes",
            "2",
            "--algo",
            nccl_name,
            "--format",
            "csv",
        ]
        if algorithm != "nvls"
        else [
            "collective",
            "--op",
            "all-reduce",
            "--sizes",
            "64MiB",
            "--system",
            "dgx-h100",
            "--algo",
            nccl_name,
            "--format",
            "csv",
        ],
    )
    assert result.exit_code == 0, result.output
    assert algorithm in next(r for r in csv.reader(result.stdout.splitlines()) if r[0] == "64 MiB")


@pytest.mark.parametrize("command", ["export-chakra", "run", "collective", "import-astra"])
def test_help_names_only_flags_the_command_has(command: str) -> None:
    import re

    from typer.main import get_command

    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    click_command = get_command(app).commands[command]  # type: ignore[attr-defined]
    flags = {opt for p in click_command.params for opt in p.opts}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out.output))
    assert named <= flags | {"--help"}, sorted(named - flags)


def _help_texts(command: object, path: str) -> list[tuple[str, str]]:
    """Every help text of ``command`` and its subcommands and parameters, by where it is."""
    texts = [(path, command.help)] if getattr(command, "help", None) else []  # type: ignore[attr-defined]
    texts += [
        (f"{path} {p.name}", p.help)
        for p in getattr(command, "params", [])
        if getattr(p, "help", None)
    ]
    for name, sub in getattr(command, "commands", {}).items():
        texts += _help_texts(sub, f"{path} {name}")
    return texts


def test_help_texts_keep_their_brackets() -> None:
    """Typer renders help as rich markup, where ``[word]`` is a style tag and vanishes: a help
    text naming a system table (``[scale_out]``, ``[npu]``, ``[sources]``) escapes it."""
    import re

    from typer.main import get_command

    texts = _help_texts(get_command(app), "acesim")
    assert texts
    tag = re.compile(r"(?<!\\)\[[a-z#/@][^\[\]]*\]")
    assert [(where, text) for where, text in texts if tag.search(text)] == []
    # click prints help as written: a percent sign is one (no printf-style doubling)
    assert [(where, text) for where, text in texts if "%%" in text] == []
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert "[scale_out]" in out.output and "[npu]" in out.output
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "[sources]" in out.output


def test_a_comparison_names_whose_footnote_differs() -> None:
    """A note every endpoint's result has prints once; one only some have names whose it is
    (an LLM comparison's endpoints compose their iterations differently)."""
    from acesim.commands.show import labelled_notes

    notes = [["shared", "composed: 5"], ["shared", "composed: 7"], ["shared", "composed: 5"]]
    assert labelled_notes(notes, ["baseline", "ace", "ideal"]) == [
        "shared",
        "baseline: composed: 5",
        "ace: composed: 7",
        "ideal: composed: 5",
    ]
    assert labelled_notes(notes, None) == ["shared", "composed: 5", "composed: 7"]


def test_an_unknown_workload_names_the_zoo_and_the_llm_models(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = cli_error(monkeypatch, capsys, "run", "-w", "llama3-7b")
    assert error.startswith("error: --workload: not a workload file")
    assert "resnet50" in error and "llama3-405b" in error
    assert "did you mean" in error and error.endswith("got 'llama3-7b'")


def test_collective_takes_the_work_bound_its_refusal_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`acesim collective` refuses a run past the work bound naming --max-messages, and
    takes that flag (before stop 66 the refusal named a flag the command did not have)."""
    line = cli_error(monkeypatch, capsys, "collective", "--sizes", "1MiB", "--max-messages", "10")
    assert line.startswith("error: --max-messages: the run") and "got 10" in line
    assert "1 MiB" in cli_stdout("collective", "--sizes", "1MiB", "--max-messages", "1000")
    line = cli_error(monkeypatch, capsys, "collective", "--sizes", "1MiB", "--max-messages", "0")
    assert line == "error: --max-messages: must be at least 1, got 0"
