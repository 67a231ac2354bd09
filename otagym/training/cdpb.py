"""Model B's training fidelity: OTA-FL with client-driven power balancing (Algorithm 1 of the CDPB paper, seed 003).

One round: each reliable client (h_k,t >= h_th, eq. (6)) starts from the global model theta_t, runs L local steps of
gradient descent on its own data and forms its update g_k,t = theta_k,t,L - theta_t (Algorithm 1), clipped to the
norm bound W that the scenario assumes (``grad_bound``; the paper bounds ||g_k,t|| <= W, clipping makes it so). The
clients transmit as (10)/(14) with the powers of :func:`otagym.cdpb.round_powers` (the artificial noise fills the
power left for ||g|| = W, so no client exceeds P whatever its update's norm), the server receives y_t (12)/(16) and
estimates g_hat_t = y_t / (sqrt(rho) K_t) (18) (:func:`otagym.cdpb.aggregate_over_the_air`, the same function the
tests check against (13)/(17)), and the global model moves by theta_t+1 = theta_t + g_hat_t: Algorithm 1's update,
whose local learning rate is inside g_k,t. A round without reliable clients leaves the model where it is.

Randomness comes only from the ``numpy.random.Generator`` passed in (artificial and receiver noise).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad_and_value

from otagym.cdpb import CDPBScenario, RoundPowers, aggregate_over_the_air
from otagym.training.engine import Engine

__all__ = ["CDPBTraining", "clip_to_norm"]


def clip_to_norm(update: torch.Tensor, bound: float) -> torch.Tensor:
    """``update`` scaled by min(1, W / ||update||): its norm is at most W (``bound``)."""
    return update * torch.clamp(bound / (update.norm() + 1e-12), max=1.0)


class CDPBTraining(Engine):
    """The model and the clients' data of model B's training fidelity (Algorithm 1).

    Args:
        model: a torch module without batch norm.
        device_data: per client, ``(x, y)`` tensors of its local dataset.
        grad_bound: W, the norm every transmitted update is clipped to.
        local_steps: L, full-batch gradient steps per round on the client's data.
        learning_rate: the local step size.
        test_data: ``(x, y)`` of the held-out set.
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]], grad_bound: float,
                 local_steps: int, learning_rate: float, *, test_data: tuple[torch.Tensor, torch.Tensor] | None = None
                 ) -> None:
        super().__init__(model, device_data, test_data)
        self.grad_bound, self.local_steps = float(grad_bound), int(local_steps)
        self.learning_rate = float(learning_rate)
        self._names = [k for k, _ in model.named_parameters()]
        self._shapes = [p.shape for p in model.parameters()]

    def local_update(self, client: int, theta: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(g_k = theta_k,L - theta, the client's mean loss at theta) after L full-batch gradient steps from
        ``theta`` (d,) on client ``client``'s data; g_k is not clipped here."""
        x, y = self.device_data[client]

        def loss(params: dict) -> torch.Tensor:
            return nn.functional.cross_entropy(functional_call(self.model, params, (x,)), y)

        step = grad_and_value(loss)
        params = dict(zip(self._names, torch.split(theta, [s.numel() for s in self._shapes])))
        params = {k: v.view(s) for (k, v), s in zip(params.items(), self._shapes)}
        first = None
        for _ in range(self.local_steps):
            grads, value = step(params)
            first = float(value) if first is None else first
            params = {k: v - self.learning_rate * grads[k] for k, v in params.items()}
        return torch.cat([v.reshape(-1) for v in params.values()]) - theta, first

    def round(self, rng: np.random.Generator, scenario: CDPBScenario, rho: float, gains: np.ndarray,
              powers: RoundPowers) -> float:
        """One round of Algorithm 1 with power-balancing parameter ``rho``, the clients' power gains (K,) and the
        round's powers (:func:`otagym.cdpb.round_powers`, one env); returns the mean training loss of the reliable
        clients at theta_t (that of every client's data when none is reliable)."""
        if self.diverged:
            return self.train_loss()
        theta = self.weights()
        reliable = np.flatnonzero(powers.reliable)
        if reliable.size == 0:
            return self.train_loss()
        updates = np.zeros((len(self.device_data), theta.numel()))
        loss_sum, count = 0.0, 0
        for k in reliable:
            g, loss = self.local_update(int(k), theta)
            updates[k] = clip_to_norm(g, self.grad_bound).double().numpy()
            n = len(self.device_data[k][1])
            loss_sum, count = loss_sum + loss * n, count + n
        train_loss = loss_sum / count
        if not self._checkpoint(train_loss):
            return train_loss
        _, g_hat = aggregate_over_the_air(scenario, rho, gains, updates, powers, rng)
        self._apply(theta + torch.from_numpy(g_hat).to(theta.dtype))
        return train_loss
