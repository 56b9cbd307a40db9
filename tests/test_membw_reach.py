"""The HBM-need search skips bandwidths that provably cannot reach its goal (studies.membw).

A collective moves a fixed number of HBM bytes per network byte (the endpoint's accounting),
all of them through HBM of at most the bandwidth given, so its network bandwidth is at most
that bandwidth over its bytes per byte (``_cannot_reach``). Checked: every bandwidth the search
skips, simulated, falls short of the goal; and the search's answer is the same with the skip
switched off, for the baseline and ACE endpoints, their ample settings, and a variant that
partitions HBM statically.
"""

from __future__ import annotations

from typing import Any

import pytest

from acesim.config import load_system
from acesim.studies import membw
from acesim.studies.dedup import ExactMemo
from acesim.studies.sensitivity import VARIANTS

SHAPE = (4, 2, 2)
SIZE = 4 * 2**20


def _needs(system: Any, endpoint: str, changes: dict[str, object] | None) -> float:
    ample = membw._simulate(system, SHAPE, membw.AMPLE_HBM, endpoint, "all-reduce", SIZE, changes)
    return membw._needed_hbm(
        system, SHAPE, endpoint, "all-reduce", SIZE, 0.95, ample.network_bandwidth, changes
    )


CASES = [
    ("ace-isca21", None, "baseline", None),
    ("ace-isca21", None, "ace", None),
    ("ace-isca21", "static_hbm", "baseline", None),
    ("ace-isca21", None, "baseline", "ample"),
    ("ace-isca21", None, "ace", "ample"),
]


@pytest.mark.parametrize(("preset", "variant", "endpoint", "offer"), CASES)
def test_skipped_bandwidths_fall_short_and_the_need_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
    preset: str,
    variant: str | None,
    endpoint: str,
    offer: str | None,
) -> None:
    system = load_system(preset)
    if variant is not None:
        system = VARIANTS.get(variant).change(system)
    changes = membw._offers(system, endpoint)[0] if offer else None
    monkeypatch.setattr(membw, "MEMO", ExactMemo())
    skipped: list[tuple[float, float, float]] = []
    real = membw._cannot_reach

    def watched(hbm: float, per_byte: float, goal: float) -> bool:
        out = real(hbm, per_byte, goal)
        if out:
            skipped.append((hbm, per_byte, goal))
        return out

    monkeypatch.setattr(membw, "_cannot_reach", watched)
    with_skip = _needs(system, endpoint, changes)
    assert skipped, "the search skipped nothing: the case checks nothing"
    for hbm, _per_byte, goal in skipped:
        r = membw._simulate(system, SHAPE, hbm, endpoint, "all-reduce", SIZE, changes)
        assert r.network_bandwidth < goal, (hbm, r.network_bandwidth, goal)
    monkeypatch.setattr(membw, "_cannot_reach", lambda *_a: False)
    monkeypatch.setattr(membw, "MEMO", ExactMemo())
    assert _needs(system, endpoint, changes) == with_skip


def test_nothing_is_ruled_out_without_hbm_bytes() -> None:
    assert not membw._cannot_reach(1e9, 0.0, 1e15)
    assert membw._cannot_reach(1e9, 2.0, 1e12)
    assert not membw._cannot_reach(4e12, 2.0, 1e12)
