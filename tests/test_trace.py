"""Chrome/Perfetto timelines: the trace-event format, and consistency with the run's results.

Format rules checked (Chrome "Trace Event Format" document, JSON object form): known phase
types; complete events carry name, ts, dur, pid and tid with dur >= 0; timestamps ordered per
track; counters are numeric. Consistency: compute events of the measured iteration add up to
``RunResult.compute_time``; link-utilisation counters integrate to the bytes each egress
resource carried; HBM counters never exceed the NPU's bandwidth and integrate to the HBM bytes
moved by compute and in total.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from systems import dim
from typer.testing import CliRunner

from acesim.cli import app
from acesim.config import SystemConfig, system_from_dict
from acesim.results.trace import trace_events, write_trace
from acesim.runs import run_system
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

#: An ASTRA-sim 1.0 text workload: one layer whose weight gradient is all-reduced (1 MiB), in the
#: format of ASTRA-sim 1.0's micro-benchmarks (written here; named as the file is).
MICRO_TEXT = "MICRO\n1\nconv1 -1 5 NONE 0 5 NONE 0 5  ALLREDUCE 1048576 5\n"


@pytest.fixture
def micro(tmp_path: Path) -> Path:
    path = tmp_path / "microAllReduce.txt"
    path.write_text(MICRO_TEXT, encoding="utf-8")
    return path


KNOWN_PHASES = set("BEXiIbneCMsftPONDRc")
REL = 1e-6


def system(
    endpoint: str = "baseline", chunks: int = 2, active: int = 1, **baseline: Any
) -> SystemConfig:
    return system_from_dict(
        {
            "name": "trace-test",
            "npu": {"compute_units": 32, "matrix_flops": {"fp32": 8e12}, "hbm_bandwidth": 200e9},
            "network": {"dimensions": [dim("ring", 4, 50e9, 1e-6), dim("ring", 2, 25e9, 2e-6)]},
            "collective": {"chunks": chunks, "active_chunks_per_dimension": active},
            "endpoint": {"kind": endpoint, "baseline": baseline},
        }
    )


def workload(comm_bytes: float = 8e6) -> Workload:
    """Three layers whose kernels need HBM while weight-gradient all-reduces run."""

    def comp(gflops: float, mbytes: float) -> Compute:
        return Compute(flops=gflops * 1e9, hbm_bytes=mbytes * 1e6)

    layers = tuple(
        Layer(
            name=f"l{i}",
            forward=Pass(comp(2, 40)),
            input_grad=Pass(comp(2, 60)),
            weight_grad=Pass(comp(3, 50), Comm("all-reduce", comm_bytes)),
        )
        for i in range(3)
    )
    return Workload(name="tiny", layers=layers)


# -- the format --------------------------------------------------------------------------------


def check_format(data: dict[str, Any]) -> None:
    """Raise AssertionError where ``data`` breaks the trace-event format."""
    assert set(data) >= {"traceEvents", "displayTimeUnit", "metadata"}
    assert data["displayTimeUnit"] in ("ms", "ns")
    last: dict[tuple[Any, ...], float] = {}
    for e in data["traceEvents"]:
        ph = e["ph"]
        assert ph in KNOWN_PHASES, e
        assert isinstance(e["name"], str) and e["name"], e
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int), e
        if ph == "M":
            assert e["name"] in (
                "process_name",
                "process_sort_index",
                "process_labels",
                "thread_name",
                "thread_sort_index",
            )
            continue
        ts = e["ts"]
        assert isinstance(ts, (int, float)) and math.isfinite(ts) and ts >= 0, e
        if ph == "X":
            for key in ("name", "ts", "dur", "pid", "tid"):
                assert key in e, (key, e)
            assert math.isfinite(e["dur"]) and e["dur"] >= 0, e
        if ph == "C":
            assert e["args"] and all(
                isinstance(v, (int, float)) and math.isfinite(v) for v in e["args"].values()
            ), e
        track = (e["pid"], e.get("tid", 0))
        assert ts >= last.get(track, 0.0), ("timestamps out of order", e)
        last[track] = ts
    # Complete events on one track never overlap (lanes), so viewers nest nothing wrongly.
    spans: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            spans[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for track, items in spans.items():
        for (_s0, e0), (s1, _e1) in zip(items, items[1:], strict=False):
            assert s1 >= e0 - 1e-9 * max(1.0, e0), ("overlap on", track)


def counter_series(
    data: dict[str, Any], pid: int, name: str, key: str
) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["args"][key])
        for e in data["traceEvents"]
        if e["ph"] == "C" and e["pid"] == pid and e["name"] == name
    ]


def integral(series: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Integral (value x us) of a step function over [lo, hi] (us)."""
    total = 0.0
    for (t0, v), (t1, _) in zip(series, [*series[1:], (math.inf, 0.0)], strict=True):
        a, b = max(t0, lo), min(t1, hi)
        if b > a and v != 0:  # a series ends at 0 when the run is over
            total += v * (b - a)
    return total


def thread_names(data: dict[str, Any], pid: int) -> dict[int, str]:
    return {
        e["tid"]: e["args"]["name"]
        for e in data["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid
    }


def traced_run(tmp_path: Path, cfg: SystemConfig, **kw: Any) -> tuple[Any, Any, dict[str, Any]]:
    result, execution = run_system(cfg, workload(), trace=True, **kw)
    path = tmp_path / "trace.json"
    write_trace(execution, path)
    return result, execution, json.loads(path.read_text(encoding="utf-8"))


# -- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoint,baseline",
    [
        ("baseline", {}),
        ("baseline", {"hbm_sharing": "static", "hbm_share": 0.3}),
        ("ace", {}),
        ("ideal", {}),
    ],
    ids=["baseline-fair", "baseline-static", "ace", "ideal"],
)
def test_trace_follows_format_and_matches_results(
    tmp_path: Path, endpoint: str, baseline: dict[str, Any]
) -> None:
    cfg = system(endpoint, **baseline)
    result, execution, data = traced_run(tmp_path, cfg, iterations=3)
    check_format(data)
    meta = data["metadata"]
    assert meta["counters"] and meta["mode"] == "symmetric" and meta["npus"] == 8
    assert meta["processes"]["1"]["represents"] == "0-7"
    assert meta["measured_iterations"] == [1] and meta["warmup"] == 1
    k = 1

    names = thread_names(data, 1)
    assert {"iterations", "compute", "comm", "chunks local", "chunks vertical"} <= set(
        names.values()
    )
    compute_tid = next(t for t, n in names.items() if n == "compute")
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    compute = [e for e in xs if e["tid"] == compute_tid]
    assert len(compute) == 3 * 3 * 3
    for e in compute:
        assert set(e["args"]) >= {"layer", "pass", "iteration", "time_alone_us", "slowdown"}
        assert e["args"]["slowdown"] >= 1 - 1e-9
    mine = [e["dur"] for e in compute if e["args"]["iteration"] == k]
    # Slice ends are snapped to whole ns: each duration is within 1 ns of the simulator's.
    measured = sum(mine) * 1e-6
    assert measured == pytest.approx(result.compute_time, rel=1e-9, abs=1e-9 * len(mine))

    comm = [e for e in xs if names[e["tid"]].startswith("comm")]
    assert len(comm) == 3 * 3
    assert all(e["args"]["op"] == "all-reduce" and "collective" in e["args"] for e in comm)
    chunks = [e for e in xs if names[e["tid"]].startswith("chunks")]
    assert chunks and {e["args"]["dim"] for e in chunks} == {"local", "vertical"}

    # Link utilisation: within [0, 1], integrates to the bytes sent on each egress resource.
    platform = execution.platform
    for d, res in enumerate(platform.collectives.egress[0]):
        name = f"link {platform.topology.dimensions[d].name}"
        util = counter_series(data, 1, name, "utilisation")
        assert util and all(0.0 <= v <= 1.0 for _, v in util)
        sent = integral(util, 0.0, math.inf) * 1e-6 * res.capacity
        assert res.used > 0
        assert sent == pytest.approx(res.used, rel=REL)

    # HBM: compute + comm never above the NPU's bandwidth; integrals match the byte counts.
    npu = platform.npus[0]
    bw = cfg.npu.hbm_bandwidth / 1e9
    comp = counter_series(data, 1, "HBM GB/s", "compute")
    comm_bw = counter_series(data, 1, "HBM GB/s", "comm")
    assert all(c >= 0 and m >= 0 for (_, c), (_, m) in zip(comp, comm_bw, strict=True))
    assert all(c + m <= bw * (1 + 1e-9) for (_, c), (_, m) in zip(comp, comm_bw, strict=True))
    compute_bytes = integral(comp, 0.0, math.inf) * 1e3  # GB/s x us -> bytes
    total_bytes = compute_bytes + integral(comm_bw, 0.0, math.inf) * 1e3
    assert compute_bytes == pytest.approx(npu.compute_hbm_bytes, rel=REL)
    assert total_bytes == pytest.approx(sum(r.used for r in npu.hbm_resources), rel=REL)
    lo = execution.iteration_start[k] * 1e6
    hi = execution.iteration_start[k + 1] * 1e6
    window = result.iteration_time
    assert integral(comp, lo, hi) * 1e3 / window == pytest.approx(result.hbm_bw_compute, rel=REL)
    assert integral(comm_bw, lo, hi) * 1e3 / window == pytest.approx(
        result.hbm_bw_comm,
        rel=REL,
        abs=1e-9 * cfg.npu.hbm_bandwidth,  # summarize's rounding
    )
    if endpoint == "ideal":
        assert all(m == 0 for _, m in comm_bw)
    else:
        assert max(m for _, m in comm_bw) > 0
    if endpoint == "baseline" and not baseline:
        # Fair sharing: communication really takes HBM from a running kernel at some point.
        assert any(c > 0 and m > 0 for (_, c), (_, m) in zip(comp, comm_bw, strict=True))


def test_exact_mode_has_one_process_per_npu(tmp_path: Path) -> None:
    _result, execution, data = traced_run(tmp_path, system("baseline"), iterations=3, exact=True)
    check_format(data)
    meta = data["metadata"]
    assert meta["mode"] == "exact" and meta["simulated_npus"] == 8
    assert sorted(meta["processes"]) == [str(p) for p in range(1, 9)]
    assert all(meta["processes"][str(r + 1)]["represents"] == str(r) for r in range(8))
    names = [e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"]
    assert names == [f"NPU {r}" for r in range(8)]
    for rank, row in enumerate(execution.platform.collectives.egress):
        util = counter_series(data, rank + 1, "link local", "utilisation")
        assert integral(util, 0, math.inf) * 1e-6 * row[0].capacity == pytest.approx(
            row[0].used, rel=REL
        )


def test_overlapping_collectives_and_chunks_get_lanes(tmp_path: Path) -> None:
    _result, execution = run_system(
        system("baseline", chunks=4, active=2), workload(64e6), iterations=3, trace=True
    )
    path = tmp_path / "lanes.json"
    write_trace(execution, path)
    data = json.loads(path.read_text(encoding="utf-8"))
    check_format(data)  # includes: no overlap inside a track
    names = set(thread_names(data, 1).values())
    assert {"comm", "comm #2", "chunks local", "chunks local #2"} <= names
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert sum(e["cat"] == "comm" for e in xs) == 3 * 3  # 3 layers x 3 iterations
    phases = execution.platform.collectives.phase_log
    assert sum(e["cat"] == "chunk" for e in xs) == len(phases)


def test_trace_is_deterministic(tmp_path: Path) -> None:
    texts = []
    for i in range(2):
        _result, execution = run_system(system("ace"), workload(), iterations=3, trace=True)
        path = tmp_path / f"t{i}.json"
        write_trace(execution, path)
        texts.append(path.read_bytes())
    assert texts[0] == texts[1]


def test_tracing_does_not_change_results() -> None:
    cfg = system("baseline")
    plain, _ = run_system(cfg, workload(), iterations=3)
    traced, _ = run_system(cfg, workload(), iterations=3, trace=True)
    assert traced.to_dict() == plain.to_dict()


def test_trace_without_recording_has_node_tracks_only() -> None:
    _result, execution = run_system(system("baseline"), workload(), iterations=3)
    data = trace_events(execution)
    check_format(data)
    assert data["metadata"]["counters"] is False
    assert not any(e["ph"] == "C" for e in data["traceEvents"])
    assert any(e["ph"] == "X" and e["cat"] == "compute" for e in data["traceEvents"])


def test_cli_run_writes_trace(tmp_path: Path, micro: Path) -> None:
    out = tmp_path / "out.json"
    args = ["run", "--workload", str(micro), "--endpoint", "baseline", "--iterations", "3"]
    res = CliRunner().invoke(app, [*args, "--trace", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text(encoding="utf-8"))
    check_format(data)
    meta = data["metadata"]
    assert meta["workload"] == "microAllReduce" and meta["endpoint"] == "baseline"
    assert meta["counters"] and meta["processes"]["1"]["represents_count"] == meta["npus"]
    assert any(e["ph"] == "X" and e["cat"] == "chunk" for e in data["traceEvents"])


def test_cli_trace_needs_one_endpoint(tmp_path: Path, micro: Path) -> None:
    res = CliRunner().invoke(
        app, ["run", "--workload", str(micro), "--trace", str(tmp_path / "t.json")]
    )
    assert res.exit_code != 0
    assert not (tmp_path / "t.json").exists()
