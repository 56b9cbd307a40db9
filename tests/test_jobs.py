"""Jobs sharing a system (issue 31): one simulation, per-job results, the spec's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import acesim
from acesim.config.jobs import TrainingJob
from acesim.errors import ConfigError
from acesim.runs.jobs import load_jobs, make_jobs, run_jobs
from tests.clitools import cli_stdout

#: A data-parallel ASTRA-sim 1.0 workload: fixed compute times, one all-reduce a layer.
DATA = """DATA
3
l0 -1 20000 NONE 0 15000 NONE 0 18000 ALLREDUCE 1048576 1000
l1 -1 50000 NONE 0 40000 NONE 0 42000 ALLREDUCE 4194304 1000
l2 -1 30000 NONE 0 25000 NONE 0 26000 ALLREDUCE 262144 1000
"""

#: Link bandwidth of the spine system, B/s.
BANDWIDTH = 100e9


def _spine(oversubscription: float = 2.0) -> dict[str, Any]:
    """Four NPUs on one switch dimension, two per leaf; each leaf's uplinks carry
    ``2 x BANDWIDTH / oversubscription``; no latency, the ideal endpoint, whole payload."""
    return {
        "name": "spine",
        "network": {
            "dimensions": [
                {
                    "kind": "switch",
                    "size": 4,
                    "link_bandwidth": BANDWIDTH,
                    "link_latency": 0.0,
                    "links_per_npu": 1,
                    "leaf_size": 2,
                    "oversubscription": oversubscription,
                }
            ]
        },
        "collective": {"chunks": 1, "endpoint_delay": 0.0, "protocol_efficiency": 1.0},
        "endpoint": {"kind": "ideal"},
    }


def _loop(name: str, npus: str, size: str = "64 MiB", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "collective", "size": size, "placement": {"npus": npus}, **extra}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.txt"
    path.write_text(DATA)
    return path


def test_one_job_alone_gives_its_acesim_run_bit_for_bit(data: Path) -> None:
    args = ["-s", "h100-nvswitch-8", "--endpoint", "baseline", "-n", "3", "--warmup", "1"]
    run = json.loads(cli_stdout("run", "--json", "-w", str(data), *args))
    spec = {
        "system": "h100-nvswitch-8",
        "iterations": 3,
        "warmup": 1,
        "jobs": [
            {"name": "a", "kind": "training", "workload": str(data), "placement": {"nodes": "0"}}
        ],
    }
    job = run_jobs(spec, endpoint="baseline").jobs[0]
    assert job.iteration_time == run["iteration_time"]
    assert job.slowdown is None  # nothing else ran: the shared run is the alone run


def test_identical_jobs_on_disjoint_nodes_each_give_the_alone_result(data: Path) -> None:
    spec = {
        "system": "h100-nvswitch-8",
        "nodes": 2,
        "iterations": 3,
        "jobs": [
            {"name": n, "kind": "training", "workload": str(data), "placement": {"nodes": node}}
            for n, node in (("a", "0"), ("b", "1"))
        ],
    }
    result = run_jobs(spec, endpoint="baseline")
    a, b = result.jobs
    assert a.iteration_time == a.alone == b.iteration_time == b.alone
    assert a.slowdown == b.slowdown == 1.0
    assert a.shared == b.shared == {}  # no link carried both


def test_two_data_parallel_jobs_share_an_oversubscribed_uplink_max_min_fairly() -> None:
    # By hand: a 2-rank ring all-reduce of S bytes sends S/2 twice from each rank, so alone
    # (egress B, uplink 2B/2 = B) it takes 2 (S/2) / B = S / B. Jobs a (NPUs 0, 2) and b
    # (1, 3) both cross leaf 0's and leaf 1's uplinks, each of capacity B: max-min fairness
    # gives each flow B/2, so each all-reduce takes 2 S / B, twice its time alone.
    size = 64 * 2**20
    spec = {
        "system": _spine(),
        "iterations": 2,
        "warmup": 0,
        "jobs": [_loop("a", "0,2"), _loop("b", "1,3")],
    }
    result = run_jobs(spec)
    for job, other in zip(result.jobs, reversed(result.jobs), strict=True):
        assert job.alone == pytest.approx(size / BANDWIDTH, rel=1e-12)
        assert job.iteration_time == pytest.approx(2 * size / BANDWIDTH, rel=1e-12)
        assert job.slowdown == pytest.approx(2.0, rel=1e-12)
        assert job.bound == "exposed: local.spine_up"
        assert job.shared_with == {other.name: pytest.approx(job.iteration_time, rel=1e-12)}


def test_without_oversubscription_the_same_jobs_do_not_slow_each_other() -> None:
    spec = {
        "system": _spine(oversubscription=1.0),
        "iterations": 1,
        "warmup": 0,
        "jobs": [_loop("a", "0,2"), _loop("b", "1,3")],
    }
    for job in run_jobs(spec).jobs:
        assert job.slowdown == 1.0


def test_a_job_after_another_starts_when_it_ends_and_a_start_time_delays_one() -> None:
    spec = {
        "system": _spine(),
        "iterations": 1,
        "warmup": 0,
        "jobs": [
            _loop("a", "0,2"),
            _loop("b", "1,3", after="a"),
            _loop("c", "0,2", size="1 MiB", start=0.5),
        ],
        "colocate": True,
    }
    result = run_jobs(spec)
    a, b, c = result.jobs
    assert b.start == a.end
    assert c.start == 0.5
    assert b.slowdown == pytest.approx(1.0, rel=1e-12)  # ran after a, alone on the spine


def test_colocated_jobs_take_turns_on_the_npus() -> None:
    spec = {
        "system": "h100-nvswitch-8",
        "iterations": 2,
        "warmup": 0,
        "colocate": True,
        "jobs": [
            {
                "name": n,
                "kind": "collective",
                "size": "16 MiB",
                "gap": "100 us",
                "placement": {"npus": "0-7"},
            }
            for n in ("a", "b")
        ],
    }
    result = run_jobs(spec)
    for job in result.jobs:
        assert job.slowdown is not None and job.slowdown > 1.0


def test_policies_place_jobs_on_free_aligned_blocks() -> None:
    def policy(name: str, kind: str, count: int, **extra: Any) -> dict[str, Any]:
        place = {"policy": kind, "count": count, **extra}
        return {"name": name, "kind": "collective", "size": "1 MiB", "placement": place}

    jobs = [
        _loop("a", "0-3"),
        policy("d", "spread", 4),
        policy("b", "packed", 2),
        policy("c", "random", 2, seed=3),
    ]
    spec = {"system": "h100-nvswitch-8", "nodes": 4, "jobs": jobs}
    case = make_jobs(spec)
    placed = {job.name: job.npus for job in case.jobs}
    assert placed["d"] == (4, 12, 20, 28)  # one NPU per node, the first local slot free
    assert case.jobs[1].shape == (1, 4)
    assert placed["b"] == (6, 7)  # the first free aligned pair
    assert placed == {j.name: j.npus for j in make_jobs(spec).jobs}  # the seed decides
    taken = {p for name in "abd" for p in placed[name]}
    assert not taken & set(placed["c"]) and placed["c"][0] % 2 == 0


def _error(spec: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        make_jobs(spec)
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("jobs", "extra", "words"),
    [
        ([_loop("a", "0-3"), _loop("b", "2-5")], {}, ["jobs[1].placement", "overlaps job 'a'"]),
        (
            [_loop("a", "0-7", after="b"), _loop("b", "8-15", after="a")],
            {"nodes": 2},
            ["jobs[0].after", "cycle", "a -> b -> a"],
        ),
        ([_loop("a", "0-3", after="z")], {}, ["jobs[0].after", "names no job", "'z'"]),
        ([_loop("a", "0-3"), _loop("a", "4-7")], {}, ["jobs[1].name", "unique"]),
        ([_loop("a", "0-9")], {}, ["jobs[0].placement", "the system has 8"]),
        ([_loop("a", "0,1,9")], {"nodes": 2}, ["jobs[0].placement", "not a block"]),
        ([_loop("a", "0-6")], {}, ["jobs[0]", "cannot express"]),
        (
            [
                {
                    "name": "a",
                    "kind": "collective",
                    "size": "1 MiB",
                    "placement": {"policy": "packed", "count": 16},
                }
            ],
            {},
            ["jobs[0].placement.count"],
        ),
        (
            [
                _loop("a", "0-7"),
                {
                    "name": "b",
                    "kind": "collective",
                    "size": "1 MiB",
                    "placement": {"policy": "packed", "count": 4},
                },
            ],
            {},
            ["jobs[1].placement", "does not fit"],
        ),
        (
            [
                {
                    "name": "a",
                    "kind": "collective",
                    "size": "1 MiB",
                    "placement": {"nodes": "0", "npus": "0-3"},
                }
            ],
            {},
            ["jobs[0].placement", "exactly one"],
        ),
        ([_loop("a", "3-1")], {}, ["jobs[0].placement.npus", "backwards"]),
        (
            [
                {
                    "name": "a",
                    "kind": "training",
                    "workload": "resnet50",
                    "iterations": 2,
                    "placement": {"npus": "0-7"},
                }
            ],
            {},
            ["jobs[0].iterations", "warm-up + 2"],
        ),
        ([_loop("a", "0-3", size="-1 MiB")], {}, ["jobs[0].size"]),
        (
            [
                {
                    "name": "a",
                    "kind": "collective",
                    "size": "1 MiB",
                    "op": "gossip",
                    "placement": {"npus": "0-3"},
                }
            ],
            {},
            ["jobs[0].op"],
        ),
        # a job without its kind, or of a kind there is not: the tag's key, not pydantic's words
        ([{"name": "a", "model": "llama3-8b"}], {}, ["jobs[0].kind: required"]),
        (
            [{"name": "a", "kind": "nope"}],
            {},
            ["jobs[0].kind: must be one of training, llm, collective, got 'nope'"],
        ),
    ],
)
def test_bad_specs_are_one_line_errors_naming_field_rule_and_value(
    jobs: list[dict[str, Any]], extra: dict[str, Any], words: list[str]
) -> None:
    text = _error({"system": "h100-nvswitch-8", "jobs": jobs, **extra})
    for word in words:
        assert word in text, text


def test_jobs_command_prints_json_and_writes_one_trace_process_per_job(tmp_path: Path) -> None:
    spec = tmp_path / "jobs.json"
    spec.write_text(
        json.dumps(
            {
                "system": _spine(),
                "iterations": 1,
                "warmup": 0,
                "jobs": [_loop("a", "0,2", size="1 MiB"), _loop("b", "1,3", size="1 MiB")],
            }
        )
    )
    trace = tmp_path / "t.json"
    out = json.loads(cli_stdout("jobs", str(spec), "--json", "--trace", str(trace)))
    assert out["schema"] == "acesim.jobs/1"
    assert [j["name"] for j in out["jobs"]] == ["a", "b"]
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {1: "job a", 2: "job b"}
    assert "jobs" in acesim.run_jobs.__module__


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "jobs"


@pytest.mark.parametrize("name", ["dp-spine", "latency-beside-training", "nvl72-split"])
def test_the_interference_examples_of_docs_jobs_run(name: str) -> None:
    # as written, cut to one iteration (the whole run measured) and the free endpoint
    spec, _base = load_jobs(EXAMPLES / f"{name}.toml")
    jobs = [job.model_copy(update={"iterations": None, "warmup": None}) for job in spec.jobs]
    for job in jobs:
        if isinstance(job, TrainingJob):
            job.workload = str(EXAMPLES / job.workload)
    small = spec.model_copy(update={"iterations": 1, "warmup": 0, "jobs": jobs})
    result = run_jobs(small, endpoint="ideal")
    assert len(result.jobs) == 2
    for job in result.jobs:
        assert job.slowdown is not None and job.slowdown >= 1.0 - 1e-12
        assert job.bound
