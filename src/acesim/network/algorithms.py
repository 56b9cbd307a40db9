"""Per-dimension collective algorithms as sequences of steps.

Size conventions (nccl-tests'): ``D`` is, per NPU, the whole buffer of an all-reduce, the *input*
of a reduce-scatter (output ``D/p``), the *output* of an all-gather (input ``D/p``) and the send
buffer of an all-to-all. A step sends, from every NPU of the dimension group, ``len(dests)``
messages of ``message_bytes`` each and completes at an NPU when its own sends are out and the
same number of messages has arrived from its peers.

Steps per algorithm (p NPUs in the dimension):

* ring: reduce-scatter and all-gather take ``p-1`` steps of ``D/p`` to the next NPU; all-reduce
  is reduce-scatter then all-gather, ``2(p-1)`` steps. All-to-all on a ring forwards: step ``k``
  (1..p-1) carries the ``(p-k) D/p`` bytes not yet delivered, so ``D(p-1)/2`` bytes cross each
  NPU's link while each NPU originates ``D(p-1)/p``.
* direct (fully connected or switch): one step of ``p-1`` messages of ``D/p``; all-reduce is a
  direct reduce-scatter then a direct all-gather.
* halving_doubling (p a power of two): reduce-scatter in ``log2 p`` steps of ``D/2, D/4, ...``
  with the partner at XOR distance ``p/2, p/4, ...``; all-gather the reverse; all-reduce both.
* double_binary_tree (all-reduce only): NCCL's two complementary trees, each carrying half of
  the data. Modelled by its per-level cost: ``2 ceil(log2 p)`` levels (reduce up, broadcast
  down) that together send what NCCL's busiest rank sends (:func:`acesim.network.trees.
  tree_sends`: ``u D`` up and ``d D`` down, ``D`` in all on two NPUs, ``2 D`` from four),
  spread evenly over the levels of each direction. One chunk then takes
  ``2 ceil(log2 p) a + (u + d) D / B``; pipelining comes from chunking. Over a node axis and
  a network axis the tuner runs NCCL's whole TREE instead, pipelined
  (:mod:`acesim.network.pipelined`).
* nvls (all-reduce only, switch dimensions): NVIDIA NVLink SHARP, in-switch reduction. Each NPU
  reduce-scatters through the switch (``multimem.ld_reduce``: the switch reads every NPU's copy
  of one ``D/p`` slice, reduces it and returns the sum) and all-gathers through it
  (``multimem.st``: one write of the reduced slice is multicast to all ``p``). Per NPU the link
  carries, in each direction, ``D`` (every slice of its copy goes up to be reduced; every
  reduced slice comes down) plus ``D/p`` (its own reduced slice back down, then up to be
  multicast): ``D(p+1)/p`` each way against the ring's ``2D(p-1)/p``. The two directions
  overlap (NCCL pipelines the load-reduce of one piece with the multicast store of the
  previous), and only the sender's egress is modelled, so it is two steps on egress: an
  ``nvls_reduce`` step of ``p-1`` messages of ``D/(p-1)`` (``D`` up) and an ``nvls_gather``
  step of ``p-1`` messages of ``D/(p(p-1))`` (``D/p`` up). Their egress time is the
  overlapped time; the second step's downstream ``D`` is the first's upstream ``D`` mirrored.
  The reduction happens in the switch: endpoints charge no reduction, and memory traffic is one
  read and one write of the buffer (endpoint accounting by the two step kinds).
* flat_ring (all-reduce, reduce-scatter, all-gather; whole groups of two or more dimensions,
  offered to the tuner only): NCCL's ring through all ``n`` members of a group, its steps the
  ring's over ``n``, each step's bytes split over the dimensions it crosses
  (:func:`acesim.network.plan.flat_ring_lanes`). Per dimension it is refused (it is not one).
* collnet (all-reduce only, network dimensions whose switches reduce): NCCL's CollNet with
  the SHARP plugin, in-network reduction on the scale-out switches. Each NPU sends its whole
  ``D`` into the switch fabric once and receives the reduced ``D`` once (the aggregation tree
  of the switches reduces; nothing is sliced among the NPUs, unlike NVLS's heads): one step of
  ``p-1`` messages of ``D/(p-1)`` (``D`` out and ``D`` in at every NPU; the switch ports are
  the NPUs' links), of kind ``gather`` for the endpoints (HBM and units as a copy: the NPU
  reduces nothing). It runs on network dimensions only (:mod:`acesim.network.plan`); its
  messages take no leaf/spine links and no incast loss (the switches' aggregation tree sends
  one reduced stream per leaf, not one per NPU pair).
* nvls_tree (all-reduce only; a node's reducing switch plus a network dimension, offered to
  the tuner only): NCCL's NVLS_TREE, NVLS in the node and a double binary tree between nodes
  (:func:`acesim.network.plan.nvls_tree_phases`). Per dimension it is refused.
* ring, broadcast and reduce (:func:`chain_steps`): NCCL's ring algorithm for rooted operations
  is a pipelined chain (NCCL ``broadcast.h``/``reduce.h``: the root sends, every other member
  receives and forwards, the last one only receives; a reduce's chain starts after the root
  and ends at it, each member adding its own data before forwarding). The buffer ``D`` goes in
  ``k = ceil(D / piece)`` pieces (``collective.chain_piece_bytes``: NCCL's Simple chunk of one
  step per channel, 512 KiB, times the channels), and the chain takes ``k + p - 2`` steps: in
  step ``t`` chain position ``i`` sends piece ``t - i`` to position ``i + 1`` and receives
  piece ``t - i + 1`` from ``i - 1`` (where those pieces exist). A position waits only for
  the piece it forwards, so the root streams its pieces back to back and, on free links, the
  chain takes ``(k + p - 2) (D/k) / B + (p - 1) a`` (``a`` the per-message delay: one per
  hop, as NCCL's tuner counts its ring latency). The steps differ by position (``chain``
  pattern): not symmetric, exact mode only; the vectorized exact path declines them.
* p2p (sendrecv only): nccl-tests' ``sendrecv_perf`` shift, one step in which every NPU sends
  ``D`` to the next NPU and receives ``D`` from the previous one (NCCL's point-to-point path,
  not its tuner's algorithms): symmetric.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import TopologyError
from ..registry import Registry
from .repeats import Repeats
from .step import Step
from .trees import tree_sends

#: Step kinds, used by endpoints for their memory accounting.
REDUCE = "reduce"
GATHER = "gather"
ALLTOALL = "alltoall"
#: Step patterns whose work differs by position in the group (rooted chains): symmetric mode
#: cannot represent them (see :mod:`acesim.network.ops`).
ROOTED_PATTERNS = frozenset({"chain"})
#: NVLS steps (in-switch reduction): the load-reduce upload and the multicast-store upload.
NVLS_REDUCE = "nvls_reduce"
NVLS_GATHER = "nvls_gather"
#: The step kinds of in-switch (NVLS) collectives: they run at ``collective.nvls_efficiency``
#: with ``collective.nvls_delay`` per step instead of the SM protocol's settings.
NVLS_KINDS = frozenset({NVLS_REDUCE, NVLS_GATHER})


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


#: The operations a phase runs on one dimension (what algorithms implement).
PHASE_OPS = ("reduce-scatter", "all-gather", "all-reduce", "all-to-all")
#: Rooted phase operations (NCCL's ring runs them as a pipelined chain: :func:`chain_steps`).
CHAIN_OPS = ("broadcast", "reduce")
#: NCCL's Simple-protocol chunk of a broadcast or reduce on one channel, bytes: one step of
#: its buffer (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8; BROADCAST_CHUNKSTEPS = REDUCE_CHUNKSTEPS = 1).
NCCL_CHAIN_CHUNK_BYTES = 512 * 1024


@dataclass(frozen=True)
class Algorithm:
    """A per-dimension collective algorithm.

    Attributes:
        name: the name users write in ``collective.algorithms``.
        summary: one line for help texts and docs tables.
        steps: ``steps(phase_op, p, data_bytes)`` -> the steps of ``phase_op`` on ``p`` NPUs
            with per-NPU buffer ``data_bytes`` (see the module docstring).
        problem: ``problem(phase_op, dimension_kind, p, switch_reduction)`` -> why it cannot
            run there, or None (``switch_reduction``: the dimension's switch can reduce).
        phase_ops: the phase operations it implements.
        piece_steps: for pipelined phases, ``piece_steps(phase_op, p, data_bytes,
            piece_bytes)`` -> the steps with pieces of at most ``piece_bytes``
            (``collective.chain_piece_bytes``); None: ``steps`` only.
        lockstep: exact mode's lockstep backend (:mod:`acesim.network.vectorized`) computes
            its phases (where their step patterns are the backend's); False (the default for
            a new algorithm): its collectives run on the event path, and results say so.
    """

    name: str
    summary: str
    steps: Callable[[str, int, float], Sequence[Step]]
    problem: Callable[[str, str, int, bool], str | None]
    phase_ops: tuple[str, ...] = PHASE_OPS
    piece_steps: Callable[[str, int, float, float], Sequence[Step]] | None = None
    lockstep: bool = False


#: Per-dimension algorithms, by name (register new ones with ``ALGORITHMS.register``).
ALGORITHMS: Registry[Algorithm] = Registry("algorithm", "collective.algorithms", listed=True)


def _ring_steps(op: str, p: int, data_bytes: float) -> Sequence[Step]:
    # kept as runs of repeats (one Step and its count): p - 1 alike steps cost one entry
    piece = data_bytes / p
    if op == "reduce-scatter":
        return Repeats([(Step(piece, "next", 0, REDUCE), p - 1)])
    if op == "all-gather":
        return Repeats([(Step(piece, "next", 0, GATHER), p - 1)])
    if op == "all-reduce":
        return Repeats(
            [(Step(piece, "next", 0, REDUCE), p - 1), (Step(piece, "next", 0, GATHER), p - 1)]
        )
    return [Step((p - k) * piece, "next", 0, ALLTOALL) for k in range(1, p)]


#: Most pieces a chain may split its data into: each piece is a step of the plan (a list of
#: ``pieces + p - 2`` steps), so a piece size near zero would plan without end; 2**20 is the
#: bound the runtime puts on an endpoint's chunks too (``network.collective.MAX_CHUNKS``).
MAX_CHAIN_PIECES = 1 << 20


def chain_pieces(data_bytes: float, piece_bytes: float) -> int:
    """The pieces of a chain of ``data_bytes`` in pieces of at most ``piece_bytes`` (bytes);
    TopologyError for a piece of no bytes or more than :data:`MAX_CHAIN_PIECES` pieces."""
    if not piece_bytes > 0:
        raise TopologyError(f"a chain's piece must be > 0 bytes, got {piece_bytes}")
    if not data_bytes / piece_bytes <= MAX_CHAIN_PIECES:
        raise TopologyError(
            f"collective.chain_piece_bytes {piece_bytes:g} splits a chain of {data_bytes:g} "
            f"bytes into more than {MAX_CHAIN_PIECES} pieces (MAX_CHAIN_PIECES); give pieces "
            f"of at least {data_bytes / MAX_CHAIN_PIECES:g} bytes"
        )
    return max(1, math.ceil(data_bytes / piece_bytes))


def chain_steps(op: str, p: int, data_bytes: float, piece_bytes: float) -> list[Step]:
    """A pipelined ring chain (module docstring) of ``op`` (broadcast or reduce) on ``p`` NPUs,
    root at coordinate 0: ``data_bytes`` in ``k = ceil(data / piece_bytes)`` pieces of
    ``data/k``, ``k + p - 2`` steps. A broadcast's chain starts at the root; a reduce's at the
    member after it and ends at it."""
    pieces = chain_pieces(data_bytes, piece_bytes)
    kind, start = (GATHER, 0) if op == "broadcast" else (REDUCE, 1 % p)
    piece = data_bytes / pieces
    return [Step(piece, "chain", t, kind, root=start, pieces=pieces) for t in range(pieces + p - 2)]


#: Pieces of a chain where no ``collective.chain_piece_bytes`` is given: NCCL's chunk on 16
#: channels (the default of ``collective.chain_piece_bytes``).
DEFAULT_CHAIN_PIECE_BYTES = 16 * NCCL_CHAIN_CHUNK_BYTES


def _ring_piece_steps(op: str, p: int, data_bytes: float, piece_bytes: float) -> Sequence[Step]:
    if op in CHAIN_OPS:
        return chain_steps(op, p, data_bytes, piece_bytes)
    return _ring_steps(op, p, data_bytes)


def _ring_family_steps(op: str, p: int, data_bytes: float) -> Sequence[Step]:
    return _ring_piece_steps(op, p, data_bytes, DEFAULT_CHAIN_PIECE_BYTES)


def _shift_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    # sendrecv: D to the next NPU, D from the previous one (a copy: all-to-all accounting)
    return [Step(data_bytes, "next", 0, ALLTOALL)]


def _direct_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    piece = data_bytes / p
    if op == "reduce-scatter":
        return [Step(piece, "all", 0, REDUCE)]
    if op == "all-gather":
        return [Step(piece, "all", 0, GATHER)]
    if op == "all-reduce":
        return [Step(piece, "all", 0, REDUCE), Step(piece, "all", 0, GATHER)]
    return [Step(piece, "all", 0, ALLTOALL)]


def _halving_doubling_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    piece = data_bytes / p
    levels = int(math.log2(p))
    rs = [Step(data_bytes / 2 ** (k + 1), "xor", p >> (k + 1), REDUCE) for k in range(levels)]
    ag = [Step(piece * 2**k, "xor", 1 << k, GATHER) for k in range(levels)]
    if op == "reduce-scatter":
        return rs
    if op == "all-gather":
        return ag
    if op == "all-reduce":
        return rs + ag
    # Bruck-style exchange: each level ships half of the buffer to the XOR partner.
    return [Step(data_bytes / 2, "xor", 1 << k, ALLTOALL) for k in range(levels)]


def _tree_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    levels = max(1, math.ceil(math.log2(p)))
    pattern = "xor" if _is_pow2(p) else "next"
    sent_up, sent_down = tree_sends(p)  # NCCL's busiest rank's bytes, per byte
    up = [
        Step(
            data_bytes * sent_up / levels,
            pattern,
            1 << (k % max(1, int(math.log2(p)))) if pattern == "xor" else 0,
            REDUCE,
        )
        for k in range(levels)
    ]
    down = [
        Step(data_bytes * sent_down / levels, pattern, s.distance, GATHER) for s in reversed(up)
    ]
    return up + down


def _nvls_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    # all-reduce only (phase_ops): D up for the load-reduce, D/p up for the multicast store
    return [
        Step(data_bytes / (p - 1), "all", 0, NVLS_REDUCE),
        Step(data_bytes / (p * (p - 1)), "all", 0, NVLS_GATHER),
    ]


def _innet_steps(op: str, p: int, data_bytes: float) -> list[Step]:
    # all-reduce only (phase_ops): D into the switches, the reduced D back
    return [Step(data_bytes / (p - 1), "all", 0, GATHER)]


def _needs_a_reducing_switch(where: str, which: str) -> Callable[[str, str, int, bool], str | None]:
    """The requirement of an algorithm that reduces in the switch: a switch dimension (its
    problem says ``where`` the reduction happens) whose switches reduce (``which`` says
    which switches and how to turn their reduction on)."""

    def problem(op: str, kind: str, size: int, switch_reduction: bool) -> str | None:
        if kind != "switch":
            return f"needs a switch dimension ({where}), got a {kind}"
        if not switch_reduction:
            return f"needs {which}"
        return None

    return problem


_on_a_reducing_network = _needs_a_reducing_switch(
    "the network's switches reduce",
    "a scale-out network whose switches reduce (switch_reduction = true on [scale_out] or "
    "the network dimension: InfiniBand SHARP; off on every preset, a deployment choice)",
)
_on_a_switch = _needs_a_reducing_switch(
    "the reduction happens in the switch",
    "a switch that reduces (switch_reduction = true on the dimension: NVSwitch with NVLink "
    "SHARP, from the third generation, H100 on)",
)


def _anywhere(op: str, kind: str, size: int, switch_reduction: bool) -> str | None:
    return None


def _needs_direct_links(name: str) -> Callable[[str, str, int, bool], str | None]:
    def problem(op: str, kind: str, size: int, switch_reduction: bool) -> str | None:
        if name == "halving_doubling" and not _is_pow2(size):
            return f"needs a power-of-two size, got {size}"
        if kind == "ring" and size > (3 if name == "direct" else 2):
            return f"needs a fully_connected or switch dimension, got a ring of {size}"
        return None

    return problem


ALGORITHMS.register(
    "ring",
    Algorithm(
        "ring",
        "p-1 steps of D/p to the next NPU per phase; broadcast/reduce: a pipelined chain",
        _ring_family_steps,
        _anywhere,
        phase_ops=PHASE_OPS + CHAIN_OPS,
        piece_steps=_ring_piece_steps,
        lockstep=True,
    ),
)
ALGORITHMS.register(
    "direct",
    Algorithm(
        "direct",
        "one step of p-1 messages of D/p",
        _direct_steps,
        _needs_direct_links("direct"),
        lockstep=True,
    ),
)
ALGORITHMS.register(
    "halving_doubling",
    Algorithm(
        "halving_doubling",
        "log2 p steps with the partner at XOR distance p/2, p/4, ...",
        _halving_doubling_steps,
        _needs_direct_links("halving_doubling"),
        lockstep=True,
    ),
)
ALGORITHMS.register(
    "double_binary_tree",
    Algorithm(
        "double_binary_tree",
        "NCCL's two complementary trees, 2 ceil(log2 p) levels (all-reduce only)",
        _tree_steps,
        _anywhere,
        phase_ops=("all-reduce",),
        lockstep=True,
    ),
)

ALGORITHMS.register(
    "nvls",
    Algorithm(
        "nvls",
        "NVLink SHARP: reduction and multicast in the switch, D(p+1)/p each way (all-reduce, "
        "switch dimensions only)",
        _nvls_steps,
        _on_a_switch,
        phase_ops=("all-reduce",),
    ),
)


def _whole_group(op: str, kind: str, size: int, switch_reduction: bool) -> str | None:
    return (
        "runs over every dimension of a group at once (NCCL's flat ring across nodes): offer "
        "it in collective.choices or force it (collective.algorithm, --algo), not per dimension"
    )


ALGORITHMS.register(
    "flat_ring",
    Algorithm(
        "flat_ring",
        "NCCL's flat ring through every member of a multi-dimension group (NVLink in the node, "
        "the GPU's NIC between nodes), pipelined; tuner choice only",
        _ring_steps,
        _whole_group,
        phase_ops=("reduce-scatter", "all-gather", "all-reduce"),
    ),
)


ALGORITHMS.register(
    "collnet",
    Algorithm(
        "collnet",
        "NCCL CollNet (SHARP): the network's switches reduce, D out and D in per NPU "
        "(all-reduce, network dimensions whose switches reduce)",
        _innet_steps,
        _on_a_reducing_network,
        phase_ops=("all-reduce",),
        lockstep=True,
    ),
)


def _node_and_network(op: str, kind: str, size: int, switch_reduction: bool) -> str | None:
    return (
        "runs NVLS in a node's switch and a tree between nodes at once (NCCL's NVLS_TREE): "
        "offer it in collective.choices or force it (collective.algorithm, --algo), not per "
        "dimension"
    )


ALGORITHMS.register(
    "nvls_tree",
    Algorithm(
        "nvls_tree",
        "NCCL's NVLS_TREE: NVLS in the node's switch, a double binary tree between nodes "
        "over each GPU's NIC (all-reduce over nodes; tuner choice only)",
        _nvls_steps,
        _node_and_network,
        phase_ops=("all-reduce",),
    ),
)


ALGORITHMS.register(
    "p2p",
    Algorithm(
        "p2p",
        "sendrecv: one step, D to the next NPU and D from the previous (point to point)",
        _shift_steps,
        _anywhere,
        phase_ops=("sendrecv",),
        lockstep=True,
    ),
)


#: NCCL_ALGO's names (NCCL src/init.cc ``ncclAlgoStr``, matched case-insensitively as NCCL does)
#: for the algorithms that model them; NCCL's ``Ring`` is ``ring`` in a node and ``flat_ring``
#: across nodes, and ``CollNetChain`` and ``PAT`` are not modelled, so none is an alias.
NCCL_ALGO_NAMES: dict[str, str] = {
    "tree": "double_binary_tree",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "collnetdirect": "collnet",
}


def algorithm_name(name: str, where: str) -> str:
    """The registered algorithm ``name`` is, or that NCCL's name ``name`` (as NCCL_ALGO takes
    it: ``NVLSTree``, ``CollNetDirect``, ``Tree``) stands for; ConfigError naming ``where``."""
    if name in ALGORITHMS:
        return name
    nccl = NCCL_ALGO_NAMES.get(name.lower()) if isinstance(name, str) else None
    return nccl if nccl is not None else ALGORITHMS.check(name, where)


def check_algorithm(
    algorithm: str, op: str, kind: str, size: int, where: str, switch_reduction: bool = False
) -> None:
    """Raise :class:`~acesim.errors.ConfigError` for an unknown algorithm and
    :class:`TopologyError` if ``algorithm`` cannot run ``op`` on this dimension (of ``kind``,
    ``size`` NPUs; ``switch_reduction``: its switch can reduce)."""
    algo = ALGORITHMS.get(algorithm, where)
    if op not in algo.phase_ops:
        raise TopologyError(
            f"{where}: algorithm {algorithm!r} runs only {', '.join(algo.phase_ops)}, not {op}"
        )
    problem = algo.problem(op, kind, size, switch_reduction)
    if problem:
        raise TopologyError(f"{where}: algorithm {algorithm!r} {problem}")


def phase_steps(
    op: str, algorithm: str, size: int, data_bytes: float, piece_bytes: float | None = None
) -> Repeats[Step]:
    """The steps of ``op`` on ``size`` NPUs with per-NPU buffer ``data_bytes`` (see module),
    as runs of repeats; ``piece_bytes``: a pipelined algorithm's pieces (None: its default)."""
    if size <= 1:
        return Repeats()
    algo = ALGORITHMS.get(algorithm)
    if op not in algo.phase_ops:
        raise TopologyError(f"algorithm {algorithm!r} cannot run {op}")
    if piece_bytes is not None and algo.piece_steps is not None:
        return Repeats.of(algo.piece_steps(op, size, data_bytes, piece_bytes))
    return Repeats.of(algo.steps(op, size, data_bytes))


def check_phase_steps(
    op: str, algorithm: str, size: int, data_bytes: float, piece_bytes: float | None = None
) -> None:
    """Raise what :func:`phase_steps` would raise for these arguments, without building the
    steps (an elaboration check: a chain's steps are as many as its pieces plus members)."""
    if size <= 1:
        return
    algo = ALGORITHMS.get(algorithm)
    if op not in algo.phase_ops:
        raise TopologyError(f"algorithm {algorithm!r} cannot run {op}")
    if piece_bytes is not None and algo.piece_steps is not None and op in CHAIN_OPS:
        chain_pieces(data_bytes, piece_bytes)
