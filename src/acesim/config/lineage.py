"""Each NPU preset's lineage: its maker and its die, with the public document that says so.

One table (:data:`LINEAGE`) for every rule that asks whether two NPUs are kin: the transfer
rules of fitted parameters (:mod:`acesim.validation.transfer`: same die, same vendor) and the
copy-engine endpoint's refusal of its NVIDIA-derived defaults on another vendor's NPU
(:mod:`acesim.hardware.endpoints.copy_engine`). A test checks every NPU preset has an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LINEAGE", "Lineage"]


@dataclass(frozen=True)
class Lineage:
    """The maker and the die of an NPU preset (what the rules compare), and the source."""

    vendor: str
    die: str
    source: str


#: Every NPU preset's lineage (a test checks each preset has one).
LINEAGE: dict[str, Lineage] = {
    "v100-sxm2": Lineage("nvidia", "GV100", "NVIDIA Tesla V100 GPU architecture whitepaper"),
    "a100-sxm": Lineage("nvidia", "GA100", "NVIDIA A100 Tensor Core GPU architecture whitepaper"),
    "h100-sxm": Lineage("nvidia", "GH100", "NVIDIA H100 Tensor Core GPU architecture whitepaper"),
    "h200-sxm": Lineage(
        "nvidia",
        "GH100",
        "NVIDIA H200 datasheet: the H100's Hopper GPU with 141 GB of HBM3e (same SMs, peaks, "
        "NVLink4)",
    ),
    "b200": Lineage(
        "nvidia",
        "GB100",
        "NVIDIA Blackwell architecture technical brief: B200 is two Blackwell dies in one "
        "package; the GPU of a GB200 superchip is the same package (HGX B200 at 1,000 W, GB200 "
        "at 1,200 W)",
    ),
    "gb200": Lineage(
        "nvidia",
        "GB100",
        "NVIDIA Blackwell architecture technical brief: each GB200 superchip carries two B200 "
        "GPUs (two Blackwell dies each) beside a Grace CPU",
    ),
    "mi300x": Lineage(
        "amd", "MI300X", "AMD CDNA 3 instruction set / MI300X datasheet: eight CDNA 3 XCDs"
    ),
}
