"""A federation: the devices' data, the test data and the model to train, built once per environment."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from otagym.datasets import data_folder
from otagym.training.data import digits_dataset, load_cifar10, load_mnist, partition
from otagym.training.fedsgd import FedSGD, UpdateRule
from otagym.training.models import CifarResNet, DigitsCNN, MnistCNN, num_parameters
from otagym.validation import Integer, OneOf

__all__ = ["Federation", "DATASETS", "LOADERS", "make_federation"]


@dataclass
class Federation:
    """Per-device ``(x, y)`` data, the held-out ``(x, y)`` test data, a factory of fresh models, and the ``(x, y)``
    of the devices' data that evaluations measure f(w) and ||grad f(w)||^2 on (None: all of it)."""

    device_data: list[tuple[torch.Tensor, torch.Tensor]]
    test_data: tuple[torch.Tensor, torch.Tensor]
    make_model: Callable[[], nn.Module]
    eval_data: tuple[torch.Tensor, torch.Tensor] | None = None

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
        return FedSGD(self.fresh_model(rng), self.device_data, batch_sizes,
                      UpdateRule(clip_norm, learning_rate, momentum, weight_decay), test_data=self.test_data,
                      eval_data=self.eval_data)


#: The datasets of the training fidelity (:data:`otagym.datasets.DATASET_NAMES`) and their models: scikit-learn's 8x8
#: digits (embedded) with :class:`DigitsCNN`, MNIST and Fashion-MNIST (the same 28x28 greyscale format) with the
#: AdaScale paper's :class:`MnistCNN`, CIFAR-10 with :class:`CifarResNet`.
DATASETS = {"digits": DigitsCNN, "mnist": MnistCNN, "fashion-mnist": MnistCNN, "cifar10": CifarResNet}
#: The reader of each dataset's files (the digits are embedded: :func:`digits_dataset`).
LOADERS = {"mnist": load_mnist, "fashion-mnist": load_mnist, "cifar10": load_cifar10}


def make_federation(dataset: str, num_devices: int, rng: np.random.Generator, *, split: str = "iid",
                    data_dir: str | os.PathLike | None = None, train_samples: int | None = None,
                    eval_samples: int | None = None) -> Federation:
    """``dataset``'s training split over ``num_devices`` devices (:func:`partition`), its test split and its model
    (:data:`DATASETS`). ``"digits"`` is embedded (an 80/20 split drawn with ``rng``); the others read their standard
    files (:data:`LOADERS`; nothing is downloaded) from the folder :func:`otagym.datasets.data_folder` gives:
    ``data_dir``, or for ``"fashion-mnist"`` where Debian's ``dataset-fashion-mnist`` installs it.

    ``train_samples``: train on that many samples of the training split, drawn with ``rng`` (None: all of them).
    ``eval_samples``: evaluate on at most that many samples, drawn with ``rng``: of the test split (test loss and
    accuracy) and of the devices' pooled data (f(w) and ||grad f(w)||^2); None: all of them."""
    dataset = OneOf(tuple(DATASETS))("dataset", dataset)
    train_samples = Integer(1, optional=True)("train_samples", train_samples)
    eval_samples = Integer(1, optional=True)("eval_samples", eval_samples)
    folder = data_folder(dataset, data_dir)
    x, y, x_test, y_test = digits_dataset(rng) if folder is None else _load(dataset, folder, _stamp(folder))
    if train_samples is not None:  # at least one sample per device
        keep = _subset(rng, len(y), Integer(num_devices, len(y))("train_samples", train_samples))
        x, y = x[keep], y[keep]
    parts = partition(y.numpy(), num_devices, rng, split=split)
    device_data = [(x[p], y[p]) for p in parts]
    if eval_samples is None:
        return Federation(device_data, (x_test, y_test), DATASETS[dataset])
    test = _subset(rng, len(y_test), min(eval_samples, len(y_test)))
    own = _subset(rng, len(y), min(eval_samples, len(y)))  # the devices' data is all of (x, y), split
    return Federation(device_data, (x_test[test], y_test[test]), DATASETS[dataset], (x[own], y[own]))


@functools.lru_cache(maxsize=2)
def _load(dataset: str, folder: str | os.PathLike, stamp: tuple) -> tuple[torch.Tensor, ...]:
    """``dataset``'s files in ``folder`` read once per process while they stay as they were (``stamp``): a
    comparison's cells each build a federation, and reading Fashion-MNIST takes about a second."""
    return LOADERS[dataset](folder)


def _stamp(folder: str | os.PathLike) -> tuple:
    """The names, sizes and modification times of the files in ``folder`` (and one level below)."""
    files = sorted(p for p in (*Path(folder).glob("*"), *Path(folder).glob("*/*")) if p.is_file())
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


def _subset(rng: np.random.Generator, size: int, count: int) -> torch.Tensor:
    """``count`` (<= ``size``) distinct indices of ``range(size)`` drawn with ``rng``, in ascending order."""
    return torch.from_numpy(np.sort(rng.choice(size, count, replace=False)))
