"""Fit every preset parameter that the validation corpus has fit rows for, and print the values.

The inputs are the corpus rows marked ``fit = true`` (src/acesim/validation/corpus/*.toml),
each naming the parameters it fits; the fits are acesim.validation.fit's (bisection per row,
repeated until no value moves). The presets carry the printed values to four significant
digits, and tests (tests/test_fit.py, tests/test_nvls.py) check that they still match (the
host fit, an LLM row's, takes minutes: tests/test_host.py checks its row against the shipped
value instead).
Values the other presets carry from these fits follow the transfer rules of
acesim.validation.transfer (tests/test_fit_labels.py checks them).

    python scripts/fit_presets.py              # a table
    python scripts/fit_presets.py --json       # for tools
    python scripts/fit_presets.py --transfers  # every fit and transfer, to a fixed point
"""

from __future__ import annotations

import argparse
import json

from acesim.validation import load_corpus
from acesim.validation.fit import (
    COLLECTIVE_FITS,
    HOST_FITS,
    Fit,
    fit_collective,
    fit_host,
    fit_npu,
    fit_rows,
)
from acesim.validation.loso import Presets, refit_world


def presets_with_fit_rows() -> tuple[list[str], list[str]]:
    """(NPU presets with kernel fit rows, system presets with collective fit rows)."""
    corpus = load_corpus()
    systems = sorted({c.system for f in corpus.families.values() for c in f.cases if c.fit})
    npus = [s for s in systems if fit_rows(corpus, s)]
    collectives = [s for s in systems if fit_rows(corpus, s, COLLECTIVE_FITS)]
    return npus, collectives


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--transfers",
        action="store_true",
        help="refit every preset and apply the transfer rules until nothing moves; print all",
    )
    args = parser.parse_args()
    if args.transfers:
        world = refit_world(Presets.of(load_corpus()))
        for (preset, parameter), value in sorted(world.values.items()):
            shown = "unset" if value is None else f"{value:.4g}"
            print(f"{preset:<18} {parameter:<48} {shown:>12}  {world.how[(preset, parameter)]}")
        return
    npus, systems = presets_with_fit_rows()
    fits: list[tuple[str, Fit]] = [(p, f) for p in npus for f in fit_npu(p)]
    fits += [(p, f) for p in systems for f in fit_collective(p)]
    corpus = load_corpus()
    hosts = sorted({c.system for f in corpus.families.values() for c in f.cases if c.fit})
    # the host rows are LLM runs: each try a simulation of seconds, a fit minutes
    fits += [(p, f) for p in hosts if fit_rows(corpus, p, HOST_FITS) for f in fit_host(p)]
    if args.json:
        rows = [{"preset": p, **f.__dict__} for p, f in fits]
        print(json.dumps(rows, indent=2))
        return
    print(f"{'preset':<18} {'parameter':<48} {'value':>12}  row (measured -> simulated)")
    for preset, f in fits:
        print(
            f"{preset:<18} {f.parameter:<48} {f.value:>12.4g}  "
            f"{f.case} ({f.measured:g} -> {f.simulated:.6g})"
        )


if __name__ == "__main__":
    main()
