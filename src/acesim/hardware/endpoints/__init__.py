"""Collective endpoints: what the local part of a collective costs at an NPU.

One module per kind: ``baseline`` (NCCL-like kernels on compute units), ``ace`` (the offload
engine), ``ideal`` (no cost), ``copy_engine`` (DMA copy engines, zero SMs), ``nvls`` (in-switch
reduction). Each defines its
settings, its model and its ``KIND``; importing this package registers them (:mod:`.registry`),
in the order choices are shown.
"""

from . import ace, baseline, copy_engine, ideal, nvls
from .ace import AceEndpoint, AceSettings
from .baseline import BaselineEndpoint, BaselineSettings, BaselineSplit
from .copy_engine import CopyEngineEndpoint, CopyEngineSettings
from .ideal import IdealEndpoint, IdealSettings
from .nvls import NvlsEndpoint, NvlsSettings
from .registry import (
    ENDPOINT_KINDS,
    EndpointContext,
    EndpointKind,
    Variant,
    build_endpoint,
    reference_kind,
    register_endpoint,
    unregister_endpoint,
)

for _kind in (baseline.KIND, ace.KIND, ideal.KIND, copy_engine.KIND, nvls.KIND):
    if _kind.name not in ENDPOINT_KINDS:
        register_endpoint(_kind)

__all__ = [
    "ENDPOINT_KINDS",
    "EndpointContext",
    "EndpointKind",
    "Variant",
    "build_endpoint",
    "reference_kind",
    "register_endpoint",
    "unregister_endpoint",
    "AceEndpoint",
    "AceSettings",
    "BaselineEndpoint",
    "BaselineSettings",
    "BaselineSplit",
    "CopyEngineEndpoint",
    "CopyEngineSettings",
    "IdealEndpoint",
    "IdealSettings",
    "NvlsEndpoint",
    "NvlsSettings",
]
