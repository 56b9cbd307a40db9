"""Lines in the orchestration layer today against the rename commit's parent (issue 26).

    python scripts/layer_lines.py            # per place: files that existed then, files added since
    python scripts/layer_lines.py --files    # the same with one row per file

Issue 26 asks for fewer lines in ``experiment/`` (now ``runs/``), ``commands/``, ``training/`` and
``network/vectorized.py`` together than at its filing. The base is the parent of the rename commit
0cec95d (``experiment/`` -> ``runs/``): 7,081 lines there. A file counts as one that existed at
the base when its path (with ``runs/`` read as ``experiment/``) is in the base tree; every other
file is named with the subject of the commit that first added it, so the growth that later
features brought can be told from the growth of what was there. Lines are newline characters, as
``wc -l`` counts them; every ``.py`` file below a folder counts.
"""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "0cec95d^"
# (the place today, the same place at the base)
PLACES = (
    ("src/acesim/runs", "src/acesim/experiment"),
    ("src/acesim/commands", "src/acesim/commands"),
    ("src/acesim/training", "src/acesim/training"),
    ("src/acesim/network/vectorized.py", "src/acesim/network/vectorized.py"),
)


@dataclass(frozen=True)
class FileLines:
    path: str
    lines: int
    base_lines: int | None  # None: the file did not exist at the base
    added_by: str  # the subject of the commit that added it ("" for a base file)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return done.stdout


def _base_lines(path: str) -> int:
    return _git("show", f"{BASE}:{path}").count("\n")


def _base_files(place: str) -> list[str]:
    listed = _git("ls-tree", "-r", "--name-only", BASE, "--", place).splitlines()
    return [path for path in listed if path.endswith(".py")]


def _today_files(place: str) -> list[str]:
    where = ROOT / place
    found = [where] if where.is_file() else sorted(where.rglob("*.py"))
    return [str(path.relative_to(ROOT)) for path in found]


def _added_by(path: str) -> str:
    subjects = _git("log", "--diff-filter=A", "--format=%s", "--", path).splitlines()
    return subjects[-1] if subjects else "(not committed yet)"


def place_files(place: str, base_place: str) -> list[FileLines]:
    """Every file of one place today, each with its base counterpart's lines if it had one."""
    base = set(_base_files(base_place))
    rows = []
    for path in _today_files(place):
        lines = (ROOT / path).read_bytes().count(b"\n")
        then = base_place + path[len(place) :]
        if then in base:
            rows.append(FileLines(path, lines, _base_lines(then), ""))
        else:
            rows.append(FileLines(path, lines, None, _added_by(path)))
    return rows


def _short(subject: str, width: int = 90) -> str:
    return subject if len(subject) <= width else subject[: width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", action="store_true", help="one row per base file too")
    args = parser.parse_args(argv)
    total_now = total_base = 0
    for place, base_place in PLACES:
        rows = place_files(place, base_place)
        base_total = sum(_base_lines(path) for path in _base_files(base_place))
        kept = [row for row in rows if row.base_lines is not None]
        added = [row for row in rows if row.base_lines is None]
        kept_now = sum(row.lines for row in kept)
        kept_then = sum(row.base_lines or 0 for row in kept)
        added_now = sum(row.lines for row in added)
        now = kept_now + added_now
        total_now += now
        total_base += base_total
        print(f"{place}: {now:,} lines (base {base_place}: {base_total:,})")
        print(f"  files that existed at the base: {kept_now:,} (then {kept_then:,})")
        if args.files:
            for row in kept:
                print(f"    {row.lines:6,} (then {row.base_lines:,}) {row.path}")
        print(f"  files added since: {added_now:,}")
        for row in added:
            print(f"    {row.lines:6,} {row.path}: {_short(row.added_by)}")
    print(f"total: {total_now:,} lines today against {total_base:,} at {BASE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
