"""How far the ACE reproduction's headline figures move under the assumptions the paper does
not pin down: the kernel model (fitted vs the ideal roofline acesim used before), the HBM
arbitration (memory-level parallelism vs dominant-resource fairness) and the precision
(PyTorch AMP vs FP32 throughout).

Usage: python scripts/reproduction_sensitivity.py [--workers N] [--out FILE.md]

Prints a markdown table (one row per variant) of the figures `acesim reproduce` compares with
the paper; docs/reproduction.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from acesim.config import load_system
from acesim.config.system import KernelModelConfig, SystemConfig
from acesim.experiments.reproduce import reproduce

FIGURES = [
    ("HBM saving", "hbm_saving_avg", None),
    ("net util gain avg", "net_util_gain_avg", None),
    ("net util gain max", "net_util_gain_max", None),
    ("ResNet-50 avg", "speedup_avg", "resnet50"),
    ("GNMT avg", "speedup_avg", "gnmt"),
    ("DLRM avg", "speedup_avg", "dlrm"),
    ("ResNet-50 max", "speedup_max", "resnet50"),
    ("GNMT max", "speedup_max", "gnmt"),
    ("DLRM max", "speedup_max", "dlrm"),
]


def _ideal_kernels(s: SystemConfig) -> SystemConfig:
    npu = s.npu.model_copy(update={"kernels": KernelModelConfig()})
    return s.model_copy(update={"npu": npu})


def _drf(s: SystemConfig) -> SystemConfig:
    return s.model_copy(update={"npu": s.npu.model_copy(update={"hbm_arbitration": "drf"})})


def _fp32(s: SystemConfig) -> SystemConfig:
    out = s.model_copy(deep=True)
    assert out.reproduction is not None
    for work in out.reproduction.workloads.values():
        work.precision = "fp32"
    return out


VARIANTS: dict[str, Callable[[SystemConfig], SystemConfig]] = {
    "as shipped (fitted kernels, MLP, amp_fp16)": lambda s: s,
    "ideal roofline kernels": _ideal_kernels,
    "DRF HBM arbitration": _drf,
    "FP32 throughout": _fp32,
    "ideal kernels + DRF (the model before issue 11)": lambda s: _drf(_ideal_kernels(s)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    base = load_system("ace-isca21")
    rows = []
    for label, change in VARIANTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            reproduce(change(base), Path(tmp), workers=args.workers, figures=False)
            summary = json.loads((Path(tmp) / "summary.json").read_text())
        cells = []
        for _name, key, work in FIGURES:
            value = summary[key] if work is None else summary[key][work]
            cells.append(f"{value:.3f}")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
        print(f"{label}: {time.perf_counter() - start:.0f} s", flush=True)
    header = "| variant | " + " | ".join(name for name, _, _ in FIGURES) + " |"
    table = "\n".join([header, "|" + "---|" * (len(FIGURES) + 1), *rows])
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
