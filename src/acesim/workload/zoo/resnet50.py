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

* each conv's batch-norm, ReLU and, for a block's last conv, the residual add (torchvision's
  ``out = relu(bn3(conv3(out)) + identity)``) are part of its layer: their kernels follow the
  conv's (:mod:`.costs`: PyTorch eager, one kernel per operator), their gamma/beta are in the
  layer's parameters (and all-reduce); with the composition rule of :mod:`.costs` their
  backward, and the conv's weight gradient, are the layer's weight-gradient pass, the conv's
  data gradient its input-gradient pass;
* a tensor read by two operators (every block's output, and the stem's pooled output, feed the
  next block's first conv and its shortcut) gets its two gradients summed in backward
  (:func:`.costs.grad_sum`), first in its producer's backward;
* the 3x3/2 max-pool after ``conv1`` is in ``conv1``;
* global average pooling and the softmax cross-entropy loss (``nn.CrossEntropyLoss``,
  unfused) are in ``fc1000``.

``conv1`` has no input-gradient pass: nothing needs the gradient of the image.

Defaults: 32 images per NPU (the per-GPU batch of Goyal et al., "Accurate, Large Minibatch SGD",
2017, and of many ImageNet recipes), FP32 (``fp32``: 4-byte gradients, as the ASTRA-sim 1.0
sample's gradient sizes imply; NVIDIA's recipe also trains in ``amp_fp16``) and SGD with
momentum (Goyal et al.'s and NVIDIA's recipe).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...precision import Precision
from ..model import Workload
from .costs import (
    add,
    batch_norm,
    conv2d,
    conv_out,
    cross_entropy,
    global_avg_pool,
    grad_sum,
    linear,
    max_pool,
    relu,
    to_layer,
)

NAME = "resnet50"
DEFAULT_BATCH = 32
DEFAULT_PRECISION = "fp32"
DEFAULT_OPTIMIZER = "sgd_momentum"

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
        return conv_out(self.size, self.kernel, self.stride)

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


def build(
    batch: int,
    precision: Precision,
    optimizer: str,
    *,
    image_size: int = 224,
    classes: int = 1000,
) -> Workload:
    p = precision
    specs = conv_specs(image_size)
    last = specs[-1]
    layers = []
    for spec in specs:
        conv, out = conv2d(
            p,
            batch,
            spec.c_in,
            spec.c_out,
            spec.size,
            spec.kernel,
            spec.stride,
            save_input=spec.name == "conv1",
            name=f"{spec.name}",
        )
        n_out = batch * spec.c_out * out * out
        cost = conv + batch_norm(p, n_out, spec.c_out)
        if spec.residual:
            cost = cost + add(p, n_out)
        if spec.relu:
            cost = cost + relu(p, n_out)
        if spec.name == "conv1":
            pooled = batch * spec.c_out * (-(-out // 2)) ** 2
            cost = cost + max_pool(p, n_out, pooled) + grad_sum(p, pooled)
            cost = cost.without_input_grad()
        elif spec.residual and spec is not last:
            cost = cost + grad_sum(p, n_out)  # the block's output feeds two operators
        layers.append(to_layer(spec.name, cost, p, optimizer))

    features = last.c_out
    spatial = last.out_size**2
    fc = (
        global_avg_pool(p, batch * features * spatial, spatial)
        + linear(p, batch, classes, features, name="fc")
        + cross_entropy(p, batch, classes, fused=False)
    )
    layers.append(to_layer(f"fc{classes}", fc, p, optimizer))
    return Workload(
        name=NAME,
        layers=tuple(layers),
        parallelism="data",
        description=f"ResNet-50 v1.5, ImageNet {image_size}x{image_size}, {batch} images/NPU",
        source="He et al. CVPR 2016 (table 1); torchvision/NVIDIA resnet50 v1.5",
        batch_per_npu=batch,
        precision=p.name,
        optimizer=optimizer,
    )
