"""A federation: the devices' data, the test data and the model to train, built once per environment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from otagym.training.data import digits_dataset, partition
from otagym.training.fedsgd import FedSGD
from otagym.training.models import DigitsCNN, num_parameters

__all__ = ["Federation", "digits_federation"]


@dataclass
class Federation:
    """Per-device ``(x, y)`` data, the held-out ``(x, y)`` test data and a factory of fresh models."""

    device_data: list[tuple[torch.Tensor, torch.Tensor]]
    test_data: tuple[torch.Tensor, torch.Tensor]
    make_model: Callable[[], nn.Module]

    @property
    def dataset_sizes(self) -> tuple[int, ...]:
        """n_m per device."""
        return tuple(len(y) for _, y in self.device_data)

    @property
    def model_dim(self) -> int:
        """d of the model trained."""
        return num_parameters(self.make_model())

    def engine(self, rng: np.random.Generator, batch_sizes, clip_norm: float, learning_rate: float, *,
               momentum: float = 0.0, weight_decay: float = 0.0) -> FedSGD:
        """A :class:`FedSGD` on a fresh model whose initial weights are drawn from ``rng`` (torch's global generator
        is left as it was)."""
        with torch.random.fork_rng():
            torch.manual_seed(int(rng.integers(2**63 - 1)))
            model = self.make_model()
        return FedSGD(model, self.device_data, batch_sizes, clip_norm, learning_rate, momentum=momentum,
                      weight_decay=weight_decay, test_data=self.test_data)


def digits_federation(num_devices: int, rng: np.random.Generator, split: str = "iid") -> Federation:
    """scikit-learn's 8x8 digits (80% train split over ``num_devices`` devices, 20% test) and :class:`DigitsCNN`."""
    x, y, x_test, y_test = digits_dataset(rng)
    parts = partition(y.numpy(), num_devices, rng, split=split)
    return Federation([(x[p], y[p]) for p in parts], (x_test, y_test), DigitsCNN)
