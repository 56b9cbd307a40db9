"""No input breaks it: every file, database and process boundary ends in a one-line
AcesimError naming the file or option, the rule and the value; never a traceback, a hang or a
memory blow-up.

Each test feeds what used to fail (a traceback, a MemoryError, a hang, "N already in the
database, ran 0", worker processes left running) and checks the one-line error instead.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from clitools import cli_error

from acesim.cli import main
from acesim.config.presets import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_DEPTH,
    load_system,
    read_document,
)
from acesim.errors import (
    MAX_SHOWN_VALUE,
    ConfigError,
    SweepError,
    TraceError,
    WorkloadError,
)
from acesim.sweep import load_results, load_spec, run_sweep
from acesim.sweep.store import SCHEMA, ResultStore, read_table
from acesim.sweep.worker import flatten_metrics
from acesim.version import __version__
from acesim.workload.astra import MAX_INTEGER, MAX_WORKLOAD_BYTES, read_astra_workload
from acesim.workload.chakra import read_chakra
from acesim.workload.chakra import stream as chakra_stream
from acesim.workload.chakra.stream import MAX_TRACE_BYTES, load_bytes

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None  # type: ignore[assignment]

LAYER = "conv1 -1 {fwd} NONE 0 1 NONE 0 1 ALLREDUCE {size} 1"


def cli_ok(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[str, str]:
    """Run the entry point in this process; it must succeed. Returns (stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["acesim", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out, err = capsys.readouterr()
    assert info.value.code in (0, None), err
    assert "Traceback" not in out + err
    return out, err


def limited_run(
    args: list[str], cwd: Path, memory: int = 2 * 2**30
) -> subprocess.CompletedProcess[str]:
    """``python -m acesim.cli ARGS`` with at most ``memory`` bytes of address space, so that a
    regression ends in MemoryError instead of exhausting the machine."""

    def limit() -> None:
        if resource is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "acesim.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
        env=env,
    )


# --- 1. reading documents: encodings, folders, nesting, huge numbers, size ------------------


def _latin1(path: Path) -> None:
    path.write_bytes('name = "café"\n'.encode("latin-1"))


def _utf16(path: Path) -> None:
    path.write_text('name = "x"\n', encoding="utf-16")


def _utf16_no_bom(path: Path) -> None:
    path.write_bytes('name = "x"\n'.encode("utf-16-le"))


def _binary(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 4)


def _folder(path: Path) -> None:
    path.mkdir()


FILES = [
    (_latin1, "x.toml", ["not UTF-8", "0xe9", "line 1"]),
    (_utf16, "x.toml", ["UTF-16", "byte-order mark", "UTF-8"]),
    (_utf16_no_bom, "x.json", ["NUL byte", "UTF-16"]),
    (_binary, "x.yaml", ["NUL byte", "binary"]),
    (_folder, "x.toml", ["is a directory"]),
]


@pytest.mark.parametrize(("make", "name", "words"), FILES, ids=[f[0].__name__ for f in FILES])
@pytest.mark.parametrize("command", ["sweep", "run"])
def test_unreadable_documents_are_one_line_errors_naming_the_file(
    make: Any,
    name: str,
    words: list[str],
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / name
    make(path)
    args = ["sweep", str(path)] if command == "sweep" else ["run", "-s", str(path)]
    line = cli_error(monkeypatch, capsys, *args)
    assert line.startswith(f"error: {path}: ")
    for word in words:
        assert word in line


def test_sweep_of_a_directory_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli_error(monkeypatch, capsys, "sweep", "/") == "error: /: is a directory, expected "
        "a TOML, YAML or JSON file"
    )


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_document(fifo)


def test_a_document_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    with open(path, "wb") as handle:
        handle.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: no disk space, no reading
    with pytest.raises(ConfigError, match=r"more than the 64 MiB") as info:
        load_system(path)
    assert str(info.value).startswith(str(path))
    assert MAX_DOCUMENT_BYTES == 64 * 2**20


DEEP = {
    ".json": "[" * 100_000 + "]" * 100_000,
    ".toml": "a = " + "[" * 100_000 + "]" * 100_000,
    ".yaml": "a: " + "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("suffix", sorted(DEEP))
def test_100000_nested_brackets_are_a_config_error(suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(DEEP[suffix], encoding="utf-8")
    for load in (load_spec, load_system):
        with pytest.raises(ConfigError, match=f"nested more than {MAX_DOCUMENT_DEPTH}") as info:
            load(path)
        assert str(info.value).startswith(str(path))


def test_nesting_within_the_parsers_limit_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"base": {"x": ' + "[" * 200 + "]" * 200 + "}}", encoding="utf-8")
    with pytest.raises(ConfigError, match="nested more than 64 levels deep"):
        load_spec(path)


BIG = "9" * 5000


@pytest.mark.parametrize(
    ("suffix", "text"),
    [(".json", f'{{"name": {BIG}}}'), (".toml", f"name = {BIG}"), (".yaml", f"name: {BIG}")],
)
def test_a_5000_digit_integer_is_a_config_error(suffix: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / f"big{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="a number is too long") as info:
        load_spec(path)
    assert str(info.value).startswith(str(path))
    assert len(str(info.value)) < 400


def test_an_integer_beyond_64_bits_names_its_field(tmp_path: Path) -> None:
    path = tmp_path / "sys.toml"
    path.write_text("[npu]\nhbm_bandwidth = " + "9" * 400 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_system(path)
    message = str(info.value)
    assert message.startswith(f"{path}: npu.hbm_bandwidth: integers must fit in 64 bits")
    assert "integer of about" in message and len(message) < 300


# --- 2. YAML aliases (billion laughs) and bounded values in messages ------------------------


def _laughs() -> str:
    lines = ["grid:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"  {name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    lines.append(f"name: *{previous}")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_before_anything_expands(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(_laughs(), encoding="utf-8")
    assert path.stat().st_size < 600
    proc = limited_run(["sweep", str(path)], tmp_path)  # used to end in MemoryError
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: YAML anchors and aliases")
    assert "not supported" in lines[0] and "line 2" in lines[0]


def test_yaml_anchors_and_merge_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("x: &base {a: 1}\nbase:\n  <<: *base\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="aliases .* are not supported"):
        read_document(path)


def test_config_error_shows_a_bounded_value() -> None:
    laughs: Any = ["lol"] * 9
    for _ in range(9):
        laughs = [laughs] * 9  # 9**10 strings if expanded
    start = time.perf_counter()
    for value in (laughs, "x" * 10**7, 10**5000, {str(i): i for i in range(10**5)}):
        message = str(ConfigError("field", "must be small", value))
        assert len(message) <= len("field: must be small, got ") + MAX_SHOWN_VALUE
        assert "..." in message or message.endswith("digits>")
    assert time.perf_counter() - start < 2


# --- 3. gzip-compressed Chakra traces ---------------------------------------------------------


def test_gzip_bomb_is_refused_at_the_decompression_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MAX_TRACE_BYTES == 2**30
    monkeypatch.setattr(chakra_stream, "MAX_TRACE_BYTES", 2**20)
    bomb = tmp_path / "bomb.0.et"
    bomb.write_bytes(gzip.compress(b"\0" * (16 * 2**20)))  # 16 KiB that expand to 16 MiB
    with pytest.raises(TraceError, match="expands to more than the 1 MiB") as info:
        read_chakra([bomb])
    assert str(info.value).startswith(str(bomb))
    with pytest.raises(TraceError, match="expands to more than"):
        load_bytes("x.et", gzip.compress(b"\0" * 5000), limit=4096)
    assert len(load_bytes("x.et", gzip.compress(b"\0" * 4096), limit=4096)) == 4096


@pytest.mark.timeout(60)
def test_gzipped_zeros_end_at_the_first_repeated_node_id(tmp_path: Path) -> None:
    # 40 MiB of zeros is 40 million empty records: the reader used to hold a Node for each.
    zeros = tmp_path / "zeros.0.et"
    zeros.write_bytes(gzip.compress(b"\0" * (40 * 2**20)))
    start = time.perf_counter()
    with pytest.raises(TraceError, match="node id 0 repeats"):
        read_chakra([zeros])
    assert time.perf_counter() - start < 10


def test_a_rank_file_over_the_cap_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.0.et"
    with open(big, "wb") as handle:
        handle.truncate(MAX_TRACE_BYTES + 1)  # sparse
    with pytest.raises(TraceError, match="more than the 1 GiB"):
        read_chakra([big])


# --- 4. ASTRA-sim text --------------------------------------------------------------------


def _astra(tmp_path: Path, fwd: str = "1", size: str = "100") -> Path:
    path = tmp_path / "w.txt"
    path.write_text(f"DATA\n1\n{LAYER.format(fwd=fwd, size=size)}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fwd", "size", "field"),
    [
        ("1" + "0" * 309, "100", "fwd_compute_time"),  # OverflowError converting to seconds
        ("1", "1" + "0" * 309, "wg_comm_size"),  # OverflowError converting to float bytes
        ("1", "9" * 5000, "wg_comm_size"),  # ValueError: more than 4,300 digits
        ("1", str(MAX_INTEGER + 1), "wg_comm_size"),
    ],
)
def test_astra_numbers_beyond_64_bits_name_file_and_line(
    fwd: str, size: str, field: str, tmp_path: Path
) -> None:
    path = _astra(tmp_path, fwd, size)
    with pytest.raises(WorkloadError) as info:
        read_astra_workload(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: {field}: must fit in 64 bits")
    assert len(message) < 300


def test_astra_largest_64_bit_size_is_read(tmp_path: Path) -> None:
    workload = read_astra_workload(_astra(tmp_path, size=str(MAX_INTEGER)))
    comm = workload.layers[0].weight_grad.comms[0]
    assert comm.size == float(MAX_INTEGER)


@pytest.mark.parametrize(
    ("make", "words"), [(_latin1, "not UTF-8"), (_utf16, "UTF-16"), (_folder, "is a directory")]
)
def test_astra_unreadable_files_are_workload_errors(make: Any, words: str, tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    make(path)
    with pytest.raises(WorkloadError, match=words) as info:
        read_astra_workload(path)
    assert str(info.value).startswith(str(path))


def test_astra_file_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    with open(path, "wb") as handle:
        handle.truncate(MAX_WORKLOAD_BYTES + 1)
    with pytest.raises(WorkloadError, match="more than the 64 MiB"):
        read_astra_workload(path)


# --- 5. SQLite results ----------------------------------------------------------------------


def tiny_spec() -> dict[str, Any]:
    return {
        "name": "tiny",
        "kind": "collective",
        "base": {"system": "ace-isca21", "op": "all-reduce", "size": "1 MiB"},
        "grid": {"endpoint.kind": ["baseline", "ace"], "npu.hbm_bandwidth": ["450 GB/s", "1 TB/s"]},
    }


def _corrupt_points_table(db: Path) -> None:
    """Overwrite the points table's root page with garbage; the hash index stays readable."""
    conn = sqlite3.connect(db)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'points'").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page : root * page] = bytes((i * 37 + 11) % 256 for i in range(page))
    db.write_bytes(bytes(data))


def test_database_with_garbage_pages_is_a_sweep_error_not_already_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    assert run_sweep(tiny_spec(), db, workers=0).ok == 4
    _corrupt_points_table(db)
    # What the sweep used to trust: the index still lists every hash.
    conn = sqlite3.connect(db)
    assert len(conn.execute("SELECT hash FROM points").fetchall()) == 4
    conn.close()
    with pytest.raises(SweepError, match="quick_check") as info:
        run_sweep(tiny_spec(), db, workers=0)
    assert str(info.value).startswith(f"{db}: corrupt SQLite database")
    for command in ("results", "plot"):
        args = [command, str(db)] + (
            ["--x", "npu.hbm_bandwidth", "--y", "busbw"] * (command == "plot")
        )
        line = cli_error(monkeypatch, capsys, *args)
        assert line.startswith(f"error: {db}: corrupt SQLite database")


def test_foreign_database_is_refused_and_left_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "app.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(SweepError, match="no acesim schema marker"):
        run_sweep(tiny_spec(), db, workers=0)
    line = cli_error(monkeypatch, capsys, "results", str(db))
    assert "not an acesim results database" in line and "users" in line
    assert db.read_bytes() == before  # no table added, journal mode unchanged


def _acesim_like(db: Path, points_sql: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))
    conn.execute("CREATE TABLE columns (name TEXT PRIMARY KEY, role TEXT, position INTEGER)")
    conn.execute(points_sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("points_sql", "words"),
    [
        ("CREATE VIEW points AS SELECT 1 AS hash", "'points' is a view, not a table"),
        ("CREATE TABLE points (hash TEXT PRIMARY KEY, status TEXT)", "lacks the columns sweep"),
    ],
)
def test_points_table_must_be_a_table_with_the_fixed_columns(
    points_sql: str, words: str, tmp_path: Path
) -> None:
    db = tmp_path / "odd.sqlite"
    _acesim_like(db, points_sql)
    for open_it in (ResultStore, read_table):
        with pytest.raises(SweepError, match=words) as info:
            open_it(db)
        assert str(info.value).startswith(str(db))


@pytest.mark.parametrize("content", [b"hello, not a database\n" * 10, b"\x00" * 4096])
def test_a_file_that_is_not_sqlite_is_refused(content: bytes, tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    db.write_bytes(content)
    for open_it in (ResultStore, read_table):
        with pytest.raises(SweepError, match="not an SQLite database"):
            open_it(db)


def test_a_directory_as_database(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="is a directory"):
        run_sweep(tiny_spec(), tmp_path, workers=0)


def test_new_database_records_schema_and_version(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    with ResultStore(db):
        pass
    conn = sqlite3.connect(db)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    conn.close()
    assert meta == {"schema": SCHEMA, "version": __version__}
    with ResultStore(db):  # an existing acesim database opens again
        pass


def test_concurrent_writers_creating_one_database(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            with ResultStore(db) as store:
                store.write(
                    hash=f"h{i}",
                    sweep="s",
                    point=i,
                    kind="collective",
                    axes={"a": i},
                    outcome={"status": "ok", "metrics": {"t": float(i)}},
                    config="{}",
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(load_results(db)["point"]) == list(range(6))


def test_non_finite_metrics_are_stored_as_null(tmp_path: Path) -> None:
    assert flatten_metrics({"a": math.nan, "b": {"c": math.inf}, "d": 1.5}) == {
        "a": None,
        "b.c": None,
        "d": 1.5,
    }
    db = tmp_path / "nan.sqlite"
    with ResultStore(db) as store:
        store.write(
            hash="h",
            sweep="s",
            point=0,
            kind="collective",
            axes={},
            outcome={"status": "ok", "metrics": {"x": math.nan, "y": -math.inf}},
            config="{}",
        )
    conn = sqlite3.connect(db)
    assert conn.execute('SELECT typeof("x"), typeof("y") FROM points').fetchone() == (
        "null",
        "null",
    )
    conn.close()


def test_results_and_plot_cope_with_null_nan_and_old_text_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    spec = tiny_spec()
    spec["grid"]["npu.hbm_bandwidth"] = ["450 GB/s", "900 GB/s", "1 TB/s", "2 TB/s"]
    assert run_sweep(spec, db, workers=0).ok == 8
    conn = sqlite3.connect(db)
    hashes = [r[0] for r in conn.execute("SELECT hash FROM points ORDER BY point")]
    conn.execute("UPDATE points SET busbw = NULL WHERE hash = ?", (hashes[0],))
    conn.execute(
        "UPDATE points SET busbw = 'nan' WHERE hash = ?", (hashes[1],)
    )  # as earlier versions stored it
    conn.execute("UPDATE points SET busbw = 'inf' WHERE hash = ?", (hashes[2],))
    conn.commit()
    conn.close()
    out, _ = cli_ok(monkeypatch, capsys, "results", str(db), "-c", "endpoint.kind,busbw")
    assert "8 points, 8 ok" in " ".join(out.split())  # the title may wrap
    png = tmp_path / "p.png"
    args = ["plot", str(db), "--x", "npu.hbm_bandwidth", "--y", "busbw", "--hue", "endpoint.kind"]
    out, err = cli_ok(monkeypatch, capsys, *args, "-o", str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "2 lines" in out
    assert "left out 3 points whose npu.hbm_bandwidth or busbw is missing, NaN or infinite" in err


# --- 6. the Dask scheduler address ------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "local://",
        "tcp://",
        "tcp://host",
        "tcp://:8786",
        "tcp://h:99999",
        "tcp://h:x",
        "http://h:1",
        "somewhere",
    ],
)
def test_malformed_dask_address_is_a_sweep_error_before_any_work(
    address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "d.sqlite"
    with pytest.raises(SweepError) as info:
        run_sweep(tiny_spec(), db, dask=address)
    message = str(info.value)
    assert message.startswith("--dask ") and "'local'" in message and "tcp://HOST:PORT" in message
    assert not db.exists()
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(tiny_spec()), encoding="utf-8")
    line = cli_error(monkeypatch, capsys, "sweep", str(spec), "--db", str(db), "--dask", address)
    assert line.startswith("error: --dask ")
    assert not db.exists()


# --- 7. a SIGKILLed `acesim reproduce` leaves no worker behind --------------------------------


@pytest.mark.timeout(120)
def test_killed_reproduce_leaves_no_worker_processes(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "acesim.cli",
        "reproduce",
        "--out",
        str(tmp_path / "out"),
        "--workloads",
        "resnet50",
        "--npus",
        "16,32",
        "--no-figures",
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        # Pool workers are forked by the forkserver (a child of the command): grandchildren.
        while time.monotonic() < deadline and proc.poll() is None:
            children = parent.children(recursive=True)
            if sum(1 for c in children if _ppid(c) != proc.pid) >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "reproduce finished before its workers were seen"
        children = parent.children(recursive=True)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5 + 2 * 0.5
        while time.monotonic() < deadline and any(_alive(c) for c in children):
            time.sleep(0.05)
        left = [c.pid for c in children if _alive(c)]
        assert not left, f"worker processes {left} outlived the killed reproduce"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in children:
            if _alive(c):
                c.kill()


def _ppid(p: psutil.Process) -> int | None:
    try:
        return p.ppid()
    except psutil.Error:
        return None


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
