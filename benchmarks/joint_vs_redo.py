"""What the lockstep backend's joint computation buys (issue 26: keep only what pays).

Each exact-mode case runs with ``vectorized.MAX_JOINT`` as shipped (overlapping collectives
computed together, up to that many in a batch) and with 1 (no joint batch: every overlap makes
the run redo those collectives on the event path). Prints the median CPU seconds of
``--repeat`` runs (``time.process_time``, the simulation alone), their ratio, and whether the
results are identical (they must be: both are exact).

    python benchmarks/joint_vs_redo.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_scale  # noqa: E402

import acesim  # noqa: E402
from acesim.network import vectorized  # noqa: E402


def _resnet50(endpoint: str, **options: object) -> Callable[[], float]:
    def run() -> float:
        result = acesim.run(
            "ace-isca21", "resnet50", npus=64, mode="exact", iterations=1, warmup=0,
            endpoint=endpoint, **options,
        )  # fmt: skip
        return float(result.iteration_time)

    return run


CASES: dict[str, Callable[[], float]] = {
    "dp-64 (exact_scale: 4-layer data parallel, ring)": exact_scale.data_parallel_64,
    "resnet50 64 NPUs, one straggler, ideal": _resnet50(
        "ideal", stragglers=[{"rank": 3, "slowdown": 1.3}]
    ),
    "resnet50 64 NPUs, baseline": _resnet50("baseline"),
}


def _median(fn: Callable[[], float], repeat: int) -> tuple[float, float]:
    times, value = [], 0.0
    for _ in range(repeat):
        start = time.process_time()
        value = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shipped = vectorized.MAX_JOINT
    for name, fn in CASES.items():
        vectorized.MAX_JOINT = shipped
        joint, a = _median(fn, args.repeat)
        vectorized.MAX_JOINT = 1
        redo, b = _median(fn, args.repeat)
        same = "identical" if a == b else f"DIFFER ({a!r} vs {b!r})"
        print(f"{name}: joint {joint:.2f} s, redo {redo:.2f} s, ratio {redo / joint:.2f}; {same}")
    vectorized.MAX_JOINT = shipped


if __name__ == "__main__":
    main()
