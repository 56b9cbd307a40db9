"""The LLM block's kernels beside the GEMMs: Transformer Engine's FP8 casts, RoPE, the output
layer's precision, and the attention kernels' efficiencies."""

from __future__ import annotations

import pytest

from acesim.config.system import NPUConfig
from acesim.hardware.kernel_model import plan_kernel
from acesim.hardware.kernels import Attention, Gemm, Kernel, Stream
from acesim.precision import PRECISIONS
from acesim.validation.corpus import AttentionRun, Case, load_corpus
from acesim.validation.evaluate import simulate_case, system_of
from acesim.workload.llm.block import ChunkWork, Step, chunk_work
from acesim.workload.llm.models import MODELS
from acesim.workload.llm.parallel import flat_group

M = MODELS.get("llama3-8b")
B, S = 1, 4096
T = B * S


def _kernels(steps: tuple[Step, ...]) -> list[Kernel]:
    return [k for st in steps for k in st.kernels]


def _named(work: ChunkWork, suffix: str) -> dict[str, Stream]:
    out = {}
    for k in _kernels(work.forward) + _kernels(work.backward):
        if isinstance(k, Stream) and k.name.endswith(suffix):
            out[k.name] = k
    return out


def _work(precision: str, tp: int = 1, sp: bool = False, **kw: object) -> ChunkWork:
    group = flat_group((8,), tp, 1, "tp") if tp > 1 else None
    return chunk_work(
        M,
        PRECISIONS.get(precision),
        range(1),
        micro_batch=B,
        seq=S,
        tp=tp,
        sp=sp,
        tp_group=group,
        **kw,
    )  # type: ignore[arg-type]


def test_fp8_casts_follow_the_operand_shapes() -> None:
    work = _work("fp8")
    h, a = M.hidden, 2
    casts = _named(work, ".cast_transpose")
    # every GEMM operand produced in BF16 is cast once into a row-wise and a column-wise copy
    widths = {
        "l0.qkv.input": h,
        "l0.proj.input": M.q_width,
        "l0.mlp.fc1.input": h,
        "l0.mlp.fc2.input": M.ffn,
        "l0.proj.dgrad_output": h,
        "l0.qkv.dgrad_output": M.q_width + 2 * M.kv_width,
        "l0.mlp.fc2.dgrad_output": h,
        "l0.mlp.fc1.dgrad_output": 2 * M.ffn,
    }
    assert set(casts) == {f"{n}.cast_transpose" for n in widths}
    for name, width in widths.items():
        k = casts[f"{name}.cast_transpose"]
        assert k.read_bytes == T * width * a
        assert k.write_bytes == 2 * T * width  # two FP8 copies
    amax = _named(work, ".amax")
    # the norms compute the amax of their outputs (Transformer Engine's fused norm + amax)
    assert set(amax) == {
        f"{n}.amax" for n in widths if n not in ("l0.qkv.input", "l0.mlp.fc1.input")
    }
    assert all(
        k.read_bytes == casts[n.replace(".amax", ".cast_transpose")].read_bytes
        for n, k in amax.items()
    )
    assert not _named(_work("bf16"), ".cast_transpose")
    assert not _named(_work("bf16"), ".amax")


def test_fp8_with_sequence_parallelism_casts_the_shard_and_gathers_fp8() -> None:
    t = 4
    work = _work("fp8", tp=t, sp=True)
    h = M.hidden
    cast = _named(work, "l0.qkv.input.cast")["l0.qkv.input.cast"]
    assert cast.read_bytes == T // t * h * 2 and cast.write_bytes == T // t * h
    transpose = _named(work, "l0.qkv.input.transpose")["l0.qkv.input.transpose"]
    assert transpose.read_bytes == transpose.write_bytes == T * h  # the gathered FP8 copy
    fwd = [st.comm for st in work.forward if st.comm is not None]
    assert [(c.op, c.size) for c in fwd] == [
        ("all-gather", T * h),
        ("reduce-scatter", 2 * T * h),
    ] * 2
    bf16 = [st.comm for st in _work("bf16", tp=t, sp=True).forward if st.comm is not None]
    assert [c.size for c in bf16 if c.op == "all-gather"] == [2 * T * h] * 2


def test_the_output_layer_runs_in_bf16_under_fp8() -> None:
    work = _work("fp8", head=True)
    gemms = {
        k.name: k for k in _kernels(work.forward) + _kernels(work.backward) if isinstance(k, Gemm)
    }
    assert {gemms[n].dtype for n in ("output", "output.dgrad", "output.wgrad")} == {"bf16"}
    assert gemms["l0.qkv"].dtype == "fp8"


def test_rope_reads_and_writes_q_and_k() -> None:
    work = _work("bf16")
    rope = _named(work, "rope")["l0.rope"]
    n = T * (M.q_width + M.kv_width)
    assert rope.read_bytes == rope.write_bytes == 2 * n
    assert "l0.rope.bwd" in _named(work, "rope.bwd")


def _npu(**kernels: object) -> NPUConfig:
    return NPUConfig.model_validate(
        {
            "compute_units": 100,
            "matrix_flops": {"bf16": 1e15},
            "vector_flops": 60e12,
            "hbm_bandwidth": 3e12,
            "kernels": kernels,
        }
    )


def test_attention_backward_runs_at_its_own_efficiency() -> None:
    fwd = Attention(32, 8192, 8192, 128, dtype="bf16", causal=True)
    bwd = Attention(32, 8192, 8192, 128, dtype="bf16", causal=True, backward=True)
    one = _npu(attention_efficiency=0.5)
    two = _npu(attention_efficiency=0.5, attention_backward_efficiency=0.25)
    assert plan_kernel(two, fwd).time_alone == plan_kernel(one, fwd).time_alone
    assert plan_kernel(one, bwd).achieved_flops == pytest.approx(0.5e15, rel=1e-3)
    assert plan_kernel(two, bwd).achieved_flops == pytest.approx(0.25e15, rel=1e-3)


def test_an_attention_corpus_row_is_flops_over_the_kernel_time() -> None:
    corpus = load_corpus()
    family = corpus.families["kernels"]
    case = next(c for c in family.cases if c.id == "h100-attention-bf16-bwd-8k")
    run = case.run
    assert isinstance(run, AttentionRun) and isinstance(case, Case)
    value, _note = simulate_case(case, family)
    kernel = Attention(
        run.batch * run.heads,
        run.seq,
        run.seq,
        run.head_dim,
        dtype=run.dtype,
        causal=run.causal,
        backward=run.backward,
    )
    # FlashAttention's count: backward 2.5 times the forward's 4 b h s^2 d (no mask)
    assert kernel.flops == 2.5 * 4 * run.batch * run.heads * run.seq**2 * run.head_dim
    plan = plan_kernel(system_of(case, family).npu, kernel)
    assert value == pytest.approx(kernel.flops / plan.time_alone / 1e12, rel=1e-12)
