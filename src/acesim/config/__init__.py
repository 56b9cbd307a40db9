"""Configuration documents (pydantic models) and shipped presets."""

from .endpoint import ENDPOINT_SETTINGS, EndpointConfig
from .presets import DEFAULT_PRESET, assumptions, load_system, preset_names, system_from_dict
from .system import (
    CollectiveConfig,
    DimensionConfig,
    NetworkConfig,
    NPUConfig,
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
]
