"""The bound recorder drops what ended before the measured window (``forget_before``, at the
first measured iteration's start): every figure of the run is the same to the last bit as
when it keeps the whole run, the bound shares and their order included, and it holds fewer
segments."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config import load_system
from acesim.runs import training as training_run
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute
from acesim.training.bounds import BoundRecorder

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("ace-isca21", "resnet50", {"npus": 16}),
    ("ace-isca21", "gnmt", {"npus": 32, "endpoint": "ace"}),
    ("ace-isca21", "gnmt", {"npus": 16, "endpoint": "ace", "stop": "measured"}),
    ("ace-isca21", "dlrm", {"npus": 32, "endpoint": "ideal"}),
    ("ace-isca21", "resnet50", {"npus": 16, "loop": "bucketed", "stop": "measured"}),
    ("ace-isca21", "resnet50", {"npus": 16, "loop": "no_overlap", "endpoint": "ace"}),
    ("ace-isca21", "resnet50", {"npus": 16, "iterations": 5, "warmup": 2}),
    ("ace-isca21", "resnet50", {"npus": 8, "stragglers": [{"rank": 2, "slowdown": 1.5}]}),
    ("h100-nvswitch-8", "gpt", {"npus": 8}),
    ("h100-nvswitch-8", "resnet50", {"npus": 8, "endpoint": "copy_engine"}),
]


def _run(system: str, workload: str, options: dict[str, Any]) -> tuple[Any, Any]:
    options = dict(options)
    endpoint = options.pop("endpoint", None)
    base = load_system(system)
    config = base.with_endpoint(endpoint) if endpoint else base
    return execute(make_run_case(config, workload, options))


@pytest.mark.parametrize(("system", "workload", "options"), CASES)
def test_what_ended_before_the_window_is_dropped_and_no_figure_moves(
    system: str, workload: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    result, execution = _run(system, workload, options)
    with monkeypatch.context() as patch:
        # the run as with a trace: nothing dropped (runs.training passes measure_from=None)
        real = training_run.run_graph
        patch.setattr(
            training_run, "run_graph", lambda *a, **k: real(*a, **{**k, "measure_from": None})
        )
        kept, whole = _run(system, workload, options)
    assert result.to_dict() == kept.to_dict()  # to the last bit, the bounds' order included
    assert list(result.comm_bound_by) == list(kept.comm_bound_by)
    assert list(result.bound_by) == list(kept.bound_by)
    forgot, held = execution.bounds, whole.bounds
    assert len(forgot.messages) + len(forgot.kernels) < len(held.messages) + len(held.kernels)


def test_the_labels_heard_before_keep_their_place() -> None:
    recorder = BoundRecorder()
    recorder.segment("message", "a", 0.0, 1.0)
    recorder.segment("message", "b", 0.5, 1.5)
    recorder.segment("kernel", "c", 0.0, 1.0)
    recorder.forget_before(1.0)
    recorder.segment("message", "d", 1.0, 2.0)
    recorder.segment("message", "a", 1.5, 2.5)
    assert recorder.message_labels() == ["a", "b", "d"]
    assert [name for name, _s, _e in recorder.messages] == ["b", "d", "a"]
    assert recorder.kernels == []


def test_segments_read_as_the_list_of_tuples_they_stand_for() -> None:
    from acesim.training.bounds import Segments

    items = [("a", 0.0, 1.0), ("b", 0.5, 1.5), ("c", 1.0, 2.0)]
    segments = Segments(items)
    assert list(segments) == items and segments == items and len(segments) == 3
    assert segments[1] == items[1] and segments[1:] == items[1:]
    segments[0:2] = [("d", 2.0, 3.0)]
    assert segments == [("d", 2.0, 3.0), ("c", 1.0, 2.0)]
    segments += [("e", 3.0, 4.0)]
    segments.add("f", 4.0, 5.0)
    assert [name for name, _s, _e in segments] == ["d", "c", "e", "f"]
    assert segments.ended_after(2.0) == [("d", 2.0, 3.0), ("e", 3.0, 4.0), ("f", 4.0, 5.0)]
    del segments[0]
    assert segments.names == ["c", "e", "f"] and segments.starts == [1.0, 3.0, 4.0]
