"""NCCL's double binary tree: who sends what, so a tree's bytes per NPU are NCCL's own.

NCCL (``src/graph/trees.cc``, the same from 2.4 to 2.2x) builds two binary trees over ``n``
ranks (nodes, for its inter-node trees). The first, ``btree``, is rooted at rank 0, whose one
child is the highest power of two below ``n``; every other rank's lowest set bit ``b`` gives
its parent ``(r ^ b) | (b << 1)`` (or ``r ^ b`` where that is out of range) and its children
``r - b/2`` and ``r + b/2`` (the latter pulled back into range by halving). The second tree
mirrors the first (``n - 1 - r``) when ``n`` is even and shifts it by one rank when ``n`` is
odd, so a rank that is interior in one tree is a leaf in the other.

An all-reduce of ``D`` bytes sends half of ``D`` down each tree (NCCL alternates channels
between them): reduce up (each rank sends its partial sum to its parent), broadcast down (each
rank sends the result to its children); NCCL's kernel runs the two directions at once
(``runTreeSplit``), so a rank's NIC carries, per direction, ``D/2`` per parent it has and
``D/2`` per child, summed over both trees. :func:`tree_sends` gives the busiest rank's: on two
ranks ``D`` (each rank is the other's parent in one tree), from four ranks on ``2 D`` (a rank
with two children in one tree, a leaf with a parent in the other), which is NCCL 2.19's
``bwInter / 2`` for trees and NVLS_TREE beyond two nodes.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["btree", "dtree", "tree_depth", "tree_sends"]


def btree(n: int, rank: int) -> tuple[int, tuple[int, ...]]:
    """NCCL's first tree over ``n`` ranks: (the parent of ``rank`` or -1, its children)."""
    if n < 1 or not 0 <= rank < n:
        raise ValueError(f"rank {rank} outside a tree of {n} ranks")
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ((bit >> 1,) if n > 1 else ())
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    low = bit >> 1
    if low == 0:
        return up, ()
    children = [rank - low]
    down = rank + low
    while down >= n and low > 0:
        low >>= 1
        down = rank + low
    if low > 0:
        children.append(down)
    return up, tuple(children)


def dtree(n: int, rank: int) -> tuple[tuple[int, tuple[int, ...]], tuple[int, tuple[int, ...]]]:
    """NCCL's two trees over ``n`` ranks, each as :func:`btree`'s (parent, children) of
    ``rank``: the first, and its mirror (``n`` even) or its shift by one rank (``n`` odd)."""
    first = btree(n, rank)
    if n % 2:
        up, kids = btree(n, (rank - 1) % n)
        second = (-1 if up == -1 else (up + 1) % n, tuple((k + 1) % n for k in kids))
    else:
        up, kids = btree(n, n - 1 - rank)
        second = (-1 if up == -1 else n - 1 - up, tuple(n - 1 - k for k in kids))
    return first, second


@lru_cache(maxsize=256)
def tree_sends(n: int) -> tuple[float, float]:
    """The busiest rank's bytes sent per byte of an all-reduce over NCCL's double binary tree
    of ``n`` ranks (module docstring): (reduce up, broadcast down), each a multiple of ``D``.
    The busiest rank is the one whose total is largest (ties: the lowest rank)."""
    if n < 2:
        return 0.0, 0.0
    best = (-1.0, 0.0, 0.0)
    for rank in range(n):
        up = down = 0.0
        for parent, children in dtree(n, rank):
            up += 0.5 if parent != -1 else 0.0
            down += 0.5 * len(children)
        if up + down > best[0]:
            best = (up + down, up, down)
    return best[1], best[2]


def tree_depth(n: int) -> int:
    """The levels NCCL's tuner counts for a tree over ``n`` ranks: ``log2i(n)``, the floor of
    ``log2 n`` (``src/graph/tuning.cc``: ``2 log2i(nNodes)`` network steps, up and down)."""
    return max(0, n.bit_length() - 1)
