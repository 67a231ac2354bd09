"""What every scheme's training engine shares: the model and the devices' data, the metrics the env reports
(training loss, test loss and accuracy, ||grad f(w)||^2) and the divergence guard.

A scheme's engine (:class:`~otagym.training.fedsgd.FedSGD` for model A, :class:`~otagym.training.cdpb.CDPBTraining`
for model B) plays its round and moves the weights with :meth:`Engine._apply`; the rest is here, once.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["Engine", "mean_loss_and_accuracy", "full_gradient_norm2"]


class Engine:
    """A model, its devices' local data and its held-out test data.

    A model that diverges (non-finite loss or weights: noise far above the signal) is put back at its last weights
    of finite training loss and trains no more (:attr:`diverged`); its metrics stay finite.

    Args:
        model: a torch module without batch norm (per-sample or per-client clipping).
        device_data: per device, ``(x, y)`` tensors of its local dataset (n_m samples).
        test_data: ``(x, y)`` of the held-out set for :meth:`evaluate`.
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                 test_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.model = model
        self.device_data = list(device_data)
        self.test_data = test_data
        self._all_x = torch.cat([x for x, _ in self.device_data])  # every local sample, for f(w) and its gradient
        self._all_y = torch.cat([y for _, y in self.device_data])
        #: True once the model diverged: it is back at its last weights of finite training loss and trains no more.
        self.diverged = False
        self._good = self.weights().clone()

    @property
    def dim(self) -> int:
        """d, the number of trained parameters."""
        return sum(p.numel() for p in self.model.parameters())

    def weights(self) -> torch.Tensor:
        """w_t as one flat vector (d,), detached."""
        return torch.nn.utils.parameters_to_vector(self.model.parameters()).detach()

    def _checkpoint(self, loss: float) -> bool:
        """Before an update: keep the weights as the last good ones if ``loss`` (at those weights) is finite, else
        diverge. Returns whether the update may go on."""
        if not np.isfinite(loss):
            self._diverge()
            return False
        self._good = self.weights().clone()
        return True

    def _apply(self, w: torch.Tensor) -> None:
        """Set the weights to ``w`` (d,), or diverge if it is not finite."""
        if not torch.isfinite(w).all():
            self._diverge()
            return
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(w, self.model.parameters())

    def _diverge(self) -> None:
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(self._good, self.model.parameters())
        self.diverged = True

    def train_loss(self) -> float:
        """Mean cross-entropy of the current model over every device's data."""
        return mean_loss_and_accuracy(self.model, self._all_x, self._all_y)[0]

    def gradient_norm2(self) -> float:
        """||grad f(w_t)||^2 over every device's data (:func:`full_gradient_norm2`)."""
        value = full_gradient_norm2(self.model, self._all_x, self._all_y)
        if not np.isfinite(value) and not self.diverged:
            self._diverge()
            value = full_gradient_norm2(self.model, self._all_x, self._all_y)
        return value

    def evaluate(self) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) on the test data."""
        if self.test_data is None:
            raise ValueError("evaluate needs test_data")
        loss, accuracy = mean_loss_and_accuracy(self.model, *self.test_data)
        if not np.isfinite(loss) and not self.diverged:
            self._diverge()
            return self.evaluate()
        return loss, accuracy


#: Samples per forward pass when a metric runs over a whole dataset (bounds memory for CIFAR-10 and the ResNet).
CHUNK = 2048


def mean_loss_and_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on ``(x, y)``, in chunks of :data:`CHUNK` samples."""
    loss, correct = 0.0, 0
    with torch.no_grad():
        for xs, ys in zip(torch.split(x, CHUNK), torch.split(y, CHUNK)):
            out = model(xs)
            loss += float(nn.functional.cross_entropy(out, ys, reduction="sum"))
            correct += int((out.argmax(dim=1) == ys).sum())
    return loss / len(y), correct / len(y)


def full_gradient_norm2(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """||grad f(w)||^2 of the global loss f = sum_m (n_m / n) f_m (eq. (2) of the AdaScale paper), the mean
    cross-entropy over every local sample (``x``, ``y``: all devices' data): the true criterion of (16b) that the
    surrogate c_t stands for. Accumulated over chunks of :data:`CHUNK` samples."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for xs, ys in zip(torch.split(x, CHUNK), torch.split(y, CHUNK)):
        grads = torch.autograd.grad(nn.functional.cross_entropy(model(xs), ys, reduction="sum") / len(y), params)
        for acc, g in zip(total, grads):
            acc += g
    return float(sum((g * g).sum() for g in total))
