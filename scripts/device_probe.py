"""Measure on one NVIDIA GPU what acesim's TP-overlap question needs (docs/validation.md,
"Llama 3.1 405B"): the per-GPU GEMMs of the Megatron-Bridge rows that run userbuffers TP
overlap, alone, cut into TP chunks (as ring-exchange overlap runs them), beside a concurrent
copy (copy engine, and an SM copy kernel: what userbuffers' transfers draw from HBM), and held
for many seconds (the clock and power the fitted short-run cuBLASLt rows never see).

acesim's model is not run here and nothing here is fitted: the output is data for the
validation corpus, entered as test rows first (docs/validation.md, "Adding a case"). The
script needs PyTorch with CUDA (the lent device machine has it; CI never runs this). Run it in
one call of the device tool, writing under $OUT:

    python3 scripts/device_probe.py --out "$OUT/probe.json"            # about 3 minutes
    python3 scripts/device_probe.py --device cpu --quick               # the logic, on a CPU

Every figure is a median of repeated timings (CUDA events on the GPU). GEMMs are FP8 (E4M3,
``torch._scaled_mm``, BF16 output, as Transformer Engine's FP8 GEMMs) where the GPU and
PyTorch run them, else BF16; the JSON says which.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

#: (M, N, K) of one GPU's GEMMs: Llama 3.1 405B at TP8 CP2 (4,096 tokens a rank) and Llama3
#: 70B at TP4 (8,192 tokens), as the corpus rows run them (QKV, output projection, fc1, fc2)
SHAPES: dict[str, tuple[int, int, int]] = {
    "405b-tp8-qkv": (4096, 2304, 16384),
    "405b-tp8-proj": (4096, 16384, 2048),
    "405b-tp8-fc1": (4096, 13312, 16384),
    "405b-tp8-fc2": (4096, 16384, 6656),
    "70b-tp4-qkv": (8192, 2560, 8192),
    "70b-tp4-proj": (8192, 8192, 2048),
    "70b-tp4-fc1": (8192, 14336, 8192),
    "70b-tp4-fc2": (8192, 8192, 7168),
}
#: TP size of each shape's row: the chunks ring-exchange overlap cuts M into
TP = {"405b": 8, "70b": 4}
#: bytes each background copy moves per launch
COPY_BYTES = 1 << 30


def make_gemm(m: int, n: int, k: int, device: str) -> tuple[Callable[[int, int], Any], str]:
    """A function running rows [lo, hi) of an (m x k) x (k x n) GEMM, and its dtype."""
    a = torch.randn(m, k, device=device)
    w = torch.randn(n, k, device=device)
    if device == "cuda" and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        try:
            torch._scaled_mm(a8[:16], w8.t(), one, one, out_dtype=torch.bfloat16)

            def fp8(lo: int, hi: int) -> Any:
                return torch._scaled_mm(a8[lo:hi], w8.t(), one, one, out_dtype=torch.bfloat16)

            return fp8, "fp8"
        except (RuntimeError, TypeError):
            pass
    a16, w16 = a.to(torch.bfloat16), w.to(torch.bfloat16)
    return (lambda lo, hi: a16[lo:hi] @ w16.t()), "bf16"


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(run: Callable[[], Any], device: str, reps: int, batches: int = 5) -> float:
    """Median over ``batches`` of the mean time of ``reps`` back-to-back calls (s)."""
    run()
    sync(device)
    times = []
    for _ in range(batches):
        if device == "cuda":
            times.append(on_gpu(run, reps))
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                run()
            times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def on_gpu(run: Callable[[], Any], reps: int) -> float:
    """The mean time (s) of ``reps`` back-to-back calls, between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        run()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3 / reps


def beside(gemm: Callable[[], Any], copy: Callable[[], Any], alone: float, reps: int) -> float:
    """The GEMM's mean time (s) while ``copy`` runs back to back on another stream for longer
    than the GEMMs take (``alone``: one GEMM's time alone, s)."""
    side = torch.cuda.Stream()
    copy_s = timed(copy, "cuda", 3, 3)
    copies = int(alone * reps * 2 / copy_s) + 4  # outlasts the GEMMs twice over
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(copies):
            copy()
    mean = on_gpu(gemm, reps)
    torch.cuda.synchronize()
    return mean


def gemm_rows(device: str, quick: bool) -> list[dict[str, Any]]:
    """Each shape alone, in TP chunks and (on a GPU) beside a copy engine and an SM copy."""
    rows = []
    copies: dict[str, Callable[[], Any]] = {}
    if device == "cuda":
        src = torch.empty(COPY_BYTES // 2, dtype=torch.bfloat16, device=device)
        dst = torch.empty_like(src)
        copies["copy_engine"] = lambda: dst.copy_(src)  # a device-to-device memcpy
        copies["sm_copy"] = lambda: torch.mul(src, 1.0, out=dst)  # element-wise, on the SMs
    for name, (m, n, k) in SHAPES.items():
        if quick:
            m, n, k = m // 16, n // 16, k // 16
        run, dtype = make_gemm(m, n, k, device)
        tp = TP[name.split("-")[0]]
        step = m // tp
        reps = 3 if quick else 20

        def whole_gemm(run: Callable[[int, int], Any] = run, m: int = m) -> Any:
            return run(0, m)

        def in_chunks(run: Callable[[int, int], Any] = run, step: int = step, tp: int = tp) -> Any:
            return [run(i * step, (i + 1) * step) for i in range(tp)]

        whole = timed(whole_gemm, device, reps)
        row: dict[str, Any] = {"gemm": name, "m": m, "n": n, "k": k, "dtype": dtype, "tp": tp}
        row.update(alone_s=whole, tflops=2 * m * n * k / whole / 1e12)
        row["tp_chunks_s"] = timed(in_chunks, device, reps)
        for label, copy in copies.items():
            row[f"beside_{label}_s"] = beside(whole_gemm, copy, whole, reps)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def smi(fields: str) -> list[str]:
    """One nvidia-smi reading of ``fields`` (empty where nvidia-smi does not answer)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [x.strip() for x in out.splitlines()[0].split(",")] if out.strip() else []


def sustained(device: str, seconds: float) -> dict[str, Any]:
    """The 405B fc1 GEMM back to back for ``seconds``: TFLOP/s per one-second window, and the
    SM clock, power and throttle reasons nvidia-smi reports every half second meanwhile."""
    m, n, k = SHAPES["405b-tp8-fc1"]
    run, dtype = make_gemm(m, n, k, device)
    samples: list[list[str]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(
                smi("clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active")
            )
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    windows: list[float] = []
    end = time.monotonic() + seconds
    one = timed(lambda: run(0, m), device, 3, 1)
    per_window = max(1, int(1.0 / one))
    while time.monotonic() < end:
        windows.append(2 * m * n * k / timed(lambda: run(0, m), device, per_window, 1) / 1e12)
    stop.set()
    sampler.join()
    heading = ["clocks.sm MHz, power W, temperature C, throttle reasons"]
    return {"gemm": "405b-tp8-fc1", "dtype": dtype, "tflops_per_window": windows,
            "smi": heading + [",".join(x) for x in samples]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", default="device_probe.json", help="JSON file written")
    parser.add_argument("--sustain", type=float, default=30.0, help="seconds held (GPU only)")
    parser.add_argument("--quick", action="store_true", help="shapes 16x smaller, few repeats")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no GPU (use --device cpu to try the logic)")
    result: dict[str, Any] = {"torch": torch.__version__, "device": args.device}
    if args.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
        result["smi_max"] = smi("clocks.max.sm,power.limit")
    result["gemms"] = gemm_rows(args.device, args.quick)
    if args.device == "cuda" and args.sustain > 0:
        result["sustained"] = sustained(args.device, args.sustain)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
