"""The sensitivity variants' runs of the ideal endpoint after its first variant are held back
(:func:`acesim.studies.sensitivity.hold_back`) and run only where an ordering reads them
(:func:`acesim.studies.sensitivity.needed`): the summary is the same document as with every
run simulated, and both branches (run, not run) are taken."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acesim.config import load_system
from acesim.studies import sensitivity
from acesim.studies.reproduce import reproduce

pytestmark = pytest.mark.xdist_group("reproduce")


def _reduced(out: Path) -> dict[str, Any]:
    return reproduce(
        load_system("ace-isca21"),
        out,
        workloads=["dlrm"],
        npus=[16, 32],
        figures=False,
        sram=False,
        hbm_targets=False,
        sensitivity=["shipped", "fp32", "batch_x4", "drf"],
        workers=1,
    )


def test_held_back_ideal_variants_change_nothing_and_run_where_an_ordering_needs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, list[Any]] = {}
    real_needed = sensitivity.needed

    def spy(*args: Any, **kwargs: Any) -> list[Any]:
        more = real_needed(*args, **kwargs)
        seen["held"], seen["run"] = [t.key for t in args[1]], [t.key for t in more]
        return more

    with monkeypatch.context() as patch:
        patch.setattr(sensitivity, "needed", spy)
        held = _reduced(tmp_path / "held")
    # both branches: some held-back runs were needed (an ordering broken by the first
    # variant alone), most were not
    assert seen["run"] and len(seen["run"]) < len(seen["held"])
    assert all(key[5] == "ideal" and key[6] != 0 for key in seen["held"])
    with monkeypatch.context() as patch:
        patch.setattr(sensitivity, "hold_back", lambda tasks: (list(tasks), []))
        every = _reduced(tmp_path / "every")
    assert json.dumps(held, sort_keys=True) == json.dumps(every, sort_keys=True)
