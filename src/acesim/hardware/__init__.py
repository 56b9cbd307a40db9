"""Endpoint hardware: NPUs (compute units, HBM) and collective endpoints (baseline, ACE, ideal)."""

from .endpoints import AceEndpoint, BaselineEndpoint, IdealEndpoint, make_endpoint
from .npu import NPU, effective_units
from .platform import Platform

__all__ = [
    "NPU",
    "effective_units",
    "BaselineEndpoint",
    "AceEndpoint",
    "IdealEndpoint",
    "make_endpoint",
    "Platform",
]
