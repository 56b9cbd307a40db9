"""Power coefficients: an NPU's ``[npu.power]`` table and a network dimension's ``power`` table.

They are the inputs of the energy model (:mod:`acesim.hardware.power`, which states the model);
every value is a physical quantity (``700 W``, ``3.9 pJ/bit``, ``0.33 pJ/FLOP``) whose source,
or the reason it is assumed, goes in the document's ``[sources]`` under its dotted path
(``npu.power.hbm_energy``). A system without ``[npu.power]`` has no energy model: its results
carry no energy figures and say so.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from .errors import FieldRuleError
from .strict import Strict
from .validators import (
    NonNegativeJoulesPerByte,
    NonNegativeJoulesPerFlop,
    NonNegativeWatts,
    PositiveWatts,
    dtype_table,
    show_number,
)

__all__ = ["NPUPowerConfig", "LinkPowerConfig", "check_link_power", "check_npu_power"]


class NPUPowerConfig(Strict):
    """One NPU's power: its limit, its idle power and the energy of what it does."""

    tdp: PositiveWatts = Field(
        description="the board's power limit from its datasheet (TDP, maximum board power), W"
    )
    idle: NonNegativeWatts = Field(
        description="board power with nothing running (clocks up, memory refreshed, links "
        "trained), W; paid for the whole run"
    )
    unit_active: NonNegativeWatts = Field(
        description="power of one compute unit while it runs a kernel (a compute kernel, or a "
        "collective kernel holding it), above idle and before any FLOP or byte: clock tree, "
        "schedulers, register files, W"
    )
    matrix_flop_energy: dict[str, NonNegativeJoulesPerFlop] = Field(
        description="energy per matrix (tensor-core) FLOP by math dtype, operand delivery "
        "included, J/FLOP; must list every dtype of npu.matrix_flops"
    )
    vector_flop_energy: NonNegativeJoulesPerFlop = Field(
        description="energy per FP32 FLOP on the non-matrix units (element-wise kernels, "
        "collective kernels' reductions), J/FLOP"
    )
    hbm_energy: NonNegativeJoulesPerByte = Field(
        description="energy per HBM byte read or written (DRAM core, I/O and the NPU's memory "
        "PHY), J/B"
    )
    copy_engine_energy: NonNegativeJoulesPerByte = Field(
        description="energy per byte a DMA copy engine moves, its own logic and buffers (the "
        "HBM and link bytes of a copy are counted as such), J/B"
    )
    host_link_energy: NonNegativeJoulesPerByte = Field(
        description="energy per byte over the host link (PCIe or NVLink-C2C), the NPU's end, J/B"
    )
    ace_sram_energy: NonNegativeJoulesPerByte = Field(
        description="ACE endpoint: energy per byte written to or read from its SRAM, J/B"
    )
    ace_alu_energy: NonNegativeJoulesPerByte = Field(
        description="ACE endpoint: energy per byte its ALUs reduce (the adds; their operands "
        "are SRAM bytes), J/B"
    )
    ace_static: NonNegativeWatts = Field(
        description="ACE endpoint: the engine's leakage and control while the NPU is on (an "
        "NPU without ACE does not pay it), W"
    )

    _dtypes = field_validator("matrix_flop_energy")(dtype_table("energy"))

    @model_validator(mode="after")
    def _idle_below_limit(self) -> NPUPowerConfig:
        if self.idle >= self.tdp:
            raise FieldRuleError(
                "idle",
                f"must be below tdp ({show_number(self.tdp, 'W')})",
                self.idle,
            )
        return self


class LinkPowerConfig(Strict):
    """A network dimension's power: its links' PHYs, and its switches or NICs."""

    link_energy: NonNegativeJoulesPerByte = Field(
        description="energy per byte over one link of this dimension, both ends' PHYs "
        "(SerDes) included: half is the sender's port's, half the receiver's, J/B"
    )
    switch_static: NonNegativeWatts | None = Field(
        None,
        description="switch dimensions: the switches' power with no traffic, per NPU attached "
        "(their idle power over the NPUs they serve), W",
    )
    switch_energy: NonNegativeJoulesPerByte | None = Field(
        None,
        description="switch dimensions: energy per byte through a switch's core (buffers, "
        "crossbar, in-switch reduction; its ports' PHYs are link_energy), J/B",
    )
    nic_static: NonNegativeWatts | None = Field(
        None,
        description="a dimension whose links are NICs (scale-out): one NIC's power with no "
        "traffic, W; each NPU pays links_per_npu / npus_per_link NICs; None: no NICs",
    )
    nic_energy: NonNegativeJoulesPerByte | None = Field(
        None,
        description="a dimension whose links are NICs: energy per byte through one NIC "
        "(packet processing, its host side), the sender's and the receiver's, J/B",
    )

    @model_validator(mode="after")
    def _pairs(self) -> LinkPowerConfig:
        for a, b in (("switch_static", "switch_energy"), ("nic_static", "nic_energy")):
            if (getattr(self, a) is None) != (getattr(self, b) is None):
                given, missing = (a, b) if getattr(self, b) is None else (b, a)
                raise FieldRuleError(missing, f"must be given with {given}")
        return self


def check_link_power(kind: str, power: LinkPowerConfig | None) -> None:
    """A switch dimension's power table gives its switches; another dimension has none."""
    if power is None:
        return
    if kind == "switch" and power.switch_static is None:
        raise FieldRuleError(
            "power.switch_static", "must be given for a switch dimension (with switch_energy)"
        )
    if kind != "switch" and power.switch_static is not None:
        raise FieldRuleError(
            "power.switch_static",
            f"applies only to a switch dimension, got kind {kind!r}",
            power.switch_static,
        )


def check_npu_power(power: NPUPowerConfig | None, matrix_dtypes: list[str]) -> None:
    """Every dtype the NPU has a matrix peak for has a FLOP energy."""
    if power is None:
        return
    missing = [d for d in matrix_dtypes if d not in power.matrix_flop_energy]
    if missing:
        raise FieldRuleError(
            "power.matrix_flop_energy",
            f"must list every dtype of matrix_flops; no energy for {', '.join(missing)}",
        )
