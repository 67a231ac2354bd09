"""Model B's training fidelity: OTA-FL with client-driven power balancing (Algorithm 1 of Kim, Seo & Choi,
*Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power Balancing*; equation numbers below are the
paper's).

One round: each reliable client (h_k,t >= h_th, eq. (6)) starts from the global model theta_t, runs L local steps of
gradient descent on its own data and forms its update g_k,t = theta_k,t,L - theta_t (Algorithm 1), clipped to the norm
bound W that the scenario assumes (``grad_bound``; the paper bounds ||g_k,t|| <= W, clipping makes it so). The clients
transmit as (10)/(14) with the powers of :func:`otagym.schemes.cdpb.formulas.round_powers` (the artificial noise fills
the power left for ||g|| = W, so no client exceeds P whatever its update's norm), the server receives y_t (12)/(16) and
estimates g_hat_t = y_t / (sqrt(rho) K_t) (18) (:func:`otagym.schemes.cdpb.formulas.aggregate_over_the_air`, the same
function the tests check against (13)/(17)), and the global model moves by theta_t+1 = theta_t + g_hat_t: Algorithm 1's
update, whose local learning rate is inside g_k,t. A round without reliable clients leaves the model where it is.

Randomness comes only from the ``numpy.random.Generator`` passed in (artificial and receiver noise).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from otagym.schemes.cdpb.formulas import RoundPowers, aggregate_over_the_air
from otagym.schemes.cdpb.scenario import CDPBScenario
from otagym.training import stacked
from otagym.training.engine import Engine

__all__ = ["CDPBTraining", "clip_to_norm"]


def clip_to_norm(update: torch.Tensor, bound: float) -> torch.Tensor:
    """``update`` scaled by min(1, W / ||update||): its norm is at most W (``bound``); rows (..., d) each on their
    own."""
    return update * torch.clamp(bound / (update.norm(dim=-1, keepdim=True) + 1e-12), max=1.0)


class CDPBTraining(Engine):
    """The model and the clients' data of model B's training fidelity (Algorithm 1).

    Args:
        model: a torch module without batch norm.
        device_data: per client, ``(x, y)`` tensors of its local dataset.
        grad_bound: W, the norm every transmitted update is clipped to.
        local_steps: L, full-batch gradient steps per round on the client's data.
        learning_rate: the local step size.
        test_data: ``(x, y)`` of the held-out set.
        eval_data: ``(x, y)`` of the clients' data that f(w) and its gradient are evaluated on (None: all of it).
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]], grad_bound: float,
                 local_steps: int, learning_rate: float, *, test_data: tuple[torch.Tensor, torch.Tensor] | None = None,
                 eval_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        super().__init__(model, device_data, test_data, eval_data=eval_data)
        self.grad_bound, self.local_steps = float(grad_bound), int(local_steps)
        self.learning_rate = float(learning_rate)
        self._starts = np.cumsum([0] + [len(y) for _, y in self.device_data[:-1]])
        self._setup += (self.local_steps, self.learning_rate)  # engines together share the local training

    def local_update(self, client: int, theta: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(g_k = theta_k,L - theta, the client's mean loss at theta) after L full-batch gradient steps from
        ``theta`` (d,) on client ``client``'s data; g_k is not clipped here."""
        names = [k for k, _ in self.model.named_parameters()]
        shapes = [p.shape for p in self.model.parameters()]
        params = {k: v.reshape(1, *s) for k, v, s in zip(names, torch.split(theta, [s.numel() for s in shapes]),
                                                           shapes)}
        x, y, mask = self._client_batches([client])
        update, loss = stacked.local_steps(self.model, params, x, y, mask, self.local_steps, self.learning_rate)
        return update[0], float(loss[0])

    def _client_batches(self, clients: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The local data of ``clients`` padded to the largest: x (P, n, *sample), y (P, n), real-sample mask."""
        sizes = [len(self.device_data[k][1]) for k in clients]
        width = max(sizes)
        index = torch.from_numpy(np.stack([self._starts[k] + np.minimum(np.arange(width), n - 1)
                                           for k, n in zip(clients, sizes)]))
        mask = torch.arange(width) < torch.tensor(sizes)[:, None]
        return self._all_x[index], self._all_y[index], mask

    def round(self, rng: np.random.Generator, scenario: CDPBScenario, rho: float, gains: np.ndarray,
              powers: RoundPowers) -> float:
        """One round of Algorithm 1 with power-balancing parameter ``rho``, the clients' power gains (K,) and the
        round's powers (:func:`otagym.schemes.cdpb.formulas.round_powers`, one env); returns the mean training loss
        of the reliable clients at theta_t (that of every client's data when none is reliable). The list of one of
        :meth:`round_all`."""
        return float(CDPBTraining.round_all([self], rng=[rng], scenario=[scenario], rho=[rho], gains=[gains],
                                            powers=[powers])[0])

    @classmethod
    def round_all(cls, engines: Sequence["CDPBTraining"], *, rng: Sequence[np.random.Generator],
                  scenario: Sequence[CDPBScenario], rho: Sequence[float], gains: Sequence[np.ndarray],
                  powers: Sequence[RoundPowers]) -> np.ndarray:
        """:meth:`round` of each of ``engines`` (one :meth:`~otagym.training.Engine.groups` list; one value of each
        argument per engine): the local updates of every reliable client of every engine as one stack
        (:func:`otagym.training.stacked.local_steps`), then each engine's over-the-air aggregate from its own
        generator. Returns the training losses (E,)."""
        params = cls._stack(engines)
        pairs = [(j, int(k)) for j, e in enumerate(engines) if not e.diverged
                 for k in np.flatnonzero(powers[j].reliable)]
        losses = np.full(len(engines), np.nan)
        idle = sorted(set(range(len(engines))) - {j for j, _ in pairs})  # diverged, or no reliable client
        if idle:
            losses[idle] = cls.train_loss_all([engines[j] for j in idle])
        if not pairs:
            return losses
        first = engines[0]
        env = torch.tensor([j for j, _ in pairs])
        x, y, mask = first._client_batches([k for _, k in pairs])
        updates, client_loss = stacked.local_steps(first.model, {k: v[env] for k, v in params.items()}, x, y, mask,
                                                   first.local_steps, first.learning_rate)
        sizes = mask.sum(dim=1).double().numpy()
        client_loss = client_loss.double().numpy()
        for j in sorted({j for j, _ in pairs}):
            e, rows = engines[j], np.flatnonzero(env.numpy() == j)
            clients = [pairs[r][1] for r in rows]
            losses[j] = float((client_loss[rows] * sizes[rows]).sum() / sizes[rows].sum())
            theta = e.weights()
            if not e._checkpoint(losses[j]):
                continue
            clipped = np.zeros((len(e.device_data), theta.numel()))
            clipped[clients] = clip_to_norm(updates[rows], e.grad_bound).double().numpy()
            _, g_hat = aggregate_over_the_air(scenario[j], rho[j], gains[j], clipped, powers[j], rng[j])
            e._apply(theta + torch.from_numpy(g_hat).to(theta.dtype))
        return losses
