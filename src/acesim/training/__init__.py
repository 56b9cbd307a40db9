"""Training loops as dependency graphs, and their execution on a platform."""

from ..workload.graph import Graph, Node

__all__ = ["Graph", "Node"]
