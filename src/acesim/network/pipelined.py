"""All-reduce across nodes as NCCL pipelines it: TREE, NVLS_TREE, CollNet and NVLS with SHARP.

NCCL runs these algorithms as one kernel whose in-node part and between-node part work at the
same time on successive pieces of the buffer (``src/device/all_reduce.h``, NCCL 2.19.3:
``runTreeSplit`` gives half the threads to the reduction going up and half to the broadcast
coming down; NVLS_TREE's scatter, reduce, tree and broadcast warps hand each loop on through
flags; CollNet's and NVLS's likewise). A collective then takes as long as its busiest link
carries its bytes, plus the latency of the path a piece travels: NCCL's tuner
(``src/graph/tuning.cc``) predicts exactly that, ``latency + size / bandwidth`` with the
bandwidth of the bottleneck (``min(bwIntra, bwInter)`` for NVLS_TREE).

So each of them, on a group of one node axis (``G`` NPUs) and one network axis (``N`` nodes),
is one *pipelined* phase (:class:`~acesim.network.phase.Phase` with ``pipelined = True``): one
step whose bytes go out on every lane at once, each lane a share of the buffer ``S`` charged
as its own step kind, on its own dimension:

=============== ============================================== ==============================
algorithm        node lanes (NVLink), per NPU                    network lanes (NIC), per NPU
=============== ============================================== ==============================
TREE             chain reduce ``(G-1)/G``, broadcast ``(G-1)/G``  tree up ``u/G``, down ``d/G``
NVLS_TREE        NVLS load-reduce ``1``, multicast ``1/G``        tree up ``u/G``, down ``d/G``
CollNet Direct   direct scatter ``(G-1)/G``, gather ``(G-1)/G``   ``1/G`` into SHARP and back
NVLS + SHARP     NVLS load-reduce ``1``, multicast ``1/G``        ``1/G`` into SHARP and back
=============== ============================================== ==============================

``(u, d)``: the busiest node's bytes up and down NCCL's double binary tree per byte of its
slice (:func:`acesim.network.trees.tree_sends`: ``(0.5, 0.5)`` on two nodes, ``(1, 1)`` from
four); every GPU's NIC carries the tree of its own ``1/G`` slice (NVLS_TREE: each GPU is the
head of ``1/G`` of each loop; TREE: NCCL spreads its channels' chain heads over the GPUs'
NICs). TREE's chain moves ``2 (G-1)/G`` of the buffer over each GPU's NVLinks in all, as a
ring reduce-scatter and all-gather would.

Latency (:func:`path_latency`): NCCL 2.19.3's per-algorithm formula, with acesim's per-hop
link latency added to its per-hop protocol latencies (``intra``: the node dimension's link
latency plus the protocol's ``hop_latency``; ``inter``: the network's plus its
``net_hop_latency``):

* TREE: ``2 ((G-1) intra + log2i(N) inter)``;
* NVLS_TREE: ``intra + 2 log2i(N) inter``;
* CollNet Direct: ``2 (min(1, G-1) intra + 0.4 us (G-1)) + inter`` (NCCL's arity term);
* NVLS with SHARP: ``intra + inter``;

plus the protocol's ``base_latency`` and, for the NVLS variants, the NVLS loops
(:func:`acesim.network.plan.nvls_pipeline_latency`). Not modelled: the pipeline's fill and
drain by NCCL's chunk (a few chunk times), the chain of CollNet Chain (CollNet runs Direct).
"""

from __future__ import annotations

from collections.abc import Sequence

from .algorithms import GATHER, NVLS_GATHER, NVLS_REDUCE, REDUCE
from .group import Axis
from .phase import Lane, Phase
from .repeats import Repeats
from .step import Step
from .trees import tree_depth, tree_sends

__all__ = [
    "COLLNET",
    "NVLS",
    "NVLS_TREE",
    "PIPELINED",
    "TREE",
    "COLLNET_ARITY_LATENCY",
    "path_latency",
    "pipelined_phase",
]

#: NCCL's TREE (the tuner's ``double_binary_tree``): a chain in each node, a double binary
#: tree between nodes.
TREE = "double_binary_tree"
#: NCCL's NVLS_TREE: NVLS in the node, a double binary tree between nodes (all-reduce).
NVLS_TREE = "nvls_tree"
#: NCCL's CollNet with SHARP: the network's switches reduce.
COLLNET = "collnet"
#: NVLS (NVLink SHARP); across nodes NCCL runs it with CollNet/SHARP between them.
NVLS = "nvls"
#: The algorithms that run as one pipelined phase over a node axis and a network axis.
PIPELINED = (TREE, NVLS_TREE, COLLNET, NVLS)
#: NCCL 2.19.3's CollNet Direct arity serialisation, per extra GPU in the node, s
#: (``tuning.cc``: ``(nRanks/nNodes-1) * 0.4``).
COLLNET_ARITY_LATENCY = 0.4e-6


def _lanes(algorithm: str, node: Axis, net: Axis) -> tuple[Lane, ...]:
    g = node.size
    up, down = tree_sends(net.size)
    rest = (g - 1) / g
    inside: tuple[Lane, ...]
    across: tuple[Lane, ...]
    if algorithm in (NVLS_TREE, NVLS):
        inside = (
            Lane(node.dim, node.size, node.stride, 1.0, NVLS_REDUCE),
            Lane(node.dim, node.size, node.stride, 1.0 / g, NVLS_GATHER),
        )
    else:
        inside = (
            Lane(node.dim, node.size, node.stride, rest, REDUCE),
            Lane(node.dim, node.size, node.stride, rest, GATHER),
        )
    if algorithm in (TREE, NVLS_TREE):
        across = (
            Lane(net.dim, net.size, net.stride, up / g, REDUCE),
            Lane(net.dim, net.size, net.stride, down / g, GATHER),
        )
    else:  # SHARP: each GPU's slice into the switches once, the reduced slice back once
        across = (Lane(net.dim, net.size, net.stride, 1.0 / g, GATHER),)
    return tuple(lane for lane in inside + across if lane.fraction > 0)


def pipelined_phase(algorithm: str, size: float, node: Axis, net: Axis) -> Phase:
    """The one pipelined phase of an all-reduce of ``size`` bytes per NPU by ``algorithm``
    (one of :data:`PIPELINED`) over ``node`` (``G`` NPUs, ``G >= 2``) and ``net`` (``N >= 2``
    nodes): one step of ``size`` bytes, split over the lanes of the module's table."""
    step = Step(size, "next", 0, REDUCE)
    return Phase(
        node.dim,
        "all-reduce",
        algorithm,
        size,
        Repeats([(step, 1)]),
        node.size,
        node.stride,
        _lanes(algorithm, node, net),
        pipelined=True,
    )


def path_latency(algorithm: str, g: int, n: int, intra: float, inter: float) -> float:
    """The latency of the path a piece of the buffer travels (module), s: ``g`` NPUs per
    node, ``n`` nodes, ``intra`` and ``inter`` the per-hop delays (s) inside a node and
    between nodes."""
    levels = tree_depth(n)
    if algorithm == TREE:
        return 2 * ((g - 1) * intra + levels * inter)
    if algorithm == NVLS_TREE:
        return intra + 2 * levels * inter
    if algorithm == COLLNET:
        return 2 * (min(1, g - 1) * intra + (g - 1) * COLLNET_ARITY_LATENCY) + inter
    return intra + inter


def node_and_network(axes: Sequence[Axis], network: Sequence[bool]) -> tuple[Axis, Axis] | None:
    """The node axis and the network axis of a group (``network[i]``: axis ``i`` is on a
    network dimension), or None unless it has exactly one of each with two or more members."""
    real = [(a, net) for a, net in zip(axes, network, strict=True) if a.size > 1]
    inner = [a for a, net in real if not net]
    outer = [a for a, net in real if net]
    if len(inner) != 1 or len(outer) != 1:
        return None
    return inner[0], outer[0]
