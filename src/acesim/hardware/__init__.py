"""Endpoint hardware: NPUs (compute units, HBM) and collective endpoints (registered kinds)."""

from .endpoints import (
    ENDPOINT_KINDS,
    AceEndpoint,
    BaselineEndpoint,
    EndpointKind,
    IdealEndpoint,
    register_endpoint,
)
from .kernel_model import KernelPlan, plan_kernel
from .kernels import Attention, Fixed, Gemm, Kernel, Roofline, Stream
from .npu import NPU
from .platform import Platform, elaborate

__all__ = [
    "NPU",
    "Attention",
    "Fixed",
    "Gemm",
    "Kernel",
    "KernelPlan",
    "Roofline",
    "Stream",
    "plan_kernel",
    "ENDPOINT_KINDS",
    "EndpointKind",
    "register_endpoint",
    "BaselineEndpoint",
    "AceEndpoint",
    "IdealEndpoint",
    "Platform",
    "elaborate",
]
