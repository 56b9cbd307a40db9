"""Why class mode's pass replays violate (issue 27): one benchmark case with replay on, every
differing context recorded (which try, when, which rank, which pass shape, which check found it,
which label, by how much), summarised per try.

    python benchmarks/replay_violations.py --only 175b
    python benchmarks/replay_violations.py --only 175b --detail 40   # the first 40 in full
    python benchmarks/replay_violations.py --only 405b --stop      # dump the first, stop
    python benchmarks/replay_violations.py --only 405b --slowed    # what slowed the sends

``--slowed`` also counts, for every pipeline message hop learnt slowed (``PassReplay.slowed``:
it ran slower than alone, and no pass is replayed beside a like message from then on), what
else was on each of its resources as it ended (a compute kernel: its tag, a string; a
collective: its label).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

from llm_scale import CASES, _run

from acesim.network import p2p
from acesim.training import executor as executor_module
from acesim.training import replay

#: every violation: (try, now s, rank, shape, check, label, detail)
EVENTS: list[tuple[int, float, int, str, str, str, str]] = []
TRIES: list[Any] = []
STOP = False


def _describe(frame: Any, violated: replay.Violated) -> tuple[str, str, str]:
    """(check, label, detail) from the caller of ``_violated``."""
    f = frame.f_locals
    check = frame.f_code.co_name
    if check == "ended":
        w = f["w"]
        other = w.memo.others[w.seen[f["token"]]]
        return (
            check,
            other.label,
            (
                f"memo end {other.end:.9e} got {f['off']:.9e} diff {f['off'] - other.end:+.3e} "
                f"start {other.start:.9e} memo length {w.memo.length:.6e}"
            ),
        )
    if check == "started":
        w = f["w"]
        near = sorted(
            (abs(o.start - f["off"]), o.label, o.start)
            for j, o in enumerate(w.memo.others)
            if j not in w.used and o.label == f["label"]
        )[:1]
        return (
            check,
            f["label"],
            (
                f"unexpected start at {f['off']:.9e} (memo length {w.memo.length:.6e}); nearest "
                f"unused same label: {near}"
            ),
        )
    if check == "_close":
        w = f["w"]
        missing = [w.memo.others[j] for j in f["missing"]]
        return (
            check,
            missing[0].label,
            "missing: " + "; ".join(f"{o.label} start {o.start:.9e}" for o in missing[:3]),
        )
    if check == "compute_ready":
        return check, f["st"].nodes[f["node"].id].name, f"at off {f['off']:.9e}"
    return check, str(violated.label), ""


_original = replay.PassReplay._violated


def _violated(self: replay.PassReplay, violated: replay.Violated) -> None:
    frame = sys._getframe(1)
    check, label, detail = _describe(frame, violated)
    key = violated.key
    shape = key[1] if key is not None else None
    rank = key[0] if key is not None else -1
    EVENTS.append((len(TRIES), self.engine.now, rank, str(shape), check, label, detail))
    if STOP:
        _dump(self, frame, rank)
        raise SystemExit(0)
    _original(self, violated)


def _dump(self: replay.PassReplay, frame: Any, rank: int) -> None:
    """What runs on the violating rank and the ranks beside it now."""
    print(EVENTS[-1])
    w = frame.f_locals.get("w")
    if w is not None and w.memo is not None:
        print(f"window start {w.start:.9f}, memo others:")
        for o in w.memo.others:
            print(f"   {o.start:+.9e} {o.end:+.9e} {o.label}")
        print("seen:", {str(k): v for k, v in w.seen.items()})
    for q in sorted({rank, rank - 1, rank + 1} & set(range(len(self.ranks)))):
        r = self.ranks[q]
        print(f"rank {q} current {r.current} eligible {r.eligible} senders {sorted(r.senders)}")
        for token, (lab, start, _on) in r.inflight.items():
            print(f"   {str(token):24s} {start:.9f} {lab}")


_original_init = replay.PassReplay.__init__


def _init(self: replay.PassReplay, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    TRIES.append(self)


#: (resource without its NPU, what else was on it) for every slowed hop, and the hop last rated
SLOWED: Counter[tuple[str, str]] = Counter()
_LAST: list[Any] = [None]
_solo_rate = p2p.solo_rate
_slowed = replay.PassReplay.slowed


def _rated(act: Any) -> float:
    _LAST[0] = act
    return _solo_rate(act)


def _what(act: Any) -> str:
    tag = act.tag
    run = tag[0] if isinstance(tag, tuple) else tag
    coll = getattr(run, "coll", None)
    if coll is not None:
        return "collective " + coll.label.split(".")[0]
    return "kernel" if isinstance(tag, str) else str(tag[:2] if isinstance(tag, tuple) else tag)


def _learnt_slowed(self: replay.PassReplay, src: int, node: Any) -> None:
    act = _LAST[0]
    for res in act.demand:
        for other in res.users:
            if other is not act:
                SLOWED[(res.name.split(".", 1)[1], _what(other))] += 1
    _slowed(self, src, node)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="175b", choices=sorted(CASES))
    parser.add_argument("--detail", type=int, default=20)
    parser.add_argument("--stop", action="store_true", help="dump and stop at the first")
    parser.add_argument("--slowed", action="store_true", help="what slowed the sends")
    args = parser.parse_args()
    if args.slowed:
        p2p.solo_rate = _rated  # type: ignore[assignment]
        replay.PassReplay.slowed = _learnt_slowed  # type: ignore[method-assign]
    global STOP
    STOP = args.stop
    replay.PassReplay._violated = _violated  # type: ignore[method-assign]
    replay.PassReplay.__init__ = _init  # type: ignore[method-assign]
    assert executor_module.PassReplay is replay.PassReplay
    cpu = time.process_time()
    out = _run(CASES[args.only], "class", False, replayed=True)
    print(
        f"{args.only}: CPU {time.process_time() - cpu:.1f} s, iteration {out[2]:.9f} s, "
        f"replayed {out[7]}, tries {len(TRIES)}"
    )
    for t, pr in enumerate(TRIES, 1):
        evs = [e for e in EVENTS if e[0] == t]
        first = f"first at t={evs[0][1]:.6f}" if evs else ""
        print(f"try {t}: {pr.replayed}/{pr.passes} replayed, {len(evs)} violations {first}")
        by = Counter((e[2], e[3], e[4], e[5]) for e in evs)
        for (rank, shape, check, label), n in by.most_common(12):
            print(f"   {n:5d}  rank {rank} shape {shape} {check}: {label}")
    if args.slowed:
        print("slowed hops: (resource, what else was on it as the hop ended): count")
        for (res, what), n in SLOWED.most_common(12):
            print(f"   {n:6d}  {res}: {what}")
    for e in EVENTS[: args.detail]:
        print(f"try {e[0]} t={e[1]:.9f} rank {e[2]} {e[3]} {e[4]} {e[5]}\n      {e[6]}")


if __name__ == "__main__":
    main()
