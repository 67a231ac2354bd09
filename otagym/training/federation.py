"""A federation: the devices' data, the test data and the model to train, built once per environment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from otagym.datasets import DATASET_NAMES
from otagym.training.data import digits_dataset, load_cifar10, load_mnist, partition
from otagym.training.fedsgd import FedSGD
from otagym.training.models import CifarResNet, DigitsCNN, MnistCNN, num_parameters
from otagym.validation import OneOf

__all__ = ["Federation", "DATASETS", "make_federation"]


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

    def fresh_model(self, rng: np.random.Generator) -> nn.Module:
        """A new model whose initial weights are drawn from ``rng`` (torch's global generator is left as it was)."""
        with torch.random.fork_rng():
            torch.manual_seed(int(rng.integers(2**63 - 1)))
            return self.make_model()

    def engine(self, rng: np.random.Generator, batch_sizes, clip_norm: float, learning_rate: float, *,
               momentum: float = 0.0, weight_decay: float = 0.0) -> FedSGD:
        """Model A's :class:`FedSGD` on :meth:`fresh_model`."""
        return FedSGD(self.fresh_model(rng), self.device_data, batch_sizes, clip_norm, learning_rate,
                      momentum=momentum, weight_decay=weight_decay, test_data=self.test_data)


#: The datasets of the training fidelity and their models: scikit-learn's 8x8 digits (embedded) with
#: :class:`DigitsCNN`, MNIST with the paper's :class:`MnistCNN`, CIFAR-10 with :class:`CifarResNet`.
DATASETS = dict(zip(DATASET_NAMES, (DigitsCNN, MnistCNN, CifarResNet)))


def make_federation(dataset: str, num_devices: int, rng: np.random.Generator, *, split: str = "iid",
                    data_dir: str | None = None) -> Federation:
    """``dataset``'s training split over ``num_devices`` devices (:func:`partition`), its test split and its model
    (:data:`DATASETS`). ``"digits"`` is embedded (an 80/20 split drawn with ``rng``); ``"mnist"`` and ``"cifar10"``
    read their standard files from ``data_dir`` (:func:`load_mnist`, :func:`load_cifar10`; nothing is downloaded)."""
    dataset = OneOf(tuple(DATASETS))("dataset", dataset)
    if dataset == "digits":
        x, y, x_test, y_test = digits_dataset(rng)
    elif data_dir is None:
        raise ValueError(f"data_dir must name the folder of the {dataset} files with dataset={dataset!r} (nothing is "
                         "downloaded); got None")
    else:
        x, y, x_test, y_test = (load_mnist if dataset == "mnist" else load_cifar10)(data_dir)
    parts = partition(y.numpy(), num_devices, rng, split=split)
    return Federation([(x[p], y[p]) for p in parts], (x_test, y_test), DATASETS[dataset])

