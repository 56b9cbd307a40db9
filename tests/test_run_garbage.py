"""A finished run leaves no cycle through its graph, execution or collectives: they are freed by
reference counting when the run's result is all that is kept, not by the cyclic collector
(:meth:`acesim.hardware.platform.Platform.close`, the NPUs' units watchers and kernel
sequences, the executor's collective relay). A cycle among the engine's own objects is left
(pending events holding an NPU's method): a few hundred objects, not the run's graph."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

import pytest

from acesim.config import load_system
from acesim.runs.kinds import make_run_case
from acesim.runs.single import execute

#: the run's own objects, by type name, that must not be cyclic garbage after it
RUN_OBJECTS = (
    "Execution",
    "GraphExecutor",
    "Graph",
    "Node",
    "NodeRecord",
    "Collective",
    "Platform",
)


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize(
    ("endpoint", "stop"), [("baseline", "measured"), ("ace", "measured"), ("ideal", "end")]
)
def test_a_finished_training_run_leaves_no_cycle_through_its_graph(
    saved_garbage: list[object], endpoint: str, stop: str
) -> None:
    system = load_system("ace-isca21").with_endpoint(endpoint)
    case = make_run_case(
        system, "resnet50", {"npus": 16, "iterations": 3, "warmup": 1, "stop": stop}
    )
    result, _execution = execute(case)
    del _execution
    assert result.iteration_time > 0
    gc.collect()
    kinds = Counter(type(o).__name__ for o in saved_garbage)
    assert not {name: kinds[name] for name in RUN_OBJECTS if kinds[name]}
