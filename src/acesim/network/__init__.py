"""Multi-dimensional networks, communicator groups, per-dimension collective algorithms,
collective operations and chunk scheduling."""

from .algorithms import ALGORITHMS, Algorithm, phase_steps
from .endpoint import Endpoint
from .group import Group, Span
from .ops import COLLECTIVE_OPS, CollectiveOp
from .step import Step
from .topology import Dimension, Topology

__all__ = [
    "Topology",
    "Dimension",
    "Step",
    "phase_steps",
    "ALGORITHMS",
    "Algorithm",
    "COLLECTIVE_OPS",
    "CollectiveOp",
    "Endpoint",
    "Group",
    "Span",
]
