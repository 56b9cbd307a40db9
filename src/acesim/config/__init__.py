"""Configuration documents (pydantic models) and shipped presets."""

from .endpoint import ENDPOINT_SETTINGS, EndpointConfig
from .npus import NpuPreset, load_npu_preset, npu_preset_names
from .presets import DEFAULT_PRESET, assumptions, load_system, preset_names, system_from_dict
from .single import single_npu_system
from .system import (
    CollectiveConfig,
    DimensionConfig,
    NetworkConfig,
    NPUConfig,
    ScaleOutConfig,
    SystemConfig,
)

__all__ = [
    "DEFAULT_PRESET",
    "ENDPOINT_SETTINGS",
    "SystemConfig",
    "NPUConfig",
    "NetworkConfig",
    "DimensionConfig",
    "CollectiveConfig",
    "EndpointConfig",
    "load_system",
    "system_from_dict",
    "preset_names",
    "assumptions",
    "ScaleOutConfig",
    "NpuPreset",
    "npu_preset_names",
    "load_npu_preset",
    "single_npu_system",
]
