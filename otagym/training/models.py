"""Models of the training fidelity, in plain torch (no torchvision)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MnistCNN", "DigitsCNN", "num_parameters"]


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
