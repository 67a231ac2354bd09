"""FedSGD over the air for model A (§IV-A of the AdaScale paper), as pure steps and a small stateful engine.

One round: every device Poisson-samples its batch with rate q_m = B_m / n_m, clips each sample gradient to norm G
and sends g_m = (1 / B_m) sum_i clip(g_i) (10) (divided by the *expected* batch size, as the paper's accounting
assumes); with channel inversion the server's processed signal is r = (1/M) sum_m g_m + n, n ~ N(0, sigma_n^2 /
(2 eta_t) I_d) (13), and the model moves by w <- w - lambda r (12) (optionally with momentum and weight decay, the
paper's CIFAR setup). A model that diverges stops training (:class:`~otagym.training.engine.Engine`). The receiver
noise is the privacy noise: it is the same sigma_n^2 / (2 eta_t) that gives device m
the noise multiplier of eq. (25), so the env's accounting holds for this training exactly.

Randomness comes only from the ``numpy.random.Generator`` passed in (batches and receiver noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from otagym.training.engine import Engine, full_gradient_norm2

__all__ = ["poisson_sample", "clipped_gradient_sum", "receiver_noise_std", "ota_aggregate", "full_gradient_norm2",
           "FedSGD"]


def poisson_sample(rng: np.random.Generator, num_samples: int, rate: float) -> np.ndarray:
    """Indices of a Poisson-sampled batch: each of ``num_samples`` taken independently with probability ``rate``."""
    return np.flatnonzero(rng.random(num_samples) < rate)


def clipped_gradient_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """sum_i clip(grad l(w; x_i, y_i), G) as one flat vector (d,): per-sample gradients by ``torch.func`` (vmap of
    grad of the cross-entropy), each scaled by min(1, G / ||g_i||)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    d = sum(v.numel() for v in params.values())
    if len(y) == 0:
        return torch.zeros(d)
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(p: dict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    flat = torch.cat([g.reshape(len(y), -1) for g in per_sample.values()], dim=1)
    scale = torch.clamp(clip_norm / (flat.norm(dim=1) + 1e-12), max=1.0)
    return scale @ flat


def receiver_noise_std(noise_power_w: float, receive_scaling: float) -> float:
    """Standard deviation per coordinate of the processed receiver noise, sqrt(sigma_n^2 / (2 eta_t)) (13)."""
    return float(np.sqrt(noise_power_w / (2.0 * receive_scaling)))


def ota_aggregate(gradient_sums: torch.Tensor, batch_sizes: Sequence[float], noise_std: float,
                  rng: np.random.Generator) -> torch.Tensor:
    """r = (1/M) sum_m gradient_sums[m] / B_m + N(0, noise_std^2 I_d): eqs. (10) and (13); ``gradient_sums`` is (M, d)."""
    m = gradient_sums.shape[0]
    b = torch.as_tensor(np.asarray(batch_sizes, dtype=float), dtype=gradient_sums.dtype)
    noise = torch.from_numpy(rng.standard_normal(gradient_sums.shape[1])).to(gradient_sums.dtype)
    return (gradient_sums / b[:, None]).sum(dim=0) / m + noise_std * noise


@dataclass
class RoundMetrics:
    """What one round measured: mean training loss on the sampled batches (before the update) and the realised batch
    sizes."""

    train_loss: float
    batch_sizes: np.ndarray


class FedSGD(Engine):
    """Model A's training fidelity: the update rule of §IV-A on an :class:`~otagym.training.engine.Engine`.

    Args:
        model: a torch module without batch norm (per-sample clipping).
        device_data: per device, ``(x, y)`` tensors of its local dataset (n_m samples).
        batch_sizes: B_m, expected batch size per device (q_m = B_m / n_m).
        clip_norm: G.
        learning_rate: lambda of (12).
        momentum, weight_decay: heavy-ball momentum and L2 weight decay of the update (0 = the paper's MNIST setup).
        test_data: ``(x, y)`` of the held-out set for :meth:`evaluate`.
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                 batch_sizes: Sequence[float], clip_norm: float, learning_rate: float, *, momentum: float = 0.0,
                 weight_decay: float = 0.0, test_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        if len(batch_sizes) != len(device_data):
            raise ValueError(f"batch_sizes must have one entry per device ({len(device_data)}); got {len(batch_sizes)}")
        super().__init__(model, device_data, test_data)
        self.batch_sizes = np.asarray(batch_sizes, dtype=float)
        self.rates = self.batch_sizes / np.array([len(y) for _, y in self.device_data])
        if not np.all((self.rates > 0) & (self.rates <= 1)):
            raise ValueError(f"batch_sizes must lie in (0, n_m] (q_m = B_m / n_m in (0, 1]); got q = {self.rates}")
        self.clip_norm, self.learning_rate = float(clip_norm), float(learning_rate)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self._velocity = torch.zeros(self.dim)
        self._last = RoundMetrics(train_loss=float("nan"), batch_sizes=np.zeros(0))

    def round(self, rng: np.random.Generator, receive_scaling: float, noise_power_w: float) -> RoundMetrics:
        """One FedSGD round over the air with receive scaling eta_t (``receive_scaling``) and receiver noise power
        sigma_n^2 (``noise_power_w``): (10), (13), (12)."""
        if self.diverged:
            return self._last
        sums, losses, sizes = [], [], []
        for (x, y), q in zip(self.device_data, self.rates):
            idx = torch.from_numpy(poisson_sample(rng, len(y), q))
            sums.append(clipped_gradient_sum(self.model, x[idx], y[idx], self.clip_norm))
            sizes.append(len(idx))
            if len(idx):
                with torch.no_grad():
                    losses.append(float(nn.functional.cross_entropy(self.model(x[idx]), y[idx], reduction="sum")))
        train_loss = sum(losses) / max(sum(sizes), 1)
        if not self._checkpoint(train_loss):
            return self._last
        r = ota_aggregate(torch.stack(sums), self.batch_sizes, receiver_noise_std(noise_power_w, receive_scaling), rng)
        w = self.weights()
        self._velocity = self.momentum * self._velocity + r + self.weight_decay * w
        self._apply(w - self.learning_rate * self._velocity)
        self._last = RoundMetrics(train_loss=train_loss, batch_sizes=np.array(sizes))
        return self._last


