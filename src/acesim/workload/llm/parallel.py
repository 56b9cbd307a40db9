"""Parallelism as Megatron-LM defines it, and its placement onto the network.

A :class:`ParallelConfig` holds Megatron's arguments: tensor (``tp``), pipeline (``pp``) with
``vpp`` virtual stages (model chunks) per rank, context (``cp``), expert (``ep``) and data
(``dp``, ``None`` = whatever the NPUs leave) parallel sizes; ``sp`` (sequence parallelism: the
TP all-reduces become a reduce-scatter and an all-gather, and norms and residuals run on
``1/tp`` of the sequence); ``zero`` (0: replicated optimizer, gradients all-reduced; 1:
Megatron's distributed optimizer, ZeRO-1: gradients reduce-scattered, optimizer state and
master weights sharded over DP, updated parameters all-gathered; 3: FSDP, Megatron-FSDP's
ZeRO-3: parameters and gradients sharded too, gathered and reduced per layer, see
:mod:`acesim.training.pipeline`); ``recompute`` (``none``,
``selective``: the core attention is recomputed in backward, ``full``: every layer's forward
is recomputed from its saved input; ``recompute_layers = N`` with ``full``: only the first ``N``
layers of each model chunk, Megatron's ``--recompute-method block``; ``recompute_modules``
with ``selective``: Megatron's ``--recompute-modules``, the names of
:data:`acesim.workload.llm.recompute.MODULES` joined by ``+``, e.g.
``recompute=selective,recompute_modules=layernorm+moe_act``); ``global_batch`` and
``micro_batch`` in sequences and ``seq`` tokens a sequence.

Pipeline stages (:meth:`ParallelConfig.layer_split`, Megatron-core's ``get_num_layers_to_build``
and ``get_transformer_layer_offset`` in ``megatron/core/transformer/transformer_layer.py`` and
``transformer_block.py``): by default the ``L`` layers divide evenly over the ``pp x vpp``
virtual stages. ``first_stage_layers`` / ``last_stage_layers`` (``--decoder-first-pipeline-
num-layers`` / ``--decoder-last-pipeline-num-layers``) give the first / last stage its own
count; the rest divide evenly over the other stages (they must), and each stage's count over
its ``vpp`` chunks. ``account_embedding`` / ``account_loss``
(``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``) count
the embedding / the loss (the output head) as one more layer: ``L + 1`` or ``L + 2`` layers
divide over the virtual stages, and the first / last virtual stage builds one transformer
layer fewer. Megatron refuses explicit first/last counts together with the accounting; so
does acesim. Layers are numbered in virtual-stage order (chunk ``c`` of stage ``s`` is virtual
stage ``c pp + s``).

``schedule``: the pipeline schedule, a name of :data:`acesim.training.schedules.SCHEDULES`
(``1f1b``, ``interleaved``, ``zb-h1``, ``zb-v``, ``dualpipe``, ``dualpipev``; default: Megatron's,
interleaved with ``vpp > 1``, else 1F1B). ``vpp`` counts a rank's chunks per direction: the
V-shaped schedules (``zb-v``, ``dualpipev``) take ``vpp=2``; ``dualpipe`` takes ``vpp=1`` and
holds a chunk of each of its two directions.

MoE: ``ep_comm_units=N``: the expert all-to-alls (dispatch, combine) run as kernels of their
own holding ``N`` SMs while they run (DeepEP; DeepSeek-V3 gave them 20 of 132), the compute
beside them on the rest; ``shared_expert_overlap=1`` (Megatron's
``--moe-shared-expert-overlap``): the all-to-alls run beside the shared experts' compute.
``cuda_graphs=1``: the layers' kernels are replayed from CUDA graphs, so the host launches
none of them one by one (the host model of :mod:`acesim.training.host` charges nothing).
Expert parallelism is carved out of the data-parallel-with-context ranks (Megatron-core's
expert rank order ``tp-ep-dp-pp`` with the expert TP equal to TP), so EP groups are ``ep``
consecutive ranks of the CP x DP block, and the expert-data-parallel groups hold the ranks
``ep`` apart in it.

``tp_overlap``: TP communication overlap (Megatron's ``--tp-comm-overlap``; needs ``sp``): the
dense layers' all-gathers and reduce-scatters run beside the GEMMs they feed or drain
(:mod:`.block`); off by default, as in Megatron-LM. ``grad_fp32``: keep and reduce the main
gradients in FP32 (default: when the recipe keeps FP32 master weights, Megatron-LM's rule for
BF16; Megatron-Bridge's performance scripts set ``grad_reduce_in_fp32 = False``).

Defaults: ``sp`` on whenever ``tp > 1`` and the distributed optimizer on (``zero = 1``), as
the Megatron-Bridge LLM recipes set them (``sequence_parallel``, ``use_distributed_optimizer``;
the measurements of the validation corpus ran them); Megatron-LM's own command-line defaults
have both off (``sp=0,zero=0``).

Offload (:data:`OFFLOAD_TIERS`), over the host link on the copy engines
(:mod:`acesim.training.offload`):

* ``offload=activations,offload_layers=N`` (Megatron-core's ``--cpu-offloading`` with
  ``--cpu-offloading-num-layers N``, Transformer Engine's CPU offload context): within each
  forward the saved activations of the first ``N`` transformer layers go to host memory after
  their layer and come back one layer ahead of its backward. Megatron-core's rules: ``N`` below
  the model's layers, a one-stage pipeline (``pp=1``), no recomputation.
* ``offload=activations,offload_fraction=F``: the share ``F`` (default 1) of each
  micro-batch's saved activations goes to host memory after its forward op and comes back
  before its backward op (whole micro-batches of a chunk between schedule ops).
* ``offload=optimizer,offload_fraction=F`` (Megatron-core's ``--optimizer-cpu-offload``,
  ``--optimizer-offload-fraction F``, its ``HybridDeviceOptimizer``): the share ``F`` of the
  rank's optimizer shard keeps its FP32 master weights and moments in host memory and steps on
  the CPU; needs the distributed optimizer (``zero`` 1 or 3), as Megatron's does.
* ``offload=weights`` (PyTorch FSDP's ``CPUOffload(offload_params=True)``, FSDP2's
  ``fully_shard(..., offload_policy=CPUOffloadPolicy())``): each rank's parameter shard, its
  gradient shard and its optimizer state live in host memory; every all-gather of a unit is
  preceded by the copy of its shard to the GPU, every reduce-scatter followed by the copy of
  the gradient shard to the host, and the optimizer steps on the CPU. Needs FSDP (``zero=3``);
  FSDP offloads all or nothing, so no ``offload_fraction`` but 1.

Text form (``--parallel``): ``tp=4,pp=8,vpp=5,cp=1,ep=1,dp=auto,sp=1,tp_overlap=0,zero=1,
recompute=none,order=tp-cp-ep-dp-pp``, and ``first_stage_layers=K,last_stage_layers=K`` or
``account_embedding=1,account_loss=1``.

Placement (:func:`placement`): ranks are numbered as Megatron-core's default order
``tp-cp-ep-dp-pp`` makes them, TP varying fastest: ``rank = tp + TP (cp + CP (dp + DP pp))``
(EP is carved out of DP: ``ep`` consecutive DP ranks form an expert-parallel group, and the
ranks ``ep`` apart that hold the same experts an expert-data-parallel group, as in
Megatron-core). Gradients reduce over DP x CP (Megatron's data-parallel group with context
parallelism), which is also what the distributed optimizer shards over. The NPUs' global ranks
run over the network's dimensions innermost first (8 GPUs of a node, then the nodes), so TP
lands inside the NVLink domain when it fits there. ``order=tp-cp-ep-pp-dp`` (Megatron's
``--use-tp-pp-dp-mapping``) numbers pipeline stages inside data parallelism instead:
``rank = tp + TP (pp + PP dp)`` (with cp = 1), so the stages of a pipeline sit closer together
and the DP groups span further; class mode needs each stage to be one block of ranks, so such
runs simulate every GPU. Each group is a
:class:`~acesim.network.group.Group` of spans (slices and strides of dimensions): groups of
the same kind that run at once share the links they really share. A group that is not a
product of per-dimension slices (TP=3 on 8-GPU nodes) is a TopologyError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ...config.reader import strict_int
from ...errors import ConfigError, TopologyError
from ...network.group import Group, Span
from .models import TransformerConfig
from .recompute import SEPARATOR, check_modules, parse_modules

__all__ = ["ParallelConfig", "Placement", "parse_parallel", "placement", "flat_group"]

Recompute = Literal["none", "selective", "full"]
#: Rank orders (Megatron-core's ``order``, TP fastest): the default, and
#: ``--use-tp-pp-dp-mapping``'s, which puts the pipeline stages inside data parallelism.
ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
_INT_KEYS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "dp",
    "zero",
    "recompute_layers",
    "first_stage_layers",
    "last_stage_layers",
    "ep_comm_units",
)
_BOOL_KEYS = (
    "sp",
    "tp_overlap",
    "grad_fp32",
    "account_embedding",
    "account_loss",
    "shared_expert_overlap",
    "cuda_graphs",
)
_KEYS = (
    *_INT_KEYS,
    *_BOOL_KEYS,
    "recompute",
    "recompute_modules",
    "order",
    "schedule",
    "offload",
    "offload_fraction",
    "offload_layers",
)

#: What ``offload=`` may send to host memory, with what is modelled of it.
OFFLOAD_TIERS = {
    "activations": "saved activations, after their forward, back before backward",
    "optimizer": "a share of the optimizer's master weights and moments, stepped on the CPU",
    "weights": "FSDP's parameter, gradient and optimizer shards, stepped on the CPU",
}


@dataclass(frozen=True)
class ParallelConfig:
    """Megatron's parallel configuration (see the module docstring); ``dp`` None = auto."""

    tp: int = 1
    pp: int = 1
    vpp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int | None = None
    sp: bool | None = None
    tp_overlap: bool = False
    grad_fp32: bool | None = None
    zero: int = 1
    recompute: Recompute = "none"
    recompute_layers: int | None = None
    global_batch: int = 1
    micro_batch: int = 1
    seq: int = 2048
    order: str = ORDERS[0]
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_embedding: bool = False
    account_loss: bool = False
    schedule: str | None = None
    ep_comm_units: int | None = None
    shared_expert_overlap: bool = False
    cuda_graphs: bool = False
    offload: str | None = None
    offload_fraction: float = 1.0
    recompute_modules: tuple[str, ...] | None = None
    offload_layers: int | None = None

    def __post_init__(self) -> None:
        if self.sp is None:
            object.__setattr__(self, "sp", self.tp > 1)
        if self.order not in ORDERS:
            raise ConfigError("parallel.order", f"must be one of {', '.join(ORDERS)}", self.order)
        if self.order == ORDERS[1] and self.cp > 1:
            raise ConfigError(
                "parallel.order",
                f"{ORDERS[1]} with cp > 1 is not modelled (its data-parallel-with-context group "
                "is not one strided block of ranks)",
                self.order,
            )
        for name in ("tp", "pp", "vpp", "cp", "ep", "micro_batch", "global_batch", "seq"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"parallel.{name}", "must be a whole number of at least 1", value)
        if self.dp is not None and (
            isinstance(self.dp, bool) or not isinstance(self.dp, int) or self.dp < 1
        ):
            raise ConfigError(
                "parallel.dp", "must be a whole number of at least 1 or auto", self.dp
            )
        if self.zero not in (0, 1, 3):
            raise ConfigError(
                "parallel.zero",
                "must be 0 (replicated optimizer), 1 (distributed optimizer) or 3 (FSDP)",
                self.zero,
            )
        self._check_moe()
        self._check_offload()
        self._check_split()
        if self.recompute not in ("none", "selective", "full"):
            raise ConfigError(
                "parallel.recompute", "must be none, selective or full", self.recompute
            )
        self._check_recompute_modules()
        if self.recompute_layers is not None:
            if (
                isinstance(self.recompute_layers, bool)
                or not isinstance(self.recompute_layers, int)
                or self.recompute_layers < 0
            ):
                raise ConfigError(
                    "parallel.recompute_layers",
                    "must be a whole number >= 0",
                    self.recompute_layers,
                )
            if self.recompute != "full":
                raise ConfigError(
                    "parallel.recompute_layers",
                    "counts fully recomputed layers: give it with recompute=full",
                    self.recompute_layers,
                )
        if self.sp and self.tp == 1:
            raise ConfigError("parallel.sp", "sequence parallelism needs tp > 1", "1")
        if self.tp_overlap and not self.sp:
            raise ConfigError(
                "parallel.tp_overlap",
                "TP communication overlap needs sequence parallelism (sp=1), as Megatron's does",
                "1",
            )
        if self.vpp > 1 and self.pp == 1:
            raise ConfigError("parallel.vpp", "virtual stages need pp > 1", self.vpp)
        if self.cp > 1 and self.seq % (2 * self.cp * (self.tp if self.sp else 1)):
            raise ConfigError(
                "parallel.seq",
                f"must be a multiple of 2 x cp{' x tp' if self.sp else ''} (Megatron splits each "
                "sequence into 2 cp load-balanced chunks)",
                self.seq,
            )

    def _check_offload(self) -> None:
        """``offload``: a tier of :data:`OFFLOAD_TIERS`; ``offload_fraction`` in (0, 1];
        ``offload_layers`` (activations only) under Megatron-core's rules (module docstring)."""
        f, n = self.offload_fraction, self.offload_layers
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1:
            raise ConfigError("parallel.offload_fraction", "must be a number in (0, 1]", f)
        if self.offload is None:
            if f != 1.0 or n is not None:
                name, what = ("offload_fraction", "activations or optimizer")
                if n is not None:
                    name, what = "offload_layers", "activations"
                raise ConfigError(
                    f"parallel.{name}", f"needs offload={what} (what to offload)",
                    f if n is None else n,
                )  # fmt: skip
            return
        if self.offload not in OFFLOAD_TIERS:
            raise ConfigError(
                "parallel.offload", f"must be one of {', '.join(OFFLOAD_TIERS)}", self.offload
            )
        if self.offload == "optimizer" and self.zero == 0:
            raise ConfigError(
                "parallel.zero",
                "optimizer offload needs the distributed optimizer (zero=1 or 3), as "
                "Megatron-core's --optimizer-cpu-offload does",
                0,
            )
        if self.offload == "weights":
            self._check_offload_weights()
        if n is not None:
            self._check_offload_layers(n)

    def _check_offload_weights(self) -> None:
        """FSDP's CPU offload of parameters: with FSDP only, all of them."""
        if self.zero != 3:
            raise ConfigError(
                "parallel.zero",
                "weight offload needs FSDP (zero=3): PyTorch FSDP's CPUOffload(offload_params="
                "True) keeps each rank's parameter shard in host memory",
                self.zero,
            )
        if self.offload_fraction != 1.0:
            raise ConfigError(
                "parallel.offload_fraction",
                "must be 1 with offload=weights: FSDP's CPU offload moves every unit's "
                "parameters, gradients and optimizer step to the host, not a share",
                self.offload_fraction,
            )

    def _check_offload_layers(self, n: object) -> None:
        """Megatron-core's rules for ``--cpu-offloading-num-layers`` (module docstring)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError("parallel.offload_layers", "must be a whole number of at least 1", n)
        rules = [
            (self.offload != "activations", "counts layers whose activations are offloaded: "
             "give it with offload=activations"),
            (self.offload_fraction != 1.0, "and offload_fraction are two granularities of "
             "activation offload: give one"),
            (self.pp > 1, "needs pp=1 (Megatron-core: no pipeline parallelism with CPU "
             "offloading)"),
            (self.recompute != "none", "needs recompute=none (Megatron-core: CPU offloading "
             "does not work with activation recomputation)"),
        ]  # fmt: skip
        for broken, rule in rules:
            if broken:
                raise ConfigError("parallel.offload_layers", rule, n)

    @property
    def offload_activations(self) -> float:
        """The share of saved activations offloaded between schedule ops (0: none; layer
        offload, :attr:`offload_layers`, is not counted here)."""
        if self.offload != "activations" or self.offload_layers is not None:
            return 0.0
        return self.offload_fraction

    @property
    def offload_optimizer(self) -> float:
        """The share of the rank's optimizer state kept and stepped on the host (0: none)."""
        return self.offload_fraction if self.offload == "optimizer" else 0.0

    @property
    def offload_weights(self) -> bool:
        """FSDP's parameter shards (with their gradients and optimizer state) in host memory."""
        return self.offload == "weights"

    def _check_moe(self) -> None:
        """The expert all-to-alls' SM budget: a whole number, with expert parallelism."""
        units = self.ep_comm_units
        if units is None:
            return
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ConfigError(
                "parallel.ep_comm_units", "must be a whole number of at least 1", units
            )
        if self.ep == 1:
            raise ConfigError(
                "parallel.ep_comm_units",
                "is the expert all-to-alls' SM budget: give it with ep > 1",
                units,
            )

    def _check_split(self) -> None:
        """The uneven-stage fields' own rules (the layer counts are checked against a model
        by :meth:`layer_split`)."""
        for name in ("first_stage_layers", "last_stage_layers"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"parallel.{name}", "must be a whole number >= 0", value)
            if self.pp == 1:
                raise ConfigError(f"parallel.{name}", "uneven pipeline stages need pp > 1", value)
            if self.account_embedding or self.account_loss:
                raise ConfigError(
                    f"parallel.{name}",
                    "explicit first/last stage layers do not combine with account_embedding or "
                    "account_loss (Megatron-core refuses them together)",
                    value,
                )

    def _check_recompute_modules(self) -> None:
        modules = self.recompute_modules
        if modules is None:
            return
        if not isinstance(modules, tuple) or not all(isinstance(n, str) for n in modules):
            raise ConfigError(
                "parallel.recompute_modules", "must be a tuple of module names", modules
            )
        parse_modules(SEPARATOR.join(modules), "parallel.recompute_modules")
        if self.recompute != "selective":
            raise ConfigError(
                "parallel.recompute_modules",
                "needs recompute=selective (Megatron-core ignores --recompute-modules without "
                "--recompute-granularity selective)",
                SEPARATOR.join(modules),
            )

    @property
    def uneven(self) -> bool:
        """The first or the last stage has its own layer count."""
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    def layer_split(self, layers: int) -> tuple[int, ...]:
        """Transformer layers of each virtual stage, in model order (``c pp + s`` for chunk
        ``c`` of stage ``s``), as Megatron-core builds them (module docstring); ConfigError
        naming the field when they do not divide."""
        p, v = self.pp, self.vpp
        if self.uneven:
            return self._uneven_split(layers)
        counted = layers + int(self.account_embedding) + int(self.account_loss)
        if counted % (p * v):
            what = "layers"
            if counted != layers:
                what = "layers (with the embedding and the loss counted as layers)"
            raise ConfigError(
                "parallel",
                f"pp x vpp = {p * v} must divide the {counted} {what} of the model",
                self.describe(),
            )
        split = [counted // (p * v)] * (p * v)
        split[0] -= int(self.account_embedding)
        split[-1] -= int(self.account_loss)
        return tuple(split)

    def _uneven_split(self, layers: int) -> tuple[int, ...]:
        p, v = self.pp, self.vpp
        first, last = self.first_stage_layers, self.last_stage_layers
        given = (first or 0) + (last or 0)
        middle_stages = p - (first is not None) - (last is not None)
        middle = layers - given
        if middle < 0 or (middle_stages == 0 and middle):
            raise ConfigError(
                "parallel",
                f"the first and last stage layers ({given}) must "
                + ("not exceed" if middle_stages else "add up to")
                + f" the {layers} layers of the model",
                self.describe(),
            )
        if middle_stages and middle % middle_stages:
            raise ConfigError(
                "parallel",
                f"the {middle} layers left must divide over the {middle_stages} middle stages",
                self.describe(),
            )
        per = middle // middle_stages if middle_stages else 0
        stages = [per] * p
        if first is not None:
            stages[0] = first
        if last is not None:
            stages[-1] = last
        for s, n in enumerate(stages):
            if n % v:
                raise ConfigError(
                    "parallel.vpp",
                    f"must divide the {n} layers of pipeline stage {s}",
                    v,
                )
        return tuple(stages[vs % p] // v for vs in range(p * v))

    @property
    def model_parallel(self) -> int:
        return self.tp * self.cp * self.pp

    def data_parallel(self, npus: int) -> int:
        """DP for ``npus`` NPUs (ConfigError when the sizes do not multiply to ``npus``)."""
        mp = self.model_parallel
        if npus % mp:
            raise ConfigError(
                "parallel",
                f"tp x cp x pp = {mp} does not divide the {npus} NPUs",
                self.describe(),
            )
        dp = npus // mp
        if self.dp is not None and self.dp != dp:
            raise ConfigError(
                "parallel.dp",
                f"tp x cp x pp x dp must be the {npus} NPUs; with tp x cp x pp = {mp}, dp is {dp}",
                self.dp,
            )
        if (dp * self.cp) % self.ep:
            raise ConfigError(
                "parallel.ep",
                f"must divide dp x cp = {dp * self.cp} (expert-parallel groups are carved out of "
                "the data-parallel ranks, as Megatron-core's are)",
                self.ep,
            )
        return dp

    def micro_batches(self, dp: int) -> int:
        """Micro-batches per pipeline per iteration: global batch / (micro batch x DP)."""
        per = self.micro_batch * dp
        if self.global_batch % per:
            raise ConfigError(
                "parallel.global_batch",
                f"must be a multiple of micro_batch x dp = {self.micro_batch} x {dp} = {per}",
                self.global_batch,
            )
        return self.global_batch // per

    def check_model(self, model: TransformerConfig) -> None:
        """The divisibility rules Megatron-LM checks for this model (ConfigError naming the
        field)."""
        if model.heads % self.tp:
            raise ConfigError(
                "parallel.tp",
                f"must divide the {model.heads} attention heads of {model.name}",
                self.tp,
            )
        if model.groups % self.tp:
            raise ConfigError(
                "parallel.tp",
                f"must divide the {model.groups} key/value heads of {model.name} (Megatron "
                "splits query groups over TP)",
                self.tp,
            )
        check_modules(self.recompute_modules, model)
        if self.shared_expert_overlap and "shared_experts" in (self.recompute_modules or ()):
            raise ConfigError(
                "parallel.recompute_modules",
                "shared_experts recompute does not combine with shared_expert_overlap=1 "
                "(Megatron-core refuses them together)",
                "shared_experts",
            )
        try:
            self.layer_split(model.layers)
        except ConfigError as err:
            raise ConfigError(err.field, f"{err.rule} ({model.name})", err.value) from None
        if model.mla and self.cp > 1:
            raise ConfigError(
                "parallel.cp",
                f"context parallelism with {model.name}'s multi-head latent attention is not "
                "modelled",
                self.cp,
            )
        if self.ep > 1 and not model.experts:
            raise ConfigError(
                "parallel.ep",
                f"expert parallelism needs an MoE model; {model.name} is dense",
                self.ep,
            )
        if model.experts % self.ep:
            raise ConfigError(
                "parallel.ep", f"must divide the {model.experts} experts of {model.name}", self.ep
            )
        if self.sp and self.seq % self.tp:
            raise ConfigError(
                "parallel.seq", f"must be a multiple of tp = {self.tp} with sp", self.seq
            )
        if self.offload_layers is not None and self.offload_layers >= model.layers:
            raise ConfigError(
                "parallel.offload_layers",
                f"must be fewer than the {model.layers} layers of {model.name} (Megatron-core "
                "keeps the last layer on the GPU)",
                self.offload_layers,
            )

    def describe(self) -> str:
        parts = [f"tp={self.tp}", f"pp={self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp={self.vpp}")
        parts += [f"cp={self.cp}", f"ep={self.ep}", f"dp={self.dp or 'auto'}"]
        parts.append(f"sp={int(bool(self.sp))}")
        if self.tp_overlap:
            parts.append("tp_overlap=1")
        if self.grad_fp32 is not None:
            parts.append(f"grad_fp32={int(self.grad_fp32)}")
        parts += [f"zero={self.zero}", f"recompute={self.recompute}"]
        if self.recompute_modules is not None:
            parts.append(f"recompute_modules={SEPARATOR.join(self.recompute_modules)}")
        if self.recompute_layers is not None:
            parts.append(f"recompute_layers={self.recompute_layers}")
        for name in ("first_stage_layers", "last_stage_layers"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        for name in ("account_embedding", "account_loss"):
            if getattr(self, name):
                parts.append(f"{name}=1")
        if self.schedule is not None:
            parts.append(f"schedule={self.schedule}")
        if self.ep_comm_units is not None:
            parts.append(f"ep_comm_units={self.ep_comm_units}")
        if self.shared_expert_overlap:
            parts.append("shared_expert_overlap=1")
        if self.cuda_graphs:
            parts.append("cuda_graphs=1")
        if self.offload is not None:
            parts.append(f"offload={self.offload}")
            if self.offload_layers is not None:
                parts.append(f"offload_layers={self.offload_layers}")
            elif self.offload != "weights":
                parts.append(f"offload_fraction={self.offload_fraction:g}")
        return ",".join(parts)


def parse_parallel(
    text: str, *, global_batch: int, micro_batch: int, seq: int, field: str = "parallel"
) -> ParallelConfig:
    """``tp=4,pp=8,vpp=5`` (module docstring) -> a :class:`ParallelConfig` (ConfigError naming
    ``field`` for text that is not key=value pairs, ``parallel.<size>`` for a bad size)."""
    values: dict[str, object] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip().lower()
        raw = raw.strip().lower()
        if not sep or key not in _KEYS:
            raise ConfigError(field, f"expected key=value with keys {', '.join(_KEYS)}", item)
        if key in values:
            raise ConfigError(field, f"{key} is given twice", text)
        if key in ("recompute", "order", "schedule", "offload"):
            values[key] = raw
        elif key == "offload_fraction":
            values[key] = _fraction(raw, field)
        elif key == "recompute_modules":
            values[key] = parse_modules(raw, field)
        elif key in _BOOL_KEYS:
            if raw not in ("0", "1", "true", "false", "on", "off"):
                raise ConfigError(field, f"{key} must be 0 or 1", raw)
            values[key] = raw in ("1", "true", "on")
        elif key == "dp" and raw == "auto":
            values[key] = None
        else:
            try:
                values[key] = strict_int(raw)  # ASCII digits: not "٨", not "4_0"
            except ValueError:
                raise ConfigError(field, f"{key} must be a whole number", raw) from None
    return ParallelConfig(
        global_batch=global_batch,
        micro_batch=micro_batch,
        seq=seq,
        **values,  # type: ignore[arg-type]
    )


def _fraction(raw: str, field: str) -> float:
    """``offload_fraction``'s text as a finite number (ConfigError naming ``field``)."""
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or not raw.replace(".", "", 1).isdigit():
        raise ConfigError(field, "offload_fraction must be a number like 0.5", raw)
    return value


def flat_group(shape: tuple[int, ...], size: int, stride: int, name: str) -> Group:
    """The group of ``size`` ranks ``stride`` apart in the flat rank order of a network of
    dimension sizes ``shape`` (innermost first) as spans; TopologyError when it is not a product
    of per-dimension slices."""
    spans: list[Span] = []
    remaining, step = size, stride
    for dim, extent in enumerate(shape):
        if remaining == 1:
            break
        if step >= extent:
            if step % extent:
                raise TopologyError(
                    f"{name} group: members {stride} ranks apart do not align with dimension "
                    f"{dim} of {extent} NPUs"
                )
            step //= extent
            continue
        if extent % step:
            raise TopologyError(
                f"{name} group: a stride of {step} does not divide dimension {dim} of {extent}"
            )
        along = min(remaining, extent // step)
        if remaining % along or (along < extent // step and remaining > along):
            raise TopologyError(
                f"{name} group of {size} does not tile dimension {dim} of {extent} NPUs"
            )
        if extent % (along * step):
            raise TopologyError(
                f"{name} group: {along} members {step} apart do not tile dimension {dim} of "
                f"{extent} NPUs"
            )
        spans.append(Span(dim, along, step))
        remaining //= along
        step = 1
    if remaining != 1:
        raise TopologyError(f"{name} group of {size} does not fit the network {shape}")
    return Group(tuple(spans), name)


@dataclass(frozen=True)
class Placement:
    """Where each parallel coordinate lives: sizes, strides in the flat rank order, and the
    communicator groups (None where the group is one rank)."""

    tp: int
    pp: int
    dp: int
    cp: int
    shape: tuple[int, ...]
    tp_group: Group | None
    dp_group: Group | None
    ep: int = 1
    cp_group: Group | None = None
    ep_group: Group | None = None
    expert_dp_group: Group | None = None
    #: rank distance between consecutive pipeline stages (None: tp x cp x dp, stages outermost)
    pp_stride: int | None = None

    @property
    def grad_ranks(self) -> int:
        """Ranks a gradient is reduced over (and the distributed optimizer shards over):
        DP x CP, as Megatron's data-parallel-with-context group."""
        return self.dp * self.cp

    @property
    def expert_dp(self) -> int:
        """Ranks that hold the same experts (expert data parallelism): dp x cp / ep."""
        return self.dp * self.cp // self.ep

    @property
    def npus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def stage_stride(self) -> int:
        """Rank distance between consecutive pipeline stages."""
        return self.tp * self.cp * self.dp if self.pp_stride is None else self.pp_stride

    @property
    def stages_outermost(self) -> bool:
        """Each pipeline stage is one contiguous block of ranks (the default order)."""
        return self.stage_stride * self.pp == self.npus

    def stage(self, rank: int) -> int:
        return (rank // self.stage_stride) % self.pp

    def peer_stage(self, rank: int, stage: int) -> int:
        """The rank with ``rank``'s TP/CP/DP coordinates on pipeline stage ``stage``."""
        return rank + (stage - self.stage(rank)) * self.stage_stride


def placement(parallel: ParallelConfig, shape: tuple[int, ...]) -> Placement:
    """The placement of ``parallel`` on a network of dimension sizes ``shape`` (module
    docstring)."""
    npus = 1
    for extent in shape:
        npus *= extent
    dp = parallel.data_parallel(npus)
    tp_group = flat_group(shape, parallel.tp, 1, "tp") if parallel.tp > 1 else None
    grad = dp * parallel.cp
    inner = parallel.tp * parallel.cp
    stages_inside = parallel.order == ORDERS[1]  # tp-cp-ep-pp-dp: cp == 1 (checked)
    # the rank distance between consecutive DP ranks, and between consecutive stages
    dp_stride = inner * parallel.pp if stages_inside else inner
    pp_stride = inner if stages_inside else None
    first_dp = dp_stride if stages_inside else parallel.tp  # cp and dp are one block otherwise
    dp_group = flat_group(shape, grad, first_dp, "dp") if grad > 1 else None
    cp_group = flat_group(shape, parallel.cp, parallel.tp, "cp") if parallel.cp > 1 else None
    ep = parallel.ep
    # EP: ep consecutive ranks of the CP x DP block (stride first_dp), cp == 1 or not
    ep_group = flat_group(shape, ep, first_dp, "ep") if ep > 1 else None
    edp = dp * parallel.cp // ep
    if ep == 1:
        edp_group = dp_group  # experts are reduced with the rest
    else:
        edp_group = flat_group(shape, edp, first_dp * ep, "expert-dp") if edp > 1 else None
    return Placement(
        parallel.tp,
        parallel.pp,
        dp,
        parallel.cp,
        tuple(shape),
        tp_group,
        dp_group,
        ep,
        cp_group,
        ep_group,
        edp_group,
        pp_stride,
    )
