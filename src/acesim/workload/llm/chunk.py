"""A model chunk's work for one micro-batch, as the steps each pipeline op kind runs.

A pass is a sequence of :class:`Step`: compute (kernels run one after another) or one
collective. A backward step's kernels are marked one by one as input-gradient or
weight-gradient work (``Step.weight``), where the builder makes them
(:mod:`acesim.workload.llm.block`): the weight-gradient GEMMs, the transposes that only feed
them, the embedding's scatter-add into its gradient. From that marking a :class:`ChunkWork`
carries the steps of the three op kinds of a pipeline schedule
(:mod:`acesim.training.schedules`):

* ``forward`` (F);
* ``backward``: the input and weight gradients together, in the order the framework runs them
  (a schedule without a separate W op runs this as its B);
* ``input_grad`` (B of a schedule with a separate W: the backward without its weight-gradient
  kernels; a collective issued beside a step that held weight-gradient work only has nothing
  left to overlap and blocks, so the dependency it carried stays) and ``weight_grad`` (W: the
  weight-gradient kernels, in backward order, as one step). The TP collectives stay in B:
  the operands a weight gradient reads (an all-gathered input, the output gradient) are kept
  from B until W runs (``weight_saved``), as zero-bubble implementations keep them (Qi et
  al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2 and table 1).

Activation lifetimes (:mod:`acesim.workload.llm.memory`): F allocates ``saved`` bytes; a B
with no W after it frees them; a B with a W after it frees them but keeps ``weight_saved``
(the weight gradients' operands), which its W frees.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ...hardware.kernels import Gemm, Kernel
from ..model import Comm

__all__ = ["Step", "ChunkWork", "Pass", "Weight", "split_backward"]

Overlap = Literal["", "next", "prev"]


@dataclass(frozen=True)
class Step:
    """One node of a chunk's pass: compute kernels, or one collective ``comm`` of ``kind``.

    A collective with ``overlap`` runs beside a compute step instead of before the next one:
    ``next``: issued with the following compute step (which does not wait for it); ``prev``:
    issued with the preceding one; the step after the pair waits for both. ``sealed`` compute
    steps are never merged with their neighbours (the GEMM a collective overlaps).
    ``weight``: per kernel, whether it is weight-gradient work (``()``: none is). ``sync``:
    the host waits for the GPU to finish everything issued before this collective before it
    issues it (Megatron-core's all-to-all MoE dispatcher, :mod:`acesim.training.host`)."""

    kernels: tuple[Kernel, ...] = ()
    comm: Comm | None = None
    kind: str = ""
    overlap: Overlap = ""
    sealed: bool = False
    weight: tuple[bool, ...] = ()
    sync: bool = False

    def flags(self) -> tuple[bool, ...]:
        """Per kernel: weight-gradient work."""
        return self.weight or (False,) * len(self.kernels)


@dataclass(frozen=True)
class Weight:
    """A weight-gradient kernel in a backward pass and the activation bytes it reads that
    were made before it (kept alive until it runs when it is deferred); ``keeps`` None: a
    GEMM's two operands."""

    kernel: Kernel
    keeps: float | None = None

    @property
    def kept(self) -> float:
        if self.keeps is not None:
            return self.keeps
        return self.kernel.read_bytes if isinstance(self.kernel, Gemm) else 0.0


Work = Kernel | Weight


@dataclass
class Pass:
    """A pass under construction: steps, merged where nothing separates them, and the bytes
    its weight-gradient kernels keep (``kept``)."""

    steps: list[Step] = field(default_factory=list)
    kept: float = 0.0

    def _marked(self, items: tuple[Work, ...]) -> tuple[tuple[Kernel, ...], tuple[bool, ...]]:
        kernels: list[Kernel] = []
        flags: list[bool] = []
        for item in items:
            if isinstance(item, Weight):
                kernels.append(item.kernel)
                flags.append(True)
                self.kept += item.kept
            else:
                kernels.append(item)
                flags.append(False)
        return tuple(kernels), tuple(flags) if any(flags) else ()

    def compute(self, *items: Work) -> None:
        kernels, flags = self._marked(items)
        self._merge(kernels, flags)

    def _merge(self, kernels: tuple[Kernel, ...], flags: tuple[bool, ...]) -> None:
        last = self.steps[-1] if self.steps else None
        if last is not None and last.comm is None and not last.sealed:
            merged = last.flags() + (flags or (False,) * len(kernels))
            self.steps[-1] = Step(last.kernels + kernels, weight=merged if any(merged) else ())
        else:
            self.steps.append(Step(kernels, weight=flags))

    def alone(self, item: Work) -> None:
        """One kernel as a sealed step of its own."""
        kernels, flags = self._marked((item,))
        self.steps.append(Step(kernels, sealed=True, weight=flags))

    def comm(
        self, comm: Comm | None, kind: str = "tp", overlap: Overlap = "", sync: bool = False
    ) -> None:
        if comm is not None:
            self.steps.append(Step(comm=comm, kind=kind, overlap=overlap, sync=sync))

    def seal(self) -> None:
        """Let nothing merge into the last step (a unit boundary)."""
        if self.steps and self.steps[-1].comm is None and not self.steps[-1].sealed:
            self.steps[-1] = replace(self.steps[-1], sealed=True)

    def extend(self, other: Pass) -> None:
        for step in other.steps:
            if step.comm is None and not step.sealed:
                self._merge(step.kernels, step.weight)
            else:
                self.steps.append(step)
        self.kept += other.kept


def split_backward(steps: tuple[Step, ...]) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """A backward's input-gradient steps and its weight-gradient steps (module docstring)."""
    inputs: list[Step] = []
    weights: list[Kernel] = []
    dropped = False  # the last compute step held weight-gradient work only
    for st in steps:
        if st.comm is not None:
            inputs.append(replace(st, overlap="") if st.overlap == "prev" and dropped else st)
            continue
        flags = st.flags()
        weights += [k for k, w in zip(st.kernels, flags, strict=True) if w]
        rest = tuple(k for k, w in zip(st.kernels, flags, strict=True) if not w)
        dropped = not rest
        if rest:
            inputs.append(Step(rest, sealed=st.sealed))
        elif inputs and inputs[-1].comm is not None and inputs[-1].overlap == "next":
            inputs[-1] = replace(inputs[-1], overlap="")
    return tuple(inputs), ((Step(tuple(weights)),) if weights else ())


@dataclass(frozen=True)
class ChunkWork:
    """A chunk's forward and backward for one micro-batch on one rank.

    Attributes:
        forward, backward: the steps (``backward``: input and weight gradients together).
        saved: activation bytes kept from the forward to the backward.
        params: parameters held by the rank for this chunk (experts' included).
        expert_params: of them, the experts' (their gradients reduce over the
            expert-data-parallel group).
        unit_params, forward_starts, backward_starts: with ``units``, the parameters of each
            FSDP unit (the embedding, each layer, the head; forward order) and the index of
            each unit's first step in the forward (forward order) and in the backward
            (backward order, the units reversed).
        boundary_bytes: bytes of the activation (or its gradient) sent to the neighbouring
            pipeline stage.
        weight_saved: bytes the weight-gradient kernels read that the backward made or kept
            (kept from B to a deferred W).
        layers, embedding, head: the transformer layers the chunk holds, and whether it holds
            the input embedding and the output head with the loss.
        unit_experts: with ``units``, the experts' parameters of each FSDP unit (sharded over
            the expert-data-parallel group).
        unit_saved: the activation bytes each unit (the embedding, each layer, the head;
            forward order) keeps for the backward (they sum to ``saved``); layer-granular
            activation offload sends layers' shares to host memory.
        input_grad, weight_grad: the backward's input-gradient steps (B) and weight-gradient
            steps (W), from the marking of ``backward`` (module docstring).
    """

    forward: tuple[Step, ...]
    backward: tuple[Step, ...]
    saved: float
    params: int
    boundary_bytes: float
    expert_params: int = 0
    unit_params: tuple[int, ...] = ()
    forward_starts: tuple[int, ...] = ()
    backward_starts: tuple[int, ...] = ()
    weight_saved: float = 0.0
    layers: int = 0
    unit_experts: tuple[int, ...] = ()
    embedding: bool = False
    head: bool = False
    unit_saved: tuple[float, ...] = ()
    input_grad: tuple[Step, ...] = field(init=False, repr=False, compare=False)
    weight_grad: tuple[Step, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        inputs, weights = split_backward(self.backward)
        object.__setattr__(self, "input_grad", inputs)
        object.__setattr__(self, "weight_grad", weights)
