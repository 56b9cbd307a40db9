"""Weight offload (issue 29): FSDP's CPU offload of parameters (PyTorch ``CPUOffloadPolicy``):
each rank's parameter, gradient and optimizer shards live in host memory; every all-gather of
a unit waits for its shard's copy to the GPU, every reduce-scatter is followed by the gradient
shard's copy to the host, and the optimizer steps on the CPU."""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config.resolve import derive, resolve_system
from acesim.errors import ConfigError
from acesim.runs.llm import llm_graph, make_llm_case, run_llm
from acesim.workload.graph import Node
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import ParallelConfig, parse_parallel

TINY = TransformerConfig(
    "tiny", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, seq=256
)
SYSTEM = "h100-nvswitch-8"
HOST = {"npu.host_memory_bandwidth": "50 GB/s"}
#: the output layer's unit, the largest: the vocabulary-parallel head over TP 2 and the final
#: norm's weight
HEAD = 32000 * 1024 // 2 + 1024


def _fsdp(extra: str = "", tp: int = 2, pp: int = 1) -> ParallelConfig:
    # FSDP over the 8 / tp / pp remaining GPUs of one node, 4 micro-batches of the batch of 16
    dp = 8 // tp // pp
    batch = 4 * dp
    return parse_parallel(
        f"tp={tp},pp={pp},zero=3{extra}", global_batch=batch, micro_batch=1, seq=256
    )


def _case(extra: str = ",offload=weights", **kw: Any) -> Any:
    overrides = {**HOST, **kw.pop("overrides", {})}
    return make_llm_case(SYSTEM, TINY, _fsdp(extra, **kw), overrides=overrides)


def test_weight_offload_keeps_only_the_units_in_use_in_hbm() -> None:
    fsdp, off = _case(""), _case()
    assert max(fsdp.stages[0][0].unit_params) == HEAD
    shard = HEAD / 4  # DP 4
    # BF16 parameters (2 bytes), FP32 main gradients and shards in host memory (4 bytes)
    # FSDP: the shards, the gathered unit running and the one prefetched, the unsharded
    # gradient before its reduce-scatter; Adam's FP32 master weight and moments sharded
    params = sum(c.params for c in fsdp.stages[0])
    assert fsdp.footprints[0]["weights"] == pytest.approx(2 * params / 4 + 2 * 2 * HEAD)
    assert fsdp.footprints[0]["gradients"] == pytest.approx(4 * params / 4 + 4 * HEAD)
    assert fsdp.footprints[0]["optimizer"] == pytest.approx(12 * params / 4)
    # offloaded: the shards and the optimizer state leave; the two gathered units stay, with
    # the shard copied in for the all-gather (FP32) and the unsharded gradient with its FP32
    # reduced shard awaiting its copy out
    assert off.footprints[0]["weights"] == pytest.approx(2 * 2 * HEAD + 4 * shard, rel=1e-12)
    assert off.footprints[0]["gradients"] == pytest.approx(4 * HEAD + 4 * shard, rel=1e-12)
    assert off.footprints[0]["optimizer"] == 0.0
    assert off.footprints[0]["activations"] == fsdp.footprints[0]["activations"]
    drop = 2 * params / 4 + 4 * params / 4 + 12 * params / 4 - 2 * 4 * shard
    assert off.footprints[0]["total"] == pytest.approx(fsdp.footprints[0]["total"] - drop)


def _by_name(nodes: list[Node], prefix: str) -> list[Node]:
    return [n for n in nodes if n.name.startswith(prefix)]


@pytest.mark.parametrize("pp", [1, 2])
def test_each_all_gather_waits_for_its_shards_copy_in(pp: int) -> None:
    case = _case(pp=pp)
    for stage, nodes in enumerate(llm_graph(case, classes=True).ranks):  # one per stage
        by_id = {n.id: n for n in nodes}
        gathers = _by_name(nodes, "dp.all-gather.fsdp.")
        copies = _by_name(nodes, "offload.h2d.params.")
        # every forward and every backward gathers every unit of its chunk, each after a copy
        units = sum(len(c.unit_params) for c in case.stages[stage])
        assert len(gathers) == len(copies) == 2 * case.micro_batches * units
        for gather in gathers:
            (copy,) = [by_id[d] for d in gather.deps if by_id[d].kind == "host_copy"]
            chunk, unit = gather.name.split(".")[-2:]
            assert copy.name == f"offload.h2d.params.{chunk}.{unit}" and copy.op == "h2d"
            work = case.stages[stage][int(chunk.removeprefix("chunk"))]
            shard = work.unit_params[int(unit.removeprefix("u"))] / case.place.grad_ranks
            assert copy.size == pytest.approx(4 * shard)  # FP32 shard


def test_shard_copies_take_their_bytes_over_the_host_link_when_alone() -> None:
    # a 2 GB/s host link, far below what HBM gives the copy engines, and TP1 (no TP
    # collectives' HBM traffic beside them)
    case = _case(tp=1, overrides={"npu.host_link_bandwidth": "2 GB/s"})
    result, execution = run_llm(case)
    copies = [r for r in execution.records[0].values() if r.node.kind == "host_copy"]
    links = [r for r in copies if r.node.op in ("h2d", "d2h")]
    # no other copy, no collective beside it (they share the copy's HBM traffic)
    comm = links + [r for r in execution.records[0].values() if r.node.kind == "collective"]
    alone = [
        r
        for r in links
        if not any(o is not r and o.start < r.end and r.start < o.end for o in comm)
    ]
    assert alone
    for rec in alone:  # the link's rate, less what the compute beside it takes of HBM
        assert rec.node.size / 2e9 * (1 - 1e-12) <= rec.end - rec.start
        assert rec.end - rec.start <= rec.node.size / 2e9 * 1.01
    for rec in links:  # never faster than the link
        assert rec.end - rec.start >= rec.node.size / 2e9 * (1 - 1e-12)
    base = run_llm(_case("", tp=1, overrides={"npu.host_link_bandwidth": "2 GB/s"}))[0]
    assert result.iteration_time > base.iteration_time
    assert result.memory["total"] < base.memory["total"]


def test_gradient_shards_go_to_the_host_after_their_reduce_scatter() -> None:
    case = _case()
    result, execution = run_llm(case)
    records = execution.records[0]
    by_id = {r.node.id: r for r in records.values()}
    outs = [r for r in records.values() if r.node.name.startswith("offload.d2h.grads.")]
    units = len(case.stages[0][0].unit_params)
    assert len(outs) == case.micro_batches * units
    for out in outs:
        (rs,) = [by_id[d] for d in out.node.deps]
        assert rs.node.name == out.node.name.replace("offload.d2h.grads", "dp.reduce-scatter.fsdp")
        assert out.start >= rs.end
        # FP32 main gradients reduced (BF16's rule), FP32 on the host: the shard of them
        assert out.node.size == pytest.approx(rs.node.size / case.place.grad_ranks)
    # the first micro-batch's copies are asynchronous; later ones accumulate on the CPU
    # (3 shard-sizes through host memory) and the backward waits for them
    adds = [r for r in records.values() if r.node.name.startswith("offload.cpu.grads.")]
    assert len(adds) == (case.micro_batches - 1) * units
    waiting = {d for r in records.values() if r.node.kind == "compute" for d in r.node.deps}
    assert all(a.node.id in waiting for a in adds)
    for add in adds:
        (out,) = [by_id[d] for d in add.node.deps]
        assert add.node.size == 3 * out.node.size and add.start >= out.end
        assert add.end - add.start >= add.node.size / 50e9 * (1 - 1e-12)
    assert result.memory["optimizer"] == 0.0


def test_the_optimizer_steps_the_whole_shard_on_the_cpu() -> None:
    case = _case()
    _, execution = run_llm(case)
    records = {r.node.name: r for r in execution.records[0].values()}
    shard = sum(c.params for c in case.stages[0]) / 4
    cpu = records["update.offload.cpu"]
    # the CPU step reads the FP32 gradient, master weight and moments and writes the last
    # two (4 + 2 x 12 bytes) at host memory bandwidth, alone there; no copies around it
    assert cpu.end - cpu.start == pytest.approx(28 * shard / 50e9, rel=1e-9)
    assert "update.offload.d2h" not in records and "update.offload.h2d" not in records
    assert records["update"].node.compute is not None and records["update"].node.compute.empty
    assert records["update.done"].end >= cpu.end


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (",offload=weights,zero=1", "parallel.zero: weight offload needs FSDP .zero=3."),
        (",zero=3,offload=weights,offload_fraction=0.5", "must be 1 with offload=weights: FSDP"),
    ],
)
def test_bad_weight_offload_settings_are_one_line_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        parse_parallel(f"tp=2{text}", global_batch=16, micro_batch=1, seq=256)
    assert "\n" not in str(err.value)


def test_weight_offload_needs_the_host_memory_bandwidth() -> None:
    hostless = derive(resolve_system(SYSTEM), {"npu.host_memory_bandwidth": None})
    with pytest.raises(ConfigError, match="npu.host_memory_bandwidth: must be set to offload w"):
        make_llm_case(hostless, TINY, _fsdp(",offload=weights"))


def test_time_waiting_on_the_host_is_offload_not_bubble() -> None:
    """The compute stream idle while the CPU steps the optimizer (or a copy it waits for is
    on the host link) is exposed offload, not pipeline bubble; runs without host-side nodes
    carry no such key."""
    off = run_llm(_case())[0]
    plain = run_llm(_case(""))[0]
    assert off.exposed["offload"] > 0
    assert "offload" not in plain.exposed
    # one stage: no bubble in either, the host time explained
    assert off.bubble_time == pytest.approx(0.0, abs=1e-12 * off.iteration_time)
    assert plain.bubble_time == pytest.approx(0.0, abs=1e-12 * plain.iteration_time)
