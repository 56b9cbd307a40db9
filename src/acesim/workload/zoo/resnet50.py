"""ResNet-50 v1.5 on ImageNet (224x224 RGB), data parallel.

Architecture: He et al., "Deep Residual Learning for Image Recognition" (CVPR 2016), table 1,
50-layer column; "v1.5" as in torchvision and NVIDIA DeepLearningExamples
(PyTorch/Classification/ConvNets/resnet50v1.5): the stride-2 of a downsampling bottleneck is on
its 3x3 conv, not its first 1x1. Published figures the tests check: torchvision's
``ResNet50_Weights.IMAGENET1K_V1`` metadata, ``num_params`` 25,557,032 and ``_ops`` 4.089 (listed
as "GFLOPS" but counting multiply-adds: 4.089 GMAC per 224x224 image forward), the "about 4.1
GMAC" of the brief.

Layers: one per convolution and one for the classifier, 54 in all, named and ordered like the
ASTRA-sim 1.0 sample ``Resnet50_DataParallel.txt`` (``conv1``, ``layer_<planes>_<block>_conv<i>``
with ``conv4`` the projection shortcut listed first in its block, ``fc1000``), so the two can be
compared layer by layer. Folded into the layers (the choice the zoo brief allowed):

* each conv's batch-norm (+ ReLU; + the residual add for a block's last conv) is part of its
  layer: its gamma/beta are in the layer's parameters (and all-reduce), its traffic and FLOPs in
  the forward pass, its backward in the weight-gradient pass (which the training loop runs
  first, before the conv's own gradients; see :func:`.costs.batch_norm_relu`);
* the 3x3/2 max-pool after ``conv1`` is in ``conv1`` (forward; its backward in weight-gradient);
* global average pooling and the softmax cross-entropy loss are in ``fc1000``.

``conv1`` has no input-gradient pass: nothing needs the gradient of the image.

Defaults: 32 images per NPU (the per-GPU batch of Goyal et al., "Accurate, Large Minibatch SGD",
2017, and of many ImageNet recipes) and FP32 (4 bytes), as the ASTRA-sim 1.0 sample's gradient
sizes imply.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Workload
from .costs import (
    ADD_FLOPS,
    SOFTMAX_FLOPS,
    LayerCost,
    PassCost,
    batch_norm_relu,
    conv2d,
    gemm,
    pointwise,
    to_layer,
)

NAME = "resnet50"
DEFAULT_BATCH = 32
DEFAULT_DTYPE = 4
OPTIONS: dict[str, object] = {"image_size": 224, "classes": 1000}

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
"""(bottleneck width, blocks, stride of the first block) of conv2_x .. conv5_x."""
EXPANSION = 4
STEM_CHANNELS = 64
IMAGE_CHANNELS = 3


@dataclass(frozen=True)
class ConvSpec:
    """One convolution of the network: its layer name and shape (per image)."""

    name: str
    c_in: int
    c_out: int
    size: int  # input height = width
    kernel: int
    stride: int
    relu: bool = True
    residual: bool = False  # the block's last conv: BN, add shortcut, ReLU

    @property
    def out_size(self) -> int:
        return (self.size + 2 * (self.kernel // 2) - self.kernel) // self.stride + 1

    @property
    def macs(self) -> int:
        """Multiply-accumulates per image."""
        return self.out_size**2 * self.c_out * self.c_in * self.kernel**2


def conv_specs(image_size: int = 224) -> list[ConvSpec]:
    """The 53 convolutions in layer order."""
    specs = [ConvSpec("conv1", IMAGE_CHANNELS, STEM_CHANNELS, image_size, 7, 2)]
    size = -(-specs[0].out_size // 2)  # 3x3/2 max-pool with padding 1
    c_in = STEM_CHANNELS
    for planes, blocks, stride in STAGES:
        for b in range(1, blocks + 1):
            s = stride if b == 1 else 1
            prefix = f"layer_{planes}_{b}"
            if b == 1:
                specs.append(
                    ConvSpec(f"{prefix}_conv4", c_in, planes * EXPANSION, size, 1, s, relu=False)
                )
            specs.append(ConvSpec(f"{prefix}_conv1", c_in, planes, size, 1, 1))
            specs.append(ConvSpec(f"{prefix}_conv2", planes, planes, size, 3, s))
            out = specs[-1].out_size
            specs.append(
                ConvSpec(f"{prefix}_conv3", planes, planes * EXPANSION, out, 1, 1, residual=True)
            )
            size, c_in = out, planes * EXPANSION
    return specs


def build(batch: int, dtype_bytes: int, *, image_size: int = 224, classes: int = 1000) -> Workload:
    specs = conv_specs(image_size)
    layers = []
    for spec in specs:
        cost, out = conv2d(batch, spec.c_in, spec.c_out, spec.size, spec.kernel, spec.stride)
        n_out = batch * spec.c_out * out * out
        cost = cost + batch_norm_relu(n_out, spec.c_out, relu=spec.relu, residual=spec.residual)
        if spec.name == "conv1":
            pooled = batch * spec.c_out * (-(-out // 2)) ** 2
            # Max-pool 3x3/2: 9 compares per output; backward routes gradients to the argmax.
            cost = cost + LayerCost(
                forward=PassCost(9.0 * pooled, n_out + pooled),
                weight_grad=PassCost(pooled, pooled + n_out),
            )
            cost = cost.without_input_grad()
        layers.append(to_layer(spec.name, cost, dtype_bytes))

    last = specs[-1]
    features = last.c_out
    spatial = last.out_size**2
    pool = pointwise(
        batch * features * spatial,
        fwd_flops=ADD_FLOPS,
        bwd_flops=0,
        fwd_reads=1,
        fwd_writes=1 / spatial,
        bwd_reads=1 / spatial,
        bwd_writes=1,
    )
    loss = pointwise(
        batch * classes,
        fwd_flops=SOFTMAX_FLOPS,
        bwd_flops=ADD_FLOPS,
        fwd_reads=1,
        fwd_writes=1,
        bwd_reads=1,
        bwd_writes=1,
        bwd_in_weight_grad=True,
    )  # dlogits precede both of fc's gradients
    fc = pool + gemm(batch, classes, features) + loss
    layers.append(to_layer(f"fc{classes}", fc, dtype_bytes))
    return Workload(
        name=NAME,
        layers=tuple(layers),
        parallelism="data",
        description=f"ResNet-50 v1.5, ImageNet {image_size}x{image_size}, {batch} images/NPU",
        source="He et al. CVPR 2016 (table 1); torchvision/NVIDIA resnet50 v1.5",
        batch_per_npu=batch,
        dtype_bytes=dtype_bytes,
    )
