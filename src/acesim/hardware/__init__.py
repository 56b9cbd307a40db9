"""Endpoint hardware: NPUs (compute units, HBM) and collective endpoints (registered kinds)."""

from .endpoints import (
    ENDPOINT_KINDS,
    AceEndpoint,
    BaselineEndpoint,
    EndpointKind,
    IdealEndpoint,
    register_endpoint,
)
from .npu import NPU, effective_units
from .platform import Platform, elaborate

__all__ = [
    "NPU",
    "effective_units",
    "ENDPOINT_KINDS",
    "EndpointKind",
    "register_endpoint",
    "BaselineEndpoint",
    "AceEndpoint",
    "IdealEndpoint",
    "Platform",
    "elaborate",
]
