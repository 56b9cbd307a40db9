"""How far the ACE reproduction's headline figures move under the assumptions the paper does
not pin down (acesim.studies.sensitivity: kernel model, HBM arbitration, static HBM
partition, precision, store-and-forward ACE, batch per NPU, ACE DMA).

Usage: python scripts/reproduction_sensitivity.py [--workers N] [--variants a,b] [--out FILE.md]

The same study as `acesim reproduce ace-isca21` runs by default (which also writes the table
into report.md and the figures into summary.json); prints the markdown table docs/reproduction.md
quotes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from acesim.config import load_system
from acesim.studies.sensitivity import FIGURES, sensitivity_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--variants", default=None, help="comma list (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    names = args.variants.split(",") if args.variants else None
    study = sensitivity_study(load_system("ace-isca21"), variants=names, workers=args.workers)
    labels = [label for label, _, _ in FIGURES]
    rows = []
    for row in study["variants"].values():
        cells = [f"{v:.3f}" if v is not None else "-" for v in row["figures"].values()]
        rows.append(f"| {row['label']} | " + " | ".join(cells) + f" | {row['within']} of 9 |")
    ranges = [f"{r['low']:.3f}-{r['high']:.3f}" if r else "-" for r in study["ranges"].values()]
    rows.append("| **range** | " + " | ".join(ranges) + " | |")
    header = "| variant | " + " | ".join(labels) + " | within tolerance |"
    table = "\n".join([header, "|" + "---|" * (len(labels) + 2), *rows])
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
