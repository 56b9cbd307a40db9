"""What an oversubscribed leaf/spine fabric adds to the tuner's prediction of a step.

On a leaf/spine dimension (``Dimension.spine``: ``leaf_size`` coordinates under each leaf switch,
``oversubscription`` > 1) a message between leaves also takes its source leaf's uplinks and its
destination leaf's downlinks, each ``leaf_size x egress / oversubscription`` (B/s) shared by the
leaf's NPUs (the runtime charges them: :mod:`acesim.network.collective`, exact mode). The tuner
(:func:`acesim.network.plan.choose_algorithm`) predicts each step at the NPU's egress; here the
step's bytes are stretched by :func:`spine_factor`, the busiest leaf link's time over the egress
time, where it is above 1.

Model and assumptions: every group of the collective's shape on the dimension runs the step at
once (as the groups of a training step do; a lone group's leaves carry less), every member sends
the same bytes, and a step lasts as long as its most loaded link (a ring's next step waits for
its slowest message). Which groups there are follows from the axis (``size`` members at a
coordinate ``stride``): the groups tile the dimension, so each coordinate's own group is known.
A ring (``next``) crosses each leaf boundary with one flow per line, so it loads the spine only
when ``oversubscription`` exceeds ``leaf_size``; a direct step (``all``) sends the share of its
bytes bound for other leaves through them.
"""

from __future__ import annotations

from functools import lru_cache

from .step import Step
from .topology import Dimension

__all__ = ["spine_factor"]


def _members_in(base: int, stride: int, size: int, low: int, high: int) -> int:
    """How many of ``base + q x stride`` (q = 0 .. size-1) lie in ``[low, high)``."""
    first = max(0, -(-(low - base) // stride))
    last = min(size - 1, (high - 1 - base) // stride)
    return max(0, last - first + 1)


@lru_cache(maxsize=4096)
def spine_factor(d: Dimension, size: int, stride: int, step: Step) -> float:
    """How much longer than at the NPU's egress a step of a group of ``size`` members at
    coordinate ``stride`` along ``d`` takes through ``d``'s leaf up- and downlinks (module):
    ``max(1, busiest leaf link's bytes / its bandwidth over one NPU's bytes / egress)``; 1 where
    ``d`` has no oversubscribed spine or the group stays within one leaf."""
    leaf = d.leaf_size
    if not d.spine or leaf is None or size < 2:
        return 1.0
    count = step.message_count(size)
    if count == 0 or step.message_bytes <= 0:
        return 1.0
    leaves = -(-d.size // leaf)
    up = [0] * leaves  # messages leaving each leaf (all lines alike: one line is counted)
    down = [0] * leaves
    for c in range(d.size):
        position = (c // stride) % size
        base = c - position * stride
        own = d.leaf(c)
        if step.pattern == "all":
            inside = _members_in(base, stride, size, own * leaf, (own + 1) * leaf)
            out = size - inside
            up[own] += out
            # every group runs the step: what a leaf sends out, the other leaves' members
            # send in, in the same amount (the direct pattern is symmetric)
            down[own] += out
            continue
        for q in step.destinations(position, size):
            to = d.leaf(base + q * stride)
            if to != own:
                up[own] += 1
                down[to] += 1
    busiest = max(max(up), max(down))
    if busiest == 0:
        return 1.0
    # busiest x bytes / (leaf x egress / oversubscription) over count x bytes / egress
    return max(1.0, busiest * d.oversubscription / (leaf * count))
