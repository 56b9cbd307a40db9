"""One NPU alone: the system :func:`single_npu_system` builds from an NPU preset (kernel
microbenchmarks, validation against single-GPU measurements)."""

from __future__ import annotations

from .npus import SINGLE_SUFFIX, extend_npu, single_npu_document
from .presets import system_from_dict
from .provenance import Provenance
from .system import SystemConfig

__all__ = ["single_npu_system"]


def single_npu_system(npu_preset_name: str) -> SystemConfig:
    """NPU preset ``npu_preset_name`` alone: system ``<name>-single``, one NPU on a network of
    one NPU (a dimension of size 1, which no collective sends a byte over), default collective
    settings and endpoint. ConfigError for an unknown preset (with a did-you-mean)."""
    doc = extend_npu(single_npu_document(npu_preset_name))
    name = npu_preset_name + SINGLE_SUFFIX
    provenance = Provenance(origin=name, npu=npu_preset_name)
    return system_from_dict(doc, origin=name).with_provenance(provenance)
