"""Activation offload (issue 29): saved activations go to host memory after their forward and
come back before their backward, on the copy engines over the host link; the memory check
and the timeline both show it."""

from __future__ import annotations

import pytest

from acesim.errors import ConfigError
from acesim.runs.llm import llm_graph, make_llm_case, run_llm
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, parse_parallel

TINY = TransformerConfig(
    "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=256
)
SYSTEM = "h100-nvswitch-8"


def _par(extra: str = "") -> ParallelConfig:
    # TP2 x PP4 on one node, 8 micro-batches: stage 0 of 1F1B holds 4 at once
    return parse_parallel(f"tp=2,pp=4{extra}", global_batch=8, micro_batch=1, seq=256)


def test_offloaded_micro_batches_leave_the_gpu_between_their_copies() -> None:
    none = make_llm_case(SYSTEM, TINY, _par())
    half = make_llm_case(SYSTEM, TINY, _par(",offload=activations,offload_fraction=0.5"))
    full = make_llm_case(SYSTEM, TINY, _par(",offload=activations"))
    saved = sum(c.saved for c in none.stages[0])
    # 1F1B stage 0: 4 micro-batches after its warm-up; offloaded, the one running, the one
    # whose copy out overlaps it and the one being reloaded for the next B stay: 3 of 4
    assert none.footprints[0]["activations"] == pytest.approx(4 * saved)
    assert full.footprints[0]["activations"] == pytest.approx(3 * saved)
    assert half.footprints[0]["activations"] == pytest.approx(3.5 * saved)
    assert full.footprints[0]["weights"] == none.footprints[0]["weights"]


def test_each_offload_has_its_reload_and_the_backward_waits_for_it() -> None:
    case = make_llm_case(SYSTEM, TINY, _par(",offload=activations,offload_fraction=0.5"))
    nodes = llm_graph(case, classes=True).ranks[0]  # stage 0's representative
    by_id = {n.id: n for n in nodes}
    copies = {n.name: n for n in nodes if n.kind == "host_copy"}
    saved = case.stages[0][0].saved
    outs = [n for n in copies.values() if n.op == "d2h"]
    assert outs and all(n.size == pytest.approx(0.5 * saved) for n in outs)
    for out in outs:
        back = copies[out.name.replace("d2h", "h2d")]
        assert out.id in back.deps and back.size == out.size
        _, _, chunk, micro = back.name.split(".")
        first = min(n.id for n in nodes if n.name.startswith(f"BW.{chunk}.{micro}."))
        assert back.id in by_id[first].deps or any(
            back.id in by_id[d].deps for d in by_id[first].deps
        )


def test_offload_over_a_slow_host_link_shows_in_the_iteration() -> None:
    slow = {"npu.host_link_bandwidth": "1 GB/s"}
    base = run_llm(make_llm_case(SYSTEM, TINY, _par(), overrides=slow))[0]
    full = run_llm(make_llm_case(SYSTEM, TINY, _par(",offload=activations"), overrides=slow))[0]
    assert full.iteration_time > base.iteration_time
    assert full.memory["activations"] < base.memory["activations"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (",offload=optimizer", "parallel.offload: must be activations .optimizer and weight"),
        (",offload=activations,offload_fraction=1.5", "must be a number in .0, 1."),
        (",offload_fraction=0.5", "needs offload=activations"),
    ],
)
def test_bad_offload_settings_are_one_line_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _par(text)


def test_offload_needs_a_host_link() -> None:
    with pytest.raises(ConfigError, match="npu.host_link_bandwidth: must be set to offload"):
        make_llm_case(
            "ace-isca21", TINY, _par(",offload=activations"), precision="fp16", check_memory=False
        )
