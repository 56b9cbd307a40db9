"""How acesim's graph concepts map onto Chakra's: collective names and size conventions.

Sizes: acesim states collective sizes in nccl-tests' convention (bytes per NPU of the whole
buffer; for all-gather the gathered output). Chakra and ASTRA-sim 2.0 take ``comm_size`` as the
input buffer of each NPU: the same number for all-reduce, reduce-scatter and all-to-all, but for
all-gather each NPU's *contribution*, so ``acesim size = comm_size * group size`` where the group
is the NPUs spanned by the collective's dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from . import schema

#: Chakra CollectiveCommType value -> acesim collective name. Only names in
#: ``acesim.network.ops.COLLECTIVE_OPS`` are simulated; the rest are reported as unsupported.
COLL_NAMES: dict[int, str] = {
    schema.COMM_TYPES["ALL_REDUCE"]: "all-reduce",
    schema.COMM_TYPES["REDUCE"]: "reduce",
    schema.COMM_TYPES["ALL_GATHER"]: "all-gather",
    schema.COMM_TYPES["GATHER"]: "gather",
    schema.COMM_TYPES["SCATTER"]: "scatter",
    schema.COMM_TYPES["BROADCAST"]: "broadcast",
    schema.COMM_TYPES["ALL_TO_ALL"]: "all-to-all",
    schema.COMM_TYPES["REDUCE_SCATTER"]: "reduce-scatter",
    schema.COMM_TYPES["REDUCE_SCATTER_BLOCK"]: "reduce-scatter-block",
    schema.COMM_TYPES["BARRIER"]: "barrier",
}
COLL_TYPES: dict[str, int] = {name: value for value, name in COLL_NAMES.items()}
NODE_TYPE_NAMES: dict[int, str] = {value: name for name, value in schema.NODE_TYPES.items()}
COMM_TYPE_NAMES: dict[int, str] = {value: name for name, value in schema.COMM_TYPES.items()}


def group_size(
    dims: tuple[int, ...] | None, dim_sizes: Sequence[int] | None, npus: int
) -> int | None:
    """NPUs a collective over ``dims`` spans, or None when it cannot be known.

    ``dims`` None means every dimension, i.e. all ``npus`` (when ``dim_sizes`` is given its
    product wins). Explicit dimensions need ``dim_sizes``.
    """
    if dim_sizes is not None:
        chosen = range(len(dim_sizes)) if dims is None else dims
        if any(d < 0 or d >= len(dim_sizes) for d in chosen):
            return None
        return math.prod(dim_sizes[d] for d in chosen)
    if dims is None:
        return npus
    return None


def size_factor(op: str) -> bool:
    """True when acesim's size of ``op`` is comm_size times the group size."""
    return op == "all-gather"
