"""Class mode's pass replay (:mod:`acesim.training.replay`, off by default, turned on here)
gives what simulating every pass gives, to rounding: on 50 LLM training iterations drawn over
models (dense and MoE), systems, endpoint kinds, schedules (1F1B, interleaved, ZB-H1,
DualPipe), TP overlap, CP, EP, ZeRO and recomputation, with enough micro-batches per stage that
passes repeat, every figure of the result and every node's start and end agree within 1e-9
relative; a context that differs from its memo's makes the run redo itself, and still agree;
trace and exact mode never replay.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
from llm_draws import SCHEDULES, SYSTEMS, finish_draw, resolving

from acesim.runs.llm import make_llm_case, run_llm
from acesim.training import replay
from acesim.workload.llm.models import MODELS, TransformerConfig
from acesim.workload.llm.parallel import parse_parallel

#: small transformers (no published model's sizes: fast to simulate), dense and MoE
_MODELS = [
    TransformerConfig("tiny", layers=8, hidden=512, heads=8, kv_heads=4, ffn=1024, vocab=4096,
                      seq=128),
    TransformerConfig("tiny-gpt", layers=8, hidden=512, heads=8, ffn=2048, vocab=4096, seq=128,
                      gated=False, norm="layernorm", bias=True, tied=True),
    TransformerConfig("tiny-moe", layers=8, hidden=512, heads=8, kv_heads=4, ffn=1024,
                      vocab=4096, seq=128, experts=8, top_k=2, expert_ffn=512),
]  # fmt: skip
_RELATIVE = 1e-9
#: seconds (or joules) below any figure a result reports
_NEGLIGIBLE = 1e-15


def _draw(rng: random.Random) -> tuple[Any, ...]:
    """One configuration: model, system, nodes, parallel string, global batch, endpoint."""
    model = rng.choice(_MODELS)
    system = rng.choice(SYSTEMS)
    nodes = rng.choice([1, 1, 2])
    tp = rng.choice([1, 2, 4])
    pp = rng.choice([4, 4, 8])
    parts = [f"tp={tp}", f"pp={pp}"]
    if rng.random() < 0.4:
        parts.append("vpp=2")
    else:
        kind = rng.choice(SCHEDULES)
        if kind:
            parts.append(f"schedule={kind}")
    # enough micro-batches that passes repeat
    return finish_draw(rng, model, system, nodes, tp, pp, parts, [3, 4])


def _cases(count: int) -> Iterator[Any]:
    """``count`` drawn configurations that resolve (a seeded draw: the same every run)."""
    return resolving(_draw, count, 2027)


def _numbers(value: Any, key: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _numbers(v, f"{key}.{k}", out)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _numbers(v, f"{key}[{i}]", out)
    elif key != ".mode_note":
        out[key] = value


def _run(case: Any, enabled: bool) -> tuple[dict[str, Any], list[list[tuple[float, float]]], Any]:
    shipped = replay.ENABLED
    replay.ENABLED = enabled
    try:
        result, execution = run_llm(case, mode="class")
    finally:
        replay.ENABLED = shipped
    data = result.to_dict()
    data.pop("provenance", None)
    figures: dict[str, Any] = {}
    _numbers(data, "", figures)
    records = [[(r.start, r.end) for r in ranks.values()] for ranks in execution.records]
    return figures, records, execution


def _assert_agree(case: Any) -> Any:
    full, full_records, _ = _run(case, False)
    fast, fast_records, execution = _run(case, True)
    for key in set(fast) | set(full):
        # a bound label only one side has: a tie between equally saturated resources broken
        # otherwise by a rounding-level difference (a few 1e-18 s)
        value, other = full.get(key, 0.0), fast.get(key, 0.0)
        if isinstance(value, float):
            assert math.isclose(other, value, rel_tol=_RELATIVE, abs_tol=_NEGLIGIBLE), (
                key, value, other,
            )  # fmt: skip
        else:
            assert other == value, (key, value, other)
    makespan = execution.makespan
    for ranks_full, ranks_fast in zip(full_records, fast_records, strict=True):
        for (s0, e0), (s1, e1) in zip(ranks_full, ranks_fast, strict=True):
            assert abs(s0 - s1) <= _RELATIVE * makespan and abs(e0 - e1) <= _RELATIVE * makespan
    return execution


@pytest.fixture(scope="module")
def drawn() -> list[Any]:
    return list(_cases(50))


#: drawn case index -> (passes replayed, redos) of its run with replay on, as
#: test_replayed_passes_equal_simulating_every_pass ran it (the same case, replay on: the same
#: run), read by the checks below instead of running it again in this process
_REPLAY_ON: dict[int, tuple[int, int]] = {}


def _replay_on(drawn: list[Any], index: int) -> tuple[int, int]:
    """(passes replayed, redos) of drawn case ``index`` run with replay on (once a process)."""
    if index not in _REPLAY_ON:
        _figures, _records, execution = _run(drawn[index], True)
        _REPLAY_ON[index] = (execution.replayed, execution.redone)
    return _REPLAY_ON[index]


@pytest.mark.parametrize("index", range(50))
def test_replayed_passes_equal_simulating_every_pass(index: int, drawn: list[Any]) -> None:
    execution = _assert_agree(drawn[index])
    assert execution.replayed <= execution.passes
    _REPLAY_ON[index] = (execution.replayed, execution.redone)


def test_the_drawn_cases_replay_passes(drawn: list[Any]) -> None:
    """The equality above is not vacuous: the drawn cases replay passes (the first eight of
    them, with replay on: at least half replay some)."""
    replayed = [_replay_on(drawn, index)[0] for index in range(8)]
    assert sum(1 for n in replayed if n > 0) >= 4, replayed


def test_a_differing_context_redoes_the_run_and_still_agrees(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looked up on a grid too coarse to tell when the ranks that send to a pass started
    theirs, memos are tried in contexts whose messages arrive at other times: the check finds
    each, the run redoes itself (at last without replay) and agrees."""
    monkeypatch.setattr(replay, "_GRID", 10.0)
    monkeypatch.setattr(replay, "MAX_REDOS", 2)
    redone = [_assert_agree(case).redone for case in drawn[:6]]
    assert max(redone) >= 1


def test_a_trace_or_exact_mode_never_replays(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "ENABLED", True)
    case = drawn[0]
    _, traced = run_llm(case, trace=True)
    assert traced.replayed == 0 and traced.passes == 0
    assert not traced.platform.strategy.replay
    _, exact = run_llm(case, mode="exact")
    assert exact.replayed == 0 and not exact.platform.strategy.replay


def test_a_message_slowed_beside_a_pass_is_learnt_as_it_ends_not_by_a_redo(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline message that runs slower than alone (a pass shared its HBM) would run
    faster beside a replay of that pass, which takes the pass off the resources: learnt when
    the message ends, no pass is replayed beside a like message, so the run needs no redo
    (drawn case 22: two redos when the slowed messages are not learnt), and agrees."""
    assert _replay_on(drawn, 22)[1] == 0
    monkeypatch.setattr(replay, "ENABLED", True)
    monkeypatch.setattr(replay.PassReplay, "slowed", lambda self, src, node: None)
    assert run_llm(drawn[22], mode="class")[1].redone >= 1


def test_a_send_beside_a_replayed_pass_keeps_the_weight_its_messages_leave_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Llama 3 8B cut to 6 layers, TP8 PP4 VPP2 CP2 on 8 H100 nodes, 16 micro-batches: a
    stage's pipeline send to the last stage runs beside its next pass, whose TP collectives'
    messages split the rank's weight with it (the baseline endpoint's memory-level
    parallelism); on the last stage's NIC link the send shares with that stage's CP
    all-gather, and the share each takes follows the weights. A replay that took the pass's
    messages off gave the send its whole weight: it still ended at the memo's time (the link
    stayed saturated: the last to finish ends when all its bytes are through) and the CP
    all-gather ended 15 us late, with every check passed. The replay now counts the pass's
    messages in the split as stand-ins, and with slowed messages not learnt (which alone hid
    it) the run agrees, replaying passes (redone with what its first try learnt: a redo
    policy other than the default's, which simulates the redo without replay, kept here to
    reach the replays)."""
    monkeypatch.setattr(replay.PassReplay, "slowed", lambda self, src, node: None)
    monkeypatch.setattr(replay, "MAX_REDOS", 64)
    model = dataclasses.replace(MODELS.get("llama3-8b"), layers=6)
    parallel = parse_parallel(
        "tp=8,pp=4,vpp=2,cp=2,tp_overlap=1,account_embedding=1,account_loss=1,grad_fp32=0",
        global_batch=16, micro_batch=1, seq=8192,
    )  # fmt: skip
    case = make_llm_case("h100-nvswitch-8", model, parallel, precision="fp8", nodes=8)
    execution = _assert_agree(case)
    assert execution.replayed > 0


def test_a_pass_whose_parameter_gather_ran_ahead_leaves_no_window_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FSDP with interleaving issues a chunk's parameter all-gather, a member of its pass,
    ahead of the pass's first compute node: such a pass is neither recorded nor replayed (a
    window opened there waited for that member's end for ever, and every event of the rank
    walked the open windows), and the run agrees with the full simulation."""
    built: list[replay.PassReplay] = []
    init = replay.PassReplay.__init__

    def keep(self: replay.PassReplay, *args: Any) -> None:
        init(self, *args)
        built.append(self)

    monkeypatch.setattr(replay.PassReplay, "__init__", keep)
    parallel = parse_parallel(
        "tp=2,pp=4,vpp=2,sp=1,zero=3", global_batch=32, micro_batch=1, seq=128
    )
    case = make_llm_case("h100-nvswitch-8", _MODELS[0], parallel, precision="bf16", nodes=2)
    execution = _assert_agree(case)
    assert execution.passes > 0 and built
    assert all(not r.windows for r in built[-1].ranks)


def test_a_shape_never_replayed_retires_and_the_run_agrees(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass shape whose passes go unreplayed in a row retires (no more recorded nor
    checked): with no such run allowed (RETIRE_PER_RANK 0) a drawn case that replays passes
    replays none, and agrees with the full simulation."""
    assert _replay_on(drawn, 0)[0] > 0
    monkeypatch.setattr(replay, "RETIRE_PER_RANK", 0)
    execution = _assert_agree(drawn[0])
    assert execution.replayed == 0 and execution.passes > 0
