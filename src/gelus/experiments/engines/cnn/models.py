"""The paper's two CIFAR networks: the shallow all-convolutional net and the wide ResNet.

Both follow the released Lasagne code of the paper (hendrycks/GELUs ``all_convnet.py`` and
``SGDR_WRNs_gelu.py``) layer for layer; where that code departs from the usual form of the
architecture, the docstring says so. Activations arrive as factories of fresh modules
(``ActivationSpec.build`` of :mod:`gelus.experiments.activation_spec`), one module per place it
is used.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

__all__ = ["AllConvNet", "GaussianNoise", "WideResNet", "WideResNetBlock"]

# Lasagne's BatchNormLayer: epsilon 1e-4, running averages with alpha 0.1 (torch's momentum).
LASAGNE_BN_EPS = 1e-4


class GaussianNoise(nn.Module):
    """Adds N(0, std²) noise to the input in training mode; the identity in eval mode."""

    def __init__(self, std: float) -> None:
        super().__init__()
        self.std = std

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.std == 0:
            return x
        return x + self.std * torch.randn_like(x)

    def extra_repr(self) -> str:
        return f"std={self.std}"


def _conv_bn_act(
    in_channels: int, out_channels: int, kernel_size: int, padding: int, act: nn.Module, eps: float
) -> nn.Sequential:
    # Lasagne's batch_norm() helper drops the layer's bias (BN's shift replaces it).
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=False),
        nn.BatchNorm2d(out_channels, eps=eps),
        act,
    )


class AllConvNet(nn.Module):
    """Salimans & Kingma (2016)'s CIFAR-10 net, as the paper's ``all_convnet.py`` builds it.

    input [B, 3, H, W] → Gaussian noise σ (training only)
    → 3 × [conv3×3 w₁, pad 1] → maxpool 2 → dropout
    → 3 × [conv3×3 w₂, pad 1] → maxpool 2 → dropout
    → conv3×3 w₂ (valid) → conv1×1 w₂ → conv1×1 w₂ → global average pool → dense → BN → logits.

    Every conv is conv (no bias) → BatchNorm → activation. The logits are batch-normalised too, as
    in the released code (``batch_norm(DenseLayer(..., nonlinearity=None))``). Weights are
    Glorot-uniform (Lasagne's default, gain 1, independent of the activation); with BN after every
    layer the initial scale does not matter. H = W = 32 gives a 6×6 map before pooling; any
    H, W ≥ 12 divisible by 4 works (small images keep tests fast).
    """

    def __init__(
        self,
        num_classes: int = 10,
        widths: tuple[int, int] = (96, 192),
        activation: Callable[[], nn.Module] = nn.ReLU,
        noise_std: float = 0.15,
        dropout: float = 0.5,
        bn_eps: float = LASAGNE_BN_EPS,
        logit_batchnorm: bool = True,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        w1, w2 = widths
        layers: list[nn.Module] = [GaussianNoise(noise_std)]
        for c_in, c_out in ((in_channels, w1), (w1, w1), (w1, w1)):
            layers.append(_conv_bn_act(c_in, c_out, 3, 1, activation(), bn_eps))
        layers += [nn.MaxPool2d(2), nn.Dropout(dropout)]
        for c_in, c_out in ((w1, w2), (w2, w2), (w2, w2)):
            layers.append(_conv_bn_act(c_in, c_out, 3, 1, activation(), bn_eps))
        layers += [nn.MaxPool2d(2), nn.Dropout(dropout)]
        layers.append(_conv_bn_act(w2, w2, 3, 0, activation(), bn_eps))  # valid: 8×8 → 6×6
        layers.append(_conv_bn_act(w2, w2, 1, 0, activation(), bn_eps))  # network-in-network
        layers.append(_conv_bn_act(w2, w2, 1, 0, activation(), bn_eps))
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(w2, num_classes, bias=not logit_batchnorm)
        self.logit_norm = (
            nn.BatchNorm1d(num_classes, eps=bn_eps) if logit_batchnorm else nn.Identity()
        )
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.logit_norm(self.classifier(self.features(x)))  # [B, num_classes]


class WideResNetBlock(nn.Module):
    """The paper's residual block (``SGDR_WRNs_gelu.py::residual_block``), not the usual pre-activation one:

    out = BN(act(conv₂(dropout(act(conv₁(x)))))) + shortcut(x)

    conv₁ is 3×3 with stride 1 or 2, conv₂ 3×3; both have a bias. The shortcut of a stage's first
    block is a 1×1 projection without bias (with that block's stride, "option B"), the identity
    elsewhere. The projection keeps Lasagne's default Glorot-uniform init; the 3×3 convs get
    He-normal init with the activation's gain (set by ``WideResNet``).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        stride: int,
        project: bool,
        activation: Callable[[], nn.Module],
        dropout: float,
        bn_eps: float,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1)
        self.act1 = activation()
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.act2 = activation()
        self.bn = nn.BatchNorm2d(out_channels, eps=bn_eps)
        if project:
            self.shortcut: nn.Module = nn.Conv2d(in_channels, out_channels, 1, stride, bias=False)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        h = self.dropout(self.act1(self.conv1(x)))
        return self.bn(self.act2(self.conv2(h))) + self.shortcut(x)


class WideResNet(nn.Module):
    """WRN-(6n+4)-k as in the paper's ``SGDR_WRNs_gelu.py``; n = 6, widths (16, 64, 128, 256) is WRN-40-4.

    stem: conv3×3 w₀ (no bias) → BN → act → BN (the released code normalises twice)
    → n blocks of width w₁ (stride 1) → n blocks of w₂ (first stride 2) → n blocks of w₃ (first stride 2)
    → BN → act → global average pool → dense.

    Init: He-normal, std = gain / √fan_in, for the stem and block 3×3 convs, with ``gain`` the
    activation's own gain (the released code used ReLU's √2 for every activation); gain 1 for the
    dense layer; zero biases.
    """

    def __init__(
        self,
        num_classes: int = 100,
        blocks_per_stage: int = 6,
        widths: tuple[int, int, int, int] = (16, 64, 128, 256),
        activation: Callable[[], nn.Module] = nn.ReLU,
        init_gain: float = math.sqrt(2.0),
        dropout: float = 0.3,
        bn_eps: float = LASAGNE_BN_EPS,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        w0, *stage_widths = widths
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, w0, 3, padding=1, bias=False),
            nn.BatchNorm2d(w0, eps=bn_eps),
            activation(),
            nn.BatchNorm2d(w0, eps=bn_eps),
        )
        blocks: list[nn.Module] = []
        c_in = w0
        for stage, width in enumerate(stage_widths):
            for i in range(blocks_per_stage):
                stride = 2 if stage > 0 and i == 0 else 1
                block = WideResNetBlock(c_in, width, stride, i == 0, activation, dropout, bn_eps)
                blocks.append(block)
                c_in = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.BatchNorm2d(c_in, eps=bn_eps), activation(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.classifier = nn.Linear(c_in, num_classes)

        he_convs = [self.stem[0]] + [c for b in blocks for c in (b.conv1, b.conv2)]
        for conv in he_convs:
            nn.init.normal_(conv.weight, std=init_gain / math.sqrt(conv.weight[0].numel()))
            if conv.bias is not None:
                nn.init.zeros_(conv.bias)
        for block in blocks:
            if isinstance(block.shortcut, nn.Conv2d):
                nn.init.xavier_uniform_(block.shortcut.weight)
        nn.init.normal_(self.classifier.weight, std=1.0 / math.sqrt(c_in))
        nn.init.zeros_(self.classifier.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.head(self.blocks(self.stem(x))))  # [B, num_classes]
