"""The ``nvls`` endpoint kind: in-switch reduction (NVLink SHARP) as an offload substrate.

All-reduces run NVLS wherever the group spans a switch that reduces (``switch_reduction``): the
switch reads every NPU's copy and reduces it, the multicast writes the sum back, so the NPU
does no reduction FLOPs, moves each buffer byte through HBM once each way, and holds only the
NVLS kernel's ``nvls_units`` SMs (16 thread blocks on Hopper in NCCL). Everything else (the
other operations, and the all-reduce phases of dimensions whose switch does not reduce: a
scale-out fabric) runs as the SM kernels of the ``baseline`` kind, with its settings
(``[endpoint.baseline]``): this kind is the SM endpoint with NVLS as its all-reduce, not an
engine of its own, and has no settings table of its own to keep in step.

The switch's reduction bandwidth is NVLS's: ``collective.nvls_efficiency`` of the links (the
h100-nvswitch-8 preset's is fitted on nccl-tests rows, docs/validation.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from ...config.system import Strict, SystemConfig
from ...errors import ConfigError
from .baseline import BaselineEndpoint
from .registry import EndpointContext, EndpointKind

__all__ = ["NvlsEndpoint", "NvlsSettings"]


class NvlsSettings(Strict):
    """The nvls kind has no settings of its own: its SM kernels are ``[endpoint.baseline]``'s."""


def _check(settings: NvlsSettings, system: SystemConfig) -> None:
    # every kind's settings are checked with each document; this rule is the chosen kind's
    if system.endpoint.kind != "nvls":
        return
    _require_a_reducing_switch(system)


def _require_a_reducing_switch(system: SystemConfig) -> None:
    if not any(d.switch_reduction for d in system.network.dimensions):
        raise ConfigError(
            "endpoint.kind",
            "nvls needs a switch that reduces (a dimension with switch_reduction = true: "
            f"NVSwitch with NVLink SHARP, H100 on); {system.name} has none",
            "nvls",
        )


class NvlsEndpoint(BaselineEndpoint):
    """The SM endpoint with every all-reduce it can run in the switch (see module)."""

    name = "nvls"
    preferred_algorithms: Mapping[str, str] = MappingProxyType({"all-reduce": "nvls"})

    def __init__(self, ctx: EndpointContext):
        # also when the kind was set without validating the document (compare's variants)
        _require_a_reducing_switch(ctx.system)
        super().__init__(replace(ctx, settings=ctx.system.endpoint.settings("baseline")))


#: The kind, registered by :mod:`acesim.hardware.endpoints`.
KIND = EndpointKind(
    name="nvls",
    label="NVLS",
    summary="in-switch reduction (NVLink SHARP): all-reduces reduced by the switch on "
    "nvls_units SMs, one HBM read and write per byte; other collectives as SM kernels",
    settings=NvlsSettings,
    build=NvlsEndpoint,
    check=_check,
    offloads=frozenset({"all-reduce"}),
)
