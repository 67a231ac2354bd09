"""Models of the training fidelity, in plain torch (no torchvision)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MnistCNN", "DigitsCNN", "CifarResNet", "num_parameters"]


def num_parameters(model: nn.Module) -> int:
    """d, the number of trainable parameters (the scenario's ``model_dim``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class MnistCNN(nn.Module):
    """The MNIST CNN of Tramer & Boneh used in §VII of the AdaScale paper, d = 26,010 parameters (28x28 inputs):
    conv 16 8x8/2 pad 3, tanh, maxpool 2/1, conv 32 4x4/2, tanh, maxpool 2/1, fc 32, tanh, fc 10."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 8, stride=2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
            nn.Conv2d(16, 32, 4, stride=2), nn.Tanh(), nn.MaxPool2d(2, 1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class DigitsCNN(nn.Module):
    """A small CNN for scikit-learn's 8x8 digits (1x8x8 inputs, 10 classes), in the same style (tanh, no batch norm,
    which per-sample clipping forbids): conv 16 3x3 pad 1, tanh, maxpool 2, fc 32, tanh, fc 10 (8,714 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                                 nn.Linear(16 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _Block(nn.Module):
    """A basic residual block: conv 3x3, GroupNorm, ReLU, conv 3x3, GroupNorm, plus the input (a 1x1 conv and
    GroupNorm on the shortcut when the shape changes), then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.GroupNorm(GROUPS, cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(GROUPS, cout))
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.GroupNorm(GROUPS, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


#: Groups of every GroupNorm of :class:`CifarResNet` (per-sample normalisation: batch norm would mix the samples
#: whose gradients are clipped one by one).
GROUPS = 8


class CifarResNet(nn.Module):
    """A residual network for CIFAR-10 (3x32x32 inputs, 10 classes) with d = 494,394 parameters, in plain torch: a
    3x3 stem of 32 channels, three stages of basic blocks (32, 72, 144 channels; 2, 2, 1 blocks; stride 2 between
    stages), global average pooling and a linear classifier. GroupNorm replaces batch norm (per-sample clipping)."""

    def __init__(self, widths: tuple[int, int, int] = (32, 72, 144), blocks: tuple[int, int, int] = (2, 2, 1)) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.GroupNorm(GROUPS, widths[0]),
                                   nn.ReLU()]
        cin = widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            for b in range(count):
                layers.append(_Block(cin, width, 2 if stage > 0 and b == 0 else 1))
                cin = width
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(cin, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
