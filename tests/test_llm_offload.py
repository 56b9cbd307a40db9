"""Offload (issue 29): saved activations go to host memory after their forward and come back
before their backward (whole micro-batches between schedule ops, or layer by layer within a
pass), on the copy engines over the host link; the optimizer's offloaded share steps on the
CPU; the memory check and the timeline both show it."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config.resolve import derive, resolve_system
from acesim.errors import ConfigError
from acesim.hardware.platform import Platform
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
        (",offload=weights", "parallel.zero: weight offload needs FSDP .zero=3."),
        (",offload=disk", "parallel.offload: must be one of activations, optimizer, weights"),
        (",offload=activations,offload_fraction=1.5", "must be a number in .0, 1."),
        (",offload_fraction=0.5", "needs offload=activations or optimizer"),
        (",offload_layers=2", "parallel.offload_layers: needs offload=activations"),
        (",offload=activations,offload_layers=0", "must be a whole number of at least 1"),
        (",offload=optimizer,offload_layers=2", "give it with offload=activations"),
        (",offload=activations,offload_layers=2,offload_fraction=0.5", "two granularities"),
        (",offload=activations,offload_layers=2", "needs pp=1 .Megatron-core"),
        (",offload=optimizer,zero=0", "parallel.zero: optimizer offload needs the distributed"),
    ],
)
def test_bad_offload_settings_are_one_line_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _par(text)


def test_offload_needs_a_host_link() -> None:
    # every shipped NPU has its datasheet's host link: one without (a system file's own NPU)
    linkless = derive(resolve_system("ace-isca21"), {"npu.host_link_bandwidth": None})
    with pytest.raises(ConfigError, match="npu.host_link_bandwidth: must be set to offload"):
        make_llm_case(
            linkless, TINY, _par(",offload=activations"), precision="fp16", check_memory=False
        )


# -- layer-granular activation offload (offload_layers) ------------------------------------
def _one_stage(extra: str = "") -> ParallelConfig:
    # TP2 on one node, one pipeline stage (Megatron-core's rule for CPU offloading), 4 micro-batches
    return parse_parallel(f"tp=2,pp=1{extra}", global_batch=16, micro_batch=1, seq=256)


def test_layer_offload_frees_the_offloaded_layers_saved_bytes_at_the_forward_peak() -> None:
    none = make_llm_case(SYSTEM, TINY, _one_stage())
    two = make_llm_case(SYSTEM, TINY, _one_stage(",offload=activations,offload_layers=2"))
    work = none.stages[0][0]
    # units: the embedding (saves nothing here), 8 layers alike, the head with its logits
    assert work.embedding and work.head and len(work.unit_saved) == 10
    layer = work.unit_saved[1]
    assert set(work.unit_saved[1:9]) == {layer} and sum(work.unit_saved) == work.saved
    # one stage, each B right after its F: the peak is the end of a forward. By hand: every
    # unit's bytes, less the first two layers', whose copies out the third and fourth
    # layers' ends waited for
    assert none.footprints[0]["activations"] == work.saved
    assert two.footprints[0]["activations"] == pytest.approx(work.saved - 2 * layer, rel=1e-12)
    assert two.footprints[0]["total"] == pytest.approx(
        none.footprints[0]["total"] - 2 * layer, rel=1e-12
    )


def test_layer_offload_copies_run_on_the_host_link_at_its_rate_when_alone() -> None:
    # a 2 GB/s host link, far below what HBM gives the copy engines beside the compute, and
    # TP1 (no TP collectives' HBM traffic to share): a copy with no other copy in its
    # direction runs at the link's rate
    slow = {"npu.host_link_bandwidth": "2 GB/s"}
    text = ",offload=activations,offload_layers=3"
    one = parse_parallel(f"tp=1,pp=1{text}", global_batch=16, micro_batch=1, seq=256)
    case = make_llm_case(SYSTEM, TINY, one, overrides=slow)
    result, execution = run_llm(case)
    copies = [r for r in execution.records[0].values() if r.node.kind == "host_copy"]
    layer = case.stages[0][0].unit_saved[1]
    # 3 layers out and back for each of the 2 micro-batches, each a layer's saved bytes
    assert sorted({(r.node.op, r.node.size) for r in copies}) == [("d2h", layer), ("h2d", layer)]
    assert len(copies) == 2 * 3 * 2
    alone = [
        r
        for r in copies
        if not any(
            o is not r and o.node.op == r.node.op and o.start < r.end and r.start < o.end
            for o in copies
        )
    ]
    assert alone  # the third layer's copy out starts when the second's ends (its wait)
    for rec in alone:
        # the link's rate; the copy also reads or writes HBM, which the memory-bound compute
        # kernels beside it take by the HBM arbitration (npu.hbm_arbitration = mlp: the SMs'
        # memory-level parallelism against the engines'), a few moments below 2 GB/s
        assert layer / 2e9 * (1 - 1e-12) <= rec.end - rec.start <= layer / 2e9 * 1.01
    for rec in copies:  # never faster than the link
        assert rec.end - rec.start >= layer / 2e9 * (1 - 1e-12)
    # alone on a platform (nothing else running): exactly bytes / bandwidth
    platform = Platform(case.system)
    done: list[float] = []
    platform.npus[0].host_copy(layer, "d2h", lambda _a: done.append(platform.engine.now))
    platform.engine.run()
    assert done == [pytest.approx(layer / 2e9, rel=1e-12)]
    plain = parse_parallel("tp=1,pp=1", global_batch=16, micro_batch=1, seq=256)
    base = run_llm(make_llm_case(SYSTEM, TINY, plain, overrides=slow))[0]
    # a copy takes longer than the layer it overlaps: the iteration shows it
    assert result.iteration_time > base.iteration_time


def test_layer_offload_reloads_one_layer_ahead_of_its_backward() -> None:
    case = make_llm_case(SYSTEM, TINY, _one_stage(",offload=activations,offload_layers=2"))
    nodes = llm_graph(case, classes=True).ranks[0]
    by_name = {n.name: n for n in nodes}
    for unit in (1, 2):
        out, back = by_name[f"offload.d2h.0.0.u{unit}"], by_name[f"offload.h2d.0.0.u{unit}"]
        assert out.id in back.deps
        # the reload waits for the backward of the layer after it to have started
        assert max(back.deps) > out.id and nodes[max(back.deps)].name.startswith("BW.0.0.")


def test_layer_offload_shares_the_copy_engines_with_copy_engine_collectives() -> None:
    # FSDP's all-gathers and reduce-scatters on the copy engines run beside the offload copies
    # (without NCCL's local copy, which sets a copy-engine all-gather's time on H100: the peer
    # copies then run at the engines' rate, which the offload copies take a share of)
    text = ",zero=3,offload=activations,offload_layers=4"
    peers_only = {"endpoint.copy_engine.local_copy_bandwidth": None}
    fsdp = make_llm_case(SYSTEM, TINY, _one_stage(",zero=3"), overrides=peers_only)
    fsdp = fsdp.with_endpoint("copy_engine")
    both = make_llm_case(SYSTEM, TINY, _one_stage(text), overrides=peers_only)
    both = both.with_endpoint("copy_engine")
    alone, shared = run_llm(fsdp)[1].records[0], run_llm(both)[1].records[0]
    link = both.system.npu.host_link_bandwidth
    assert link is not None
    copies = [r for r in shared.values() if r.node.kind == "host_copy"]
    slowed = [r for r in copies if r.end - r.start > 1.001 * r.node.size / link]
    assert slowed  # some copies waited on engines the collectives held

    def collective_time(records: dict[int, Any]) -> float:
        return sum(r.end - r.start for r in records.values() if r.node.kind == "collective")

    assert collective_time(shared) > collective_time(alone)


def test_layer_offload_keeps_megatrons_rules() -> None:
    with pytest.raises(ConfigError, match="must be fewer than the 8 layers of tiny"):
        make_llm_case(SYSTEM, TINY, _one_stage(",offload=activations,offload_layers=8"))
    with pytest.raises(ConfigError, match="needs recompute=none"):
        _one_stage(",offload=activations,offload_layers=2,recompute=full")
    with pytest.raises(ConfigError, match="zb-h1 schedule's deferred weight gradients"):
        make_llm_case(
            SYSTEM, TINY, _one_stage(",offload=activations,offload_layers=2,schedule=zb-h1")
        )


# -- optimizer offload ---------------------------------------------------------------------
HOST = {"npu.host_memory_bandwidth": "50 GB/s"}


def test_optimizer_offload_moves_the_share_of_master_weights_and_moments_to_the_host() -> None:
    none = make_llm_case(SYSTEM, TINY, _one_stage(), overrides=HOST)
    half = make_llm_case(
        SYSTEM, TINY, _one_stage(",offload=optimizer,offload_fraction=0.5"), overrides=HOST
    )
    # BF16 with FP32 master weights and Adam: 12 bytes a parameter over DP (4 ranks)
    params = sum(c.params for c in none.stages[0])
    assert none.footprints[0]["optimizer"] == pytest.approx(12 * params / 4, rel=1e-12)
    assert half.footprints[0]["optimizer"] == pytest.approx(6 * params / 4, rel=1e-12)
    for term in ("weights", "gradients", "activations"):
        assert half.footprints[0][term] == none.footprints[0][term]


def test_optimizer_offload_steps_on_the_cpu_in_the_timeline() -> None:
    case = make_llm_case(SYSTEM, TINY, _one_stage(",offload=optimizer"), overrides=HOST)
    _, execution = run_llm(case)
    records = {r.node.name: r for r in execution.records[0].values()}
    shard = sum(c.params for c in case.stages[0]) / 4
    link = case.system.npu.host_link_bandwidth
    assert link is not None
    d2h, cpu, h2d = (records[f"update.offload.{x}"] for x in ("d2h", "cpu", "h2d"))
    # main gradients (FP32) out, the CPU step reading the gradient copy, master weight and
    # moments and writing them back (4 + 2 x 12 bytes) at host memory bandwidth, FP32 back
    assert d2h.end - d2h.start == pytest.approx(4 * shard / link, rel=1e-9)
    assert cpu.end - cpu.start == pytest.approx(28 * shard / 50e9, rel=1e-9)
    assert h2d.end - h2d.start == pytest.approx(4 * shard / link, rel=1e-9)
    assert d2h.end <= cpu.start and cpu.end <= h2d.start
    assert records["update.done"].end >= h2d.end


def test_optimizer_offload_needs_the_host_memory_bandwidth() -> None:
    # the shipped DGX nodes state their host's memory; a system without it cannot step on it
    hostless = derive(resolve_system("b200-nvswitch-8"), {"npu.host_memory_bandwidth": None})
    with pytest.raises(ConfigError, match="npu.host_memory_bandwidth: must be set to offload"):
        make_llm_case(hostless, TINY, _one_stage(",offload=optimizer"))
