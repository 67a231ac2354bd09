"""FedSGD over the air for model A (§IV-A of the AdaScale paper: Moradi Kalarde et al., *Privacy Enhancement in
Over-the-Air Federated Learning via Adaptive Receive Scaling*), as pure steps and a small stateful engine. Equation
numbers below are the paper's.

One round: every device Poisson-samples its batch with rate q_m = B_m / n_m, clips each sample gradient to norm G
and sends g_m = (1 / B_m) sum_i clip(g_i) (10) (divided by the *expected* batch size, as the paper's accounting
assumes); with channel inversion the server's processed signal is r = (1/M) sum_m g_m + n, n ~ N(0, sigma_n^2 /
(2 eta_t) I_d) (13), and the model moves by w <- w - lambda r (12) (optionally with momentum and weight decay, the
paper's CIFAR setup). A model that diverges stops training (:class:`~otagym.training.engine.Engine`). The receiver
noise is the privacy noise: it is the same sigma_n^2 / (2 eta_t) that gives device m the noise multiplier of
eq. (25), so the env's accounting holds for this training exactly.

Randomness comes only from the ``numpy.random.Generator`` passed in (batches and receiver noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from otagym.training import stacked
from otagym.training.engine import Engine, full_gradient_norm2

__all__ = ["poisson_sample", "clipped_gradient_sum", "clipped_gradient_sum_and_loss", "receiver_noise_std",
           "device_weights", "receiver_noise", "ota_aggregate", "full_gradient_norm2", "UpdateRule", "FedSGD"]


def poisson_sample(rng: np.random.Generator, num_samples: int, rate: float) -> np.ndarray:
    """Indices of a Poisson-sampled batch: each of ``num_samples`` taken independently with probability ``rate``."""
    return np.flatnonzero(rng.random(num_samples) < rate)


def clipped_gradient_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """sum_i clip(grad l(w; x_i, y_i), G) as one flat vector (d,) (the order of ``model.parameters()``): per-sample
    gradients of the cross-entropy, each scaled by min(1, G / ||g_i||). See :func:`clipped_gradient_sum_and_loss`."""
    return clipped_gradient_sum_and_loss(model, x, y, clip_norm)[0]


def clipped_gradient_sum_and_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip_norm: float
                                  ) -> tuple[torch.Tensor, float]:
    """(sum_i clip(g_i, G), sum_i l(w; x_i, y_i)) from one forward pass: the stack of one model of
    :func:`otagym.training.stacked.clipped_gradient_sums` (which chooses the way to the per-sample gradients)."""
    sums, losses = stacked.clipped_gradient_sums(model, stacked.stack_parameters([model]), x.unsqueeze(0),
                                                 y.unsqueeze(0), torch.ones(1, len(y)), clip_norm)
    return sums[0], float(losses.sum())


def receiver_noise_std(noise_power_w: float, receive_scaling: float) -> float:
    """Standard deviation per coordinate of the processed receiver noise, sqrt(sigma_n^2 / (2 eta_t)) (13)."""
    return float(np.sqrt(noise_power_w / (2.0 * receive_scaling)))


def device_weights(batch_sizes: Sequence[float]) -> np.ndarray:
    """1 / (M B_m) (M,): the weight of device m's clipped sum in r = (1/M) sum_m g_m, g_m = sum_i clip(g_i) / B_m
    ((10) and (13))."""
    b = np.asarray(batch_sizes, dtype=float)
    return 1.0 / (len(b) * b)


def receiver_noise(rng: np.random.Generator, dim: int, noise_std: float, dtype: torch.dtype) -> torch.Tensor:
    """N(0, noise_std^2 I_d) (13), drawn from ``rng`` (d standard normals)."""
    return noise_std * torch.from_numpy(rng.standard_normal(dim)).to(dtype)


def ota_aggregate(gradient_sums: torch.Tensor, batch_sizes: Sequence[float], noise_std: float,
                  rng: np.random.Generator) -> torch.Tensor:
    """r = (1/M) sum_m gradient_sums[m] / B_m + N(0, noise_std^2 I_d): eqs. (10) and (13); ``gradient_sums``: (M, d)."""
    weights = torch.as_tensor(device_weights(batch_sizes), dtype=gradient_sums.dtype)
    return weights @ gradient_sums + receiver_noise(rng, gradient_sums.shape[1], noise_std, gradient_sums.dtype)


def _padded(rows: Sequence[np.ndarray], fill: float | bool) -> np.ndarray:
    """``rows`` of different lengths as one array (len(rows), longest), each padded at its end with ``fill``."""
    width = max(len(r) for r in rows)
    return np.stack([np.pad(r, (0, width - len(r)), constant_values=fill) for r in rows])


@dataclass
class RoundMetrics:
    """What one round measured: mean training loss on the sampled batches (before the update) and the realised batch
    sizes."""

    train_loss: float
    batch_sizes: np.ndarray


@dataclass(frozen=True)
class UpdateRule:
    """The model update of §IV-A: per-sample gradients clipped to ``clip_norm`` (G) and a step of ``learning_rate``
    (lambda of (12)), with heavy-ball ``momentum`` and L2 ``weight_decay`` (both 0 in the paper's MNIST setup)."""

    clip_norm: float
    learning_rate: float
    momentum: float = 0.0
    weight_decay: float = 0.0


class FedSGD(Engine):
    """Model A's training fidelity: the update rule of §IV-A on an :class:`~otagym.training.engine.Engine`.

    Args:
        model: a torch module without batch norm (per-sample clipping).
        device_data: per device, ``(x, y)`` tensors of its local dataset (n_m samples).
        batch_sizes: B_m, expected batch size per device (q_m = B_m / n_m).
        update: the clipping norm G, the learning rate lambda of (12), the momentum and the weight decay.
        test_data: ``(x, y)`` of the held-out set for :meth:`evaluate`.
        eval_data: ``(x, y)`` of the devices' data that f(w) and its gradient are evaluated on (None: all of it).
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                 batch_sizes: Sequence[float], update: UpdateRule, *,
                 test_data: tuple[torch.Tensor, torch.Tensor] | None = None,
                 eval_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        if len(batch_sizes) != len(device_data):
            raise ValueError(f"batch_sizes must have one entry per device ({len(device_data)}); got {len(batch_sizes)}")
        super().__init__(model, device_data, test_data, eval_data=eval_data)
        self.batch_sizes = np.asarray(batch_sizes, dtype=float)
        self.rates = self.batch_sizes / np.array([len(y) for _, y in self.device_data])
        if not np.all((self.rates > 0) & (self.rates <= 1)):
            raise ValueError(f"batch_sizes must lie in (0, n_m] (q_m = B_m / n_m in (0, 1]); got q = {self.rates}")
        self.clip_norm, self.learning_rate = float(update.clip_norm), float(update.learning_rate)
        self.momentum, self.weight_decay = float(update.momentum), float(update.weight_decay)
        self._velocity = torch.zeros(self.dim)
        self._last = RoundMetrics(train_loss=float("nan"), batch_sizes=np.zeros(0))

    def round(self, rng: np.random.Generator, receive_scaling: float, noise_power_w: float) -> RoundMetrics:
        """One FedSGD round over the air with receive scaling eta_t (``receive_scaling``) and receiver noise power
        sigma_n^2 (``noise_power_w``): (10), (13), (12). The list of one of :meth:`round_all`."""
        FedSGD.round_all([self], rng=[rng], receive_scaling=[receive_scaling], noise_power_w=[noise_power_w])
        return self._last

    @classmethod
    def round_all(cls, engines: Sequence["FedSGD"], *, rng: Sequence[np.random.Generator],
                  receive_scaling: Sequence[float], noise_power_w: Sequence[float]) -> np.ndarray:
        """:meth:`round` of each of ``engines`` (one :meth:`~otagym.training.Engine.groups` list; one generator,
        eta_t and sigma_n^2 per engine), their models' per-sample gradients computed as one stack
        (:func:`otagym.training.stacked.clipped_gradient_sums`). Each engine draws from its own generator exactly
        what its round alone draws (its devices' Poisson batches in device order, then the receiver noise), so its
        numbers do not depend on the engines beside it. Returns each engine's :attr:`RoundMetrics.train_loss` (E,)."""
        params = cls._stack(engines)
        live = [j for j, e in enumerate(engines) if not e.diverged]
        if live:
            first = engines[0]
            index, weight, sizes = zip(*(engines[j]._draw_batches(rng[j]) for j in live))
            idx = torch.from_numpy(_padded(index, 0))
            real = torch.from_numpy(_padded([np.ones(len(i), bool) for i in index], False))
            sums, losses = stacked.clipped_gradient_sums(
                first.model, {k: v[live] for k, v in params.items()}, first._all_x[idx], first._all_y[idx],
                torch.from_numpy(_padded(weight, 0.0)).to(first._all_x.dtype),
                torch.tensor([engines[j].clip_norm for j in live]))
            for row, j in enumerate(live):
                e = engines[j]
                train_loss = float(losses[row][real[row]].sum()) / max(int(sizes[row].sum()), 1)
                if not e._checkpoint(train_loss):
                    continue
                noise_std = receiver_noise_std(noise_power_w[j], receive_scaling[j])
                e._update(sums[row] + receiver_noise(rng[j], e.dim, noise_std, sums.dtype))
                e._last = RoundMetrics(train_loss=train_loss, batch_sizes=sizes[row])
        return np.array([e._last.train_loss for e in engines])

    def _draw_batches(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This round's Poisson batches, device by device from ``rng``: (indices into every local sample, each
        sample's weight 1 / (M B_m) of its device (:func:`device_weights`), realised batch sizes (M,))."""
        starts = np.cumsum([0] + [len(y) for _, y in self.device_data[:-1]])
        picks = [start + poisson_sample(rng, len(y), q)
                 for start, (_, y), q in zip(starts, self.device_data, self.rates)]
        sizes = np.array([len(p) for p in picks])
        return np.concatenate(picks), np.repeat(device_weights(self.batch_sizes), sizes), sizes

    def _update(self, r: torch.Tensor) -> None:
        """w <- w - lambda v, v <- momentum v + r + weight_decay w: (12) with heavy-ball momentum and weight decay."""
        w = self.weights()
        self._velocity = self.momentum * self._velocity + r + self.weight_decay * w
        self._apply(w - self.learning_rate * self._velocity)
