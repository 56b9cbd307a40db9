"""A chunk's layers alike are made once and renamed (``block._layer``): the same chunk work,
field by field and name by name, as making every layer, on dense, MoE and MLA models, with
and without recomputation, TP overlap, CP, EP and FSDP units; and ``names=False`` (what a
plan's bounds read) the same work but for the names."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from acesim.network.group import Group, Span
from acesim.precision import PRECISIONS
from acesim.workload.llm import block
from acesim.workload.llm.block import chunk_work
from acesim.workload.llm.chunk import Pass
from acesim.workload.llm.models import MODELS

BUILD = chunk_work.__wrapped__


def _every_layer_made(b: Any, i: int, full: bool, built: Any, names: bool = True) -> Any:
    return b.layer(i, full)


def _kwargs(tp: int, cp: int, ep: int) -> dict[str, Any]:
    return {
        "tp_group": Group((Span(0, tp, 1),), "tp") if tp > 1 else None,
        "cp_group": Group((Span(0, cp, tp),), "cp") if cp > 1 else None,
        "ep_group": Group((Span(0, ep, tp * cp),), "ep") if ep > 1 else None,
    }


def _names(work: Any) -> list[str]:
    return [k.name for steps in (work.forward, work.backward) for s in steps for k in s.kernels]


@pytest.mark.parametrize("model", ["llama3-8b", "deepseek-v3", "gpt-oss-120b"])
@pytest.mark.parametrize(
    ("tp", "sp", "recompute", "overlap", "cp", "ep", "units"),
    [
        (1, False, "none", False, 1, 1, False),
        (2, True, "full", True, 1, 1, True),
        (2, True, "selective", False, 2, 2, False),
        (2, False, "none", False, 1, 2, True),
    ],
)  # fmt: skip
def test_layers_made_once_and_renamed_are_the_layers_made_each(
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    tp: int,
    sp: bool,
    recompute: str,
    overlap: bool,
    cp: int,
    ep: int,
    units: bool,
) -> None:
    m = MODELS.get(model)
    if ep > 1 and not m.experts:
        ep = 1
    for precision, layers in itertools.product(("bf16", "fp8"), (range(0, 5), range(2, 7))):
        args = (m, PRECISIONS.get(precision), layers)
        kw = dict(
            micro_batch=1, seq=2048, tp=tp, sp=sp, recompute=recompute, tp_overlap=overlap,
            cp=cp, ep=ep, units=units, embedding=layers.start == 0, head=True,
            recompute_layers=2 if recompute == "full" else None, **_kwargs(tp, cp, ep),
        )  # fmt: skip
        memo = BUILD(*args, **kw)
        anonymous = BUILD(*args, names=False, **kw)
        with monkeypatch.context() as patch:
            patch.setattr(block, "_layer", _every_layer_made)
            each = BUILD(*args, **kw)
        assert memo == each
        assert _names(memo) == _names(each)
        assert len(set(_names(memo))) > len(set(_names(anonymous)))
        for field in ("saved", "params", "boundary_bytes", "weight_saved", "unit_params"):
            assert getattr(anonymous, field) == getattr(each, field)
        flops = [[k.flops for s in w.forward for k in s.kernels] for w in (anonymous, each)]
        assert flops[0] == flops[1]


def test_a_renamed_pass_is_a_new_pass_with_new_kernels() -> None:
    b = block._Builder(MODELS.get("llama3-8b"), PRECISIONS.get("bf16"), micro_batch=1, seq=512,
                       tp=1, sp=False, recompute="none", tp_group=None)  # fmt: skip
    fwd, _, _ = b.layer(3)
    renamed = block._renamed_pass(Pass(list(fwd.steps), fwd.kept), "l3.", "l12.")
    kernels = [k for s in renamed.steps for k in s.kernels]
    assert all(k.name.startswith("l12.") for k in kernels if "." in k.name)
    assert [k.name for s in fwd.steps for k in s.kernels][0].startswith("l3.")
    assert renamed.kept == fwd.kept
