"""Configuration documents (pydantic models) and shipped presets."""

from .presets import DEFAULT_PRESET, assumptions, load_system, preset_names, system_from_dict
from .system import (
    COLLECTIVE_OPS,
    CollectiveConfig,
    DimensionConfig,
    EndpointConfig,
    NetworkConfig,
    NPUConfig,
    SystemConfig,
)

__all__ = [
    "DEFAULT_PRESET",
    "COLLECTIVE_OPS",
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
