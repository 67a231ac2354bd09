"""Data of the training fidelity: scikit-learn's 8x8 digits (embedded, nothing downloaded) split over devices."""

from __future__ import annotations

import numpy as np
import torch

from otagym.validation import Integer, OneOf, Real

__all__ = ["digits_dataset", "partition"]


def digits_dataset(rng: np.random.Generator, test_fraction: float = 0.2
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)`` from scikit-learn's 1,797 handwritten 8x8 digits: images as float32
    (N, 1, 8, 8) scaled to [0, 1], labels int64; a held-out test split of ``test_fraction`` drawn with ``rng``."""
    from sklearn.datasets import load_digits

    test_fraction = Real(0.0, 1.0, low_open=True, high_open=True)("test_fraction", test_fraction)
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(rng.permutation(len(y)))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def partition(labels: np.ndarray | torch.Tensor, num_devices: int, rng: np.random.Generator, *,
              split: str = "iid", classes_per_device: int = 2) -> list[np.ndarray]:
    """Indices of each device's local data.

    ``split="iid"``: a random permutation cut into ``num_devices`` near-equal parts. ``split="classes"``: the paper's
    non-IID split (§VII, CIFAR-10): samples sorted by label and cut into ``num_devices * classes_per_device`` shards,
    each device drawing ``classes_per_device`` of them (McMahan et al.'s pathological split), so a device holds about
    that many classes.
    """
    labels = np.asarray(labels)
    num_devices = Integer(1, len(labels))("num_devices", num_devices)
    split = OneOf(("iid", "classes"))("split", split)
    if split == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), num_devices)]
    classes_per_device = Integer(1, len(labels) // num_devices)("classes_per_device", classes_per_device)
    shards = np.array_split(np.argsort(labels, kind="stable"), num_devices * classes_per_device)
    owner = rng.permutation(len(shards)).reshape(num_devices, classes_per_device)
    return [np.sort(np.concatenate([shards[s] for s in row])) for row in owner]
