"""Benchmark: the full `acesim reproduce ace-isca21` (target: under 5 minutes on 2 cores).

Usage: python benchmarks/reproduce_ace.py [--repeats N] [--workers N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from acesim.config import load_system
from acesim.studies.reproduce import reproduce

TARGET_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            reproduce(load_system("ace-isca21"), Path(tmp), workers=args.workers)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(
        f"reproduce ace-isca21: median {median:.1f} s over {len(times)} runs; "
        f"target {TARGET_S:.0f} s; ratio to target {median / TARGET_S:.2f}"
    )


if __name__ == "__main__":
    main()
