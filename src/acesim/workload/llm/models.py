"""Decoder-only transformer shapes, and the registry of published ones (:data:`MODELS`).

A :class:`TransformerConfig` is what Megatron-LM's model arguments say: ``layers``, ``hidden``,
``heads`` and ``kv_heads`` (grouped-query attention: ``kv_heads`` key/value heads shared by
``heads / kv_heads`` query heads), ``head_dim`` (``kv_channels``; default ``hidden / heads``),
``ffn`` (the MLP's inner width), ``gated`` (SwiGLU: two input projections of ``ffn``, else one
with GELU), ``vocab``, ``seq`` (the training sequence length the model was published with; a
run may give another), ``norm`` (``rmsnorm`` or ``layernorm``), ``bias`` (linear biases),
``tied`` (output head shares the embedding).

Mixture of experts (``experts > 0``): every layer from ``dense_layers`` on replaces its MLP by
a router (a ``[tokens, hidden] x [hidden, experts]`` GEMM) and ``experts`` expert MLPs of
``expert_ffn`` each, of which every token visits ``top_k``, plus ``shared_experts`` MLPs of
``expert_ffn`` every token visits. Tokens are taken as balanced over the experts (the
Megatron-Bridge MoE benchmark rows force balance).

Multi-head latent attention (MLA, ``kv_lora_rank > 0``; DeepSeek-V2/V3): keys and values come
from a ``kv_lora_rank``-wide latent (a down projection ``hidden -> kv_lora_rank + rope_dim``,
its norm, an up projection ``kv_lora_rank -> heads (head_dim + v_head_dim)``), queries from a
``q_lora_rank``-wide one (0: a direct projection); every head's query and key have
``head_dim`` non-rotary plus ``rope_dim`` rotary channels (the key's rotary part shared by the
heads), its value ``v_head_dim``.

Every preset's numbers come from its model card or paper (``source``); where a model has a
feature acesim does not model, its entry says so in ``notes`` (GPT-OSS's sliding-window
layers as full attention; rotary embeddings and attention sinks are element-wise work not
counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...errors import WorkloadError
from ...registry import Registry

__all__ = ["MODELS", "TransformerConfig", "model_flops"]


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer (see the module docstring). Sizes are element counts."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int
    kv_heads: int | None = None
    head_dim: int | None = None
    gated: bool = True
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    bias: bool = False
    tied: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    v_head_dim: int | None = None
    source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        where = f"model {self.name}"
        for name in ("layers", "hidden", "heads", "ffn", "vocab", "seq"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WorkloadError(
                    f"must be a positive integer, got {value!r}", location=where, field=name
                )
        for name in (
            "experts",
            "top_k",
            "expert_ffn",
            "shared_experts",
            "dense_layers",
            "q_lora_rank",
            "kv_lora_rank",
            "rope_dim",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise WorkloadError(
                    f"must be a whole number >= 0, got {value!r}", location=where, field=name
                )
        if self.head_dim is None and self.hidden % self.heads:
            raise WorkloadError(
                f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}) unless "
                "head_dim is given",
                location=where,
                field="heads",
            )
        if self.heads % self.groups:
            raise WorkloadError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.groups})",
                location=where,
                field="kv_heads",
            )
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise WorkloadError(
                    f"top_k must be 1..experts ({self.experts}), got {self.top_k}",
                    location=where,
                    field="top_k",
                )
            if self.expert_ffn < 1:
                raise WorkloadError(
                    "an MoE model needs expert_ffn >= 1", location=where, field="expert_ffn"
                )
            if self.dense_layers > self.layers:
                raise WorkloadError(
                    f"dense_layers must be at most layers ({self.layers}), got {self.dense_layers}",
                    location=where,
                    field="dense_layers",
                )

    # -- derived shapes ----------------------------------------------------------------------
    @property
    def groups(self) -> int:
        """Key/value heads (query groups)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def dim(self) -> int:
        """Width of one attention head."""
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def q_width(self) -> int:
        return self.heads * self.dim

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (module docstring)."""
        return self.kv_lora_rank > 0

    @property
    def v_dim(self) -> int:
        """Width of one head's value (MLA: ``v_head_dim``)."""
        return self.v_head_dim if self.v_head_dim is not None else self.dim

    @property
    def mla_params(self) -> tuple[int, int]:
        """MLA's parameters per layer: (held whole by every TP rank: the down projections and
        their norms; split over TP by heads: the up projections and the output projection)."""
        h, n = self.hidden, self.heads
        qk = self.dim + self.rope_dim
        if self.q_lora_rank:
            whole = h * self.q_lora_rank + self.q_lora_rank
            split = self.q_lora_rank * n * qk
        else:
            whole, split = 0, h * n * qk
        whole += h * (self.kv_lora_rank + self.rope_dim) + self.kv_lora_rank
        split += self.kv_lora_rank * n * (self.dim + self.v_dim) + n * self.v_dim * h
        return whole, split

    @property
    def kv_width(self) -> int:
        return self.groups * self.dim

    def is_moe_layer(self, index: int) -> bool:
        return self.experts > 0 and index >= self.dense_layers

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    # -- parameters --------------------------------------------------------------------------
    def mlp_params(self, width: int) -> int:
        """One MLP of inner width ``width``."""
        inputs = 2 if self.gated else 1
        b = (inputs * width + self.hidden) if self.bias else 0
        return (inputs + 1) * self.hidden * width + b

    @property
    def attention_params(self) -> int:
        if self.mla:
            return sum(self.mla_params)
        h = self.hidden
        qkv = h * (self.q_width + 2 * self.kv_width)
        proj = self.q_width * h
        b = (self.q_width + 2 * self.kv_width + h) if self.bias else 0
        return qkv + proj + b

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    def layer_params(self, index: int) -> int:
        """Parameters of layer ``index``: attention, two norms, MLP or experts and router."""
        n = self.attention_params + 2 * self.norm_params
        if self.is_moe_layer(index):
            n += (self.experts + self.shared_experts) * self.mlp_params(self.expert_ffn)
            n += self.hidden * self.experts  # router
        else:
            n += self.mlp_params(self.ffn)
        return n

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """Output projection (none of its own when tied) and the final norm."""
        return (0 if self.tied else self.vocab * self.hidden) + self.norm_params

    @property
    def params(self) -> int:
        """All parameters."""
        return (
            sum(self.layer_params(i) for i in range(self.layers))
            + self.embedding_params
            + self.head_params
        )

    @property
    def active_params(self) -> int:
        """Parameters one token goes through (MoE: ``top_k`` routed plus the shared experts)."""
        n = self.params
        if self.experts:
            idle = (self.experts - self.top_k) * self.mlp_params(self.expert_ffn)
            n -= self.moe_layers * idle
        return n


def model_flops(model: TransformerConfig, sequences: int, seq: int) -> float:
    """Model FLOPs of one training step over ``sequences`` sequences of ``seq`` tokens, as
    Megatron-LM counts them for its reported throughput (``num_floating_point_operations`` in
    megatron/training/training.py; Narayanan et al., SC 2021, appendix): every GEMM three times
    (forward, data and weight gradient), the full ``s x s`` attention scores (no causal
    halving), no recomputation. Used for MFU."""
    h = model.hidden
    q_ratio = model.q_width / h
    gate = 1.5 if model.gated else 1.0
    attention = (1 + model.groups / model.heads + seq / h) * q_ratio
    if model.mla:
        attention = _mla_attention(model, seq) / (2 * h * h)
    dense = model.layers - model.moe_layers
    mlp_layers = dense * (model.ffn / h) * gate
    moe_layers = model.moe_layers * (
        (model.expert_ffn / h) * (model.top_k + model.shared_experts) * gate
    )
    per_layer = attention * model.layers + mlp_layers + moe_layers
    logits = model.vocab / (2 * h)
    return 12.0 * sequences * seq * h * h * (per_layer + logits)


def _mla_attention(model: TransformerConfig, seq: int) -> float:
    """MLA's multiply-adds per token and layer as Megatron-LM's ``num_floating_point_operations``
    counts them (the projections with the norms' one extra column each, the scores over the
    ``head_dim + rope_dim`` channels and the values'), with this module's full ``s x s``
    scores."""
    h, n, s = model.hidden, model.heads, seq
    qk = model.dim + model.rope_dim
    q = model.q_lora_rank * (h + n * qk + 1) if model.q_lora_rank else h * n * qk
    kv = model.kv_lora_rank * (h + n * (model.dim + model.v_dim) + 1) + h * model.rope_dim
    return q + kv + n * model.v_dim * h + s * n * qk + s * n * model.v_dim


#: Published decoder-only transformers by name (``acesim run -w <name>``).
MODELS: Registry[TransformerConfig] = Registry("LLM model", "workload.name", listed=True)

_LLAMA3 = (
    "Llama Team, 'The Llama 3 Herd of Models' (arXiv 2407.21783, 2024), table 3 (layers, "
    "model and FFN dimension, attention and key/value heads, SwiGLU, RoPE, 8K pre-training "
    "context); vocabulary 128,256 and untied embeddings from the released config.json"
)
#: The Llama 3 sizes as table 3 gives them: name, layers, model dimension, attention heads, FFN
#: dimension, and the released checkpoint read for the rest
_LLAMA3_SIZES = (
    ("llama3-8b", 32, 4096, 32, 14336, "meta-llama/Meta-Llama-3-8B"),
    ("llama3-70b", 80, 8192, 64, 28672, "meta-llama/Meta-Llama-3-70B"),
    ("llama3-405b", 126, 16384, 128, 53248, "meta-llama/Llama-3.1-405B"),
)
for _name, _layers, _hidden, _heads, _ffn, _release in _LLAMA3_SIZES:
    # every size: 8 key/value heads, the 128,256-token vocabulary, the 8K context
    MODELS.register(
        _name,
        TransformerConfig(
            _name,
            layers=_layers,
            hidden=_hidden,
            heads=_heads,
            kv_heads=8,
            ffn=_ffn,
            vocab=128256,
            seq=8192,
            source=f"{_LLAMA3} ({_release})",
        ),
    )
for _m in (
    TransformerConfig(
        "gpt3-175b",
        layers=96,
        hidden=12288,
        heads=96,
        ffn=4 * 12288,
        vocab=50257,
        seq=2048,
        gated=False,
        norm="layernorm",
        bias=True,
        tied=True,
        source="Brown et al., 'Language Models are Few-Shot Learners' (NeurIPS 2020), table "
        "2.1: 96 layers, d_model 12,288, 96 heads of 128, context 2,048; FFN 4 x d_model and "
        "the GPT-2 vocabulary of 50,257 (section 2.1: the GPT-2 architecture)",
    ),
    TransformerConfig(
        "gpt-oss-120b",
        layers=36,
        hidden=2880,
        heads=64,
        kv_heads=8,
        head_dim=64,
        ffn=2880,
        vocab=201088,
        seq=4096,
        bias=True,
        experts=128,
        top_k=4,
        expert_ffn=2880,
        source="OpenAI, 'gpt-oss-120b & gpt-oss-20b Model Card' (2025), table 1 and section "
        "2.1: 36 layers, residual width 2,880, 128 experts with top-4 routing, SwiGLU, 64 "
        "query heads of 64 and 8 key/value heads, o200k_harmony tokenizer; vocabulary 201,088, "
        "expert width 2,880, attention biases and the 4,096-token initial context from the "
        "released config.json (openai/gpt-oss-120b)",
        notes="banded (128-token) sliding-window layers taken as full causal attention; "
        "attention sinks not modelled",
    ),
    TransformerConfig(
        "deepseek-v3",
        layers=61,
        hidden=7168,
        heads=128,
        head_dim=128,
        ffn=18432,
        vocab=129280,
        seq=4096,
        experts=256,
        top_k=8,
        expert_ffn=2048,
        shared_experts=1,
        dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        rope_dim=64,
        v_head_dim=128,
        source="DeepSeek-AI, 'DeepSeek-V3 Technical Report' (arXiv 2412.19437, 2024), sections "
        "2.1 and 4.2: 61 layers, hidden 7,168, multi-head latent attention with 128 heads of "
        "128 (+64 rotary) channels, KV compression 512 and query compression 1,536, first three "
        "layers dense, then 1 shared and 256 routed experts of 2,048 with 8 activated, 4K "
        "pre-training sequence; FFN 18,432, value heads of 128, vocabulary 129,280 from the "
        "released config.json (deepseek-ai/DeepSeek-V3): 671 B parameters, 37 B activated",
        notes="multi-token prediction, the routing's bias terms and node-limited routing not "
        "modelled; tokens balanced over the experts",
    ),
    *(
        TransformerConfig(
            name,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=4,
            head_dim=128,
            ffn=ffn,
            vocab=151936,
            seq=4096,
            experts=128,
            top_k=8,
            expert_ffn=expert_ffn,
            source="Qwen Team, 'Qwen3 Technical Report' (arXiv 2505.09388, 2025), table 2 and "
            f"section 3: {layers} layers, {heads} query and 4 key/value heads, 128 experts with "
            "8 activated and no shared expert, 4,096-token sequences in the general pre-training "
            f"stage; hidden {hidden:,}, head width 128, expert width {expert_ffn:,}, vocabulary "
            f"151,936 and untied embeddings from the released config.json ({release}): "
            f"{total} parameters, {active} activated",
            notes="each head's query and key RMSNorm (QK-norm) not modelled (element-wise); "
            "tokens balanced over the experts",
        )
        for name, layers, hidden, heads, ffn, expert_ffn, release, total, active in (
            ("qwen3-30b-a3b", 48, 2048, 32, 6144, 768, "Qwen/Qwen3-30B-A3B", "30.5 B", "3.3 B"),
            ("qwen3-235b-a22b", 94, 4096, 64, 12288, 1536, "Qwen/Qwen3-235B-A22B", "235 B", "22 B"),
        )
    ),
):
    MODELS.register(_m.name, _m)
