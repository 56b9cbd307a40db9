"""Workloads: the per-layer model, the model zoo, optimizer steps, the HBM footprint and
importers (ASTRA-sim 1.0 text, Chakra)."""

from .footprint import footprint
from .model import Comm, Compute, Layer, Pass, Workload
from .optimizer import OPTIMIZERS

__all__ = ["Workload", "Layer", "Pass", "Compute", "Comm", "footprint", "OPTIMIZERS"]
