"""Drawn LLM configurations that resolve: the tests that compare a fast path with the full
simulation over many models, systems, endpoint kinds and parallelisms draw them here."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from acesim.errors import ConfigError
from acesim.hardware.endpoints.copy_engine import unstated_facts
from acesim.runs.llm import llm_graph, make_llm_case
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import parse_parallel

SYSTEMS = ["h100-nvswitch-8", "b200-nvswitch-8", "a100-nvswitch-8", "mi300x-8"]
ENDPOINTS = ["baseline", "ideal", "copy_engine", "nvls", "ace"]
#: pipeline schedules drawn (the default 1F1B three times in five)
SCHEDULES = ["", "", "", "zb-h1", "dualpipe"]


def small_models(layers: int) -> list[TransformerConfig]:
    """Small transformers of ``layers`` layers (sizes of no published model: fast to
    simulate), dense (gated and GPT-style) and MoE."""
    return [
        TransformerConfig("tiny", layers=layers, hidden=512, heads=8, kv_heads=4, ffn=1024,
                          vocab=4096, seq=128),
        TransformerConfig("tiny-gpt", layers=layers, hidden=512, heads=8, ffn=2048, vocab=4096,
                          seq=128, gated=False, norm="layernorm", bias=True, tied=True),
        TransformerConfig("tiny-moe", layers=layers, hidden=512, heads=8, kv_heads=4, ffn=1024,
                          vocab=4096, seq=128, experts=8, top_k=2, expert_ffn=512),
    ]  # fmt: skip


#: a draw: (model, system, nodes, parallel string, global batch, endpoint kind)
Draw = Callable[[random.Random], tuple[Any, ...]]


def finish_draw(
    rng: random.Random,
    model: Any,
    system: str,
    nodes: int,
    tp: int,
    pp: int,
    parts: list[str],
    per_stage: list[int],
) -> tuple[Any, ...]:
    """The rest of a draw after its model, system, nodes, TP, PP and schedule: EP or CP, TP
    overlap, ZeRO, recomputation, a global batch of ``rng.choice(per_stage)`` micro-batches
    per stage and DP rank, and the endpoint kind (the random calls in one order, so a seed
    draws the same configurations)."""
    if model.experts and rng.random() < 0.5:
        parts.append("ep=2")
    elif rng.random() < 0.2:
        parts.append("cp=2")
    if tp > 1 and rng.random() < 0.4:
        parts.append("tp_overlap=1")
    parts.append(f"zero={rng.choice([0, 1, 1, 3])}")
    parts.append(f"recompute={rng.choice(['none', 'none', 'selective', 'full'])}")
    cp = 2 if "cp=2" in parts else 1
    dp = max(8 * nodes // (tp * pp * cp), 1)
    batch = dp * pp * rng.choice(per_stage)
    return model, system, nodes, ",".join(parts), batch, rng.choice(ENDPOINTS)


def resolving(draw: Draw, count: int, seed: int) -> Iterator[Any]:
    """``count`` cases of ``draw``'s configurations that resolve, a seeded draw (the same every
    run): those a size rule refuses, or NVLS without a switch that reduces, are drawn again."""
    rng = random.Random(seed)
    found = 0
    while found < count:
        model, system, nodes, par, batch, endpoint = draw(rng)
        try:
            parallel = parse_parallel(par, global_batch=batch, micro_batch=1, seq=model.seq)
            case = make_llm_case(system, model, parallel, nodes=nodes)
            if endpoint == "copy_engine" and unstated_facts(case.system) is not None:
                endpoint = "baseline"  # no copy-engine facts stated: the same draws after it
            case = case.with_endpoint(endpoint)
            llm_graph(case, classes=True)  # what only building the graph refuses
        except ConfigError:
            continue
        if endpoint == "nvls" and not any(
            d.switch_reduction for d in case.system.network.dimensions
        ):
            continue  # NVLS needs a switch that reduces
        found += 1
        yield case
