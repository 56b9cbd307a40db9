"""Simulating the cases of the corpus: one function per run kind, each giving the figure the
source measured, in the case's unit, from the model alone.

* ``gemm``: one :class:`~acesim.hardware.kernels.Gemm` planned on the NPU
  (:func:`~acesim.hardware.kernel_model.plan_kernel`); FLOPs (counted as the benchmark counts
  them) over its time alone.
* ``attention``: one fused :class:`~acesim.hardware.kernels.Attention` kernel planned on the
  NPU; its FLOPs (FlashAttention's count) over its time alone.
* ``stream``: one :class:`~acesim.hardware.kernels.Stream` kernel; bytes read plus bytes written
  over its time alone (BabelStream's convention: copy ``a[i] = b[i]`` reads N and writes N
  elements, triad ``a[i] = b[i] + s c[i]`` reads 2N and writes N, dot ``sum a[i] b[i]`` reads 2N
  and writes nothing worth counting; triad and dot do 2N FLOPs).
* ``collective``: :func:`~acesim.simulate.simulate_collective` over every NPU of the system
  (or a group of the innermost dimension's first ``group`` NPUs, or whole dimensions ``dims``),
  with the system's endpoint kind or the row's ``endpoint``; its busbw (or algbw); a row's
  ``algorithm`` (what the measurement forced, ``NCCL_ALGO``) is forced as the system's
  ``collective.algorithm``; its ``settings`` (dotted paths: a wave size, a group of 64 GPUs
  of a 72-GPU domain) are set on the system first.
* ``overlap``: ``acesim overlap``'s model: one GEMM and one collective on every NPU of the
  system (:func:`~acesim.simulate.simulate_collective` with the GEMM as its concurrent compute
  kernel, the collective issued ``collective_at`` after the GEMM's launch), with the row's
  ``endpoint``; serial is the GEMM alone plus the collective alone (with ``serial_endpoint``
  where the measurement's serial baseline used another substrate), overlapped the makespan of
  the pair; the row's ``metric`` is their ratio, either time, or one part's slowdown. Its
  ``settings`` are set on the system first, as a collective row's.
* ``training``: steady-state training iterations of a zoo workload on a one-NPU system
  (:mod:`acesim.runs`; data parallel on one NPU: no collective); samples per second,
  the batch over the iteration time.
* ``llm``: one training iteration of an LLM registry model with a Megatron parallel
  configuration on every GPU of the system (:mod:`acesim.runs.llm`, class mode: one GPU
  per pipeline stage, the same figures as simulating every GPU); tokens per second per GPU.

Systems: a collective row names a system preset (or a system file next to the corpus file); the
one-NPU kinds name an NPU preset, built into a one-NPU system by
``acesim.config.single_npu_system`` (or a one-NPU system file). A row that cannot be simulated
(an unknown system, a precision the NPU lacks) is reported with status ``error`` and the
message; it never stops the rest of the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..config import single_npu_system
from ..config.presets import DOCUMENT_SUFFIXES
from ..config.resolve import derive, resolve_system
from ..config.system import SystemConfig
from ..errors import AcesimError, ConfigError, SimulationError
from ..hardware.kernel_model import plan_kernel
from ..hardware.kernels import Attention, Gemm, Stream
from ..network.group import Group, Span
from ..runs import make_case, run_case
from ..runs.llm import make_llm_case, run_llm
from ..runs.overlap import overlap
from ..simulate import simulate_collective
from ..units import format_time
from ..workload.llm.parallel import parse_parallel
from .corpus import (
    SINGLE_NPU_KINDS,
    AttentionRun,
    Case,
    CollectiveRun,
    Corpus,
    Family,
    GemmRun,
    LlmRun,
    OverlapRun,
    StreamRun,
    TrainingRun,
    load_corpus,
)
from .report import CaseResult, FamilyReport, Report

__all__ = [
    "evaluate_case",
    "simulate_case",
    "system_of",
    "validate",
]


def _file(case: Case, family: Family) -> Path | None:
    """The system file a case names, relative to its corpus file (None: a preset name)."""
    if Path(case.system).suffix.lower() not in DOCUMENT_SUFFIXES:
        return None
    path = Path(case.system)
    if not path.is_absolute():
        if family.base is None:
            raise ConfigError("system", "shipped corpus rows name presets, not files", case.system)
        path = family.base / path
    return path


def system_of(case: Case, family: Family) -> SystemConfig:
    """The system a case runs on (see the module docstring)."""
    path = _file(case, family)
    if case.kind in SINGLE_NPU_KINDS:
        if path is not None:
            system = resolve_system(path)
        else:
            system = single_npu_system(case.system)
        if case.kind == "training" and system.network.total_npus != 1:
            raise ConfigError(
                "system",
                f"a training row runs on one NPU; this system has {system.network.total_npus}",
                case.system,
            )
        return system
    target: str | Path = path if path is not None else case.system
    return resolve_system(target, nodes=case.nodes if case.nodes > 1 else None)


def _gemm(case: Case, run: GemmRun, system: SystemConfig) -> tuple[float, str]:
    kernel = Gemm(run.m, run.n, run.k, dtype=run.dtype, out_dtype=run.out_dtype)
    plan = plan_kernel(system.npu, kernel)
    k = run.k
    flops = 2.0 * run.m * run.n * k if run.flops == "2mnk" else run.m * run.n * (2.0 * k - 1)
    note = plan.bound + (f"; {plan.detail}" if plan.detail else "")
    return flops / plan.time_alone, note


def _attention(case: Case, run: AttentionRun, system: SystemConfig) -> tuple[float, str]:
    kernel = Attention(
        run.batch * run.heads,
        run.seq,
        run.seq,
        run.head_dim,
        dtype=run.dtype,
        causal=run.causal,
        backward=run.backward,
    )
    plan = plan_kernel(system.npu, kernel)
    note = plan.bound + (f"; {plan.detail}" if plan.detail else "")
    return kernel.flops / plan.time_alone, note


#: (arrays read, arrays written, FLOPs per element) of each STREAM kernel.
STREAM_KERNELS: dict[str, tuple[int, int, int]] = {
    "copy": (1, 1, 0),
    "triad": (2, 1, 2),
    "dot": (2, 0, 2),
}


def _stream(case: Case, run: StreamRun, system: SystemConfig) -> tuple[float, str]:
    reads, writes, flops = STREAM_KERNELS[run.variant]
    array = float(run.elements) * run.element_bytes
    kernel = Stream(
        read_bytes=reads * array,
        write_bytes=writes * array,
        flops=flops * float(run.elements),
        name=f"stream-{run.variant}",
    )
    plan = plan_kernel(system.npu, kernel)
    return (kernel.read_bytes + kernel.write_bytes) / plan.time_alone, plan.bound


def _collective(case: Case, run: CollectiveRun, system: SystemConfig) -> tuple[float, str]:
    if run.settings:
        system = resolve_system(system, overrides=run.settings)
    if run.algorithm is not None:
        system = derive(system, {"collective.algorithm": run.algorithm})
    group = Group((Span(0, run.group),)) if run.group is not None else None
    dims = tuple(run.dims) if run.dims is not None else None
    if dims is not None and max(dims) >= len(system.network.dimensions):
        raise ConfigError(
            "run.dims",
            f"names a dimension the system does not have ({len(system.network.dimensions)})",
            list(dims),
        )
    # NCCL's measured choice is the tuner's: no search for a faster candidate
    result = simulate_collective(
        system,
        run.op,
        run.nbytes,
        endpoint=run.endpoint,
        group=group,
        dims=dims,
        tuner_check=False,
    )
    value = result.busbw if run.metric == "busbw" else result.algbw
    return value, f"{result.group_size} NPUs, {format_time(result.time)}"


def _overlap_times(
    system: SystemConfig, run: OverlapRun, gemm: Gemm, endpoint: str | None
) -> dict[str, float]:
    """The GEMM and the collective with ``endpoint`` (:func:`acesim.runs.overlap.overlap`, what
    ``acesim overlap`` runs): serial, overlapped (the makespan from the GEMM's launch) and each
    one's slowdown, s or a ratio."""
    kind = endpoint if endpoint is not None else system.endpoint.kind
    row = overlap(
        system,
        gemm,
        run.op,
        run.nbytes,
        kind,
        collective_at=float(run.collective_at),
        tuner_check=False,
    )
    return {
        "serial": row["serial_time"],
        "overlapped": row["overlapped_time"],
        "gemm_slowdown": row["gemm_slowdown"],
        "collective_slowdown": row["collective_slowdown"],
    }


def _overlap(case: Case, run: OverlapRun, system: SystemConfig) -> tuple[float, str]:
    if run.settings:
        system = resolve_system(system, overrides=run.settings)
    system.npu.require_matrix(run.dtype, "run.dtype")
    gemm = Gemm(run.m, run.n, run.k, dtype=run.dtype)
    times = _overlap_times(system, run, gemm, run.endpoint)
    serial = times["serial"]
    if run.serial_endpoint is not None and run.serial_endpoint != run.endpoint:
        serial = _overlap_times(system, run, gemm, run.serial_endpoint)["serial"]
    figures = {**times, "serial": serial, "overlapped/serial": times["overlapped"] / serial}
    value = figures[run.metric]
    note = (
        f"serial {format_time(serial)}, overlapped {format_time(times['overlapped'])}, "
        f"GEMM x{times['gemm_slowdown']:.3f}, collective x{times['collective_slowdown']:.3f}"
    )
    return value, note


def _training(case: Case, run: TrainingRun, system: SystemConfig) -> tuple[float, str]:
    resolved = make_case(
        system,
        run.workload,
        batch_per_npu=run.batch,
        precision=run.precision,
        iterations=run.iterations,
    )
    result, _ = run_case(resolved)
    note = result.bound or ""
    return run.batch / result.iteration_time, note


def _llm(case: Case, run: LlmRun, system: SystemConfig) -> tuple[float, str]:
    if run.settings:
        system = resolve_system(system, overrides=run.settings)
    par = parse_parallel(
        run.parallel,
        global_batch=run.global_batch,
        micro_batch=run.micro_batch,
        seq=run.seq,
        field="run.parallel",
    )
    case_ = make_llm_case(
        system, run.model, par, precision=run.precision, check_memory=run.check_memory
    )
    result, _ = run_llm(case_)
    note = f"{format_time(result.iteration_time)} an iteration, bubble " + (
        f"{100 * result.bubble_fraction:.1f}%"
    )
    return result.tokens_per_s_per_gpu, note


#: Each kind of run's simulation (a run's type is one of these: the corpus's ``Run`` union)
_SIMULATE: dict[type, Callable[[Case, Any, SystemConfig], tuple[float, str]]] = {
    GemmRun: _gemm,
    AttentionRun: _attention,
    StreamRun: _stream,
    CollectiveRun: _collective,
    LlmRun: _llm,
    OverlapRun: _overlap,
    TrainingRun: _training,
}


def simulate_case(
    case: Case,
    family: Family,
    system: SystemConfig | None = None,
    adjust: Callable[[SystemConfig], SystemConfig] | None = None,
) -> tuple[float, str]:
    """The simulated figure of a live case in its unit, and what bound it; errors raise.
    ``system`` replaces the case's own (fits try parameter values on it); ``adjust`` changes
    the system first (a leave-one-system-out world's values, :mod:`.loso`)."""
    run = case.run
    if run is None:
        raise ConfigError("run", "an unsupported row has nothing to simulate", case.id)
    if system is None:
        system = system_of(case, family)
    if adjust is not None:
        system = adjust(system)
    value, note = _SIMULATE[type(run)](case, run, system)
    if not math.isfinite(value) or value <= 0:
        raise SimulationError(f"the simulated figure is not a positive number ({value})")
    return value / case.scale, note


def evaluate_case(
    case: Case,
    family: Family,
    *,
    quick: bool = False,
    adjust: Callable[[SystemConfig], SystemConfig] | None = None,
    held_out: bool = False,
) -> CaseResult:
    """``case`` evaluated; never raises for a row (its problem is the row's ``error``).
    ``adjust`` changes its system first and ``held_out`` makes a fit row a test row (the row's
    system with its own rows withheld, ``acesim validate --transfer``)."""
    fitted = False if held_out else None
    if case.status == "unsupported":
        return CaseResult(case, "unsupported", note=case.reason, fitted=fitted)
    if quick and not case.quick:
        return CaseResult(case, "skipped", note="not a quick row (--quick)", fitted=fitted)
    try:
        value, note = simulate_case(case, family, adjust=adjust)
    except AcesimError as exc:
        return CaseResult(case, "error", note=str(exc), fitted=fitted)
    except Exception as exc:  # an API of another acesim version, a bug: the row says so
        return CaseResult(case, "error", note=f"{type(exc).__name__}: {exc}", fitted=fitted)
    return CaseResult(case, "ok", value, note, fitted=fitted)


def chosen_families(
    corpus: Corpus, families: Iterable[str] | None, rows: Iterable[str] | None
) -> list[Family]:
    """The families named (all by default) that hold one of ``rows`` (when given), in corpus
    order; the names and the rows checked (ConfigErrors naming ``--family``, ``--row``)."""
    chosen = corpus.select(list(families) if families is not None else None)
    if rows is None:
        return chosen
    wanted = corpus.rows(rows)
    return [f for f in chosen if any(c.id in wanted for c in f.cases)]


def validate(
    families: Iterable[str] | None = None,
    *,
    quick: bool = False,
    corpus: Corpus | str | Path | None = None,
    on_case: Callable[[CaseResult], Any] | None = None,
    rows: Iterable[str] | None = None,
) -> Report:
    """Evaluate the corpus (shipped, a folder of family files, or a loaded one).

    Args:
        families: names to evaluate (default all); an unknown name is a ConfigError naming
            ``--family`` and listing the families.
        quick: simulate only the rows marked ``quick`` (the others are ``skipped``).
        on_case: told each case's result as it is done (progress bars).
        rows: only these rows (ids; an unknown one is a ConfigError naming ``--row``), each
            family judged on those of its rows; families with none of them left out.
    """
    loaded = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    chosen = chosen_families(loaded, families, rows)
    wanted = None if rows is None else loaded.rows(rows)
    reports: list[FamilyReport] = []
    for family in chosen:
        results: list[CaseResult] = []
        for case in family.cases:
            if wanted is not None and case.id not in wanted:
                continue
            result = evaluate_case(case, family, quick=quick)
            results.append(result)
            if on_case is not None:
                on_case(result)
        reports.append(FamilyReport(family, tuple(results)))
    return Report(tuple(reports), quick=quick, corpus=loaded.origin)
