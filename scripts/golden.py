"""The golden corpus: record, check or update the numbers every refactor must leave unchanged.

    python scripts/golden.py --check                 # re-run every case, report each difference
    python scripts/golden.py --check --only 'llm/*'  # only the cases whose id matches
    python scripts/golden.py --update --only 'collective/h100-nvswitch-8/*'
    python scripts/golden.py --update                # re-record everything (drops stale ids)
    python scripts/golden.py --list                  # the case ids and how each runs
    python scripts/golden.py --coverage              # cases by run kind, mode, endpoint, variation

The cases are tests/golden_cases.py (the one list), the numbers tests/golden/<kind>.json;
tests/test_golden.py asserts the same thing as ``--check``. ``--update`` is the documented way
for a deliberate model change to move numbers: say in the change why each moved number moved.
``--check`` exits 1 when anything differs and prints one line per difference: case id, metric,
old, new and the relative difference (or the run kinds, modes or endpoint kinds a case ran,
old and new). ``--coverage`` counts the recorded cases by registered run kind, mode, endpoint
kind and variation, and by case kind x mode x variation, and names what no case covers (it
runs nothing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from golden_corpus import (  # noqa: E402
    Difference,
    compare_facts,
    compare_numbers,
    coverage,
    entry,
    read_corpus,
    run_case,
    select,
    write_corpus,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="re-run and report differences")
    mode.add_argument("--update", action="store_true", help="re-run and rewrite the entries")
    mode.add_argument("--list", action="store_true", help="list the case ids")
    mode.add_argument("--coverage", action="store_true", help="count the cases by axis")
    parser.add_argument("--only", metavar="PATTERN", help="shell-style pattern on case ids")
    parser.add_argument("-v", "--verbose", action="store_true", help="CPU seconds per case")
    args = parser.parse_args(argv)
    cases = select(args.only)
    if not cases:
        parser.error(f"--only: no case id matches {args.only!r}")
    if args.list:
        for case in cases:
            print(f"{case.id}\t{case.how()}")
        return 0
    recorded = read_corpus()
    if args.coverage:
        print("\n".join(coverage(cases, recorded).lines()))
        return 0
    differences: list[Difference] = []
    moved_facts: list[str] = []
    ran_otherwise: set[str] = set()  # cases whose run kinds, modes or endpoint kinds moved
    missing: list[str] = []
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="acesim-golden-") as scratch:
        for case in cases:
            start = time.process_time()
            numbers, facts = run_case(case, Path(scratch))
            spent = time.process_time() - start
            total += spent
            if args.verbose:
                print(f"{spent:7.3f} s  {case.id}", flush=True)
            if args.update:
                recorded[case.id] = entry(case, numbers, facts)
            elif case.id not in recorded:
                missing.append(case.id)
            else:
                differences += compare_numbers(case.id, recorded[case.id]["numbers"], numbers)
                lines = compare_facts(case.id, recorded[case.id].get("facts", {}), facts)
                if lines:
                    moved_facts += lines
                    ran_otherwise.add(case.id)
    if args.update:
        if args.only is None:  # a full update drops the entries of cases no longer listed
            known = {c.id for c in cases}
            recorded = {k: v for k, v in recorded.items() if k in known}
        write_corpus(recorded)
        print(f"{len(cases)} cases recorded ({total:.1f} CPU s)")
        return 0
    for difference in differences:
        print(difference)
    for line in moved_facts:
        print(line)
    for case_id in missing:
        print(f"{case_id}: not recorded (python scripts/golden.py --update --only '{case_id}')")
    moved = len({d.case for d in differences} | ran_otherwise)
    print(f"{len(cases)} cases checked ({total:.1f} CPU s): {moved} differ,", end=" ")
    print(f"{len(missing)} not recorded")
    return 1 if differences or moved_facts or missing else 0


if __name__ == "__main__":
    sys.exit(main())
