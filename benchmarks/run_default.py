"""Benchmark: `acesim run` with no arguments (target: under 10 s on a 2-core machine).

Runs the console command as a user would, several times, and prints the median wall time.
Usage: python benchmarks/run_default.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "acesim.cli", "run"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(
        f"acesim run (default): median {median:.2f} s over {len(times)} runs "
        f"(min {min(times):.2f}, max {max(times):.2f}); target {TARGET_S:.0f} s; "
        f"ratio to target {median / TARGET_S:.2f}"
    )


if __name__ == "__main__":
    main()
