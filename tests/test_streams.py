"""Point streams (acesim.sweep.streams): a local pool whose worker dies is rebuilt, the points
in flight retried once and then returned as errors; a pool that dies before finishing any
point is an error of its own."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from acesim.errors import SweepError
from acesim.sweep.streams import InlineStream, LocalStream, drive


def crash_on_die(config: dict[str, Any]) -> dict[str, Any]:
    """A worker's run of a point: ``die`` kills the worker process (as an out-of-memory kill
    or a segfault would), anything else finishes (after ``sleep`` seconds)."""
    if config.get("die"):
        os._exit(1)
    time.sleep(config.get("sleep", 0))
    return {"status": "ok", "value": config["value"]}


def test_a_dead_worker_s_point_is_retried_once_then_an_error() -> None:
    stream = LocalStream(1, run=crash_on_die)
    try:
        items = [("a", {"value": 1}), ("b", {"value": 2}), ("c", {"die": True, "value": 3})]
        # one worker: the first points finish before the third kills it, twice
        got = dict(drive(stream, items))
    finally:
        stream.close()
    assert got["a"] == {"status": "ok", "value": 1}
    assert got["b"] == {"status": "ok", "value": 2}
    assert got["c"]["status"] == "error"
    assert "a worker process died" in got["c"]["error"]


def test_a_pool_that_dies_before_finishing_anything_is_an_error() -> None:
    stream = LocalStream(1, run=crash_on_die)
    try:
        with pytest.raises(SweepError, match="died before finishing any point"):
            list(drive(stream, [("x", {"die": True, "value": 0})]))
    finally:
        stream.close()


def test_this_process_runs_each_point_when_it_is_submitted() -> None:
    stream = InlineStream()
    stream.submit("k", {"kind": "nothing"})
    assert stream.in_flight == 1
    key, outcome = stream.next()
    assert key == "k" and outcome["status"] != "ok"  # a point of no kind: an error outcome
    assert stream.in_flight == 0


def test_closing_a_pool_abandons_a_running_point_and_leaves_nothing_running() -> None:
    """A plan stopped at its time limit: the point still running is not waited for, its
    worker ends, and the pool is shut down before close returns (nothing of it left to the
    interpreter's exit)."""
    stream = LocalStream(1, run=crash_on_die)
    stream.submit("slow", {"sleep": 600, "value": 0})
    workers = list(stream.pool._processes.values())
    began = time.monotonic()
    stream.close()
    assert time.monotonic() - began < 120  # not the point's 600 s
    assert workers and not any(w.is_alive() for w in workers)
