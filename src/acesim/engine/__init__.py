"""Discrete-event kernel with a fluid allocator of shared resources.

The engine knows nothing of deep learning: it owns a clock, a heap of timed callbacks and a set
of *activities* (work that progresses at a rate) competing for *resources* (capacities per
second). See :mod:`acesim.engine.kernel` and :mod:`acesim.engine.fluid`.
"""

from .fluid import CAP, INF, Activity, Resource
from .kernel import BoundListener, Engine, EventHandle
from .pool import Pool

__all__ = ["Engine", "EventHandle", "Activity", "Resource", "Pool", "INF", "CAP", "BoundListener"]
