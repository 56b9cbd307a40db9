"""Traces keep Perfetto's slice-nesting rule, so the UI drops nothing.

Perfetto reads ``ts``/``dur`` (microseconds) back to integer nanoseconds and drops a complete
event that starts inside an open slice on its track but ends after it
(``slice_drop_overlapping_complete_event``). Times rounded independently to float
microseconds broke this by a rounding hair; the trace now snaps every boundary to whole ns.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from acesim.cli import app


def _ns(us: float) -> int:
    return round(us * 1000)


def nesting_violations(data: dict[str, Any]) -> list[str]:
    """Complete events that Perfetto would drop: per (pid, tid) track, sorted by (ts, -dur),
    each must start at/after the end of the enclosing open slice or end inside it."""
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    bad: list[str] = []
    for track, events in tracks.items():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list[int] = []  # ends (ns) of the open slices, innermost last
        for e in events:
            start = _ns(e["ts"])
            end = start + _ns(e["dur"])
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()  # that slice ended before (or as) this one starts
            if open_ends and end > open_ends[-1]:
                bad.append(f"{track} {e['name']}: [{start}, {end}] ns ends after {open_ends[-1]}")
                continue  # Perfetto drops it
            open_ends.append(end)
    return bad


def check_ns_grid(data: dict[str, Any], text: str) -> None:
    """Every ts and dur is a whole number of ns, written with at most three decimals."""
    for e in data["traceEvents"]:
        for key in ("ts", "dur"):
            if key in e:
                scaled = e[key] * 1000
                assert abs(scaled - round(scaled)) < 1e-6, (key, e)
    for number in re.findall(r'"(?:ts|dur)":(-?[0-9.eE+-]+)', text):
        assert "e" not in number.lower(), number
        assert len(number.partition(".")[2]) <= 3, number


def traced(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "t.json"
    res = CliRunner().invoke(app, ["run", "--endpoint", "ace", *args, "--trace", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    check_ns_grid(data, text)
    assert sum(1 for e in data["traceEvents"] if e["ph"] == "X") > 100
    return data


# exact mode on 8 NPUs (the torus at 4x1x2), every NPU its own track, at the default 3
# iterations with the warm-up: the same per-NPU tracks and iteration boundaries as on 16 NPUs, in
# a trace of 25 MB instead of 63 MB (tests/test_trace.py's exact trace is on 8 NPUs too)
@pytest.mark.parametrize(
    "args",
    [(), ("--exact", "--npus", "8")],
    ids=["readme-symmetric", "exact-8"],
)
def test_perfetto_drops_no_slice(tmp_path: Path, args: tuple[str, ...]) -> None:
    data = traced(tmp_path, *args)
    assert nesting_violations(data) == []
    if args:
        assert data["metadata"]["mode"] == "exact" and data["metadata"]["simulated_npus"] == 8


def test_the_checker_sees_a_child_ending_after_its_parent() -> None:
    def x(ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
        return {"ph": "X", "name": "e", "pid": 1, "tid": tid, "ts": ts, "dur": dur}

    ok = {"traceEvents": [x(0.0, 2.0), x(0.5, 1.5), x(2.0, 1.0), x(2.0, 0.0, tid=2)]}
    assert nesting_violations(ok) == []
    hair = {"traceEvents": [x(0.0, 2.0), x(1.0, 1.001)]}  # ends 1 ns after its parent
    assert len(nesting_violations(hair)) == 1
    assert math.isclose(1.001 * 1000, 1001)
