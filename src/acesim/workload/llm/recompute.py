"""Megatron-core's selective recomputation by module: the names, and which models have them.

``--recompute-granularity selective --recompute-modules ...`` (Megatron-core
``TransformerConfig.recompute_modules``; ``megatron/core/transformer/transformer_layer.py``,
``attention.py``, ``multi_latent_attention.py``, ``moe/moe_layer.py``, ``moe/experts.py``)
recomputes, per module, either with normal checkpointing (the module keeps only its input and
reruns its whole forward before its backward) or with output-discarding checkpointing
(``CheckpointWithoutOutput``: the module's output is freed once the next operation has used
it, and recomputed from the module's input, which is kept anyway, when the gradient reaches
that next operation). :data:`MODULES` says, per name, what the forward stops keeping and what
the backward reruns, as :mod:`acesim.workload.llm.block` and :mod:`.mla` build them.

Megatron-core uses the modules only with ``--recompute-granularity selective`` (with no
granularity it recomputes nothing, whatever ``--recompute-modules`` says); acesim refuses
``recompute_modules`` without ``recompute=selective`` rather than drop it. ``selective``
without modules means Megatron's default, ``core_attn``. With Transformer Engine (the
Megatron-Bridge recipes) the input norm of standard attention and the pre-MLP norm of a dense
MLP are fused into the QKV and fc1 GEMMs (``TELayerNormColumnParallelLinear``: the layer
specs mark them ``IdentityOp``), so ``layernorm`` reaches only the norms that stand alone: an
MoE layer's pre-MLP norm and multi-head latent attention's input norm; a model with neither
is refused, as is any module the model lacks.
"""

from __future__ import annotations

from ...errors import ConfigError
from .models import TransformerConfig

__all__ = ["MODULES", "SEPARATOR", "modules_of", "parse_modules", "check_modules"]

#: Megatron-core's module names -> (what is recomputed, how): the one list of them.
MODULES: dict[str, str] = {
    "core_attn": "the core attention (FlashAttention, after the RoPE) reruns before its "
    "backward from the Q, K, V it keeps; its statistics are not kept, its output is (the "
    "output projection's saved input) (normal checkpointing)",
    "layernorm": "a stand-alone norm (an MoE layer's pre-MLP norm, MLA's input norm) reruns "
    "at the start of its sublayer's backward; its output and statistics are not kept "
    "(output-discarding)",
    "moe_act": "the routed experts' activation reruns before the experts' backward; its output "
    "(fc2's input) is not kept (output-discarding)",
    "mlp": "a dense MLP keeps only its input and reruns its forward, norm and TP collectives "
    "included, before its backward (normal checkpointing)",
    "moe": "an MoE layer keeps only its input (the pre-MLP norm's output) and reruns router, "
    "dispatch, experts, combine and shared experts before its backward (normal checkpointing)",
    "shared_experts": "the shared experts keep only their input and rerun their forward before "
    "their backward (normal checkpointing)",
    "mla_up_proj": "MLA's latent norms, up projections and RoPE rerun before the attention "
    "backward; Q, K, V and the latents' norm outputs are not kept (output-discarding)",
}

#: Between module names in the ``--parallel`` text (its items are separated by commas).
SEPARATOR = "+"


def modules_of(recompute: str, modules: tuple[str, ...] | None) -> frozenset[str]:
    """The modules recomputed under ``recompute`` (``selective`` without modules: Megatron's
    default ``core_attn``; ``none`` and ``full``: none by module)."""
    if recompute != "selective":
        return frozenset()
    return frozenset(modules) if modules is not None else frozenset({"core_attn"})


def parse_modules(raw: str, field: str) -> tuple[str, ...]:
    """``layernorm+moe_act`` -> the names, in order (ConfigError naming ``field`` for an unknown
    or repeated name, or none)."""
    names = tuple(n.strip() for n in raw.split(SEPARATOR))
    for name in names:
        if name not in MODULES:
            raise ConfigError(
                field,
                f"recompute_modules are Megatron's names joined by '{SEPARATOR}': "
                + ", ".join(MODULES),
                name or raw,
            )
    if len(set(names)) != len(names):
        raise ConfigError(field, "recompute_modules names a module twice", raw)
    return names


def check_modules(modules: tuple[str, ...] | None, model: TransformerConfig) -> None:
    """ConfigError naming ``parallel.recompute_modules`` for a module ``model`` does not have."""
    for name in modules or ():
        lacks = _lacks(name, model)
        if lacks:
            raise ConfigError(
                "parallel.recompute_modules", f"{name} needs {lacks}; {model.name} has none", name
            )


def _lacks(name: str, model: TransformerConfig) -> str:
    """What ``model`` would need for module ``name`` ("" when it has it)."""
    dense_mlp = not model.experts or model.dense_layers > 0
    needs = {
        "layernorm": (
            bool(model.experts or model.mla),
            "a stand-alone norm (an MoE layer's pre-MLP norm or MLA's input norm: Transformer "
            "Engine fuses the others into the next GEMM)",
        ),
        "moe_act": (bool(model.experts), "routed experts"),
        "moe": (bool(model.experts), "MoE layers"),
        "shared_experts": (bool(model.shared_experts), "shared experts"),
        "mlp": (dense_mlp, "a dense MLP layer"),
        "mla_up_proj": (model.mla, "multi-head latent attention"),
    }
    has, what = needs.get(name, (True, ""))
    return "" if has else what
