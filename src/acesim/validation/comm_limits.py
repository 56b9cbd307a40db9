"""The HBM a collective library's kernel channel can draw, per NPU family, from the library's
source (the rule the system presets' ``endpoint.baseline.unit_hbm_bandwidth`` follow).

One channel of an NCCL or RCCL ring, reduce-scatter or all-gather kernel is one thread block
(CTA / workgroup). Its Simple-protocol copy and reduce loop (``reduceCopyPacks`` in
``src/device/common_kernel.h``) has each thread load ``unroll`` packs of 16 bytes from a source
before it uses any, so a channel keeps at most ``threads x unroll x 16`` bytes of loads in
flight. By Little's law it then draws at most that many bytes per loaded HBM latency:

    channel HBM bandwidth = threads x unroll x pack bytes / loaded latency

The loop issues those loads from *every* source of a hunk before it reduces any (``acc[u]``
from the first, ``tmp[u]`` from each further one), stores the result, then loads the next
hunk: a reduce step (two sources) keeps twice a copy step's bytes in flight, and either covers
one hunk of payload per loaded latency. So the figure bounds the *payload* a channel's loop
covers (a ring step's network bytes), not the HBM bytes the step moves: the model charges it
with ``acesim.hardware.endpoints.sm_kernels.LOOP_BYTES_PER_BYTE`` (1 per network byte for a
reduce-scatter or all-gather step), never with the peer's or the NIC's writes, the kernel's
stores or a second source's loads (docs/validation.md, *What the per-channel limit bounds*).

:data:`KERNELS` states the first three per library and NPU family, each from the library's
source; :data:`LOADED_HBM_LATENCY` is an assumption (not measured for any of these NPUs, the
same for all). A system preset whose collectives run on that library sets
``endpoint.baseline.unit_hbm_bandwidth`` to :func:`channel_hbm_bandwidth` of its NPU (a test
checks), never a figure copied from another NPU.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "KERNELS",
    "LOADED_HBM_LATENCY",
    "NPU_KERNELS",
    "CollectiveKernel",
    "channel_hbm_bandwidth",
]

#: Loaded HBM latency of a streaming load, s: an assumption (about 600 ns under load on HBM2e
#: to HBM3e GPUs; no measurement of it is in the corpus), the same the NPU presets' Little's-law
#: figure for compute kernels (``npu.kernels.unit_hbm_bandwidth``) uses.
LOADED_HBM_LATENCY = 600e-9


@dataclass(frozen=True)
class CollectiveKernel:
    """A library's collective kernel on one NPU family: threads per channel, the unroll of its
    copy/reduce loop and the bytes of one load, with where each comes from."""

    library: str
    threads: int
    unroll: int
    pack_bytes: int
    source: str

    @property
    def in_flight(self) -> int:
        """Bytes of loads one channel keeps in flight."""
        return self.threads * self.unroll * self.pack_bytes


#: Per library and NPU family (the name the presets' notes cite).
KERNELS: dict[str, CollectiveKernel] = {
    "nccl-sm70": CollectiveKernel(
        "NCCL",
        512,
        4,
        16,
        "NCCL src/include/device.h: NCCL_SIMPLE_MAX_NTHREADS 512, ncclCollUnroll() 4 below "
        "sm80; src/device/common_kernel.h: 16-byte packs (BytePack<16>)",
    ),
    "nccl-sm80": CollectiveKernel(
        "NCCL",
        512,
        8,
        16,
        "NCCL src/include/device.h (2.18 to 2.27): NCCL_SIMPLE_MAX_NTHREADS 512, "
        "ncclCollUnroll() 8 for sm80 and later (Ampere, Hopper, datacenter Blackwell); "
        "src/device/common_kernel.h: 16-byte packs (BytePack<16>)",
    ),
    "rccl-gfx942": CollectiveKernel(
        "RCCL",
        256,
        2,
        16,
        "RCCL src/include/device.h: NCCL_MAX_NTHREADS 256 (= NCCL_SIMPLE_MAX_NTHREADS); "
        "src/enqueue.cc getUnrollFactor: unroll 2 on gfx94x with more than 80 CUs; "
        "src/device/common_kernel.h: 16-byte packs (a copy step doubles the unroll, a reduce "
        "step does not: the reduce step is taken)",
    ),
}

#: NPU preset -> its collective kernel (the library its systems run and its family).
NPU_KERNELS: dict[str, str] = {
    "v100-sxm2": "nccl-sm70",
    "a100-sxm": "nccl-sm80",
    "h100-sxm": "nccl-sm80",
    "h200-sxm": "nccl-sm80",
    "b200": "nccl-sm80",
    "gb200": "nccl-sm80",
    "mi300x": "rccl-gfx942",
}


def channel_hbm_bandwidth(npu_preset: str) -> float:
    """B/s of HBM one collective channel of ``npu_preset``'s library can draw (see the
    module); KeyError for an NPU preset without a stated kernel."""
    kernel = KERNELS[NPU_KERNELS[npu_preset]]
    return kernel.in_flight / LOADED_HBM_LATENCY
