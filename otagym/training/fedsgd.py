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
from torch.func import functional_call, grad_and_value, vmap

from otagym.training.engine import Engine, full_gradient_norm2

__all__ = ["poisson_sample", "clipped_gradient_sum", "clipped_gradient_sum_and_loss", "receiver_noise_std",
           "ota_aggregate", "full_gradient_norm2", "FedSGD"]


def poisson_sample(rng: np.random.Generator, num_samples: int, rate: float) -> np.ndarray:
    """Indices of a Poisson-sampled batch: each of ``num_samples`` taken independently with probability ``rate``."""
    return np.flatnonzero(rng.random(num_samples) < rate)


def clipped_gradient_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """sum_i clip(grad l(w; x_i, y_i), G) as one flat vector (d,) (the order of ``model.parameters()``): per-sample
    gradients of the cross-entropy, each scaled by min(1, G / ||g_i||). See :func:`clipped_gradient_sum_and_loss`."""
    return clipped_gradient_sum_and_loss(model, x, y, clip_norm)[0]


def clipped_gradient_sum_and_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip_norm: float
                                  ) -> tuple[torch.Tensor, float]:
    """(sum_i clip(g_i, G), sum_i l(w; x_i, y_i)) from one forward pass.

    Two exact ways to the per-sample gradients, chosen by measurement (``benchmarks/bench_training.py``): models whose
    parameters all sit in ``nn.Linear`` and ``nn.Conv2d`` layers (the paper's MNIST CNN, the digits CNN) take
    :func:`_per_sample_by_layers` (one batched backward to the layer outputs, then each layer's per-sample weight
    gradient from its input and output gradient, as Opacus's hooks compute it, without Opacus's wrapper); any other
    model (``CifarResNet``'s GroupNorm) takes ``torch.func`` (vmap of grad).
    """
    d = sum(p.numel() for p in model.parameters())
    if len(y) == 0:
        return torch.zeros(d), 0.0
    by_layers = _per_sample_by_layers if _layers_supported(model) else _per_sample_by_vmap
    flat, loss = by_layers(model, x, y)
    scale = torch.clamp(clip_norm / (flat.norm(dim=1) + 1e-12), max=1.0)
    return scale @ flat, loss


def _param_layers(model: nn.Module) -> list[nn.Module]:
    """The modules that own parameters, in the order of ``model.parameters()``."""
    return [m for m in model.modules() if next(m.parameters(recurse=False), None) is not None]


def _layers_supported(model: nn.Module) -> bool:
    return all((type(m) is nn.Linear or (type(m) is nn.Conv2d and m.groups == 1 and m.padding_mode == "zeros"
                                         and not isinstance(m.padding, str)))
               and all(p.requires_grad for p in m.parameters(recurse=False)) for m in _param_layers(model))


def _per_sample_by_layers(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-sample gradients (B, d) of a model of Linear and Conv2d layers, and the summed loss: the layers' inputs
    a_i and output gradients delta_i of sum_i l_i from one forward and one backward; Linear: g_i = delta_i a_i^T
    (summed over any middle axes), Conv2d: g_i = delta_i unfold(a_i)^T; biases: delta_i summed over positions."""
    layers = _param_layers(model)
    inputs: dict[nn.Module, torch.Tensor] = {}
    outputs: dict[nn.Module, torch.Tensor] = {}

    def keep(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        inputs[module], outputs[module] = args[0].detach(), out

    hooks = [m.register_forward_hook(keep) for m in layers]
    try:
        with torch.enable_grad():
            loss = nn.functional.cross_entropy(model(x), y, reduction="sum")
            deltas = torch.autograd.grad(loss, [outputs[m] for m in layers])
    finally:
        for h in hooks:
            h.remove()
    b, parts = len(y), []
    for m, delta in zip(layers, deltas):
        a = inputs[m]
        if isinstance(m, nn.Conv2d):
            a = nn.functional.unfold(a, m.kernel_size, dilation=m.dilation, padding=m.padding, stride=m.stride)
            delta = delta.reshape(b, delta.shape[1], -1)  # (B, out, positions)
            parts.append(torch.einsum("bol,bcl->boc", delta, a).reshape(b, -1))
            if m.bias is not None:
                parts.append(delta.sum(dim=2))
        else:
            a, delta = a.reshape(b, -1, a.shape[-1]), delta.reshape(b, -1, delta.shape[-1])
            parts.append(torch.einsum("bso,bsi->boi", delta, a).reshape(b, -1))
            if m.bias is not None:
                parts.append(delta.sum(dim=1))
    return torch.cat(parts, dim=1), float(loss.detach())


def _per_sample_by_vmap(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-sample gradients (B, d) and the summed loss by ``torch.func``: vmap of grad_and_value."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(p: dict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_sample, losses = vmap(grad_and_value(loss), in_dims=(None, 0, 0))(params, x, y)
    return torch.cat([g.reshape(len(y), -1) for g in per_sample.values()], dim=1), float(losses.sum())


def receiver_noise_std(noise_power_w: float, receive_scaling: float) -> float:
    """Standard deviation per coordinate of the processed receiver noise, sqrt(sigma_n^2 / (2 eta_t)) (13)."""
    return float(np.sqrt(noise_power_w / (2.0 * receive_scaling)))


def ota_aggregate(gradient_sums: torch.Tensor, batch_sizes: Sequence[float], noise_std: float,
                  rng: np.random.Generator) -> torch.Tensor:
    """r = (1/M) sum_m gradient_sums[m] / B_m + N(0, noise_std^2 I_d): eqs. (10) and (13); ``gradient_sums``: (M, d)."""
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
            clipped, loss = clipped_gradient_sum_and_loss(self.model, x[idx], y[idx], self.clip_norm)
            sums.append(clipped)
            losses.append(loss)
            sizes.append(len(idx))
        train_loss = sum(losses) / max(sum(sizes), 1)
        if not self._checkpoint(train_loss):
            return self._last
        r = ota_aggregate(torch.stack(sums), self.batch_sizes, receiver_noise_std(noise_power_w, receive_scaling), rng)
        w = self.weights()
        self._velocity = self.momentum * self._velocity + r + self.weight_decay * w
        self._apply(w - self.learning_rate * self._velocity)
        self._last = RoundMetrics(train_loss=train_loss, batch_sizes=np.array(sizes))
        return self._last


