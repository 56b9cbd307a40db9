"""The rank order of LLM runs (Megatron-core's ``order``): the default puts pipeline stages
outermost; ``tp-cp-ep-pp-dp`` (``--use-tp-pp-dp-mapping``) puts them inside data parallelism."""

from __future__ import annotations

import pytest

from acesim.config.resolve import resolve_system
from acesim.errors import ConfigError
from acesim.network.group import Group, Span
from acesim.runs.llm import make_llm_case, run_llm
from acesim.workload.llm.parallel import ORDERS, parse_parallel, placement


def _par(text: str) -> object:
    return parse_parallel(text, global_batch=8, micro_batch=1, seq=1024)


def test_stages_inside_data_parallelism_place_the_groups_as_megatron_numbers_them() -> None:
    # 16 GPUs on two 8-GPU nodes, tp=2 pp=2 dp=4: rank = tp + 2 (pp + 2 dp)
    place = placement(_par("tp=2,pp=2,order=tp-cp-ep-pp-dp"), (8, 2))  # type: ignore[arg-type]
    assert place.stage_stride == 2 and not place.stages_outermost
    assert [place.stage(r) for r in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert place.peer_stage(5, 1) == 7 and place.peer_stage(7, 0) == 5
    assert place.tp_group == Group((Span(0, 2, 1),), "tp")
    # DP: ranks 4 apart, two in a node and across the two nodes
    assert place.dp_group == Group((Span(0, 2, 4), Span(1, 2, 1)), "dp")
    default = placement(_par("tp=2,pp=2"), (8, 2))  # type: ignore[arg-type]
    assert default.stages_outermost and default.stage_stride == 8
    assert default.dp_group == Group((Span(0, 4, 2),), "dp")


def test_a_run_in_that_order_simulates_every_gpu_and_says_why() -> None:
    system = resolve_system("h100-nvswitch-8", nodes=2)
    inner = make_llm_case(system, "llama3-8b", _par("tp=2,pp=2,order=tp-cp-ep-pp-dp"))  # type: ignore[arg-type]
    result, _ = run_llm(inner)
    assert result.mode == "exact" and "stages inside data parallelism" in result.mode_note
    outer = make_llm_case(system, "llama3-8b", _par("tp=2,pp=2"))  # type: ignore[arg-type]
    default, _ = run_llm(outer)
    assert default.mode == "composed"  # the default: the iteration composed from its passes
    # the stages' sends now stay in the node and DP crosses it: a different iteration
    assert result.iteration_time != default.iteration_time


@pytest.mark.parametrize(
    ("text", "rule"),
    [("tp=2,order=pp-first", "must be one of"), ("tp=2,cp=2,order=tp-cp-ep-pp-dp", "cp > 1")],
)
def test_orders_that_are_not_modelled_are_refused_by_name(text: str, rule: str) -> None:
    with pytest.raises(ConfigError) as err:
        _par(text)
    assert err.value.field == "parallel.order" and rule in err.value.rule
    assert ORDERS[0] == "tp-cp-ep-dp-pp"
