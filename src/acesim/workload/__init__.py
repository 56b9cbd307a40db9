"""Workloads: the per-layer model, the model zoo and importers (ASTRA-sim 1.0 text, Chakra)."""

from .model import Comm, Compute, Layer, Pass, Workload

__all__ = ["Workload", "Layer", "Pass", "Compute", "Comm"]
