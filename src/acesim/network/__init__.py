"""Multi-dimensional networks, per-dimension collective algorithms and chunk scheduling."""

from .algorithms import Step, phase_steps
from .topology import Dimension, Topology

__all__ = ["Topology", "Dimension", "Step", "phase_steps"]
